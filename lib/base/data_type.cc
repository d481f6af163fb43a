// Element type table.
#include "lib/base/data_type.h"

#include <array>

#include "lib/base/checked_math.h"

namespace onnxkit {
namespace {

struct TypeInfo {
  std::string_view name;
  int bits;
};

// Indexed by TensorProto.DataType value.
constexpr std::array<TypeInfo, 27> kTypes = {{
    {"undefined", 0},      {"float", 32},          {"uint8", 8},        {"int8", 8},
    {"uint16", 16},        {"int16", 16},          {"int32", 32},       {"int64", 64},
    {"string", 0},         {"bool", 8},            {"float16", 16},     {"double", 64},
    {"uint32", 32},        {"uint64", 64},         {"complex64", 64},   {"complex128", 128},
    {"bfloat16", 16},      {"float8e4m3fn", 8},    {"float8e4m3fnuz", 8}, {"float8e5m2", 8},
    {"float8e5m2fnuz", 8}, {"uint4", 4},           {"int4", 4},         {"float4e2m1", 4},
    {"float8e8m0", 8},     {"uint2", 2},           {"int2", 2},
}};

}  // namespace

std::string_view DataTypeName(int32_t data_type) {
  if (data_type < 0 || data_type >= static_cast<int32_t>(kTypes.size())) return "";
  return kTypes[data_type].name;
}

std::optional<int32_t> DataTypeFromName(std::string_view name) {
  for (size_t i = 0; i < kTypes.size(); ++i) {
    if (kTypes[i].name == name) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

bool IsKnownDataType(int32_t data_type) {
  return data_type >= 1 && data_type < static_cast<int32_t>(kTypes.size());
}

int DataTypeBits(int32_t data_type) {
  if (!IsKnownDataType(data_type)) return 0;
  return kTypes[data_type].bits;
}

std::optional<int64_t> RawByteSize(int32_t data_type, int64_t count) {
  int bits = DataTypeBits(data_type);
  if (bits == 0 || count < 0) return std::nullopt;
  auto total_bits = CheckedMul(count, bits);
  if (!total_bits) return std::nullopt;
  return *total_bits / 8 + (*total_bits % 8 != 0 ? 1 : 0);
}

}  // namespace onnxkit
