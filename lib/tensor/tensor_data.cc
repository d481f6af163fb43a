// Tensor data validation and conversion to the raw little-endian layout.
#include "lib/tensor/tensor_data.h"

#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"

namespace onnxkit::tensor {
namespace {

// "tensor 'w' (float, dims [2, 3])" for messages.
std::string Label(const pb::TensorProto& t) {
  std::string type(DataTypeName(t.data_type));
  if (type.empty()) type = absl::StrCat("data_type ", t.data_type);
  return absl::StrCat(t.name.empty() ? "unnamed tensor" : absl::StrCat("tensor '", t.name, "'"), " (", type,
                      ", dims ", DimsToString(t.dims), ")");
}

// Appends the low `width` bytes of `v`, least significant first.
inline void PutLE(uint64_t v, int width, char* out) {
  for (int i = 0; i < width; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Copies a vector of fixed-width values as little-endian bytes.
template <typename T>
std::string VectorToLE(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if constexpr (std::endian::native == std::endian::little) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  } else {
    for (size_t i = 0; i < values.size(); ++i) {
      uint64_t bits = 0;
      if constexpr (sizeof(T) == 4) {
        bits = std::bit_cast<uint32_t>(values[i]);
      } else {
        bits = std::bit_cast<uint64_t>(values[i]);
      }
      PutLE(bits, sizeof(T), out.data() + i * sizeof(T));
    }
  }
  return out;
}

// int32_data -> raw: one entry per element of 8 bits or more (low bits kept,
// bool normalized), one packed byte per entry for sub-byte types.
std::string Int32DataToRaw(const pb::TensorProto& t) {
  const int bits = DataTypeBits(t.data_type);
  const int width = bits >= 8 ? bits / 8 : 1;
  std::string out(t.int32_data.size() * width, '\0');
  for (size_t i = 0; i < t.int32_data.size(); ++i) {
    uint64_t v = static_cast<uint32_t>(t.int32_data[i]);
    if (t.data_type == pb::kBool) v = v != 0 ? 1 : 0;
    PutLE(v, width, out.data() + i * width);
  }
  return out;
}

// uint64_data -> raw: 8 bytes per uint64, the low 4 bytes per uint32.
std::string Uint64DataToRaw(const pb::TensorProto& t) {
  if (t.data_type == pb::kUint64) return VectorToLE(t.uint64_data);
  std::string out(t.uint64_data.size() * 4, '\0');
  for (size_t i = 0; i < t.uint64_data.size(); ++i) PutLE(t.uint64_data[i], 4, out.data() + i * 4);
  return out;
}

bool RawPresent(const pb::TensorProto& t) { return !t.raw_data.empty() || t.Has(9); }

}  // namespace

std::string_view DataFieldName(DataField field) {
  switch (field) {
    case DataField::kNone:
      return "";
    case DataField::kRaw:
      return "raw_data";
    case DataField::kFloat:
      return "float_data";
    case DataField::kInt32:
      return "int32_data";
    case DataField::kString:
      return "string_data";
    case DataField::kInt64:
      return "int64_data";
    case DataField::kDouble:
      return "double_data";
    case DataField::kUint64:
      return "uint64_data";
  }
  return "";
}

DataField TypedFieldFor(int32_t data_type) {
  switch (data_type) {
    case pb::kFloat:
    case pb::kComplex64:
      return DataField::kFloat;
    case pb::kInt64:
      return DataField::kInt64;
    case pb::kUint32:
    case pb::kUint64:
      return DataField::kUint64;
    case pb::kDouble:
    case pb::kComplex128:
      return DataField::kDouble;
    case pb::kString:
      return DataField::kString;
    default:
      return IsKnownDataType(data_type) ? DataField::kInt32 : DataField::kNone;
  }
}

std::optional<int64_t> TypedFieldLength(int32_t data_type, int64_t count) {
  if (count < 0 || !IsKnownDataType(data_type)) return std::nullopt;
  if (data_type == pb::kComplex64 || data_type == pb::kComplex128) return CheckedMul(count, 2);
  const int bits = DataTypeBits(data_type);
  if (bits > 0 && bits < 8) return RawByteSize(data_type, count);  // packed bytes
  return count;
}

bool IsExternal(const pb::TensorProto& tensor) { return tensor.data_location == 1; }

std::string DimsToString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<int64_t> ElementCount(const pb::TensorProto& tensor) {
  if (tensor.dims.size() > static_cast<size_t>(limits::kMaxRank)) {
    return absl::ResourceExhaustedError(absl::StrCat(Label(tensor), ": rank ", tensor.dims.size(),
                                                     " exceeds the limit of ", limits::kMaxRank,
                                                     " (limits::kMaxRank)"));
  }
  for (int64_t d : tensor.dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(Label(tensor), ": negative dim ", d));
  }
  auto count = CheckedElementCount(tensor.dims);
  if (!count) {
    return absl::InvalidArgumentError(absl::StrCat(Label(tensor), ": element count overflows int64"));
  }
  return *count;
}

absl::StatusOr<DataField> DataFieldInUse(const pb::TensorProto& t) {
  std::vector<DataField> used;
  if (RawPresent(t)) used.push_back(DataField::kRaw);
  if (!t.float_data.empty()) used.push_back(DataField::kFloat);
  if (!t.int32_data.empty()) used.push_back(DataField::kInt32);
  if (!t.string_data.empty()) used.push_back(DataField::kString);
  if (!t.int64_data.empty()) used.push_back(DataField::kInt64);
  if (!t.double_data.empty()) used.push_back(DataField::kDouble);
  if (!t.uint64_data.empty()) used.push_back(DataField::kUint64);
  if (used.empty()) return DataField::kNone;
  if (used.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": data in both ", Sv(DataFieldName(used[0])),
                                                   " and ", Sv(DataFieldName(used[1]))));
  }
  return used[0];
}

absl::Status ValidateTensorData(const pb::TensorProto& t) {
  if (!IsKnownDataType(t.data_type)) {
    return absl::InvalidArgumentError(t.data_type == pb::kUndefined
                                          ? absl::StrCat(Label(t), ": data_type is undefined")
                                          : absl::StrCat(Label(t), ": unknown data_type"));
  }
  if (IsExternal(t)) {
    return absl::FailedPreconditionError(
        absl::StrCat(Label(t), ": data is external (data_location EXTERNAL) and must be loaded first"));
  }
  if (t.segment) {
    return absl::UnimplementedError(absl::StrCat(Label(t), ": segmented tensors are not supported"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(const int64_t count, ElementCount(t));
  ONNXKIT_ASSIGN_OR_RETURN(const DataField field, DataFieldInUse(t));
  const DataField typed = TypedFieldFor(t.data_type);
  if (field == DataField::kNone) {
    if (count == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": no data, expected ", count, " elements in ",
                                                   Sv(DataFieldName(typed)),
                                                   typed == DataField::kString ? "" : " or raw_data"));
  }
  if (field == DataField::kRaw) {
    if (t.data_type == pb::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat(Label(t), ": string data must be in string_data, not raw_data"));
    }
    auto expected = RawByteSize(t.data_type, count);
    if (!expected) {
      return absl::InvalidArgumentError(absl::StrCat(Label(t), ": byte size overflows int64"));
    }
    if (static_cast<uint64_t>(*expected) != t.raw_data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Label(t), ": raw_data has ", t.raw_data.size(), " bytes, expected ", *expected));
    }
    return absl::OkStatus();
  }
  if (field != typed) {
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": data in ", Sv(DataFieldName(field)), ", but ",
                                                   Sv(DataTypeName(t.data_type)), " tensors store it in ",
                                                   Sv(DataFieldName(typed)), " or raw_data"));
  }
  auto expected = TypedFieldLength(t.data_type, count);
  if (!expected) {
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": entry count overflows int64"));
  }
  size_t actual = 0;
  switch (field) {
    case DataField::kFloat:
      actual = t.float_data.size();
      break;
    case DataField::kInt32:
      actual = t.int32_data.size();
      break;
    case DataField::kString:
      actual = t.string_data.size();
      break;
    case DataField::kInt64:
      actual = t.int64_data.size();
      break;
    case DataField::kDouble:
      actual = t.double_data.size();
      break;
    case DataField::kUint64:
      actual = t.uint64_data.size();
      break;
    default:
      break;
  }
  if (static_cast<uint64_t>(*expected) != actual) {
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": ", Sv(DataFieldName(field)), " has ", actual,
                                                   " entries, expected ", *expected));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ToRawBytes(const pb::TensorProto& t, const Bytes* external_bytes) {
  if (t.data_type == pb::kString) {
    return absl::InvalidArgumentError(absl::StrCat(Label(t), ": string tensors have no raw byte layout"));
  }
  if (IsExternal(t)) {
    if (!IsKnownDataType(t.data_type)) {
      return absl::InvalidArgumentError(absl::StrCat(Label(t), ": unknown data_type"));
    }
    if (external_bytes == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(Label(t), ": data is external and was not loaded"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(const int64_t count, ElementCount(t));
    auto expected = RawByteSize(t.data_type, count);
    if (!expected || static_cast<uint64_t>(*expected) != external_bytes->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Label(t), ": external data has ", external_bytes->size(), " bytes, expected ",
                       expected ? absl::StrCat(*expected) : std::string("an overflowing size")));
    }
    return external_bytes->str();
  }
  ONNXKIT_RETURN_IF_ERROR(ValidateTensorData(t));
  ONNXKIT_ASSIGN_OR_RETURN(const DataField field, DataFieldInUse(t));
  switch (field) {
    case DataField::kRaw:
      return t.raw_data.str();
    case DataField::kFloat:
      return VectorToLE(t.float_data);
    case DataField::kInt32:
      return Int32DataToRaw(t);
    case DataField::kInt64:
      return VectorToLE(t.int64_data);
    case DataField::kDouble:
      return VectorToLE(t.double_data);
    case DataField::kUint64:
      return Uint64DataToRaw(t);
    default:
      return std::string();  // kNone: zero elements
  }
}

pb::TensorProto FromRawBytes(std::string name, int32_t data_type, std::vector<int64_t> dims,
                             std::string bytes) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = data_type;
  t.dims = std::move(dims);
  t.raw_data = Bytes::Own(std::move(bytes));
  t.MarkPresent(9);
  return t;
}

pb::TensorProto FromStrings(std::string name, std::vector<int64_t> dims, std::vector<std::string> strings) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kString;
  t.dims = std::move(dims);
  t.string_data = std::move(strings);
  return t;
}

}  // namespace onnxkit::tensor
