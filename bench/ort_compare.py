#!/usr/bin/env python3
"""Latency of onnxkit (reference and cpu backends) against ONNX Runtime, same run.

Each model gets the same seeded inputs on both sides (written as .npz for
onnxkit and as JSON for bench/ort_bench.js). Prints one table row per model
with median latencies and the ratio onnxkit-cpu / ORT, and writes all the
figures as JSON (--json-out).

  /usr/bin/python3 bench/ort_compare.py --runs 20 --threads 1
  /usr/bin/python3 bench/ort_compare.py --models resnet50,light_resnet50 --backends cpu \
      --baseline OTHER_ONNXKIT --stat min
  /usr/bin/python3 bench/ort_compare.py --threads 2 --rounds 3 --backends cpu
  ORT_NODE=<onnxruntime-node folder> must point at onnxruntime-node 1.30.

Models (--models, e.g. resnet50,light_resnet50): bench/models/{resnet50,mobilenet_v2,bert_base,bert_mini,bert_mini_op14,vit_tiny,llama_tiny,gpt_tiny,crnn_lstm_gru,ssdlite,frcnn}.onnx (made by
bench/export_torch_models.py), if_convnet and if_convnet_flat (a conv net inside
an If and the same net without it, made by bench/make_if_model.py), vad_if (a
0.1 ms voice-activity model, Fourier Conv, Conv encoder and an LSTM step inside
an If on the sample rate, made by bench/make_vad_model.py), and the light
models of the onnx backend data. The default set is every one of them but
if_convnet_flat. 'holdout' adds the torchvision networks of
bench/export_holdout_models.py (bench/models/tv_*.onnx), architectures outside
the default set. Missing files are reported and skipped; the last line is the
geometric mean of cpu/ort and the worst ratio.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def graph_inputs(path):
    model = onnx.load(path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        out.append((vi.name, t.elem_type, dims))
    return out


def make_inputs(name, path, seed):
    """Seeded inputs: token ids in [0, 1000), attention masks of ones,
    token types of zeros, a sample rate `sr` of 16000, floats in [-1, 1), bools true (an If's condition
    takes the branch that holds the network)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for input_name, elem_type, dims in graph_inputs(path):
        shape = [d if d > 0 else (128 if i == 1 else 1) for i, d in enumerate(dims)]
        if elem_type == onnx.TensorProto.INT64:
            if "mask" in input_name:
                feeds[input_name] = np.ones(shape, np.int64)
            elif "type" in input_name:
                feeds[input_name] = np.zeros(shape, np.int64)
            elif input_name == "sr":
                feeds[input_name] = np.array(16000, np.int64).reshape(shape)
            else:
                feeds[input_name] = rng.integers(0, 1000, size=shape, dtype=np.int64)
        elif elem_type == onnx.TensorProto.FLOAT:
            feeds[input_name] = rng.uniform(-1, 1, size=shape).astype(np.float32)
        elif elem_type == onnx.TensorProto.BOOL:
            feeds[input_name] = np.ones(shape, np.bool_)
        else:
            sys.exit(f"{name}: input {input_name} has element type {elem_type}, not handled")
    return feeds


def run_onnxkit(binary, model, npz, backend, runs, threads, precision="fp32"):
    cmd = [binary, "run", model, "--backend", backend, "--bench", str(runs), "--warmup", "3",
           "--threads", str(threads), "--json", "-q", "--profile"]
    if backend == "cpu" and precision != "fp32":
        cmd += ["--precision", precision]
    if npz:
        cmd += ["--input", npz]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-400:]}
    out = json.loads(res.stdout)
    return {"latency_ms": out["latency_ms"], "peak_rss_mb": out.get("peak_rss_mb"),
            "profile_ms": out.get("profile_ms")}


def model_paths(names, light_dir):
    """(name, path) of each comma-separated name: 'light' is every light model of `light_dir`,
    light_NAME one of them, 'holdout' every tv_*.onnx of bench/models (bench/export_holdout_models.py),
    any other name bench/models/NAME.onnx."""
    def every(folder, prefix):
        if not os.path.isdir(folder):
            print(f"{folder}: no such folder, skipped", file=sys.stderr)
            return []
        files = sorted(os.listdir(folder))
        return [(f[:-5], os.path.join(folder, f)) for f in files if f.startswith(prefix) and f.endswith(".onnx")]

    models = []
    for name in names.split(","):
        if name == "holdout":
            models += every(os.path.join(HERE, "models"), "tv_")
        elif name == "light":
            models += every(light_dir, "")
        elif name.startswith("light_"):
            models.append((name, os.path.join(light_dir, name + ".onnx")))
        else:
            models.append((name, os.path.join(HERE, "models", name + ".onnx")))
    return models


def write_inputs(name, path, tmp):
    """The seeded inputs of model `name` (make_inputs) and the .npz in folder `tmp` holding them for
    onnxkit (None when the model has no inputs to make)."""
    feeds = make_inputs(name, path, seed=1)
    npz = None
    if feeds:
        npz = os.path.join(tmp, name + ".npz")
        np.savez(npz, **feeds)
    return feeds, npz


def write_ort_spec(feeds, path):
    """Writes `feeds` (name -> array) as the JSON input spec of bench/ort_bench.js."""
    spec = {}
    for k, v in (feeds or {}).items():
        dtype = {np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool"}.get(v.dtype, "float32")
        spec[k] = {"dtype": dtype, "shape": list(v.shape), "values": v.ravel().tolist()}
    with open(path, "w") as f:
        json.dump(spec, f)


def run_ort(model, spec_path, runs, threads):
    res = subprocess.run(["node", os.path.join(HERE, "ort_bench.js"), model, spec_path, str(runs), str(threads)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-400:]}
    return {"latency_ms": json.loads(res.stdout.strip().splitlines()[-1])}


def median_round(measured, stat):
    """The round whose `stat` latency is the median of `measured` (an error if any round failed); with
    several rounds, every round's figure too (as 'rounds_ms')."""
    ok = [r for r in measured if "latency_ms" in r]
    if len(ok) < len(measured):
        return next(r for r in measured if "latency_ms" not in r)
    ok.sort(key=lambda r: r["latency_ms"][stat])
    pick = dict(ok[(len(ok) - 1) // 2])
    if len(ok) > 1:
        pick["rounds_ms"] = [r["latency_ms"][stat] for r in measured]
    return pick


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxkit", default=os.path.join(ROOT, "build/apps/onnxkit/onnxkit"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,bert_mini,bert_mini_op14,vit_tiny,llama_tiny,gpt_tiny,crnn_lstm_gru,ssdlite,frcnn,light,if_convnet,vad_if",
                    help="comma-separated names; 'light' means every light model, light_NAME one of them; "
                         "'holdout' every tv_*.onnx of bench/models (bench/export_holdout_models.py)")
    ap.add_argument("--light-dir", default=os.path.join(ROOT, "..", "shared", "onnx-backend-data", "light"))
    ap.add_argument("--backends", default="cpu,reference")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--reference-runs", type=int, default=3, help="runs for the (slow) reference backend")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="onnxkit's cpu backend computes Conv/MatMul/Gemm in this precision (run --precision)")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="latency figure compared (min resists a busy machine)")
    ap.add_argument("--baseline", help="a second onnxkit binary whose cpu backend is measured in the same run "
                    "(columns 'base ms' and 'base/ort')")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each model this many times, ORT and onnxkit alternately, and compare the "
                    "medians of the rounds' figures (a machine whose speed drifts between phases, as a shared "
                    "host's second vCPU does, then skews both sides alike)")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if "ORT_NODE" not in os.environ:
        sys.exit("set ORT_NODE to the onnxruntime-node 1.30 package folder")

    models = model_paths(args.models, args.light_dir)

    results = {}
    print(f"{'model':24} {'ort ms':>9} " + " ".join(f"{b + ' ms':>13}" for b in args.backends.split(",")) +
          f" {'cpu/ort':>8}" + (f" {'base ms':>9} {'base/ort':>8}" if args.baseline else "") +
          f"   ({args.stat}, {args.threads} thread{'s' if args.threads != 1 else ''})")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in models:
            if not os.path.exists(path):
                print(f"{name:24} missing ({path})")
                continue
            feeds, npz = write_inputs(name, path, tmp)
            spec_path = os.path.join(tmp, name + ".json")
            write_ort_spec(feeds, spec_path)
            rounds = {}
            for _ in range(max(1, args.rounds)):
                rounds.setdefault("ort", []).append(run_ort(path, spec_path, args.runs, args.threads))
                for backend in args.backends.split(","):
                    runs = args.runs if backend != "reference" else args.reference_runs
                    rounds.setdefault(backend, []).append(
                        run_onnxkit(args.onnxkit, path, npz, backend, runs, args.threads, args.precision))
                if args.baseline:
                    rounds.setdefault("baseline", []).append(
                        run_onnxkit(args.baseline, path, npz, "cpu", args.runs, args.threads, args.precision))
            row = {k: median_round(v, args.stat) for k, v in rounds.items()}
            results[name] = row

            def med(r):
                return r["latency_ms"][args.stat] if "latency_ms" in r else float("nan")

            ratio = med(row.get("cpu", {})) / med(row["ort"]) if "cpu" in row else float("nan")
            if ratio == ratio:
                ratios.append(ratio)
            base = ""
            if args.baseline:
                base = f" {med(row['baseline']):9.3f} {med(row['baseline']) / med(row['ort']):8.2f}"
            print(f"{name:24} {med(row['ort']):9.3f} " +
                  " ".join(f"{med(row[b]):13.3f}" for b in args.backends.split(",")) + f" {ratio:8.2f}" + base,
                  flush=True)
            for k, r in row.items():
                if "error" in r:
                    print(f"  {k}: {r['error']}")
    if ratios:
        print(f"{'geomean cpu/ort':24} {math.exp(sum(math.log(r) for r in ratios) / len(ratios)):.3f} "
              f"over {len(ratios)} models; worst {max(ratios):.2f}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
