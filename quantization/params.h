// Scales and zero points: activations from a calibrated range (uint8
// asymmetric or int8 symmetric), weights per channel or per tensor, and the
// int32 bias with its overflow guard. Rounding is ONNX's QuantizeLinear:
// to nearest, ties to even.
#ifndef ONNXKIT_QUANTIZATION_PARAMS_H_
#define ONNXKIT_QUANTIZATION_PARAMS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "quantization/calibrators.h"
#include "runner/tensor.h"

namespace onnxkit::quant {

// int4 is for weights only; int16/uint16 for activations only (opset 21).
enum class QType { kInt8, kUint8, kInt4, kInt16, kUint16 };

int32_t QTypeDtype(QType t);
// Signed types are symmetric (zero point 0, range [-qmax, qmax]); unsigned
// asymmetric over [0, qmax].
bool QTypeSigned(QType t);
double QTypeMax(QType t);  // 127, 255, 7, 32767, 65535

// A scale's zero points as a tensor of `type` (int4 packed): 1-D of
// values.size() when `vector`, else the scalar values[0].
absl::StatusOr<runner::Tensor> ZeroPointTensor(QType type, const std::vector<int64_t>& values, bool vector);

struct QParams {
  float scale = 1;
  int64_t zero_point = 0;
};

// uint8/uint16: asymmetric over [min(lo, 0), max(hi, 0)]; int8/int16/int4:
// symmetric over max(|lo|, |hi|) with zero point 0 (range [-qmax, qmax]). A
// zero range gives scale 1.
QParams ActivationParams(Range r, QType type);

// The fixed parameters of the output of a Softmax whose input is quantized
// too (values in [0, 1], whatever the calibration saw) where the type needs
// them: uint8 scale 1/256 zero point 0, as ONNX Runtime's quantizer sets
// them. ONNX Runtime fuses DequantizeLinear -> Softmax -> QuantizeLinear
// into QLinearSoftmax, whose kernel overflows when 1 / scale exceeds about
// 148 times the softmax axis' length (a calibrated scale of a flat
// softmax: Swin-T's 49-wide windows gave 6.9 dB instead of 30). nullopt
// for the other types: calibrated.
std::optional<QParams> SoftmaxParams(QType type);

struct QuantizedWeight {
  runner::Tensor data;            // int8 / uint8 / int4 (packed), the weight's shape
  std::vector<float> scales;      // one per channel (one when per tensor)
  std::vector<int64_t> zero_points;
  int axis = -1;                  // -1: per tensor
  int64_t raised = 0;             // channels whose scale min_scales raised
};

// Quantizes a float weight: int8 / int4 symmetric per channel along `axis`
// (or per tensor when axis < 0); uint8 asymmetric per channel. `min_scales`
// (one per channel, or one for all), when given, raise the scales below
// them: the int32 bias of a Conv/Gemm/MatMul must fit its scale
// input_scale * weight_scale (MinWeightScalesForBias).
absl::StatusOr<QuantizedWeight> QuantizeWeight(const runner::Tensor& w, int axis, QType type,
                                               const std::vector<double>* min_scales = nullptr);

// The weight scales below which bias `b` (float, 1-D) would not fit int32
// with headroom (|b| / (input_scale * 2^30)): one per channel of a weight
// quantized along an axis with `channels` channels, or one (the largest)
// when `per_tensor`. nullopt when nothing needs raising or the bias does
// not fit the weight (its length is not `channels`).
std::optional<std::vector<double>> MinWeightScalesForBias(const runner::Tensor& b, float input_scale,
                                                          int64_t channels, bool per_tensor);

// The int32 bias b / (s_x * s_w[c]) per channel; nullopt when a value would
// not fit int32 (the caller keeps the float bias), or when the shapes do
// not match (bias of length C, scales of length C or 1).
std::optional<runner::Tensor> QuantizeBias(const runner::Tensor& b, float input_scale,
                                           const std::vector<float>& weight_scales,
                                           std::vector<float>* bias_scales);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_PARAMS_H_
