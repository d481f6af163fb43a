// Helpers of the eliminate and merge passes (see eliminate_util.h).
#include "passes/eliminate_util.h"

#include <cstring>

#include "lib/base/limits.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

template <typename T>
bool AllEqualTo(const runner::Tensor& t, T v) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.size(); ++i) {
    if (!(p[i] == v)) return false;
  }
  return true;
}

// 16-bit floats: +0 and -0 for 0, the bit pattern of 1 otherwise.
bool AllHalfEqual(const runner::Tensor& t, int v, uint16_t one_bits) {
  const uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.size(); ++i) {
    bool ok = v == 0 ? (p[i] & 0x7fff) == 0 : p[i] == one_bits;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool IsStandardOp(const ir::Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool IsOp(const ir::Node& node, const char* op) { return node.op_type() == op && IsStandardOp(node); }

std::optional<std::vector<int64_t>> ConstInts(const ir::Value* value, PassContext& ctx) {
  if (value == nullptr || !IsConstantValue(*value)) return std::nullopt;
  if (const pb::TensorProto* proto = ConstantProto(*value)) {
    if (proto->dims.size() > 1 || (proto->dims.size() == 1 && proto->dims[0] > kMaxConstListElements)) {
      return std::nullopt;
    }
  }
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*value, ctx);
  if (!t.ok() || t->is_string() || t->rank() > 1 || t->size() > kMaxConstListElements) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t->size()));
  for (int64_t i = 0; i < t->size(); ++i) {
    if (t->dtype() == pb::kInt64) {
      out.push_back(t->data<int64_t>()[i]);
    } else if (t->dtype() == pb::kInt32) {
      out.push_back(t->data<int32_t>()[i]);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

bool IsConstantFalse(const ir::Value* value, PassContext& ctx) {
  if (value == nullptr || !IsConstantValue(*value)) return false;
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*value, ctx);
  if (!t.ok() || t->size() != 1) return false;
  if (t->dtype() == pb::kBool) return *t->data<uint8_t>() == 0;
  return AllElementsEqual(*t, 0);
}

bool AllElementsEqual(const runner::Tensor& t, int v) {
  if (t.is_string() || t.size() == 0) return false;
  switch (t.dtype()) {
    case pb::kFloat: return AllEqualTo<float>(t, static_cast<float>(v));
    case pb::kDouble: return AllEqualTo<double>(t, static_cast<double>(v));
    case pb::kFloat16: return AllHalfEqual(t, v, 0x3c00);
    case pb::kBfloat16: return AllHalfEqual(t, v, 0x3f80);
    case pb::kInt8: return AllEqualTo<int8_t>(t, static_cast<int8_t>(v));
    case pb::kUint8: return AllEqualTo<uint8_t>(t, static_cast<uint8_t>(v));
    case pb::kInt16: return AllEqualTo<int16_t>(t, static_cast<int16_t>(v));
    case pb::kUint16: return AllEqualTo<uint16_t>(t, static_cast<uint16_t>(v));
    case pb::kInt32: return AllEqualTo<int32_t>(t, v);
    case pb::kUint32: return AllEqualTo<uint32_t>(t, static_cast<uint32_t>(v));
    case pb::kInt64: return AllEqualTo<int64_t>(t, v);
    case pb::kUint64: return AllEqualTo<uint64_t>(t, static_cast<uint64_t>(v));
    default: return false;
  }
}

bool BroadcastKeeps(const std::optional<std::vector<int64_t>>& x_dims, const std::vector<int64_t>& dims) {
  if (dims.empty()) return true;
  if (!x_dims || dims.size() > x_dims->size()) return false;
  size_t offset = x_dims->size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t x = (*x_dims)[offset + i];
    if (dims[i] != 1 && !(x >= 0 && x == dims[i])) return false;
  }
  return true;
}

bool SameKnownShape(const std::optional<std::vector<int64_t>>& a, const std::optional<std::vector<int64_t>>& b) {
  if (!a || !b || *a != *b) return false;
  for (int64_t d : *a) {
    if (d < 0) return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> TransposePerm(const ir::Node& node, int64_t rank) {
  std::optional<std::vector<int64_t>> perm = node.GetInts("perm");
  if (!perm) {
    if (node.FindAttribute("perm") != nullptr || rank < 0 || rank > limits::kMaxRank) return std::nullopt;
    std::vector<int64_t> reversed;
    for (int64_t i = rank - 1; i >= 0; --i) reversed.push_back(i);
    return reversed;
  }
  if (rank >= 0 && static_cast<int64_t>(perm->size()) != rank) return std::nullopt;
  std::vector<bool> seen(perm->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[static_cast<size_t>(p)]) return std::nullopt;
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

bool IsIdentityPerm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

}  // namespace onnxkit::passes
