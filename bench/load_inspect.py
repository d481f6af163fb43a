#!/usr/bin/python3
"""Load + inspect speed and peak memory: onnxkit against python3-onnx's onnx.load.

Both run in the same invocation on the same file, each in a fresh process,
alternating, several times; the script prints the median wall time and the
peak RSS of each, and the ratios.

    bench/load_inspect.py [MODEL] [--runs N] [--onnxkit build/apps/onnxkit/onnxkit]

Without MODEL it exports bert_base (~440 MB, seeded random weights) into
bench/models/ with bench/export_torch_models.py (needs python3-torch and
python3-torchvision) the first time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_measured(argv):
    """Runs argv; returns (wall seconds, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    out, err = proc.stdout, proc.stderr
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace')}")
    return wall, out


def peak_rss_of(argv):
    """Peak RSS (bytes) of one run of argv, read from wait4's rusage."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss * 1024


ONNX_LOAD = r"""
import sys, time
t0 = time.perf_counter()
import onnx
t1 = time.perf_counter()
m = onnx.load(sys.argv[1])
t2 = time.perf_counter()
print(t2 - t1)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    args = ap.parse_args()
    model = args.model
    if model is None:
        model = os.path.join(HERE, "models", "bert_base.onnx")
        if not os.path.exists(model):
            subprocess.check_call(["/usr/bin/python3", os.path.join(HERE, "export_torch_models.py"),
                                   os.path.dirname(model)])
    size = os.path.getsize(model)
    kit_argv = [args.onnxkit, "inspect", "--json", model]
    py_argv = ["/usr/bin/python3", "-c", ONNX_LOAD, model]
    kit_times, py_times = [], []
    run_measured(kit_argv)  # warm the page cache
    for _ in range(args.runs):
        kit_times.append(run_measured(kit_argv)[0])
        _, out = run_measured(py_argv)
        py_times.append(float(out.decode().strip()))
    kit_rss = peak_rss_of(kit_argv)
    py_rss = peak_rss_of(py_argv)
    result = {
        "model": model,
        "file_mb": round(size / 1e6, 1),
        "runs": args.runs,
        "onnxkit_inspect_s_median": round(statistics.median(kit_times), 4),
        "onnx_load_s_median": round(statistics.median(py_times), 4),
        "speedup": round(statistics.median(py_times) / statistics.median(kit_times), 1),
        "onnxkit_peak_rss_mb": round(kit_rss / 1e6, 1),
        "onnxkit_rss_over_file": round(kit_rss / size, 3),
        "onnx_load_peak_rss_mb": round(py_rss / 1e6, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
