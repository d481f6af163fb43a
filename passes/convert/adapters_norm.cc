// Adapters for ops whose meaning or names changed: BatchNormalization 14
// (training outputs; inference nodes convert), Softmax/LogSoftmax/Hardmax 13
// (coerced-2D vs single-axis), Scatter <-> ScatterElements (11).
// Before (up):  %y = Softmax[axis=1](%x)                          (opset 12)
// After:        %s = Shape(%x); %f = Flatten[axis=1](%x)
//               %g = Softmax[axis=-1](%f); %y = Reshape(%g, %s)   (opset 13)
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {

absl::Status BatchNormStep14(Step& step) {
  for (int i = 1; i < step.node->num_outputs(); ++i) {
    ir::Value* o = step.node->output(i);
    if (o != nullptr && !o->name().empty() && (o->has_uses() || o->IsGraphOutput())) {
      return Block("training outputs (running mean/var) are used");
    }
  }
  if (step.node->num_outputs() > 1) return Block("training outputs are declared");
  step.check_names = false;  // mean -> input_mean: same meaning
  return GenericStep(step);
}

absl::Status SoftmaxUp13(Step& step) {
  int64_t axis = step.node->GetInt("axis").value_or(1);
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (axis == -1 || (rank && axis == *rank - 1)) {
    step.node->SetAttribute(IntAttr("axis", -1));
    return GenericStep(step);
  }
  ir::Value* x = step.node->input(0);
  std::string op = step.node->op_type();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape, AddBefore(step, "Shape", {x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * flat, AddBefore(step, "Flatten", {x}, 1, {IntAttr("axis", axis)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * soft, AddBefore(step, op, {flat->output(0)}, 1, {IntAttr("axis", -1)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back, AddBefore(step, "Reshape", {soft->output(0), shape->output(0)}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, back->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status SoftmaxDown13(Step& step) {
  int64_t axis = step.node->GetInt("axis").value_or(-1);
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (axis != -1 && !(rank && axis == *rank - 1)) {
    return Block("a single non-last axis has no coerced-2D equivalent before opset 13");
  }
  step.node->SetAttribute(IntAttr("axis", rank ? *rank - 1 : -1));
  return GenericStep(step);
}

absl::Status ScatterToElements(Step& step) {
  step.node->set_op_type("ScatterElements");
  step.to = ops::FindSchema("", "ScatterElements", 11);
  return GenericStep(step);
}

absl::Status ElementsToScatter(Step& step) {
  step.node->set_op_type("Scatter");
  step.to = ops::FindSchema("", "Scatter", 10);
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
