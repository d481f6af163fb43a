#!/usr/bin/env python3
"""The cuda backend on a machine with an NVIDIA GPU: correctness against the
reference backend and latency against ONNX Runtime's CUDA execution provider,
same inputs, same run.

For each model (fp32, and fp16 made by `onnxkit convert --float16` when
--fp16 is given):
  - `onnxkit compare --a-backend cuda --b-backend reference` on the seeded
    inputs (the verdict and the worst output's error);
  - `onnxkit run --backend cuda --bench N --json`: median latency (runs
    after the second replay a recorded CUDA graph where the model allows),
    the nodes placed on the device and on the host, the copies; the same
    with --no-cuda-graphs (node by node), and the largest difference between
    the last outputs of the two (the replayed run against one run node by
    node);
  - ONNX Runtime with CUDAExecutionProvider (when the onnxruntime Python
    package offers it), median of N runs after warm-up, same inputs.

  python3 bench/cuda_bench.py --models bench/models/resnet50.onnx,bench/models/bert_base.onnx --fp16
  python3 bench/cuda_bench.py --light-dir testdata/models/light --runs 50

Inputs are bench/ort_compare.py's (token ids in [0, 1000), masks of ones,
token types of zeros, floats in [-1, 1), sequence length 128). Prints one table row
per model and variant; --json-out writes every figure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import make_inputs  # noqa: E402


def run(cmd, timeout):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s")


def onnxkit_compare(binary, model, npz, tf32, oracle, timeout):
    cmd = [binary, "compare", "--a", model, "--a-backend", "cuda", "--b", model, "--b-backend", oracle, "--json"]
    if npz:
        cmd += ["--input", npz]
    if tf32:
        cmd.append("--tf32")
    res = run(cmd, timeout)
    if res.returncode not in (0, 1):
        return {"error": res.stderr.strip()[-600:]}
    try:
        out = json.loads(res.stdout)
    except json.JSONDecodeError:
        return {"error": (res.stdout + res.stderr).strip()[-600:]}
    return {"exit": res.returncode, "report": out}


# Flags added to every `onnxkit run --backend cuda` (--cuda-experimental).
RUN_FLAGS = []


def onnxkit_bench(binary, model, npz, runs, tf32, timeout, profile=False, extra=(), save=None):
    cmd = [binary, "run", model, "--backend", "cuda", "--bench", str(runs), "--warmup", "5", "--json", "-q"]
    cmd += RUN_FLAGS + list(extra)
    if save:
        cmd += ["--save-outputs", save]
    if profile:
        cmd.append("--profile")
    if npz:
        cmd += ["--input", npz]
    if tf32:
        cmd.append("--tf32")
    res = run(cmd, timeout)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-600:]}
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError:
        return {"error": res.stdout.strip()[-600:]}


def max_output_difference(dir_a, dir_b):
    """The largest absolute difference between the output_<i>.pb files of two folders."""
    import onnx
    from onnx import numpy_helper
    worst = 0.0
    names = sorted(f for f in os.listdir(dir_a) if f.endswith(".pb")) if os.path.isdir(dir_a) else []
    if not names:
        return float("nan")
    for f in names:
        if not os.path.exists(os.path.join(dir_b, f)):
            return float("nan")
        a = numpy_helper.to_array(onnx.load_tensor(os.path.join(dir_a, f))).astype(np.float64)
        b = numpy_helper.to_array(onnx.load_tensor(os.path.join(dir_b, f))).astype(np.float64)
        if a.shape != b.shape:
            return float("inf")
        if a.size:
            worst = max(worst, float(np.nanmax(np.abs(a - b))) if np.isfinite(a - b).any() else 0.0)
    return worst


def ort_bench(model, feeds, runs):
    try:
        import onnxruntime as ort
    except ImportError:
        return {"error": "onnxruntime is not installed"}
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return {"error": "onnxruntime has no CUDAExecutionProvider here"}
    try:
        sess = ort.InferenceSession(model, providers=["CUDAExecutionProvider"])
        for _ in range(5):
            sess.run(None, feeds)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
    except Exception as e:  # noqa: BLE001 - report whatever ORT says
        return {"error": str(e)[-400:]}
    return {"latency_ms": {"median": float(np.median(times)), "min": float(np.min(times))}}


def worst_output(report):
    """(name, max abs error, SQNR dB) of the output with the largest error."""
    outs = report.get("outputs", []) if isinstance(report, dict) else []
    worst = None
    for o in outs:
        err = o.get("max_abs")
        if err is None:
            continue
        if worst is None or err > worst[1]:
            worst = (o.get("name", "?"), err, o.get("sqnr_db", float("nan")))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    ap.add_argument("--models", default="", help="comma-separated .onnx files")
    ap.add_argument("--light-dir", help="also every .onnx file of this folder")
    ap.add_argument("--fp16", action="store_true", help="also each model converted with `onnxkit convert --float16`")
    ap.add_argument("--fp16-only", default="", help="comma-separated model names: --fp16 for these only")
    ap.add_argument("--tf32", action="store_true", help="fp32 products on TF32 tensor cores (onnxkit --tf32)")
    ap.add_argument("--cuda-experimental", action="store_true",
                    help="onnxkit run --cuda-experimental (compare has no such flag: its verdict is the default "
                         "kernels'; the experimental outputs are checked against one cpu-backend run instead, "
                         "as experimental_vs_cpu, the largest absolute difference)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--no-compare", action="store_true")
    ap.add_argument("--oracle", default="reference", choices=["reference", "cpu"],
                    help="backend the cuda outputs are compared with (default reference)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--profile", action="store_true",
                    help="also a profiled run (each device kernel waited for): the ops that take the most time")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if args.cuda_experimental:
        RUN_FLAGS.append("--cuda-experimental")

    models = [m for m in args.models.split(",") if m]
    if args.light_dir:
        models += [os.path.join(args.light_dir, f) for f in sorted(os.listdir(args.light_dir)) if f.endswith(".onnx")]
    results = {}
    print(f"{'model':28} {'verdict':>8} {'max err':>9} {'sqnr dB':>8} {'cuda ms':>9} {'graph':>5} {'nodes ms':>9} "
          f"{'replay d':>9} {'ort ms':>9} {'cuda/ort':>8} {'dev/host nodes':>15} {'copies':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for path in models:
            base = os.path.splitext(os.path.basename(path))[0]
            variants = [(base, path)]
            if args.fp16 and (not args.fp16_only or base in args.fp16_only.split(",")):
                half = os.path.join(tmp, base + "_fp16.onnx")
                res = run([args.onnxkit, "convert", path, "-o", half, "--float16", "--no-verify"], args.timeout)
                if res.returncode != 0:
                    res = run([args.onnxkit, "convert", path, "-o", half, "--float16"], args.timeout)
                if res.returncode == 0:
                    variants.append((base + "_fp16", half))
                else:
                    print(f"{base + '_fp16':28} convert failed: {res.stderr.strip()[-300:]}")
            for name, model in variants:
                feeds = make_inputs(name, model, seed=1)
                npz = None
                if feeds:
                    npz = os.path.join(tmp, name + ".npz")
                    np.savez(npz, **feeds)
                row = {}
                if not args.no_compare:
                    row["compare"] = onnxkit_compare(args.onnxkit, model, npz, args.tf32, args.oracle, args.timeout)
                replayed_dir = os.path.join(tmp, name + "_replayed")
                nodes_dir = os.path.join(tmp, name + "_nodes")
                row["cuda"] = onnxkit_bench(args.onnxkit, model, npz, args.runs, args.tf32, args.timeout,
                                            save=replayed_dir)
                row["node_by_node"] = onnxkit_bench(args.onnxkit, model, npz, args.runs, args.tf32, args.timeout,
                                                    extra=["--no-cuda-graphs"], save=nodes_dir)
                row["replay_difference"] = max_output_difference(replayed_dir, nodes_dir)
                if args.cuda_experimental:
                    cpu_dir = os.path.join(tmp, name + "_cpu")
                    cmd = [args.onnxkit, "run", model, "--backend", "cpu", "-q", "--save-outputs", cpu_dir]
                    if npz:
                        cmd += ["--input", npz]
                    run(cmd, args.timeout)
                    row["experimental_vs_cpu"] = max_output_difference(replayed_dir, cpu_dir)
                if args.profile:
                    prof = onnxkit_bench(args.onnxkit, model, npz, 10, args.tf32, args.timeout, profile=True)
                    row["profile_ms"] = prof.get("profile_ms", prof.get("error"))
                row["ort"] = ort_bench(model, feeds, args.runs)
                results[name] = row

                verdict, err, sqnr = "-", float("nan"), float("nan")
                cmp = row.get("compare", {})
                if "report" in cmp:
                    verdict = "match" if cmp["exit"] == 0 else "DIFFER"
                    w = worst_output(cmp["report"])
                    if w:
                        err = w[1]
                        sqnr = w[2] if isinstance(w[2], (int, float)) else float("inf")
                elif "error" in cmp:
                    verdict = "ERROR"
                cuda_ms = row["cuda"].get("latency_ms", {}).get("median", float("nan"))
                nodes_ms = row["node_by_node"].get("latency_ms", {}).get("median", float("nan"))
                graph = "yes" if row["cuda"].get("cuda_graph") else "no"
                if not isinstance(err, (int, float)):
                    err = float("nan")
                ort_ms = row["ort"].get("latency_ms", {}).get("median", float("nan"))
                placed = row["cuda"].get("placement", [])
                on_dev = sum(1 for p in placed if p.get("backend") == "cuda")
                nodes = f"{on_dev}/{len(placed) - on_dev}"
                copies = row["cuda"].get("copies", {}).get("count", "?")
                host_ops = {}
                for p in placed:
                    if p.get("backend") != "cuda":
                        host_ops[p["op"]] = host_ops.get(p["op"], 0) + 1
                row["host_ops"] = host_ops
                print(f"{name:28} {verdict:>8} {err:9.2e} {sqnr:8.1f} {cuda_ms:9.3f} {graph:>5} {nodes_ms:9.3f} "
                      f"{row['replay_difference']:9.2e} {ort_ms:9.3f} {cuda_ms / ort_ms:8.2f} {nodes:>15} {copies!s:>7}",
                      flush=True)
                prof = row.get("profile_ms")
                if isinstance(prof, dict):
                    top = sorted(prof.items(), key=lambda kv: -kv[1])[:8]
                    print("  profile (ms per run, each kernel waited for): " +
                          ", ".join(f"{op} {ms:.3f}" for op, ms in top))
                if "experimental_vs_cpu" in row:
                    print(f"  --cuda-experimental outputs vs the cpu backend: max abs {row['experimental_vs_cpu']:.2e}")
                if host_ops:
                    print("  on the host: " + ", ".join(f"{op} x{n}" for op, n in sorted(host_ops.items())))
                for k, r in row.items():
                    if isinstance(r, dict) and "error" in r:
                        print(f"  {k}: {r['error']}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
