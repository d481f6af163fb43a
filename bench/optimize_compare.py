#!/usr/bin/env python3
"""`onnxkit optimize` against ONNX Runtime 1.30's own offline optimizer, same run.

For each model: onnxkit optimize (verified on seeded inputs, wall time and
peak RSS of the process), ORT's 'basic' optimized model (standard ops only;
bench/ort_optimize.js), node counts over all graphs (original, onnxkit, ORT
basic), the optimized model checked by `onnxkit check --full` and by
onnx.checker (full_check; python3-onnx, opset <= 17 only), ORT running
onnxkit's model to the original's ORT outputs (rtol 1e-3, atol 1e-4), and
ORT's latency on the original and on onnxkit's model (medians, 1 thread,
all ORT optimizations on both).

  ORT_NODE=<onnxruntime-node folder> /usr/bin/python3 bench/optimize_compare.py
      [--models resnet50,mobilenet_v2,bert_base,bert_mini,light,simple] [--runs 20] [--json-out F]

Models: bench/models/*.onnx (bench/export_torch_models.py), the light
models in testdata/models/light, and the onnx 1.23 `simple` suite models.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import make_inputs  # noqa: E402


def count_nodes(path):
    model = onnx.load(path, load_external_data=False)

    def walk(graph):
        n = 0
        for node in graph.node:
            n += 1
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    n += walk(a.g)
                for g in a.graphs:
                    n += walk(g)
        return n
    return walk(model.graph) + sum(len(f.node) for f in model.functions)


def opset_of(path):
    model = onnx.load(path, load_external_data=False)
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def ort_outputs(model, spec_path, out_path):
    res = subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"), model, spec_path, out_path],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None, res.stderr.strip()[-300:]
    with open(out_path) as f:
        return json.load(f), ""


def same_outputs(a, b, rtol=1e-3, atol=1e-4):
    if len(a) != len(b):
        return False, f"{len(a)} vs {len(b)} outputs"
    for x, y in zip(a, b):
        if x["dims"] != y["dims"]:
            return False, f"{x['name']}: dims {x['dims']} vs {y['dims']}"
        ex = np.array(x["values"], dtype=np.float64)
        got = np.array(y["values"], dtype=np.float64)
        if not np.allclose(got, ex, rtol=rtol, atol=atol, equal_nan=True):
            return False, f"{x['name']}: max abs {float(np.nanmax(np.abs(got - ex))):.3g}"
    return True, ""


def ort_latency(model, spec_path, runs):
    res = subprocess.run(["node", os.path.join(HERE, "ort_bench.js"), model, spec_path, str(runs), "1"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return float("nan")
    return json.loads(res.stdout.strip().splitlines()[-1])["median"]


def onnx_checks(path):
    if opset_of(path) > 17:
        return "n/a (opset > 17)"
    try:
        onnx.checker.check_model(path, full_check=True)
        return "ok"
    except Exception as e:  # the checker's verdict, reported as text
        return "FAIL: " + str(e).splitlines()[0][:120]


def suite_inputs(path):
    """The inputs of a backend-suite case (test_data_set_0 next to the
    model), by graph-input name; None for other models."""
    data = os.path.join(os.path.dirname(path), "test_data_set_0")
    if not os.path.isdir(data):
        return None
    from onnx import numpy_helper
    model = onnx.load(path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    feeds = {}
    for i, name in enumerate(names):
        f = os.path.join(data, f"input_{i}.pb")
        if not os.path.exists(f):
            return None
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        feeds[name] = numpy_helper.to_array(t)
    return feeds


ORT_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64", np.dtype(np.int32): "int32",
             np.dtype(np.float64): "float64", np.dtype(np.bool_): "bool", np.dtype(np.uint8): "uint8",
             np.dtype(np.int8): "int8"}


def bench_model(args, name, path, tmp):
    name = name.replace("/", "_")
    feeds = suite_inputs(path)
    if feeds is None:
        feeds = make_inputs(name, path, seed=1)
    if any(v.dtype not in ORT_TYPES for v in feeds.values()):
        return {"error": "input types the ORT binding of this script cannot carry"}
    spec = {k: {"dtype": ORT_TYPES[v.dtype], "shape": list(v.shape),
                "values": v.ravel().astype(np.float64 if v.dtype.kind == "f" else np.int64).tolist()}
            for k, v in feeds.items()}
    spec_path = os.path.join(tmp, name + ".json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    npz = os.path.join(tmp, name + ".npz")
    np.savez(npz, **feeds)
    row = {"nodes_before": count_nodes(path)}

    ours = os.path.join(tmp, name + ".onnxkit.onnx")
    cmd = [args.onnxkit, "optimize", path, "-o", ours, "--json"]
    if feeds:
        cmd += ["--input", npz]
    out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
    with open(out_path, "w") as out_f, open(err_path, "w") as err_f:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f)
        _, status, _ = os.wait4(proc.pid, 0)
        row["onnxkit_seconds"] = time.monotonic() - start
    # ru_maxrss of a child forked from this (large) process starts at the
    # parent's size; onnxkit reports its own peak (VmHWM) in the JSON.
    stdout, stderr = open(out_path).read(), open(err_path).read()
    if os.waitstatus_to_exitcode(status) != 0:
        row["error"] = (stdout + stderr).strip()[-400:]
        return row
    report = json.loads(stdout)
    row["onnxkit_peak_rss_mb"] = report.get("peak_rss_mb")
    row["rewrites"] = report["rewrites"]
    row["verified"] = report["verification"]["ok"] if report["verification"] else None
    row["nodes_onnxkit"] = count_nodes(ours)
    row["bytes_before"], row["bytes_after"] = report["file_bytes_before"], report["file_bytes_after"]

    ort_basic = os.path.join(tmp, name + ".ort.onnx")
    r = subprocess.run(["node", os.path.join(HERE, "ort_optimize.js"), path, ort_basic, "basic"],
                       capture_output=True, text=True)
    row["nodes_ort_basic"] = count_nodes(ort_basic) if r.returncode == 0 else None

    chk = subprocess.run([args.onnxkit, "check", "--full", "-q", ours], capture_output=True, text=True)
    row["onnxkit_check"] = "ok" if chk.returncode == 0 else "FAIL: " + chk.stdout.strip()[-200:]
    row["onnx_checker"] = onnx_checks(ours)

    expected, err = ort_outputs(path, spec_path, os.path.join(tmp, name + ".orig.out.json"))
    got, err2 = ort_outputs(ours, spec_path, os.path.join(tmp, name + ".ours.out.json"))
    if expected is None or got is None:
        row["ort_judge"] = "ORT error: " + (err or err2)
    else:
        ok, why = same_outputs(expected, got)
        row["ort_judge"] = "ok" if ok else "FAIL: " + why
    if args.runs > 0:
        row["ort_ms_original"] = ort_latency(path, spec_path, args.runs)
        row["ort_ms_onnxkit"] = ort_latency(ours, spec_path, args.runs)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,bert_mini,light,simple")
    ap.add_argument("--simple-dir", default=os.path.join(ROOT, "..", "shared", "onnx-backend-data", "simple"))
    ap.add_argument("--runs", type=int, default=20, help="ORT latency runs (0: skip latency)")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if "ORT_NODE" not in os.environ:
        sys.exit("set ORT_NODE to the onnxruntime-node 1.30 package folder")
    models = []
    for name in args.models.split(","):
        if name == "light":
            d = os.path.join(ROOT, "testdata", "models", "light")
            models += [(f[:-5], os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".onnx")]
        elif name == "simple":
            if os.path.isdir(args.simple_dir):
                for case in sorted(os.listdir(args.simple_dir)):
                    p = os.path.join(args.simple_dir, case, "model.onnx")
                    if os.path.exists(p):
                        models.append(("simple/" + case, p))
        else:
            models.append((name, os.path.join(HERE, "models", name + ".onnx")))
    results = {}
    print(f"{'model':34} {'nodes':>6} {'onnxkit':>8} {'ORT basic':>9} {'time s':>7} {'RSS MB':>7} "
          f"{'checks':>7} {'ORT judge':>9} {'ORT ms orig':>11} {'ORT ms opt':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in models:
            if not os.path.exists(path):
                print(f"{name:34} missing ({path})")
                continue
            row = bench_model(args, name, path, tmp)
            results[name] = row
            if "error" in row:
                print(f"{name:34} onnxkit error: {row['error']}")
                continue
            checks = "ok" if row["onnxkit_check"] == "ok" and row["onnx_checker"] in ("ok", "n/a (opset > 17)") else "FAIL"
            rss = row["onnxkit_peak_rss_mb"]
            rss = None if rss is None else round(rss)
            print(f"{name:34} {row['nodes_before']:6} {row['nodes_onnxkit']:8} {str(row['nodes_ort_basic']):>9} "
                  f"{row['onnxkit_seconds']:7.2f} {str(rss):>7} {checks:>7} "
                  f"{'ok' if row['ort_judge'] == 'ok' else 'FAIL':>9} "
                  f"{row.get('ort_ms_original', float('nan')):11.2f} {row.get('ort_ms_onnxkit', float('nan')):10.2f}",
                  flush=True)
            for k in ("onnxkit_check", "onnx_checker", "ort_judge"):
                if not str(row[k]).startswith(("ok", "n/a")):
                    print(f"    {k}: {row[k]}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
