// Scales, zero points, weight and bias quantization (see params.h).
#include "quantization/params.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"

namespace onnxkit::quant {
namespace {

double RoundEven(double x) { return std::nearbyint(x); }  // FE_TONEAREST is the default mode

// Stores the integer `v` (in range) as element i of `t` of type `type`.
void Store(runner::Tensor& t, QType type, int64_t i, int64_t v) {
  switch (type) {
    case QType::kInt8: t.mutable_data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case QType::kUint8: t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case QType::kInt16: t.mutable_data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case QType::kUint16: t.mutable_data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case QType::kInt4: {
      auto* b = static_cast<uint8_t*>(t.mutable_raw()) + i / 2;
      int shift = 4 * static_cast<int>(i & 1);
      *b = static_cast<uint8_t>((*b & ~(0xF << shift)) | ((static_cast<uint8_t>(v) & 0xF) << shift));
      break;
    }
  }
}

}  // namespace

int32_t QTypeDtype(QType t) {
  switch (t) {
    case QType::kInt8: return pb::kInt8;
    case QType::kUint8: return pb::kUint8;
    case QType::kInt4: return pb::kInt4;
    case QType::kInt16: return pb::kInt16;
    case QType::kUint16: return pb::kUint16;
  }
  return pb::kInt8;
}

bool QTypeSigned(QType t) { return t != QType::kUint8 && t != QType::kUint16; }

double QTypeMax(QType t) {
  switch (t) {
    case QType::kInt8: return 127;
    case QType::kUint8: return 255;
    case QType::kInt4: return 7;
    case QType::kInt16: return 32767;
    case QType::kUint16: return 65535;
  }
  return 127;
}

absl::StatusOr<runner::Tensor> ZeroPointTensor(QType type, const std::vector<int64_t>& values, bool vector) {
  if (values.empty()) return absl::InvalidArgumentError("no zero point");
  std::vector<int64_t> shape;
  if (vector) shape.push_back(static_cast<int64_t>(values.size()));
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(QTypeDtype(type), shape));
  for (size_t i = 0; i < (vector ? values.size() : 1); ++i) Store(t, type, static_cast<int64_t>(i), values[i]);
  return t;
}

std::optional<QParams> SoftmaxParams(QType type) {
  if (type == QType::kUint8) return QParams{1.0f / 256, 0};
  return std::nullopt;
}

QParams ActivationParams(Range r, QType type) {
  QParams p;
  double lo = std::min(r.lo, 0.0), hi = std::max(r.hi, 0.0);
  if (!std::isfinite(lo) || !std::isfinite(hi)) return p;
  const double qmax = QTypeMax(type);
  if (QTypeSigned(type)) {
    double a = std::max(-lo, hi);
    double s = a / qmax;
    if (s < std::numeric_limits<float>::min()) return p;
    p.scale = static_cast<float>(s);
    return p;
  }
  double s = (hi - lo) / qmax;
  if (s < std::numeric_limits<float>::min()) return p;
  p.scale = static_cast<float>(s);
  p.zero_point = static_cast<int64_t>(std::clamp(RoundEven(-lo / static_cast<double>(p.scale)), 0.0, qmax));
  return p;
}

absl::StatusOr<QuantizedWeight> QuantizeWeight(const runner::Tensor& w, int axis, QType type,
                                               const std::vector<double>* min_scales) {
  if (w.dtype() != pb::kFloat) return absl::InvalidArgumentError("weight is not float");
  if (axis >= w.rank()) return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range"));
  if (type != QType::kInt8 && type != QType::kUint8 && type != QType::kInt4) {
    return absl::InvalidArgumentError("weights are int8, uint8 or int4");
  }
  QuantizedWeight q;
  q.axis = axis;
  ONNXKIT_ASSIGN_OR_RETURN(q.data, runner::Tensor::Allocate(QTypeDtype(type), w.shape()));
  int64_t channels = axis < 0 ? 1 : w.dim(axis);
  int64_t inner = 1;
  for (int d = axis + 1; d < w.rank() && axis >= 0; ++d) inner *= w.dim(d);
  const float* src = w.data<float>();
  // Element i belongs to channel (i / inner) % channels.
  auto channel_of = [&](int64_t i) { return axis < 0 ? 0 : (i / inner) % channels; };
  std::vector<double> lo(static_cast<size_t>(channels), 0.0), hi(static_cast<size_t>(channels), 0.0);
  for (int64_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(src[i])) continue;
    auto c = static_cast<size_t>(channel_of(i));
    lo[c] = std::min<double>(lo[c], src[i]);
    hi[c] = std::max<double>(hi[c], src[i]);
  }
  if (min_scales != nullptr && min_scales->size() != 1 &&
      static_cast<int64_t>(min_scales->size()) != channels) {
    return absl::InternalError("minimum weight scales do not match the channels");
  }
  for (int64_t c = 0; c < channels; ++c) {
    QParams p = ActivationParams(Range{lo[static_cast<size_t>(c)], hi[static_cast<size_t>(c)]}, type);
    if (min_scales != nullptr) {
      const double need = (*min_scales)[min_scales->size() == 1 ? 0 : static_cast<size_t>(c)];
      if (need > p.scale && need < std::numeric_limits<float>::max()) {
        p.scale = std::nextafter(static_cast<float>(need), std::numeric_limits<float>::max());
        ++q.raised;
        if (!QTypeSigned(type)) {
          const double l = std::min(lo[static_cast<size_t>(c)], 0.0);
          p.zero_point = static_cast<int64_t>(std::clamp(RoundEven(-l / p.scale), 0.0, QTypeMax(type)));
        }
      }
    }
    q.scales.push_back(p.scale);
    q.zero_points.push_back(p.zero_point);
  }
  const double qmax = QTypeMax(type), qmin = QTypeSigned(type) ? -qmax : 0;
  for (int64_t i = 0; i < w.size(); ++i) {
    auto c = static_cast<size_t>(channel_of(i));
    double v = std::isfinite(src[i]) ? src[i] : 0.0;
    double r = std::clamp(RoundEven(v / q.scales[c]) + static_cast<double>(q.zero_points[c]), qmin, qmax);
    Store(q.data, type, i, static_cast<int64_t>(r));
  }
  return q;
}

std::optional<std::vector<double>> MinWeightScalesForBias(const runner::Tensor& b, float input_scale,
                                                          int64_t channels, bool per_tensor) {
  if (b.dtype() != pb::kFloat || b.rank() != 1 || !(input_scale > 0) || !std::isfinite(input_scale)) {
    return std::nullopt;
  }
  if (!per_tensor && b.size() != channels) return std::nullopt;
  // Half of int32: the products summed with the bias keep room.
  constexpr double kBiasLimit = 1073741824.0;
  std::vector<double> need(per_tensor ? 1 : static_cast<size_t>(b.size()), 0.0);
  bool any = false;
  for (int64_t c = 0; c < b.size(); ++c) {
    const double v = std::fabs(static_cast<double>(b.data<float>()[c]));
    if (!std::isfinite(v)) return std::nullopt;
    double& n = need[per_tensor ? 0 : static_cast<size_t>(c)];
    n = std::max(n, v / (static_cast<double>(input_scale) * kBiasLimit));
    any = any || n > 0;
  }
  if (!any) return std::nullopt;
  return need;
}

std::optional<runner::Tensor> QuantizeBias(const runner::Tensor& b, float input_scale,
                                           const std::vector<float>& weight_scales,
                                           std::vector<float>* bias_scales) {
  if (b.dtype() != pb::kFloat || b.rank() != 1) return std::nullopt;
  int64_t n = b.size();
  if (weight_scales.size() != 1 && static_cast<int64_t>(weight_scales.size()) != n) return std::nullopt;
  auto out = runner::Tensor::Allocate(pb::kInt32, {n});
  if (!out.ok()) return std::nullopt;
  bias_scales->clear();
  for (int64_t c = 0; c < n; ++c) {
    float s = input_scale * weight_scales[weight_scales.size() == 1 ? 0 : static_cast<size_t>(c)];
    bias_scales->push_back(s);
    double v = b.data<float>()[c];
    if (!std::isfinite(v) || s <= 0) return std::nullopt;
    double q = RoundEven(v / s);
    // The guard: int32 minus one step of headroom on each side.
    if (std::fabs(q) > 2147483646.0) return std::nullopt;
    out->mutable_data<int32_t>()[c] = static_cast<int32_t>(q);
  }
  return std::move(*out);
}

}  // namespace onnxkit::quant
