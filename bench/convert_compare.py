#!/usr/bin/python3
"""Goal measurement of `onnxkit convert` against onnx 1.12's version_converter.

Over the ONNX backend suites (../shared/onnx-backend-data/{node,simple} and
Debian's libonnx-testdata), every model is converted up to opset 28 (and up to
17, the highest opset onnx 1.12 knows, for a like-for-like row) and down to
each lower opset 7..source-1. A pair counts as converted when the tool wrote a
model, and as proven when that model reproduces the suite's expected outputs
(`onnxkit compare --a OUT --reference test_data_set_0`). Prints the share of
pairs converted and proven per direction and tool.

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
    onnxkit, case, target, direction = args
    out = {"direction": direction}
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
    for i, case in enumerate(cases(a.suite or DEFAULT_SUITES)):
        if a.limit and i >= a.limit:
            break
        if i % max(a.stride, 1):
            continue
        s = source_opset(os.path.join(case, "model.onnx"))
        if s is None:
            continue
        if s < 28:
            work.append((a.onnxkit, case, 28, "up to 28"))
        if s < 17:
            work.append((a.onnxkit, case, 17, "up to 17"))
        for t in range(7, s):
            work.append((a.onnxkit, case, t, "down"))
    with multiprocessing.Pool(a.jobs) as pool:
        results = pool.map(one_pair, work, chunksize=4)
    table = collections.OrderedDict()
    for r in results:
        row = table.setdefault(r["direction"], collections.Counter())
        row["pairs"] += 1
        for k in ("ours_converted", "ours_proven", "onnx_converted", "onnx_proven"):
            row[k] += int(r[k])
    print(f"{'direction':10} {'pairs':>6} {'onnxkit conv':>13} {'onnxkit proven':>15} {'onnx conv':>10} {'onnx proven':>12}")
    for d, row in table.items():
        n = max(row["pairs"], 1)
        print(f"{d:10} {row['pairs']:6d} {100*row['ours_converted']/n:12.1f}% {100*row['ours_proven']/n:14.1f}%"
              f" {100*row['onnx_converted']/n:9.1f}% {100*row['onnx_proven']/n:11.1f}%")


if __name__ == "__main__":
    sys.exit(main())
