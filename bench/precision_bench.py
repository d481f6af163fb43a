#!/usr/bin/env python3
"""`onnxkit convert --float16 / --bfloat16`, judged by ONNX Runtime 1.30.

For each model and variant (float16; bfloat16 at the model's opset;
bfloat16 with --opset 22, where Conv and pooling take bfloat16): onnxkit
converts it (--no-verify, so that both judgements below see every result),
ORT runs the float32 original and the converted model on the same seeded
inputs (bench/ort_outputs.js, CPU, 1 thread), and `onnxkit compare` runs
both on the reference backend (which computes float16 and bfloat16 ops in
their own precision, where ORT's CPU provider computes float16 ops it lacks
kernels for in float32). The table gives per model and variant: converted
ok, nodes converted / kept / Casts inserted, the file size ratio (converted /
original, goal about 0.5), ORT runs it, the worst output SQNR against
float32 in dB under ORT and under the reference backend (goal >= 40 dB for
float16).

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


def reference_sqnr(onnxkit, a, b, npz):
    res = subprocess.run([onnxkit, "compare", "--a", a, "--b", b, "--input", npz, "--json"],
                         capture_output=True, text=True)
    if res.returncode not in (0, 1):
        return None, (res.stderr.strip() or "failed")[-120:]
    outs = [o for o in json.loads(res.stdout)["outputs"] if o.get("comparable")]
    vals = []
    for o in outs:
        if o["sqnr_db"] is not None:
            vals.append(o["sqnr_db"])
        elif o["max_abs"] == 0 and o["nan_inf_mismatches"] == 0:
            vals.append(float("inf"))  # equal
        else:
            vals.append(float("-inf"))  # NaN or Inf where float32 is finite
    return (min(vals) if vals else None), ""


VARIANTS = [("float16", ["--float16"]), ("bfloat16", ["--bfloat16"]),
            ("bfloat16@22", ["--bfloat16", "--opset", "22"])]


def convert(onnxkit, path, out, flags):
    res = subprocess.run([onnxkit, "convert", path, *flags, "-o", out, "--no-verify", "--json"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        try:
            blockers = json.loads(res.stdout)["blockers"]
            return None, f"{len(blockers)} blocked, e.g. {blockers[0]['node']}: {blockers[0]['reason']}"
        except (ValueError, KeyError, IndexError):
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
    npz = os.path.join(tmp, name + ".npz")
    np.savez(npz, **feeds)
    for target, flags in VARIANTS:
        out = os.path.join(tmp, f"{name}.{target}.onnx")
        report, err = convert(args.onnxkit, path, out, flags)
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
        r["reference_sqnr_db"], r["reference_error"] = reference_sqnr(args.onnxkit, path, out, npz)
        row[target] = r
    return row


def db(s):
    return "" if s is None else ("inf" if s == float("inf") else ("-inf" if s == float("-inf") else f"{s:.1f}"))


def fmt(r):
    if not r.get("converted"):
        return ["no: " + r.get("error", "")[:90], "", "", "", "", ""]
    runs = "yes" if r.get("ort_runs") else "no: " + r.get("ort_error", "").replace("Error: ", "")[:70]
    counts = f"{r['nodes_converted']} / {r['kept']} / {r['casts']}"
    return ["ok", counts, f"{r['ratio']:.3f}", runs, db(r.get("sqnr_db")), db(r.get("reference_sqnr_db"))]


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
    print("| model | variant | converted | nodes conv / kept / Casts | size ratio | ORT runs it | ORT SQNR dB | "
          "reference SQNR dB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['model']} | | {row['error']} ||||||")
            continue
        for target, _ in VARIANTS:
            print("| " + " | ".join([row["model"], target, *fmt(row[target])]) + " |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
