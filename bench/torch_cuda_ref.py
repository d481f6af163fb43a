#!/usr/bin/env python3
"""A yardstick for the cuda backend where ONNX Runtime has no CUDA provider: torchvision's
resnet50 and mobilenet_v2 in PyTorch on the same GPU, float16, batch 1, 224x224, channels-first
and channels-last, eager and replayed as a CUDA graph (cudnn.benchmark on). Prints the median of
--runs timed runs for each (the outputs stay on the device; nothing is copied to the host).

  python3 bench/torch_cuda_ref.py [--runs 100] [--models resnet50,mobilenet_v2]
"""
import argparse
import time

import torch
import torchvision


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[runs // 2]


def bench(name, model, runs):
    model = model.eval().cuda().half()
    x = torch.randn(1, 3, 224, 224).cuda().half()
    with torch.no_grad():
        for channels_last in (False, True):
            fmt = torch.channels_last if channels_last else torch.contiguous_format
            m = model.to(memory_format=fmt)
            xi = x.to(memory_format=fmt)
            for _ in range(10):
                m(xi)
            torch.cuda.synchronize()
            eager = median_ms(lambda: m(xi), runs)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    m(xi)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                m(xi)
            replay = median_ms(graph.replay, runs)
            layout = "NHWC" if channels_last else "NCHW"
            print(f"torch {name} fp16 {layout}: eager {eager:.3f} ms, CUDA graph {replay:.3f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device")
    torch.backends.cudnn.benchmark = True
    for name in args.models.split(","):
        bench(name, getattr(torchvision.models, name)(), args.runs)


if __name__ == "__main__":
    main()
