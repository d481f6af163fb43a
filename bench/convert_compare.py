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
Pad pads, TopK k...) is fed at run time, and no node uses a feature that appeared after the
target and that no combination of older ops computes (FEATURES below, one spec fact each:
a Scatter reduction, MaxPool dilations, 16-bit or blocked quantization, GridSample below 11,
BatchNormalization training, Dropout in training mode, RoiAlign half_pixel, string Equal, STFT's
frame_step or DFT's dft_length fed at run time, windows of a fed size, the losses and
TensorScatter below 11, Trilu below 9 (11 with k fed), an Einsum diagonal below 12, and
the Resize modes Upsample lacks when scales or sizes are fed at run time; with constant scales
onnxkit expands those into Gathers). `--ops-only` drops the FEATURES rule. Prints the share of
pairs converted and proven per direction and tool, over all pairs and over the possible ones.

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
ATTR_INPUTS += [("DFT", 2, 20)]


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _resize_needs(node, runtime, opset):
    """The first opset whose Resize can say this node when its scales/sizes/roi are fed at run
    time (with constants, every mode expands into Gathers)."""
    if not any(i in runtime for i in list(node.input)[1:] if i):
        return 0
    if node.op_type == "Upsample":
        return 0
    need = 0
    if _attr(node, "antialias", 0) or _s(_attr(node, "keep_aspect_ratio_policy", "stretch")) != "stretch" \
            or _attr(node, "axes") is not None:
        need = 18
    coord = _s(_attr(node, "coordinate_transformation_mode", "half_pixel" if opset >= 11 else "asymmetric"))
    if coord == "half_pixel_symmetric":
        need = max(need, 19)
    mode = _s(_attr(node, "mode", "nearest"))
    nearest = _s(_attr(node, "nearest_mode", "round_prefer_floor" if opset >= 11 else "floor"))
    sizes = len(node.input) > 3 and node.input[3] != ""
    if mode == "cubic" or coord != "asymmetric" or (mode == "nearest" and nearest != "floor") or sizes:
        need = max(need, 11)
    return need


# Features that appeared after an op's first version and that no combination of older ops
# computes: (op, predicate(node, runtime_names, elem_type_of, opset) -> first opset or 0).
FEATURES = [
    ("ScatterElements", lambda n, rt, et, o: {"add": 16, "mul": 16, "max": 18, "min": 18}.get(
        _s(_attr(n, "reduction", "none")), 0)),
    ("ScatterND", lambda n, rt, et, o: {"add": 16, "mul": 16, "max": 18, "min": 18}.get(
        _s(_attr(n, "reduction", "none")), 0)),
    ("MaxPool", lambda n, rt, et, o: 10 if any(d != 1 for d in (_attr(n, "dilations") or [])) else 0),
    ("QuantizeLinear", lambda n, rt, et, o: 21 if (_attr(n, "block_size", 0) or any(
        et(i) in (4, 5, 21, 22) for i in list(n.input)[2:3] + list(n.output)[:1])) else 0),
    ("DequantizeLinear", lambda n, rt, et, o: 21 if (_attr(n, "block_size", 0) or any(
        et(i) in (4, 5, 21, 22) for i in list(n.input)[:1])) else 0),
    # The expansion below 16 (below 20 for 5-D) reads pixels with GatherElements.
    ("GridSample", lambda n, rt, et, o: 11),
    ("BatchNormalization", lambda n, rt, et, o: 14 if _attr(n, "training_mode", 0) else 0),
    ("Dropout", lambda n, rt, et, o: 12 if len(n.input) > 2 and n.input[2] in rt else 0),
    ("RoiAlign", lambda n, rt, et, o: 16 if o >= 16 and _s(_attr(
        n, "coordinate_transformation_mode", "half_pixel")) == "half_pixel" else 0),
    ("Equal", lambda n, rt, et, o: 11 if et(n.input[0]) == 8 else 0),
    ("Resize", lambda n, rt, et, o: _resize_needs(n, rt, o)),
    # The expansions below 17 need what their older form takes as an attribute or a constant:
    # STFT's frame_step (the Conv's stride) and frame_length, DFT's dft_length; windows of a fed
    # size and the losses' GatherElements need 11.
    ("STFT", lambda n, rt, et, o: 17 if any(i in rt for i in list(n.input)[1:2] + list(n.input)[3:4] if i)
     else 0),
    ("DFT", lambda n, rt, et, o: 17 if len(n.input) > 1 and n.input[1] in rt else 0),
    ("HannWindow", lambda n, rt, et, o: 11 if n.input[0] in rt else 0),
    ("HammingWindow", lambda n, rt, et, o: 11 if n.input[0] in rt else 0),
    ("BlackmanWindow", lambda n, rt, et, o: 11 if n.input[0] in rt else 0),
    # TensorScatter's positions need Range (11); Trilu's mask needs Where (9), and Range (11)
    # when k is fed.
    ("TensorScatter", lambda n, rt, et, o: 11),
    ("Trilu", lambda n, rt, et, o: 11 if len(n.input) > 1 and n.input[1] in rt else 9),
    ("NegativeLogLikelihoodLoss", lambda n, rt, et, o: 11),
    ("SoftmaxCrossEntropyLoss", lambda n, rt, et, o: 11),
    # Einsum's MatMuls cannot take a diagonal (a label repeated within one term).
    ("Einsum", lambda n, rt, et, o: 12 if _einsum_diagonal(_s(_attr(n, "equation", ""))) else 0),
]


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
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    value_types = {}

    def remember(g):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type"):
                t = vi.type.tensor_type
                rank = len(t.shape.dim) if t.HasField("shape") else None
                value_types[vi.name] = (t.elem_type, rank)
        for t in g.initializer:
            value_types[t.name] = (t.data_type, len(t.dims))

    def elem_of(name, rank=False):
        v = value_types.get(name)
        return None if v is None else (v[1] if rank else v[0])

    def walk(g, outer_fed):
        remember(g)
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
                for op, needs in FEATURES:
                    if n.op_type == op:
                        since = needs(n, runtime, elem_of, opset)
                        if since:
                            fed.add((op + " feature", since))
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


def _einsum_diagonal(equation):
    terms = equation.split("->")[0].replace("...", "").replace(" ", "").split(",")
    return any(len(set(t)) != len(t) for t in terms)


OPS_ONLY = False


def possible(facts_of_model, target, facts):
    """Whether the model can be expressed at `target`: every op exists there (or expands into older
    ones), every element type exists there, and no input an older op needs as an attribute is fed
    at run time."""
    ops, types, fed = facts_of_model
    if any(TYPE_SINCE.get(t, 0) > target for t in types):
        return False
    if any(since > target for what, since in fed if not (OPS_ONLY and what.endswith(" feature"))):
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
    ap.add_argument("--ops-only", action="store_true",
                    help="count a pair possible without the FEATURES rule (the earlier definition)")
    a = ap.parse_args()
    global OPS_ONLY
    OPS_ONLY = a.ops_only
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
