// Inference state of constant tensors: type, shape and small contents.
#include "lib/infer/tensor_state.h"

#include <cstring>
#include <limits>
#include <string>

#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/tensor/tensor_data.h"

namespace onnxkit::infer {
namespace {

std::optional<Dims> ShapeOf(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(limits::kMaxRank)) return std::nullopt;
  Dims out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(d >= 0 ? Dim::Of(d) : Dim::Unknown());
  return out;
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// One little-endian element of an integer or bool type at `p`; nullopt for
// a uint64 above INT64_MAX.
std::optional<int64_t> IntAt(int32_t type, const char* p) {
  switch (type) {
    case pb::kInt8:
      return Load<int8_t>(p);
    case pb::kUint8:
      return Load<uint8_t>(p);
    case pb::kBool:
      return Load<uint8_t>(p) != 0 ? 1 : 0;
    case pb::kInt16:
      return Load<int16_t>(p);
    case pb::kUint16:
      return Load<uint16_t>(p);
    case pb::kInt32:
      return Load<int32_t>(p);
    case pb::kUint32:
      return Load<uint32_t>(p);
    case pb::kInt64:
      return Load<int64_t>(p);
    case pb::kUint64: {
      uint64_t v = Load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default:
      return std::nullopt;
  }
}

bool IsIntegral(int32_t type) {
  switch (type) {
    case pb::kInt8:
    case pb::kUint8:
    case pb::kBool:
    case pb::kInt16:
    case pb::kUint16:
    case pb::kInt32:
    case pb::kUint32:
    case pb::kInt64:
    case pb::kUint64:
      return true;
    default:
      return false;
  }
}

void ReadContents(const pb::TensorProto& tensor, int64_t count, ValueState* state) {
  const int32_t type = tensor.data_type;
  const bool is_float = type == pb::kFloat || type == pb::kDouble;
  if (!IsIntegral(type) && !is_float) return;
  if (tensor::IsExternal(tensor) || tensor.segment) return;
  const int bytes = DataTypeBits(type) / 8;
  absl::StatusOr<std::string> raw = tensor::ToRawBytes(tensor);
  if (!raw.ok() || bytes <= 0 || raw->size() != static_cast<size_t>(count) * static_cast<size_t>(bytes)) return;
  if (is_float) {
    std::vector<double> values;
    values.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const char* p = raw->data() + i * bytes;
      values.push_back(type == pb::kFloat ? static_cast<double>(Load<float>(p)) : Load<double>(p));
    }
    state->float_data = std::move(values);
    return;
  }
  Dims values;
  values.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    std::optional<int64_t> v = IntAt(type, raw->data() + i * bytes);
    values.push_back(v ? Dim::Of(*v) : Dim::Unknown());
  }
  state->data = std::move(values);
}

}  // namespace

ValueState StateFromTensor(const pb::TensorProto& tensor) {
  ValueState state;
  state.type = TensorOf(tensor.data_type, ShapeOf(tensor.dims));
  if (!state.type.shape) return state;
  std::optional<int64_t> count = CheckedElementCount(tensor.dims);
  if (!count || *count > kMaxDataElements) return state;
  ReadContents(tensor, *count, &state);
  return state;
}

ValueState StateFromSparseTensor(const pb::SparseTensorProto& tensor) {
  ValueState state;
  int32_t elem = tensor.values ? tensor.values->data_type : 0;
  // Nodes read sparse initializers as dense tensors (as onnx does).
  state.type = TensorOf(elem, ShapeOf(tensor.dims));
  return state;
}

}  // namespace onnxkit::infer
