// Facts about ONNX tensor element types (TensorProto.DataType values):
// names as ONNX spells them in type strings ("float16", "float8e4m3fn"),
// storage width in bits, and whether a value is a known type.
#ifndef ONNXKIT_LIB_BASE_DATA_TYPE_H_
#define ONNXKIT_LIB_BASE_DATA_TYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace onnxkit {

// Element type name as used in ONNX type strings, e.g. "float", "bfloat16",
// "float8e4m3fn", "int4"; "undefined" for 0 and "" for an unknown value.
std::string_view DataTypeName(int32_t data_type);

// Inverse of DataTypeName; nullopt for an unknown name.
std::optional<int32_t> DataTypeFromName(std::string_view name);

// True for 1..26, the values onnx 1.23 defines.
bool IsKnownDataType(int32_t data_type);

// Bits one element occupies in raw_data: 2 for int2/uint2, 4 for int4/uint4/
// float4e2m1, 8 for bool/int8/float8*, ..., 128 for complex128. 0 for string,
// undefined and unknown types (they have no fixed raw layout).
int DataTypeBits(int32_t data_type);

// Bytes needed by `count` elements in raw_data (sub-byte types are packed,
// rounded up); nullopt on overflow, negative count or a type without a fixed
// raw layout.
std::optional<int64_t> RawByteSize(int32_t data_type, int64_t count);

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_DATA_TYPE_H_
