#!/usr/bin/python3
"""Verdicts of python3-onnx's checker, the second opinion of onnxkit check.

Reads model paths (one per line) on stdin and prints one line per model:
  PATH<TAB>VALID
  PATH<TAB>INVALID<TAB>first line of onnx's error
  PATH<TAB>SKIP<TAB>why (opsets or IR beyond what this onnx knows)
Models are loaded, then checked with onnx.checker.check_model(model,
full_check=FULL) where FULL is the first argument (0 or 1); the model is
passed in memory because check_model(path, full_check=True) of onnx 1.12
rewrites the file with its inferred shapes. With --isolate each model is
checked in a child process, so that a model crashing onnx itself is
reported (INVALID, "onnx crashed") instead of ending the run.
"""
import os
import subprocess
import sys

import onnx
import onnx.defs

MAX_IR = onnx.IR_VERSION
MAX_OPSET = {"": onnx.defs.onnx_opset_version(), "ai.onnx": onnx.defs.onnx_opset_version(), "ai.onnx.ml": 3}


def first_line(text):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:200]
    return "error"


def verdict(path, full):
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # a file onnx cannot parse is invalid to onnx
        return "INVALID", "load: " + first_line(e)
    if model.ir_version > MAX_IR:
        return "SKIP", f"ir_version {model.ir_version} > {MAX_IR}"
    for imp in model.opset_import:
        limit = MAX_OPSET.get(imp.domain)
        if limit is None:
            return "SKIP", f"domain {imp.domain!r} not known to onnx {onnx.__version__}"
        if imp.version > limit:
            return "SKIP", f"opset {imp.domain or 'ai.onnx'} {imp.version} > {limit}"
    try:
        # The loaded model, never the path: onnx 1.12's check_model(path,
        # full_check=True) writes the shape-inferred model back to the file.
        onnx.checker.check_model(model, full_check=full)
    except Exception as e:
        return "INVALID", first_line(e)
    return "VALID", ""


def main():
    full = len(sys.argv) > 1 and sys.argv[1] == "1"
    isolate = "--isolate" in sys.argv
    for raw in sys.stdin:
        path = raw.rstrip("\n")
        if not path:
            continue
        if isolate:
            proc = subprocess.run([sys.executable, __file__, "1" if full else "0"], input=path + "\n",
                                  capture_output=True, text=True, timeout=60)
            if proc.returncode != 0 or not proc.stdout.strip():
                print(f"{path}\tINVALID\tonnx crashed (exit {proc.returncode})", flush=True)
            else:
                print(proc.stdout.strip(), flush=True)
            continue
        kind, why = verdict(path, full)
        print(f"{path}\t{kind}\t{why}".rstrip("\t"), flush=True)


if __name__ == "__main__":
    main()
