// Adapters for scalars and lists that moved from attributes to inputs at
// opsets 11/12: Pad (pads, value), Clip (min, max), Dropout (ratio).
// Before (up):  %y = Clip[min=0, max=6](%x)             (opset 10)
// After:        %y = Clip(%x, %min = 0, %max = 6)       (opset 11)
// Going down, the inputs must be constant.
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/infer/types.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

// The constant scalar of input `i` (absent: nullopt with *present false).
absl::StatusOr<std::optional<double>> ConstScalarInput(Step& step, int i) {
  if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) return std::optional<double>();
  std::optional<double> v = ConstantScalar(*step.node->input(i), *step.ctx);
  if (!v) {
    // A scalar computed from constants or static shapes, as inference knows it.
    const infer::ValueState* state = step.ctx->State(*step.node->input(i));
    if (state != nullptr && state->float_data && state->float_data->size() == 1) {
      v = (*state->float_data)[0];
    } else if (state != nullptr && state->data && state->data->size() == 1 && (*state->data)[0].known()) {
      v = static_cast<double>(*(*state->data)[0].value);
    }
  }
  if (!v) return Block(absl::StrCat("input '", step.node->input(i)->name(), "' is not a constant scalar"));
  return v;
}

absl::Status SetOrAppend(Step& step, int index, ir::Value* v) {
  while (step.node->num_inputs() < index) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, nullptr));
  if (step.node->num_inputs() == index) return step.graph->AppendInput(step.node, v);
  return step.graph->SetInput(step.node, index, v);
}

}  // namespace

absl::Status PadAttrsToInputs(Step& step) {
  std::optional<std::vector<int64_t>> pads = step.node->GetInts("pads");
  if (!pads) return Block("attribute pads missing");
  float value = step.node->GetFloat("value").value_or(0.0f);
  ir::Value* cv = nullptr;
  if (value != 0.0f) {
    std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx);
    if (!elem) return Block("value != 0 needs the data's element type");
    ONNXKIT_ASSIGN_OR_RETURN(cv, AddScalar(step, "pad_value", *elem, value));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * p, AddInts(step, "pads", *pads));
  ONNXKIT_RETURN_IF_ERROR(SetOrAppend(step, 1, p));
  if (cv != nullptr) ONNXKIT_RETURN_IF_ERROR(SetOrAppend(step, 2, cv));
  step.node->RemoveAttribute("pads");
  step.node->RemoveAttribute("value");
  return GenericStep(step);
}

absl::Status PadInputsToAttrs(Step& step) {
  std::optional<std::vector<int64_t>> pads = ConstInts(step, 1);
  if (!pads) return Block("input pads is not constant");
  ONNXKIT_ASSIGN_OR_RETURN(std::optional<double> value, ConstScalarInput(step, 2));
  step.node->SetAttribute(IntsAttr("pads", *pads));
  if (value && *value != 0) step.node->SetAttribute(FloatAttr("value", static_cast<float>(*value)));
  if (step.node->num_inputs() > 2) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 2));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  return GenericStep(step);
}

absl::Status ClipAttrsToInputs(Step& step) {
  std::optional<float> lo = step.node->GetFloat("min");
  std::optional<float> hi = step.node->GetFloat("max");
  if (lo || hi) {
    std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx);
    if (!elem) return Block("min/max need the input's element type");
    if (lo) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v, AddScalar(step, "clip_min", *elem, *lo));
      ONNXKIT_RETURN_IF_ERROR(SetOrAppend(step, 1, v));
    }
    if (hi) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v, AddScalar(step, "clip_max", *elem, *hi));
      ONNXKIT_RETURN_IF_ERROR(SetOrAppend(step, 2, v));
    }
  }
  step.node->RemoveAttribute("min");
  step.node->RemoveAttribute("max");
  return GenericStep(step);
}

// Clip with bounds that are not constant scalars: Min(Max(x, min), max),
// which the older Max and Min compute alike (NaN included).
absl::Status ClipAsMaxMin(Step& step) {
  ir::Value* y = step.node->input(0);
  for (int i : {1, 2}) {
    if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) continue;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, AddBefore(step, i == 1 ? "Max" : "Min", {y, step.node->input(i)}, 1));
    // Clip's output has its input's shape (scalar bounds).
    if (std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx)) {
      TypeLike(step, n->output(0), *elem, step.node->input(0));
    }
    y = n->output(0);
  }
  if (y == step.node->input(0)) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, AddBefore(step, "Identity", {y}, 1));
    y = n->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ClipInputsToAttrs(Step& step) {
  auto lo_or = ConstScalarInput(step, 1);
  auto hi_or = ConstScalarInput(step, 2);
  if (!lo_or.ok() || !hi_or.ok()) return ClipAsMaxMin(step);
  std::optional<double> lo = *lo_or, hi = *hi_or;
  while (step.node->num_inputs() > 1) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  if (lo) step.node->SetAttribute(FloatAttr("min", static_cast<float>(*lo)));
  if (hi) step.node->SetAttribute(FloatAttr("max", static_cast<float>(*hi)));
  return GenericStep(step);
}

// Dropout in inference is the identity whatever the ratio: the ratio
// attribute becomes the input only to keep it visible.
absl::Status DropoutUp12(Step& step) {
  std::optional<float> ratio = step.node->GetFloat("ratio");
  if (ratio) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v, AddScalar(step, "ratio", pb::kFloat, *ratio));
    ONNXKIT_RETURN_IF_ERROR(SetOrAppend(step, 1, v));
    step.node->RemoveAttribute("ratio");
  }
  return GenericStep(step);
}

// Dropout's mask became bool at opset 10 (the input's type before). In
// inference the mask is all ones: an unused mask is dropped, a used one is
// the new mask cast to the old type (true <-> 1). `up`: 9 -> 10.
absl::Status DropoutMaskStep(Step& step, bool up) {
  ir::Value* mask = step.node->num_outputs() > 1 ? step.node->output(1) : nullptr;
  if (mask == nullptr || mask->name().empty()) return GenericStep(step);
  if (mask->IsGraphOutput()) return Block("the mask is a graph output, whose type would change");
  const bool used = mask->has_uses();
  ir::Value* x = step.node->input(0);
  // Rerouting a used mask removes the node when nothing reads its output.
  const ir::Value* y = step.node->output(0);
  const bool y_read = y != nullptr && (y->has_uses() || y->IsGraphOutput());
  std::optional<int32_t> x_type = ElemType(*x, *step.ctx);
  if (used && !up && !x_type) return Block("the mask is used and the input's type is unknown");
  std::vector<ir::Value*> inputs(step.node->inputs().begin(), step.node->inputs().end());
  std::vector<pb::AttributeProto> attrs;
  for (const ir::Attribute& a : step.node->attributes()) attrs.push_back(a.proto);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * d, AddBefore(step, "Dropout", inputs, used ? 2 : 1, std::move(attrs)));
  if (used) {
    const int32_t to = up ? x_type.value_or(pb::kFloat) : pb::kBool;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddBefore(step, "Cast", {d->output(1)}, 1, {IntAttr("to", to)}));
    TypeLike(step, d->output(1), up ? pb::kBool : x_type.value_or(pb::kFloat), x);
    TypeLike(step, cast->output(0), to, x);
    TypeLike(step, d->output(0), x_type.value_or(pb::kFloat), x);
    ONNXKIT_RETURN_IF_ERROR(ReplaceValue(*step.graph, mask, cast->output(0)));
    if (!y_read) {  // the node went with its mask
      step.replaced = true;
      return absl::OkStatus();
    }
  }
  TypeLike(step, d->output(0), x_type.value_or(pb::kFloat), x);
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, d->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status DropoutMaskUp10(Step& step) { return DropoutMaskStep(step, true); }
absl::Status DropoutMaskDown10(Step& step) { return DropoutMaskStep(step, false); }

absl::Status DropoutDown12(Step& step) {
  absl::StatusOr<std::optional<double>> ratio_or = ConstScalarInput(step, 1);
  if (!ratio_or.ok() && !IsBlock(ratio_or.status())) return ratio_or.status();
  const bool has_ratio = ratio_or.ok() && ratio_or->has_value();
  const double ratio = has_ratio ? **ratio_or : 0.0;
  if (step.node->num_inputs() > 2 && step.node->input(2) != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(std::optional<double> training, ConstScalarInput(step, 2));
    // Training with a constant ratio of 0 drops nothing (exporters write
    // that for a disabled dropout): the same as inference.
    const bool drops_nothing = has_ratio && ratio == 0.0;
    if (training && *training != 0 && !drops_nothing) {
      return Block(has_ratio
                       ? absl::StrCat("training_mode=true with ratio ", ratio,
                                      " draws a random mask; Dropout-10 has no training mode")
                       : "training_mode=true (the ratio not a constant 0) draws a random mask; Dropout-10 "
                         "has no training mode");
    }
  }
  // Not training, the ratio changes nothing: one fed at run time is dropped.
  while (step.node->num_inputs() > 1) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  if (has_ratio) step.node->SetAttribute(FloatAttr("ratio", static_cast<float>(ratio)));
  // Not training: the seed draws nothing.
  step.node->RemoveAttribute("seed");
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
