// NumPy .npy files <-> ONNX tensors.
//
// Reading accepts format versions 1.0, 2.0 and 3.0. The header (a Python
// dict literal) is parsed by a small hand-written parser that accepts only
// {'descr': str, 'fortran_order': bool, 'shape': tuple of non-negative ints}
// (each key exactly once, Python 2 'L' suffixes allowed); nothing is ever
// evaluated or unpickled. Element types:
//   '|b1' bool; '|i1' '<i2' '<i4' '<i8' intN; '|u1' '<u2' '<u4' '<u8' uintN;
//   '<f2' float16, '<f4' float, '<f8' double; '<c8' complex64, '<c16' complex128;
//   '<U<n>' unicode (UTF-32) -> string tensor (UTF-8), trailing NULs dropped;
//   '|S<n>' bytes -> string tensor (bytes as stored), trailing NULs dropped.
// Big-endian ('>') data is byte-swapped; '=' and a missing order mean the
// host's order. fortran_order True is transposed to C (row-major) order.
// Refused with a clear error: object arrays ('|O', which would need
// unpickling), structured dtypes (descr is a list), datetimes, void, long
// double. The declared shape x item size must equal the bytes after the
// header exactly (checked before anything is allocated); a short file is
// DataLoss, every other malformed input InvalidArgument (or
// ResourceExhausted for a limit), never a crash.
//
// Writing produces version 1.0 (2.0 when the header does not fit), C order,
// little-endian, with the same header text and padding numpy 1.24 writes, so
// numpy's own files round-trip byte for byte. ONNX types numpy lacks are
// written as their integer container, whose bytes equal the ml_dtypes
// in-memory layout (load with np.load(f).view(ml_dtypes.<type>)):
//   bfloat16                                   -> '<u2', the 16-bit pattern
//   float8e4m3fn, float8e4m3fnuz, float8e5m2,
//   float8e5m2fnuz, float8e8m0                 -> '|u1', the 8-bit pattern
//   int4, int2                                 -> '|i1', one sign-extended value per byte
//   uint4, uint2                               -> '|u1', one value per byte
//   float4e2m1                                 -> '|u1', the 4-bit pattern in the low nibble
// Reading such a file gives the container type (uint16, uint8, int8);
// FromNpyContainer restores the ONNX type. String tensors are written as
// '<U<n>' (n = longest string in code points, at least 1) when every string
// is valid UTF-8, otherwise as '|S<n>' bytes; numpy drops trailing NULs of
// both, so a string ending in NUL does not round-trip.
#ifndef ONNXKIT_LIB_TENSOR_NPY_H_
#define ONNXKIT_LIB_TENSOR_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::tensor {

// Largest accepted header (bytes). numpy's own reader stops at 10,000; real
// headers are under 200 bytes (a rank-64 shape needs about 1,500).
inline constexpr int64_t kMaxNpyHeaderBytes = int64_t{1} << 20;

// Most elements of a string array read at once: each becomes a std::string
// (32 bytes or more), so a file of one-byte strings would otherwise cost 32x
// its size in memory.
inline constexpr int64_t kMaxNpyStringElements = int64_t{1} << 26;

// Parses a whole .npy file into a tensor named `name` (raw_data for numeric
// types, string_data for strings).
absl::StatusOr<pb::TensorProto> ReadNpy(std::string_view bytes, std::string name);

// Serializes a tensor as a .npy file (see the conventions above). The tensor
// must pass ValidateTensorData (external data must be loaded first).
absl::StatusOr<std::string> WriteNpy(const pb::TensorProto& tensor);

// The descr WriteNpy uses for `data_type` ("<f4", "<u2" for bfloat16, ...);
// "" for string (its descr depends on the data) and unknown types.
std::string_view NpyDescrFor(int32_t data_type);

// Reinterprets a tensor read from a container .npy as `data_type`, undoing
// the convention above: uint16 -> bfloat16, uint8 -> float8*/uint4/uint2/
// float4e2m1, int8 -> int4/int2 (sub-byte types packed). Values are
// range-checked: uint4/float4e2m1 0..15, uint2 0..3; int4 -8..15 and int2
// -2..3, accepting both the sign-extended values WriteNpy writes and the
// masked low bits ml_dtypes keeps (arr.view(np.int8) of an ml_dtypes.int4
// array gives 0..15). Also accepts a tensor already of `data_type`
// (returned as is). InvalidArgument when the tensor's type is not the
// container of `data_type` or a value does not fit.
absl::StatusOr<pb::TensorProto> FromNpyContainer(const pb::TensorProto& tensor, int32_t data_type);

}  // namespace onnxkit::tensor

#endif  // ONNXKIT_LIB_TENSOR_NPY_H_
