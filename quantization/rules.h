// The QDQ insertion rules table (rules.def) as data.
#ifndef ONNXKIT_QUANTIZATION_RULES_H_
#define ONNXKIT_QUANTIZATION_RULES_H_

#include <span>
#include <string_view>

namespace onnxkit::quant {

enum class Family { kWeighted, kElementwise, kPool, kSameScale };

struct Rule {
  std::string_view op_type;
  Family family;
  int weight_input;      // -1: none
  int bias_input;        // -1: none
  int per_channel_axis;  // -1: decided per node (Gemm, MatMul) or none
};

std::span<const Rule> AllRules();
// The rule of `op_type` (ai.onnx); null when the op is never quantized.
const Rule* FindRule(std::string_view op_type);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_RULES_H_
