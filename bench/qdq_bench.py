#!/usr/bin/env python3
"""int8 execution of QDQ models: latency and agreement, same run.

For each model: quantize it with `onnxkit quantize` (seeded random
calibration), then time the cpu backend on the float model, the cpu backend
on the QDQ model and ONNX Runtime 1.30 on the QDQ model (bench/ort_bench.js,
all optimizations on), all at --threads. Agreement on one seeded input:
SQNR (dB) and the largest difference of the cpu backend's and ORT's outputs
against the reference backend's (float) execution of the same QDQ model.

  ORT_NODE=<onnxruntime-node 1.30 folder> /usr/bin/python3 bench/qdq_bench.py --threads 1

Models: bench/models/{resnet50,bert_base}.onnx (bench/export_torch_models.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ort_compare import make_inputs, run_ort  # noqa: E402

SHAPES = {"bert_base": ["input_ids=1x128", "attention_mask=1x128", "token_type_ids=1x128"],
          "bert_mini": ["input_ids=1x128", "attention_mask=1x128", "token_type_ids=1x128"],
          "gpt_tiny": ["ids=1x128"], "llama_tiny": ["ids=1x128"]}


def quantize(binary, model, out, shapes):
    cmd = [binary, "quantize", model, "-o", out, "--allow-random-calibration", "--samples", "8", "--holdout", "1",
           "-q"] + sum([["--shape", s] for s in shapes], [])
    subprocess.run(cmd, check=True, capture_output=True)


def run_onnxkit(binary, model, npz, backend, runs, threads):
    """Latency of `onnxkit run --bench` (no --profile: its per-node timing is not free)."""
    cmd = [binary, "run", model, "--backend", backend, "--bench", str(runs), "--warmup", "3", "--threads",
           str(threads), "--json", "-q", "--input", npz]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-400:]}
    return {"latency_ms": json.loads(res.stdout)["latency_ms"]}


def sqnr(ref, out):
    noise = float(np.sum((ref.astype(np.float64) - out) ** 2)) or 1e-30
    return 10 * np.log10((float(np.sum(ref.astype(np.float64) ** 2)) or 1e-30) / noise)


def onnxkit_outputs(binary, model, npz, backend, folder):
    subprocess.run([binary, "run", model, "--backend", backend, "--input", npz, "--save-outputs", folder, "-q"],
                   check=True)
    outs = []
    k = 0
    while os.path.exists(os.path.join(folder, f"output_{k}.pb")):
        t = onnx.TensorProto()
        with open(os.path.join(folder, f"output_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        outs.append(numpy_helper.to_array(t))
        k += 1
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxkit", default=os.path.join(os.path.dirname(HERE), "build/apps/onnxkit/onnxkit"))
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if "ORT_NODE" not in os.environ:
        sys.exit("set ORT_NODE to the onnxruntime-node 1.30 package folder")
    print(f"{'model':10} {'cpu fp32':>9} {'cpu qdq':>9} {'ort qdq':>9} {'fp32/qdq':>9} {'qdq/ort':>8} "
          f"{'cpu sqnr':>9} {'ort sqnr':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = os.path.join(HERE, "models", name + ".onnx")
            if not os.path.exists(model):
                print(f"{name:10} missing ({model})")
                continue
            qdq = os.path.join(tmp, name + "_qdq.onnx")
            quantize(args.onnxkit, model, qdq, SHAPES.get(name, []))
            feeds = make_inputs(name, model, seed=1)
            npz = os.path.join(tmp, name + ".npz")
            np.savez(npz, **feeds)
            spec = {k: {"dtype": "int64" if v.dtype == np.int64 else "float32", "shape": list(v.shape),
                        "values": v.ravel().tolist()} for k, v in feeds.items()}
            spec_path = os.path.join(tmp, name + ".json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            fp32 = run_onnxkit(args.onnxkit, model, npz, "cpu", args.runs, args.threads)
            cpu = run_onnxkit(args.onnxkit, qdq, npz, "cpu", args.runs, args.threads)
            ort = run_ort(qdq, spec_path, args.runs, args.threads)
            ref_out = onnxkit_outputs(args.onnxkit, qdq, npz, "reference", os.path.join(tmp, name + "_ref"))
            cpu_out = onnxkit_outputs(args.onnxkit, qdq, npz, "cpu", os.path.join(tmp, name + "_cpu"))
            ort_json = os.path.join(tmp, name + "_ort.json")
            subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"), qdq, spec_path, ort_json, "all"], check=True)
            with open(ort_json) as f:
                ort_out = [np.array(o["values"], np.float64).reshape(o["dims"]) for o in json.load(f)]
            med = lambda r: r["latency_ms"]["median"] if "latency_ms" in r else float("nan")  # noqa: E731
            print(f"{name:10} {med(fp32):9.2f} {med(cpu):9.2f} {med(ort):9.2f} {med(fp32) / med(cpu):9.2f} "
                  f"{med(cpu) / med(ort):8.2f} {min(sqnr(r, c) for r, c in zip(ref_out, cpu_out)):9.1f} "
                  f"{min(sqnr(r, o) for r, o in zip(ref_out, ort_out)):9.1f}", flush=True)
            for label, r in (("cpu fp32", fp32), ("cpu qdq", cpu), ("ort qdq", ort)):
                if "error" in r:
                    print(f"  {label}: {r['error']}")


if __name__ == "__main__":
    main()
