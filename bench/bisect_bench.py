#!/usr/bin/python3
"""Benchmark of `onnxkit bisect`: plant one fault at a random node of a real
model, reduce it with the default strategies (ddmin over node sets) and with
the contiguous prefix/suffix baseline, and print oracle calls, result size
and time for both. Faults: attr (an attribute the checker rejects), reshape
(an impossible Reshape), nan (Sqrt of a negative tensor), command (a
--command oracle that greps for the planted node's name), pair (a --command
oracle that needs two far-apart named nodes: where ddmin, which keeps any
subset, beats the contiguous baseline, which must keep everything between).
Inputs with symbolic dims get --shape NAME=1x128 (first dim 1, others 128).

  /usr/bin/python3 bench/bisect_bench.py --onnxkit build-bisect/apps/onnxkit/onnxkit \
      --models bench/models/{resnet50,mobilenet_v2,bert_mini}.onnx \
      --faults attr,reshape,nan,command,pair --seed 1
"""
import argparse, json, os, random, subprocess, tempfile, time
import onnx
from onnx import helper, numpy_helper
import numpy as np


def float_tensors(model):
    """Names of float tensors, by ONNX shape inference (weights left out to stay small)."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    for t in stripped.graph.initializer:
        t.ClearField("raw_data")
        t.ClearField("float_data")
    inferred = onnx.shape_inference.infer_shapes(stripped)
    vis = list(inferred.graph.value_info) + list(inferred.graph.output)
    return {v.name for v in vis if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}


def plant(model, fault, rng):
    g = model.graph
    candidates = [i for i, n in enumerate(g.node) if n.output and n.output[0] and n.op_type not in ("Constant",)]
    if fault == "nan":  # Sqrt needs a float tensor: not a shape computation
        floats = float_tensors(model)
        candidates = [i for i in candidates if g.node[i].output[0] in floats]
    idx = rng.choice(candidates)
    node = g.node[idx]
    t = node.output[0]
    if fault == "attr":  # an attribute the checker rejects (E0404)
        node.attribute.append(helper.make_attribute("bogus_attr", 1))
        node.name = "planted"
        return ["--check-fails", "E0404"]
    if fault == "command":
        node.name = "planted_marker"
        return ["--command", "grep -q planted_marker {model} && exit 1; exit 0", "-j", "2"]
    if fault == "pair":  # two far-apart nodes that must both be present
        first, second = candidates[len(candidates) // 10], candidates[(len(candidates) * 9) // 10]
        g.node[first].name = "planted_pair_a"
        g.node[second].name = "planted_pair_b"
        return ["--command", "grep -q planted_pair_a {model} && grep -q planted_pair_b {model} && exit 1; exit 0",
                "-j", "2"]
    # reshape / nan: a new node after `t`, rewiring its users
    new = t + "_planted"
    for n in g.node:
        for k, name in enumerate(n.input):
            if name == t:
                n.input[k] = new
    for o in g.output:
        if o.name == t:
            o.name = new
    if fault == "reshape":
        g.initializer.append(numpy_helper.from_array(np.array([7, 7, 7], dtype=np.int64), "planted_shape"))
        extra = [helper.make_node("Reshape", [t, "planted_shape"], [new], name="planted")]
        args = ["--run-fails", "[Rr]eshape"]
    else:  # nan: Sqrt of -2|t| - 1, negative even where t is zero
        g.initializer.append(numpy_helper.from_array(np.array(1.0, dtype=np.float32), "planted_one"))
        extra = [helper.make_node("Abs", [t], [t + "_abs"], name="planted_abs"),
                 helper.make_node("Neg", [t + "_abs"], [t + "_neg"], name="planted_neg"),
                 helper.make_node("Sub", [t + "_neg", t + "_abs"], [t + "_m"], name="planted_sub"),
                 helper.make_node("Sub", [t + "_m", "planted_one"], [t + "_m1"], name="planted_sub_one"),
                 helper.make_node("Sqrt", [t + "_m1"], [new], name="planted")]
        args = ["--nan"]
    for k, n in enumerate(extra):
        g.node.insert(idx + 1 + k, n)
    return args


def shape_flags(model):
    """--shape NAME=DIMS for every fed graph input with a symbolic or unknown dim."""
    inits = {t.name for t in model.graph.initializer}
    flags = []
    for i in model.graph.input:
        if i.name in inits or not i.type.HasField("tensor_type"):
            continue
        dims = i.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            continue
        concrete = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (1 if k == 0 else 128)
                    for k, d in enumerate(dims)]
        flags += ["--shape", f"{i.name}={'x'.join(str(d) for d in concrete)}"]
    return flags


def run(onnxkit, model_path, args, strategies, out, limits):
    cmd = [onnxkit, "bisect", model_path, *args, "--random", "-o", out, "--json", *limits]
    if strategies:
        cmd += ["--strategies", strategies]
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "bench timeout", "exit": -1}
    wall = time.time() - start
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-300:], "exit": p.returncode}
    r = json.loads(p.stdout)
    names = [n["name"] for n in r["nodes"]]
    return {"calls": r["oracle_calls"], "nodes": r["nodes_after"], "before": r["nodes_before"],
            "seconds": round(wall, 2), "planted_kept": any(n.startswith("planted") for n in names),
            "one_minimal": r["one_minimal"], "reproduces": r["reproduces"], "budget_hit": r["budget_hit"],
            "planted": sorted(n for n in names if n.startswith("planted"))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxkit", default="build-bisect/apps/onnxkit/onnxkit")
    ap.add_argument("--models", nargs="+", default=["bench/models/resnet50.onnx"])
    ap.add_argument("--faults", default="attr,reshape,nan,command,pair")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=300, help="bisect --time-limit per run")
    ap.add_argument("--max-calls", type=int, default=2000, help="bisect --max-calls per run")
    ap.add_argument("--json", help="also write every row to this file")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    limits = ["--time-limit", str(a.time_limit), "--max-calls", str(a.max_calls)]
    rows = []
    print(f"{'model':<22}{'fault':<9}{'strategy':<15}{'before':>7}{'after':>6}{'calls':>7}{'sec':>8}  kept  repro budget",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mp in a.models:
            for fault in a.faults.split(","):
                m = onnx.load(mp)
                args = plant(m, fault, rng) + shape_flags(m)
                path = os.path.join(tmp, "planted.onnx")
                onnx.save(m, path)
                for label, strat in (("ddmin", ""), ("prefix-suffix", "prefix-suffix")):
                    r = run(a.onnxkit, path, args, strat, os.path.join(tmp, label), limits)
                    rows.append({"model": os.path.basename(mp), "fault": fault, "strategy": label, **r})
                    if "error" in r:
                        print(f"{os.path.basename(mp):<22}{fault:<9}{label:<15} error (exit {r['exit']}): {r['error']}",
                              flush=True)
                        continue
                    kept = r["planted_kept"] if fault != "pair" else len(r["planted"]) == 2
                    print(f"{os.path.basename(mp):<22}{fault:<9}{label:<15}{r['before']:>7}{r['nodes']:>6}{r['calls']:>7}"
                          f"{r['seconds']:>8}  {str(kept):<6}{str(r['reproduces']):<6}{r['budget_hit']}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
