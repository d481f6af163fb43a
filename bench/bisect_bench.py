#!/usr/bin/python3
"""Benchmark of `onnxkit bisect`: plant one fault at a random node of a real
model, reduce it with the default strategies (ddmin over node sets) and with
the contiguous prefix/suffix baseline, and print oracle calls, result size
and time for both.

  bench/bisect_bench.py --onnxkit build-bisect/apps/onnxkit/onnxkit \
      --models bench/models/resnet50.onnx --faults attr,reshape,nan,command --seed 1
"""
import argparse, json, os, random, subprocess, tempfile, time
import onnx
from onnx import helper, numpy_helper
import numpy as np


def plant(model, fault, rng):
    g = model.graph
    candidates = [i for i, n in enumerate(g.node) if n.output and n.output[0] and n.op_type not in ("Constant",)]
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
    else:  # nan: Sqrt of a negative tensor
        extra = [helper.make_node("Abs", [t], [t + "_abs"], name="planted_abs"),
                 helper.make_node("Neg", [t + "_abs"], [t + "_neg"], name="planted_neg"),
                 helper.make_node("Sqrt", [t + "_neg"], [new + "_s"], name="planted_sqrt_in"),
                 helper.make_node("Sub", [t + "_neg", t + "_abs"], [t + "_m"], name="planted_sub"),
                 helper.make_node("Sqrt", [t + "_m"], [new], name="planted")]
        extra = [extra[0], extra[1], extra[3], extra[4]]
        args = ["--nan"]
    for k, n in enumerate(extra):
        g.node.insert(idx + 1 + k, n)
    return args


def run(onnxkit, model_path, args, strategies, out):
    cmd = [onnxkit, "bisect", model_path, *args, "--random", "-o", out, "--json"]
    if strategies:
        cmd += ["--strategies", strategies]
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.time() - start
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-300:], "exit": p.returncode}
    r = json.loads(p.stdout)
    names = [n["name"] for n in r["nodes"]]
    return {"calls": r["oracle_calls"], "nodes": r["nodes_after"], "before": r["nodes_before"],
            "seconds": round(wall, 2), "planted_kept": any(n.startswith("planted") for n in names),
            "one_minimal": r["one_minimal"], "reproduces": r["reproduces"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxkit", default="build-bisect/apps/onnxkit/onnxkit")
    ap.add_argument("--models", nargs="+", default=["bench/models/resnet50.onnx"])
    ap.add_argument("--faults", default="attr,reshape,nan,command")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print(f"{'model':<22}{'fault':<9}{'strategy':<15}{'before':>7}{'after':>6}{'calls':>7}{'sec':>8}  kept repro")
    with tempfile.TemporaryDirectory() as tmp:
        for mp in a.models:
            for fault in a.faults.split(","):
                m = onnx.load(mp)
                args = plant(m, fault, rng)
                path = os.path.join(tmp, "planted.onnx")
                onnx.save(m, path)
                for label, strat in (("ddmin", ""), ("prefix-suffix", "prefix-suffix")):
                    r = run(a.onnxkit, path, args, strat, os.path.join(tmp, label))
                    if "error" in r:
                        print(f"{os.path.basename(mp):<22}{fault:<9}{label:<15} error (exit {r['exit']}): {r['error']}")
                        continue
                    print(f"{os.path.basename(mp):<22}{fault:<9}{label:<15}{r['before']:>7}{r['nodes']:>6}{r['calls']:>7}"
                          f"{r['seconds']:>8}  {str(r['planted_kept']):<5}{r['reproduces']}")


if __name__ == "__main__":
    main()
