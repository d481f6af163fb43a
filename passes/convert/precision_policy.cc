// The kept-float32 op list and the schema rules of precision conversion (see
// precision_policy.h and precision.h).
#include "passes/convert/precision_policy.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"
#include "passes/convert/precision.h"

namespace onnxkit::passes::convert {
namespace {

struct KeptOp {
  std::string_view op;
  bool float16_only;  // a range problem only: bfloat16 has float32's range
  std::string_view reason;
};

// Ops that stay float32. Each is unsafe in 16-bit floats for the reason given.
constexpr std::array kKeptOps = {
    KeptOp{"Range", false, "generates positions; integers past 2048 are not exact in 16 bits"},
    KeptOp{"CumSum", false, "accumulates along a whole axis"},
    KeptOp{"ReduceSum", false, "accumulates over large extents (float16 overflows at 65504)"},
    KeptOp{"ReduceSumSquare", false, "accumulates squares over large extents"},
    KeptOp{"ReduceProd", false, "products over large extents overflow or underflow"},
    KeptOp{"ReduceL1", false, "accumulates over large extents"},
    KeptOp{"ReduceL2", false, "accumulates squares over large extents"},
    KeptOp{"ReduceLogSum", false, "accumulates over large extents"},
    KeptOp{"ReduceLogSumExp", false, "accumulates exponentials"},
    KeptOp{"Exp", true, "overflows float16 for inputs above 11.1"},
    KeptOp{"Pow", true, "overflows float16 for moderate bases and exponents"},
    KeptOp{"RandomNormal", false, "random generator: the sequence depends on the precision"},
    KeptOp{"RandomUniform", false, "random generator: the sequence depends on the precision"},
    KeptOp{"RandomNormalLike", false, "random generator: the sequence depends on the precision"},
    KeptOp{"RandomUniformLike", false, "random generator: the sequence depends on the precision"},
    KeptOp{"Bernoulli", false, "random generator: the sequence depends on the precision"},
    KeptOp{"Multinomial", false, "random generator: the sequence depends on the precision"},
    KeptOp{"NonMaxSuppression", false, "box coordinates and score thresholds"},
    KeptOp{"RoiAlign", false, "box coordinates"},
    KeptOp{"MaxRoiPool", false, "box coordinates"},
    KeptOp{"TopK", false, "near-equal values reorder: the indices change"},
    KeptOp{"EyeLike", false, "output type set by an attribute"},
    KeptOp{"SoftmaxCrossEntropyLoss", false, "reduces over the batch"},
    KeptOp{"NegativeLogLikelihoodLoss", false, "reduces over the batch"},
    KeptOp{"DFT", false, "sums over the whole signal"},
    KeptOp{"STFT", false, "sums over whole frames"},
    KeptOp{"MelWeightMatrix", false, "output type set by an attribute"},
    KeptOp{"HannWindow", false, "output type set by an attribute"},
    KeptOp{"HammingWindow", false, "output type set by an attribute"},
    KeptOp{"BlackmanWindow", false, "output type set by an attribute"},
};

// Inputs kept float32 even in a converted node: coordinates.
struct KeptInput {
  std::string_view op;
  int index;
};
constexpr std::array kKeptInputs = {KeptInput{"Resize", 1}, KeptInput{"Upsample", 1}};

// Inputs whose type parameter no output names, yet which hold the data the
// op computes on: they take the target type with the node, as every other
// input does (ONNX Runtime implements RMSNormalization with X and scale of
// one type only, and Attention with an additive mask of Q's type only).
constexpr std::array kComputedInputs = {KeptInput{"RMSNormalization", 0}, KeptInput{"Attention", 3}};

bool Allows(std::span<const std::string_view> allowed, std::string_view type) {
  for (std::string_view a : allowed) {
    if (a == type) return true;
  }
  return false;
}

// The formal of actual input/output `i`; null past the formals.
const ops::FormalParameter* FormalOf(std::span<const ops::FormalParameter> formals, int i) {
  if (formals.empty()) return nullptr;
  if (static_cast<size_t>(i) < formals.size()) return &formals[static_cast<size_t>(i)];
  if (formals.back().option == ops::ParamOption::kVariadic) return &formals.back();
  return nullptr;
}

bool NamesParam(std::span<const ops::FormalParameter> formals, std::string_view param) {
  for (const ops::FormalParameter& f : formals) {
    if (f.type_str == param) return true;
  }
  return false;
}

bool IsPlainTensor(const ir::Value* v) {
  const pb::TypeProto* t = v->type();
  return t == nullptr || t->tensor_type.has_value();
}

// True when two or more present inputs of `node` bind type parameter
// `param` (Less's A and B): they must keep one type.
bool BoundTwice(const ops::OpSchema& schema, const ir::Node& node, std::string_view param) {
  int n = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const ops::FormalParameter* f = FormalOf(schema.inputs(), i);
    if (node.input(i) != nullptr && f != nullptr && f->type_str == param) ++n;
  }
  return n >= 2;
}

// Ops whose output type an attribute sets and that the rewrite retypes.
bool RetypesOutput(std::string_view op) { return op == "Cast" || op == "Constant" || op == "ConstantOfShape"; }

}  // namespace

std::optional<std::string_view> KeptOpReason(std::string_view op, int32_t target) {
  for (const KeptOp& k : kKeptOps) {
    if (k.op == op && (!k.float16_only || target == pb::kFloat16)) return k.reason;
  }
  return std::nullopt;
}

const char* PrecisionName(int32_t target) { return target == pb::kBfloat16 ? "bfloat16" : "float16"; }

NodeVerdict PlanNode(const ir::Node& node, int64_t opset, int32_t target,
                     const std::function<bool(const ir::Value*)>& is_float32) {
  NodeVerdict v;
  if (std::optional<std::string_view> why = KeptOpReason(node.op_type(), target)) {
    v.reason = absl::StrCat("kept list: ", node.op_type());
    return v;
  }
  bool has_subgraph = false;
  node.ForEachSubgraph([&](const ir::Graph*) { has_subgraph = true; });
  if (has_subgraph) {
    v.reason = "control flow: inputs and outputs stay float32";
    return v;
  }
  const ops::OpSchema* schema = ops::FindSchema(node.domain(), node.op_type(), opset);
  if (schema == nullptr) {
    v.reason = "no schema at this opset";
    return v;
  }
  for (const ir::Value* value : node.inputs()) {
    if (value != nullptr && !IsPlainTensor(value)) v.reason = "takes a sequence, map or optional";
  }
  for (const ir::Value* value : node.outputs()) {
    if (!value->name().empty() && !IsPlainTensor(value)) v.reason = "returns a sequence, map or optional";
  }
  if (!v.reason.empty()) return v;
  const std::string target_str = absl::StrCat("tensor(", PrecisionName(target), ")");
  v.plan.inputs.assign(static_cast<size_t>(node.num_inputs()), SlotRole::kNone);
  v.plan.either_allows_target.assign(static_cast<size_t>(node.num_inputs()), false);
  v.plan.outputs.assign(static_cast<size_t>(node.num_outputs()), false);
  for (int j = 0; j < node.num_outputs(); ++j) {
    const ir::Value* out = node.output(j);
    if (out->name().empty() || !is_float32(out)) continue;
    const ops::FormalParameter* f = FormalOf(schema->outputs(), j);
    if (f == nullptr || !f->is_type_parameter()) continue;  // a concrete tensor(float) output stays
    if (!Allows(schema->AllowedTypes(*f), target_str)) {
      v.reason = absl::StrCat("schema: no ", target_str, " for ", Sv(f->type_str), " at opset ", opset);
      return v;
    }
    if (!NamesParam(schema->inputs(), f->type_str) && !RetypesOutput(node.op_type())) {
      v.reason = "output type set by an attribute";
      return v;
    }
    v.plan.outputs[static_cast<size_t>(j)] = true;
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const ir::Value* in = node.input(i);
    if (in == nullptr || !is_float32(in)) continue;
    const ops::FormalParameter* f = FormalOf(schema->inputs(), i);
    if (f == nullptr) {
      v.reason = "more inputs than the schema has";
      return v;
    }
    SlotRole& role = v.plan.inputs[static_cast<size_t>(i)];
    bool allows = Allows(schema->AllowedTypes(*f), target_str);
    if (!f->is_type_parameter()) {
      role = SlotRole::kFloat32;
    } else if (NamesParam(schema->outputs(), f->type_str) || BoundTwice(*schema, node, f->type_str)) {
      if (!allows) {
        v.reason = absl::StrCat("schema: no ", target_str, " for ", Sv(f->type_str), " at opset ", opset);
        return v;
      }
      role = SlotRole::kTarget;
    } else if (allows && std::any_of(kComputedInputs.begin(), kComputedInputs.end(), [&](const KeptInput& k) {
                 return k.op == node.op_type() && k.index == i;
               })) {
      role = SlotRole::kTarget;
    } else {
      role = SlotRole::kEither;
      v.plan.either_allows_target[static_cast<size_t>(i)] = allows;
    }
    for (const KeptInput& k : kKeptInputs) {
      if (k.op == node.op_type() && k.index == i) role = SlotRole::kFloat32;
    }
  }
  v.convert = true;
  return v;
}

}  // namespace onnxkit::passes::convert
