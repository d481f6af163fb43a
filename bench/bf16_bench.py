#!/usr/bin/env python3
"""`onnxkit run --precision bf16` against float32 on the cpu backend, same run.

For each model: the median latency of the cpu backend in float32 and with
its Conv/MatMul/Gemm products in bfloat16 (run --precision bf16), the
speed-up, and the error of the bfloat16 outputs against the float32 ones
(`onnxkit compare --a-backend cpu --b-backend cpu --b-precision bf16`:
worst output SQNR in dB and cosine), on the same seeded inputs. With
ORT_NODE set, ONNX Runtime's float32 latency in the same run as well.

  /usr/bin/python3 bench/bf16_bench.py [--models resnet50,bert_base] [--runs 15] [--threads 1]

Models: as bench/ort_compare.py (bench/models/*.onnx from
bench/export_torch_models.py, light_NAME from the onnx backend data).
The speed-up is bounded by the processor: with AVX512_BF16 (no AMX) a
bfloat16 dot-product instruction does twice the multiply-adds of a float32
FMA, so 2x is the ceiling of the products themselves; with AMX the tiles do
far more, and memory traffic (weights streamed each run) bounds it instead.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import model_paths, run_onnxkit, run_ort, write_inputs, write_ort_spec  # noqa: E402


def compare(binary, model, npz):
    cmd = [binary, "compare", "--a", model, "--a-backend", "cpu", "--b", model, "--b-backend", "cpu",
           "--b-precision", "bf16", "--json"]
    if npz:
        cmd += ["--input", npz]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        return {"error": res.stderr.strip()[-400:]}
    out = json.loads(res.stdout)
    rows = out.get("outputs", [])
    # null: identical outputs (infinite SQNR).
    sqnr = [r["sqnr_db"] if r.get("sqnr_db") is not None else float("inf") for r in rows]
    return {"sqnr_db": min(sqnr) if rows else float("nan"),
            "cosine": min(r["cosine"] if r.get("cosine") is not None else float("nan") for r in rows)
            if rows else float("nan")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,bert_mini")
    ap.add_argument("--light-dir", default=os.path.join(ROOT, "..", "shared", "onnx-backend-data", "light"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    with_ort = "ORT_NODE" in os.environ

    results = {}
    print(f"{'model':22} {'fp32 ms':>9} {'bf16 ms':>9} {'speed-up':>9} {'SQNR dB':>8} {'cosine':>9}" +
          (f" {'ort ms':>9} {'bf16/ort':>9}" if with_ort else "") + f"   (median, {args.threads} thread(s))")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in model_paths(args.models, args.light_dir):
            if not os.path.exists(path):
                print(f"{name:22} missing ({path})")
                continue
            feeds, npz = write_inputs(name, path, tmp)
            row = {"fp32": run_onnxkit(args.onnxkit, path, npz, "cpu", args.runs, args.threads),
                   "bf16": run_onnxkit(args.onnxkit, path, npz, "cpu", args.runs, args.threads, "bf16"),
                   "error": compare(args.onnxkit, path, npz)}
            if with_ort:
                spec_path = os.path.join(tmp, name + ".json")
                write_ort_spec(feeds, spec_path)
                row["ort"] = run_ort(path, spec_path, args.runs, args.threads)
            results[name] = row
            for k, r in row.items():
                if "error" in r and isinstance(r["error"], str):
                    print(f"{name:22} {k}: {r['error']}")

            def med(r):
                return r["latency_ms"]["median"] if "latency_ms" in r else float("nan")

            fp32, bf16 = med(row["fp32"]), med(row["bf16"])
            err = row["error"]
            line = (f"{name:22} {fp32:9.2f} {bf16:9.2f} {fp32 / bf16:9.2f} {err.get('sqnr_db', float('nan')):8.1f} "
                    f"{err.get('cosine', float('nan')):9.6f}")
            if with_ort:
                line += f" {med(row['ort']):9.2f} {bf16 / med(row['ort']):9.2f}"
            print(line, flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
