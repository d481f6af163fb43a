#!/usr/bin/python3
"""Before/after count of down-conversions between two onnxkit binaries.

For every case of the ONNX backend suites whose model holds one of --ops
(bodies included), and every target opset 7..source-1, both binaries run
`onnxkit convert CASE/model.onnx --opset N --inputs CASE/test_data_set_0`
(verified by execution) and the written model is compared with the suite's
expected outputs (`onnxkit compare --a OUT --reference test_data_set_0`).
A pair is proven when both succeed. Prints pairs gained (proven only after),
lost (proven only before) and the gains per case.

Usage: /usr/bin/python3 bench/convert_down_gain.py --before OLD --after NEW [--suite DIR ...] [--jobs 2]
"""
import argparse
import collections
import multiprocessing
import os
import subprocess
import sys
import tempfile

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_SUITES = [os.path.join(ROOT, "..", "shared", "onnx-backend-data", "node"),
                  "/usr/share/libonnx-testdata/data/node"]
DEFAULT_OPS = ("Softmax,LogSoftmax,Hardmax,Slice,Equal,GreaterOrEqual,LessOrEqual,Pow,Max,Min,RNN,GRU,LSTM,"
               "Gelu,ArgMax,ArgMin,QLinearMatMul,QLinearConv,QuantizeLinear,DequantizeLinear,DepthToSpace,"
               "MaxPool,Range")


def ops_of(graph, out):
    for n in graph.node:
        if n.domain in ("", "ai.onnx"):
            out.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops_of(a.g, out)
            for g in a.graphs:
                ops_of(g, out)
    return out


def proven(binary, case, opset):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.onnx")
        data = os.path.join(case, "test_data_set_0")
        r = subprocess.run([binary, "convert", os.path.join(case, "model.onnx"), "--opset", str(opset), "-o", out,
                            "--inputs", data, "-q"], capture_output=True, timeout=120)
        if r.returncode != 0 or not os.path.exists(out):
            return False
        r = subprocess.run([binary, "compare", "--a", out, "--reference", data], capture_output=True, timeout=120)
        return r.returncode == 0


def job(args):
    before, after, case, opset = args
    try:
        return case, opset, proven(before, case, opset), proven(after, case, opset)
    except subprocess.TimeoutExpired:
        return case, opset, False, False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--suite", action="append")
    p.add_argument("--ops", default=DEFAULT_OPS)
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    wanted = set(a.ops.split(","))
    work = []
    for suite in a.suite or DEFAULT_SUITES:
        if not os.path.isdir(suite):
            continue
        for name in sorted(os.listdir(suite)):
            case = os.path.join(suite, name)
            model = os.path.join(case, "model.onnx")
            if not os.path.exists(model) or not os.path.isdir(os.path.join(case, "test_data_set_0")):
                continue
            try:
                m = onnx.load(model)
            except Exception:  # noqa: BLE001 - a case the loader refuses is skipped
                continue
            if not ops_of(m.graph, set()) & wanted:
                continue
            src = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
            work += [(a.before, a.after, case, n) for n in range(7, src)]
    with multiprocessing.Pool(a.jobs) as pool:
        results = pool.map(job, work, chunksize=4)
    gained = collections.defaultdict(list)
    lost = []
    both = 0
    for case, opset, b, n in results:
        both += b and n
        if n and not b:
            gained[case].append(opset)
        if b and not n:
            lost.append((case, opset))
    print(f"pairs examined: {len(results)}; proven before and after: {both}; "
          f"gained: {sum(len(v) for v in gained.values())}; lost: {len(lost)}")
    for case, opsets in sorted(gained.items()):
        print(f"  + {os.path.relpath(case, ROOT) if case.startswith(ROOT) else case}: {opsets}")
    for case, opset in lost:
        print(f"  - {case} @ {opset}")


if __name__ == "__main__":
    sys.exit(main())
