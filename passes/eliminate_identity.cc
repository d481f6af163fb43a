// eliminate-identity: removes nodes whose output equals one of their inputs.
// Before: %t = Identity(%x); %u = Transpose[perm=[0,1]](%t); %y = Add(%u, %zero)
// After:  graph outputs (%y) read %x directly (renamed as needed).
//
// The rules (each exact, also in the last bit, except that Add of +0 turns
// -0 into +0):
//   Identity; Dropout in inference (no training_mode, or constant false;
//   or training with a constant ratio of 0;
//   mask output unused); Cast / CastLike to the input's own element type;
//   Concat, Sum, Max, Min, Mean of one input; Reshape to the input's shape
//   (per dim: 0 copying it, the same known dim, at most one -1; or both
//   shapes fully known and equal); Expand to a shape that broadcasting leaves
//   unchanged; Transpose with an identity perm; Pad with all-zero pads;
//   Slice taking everything (steps 1, starts clamping to 0, ends to the dim);
//   Unsqueeze with empty axes; Squeeze without axes of an input with no dim
//   that is or may be 1; X + 0, 0 + X, X - 0, X * 1, 1 * X, X / 1, Pow(X, 1)
//   where the constant has X's element type and broadcasting it leaves X's
//   shape unchanged.
// Graph outputs keep their names (passes::ReplaceValue); a match whose
// replacement cannot take over the name is left alone.
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/base/status_macros.h"
#include "passes/eliminate_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

using Shape = std::optional<std::vector<int64_t>>;

// Integers from an attribute (older opsets) or an input (newer ones).
std::optional<std::vector<int64_t>> IntsFrom(const ir::Node& node, const char* attr, int input, PassContext& ctx) {
  if (std::optional<std::vector<int64_t>> v = node.GetInts(attr)) return v;
  if (input < node.num_inputs()) return ConstInts(node.input(input), ctx);
  return std::nullopt;
}

bool ReshapeKeeps(const ir::Node& node, PassContext& ctx) {
  const ir::Value& x = *node.input(0);
  std::optional<std::vector<int64_t>> shape = IntsFrom(node, "shape", 1, ctx);
  Shape dims = KnownShape(x, ctx);
  if (shape && dims && shape->size() == dims->size()) {
    bool allowzero = node.GetInt("allowzero").value_or(0) != 0;
    int inferred = 0;
    bool ok = true;
    for (size_t i = 0; i < shape->size() && ok; ++i) {
      int64_t s = (*shape)[i], d = (*dims)[i];
      if (s == -1) {
        ++inferred;
      } else if (!(s == 0 && !allowzero) && !(d >= 0 && s == d)) {
        ok = false;
      }
    }
    if (ok && inferred <= 1) return true;
  }
  return SameKnownShape(dims, KnownShape(*node.output(0), ctx));
}

bool ExpandKeeps(const ir::Node& node, PassContext& ctx) {
  if (node.num_inputs() < 2) return false;
  Shape dims = KnownShape(*node.input(0), ctx);
  std::optional<std::vector<int64_t>> shape = ConstInts(node.input(1), ctx);
  if (shape && BroadcastKeeps(dims, *shape)) return true;
  return SameKnownShape(dims, KnownShape(*node.output(0), ctx));
}

bool SliceTakesAll(const ir::Node& node, PassContext& ctx) {
  bool attrs = ctx.Opset("") < 10;
  auto starts = attrs ? node.GetInts("starts") : ConstInts(node.num_inputs() > 1 ? node.input(1) : nullptr, ctx);
  auto ends = attrs ? node.GetInts("ends") : ConstInts(node.num_inputs() > 2 ? node.input(2) : nullptr, ctx);
  Shape dims = KnownShape(*node.input(0), ctx);
  if (!starts || !ends || !dims || starts->size() != ends->size()) return false;
  const ir::Value* axes_in = !attrs && node.num_inputs() > 3 ? node.input(3) : nullptr;
  const ir::Value* steps_in = !attrs && node.num_inputs() > 4 ? node.input(4) : nullptr;
  auto axes = attrs ? node.GetInts("axes") : ConstInts(axes_in, ctx);
  auto steps = ConstInts(steps_in, ctx);
  if ((axes_in != nullptr || (attrs && node.FindAttribute("axes"))) && (!axes || axes->size() != starts->size())) {
    return false;
  }
  if (steps_in != nullptr && (!steps || steps->size() != starts->size())) return false;
  const int64_t rank = static_cast<int64_t>(dims->size());
  std::vector<bool> seen(dims->size(), false);
  for (size_t i = 0; i < starts->size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || seen[static_cast<size_t>(axis)]) return false;
    seen[static_cast<size_t>(axis)] = true;
    if (steps && (*steps)[i] != 1) return false;
    int64_t d = (*dims)[static_cast<size_t>(axis)], s = (*starts)[i], e = (*ends)[i];
    bool start_ok = s == 0 || (s < 0 && d >= 0 && s + d <= 0);
    bool end_ok = e == std::numeric_limits<int64_t>::max() || (d >= 0 && e >= d);
    if (!start_ok || !end_ok) return false;
  }
  return true;
}

bool PadIsZero(const ir::Node& node, PassContext& ctx) {
  std::optional<std::vector<int64_t>> pads =
      ctx.Opset("") < 11 ? (node.GetInts("pads") ? node.GetInts("pads") : node.GetInts("paddings"))
                         : ConstInts(node.num_inputs() > 1 ? node.input(1) : nullptr, ctx);
  if (!pads) return false;
  for (int64_t p : *pads) {
    if (p != 0) return false;
  }
  return true;
}

bool SqueezeKeeps(const ir::Node& node, PassContext& ctx) {
  std::optional<std::vector<int64_t>> axes = IntsFrom(node, "axes", 1, ctx);
  bool has_axes = node.FindAttribute("axes") != nullptr || (node.num_inputs() > 1 && node.input(1) != nullptr);
  if (has_axes && (!axes || !axes->empty())) return false;
  Shape dims = KnownShape(*node.input(0), ctx);
  if (!dims) return false;
  for (int64_t d : *dims) {
    if (d < 0 || d == 1) return false;
  }
  return true;
}

bool DropoutIsIdentity(const ir::Node& node, PassContext& ctx) {
  int64_t opset = ctx.Opset("");
  if (opset < 7) return node.GetInt("is_test").value_or(0) != 0;
  if (opset < 12 || node.num_inputs() < 3 || node.input(2) == nullptr) return true;
  if (IsConstantFalse(node.input(2), ctx)) return true;
  // Training with a constant ratio of 0 drops nothing (an exported disabled dropout).
  if (node.input(1) == nullptr || !IsConstantValue(*node.input(1))) return false;
  absl::StatusOr<runner::Tensor> ratio = ConstantTensor(*node.input(1), ctx);
  return ratio.ok() && ratio->size() == 1 && AllElementsEqual(*ratio, 0);
}

// Add/Sub/Mul/Div/Pow: the input index that passes through, or -1.
int ArithmeticPassThrough(const ir::Node& node, PassContext& ctx) {
  if (node.num_inputs() != 2 || node.input(0) == nullptr || node.input(1) == nullptr) return -1;
  const std::string& op = node.op_type();
  int neutral = (op == "Add" || op == "Sub") ? 0 : 1;
  bool commutative = op == "Add" || op == "Mul";
  for (int c = 1; c >= (commutative ? 0 : 1); --c) {
    const ir::Value& constant = *node.input(c);
    const ir::Value& x = *node.input(1 - c);
    if (!IsConstantValue(constant) || IsConstantValue(x)) continue;
    std::optional<int32_t> x_type = ElemType(x, ctx);
    Shape x_dims = KnownShape(x, ctx);
    const pb::TensorProto* proto = ConstantProto(constant);
    if (proto != nullptr && !BroadcastKeeps(x_dims, proto->dims)) continue;  // before reading the data
    absl::StatusOr<runner::Tensor> t = ConstantTensor(constant, ctx);
    if (!t.ok() || !x_type) continue;
    if (op != "Pow" && t->dtype() != *x_type) continue;
    if (!BroadcastKeeps(x_dims, t->shape())) continue;
    if (AllElementsEqual(*t, neutral)) return 1 - c;
  }
  return -1;
}

// The index of the input that output 0 of `node` equals, or -1.
int PassThroughInput(const ir::Node& node, PassContext& ctx) {
  if (!IsStandardOp(node) || node.num_inputs() < 1 || node.input(0) == nullptr || node.num_outputs() < 1) return -1;
  const std::string& op = node.op_type();
  if (op == "Identity") return 0;
  if (op == "Dropout") return DropoutIsIdentity(node, ctx) ? 0 : -1;
  if (op == "Concat" || op == "Sum" || op == "Max" || op == "Min" || op == "Mean") {
    return node.num_inputs() == 1 ? 0 : -1;
  }
  if (op == "Cast") {
    std::optional<int32_t> from = ElemType(*node.input(0), ctx);
    return from && node.GetInt("to") == *from ? 0 : -1;
  }
  if (op == "CastLike") {
    if (node.num_inputs() != 2 || node.input(1) == nullptr) return -1;
    std::optional<int32_t> from = ElemType(*node.input(0), ctx);
    return from && ElemType(*node.input(1), ctx) == from ? 0 : -1;
  }
  if (op == "Reshape") return ReshapeKeeps(node, ctx) ? 0 : -1;
  if (op == "Expand") return ExpandKeeps(node, ctx) ? 0 : -1;
  if (op == "Pad") return PadIsZero(node, ctx) ? 0 : -1;
  if (op == "Slice") return SliceTakesAll(node, ctx) ? 0 : -1;
  if (op == "Squeeze") return SqueezeKeeps(node, ctx) ? 0 : -1;
  if (op == "Unsqueeze") {
    std::optional<std::vector<int64_t>> axes = IntsFrom(node, "axes", 1, ctx);
    return axes && axes->empty() ? 0 : -1;
  }
  if (op == "Transpose") {
    Shape dims = KnownShape(*node.input(0), ctx);
    auto perm = TransposePerm(node, dims ? static_cast<int64_t>(dims->size()) : -1);
    return perm && IsIdentityPerm(*perm) ? 0 : -1;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") {
    return ArithmeticPassThrough(node, ctx);
  }
  return -1;
}

// Output 0 can be replaced by `x`; every other output is unused.
bool CanRemove(const ir::Node& node, const ir::Value& x) {
  for (int i = 1; i < node.num_outputs(); ++i) {
    const ir::Value* out = node.output(i);
    if (out != nullptr && (out->has_uses() || out->IsGraphOutput())) return false;
  }
  return node.output(0) != nullptr && CanReplace(*node.output(0), x);
}

class EliminateIdentity : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    // Each rewrite removes only the node it is at.
    for (ir::Node* node : SnapshotNodes(graph)) {
      int index = PassThroughInput(*node, ctx);
      if (index < 0) continue;
      ir::Value* x = node->input(index);
      if (x == nullptr || !CanRemove(*node, *x)) continue;
      if (!ctx.Allow(*node, node->op_type() + " that changes nothing")) continue;
      ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, node->output(0), x));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateEliminateIdentity() { return std::make_unique<EliminateIdentity>(); }

}  // namespace onnxkit::passes
