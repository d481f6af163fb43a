// Target presets of `onnxkit quantize --preset`: one row per target, the
// defaults that target's int8 runtime wants. Explicit flags override them.
//
// | preset  | activations      | weights               | ops                                   | outputs |
// |---------|------------------|-----------------------|---------------------------------------|---------|
// | generic | uint8 asymmetric | int8 sym. per channel | every rule of rules.def               | yes     |
// | ort-cpu | uint8 asymmetric | int8 sym. per channel | Conv MatMul Gemm Add Mul Concat       | yes     |
// |         |                  |                       | AveragePool GlobalAveragePool MaxPool |         |
// |         |                  |                       | Resize Reshape Transpose Flatten      |         |
// |         |                  |                       | Squeeze Unsqueeze Gather Slice Expand |         |
// | trt     | int8 symmetric   | int8 sym. per channel | Conv ConvTranspose MatMul Gemm        | no      |
// |         |                  |                       | AveragePool GlobalAveragePool         |         |
//
// "outputs: no" quantizes only the inputs of the listed ops (TensorRT's
// explicit-quantization placement: it fuses the producer into the
// quantized consumer and picks output precisions itself).
#ifndef ONNXKIT_QUANTIZATION_PRESETS_H_
#define ONNXKIT_QUANTIZATION_PRESETS_H_

#include <span>
#include <string_view>
#include <vector>

#include "quantization/params.h"

namespace onnxkit::quant {

struct Preset {
  std::string_view name;
  QType act_type;
  QType weight_type;
  bool per_channel;
  std::vector<std::string_view> op_types;  // empty: every rule
  bool quantize_outputs;
  std::string_view summary;
};

std::span<const Preset> AllPresets();
// Null when `name` is no preset.
const Preset* FindPreset(std::string_view name);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_PRESETS_H_
