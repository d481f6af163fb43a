// Down-conversions of float16 where the older op takes float only:
//   QLinearMatMul-21, DequantizeLinear-19 with float16 scales: the
//       scales become float32
//       (constants converted, every float16 value is exact in float32;
//       a Cast otherwise); DequantizeLinear's float16 output comes back
//       through a Cast (exact for 8-bit x: (x - zero point) * scale needs
//       at most 22 significant bits, which float32 holds).
//   Range-27 on float16/bfloat16: Range in float between Casts.
// Before: %y = DequantizeLinear(%x:uint8, %s:float16, %zp)      (opset 19)
// After:  %f = DequantizeLinear(%x, %s32:float, %zp)            (opset 18)
//         %y = Cast[to=float16](%f)
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/reference/dispatch.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

bool IsHalf(Step& step, const ir::Value* v) {
  return v != nullptr && !v->name().empty() && ElemType(*v, *step.ctx).value_or(0) == pb::kFloat16;
}

// `v` (float16 or bfloat16) as float32: a converted constant, or a Cast.
absl::StatusOr<ir::Value*> AsFloat(Step& step, ir::Value* v) {
  if (IsConstantValue(*v)) {
    auto t = ConstantTensor(*v, *step.ctx);
    if (t.ok() && t->size() <= (int64_t{1} << 20)) {
      ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor f, runner::Tensor::Allocate(pb::kFloat, t->shape()));
      bool ok = true;
      for (int64_t i = 0; i < t->size() && ok; ++i) {
        std::optional<double> d = runner::reference::ElementAsDouble(*t, i);
        ok = d.has_value();
        if (ok) f.mutable_data<float>()[i] = static_cast<float>(*d);
      }
      if (ok) return AddConstant(*step.graph, absl::StrCat(v->name(), "_float"), f);
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * c, AddBefore(step, "Cast", {v}, 1, {IntAttr("to", pb::kFloat)}));
  return c->output(0);
}

// Replaces the float16 inputs at `indices` of the node by float32 ones.
absl::Status HalfInputsToFloat(Step& step, std::initializer_list<int> indices) {
  for (int i : indices) {
    if (i >= step.node->num_inputs() || !IsHalf(step, step.node->input(i))) continue;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * f, AsFloat(step, step.node->input(i)));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, f));
  }
  return absl::OkStatus();
}

bool IsEightBit(int32_t t) { return t == pb::kInt8 || t == pb::kUint8; }

}  // namespace

absl::Status QLinearMatMulHalfDown21(Step& step) {
  if (!IsHalf(step, step.node->input(1)) && !IsHalf(step, step.node->input(4)) &&
      !IsHalf(step, step.node->input(6))) {
    return GenericStep(step);
  }
  // The reference forms the float16 scales' product in float: the same
  // values in float32 give the same result.
  ONNXKIT_RETURN_IF_ERROR(HalfInputsToFloat(step, {1, 4, 6}));
  return GenericStep(step);
}

absl::Status QuantizeHalfDown19(Step& step) {
  const bool dequantize = step.node->op_type() == "DequantizeLinear";
  ir::Value* x = step.node->input(0);
  ir::Value* scale = step.node->num_inputs() > 1 ? step.node->input(1) : nullptr;
  if (!IsHalf(step, scale) && !IsHalf(step, x)) return GenericStep(step);
  if (!dequantize) {
    // x / scale rounded in float16 then to an integer is not always the
    // float quotient rounded to an integer.
    return Block("QuantizeLinear on float16 rounds its quotient in float16, which float does not reproduce");
  }
  if (!IsEightBit(ElemType(*x, *step.ctx).value_or(0))) {
    return Block("a float16 DequantizeLinear is exact in float only for 8-bit inputs");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AsFloat(step, scale));
  std::vector<ir::Value*> inputs(step.node->inputs().begin(), step.node->inputs().end());
  inputs[1] = s;
  std::vector<pb::AttributeProto> attrs;
  for (const ir::Attribute& a : step.node->attributes()) attrs.push_back(a.proto);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * dq, AddBefore(step, "DequantizeLinear", inputs, 1, attrs));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back,
                           AddBefore(step, "Cast", {dq->output(0)}, 1, {IntAttr("to", pb::kFloat16)}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, back->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

// The reference forms Range on float16/bfloat16 in float and rounds each
// element once, which the Cast back does too.
absl::Status RangeHalfDown27(Step& step) {
  const int32_t elem = ElemType(*step.node->input(0), *step.ctx).value_or(0);
  if (elem != pb::kFloat16 && elem != pb::kBfloat16) return GenericStep(step);
  std::vector<ir::Value*> inputs;
  for (int i = 0; i < 3; ++i) {
    if (i >= step.node->num_inputs() || step.node->input(i) == nullptr ||
        ElemType(*step.node->input(i), *step.ctx).value_or(0) != elem) {
      return Block("inputs of mixed types");
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * f, AsFloat(step, step.node->input(i)));
    inputs.push_back(f);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * r, AddBefore(step, "Range", inputs, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back,
                           AddBefore(step, "Cast", {r->output(0)}, 1, {IntAttr("to", elem)}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, back->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
