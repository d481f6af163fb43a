// The rules table (see rules.def).
#include "quantization/rules.h"

namespace onnxkit::quant {
namespace {

constexpr Rule kRules[] = {
#define ONNXKIT_QUANT_RULE(op, family, weight, bias, axis) Rule{op, Family::family, weight, bias, axis},
#include "quantization/rules.def"
#undef ONNXKIT_QUANT_RULE
};

}  // namespace

std::span<const Rule> AllRules() { return kRules; }

const Rule* FindRule(std::string_view op_type) {
  for (const Rule& r : kRules) {
    if (r.op_type == op_type) return &r;
  }
  return nullptr;
}

}  // namespace onnxkit::quant
