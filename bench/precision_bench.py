#!/usr/bin/env python3
"""`onnxkit convert --float16 / --bfloat16`, judged by ONNX Runtime 1.30.

For each model: onnxkit converts it (float16, then bfloat16; --no-verify so
that the ORT judgement below is independent of onnxkit's own reference
backend), ORT runs the float32 original and the converted model on the same
seeded inputs (bench/ort_outputs.js, CPU, 1 thread), and the table gives per
model and precision: converted ok, ORT runs it, the output SQNR against
float32 in dB (the worst output; goal >= 40 dB for float16), and the file
size ratio (converted / original, goal about 0.5).

  ORT_NODE=<onnxruntime-node folder> /usr/bin/python3 bench/precision_bench.py
      [--models resnet50,mobilenet_v2,bert_mini,bert_base,light] [--json-out F]

Models: bench/models/*.onnx (bench/export_torch_models.py: random weights)
and the light models of testdata/models/light (onnx's backend-test models
with constant-filled weights).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import make_inputs  # noqa: E402

ORT_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64"}


def model_paths(selection):
    paths = []
    for name in selection:
        if name == "light":
            folder = os.path.join(ROOT, "testdata", "models", "light")
            for f in sorted(os.listdir(folder)):
                if f.endswith(".onnx"):
                    paths.append((f[:-5], os.path.join(folder, f)))
        else:
            p = os.path.join(HERE, "models", name + ".onnx")
            if os.path.exists(p):
                paths.append((name, p))
            else:
                print(f"{name}: {p} missing (bench/export_torch_models.py)", file=sys.stderr)
    return paths


def ort_outputs(model, spec_path, out_path):
    res = subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"), model, spec_path, out_path],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None, res.stderr.strip().splitlines()[-1][:200] if res.stderr.strip() else "failed"
    with open(out_path) as f:
        return json.load(f), ""


def sqnr_db(expected, actual):
    e = np.asarray(expected, np.float64)
    a = np.asarray(actual, np.float64)
    if e.shape != a.shape:
        return None
    if not np.all(np.isfinite(a)):
        return float("-inf")
    noise = np.sum((a - e) ** 2)
    signal = np.sum(e ** 2)
    if noise == 0:
        return float("inf")
    return float(10 * np.log10(signal / noise)) if signal > 0 else float("-inf")


def convert(onnxkit, path, out, flag):
    res = subprocess.run([onnxkit, "convert", path, flag, "-o", out, "--no-verify", "--json"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None, (res.stderr.strip() or res.stdout.strip())[-200:]
    return json.loads(res.stdout), ""


def bench_model(args, name, path, tmp):
    feeds = make_inputs(name, path, seed=1)
    spec = {k: {"dtype": ORT_TYPES[v.dtype], "shape": list(v.shape),
                "values": v.ravel().astype(np.float64 if v.dtype.kind == "f" else np.int64).tolist()}
            for k, v in feeds.items()}
    spec_path = os.path.join(tmp, name + ".json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    expected, err = ort_outputs(path, spec_path, os.path.join(tmp, name + ".f32.out.json"))
    row = {"model": name, "bytes": os.path.getsize(path)}
    if expected is None:
        row["error"] = "ORT cannot run the original: " + err
        return row
    for target in ("float16", "bfloat16"):
        out = os.path.join(tmp, f"{name}.{target}.onnx")
        report, err = convert(args.onnxkit, path, out, "--" + target)
        r = {"converted": report is not None}
        if report is None:
            r["error"] = err
            row[target] = r
            continue
        p = report["precision"]
        r["ratio"] = os.path.getsize(out) / os.path.getsize(path)
        r["nodes_converted"] = p["nodes_converted"]
        r["kept"] = sum(p["kept"].values())
        r["casts"] = p["casts_inserted"]
        got, err = ort_outputs(out, spec_path, os.path.join(tmp, f"{name}.{target}.out.json"))
        r["ort_runs"] = got is not None
        if got is None:
            r["ort_error"] = err
        else:
            values = [sqnr_db(e["values"], g["values"]) for e, g in zip(expected, got)
                      if e["dtype"] == "float32"]
            values = [v for v in values if v is not None]
            r["sqnr_db"] = min(values) if values else None
        row[target] = r
    return row


def fmt(r):
    if not r.get("converted"):
        return "convert failed", "", "", ""
    runs = "yes" if r.get("ort_runs") else "no: " + r.get("ort_error", "")[:60]
    s = r.get("sqnr_db")
    sq = "" if s is None else ("inf" if s == float("inf") else f"{s:.1f}")
    return "ok", runs, sq, f"{r['ratio']:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_mini,bert_base,light")
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build", "apps", "onnxkit", "onnxkit"))
    ap.add_argument("--json-out")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in model_paths(args.models.split(",")):
            row = bench_model(args, name, path, tmp)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print("| model | fp16 converted | ORT runs fp16 | fp16 SQNR dB | fp16 size ratio | bf16 converted | "
          "ORT runs bf16 | bf16 SQNR dB | bf16 size ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['model']} | {row['error']} |||||||")
            continue
        print("| " + " | ".join([row["model"], *fmt(row["float16"]), *fmt(row["bfloat16"])]) + " |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
