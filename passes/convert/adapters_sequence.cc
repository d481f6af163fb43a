// Going down across the sequence-model ops of opset 27:
//
//   CausalConvWithState, expanded as its function body computes it:
//     padded  = Concat(past_state, input) along the length (zeros in front,
//               by Pad, when past_state is absent)
//     output  = Conv[group = channels](padded, weight, bias), then
//               x * Sigmoid(x) for activation "silu" / "swish" (in float32
//               for float16 and bfloat16 inputs)
//     present_state = the last kernel_size - 1 steps of padded
//   Written for opset 26; the channel count (Conv's group) must be known.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {

absl::Status ExpandCausalConv(Step& step) {
  ir::Value* x = PresentInput(step, 0);
  ir::Value* w = PresentInput(step, 1);
  if (x == nullptr || w == nullptr) return Block("input and weight are required");
  ir::Value* bias = PresentInput(step, 2);
  ir::Value* past = PresentInput(step, 3);
  std::optional<int32_t> t = ElemType(*x, *step.ctx);
  if (!t || (*t != pb::kFloat && *t != pb::kFloat16 && *t != pb::kBfloat16))
    return Block("the expansion needs a float, float16 or bfloat16 input of known type");
  const std::string activation = step.node->GetString("activation").value_or("none");
  const bool silu = activation == "silu" || activation == "swish";
  if (!silu && activation != "none")
    return Block(absl::StrCat("activation '", activation, "' is not one of none, silu, swish"));
  std::optional<int64_t> channels = KnownDim(step, w, 0);
  if (!channels) channels = KnownDim(step, x, 1);
  if (!channels || *channels < 1) return Block("the channel count (the Conv's group) is not known");
  // kernel_size - 1, as a 1-D int64 value, where the kernel size is known
  // only at run time.
  const std::optional<int64_t> kernel_size = KnownDim(step, w, 2);
  if (kernel_size && *kernel_size < 1) return Block("the kernel size must be at least 1");
  ir::Value* km1 = nullptr;
  if (!kernel_size) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddInts(step, "one", {1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kernel, Dims(step, w, 2, 3));
    ONNXKIT_ASSIGN_OR_RETURN(km1, Op(step, "Sub", {kernel, one}));
  }
  ir::Value* padded = nullptr;
  if (past != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(padded, Op(step, "Concat", {past, x}, {IntAttr("axis", 2)}));
  } else {
    ir::Value* pads = nullptr;
    if (kernel_size) {
      ONNXKIT_ASSIGN_OR_RETURN(pads, AddInts(step, "pads", {0, 0, *kernel_size - 1, 0, 0, 0}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lead, AddInts(step, "pads_lead", {0, 0}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * tail, AddInts(step, "pads_tail", {0, 0, 0}));
      ONNXKIT_ASSIGN_OR_RETURN(pads, Op(step, "Concat", {lead, km1, tail}, {IntAttr("axis", 0)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(padded, Op(step, "Pad", {x, pads}));
  }
  std::vector<ir::Value*> conv_inputs = {padded, w};
  if (bias != nullptr) conv_inputs.push_back(bias);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Conv", conv_inputs, {IntAttr("group", *channels)}));
  if (silu) {
    ir::Value* f = y;
    if (*t != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(f, Op(step, "Cast", {y}, {IntAttr("to", pb::kFloat)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * gate, Op(step, "Sigmoid", {f}));
    ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Mul", {f, gate}));
    if (*t != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Cast", {y}, {IntAttr("to", *t)}));
    }
  }
  // present_state = padded[:, :, length - (kernel_size - 1):]: constant
  // bounds when the kernel size is known (Slice takes them as attributes
  // below opset 10), else computed.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axes, AddInts(step, "axes", {2}));
  ir::Value* present = nullptr;
  if (kernel_size) {
    // The last k - 1 steps; none for k = 1 (a start past the end).
    const int64_t k = *kernel_size;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * start, AddInts(step, "starts", {k > 1 ? 1 - k : INT64_MAX}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * end, AddInts(step, "ends", {INT64_MAX}));
    ONNXKIT_ASSIGN_OR_RETURN(present, Op(step, "Slice", {padded, start, end, axes}));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * length, Dims(step, padded, 2, 3));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * start, Op(step, "Sub", {length, km1}));
    ONNXKIT_ASSIGN_OR_RETURN(present, Op(step, "Slice", {padded, start, length, axes}));
  }
  return ReplaceNodeOutputs(step, y, {{1, present}});
}

}  // namespace onnxkit::passes::convert
