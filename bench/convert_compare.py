#!/usr/bin/python3
"""Goal measurement of `onnxkit convert` against onnx 1.12's version_converter.

Over the ONNX backend suites (../shared/onnx-backend-data/{node,simple} and
Debian's libonnx-testdata), every model is converted up to opset 28 (and up to
17, the highest opset onnx 1.12 knows, for a like-for-like row) and down to
each lower opset 7..source-1. A pair counts as converted when the tool wrote a
model, and as proven when that model reproduces the suite's expected outputs
(`onnxkit compare --a OUT --reference test_data_set_0`); models whose original
does not reproduce them on the reference backend are left out. A pair is possible
when every ai.onnx op of the model (bodies too) exists at the target opset
(lib/ops/schemas.json: a schema no newer than the target, not deprecated there)
or has an expansion into older ops (an adapters.def row going down across the
op's first version), every element type the model holds exists at the target
(bfloat16 from 13, float8 19, int4 21, float4 23, int2 25), and no input that
the older op takes as an attribute (Reduce axes, Split sizes, Slice bounds,
Pad pads, TopK k...) is fed at run time. Prints the share of pairs converted and proven per
direction and tool, over all pairs and over the possible ones.

Usage: /usr/bin/python3 bench/convert_compare.py [--onnxkit build-conv/apps/onnxkit/onnxkit]
       [--suite DIR ...] [--limit N] [--stride N] [--jobs 2]
Needs python3-onnx (Debian's, 1.12) for the comparison column.
"""
import argparse
import collections
import multiprocessing
import os
import subprocess
import sys
import tempfile

try:
    import onnx
    from onnx import version_converter
except ImportError:  # the onnxkit column still works
    onnx = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_SUITES = [
    os.path.join(ROOT, "..", "shared", "onnx-backend-data", "node"),
    os.path.join(ROOT, "..", "shared", "onnx-backend-data", "simple"),
    "/usr/share/libonnx-testdata/data/node",
    "/usr/share/libonnx-testdata/data/simple",
]


def load_facts():
    """{op: [(since_version, deprecated)]} of ai.onnx, and the ops with an expansion going down."""
    import json
    import re
    with open(os.path.join(ROOT, "lib", "ops", "schemas.json")) as f:
        schemas = json.load(f)["schemas"]
    versions = collections.defaultdict(list)
    for x in schemas:
        if x["domain"] in ("", "ai.onnx"):
            versions[x["name"]].append((x["since_version"], x["deprecated"]))
    for v in versions.values():
        v.sort()
    expandable = set()
    with open(os.path.join(ROOT, "passes", "convert", "adapters.def")) as f:
        for m in re.finditer(r'ONNXKIT_ADAPTER\("(\w+)", (\d+), kDown', f.read()):
            op, boundary = m.group(1), int(m.group(2))
            if versions.get(op) and versions[op][0][0] == boundary:
                expandable.add(op)
    return versions, expandable


# The first opset whose ops may hold an element type (TensorProto numbering):
# bfloat16 13, float8 19, int4/uint4 21, float4e2m1 23, float8e8m0 24, int2/uint2 25.
TYPE_SINCE = {16: 13, 17: 19, 18: 19, 19: 19, 20: 19, 21: 21, 22: 21, 23: 23, 24: 24, 25: 25, 26: 25}
# Inputs older versions take as attributes: (op, input index, first opset with the input).
ATTR_INPUTS = [("ReduceSum", 1, 13), ("Split", 1, 13), ("Squeeze", 1, 13), ("Unsqueeze", 1, 13),
               ("Pad", 1, 11), ("Pad", 2, 11), ("Pad", 3, 18), ("TopK", 1, 10), ("Upsample", 1, 9)]
ATTR_INPUTS += [(op, 1, 18) for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")]
ATTR_INPUTS += [("Slice", i, 10) for i in range(1, 5)]


def model_facts(path):
    """(ops, types, runtime_attr_inputs) of a model: its ai.onnx ops, the element types it holds,
    and (op, first opset) for inputs older versions need as attributes but the model feeds at run time."""
    if onnx is None:
        return None
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    ops, types, fed = set(), set(), set()

    def walk(g, outer_fed):
        inits = {i.name for i in g.initializer}
        runtime = set(outer_fed) | {i.name for i in g.input if i.name not in inits}
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type"):
                types.add(vi.type.tensor_type.elem_type)
        for t in g.initializer:
            types.add(t.data_type)
        for n in g.node:
            if n.domain in ("", "ai.onnx"):
                ops.add(n.op_type)
                for op, i, since in ATTR_INPUTS:
                    if n.op_type == op and i < len(n.input) and n.input[i] in runtime:
                        fed.add((op, since))
                for a in n.attribute:
                    if n.op_type in ("Cast", "EyeLike", "RandomNormal", "RandomUniform") and a.name in ("to", "dtype"):
                        types.add(a.i)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g, runtime)
                for sub in a.graphs:
                    walk(sub, runtime)
    walk(m.graph, set())
    return ops, types, fed


def possible(facts_of_model, target, facts):
    """Whether the model can be expressed at `target`: every op exists there (or expands into older
    ones), every element type exists there, and no input an older op needs as an attribute is fed
    at run time."""
    ops, types, fed = facts_of_model
    if any(TYPE_SINCE.get(t, 0) > target for t in types):
        return False
    if any(since > target for _, since in fed):
        return False
    versions, expandable = facts
    for op in ops:
        known = [d for since, d in versions.get(op, []) if since <= target]
        if known and not known[-1]:
            continue
        if op in expandable:
            continue
        return False
    return True


def cases(suites):
    for suite in suites:
        if not os.path.isdir(suite):
            continue
        for name in sorted(os.listdir(suite)):
            d = os.path.join(suite, name)
            if os.path.isfile(os.path.join(d, "model.onnx")) and os.path.isdir(os.path.join(d, "test_data_set_0")):
                yield d


def source_opset(path):
    if onnx is None:
        return None
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


def run(cmd, timeout=60):
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return -1


def proven(onnxkit, model, case):
    return run([onnxkit, "compare", "--a", model, "--reference", os.path.join(case, "test_data_set_0")]) == 0


def one_pair(args):
    onnxkit, case, target, direction, is_possible = args
    out = {"direction": direction, "possible": is_possible}
    with tempfile.TemporaryDirectory() as tmp:
        ours = os.path.join(tmp, "ours.onnx")
        rc = run([onnxkit, "convert", os.path.join(case, "model.onnx"), "--opset", str(target), "-o", ours,
                  "--no-verify", "-q"])
        out["ours_converted"] = rc == 0 and os.path.exists(ours)
        out["ours_proven"] = out["ours_converted"] and proven(onnxkit, ours, case)
        theirs = os.path.join(tmp, "theirs.onnx")
        ok = False
        if onnx is not None:
            try:
                m = onnx.load(os.path.join(case, "model.onnx"))
                c = version_converter.convert_version(m, target)
                onnx.save(c, theirs)
                ok = True
            except Exception:
                ok = False
        out["onnx_converted"] = ok
        out["onnx_proven"] = ok and proven(onnxkit, theirs, case)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build-conv", "apps", "onnxkit", "onnxkit"))
    ap.add_argument("--suite", action="append")
    ap.add_argument("--limit", type=int, default=0, help="models at most (0: all)")
    ap.add_argument("--stride", type=int, default=1, help="every Nth model only (a uniform sample)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    work = []
    skipped = 0
    facts = load_facts()
    for i, case in enumerate(cases(a.suite or DEFAULT_SUITES)):
        if a.limit and i >= a.limit:
            break
        if i % max(a.stride, 1):
            continue
        s = source_opset(os.path.join(case, "model.onnx"))
        if s is None:
            continue
        # A model whose original does not reproduce its expected outputs on
        # the reference backend proves nothing either way.
        if not proven(a.onnxkit, os.path.join(case, "model.onnx"), case):
            skipped += 1
            continue
        ops = model_facts(os.path.join(case, "model.onnx")) or (set(), set(), set())
        if s < 28:
            work.append((a.onnxkit, case, 28, "up to 28", possible(ops, 28, facts)))
        if s < 17:
            work.append((a.onnxkit, case, 17, "up to 17", possible(ops, 17, facts)))
        for t in range(7, s):
            work.append((a.onnxkit, case, t, "down", possible(ops, t, facts)))
    with multiprocessing.Pool(a.jobs) as pool:
        results = pool.map(one_pair, work, chunksize=4)
    table = collections.OrderedDict()
    for r in results:
        for key in (r["direction"], r["direction"] + " (possible)") if r["possible"] else (r["direction"],):
            row = table.setdefault(key, collections.Counter())
            row["pairs"] += 1
            for k in ("ours_converted", "ours_proven", "onnx_converted", "onnx_proven"):
                row[k] += int(r[k])
    print(f"models left out (the original does not reproduce its outputs): {skipped}")
    print(f"{'direction':21} {'pairs':>6} {'onnxkit conv':>13} {'onnxkit proven':>15} {'onnx conv':>10} {'onnx proven':>12}")
    for d, row in table.items():
        n = max(row["pairs"], 1)
        print(f"{d:21} {row['pairs']:6d} {100*row['ours_converted']/n:12.1f}% {100*row['ours_proven']/n:14.1f}%"
              f" {100*row['onnx_converted']/n:9.1f}% {100*row['onnx_proven']/n:11.1f}%")


if __name__ == "__main__":
    sys.exit(main())
