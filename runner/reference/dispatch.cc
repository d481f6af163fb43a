// Shared helpers of the reference kernels.
#include "runner/reference/dispatch.h"

#include "absl/strings/str_join.h"
#include "runner/reference/float_types.h"

namespace onnxkit::runner::reference {

int64_t AttrInt(const ir::Node& node, std::string_view name, int64_t def) {
  auto v = node.GetInt(name);
  return v ? *v : def;
}

float AttrFloat(const ir::Node& node, std::string_view name, float def) {
  auto v = node.GetFloat(name);
  return v ? *v : def;
}

std::string AttrString(const ir::Node& node, std::string_view name, std::string def) {
  auto v = node.GetString(name);
  return v ? *v : def;
}

std::vector<int64_t> AttrInts(const ir::Node& node, std::string_view name, std::vector<int64_t> def) {
  auto v = node.GetInts(name);
  return v ? *v : def;
}

std::vector<float> AttrFloats(const ir::Node& node, std::string_view name, std::vector<float> def) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (a == nullptr) return def;
  return a->proto.floats;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return absl::OutOfRangeError(
        absl::StrCat(Sv(what), " ", axis, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")"));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(std::span<const std::vector<int64_t>> shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[offset + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::vector<std::string> all;
      for (const auto& x : shapes) all.push_back(absl::StrCat("[", absl::StrJoin(x, ", "), "]"));
      return absl::InvalidArgumentError(absl::StrCat("shapes ", absl::StrJoin(all, ", "), " cannot be broadcast"));
    }
  }
  return out;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::vector<int64_t> BroadcastIndices(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape) {
  int64_t total = 1;
  for (int64_t d : out_shape) total *= d;
  std::vector<int64_t> result(static_cast<size_t>(total));
  size_t rank = out_shape.size();
  size_t offset = rank - in_shape.size();
  std::vector<int64_t> in_strides_full(rank, 0);
  std::vector<int64_t> in_strides = Strides(in_shape);
  for (size_t i = 0; i < in_shape.size(); ++i) {
    in_strides_full[offset + i] = in_shape[i] == 1 ? 0 : in_strides[i];
  }
  std::vector<int64_t> counter(rank, 0);
  int64_t src = 0;
  for (int64_t k = 0; k < total; ++k) {
    result[static_cast<size_t>(k)] = src;
    for (size_t d = rank; d-- > 0;) {
      if (++counter[d] < out_shape[d]) {
        src += in_strides_full[d];
        break;
      }
      src -= in_strides_full[d] * (out_shape[d] - 1);
      counter[d] = 0;
    }
  }
  return result;
}

absl::StatusOr<std::vector<int64_t>> ReadInt64s(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.size()));
  if (t.dtype() == 7) {
    for (int64_t i = 0; i < t.size(); ++i) out[static_cast<size_t>(i)] = t.data<int64_t>()[i];
  } else if (t.dtype() == 6) {
    for (int64_t i = 0; i < t.size(); ++i) out[static_cast<size_t>(i)] = t.data<int32_t>()[i];
  } else {
    return absl::InvalidArgumentError(absl::StrCat("expected an int64 or int32 tensor, got ", DescribeTensor(t)));
  }
  return out;
}

std::optional<double> ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case 1: return t.data<float>()[i];
    case 2: return t.data<uint8_t>()[i];
    case 3: return t.data<int8_t>()[i];
    case 4: return t.data<uint16_t>()[i];
    case 5: return t.data<int16_t>()[i];
    case 6: return t.data<int32_t>()[i];
    case 7: return static_cast<double>(t.data<int64_t>()[i]);
    case 9: return t.data<uint8_t>()[i] != 0 ? 1 : 0;
    case 10: return static_cast<float>(t.data<Float16>()[i]);
    case 11: return t.data<double>()[i];
    case 12: return t.data<uint32_t>()[i];
    case 13: return static_cast<double>(t.data<uint64_t>()[i]);
    case 16: return static_cast<float>(t.data<BFloat16>()[i]);
    case 17: return MiniFloatToDouble(kFloat8E4M3FN, t.data<uint8_t>()[i]);
    case 18: return MiniFloatToDouble(kFloat8E4M3FNUZ, t.data<uint8_t>()[i]);
    case 19: return MiniFloatToDouble(kFloat8E5M2, t.data<uint8_t>()[i]);
    case 20: return MiniFloatToDouble(kFloat8E5M2FNUZ, t.data<uint8_t>()[i]);
    case 21: return static_cast<double>(SubByteValue(GetPackedBits(t.raw(), 4, i), 4, false));
    case 22: return static_cast<double>(SubByteValue(GetPackedBits(t.raw(), 4, i), 4, true));
    case 23: return MiniFloatToDouble(kFloat4E2M1, GetPackedBits(t.raw(), 4, i));
    case 24: return Float8E8M0ToFloat(t.data<uint8_t>()[i]);
    case 25: return static_cast<double>(SubByteValue(GetPackedBits(t.raw(), 2, i), 2, false));
    case 26: return static_cast<double>(SubByteValue(GetPackedBits(t.raw(), 2, i), 2, true));
    default: return std::nullopt;
  }
}

}  // namespace onnxkit::runner::reference
