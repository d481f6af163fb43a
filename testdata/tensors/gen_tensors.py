#!/usr/bin/python3
"""Generates the tensor fixtures in this folder (tests/lib/tensor/*_test.cc).

Run with Debian's python3 (python3-numpy 1.24, python3-onnx 1.12):
    /usr/bin/python3 testdata/tensors/gen_tensors.py

For each <stem>.npy written by numpy, <stem>.pb holds the same values as
written by onnx.numpy_helper.from_array (C order, little-endian raw_data, or
string_data for strings), named <stem>. The tests check that onnxkit's
ReadNpy(<stem>.npy) equals DecodeTensor(<stem>.pb) after normalizing both to
raw bytes.

typed_<type>.pb holds values in the typed field onnx.helper.make_tensor
chooses (int32_data for float16/bfloat16/int8/uint16/bool, uint64_data for
uint32, float_data pairs for complex64, ...) and typed_<type>.raw the raw
little-endian bytes of the same values, so the tests cross-check the storage
rules of ToRawBytes against onnx's own writer.

savez.npz / savez_compressed.npz hold f32, i64 and str under the names a, b
and s (numpy writes zip64 local headers and fixed 1980 timestamps, so the
output is deterministic for a given numpy and zlib).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def write_pb(stem, tensor):
    with open(path(stem + ".pb"), "wb") as f:
        f.write(tensor.SerializeToString())


def pb_from_array(stem, arr):
    arr = np.array(arr, order="C")  # keeps 0-d arrays 0-d
    if arr.dtype.kind in "US":
        flat = [x for x in arr.flatten().tolist()]
        tensor = helper.make_tensor(stem, TensorProto.STRING, arr.shape,
                                    [x.encode("utf-8") if isinstance(x, str) else x for x in flat])
    else:
        tensor = numpy_helper.from_array(arr.astype(arr.dtype.newbyteorder("<")), stem)
    write_pb(stem, tensor)


def npy(stem, arr, version=None):
    with open(path(stem + ".npy"), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)
    pb_from_array(stem, arr)


def typed(stem, data_type, dims, vals, raw_bytes):
    write_pb("typed_" + stem, helper.make_tensor("typed_" + stem, data_type, dims, vals))
    with open(path("typed_" + stem + ".raw"), "wb") as f:
        f.write(raw_bytes)


def main():
    f32 = (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1).astype(np.float32)
    i64 = np.array([-(2**63), -1, 0, 2**62], dtype=np.int64)
    strs = np.array(["hello", "h\u00e9llo", "\u65e5\u672c", "\U0001f642", ""])
    npy("f32", f32)
    npy("f16", np.array([1.5, -2.25, 65504, np.inf], dtype=np.float16))
    npy("i64", i64)
    npy("bool", np.array([[True, False], [False, True]]))
    npy("u8", np.array([0, 1, 127, 255], dtype=np.uint8))
    npy("c64", np.array([1 + 2j, -3.5 + 0.25j], dtype=np.complex64))
    npy("str", strs)
    npy("bytes", np.array([b"ab", b"c\x00d", b""]))
    npy("f32_be", np.array([[1.0, -2.0], [3.5, 1e-3]], dtype=">f4"))
    npy("c64_be", np.array([1 + 2j, -3.5 + 0.25j], dtype=">c8"))
    npy("str_be", np.array(["ab", "\u00e9\U0001f642"], dtype=">U2"))
    npy("fortran", np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
    npy("fortran_str", np.asfortranarray(np.array([["a", "bb"], ["ccc", "d"]])))
    npy("scalar", np.array(3.25, dtype=np.float64))
    npy("empty", np.zeros((0, 3), dtype=np.float32))
    npy("v2", f32, version=(2, 0))
    npy("v3", f32, version=(3, 0))
    np.savez(path("savez.npz"), a=f32, b=i64, s=strs)
    np.savez_compressed(path("savez_compressed.npz"), a=f32, b=i64, s=strs)

    f16 = np.array([1.5, -2.25, 65504], dtype=np.float16)
    typed("float16", TensorProto.FLOAT16, [3], f16.astype(np.float32), f16.tobytes())
    bf16_bits = np.array([0x3FC0, 0xC010, 0x7F80], dtype=np.uint16)  # 1.5, -2.25, inf
    bf16_vals = (bf16_bits.astype(np.uint32) << 16).view(np.float32)
    typed("bfloat16", TensorProto.BFLOAT16, [3], bf16_vals, bf16_bits.tobytes())
    i8 = np.array([-128, -1, 0, 127], dtype=np.int8)
    typed("int8", TensorProto.INT8, [2, 2], i8.tolist(), i8.tobytes())
    u16 = np.array([0, 1, 65535], dtype=np.uint16)
    typed("uint16", TensorProto.UINT16, [3], u16.tolist(), u16.tobytes())
    b = np.array([True, False, True])
    typed("bool", TensorProto.BOOL, [3], b.tolist(), b.tobytes())
    u32 = np.array([0, 1, 2**32 - 1], dtype=np.uint32)
    typed("uint32", TensorProto.UINT32, [3], u32.tolist(), u32.tobytes())
    c64 = np.array([1 + 2j, -3.5 + 0.25j], dtype=np.complex64)
    typed("complex64", TensorProto.COMPLEX64, [2], c64.tolist(), c64.tobytes())
    c128 = np.array([1 + 2j, -3.5 + 0.25j], dtype=np.complex128)
    typed("complex128", TensorProto.COMPLEX128, [2], c128.tolist(), c128.tobytes())
    f64 = np.array([0.1, -2.5], dtype=np.float64)
    typed("double", TensorProto.DOUBLE, [2], f64.tolist(), f64.tobytes())
    typed("int64", TensorProto.INT64, [4], i64.tolist(), i64.tobytes())
    print("onnx", onnx.__version__, "numpy", np.__version__, "->", HERE)


if __name__ == "__main__":
    main()
