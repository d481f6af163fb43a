#!/usr/bin/env python3
"""`onnxkit convert --float16` with and without the range guard, judged by ONNX Runtime 1.30.

For each model (the light models of the onnx backend data, whose weights
are ConstantOfShape fills that drive activations past float16's 65504, and
the torch exports of bench/models; models not present are skipped):

  1. `onnxkit convert --float16 MODEL -o OUT --json` as a user runs it (the
     range guard on, verification on the reference backend with its default
     seeded random inputs): written or not, nodes kept float32 by the range
     guard (and in all), file size ratio OUT / MODEL, the worst output SQNR
     of the verification against float32 ("nan/inf" when an output holds
     NaN or Inf where float32's does not);
  2. ORT (CPU, 1 thread) runs the float32 original and the written model on
     the bench inputs: all-zero inputs for the light models (the inputs of
     the suite's expected outputs, light_*_output_0.pb), bench/ort_compare.py's
     seeded inputs for the others; the worst output SQNR of the float16 model
     against ORT's float32 outputs and, for the light models, against the
     suite's expected outputs;
  3. the same with --no-range-guard: whether verification passes and its
     SQNR, and ORT's SQNR of the unguarded model (written with --no-verify).

The light models' weights are constant fills, so every class gets the same
logit and their Softmax output is uniform (1/1000) whatever the precision:
an SQNR of inf there only says nothing overflowed. For those models the
input of the final Softmax (the logits) is made a second graph output before
converting (the copy converted is the original plus that output), so that
the verification and ORT columns, the worst over the outputs, measure the
logits.

  ORT_NODE=<onnxruntime-node folder> /usr/bin/python3 bench/float16_compare.py
      [--models light,resnet50,mobilenet_v2,bert_mini,bert_base] [--json-out F]

(`light` is every light model, `light_NAME` one of them.)
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import graph_inputs, make_inputs  # noqa: E402
from precision_bench import ORT_TYPES, db, ort_outputs, sqnr_db  # noqa: E402


def model_paths(args):
    paths = []
    for name in args.models.split(","):
        if name == "light":
            if not os.path.isdir(args.light_dir):
                print(f"light models: {args.light_dir} missing, skipped", file=sys.stderr)
                continue
            for f in sorted(os.listdir(args.light_dir)):
                if f.endswith(".onnx"):
                    paths.append((f[:-5], os.path.join(args.light_dir, f), True))
        elif name.startswith("light_"):
            p = os.path.join(args.light_dir, name + ".onnx")
            if os.path.exists(p):
                paths.append((name, p, True))
            else:
                print(f"{name}: {p} missing, skipped", file=sys.stderr)
        else:
            p = os.path.join(HERE, "models", name + ".onnx")
            if os.path.exists(p):
                paths.append((name, p, False))
            else:
                print(f"{name}: {p} missing (bench/export_torch_models.py), skipped", file=sys.stderr)
    return paths


def convert(onnxkit, path, out, extra):
    res = subprocess.run([onnxkit, "convert", path, "--float16", "-o", out, "--json", *extra],
                         capture_output=True, text=True)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        return {"exit": res.returncode, "error": (res.stderr.strip() or res.stdout.strip())[-200:]}
    r = {"exit": res.returncode, "written": report["written"]}
    p = report.get("precision") or {}
    r["range_kept"] = len(p.get("range_guard", {}).get("nodes", []))
    r["kept"] = sum(p.get("kept", {}).values())
    r["converted"] = p.get("nodes_converted")
    if report["written"]:
        r["ratio"] = os.path.getsize(out) / os.path.getsize(path)
    v = report.get("verification")
    if v:
        worst = None
        for o in v["outputs"]:
            if not o["comparable"]:
                continue
            s = (float("-inf") if o.get("nan_inf_mismatches") else
                 float("inf") if o["sqnr_db"] is None else o["sqnr_db"])
            worst = s if worst is None else min(worst, s)
        r["verify_ok"] = v["ok"]
        r["verify_sqnr"] = worst
    return r


def worst_sqnr(expected, got):
    vals = [sqnr_db(e, g) for e, g in zip(expected, got)]
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def ort_judge(model, spec_path, out_json, expected_sets):
    got, err = ort_outputs(model, spec_path, out_json)
    if got is None:
        return {"ort_runs": False, "ort_error": err}
    values = [g["values"] for g in got if g["dtype"] == "float32"]
    return {"ort_runs": True, **{k: worst_sqnr(e, values) for k, e in expected_sets.items()}}


def with_logits(name, path, tmp):
    """A copy of `path` whose final Softmax's input is a graph output too
    (the path itself when the graph does not end in a Softmax)."""
    model = onnx.load(path)
    last = model.graph.node[-1]
    outputs = {o.name for o in model.graph.output}
    if last.op_type != "Softmax" or last.input[0] in outputs:
        return path
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(last.input[0]))
    model.graph.output[-1].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    copy = os.path.join(tmp, name + ".logits.onnx")
    onnx.save(model, copy)
    return copy


def bench_model(args, name, path, light, tmp):
    suite_pb = os.path.join(os.path.dirname(path), name + "_output_0.pb")
    original_size = os.path.getsize(path)
    if light:
        path = with_logits(name, path, tmp)
    if light:
        feeds = {n: np.zeros(d, np.float32) for n, _, d in graph_inputs(path)}
    else:
        feeds = make_inputs(name, path, seed=1)
    spec = {k: {"dtype": ORT_TYPES[v.dtype], "shape": list(v.shape),
                "values": v.ravel().astype(np.float64 if v.dtype.kind == "f" else np.int64).tolist()}
            for k, v in feeds.items()}
    spec_path = os.path.join(tmp, name + ".json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    row = {"model": name, "inputs": "zeros" if light else "seeded"}
    f32, err = ort_outputs(path, spec_path, os.path.join(tmp, name + ".f32.json"))
    if f32 is None:
        row["error"] = "ORT cannot run the original: " + err
        return row
    expected = {"ort_sqnr": [o["values"] for o in f32 if o["dtype"] == "float32"]}
    if light and os.path.exists(suite_pb):
        expected["suite_sqnr"] = [numpy_helper.to_array(onnx.load_tensor(suite_pb)).ravel().tolist()]
    out = os.path.join(tmp, name + ".f16.onnx")
    row["guarded"] = convert(args.onnxkit, path, out, [])
    if row["guarded"].get("written"):
        row["guarded"]["ratio"] = os.path.getsize(out) / original_size
    if not row["guarded"].get("written"):
        # Judge what --no-verify would have written.
        convert(args.onnxkit, path, out, ["--no-verify"])
    if os.path.exists(out):
        row["guarded"].update(ort_judge(out, spec_path, os.path.join(tmp, name + ".f16.json"), expected))
    raw = os.path.join(tmp, name + ".raw.onnx")
    row["unguarded"] = convert(args.onnxkit, path, os.path.join(tmp, name + ".unused.onnx"), ["--no-range-guard"])
    written = convert(args.onnxkit, path, raw, ["--no-range-guard", "--no-verify"])
    if written.get("written"):
        row["unguarded"].update(ort_judge(raw, spec_path, os.path.join(tmp, name + ".raw.json"), expected))
    for f in (out, raw):
        if os.path.exists(f):
            os.remove(f)
    return row


def fmt_row(row):
    g, u = row.get("guarded", {}), row.get("unguarded", {})
    if "error" in row:
        return f"| {row['model']} | {row['error'][:80]} |||||||||"
    written = "yes" if g.get("written") else f"no (exit {g.get('exit')})"
    kept = f"{g.get('range_kept', '')} ({g.get('kept', '')})"
    ratio = f"{g['ratio']:.3f}" if "ratio" in g else ""
    ort = "yes" if g.get("ort_runs") else ("no" if "ort_runs" in g else "")
    uver = ("pass" if u.get("verify_ok") else "fail") + f" ({db(u.get('verify_sqnr'))})"
    return (f"| {row['model']} | {written} | {kept} | {ratio} | {db(g.get('verify_sqnr'))} | {ort} | "
            f"{db(g.get('ort_sqnr'))} | {db(g.get('suite_sqnr'))} | {uver} | {db(u.get('ort_sqnr'))} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="light,resnet50,mobilenet_v2,bert_mini,bert_base")
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build", "apps", "onnxkit", "onnxkit"))
    ap.add_argument("--light-dir", default=os.path.join(ROOT, "..", "shared", "onnx-backend-data", "light"))
    ap.add_argument("--json-out")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, light in model_paths(args):
            row = bench_model(args, name, path, light, tmp)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print("| model | written | kept by range guard (all kept) | size ratio | verification SQNR dB | ORT runs it | "
          "ORT SQNR dB vs float32 | vs suite expected | --no-range-guard: verification (SQNR) | "
          "--no-range-guard: ORT SQNR |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(fmt_row(row))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
