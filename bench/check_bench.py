#!/usr/bin/python3
"""`onnxkit check` against python3-onnx's onnx.checker.check_model(path, full_check=True).

Same file, same invocation, each tool in a fresh process, alternating; prints
median wall time, peak RSS and the ratios as JSON.

    bench/check_bench.py [MODEL] [--runs N] [--full] [--onnxkit build/apps/onnxkit/onnxkit]

Without MODEL it uses bench/models/bert_base.onnx (exported on first use by
bench/export_torch_models.py; needs python3-torch and python3-torchvision).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ONNX_CHECK = r"""
import sys, time
import onnx
t = time.perf_counter()
onnx.checker.check_model(sys.argv[1], full_check=True)
print(time.perf_counter() - t)
"""


def timed(argv):
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, proc.stdout


def peak_rss(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="run onnxkit check --full (onnx always runs full_check)")
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    args = ap.parse_args()
    model = args.model or os.path.join(HERE, "models", "bert_base.onnx")
    if not os.path.exists(model):
        subprocess.check_call(["/usr/bin/python3", os.path.join(HERE, "export_torch_models.py"), os.path.dirname(model)])
    kit = [args.onnxkit, "check", "-q"] + (["--full"] if args.full else []) + [model]
    py = ["/usr/bin/python3", "-c", ONNX_CHECK, model]
    timed(kit)
    kit_t, py_t, py_inner = [], [], []
    for _ in range(args.runs):
        kit_t.append(timed(kit)[0])
        wall, out = timed(py)
        py_t.append(wall)
        py_inner.append(float(out.decode().strip()))
    size = os.path.getsize(model)
    result = {
        "model": model,
        "file_mb": round(size / 1e6, 1),
        "runs": args.runs,
        "onnxkit_check": " ".join(kit[1:-1]),
        "onnxkit_s_median": round(statistics.median(kit_t), 4),
        "onnx_check_model_s_median": round(statistics.median(py_inner), 4),
        "onnx_process_s_median": round(statistics.median(py_t), 4),
        "speedup_vs_check_model": round(statistics.median(py_inner) / statistics.median(kit_t), 1),
        "onnxkit_peak_rss_mb": round(peak_rss(kit) / 1e6, 1),
        "onnx_peak_rss_mb": round(peak_rss(py) / 1e6, 1),
        "onnxkit_rss_over_file": round(peak_rss(kit) / size, 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
