// The preset table (see presets.h; README "quantize" repeats it).
#include "quantization/presets.h"

namespace onnxkit::quant {

std::span<const Preset> AllPresets() {
  static const std::vector<Preset>* presets = new std::vector<Preset>{
      {"generic", QType::kUint8, QType::kInt8, true, {}, true,
       "uint8 asymmetric activations, int8 per-channel weights, every op of the rules table"},
      {"ort-cpu", QType::kUint8, QType::kInt8, true,
       {"Conv", "MatMul", "Gemm", "Add", "Mul", "Concat", "AveragePool", "GlobalAveragePool", "MaxPool", "Resize",
        "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Gather", "Slice", "Expand"},
       true,
       "uint8 asymmetric activations, int8 per-channel weights, the ops ONNX Runtime's CPU provider runs on "
       "quantized data (no ConvTranspose)"},
      {"trt", QType::kInt8, QType::kInt8, true,
       {"Conv", "ConvTranspose", "MatMul", "Gemm", "AveragePool", "GlobalAveragePool"}, false,
       "int8 symmetric activations and per-channel weights, QDQ only on the inputs of Conv/ConvTranspose/MatMul/"
       "Gemm/pooling (TensorRT fuses the rest and picks output precisions)"},
  };
  return *presets;
}

const Preset* FindPreset(std::string_view name) {
  for (const Preset& p : AllPresets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace onnxkit::quant
