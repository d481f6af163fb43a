// Tensor data helpers: which TensorProto field holds a type's elements, how
// many entries that field must have for the tensor's dims, and conversion
// of whichever field is used to the packed little-endian raw layout.
//
// Storage rules (onnx.proto, IR version 11, TensorProto comments):
//   float, complex64 (real, imag pairs)           -> float_data
//   int32, int16, int8, uint16, uint8, bool,
//   float16, bfloat16, float8e4m3fn, float8e4m3fnuz,
//   float8e5m2, float8e5m2fnuz, float8e8m0,
//   int4, uint4, float4e2m1, int2, uint2           -> int32_data
//   int64                                          -> int64_data
//   uint32, uint64                                 -> uint64_data
//   double, complex128 (real, imag pairs)          -> double_data
//   string                                         -> string_data (never raw_data)
// In int32_data, types of 8 bits or more take one entry per element (16-bit
// floats store their bit pattern as an unsigned value); 4-bit types take one
// entry per PAIR of elements (a packed byte, first element in the low
// nibble), 2-bit types one entry per FOUR elements (first element in bits
// 0-1). raw_data holds fixed-width little-endian values, sub-byte types
// packed the same way, bool one byte 0/1 per element.
//
// When an entry of int32_data / uint64_data is wider than its element, only
// the low bits are kept (as onnx.numpy_helper.to_array does); bool entries
// become 0 or 1.
#ifndef ONNXKIT_LIB_TENSOR_TENSOR_DATA_H_
#define ONNXKIT_LIB_TENSOR_TENSOR_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/bytes.h"
#include "lib/io/proto.h"

namespace onnxkit::tensor {

// The typed TensorProto fields (plus raw_data) that can hold elements.
enum class DataField { kNone, kRaw, kFloat, kInt32, kString, kInt64, kDouble, kUint64 };

// "float_data", "int32_data", ..., "raw_data"; "" for kNone.
std::string_view DataFieldName(DataField field);

// The typed field ONNX specifies for `data_type`; kNone for undefined or
// unknown types.
DataField TypedFieldFor(int32_t data_type);

// Entries the typed field must hold for `count` elements of `data_type`
// (2*count for complex, ceil(count/2) for 4-bit, ceil(count/4) for 2-bit
// types); nullopt on overflow, negative count or unknown type.
std::optional<int64_t> TypedFieldLength(int32_t data_type, int64_t count);

// True when data_location is EXTERNAL.
bool IsExternal(const pb::TensorProto& tensor);

// Product of dims. InvalidArgument for a negative dim or an overflowing
// product, ResourceExhausted for a rank above limits::kMaxRank.
absl::StatusOr<int64_t> ElementCount(const pb::TensorProto& tensor);

// The field that holds this tensor's data (kRaw when raw_data was present,
// kNone when no field holds anything). InvalidArgument when several do.
absl::StatusOr<DataField> DataFieldInUse(const pb::TensorProto& tensor);

// Checks that the tensor's data matches its dims and data_type: a known
// type, the right field for the type, and exactly the expected number of
// entries or bytes. Errors (InvalidArgument) name the tensor and give the
// expected and actual counts. Tensors with external data return
// FailedPrecondition saying so (their bytes are checked by ToRawBytes or
// io::ExternalDataResolver); segmented tensors return Unimplemented.
absl::Status ValidateTensorData(const pb::TensorProto& tensor);

// The tensor's elements in the raw_data layout, taken from whichever field
// holds them. For a tensor with external data, `external_bytes` must be the
// loaded bytes (their size is checked); it is ignored otherwise. String
// tensors have no raw layout: InvalidArgument.
absl::StatusOr<std::string> ToRawBytes(const pb::TensorProto& tensor, const Bytes* external_bytes = nullptr);

// A tensor holding `bytes` (raw layout) as raw_data, marked present so that
// an empty tensor still encodes the field (as onnx.numpy_helper.from_array
// does). Does not validate: call ValidateTensorData when the inputs are
// untrusted.
pb::TensorProto FromRawBytes(std::string name, int32_t data_type, std::vector<int64_t> dims,
                             std::string bytes);

// A string tensor holding `strings` (UTF-8, row-major) in string_data.
pb::TensorProto FromStrings(std::string name, std::vector<int64_t> dims, std::vector<std::string> strings);

// "[2, 3]": dims as they appear in messages.
std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace onnxkit::tensor

#endif  // ONNXKIT_LIB_TENSOR_TENSOR_DATA_H_
