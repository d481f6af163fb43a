// Down-conversions that rewrite a node with older ops where the older
// version of the op cannot say the same thing directly:
//   Softmax/LogSoftmax/Hardmax-13, axis k not last (rank known)
//       -> Transpose(k <-> last), op[axis = rank-1], Transpose back
//   Slice-10 steps other than 1 (static input shape, constant inputs)
//       -> Slice-1 for the unit-step axes, Gather of the index list per stepped axis
//   Equal-11 on floats (Equal-7 takes bool and integers only)
//       -> And(Not(Or(Less(a, b), Greater(a, b))), And(NotNaN(a), NotNaN(b)))
//          NotNaN(v) = Or(Less(v, +inf), Greater(v, -inf))
//   Pow-12 with integer or mixed inputs (Pow-7: one float type)
//       -> Cast to double, Pow, Cast back to the base's type
//   Max/Min-12 on int64/uint64 (Max-8 is float-only, no exact wider type)
//       -> Where(Greater(a, b), a, b) chains (Less for Min)
//   RNN/GRU/LSTM-14 layout=1 -> Transposes of X and the initial states to
//       sequence-first, layout 0, Transposes of Y/Y_h/Y_c back
//   DepthToSpace-11 mode=CRD (C, H, W known)
//       -> Reshape [N, C/b², b, b, H, W], Transpose [0,1,4,2,5,3], Reshape
//   MaxPool-10 ceil_mode=1 (static spatial dims) -> MaxPool-8 with extra end
//       padding so that the floor count equals the ceil count (windows
//       starting in the end padding dropped, as the spec says)
// Each refuses (Block) what it cannot show to be the same.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

absl::Status Finish(Step& step, ir::Node* last) {
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, last->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

bool IsFloatType(int32_t t) { return t == pb::kFloat || t == pb::kDouble || t == pb::kFloat16; }

// A scalar +inf or -inf of a float type.
absl::StatusOr<ir::Value*> AddInfinity(Step& step, int32_t dtype, bool negative) {
  const double inf = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (dtype != pb::kFloat16) return AddScalar(step, negative ? "minus_inf" : "plus_inf", dtype, inf);
  const uint16_t bits = negative ? 0xFC00 : 0x7C00;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(pb::kFloat16, {}));
  std::memcpy(t.mutable_raw(), &bits, sizeof(bits));
  return AddConstant(*step.graph, negative ? "minus_inf" : "plus_inf", t);
}

absl::StatusOr<ir::Value*> CastTo(Step& step, ir::Value* v, int32_t to) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * c, AddBefore(step, "Cast", {v}, 1, {IntAttr("to", to)}));
  return c->output(0);
}

absl::StatusOr<ir::Value*> Transposed(Step& step, ir::Value* v, const std::vector<int64_t>& perm) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * t, AddBefore(step, "Transpose", {v}, 1, {IntsAttr("perm", perm)}));
  return t->output(0);
}

// NotNaN(v) = Or(Less(v, +inf), Greater(v, -inf)): false only for NaN.
absl::StatusOr<ir::Value*> NotNaN(Step& step, ir::Value* v, int32_t dtype) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pinf, AddInfinity(step, dtype, false));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ninf, AddInfinity(step, dtype, true));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * lt, AddBefore(step, "Less", {v, pinf}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * gt, AddBefore(step, "Greater", {v, ninf}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * o, AddBefore(step, "Or", {lt->output(0), gt->output(0)}, 1));
  return o->output(0);
}

// The indices Slice takes along one axis of length `dim` (ONNX clamping).
absl::StatusOr<std::vector<int64_t>> SliceIndices(int64_t dim, int64_t start, int64_t end, int64_t stride) {
  if (stride == 0) return Block("a slice step of 0");
  if (dim == 0) return std::vector<int64_t>{};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (stride > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  // Both bounds lie in [-1, dim]: their distance does not overflow.
  const int64_t span = stride > 0 ? end - start : start - end;
  const int64_t mag = stride > 0 ? stride : (stride == std::numeric_limits<int64_t>::min() ? dim + 1 : -stride);
  const int64_t count = span <= 0 ? 0 : span / mag + (span % mag != 0 ? 1 : 0);
  if (count > (int64_t{1} << 20)) return Block("the stepped slice has too many indices to list");
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.push_back(stride > 0 ? start + k * mag : start - k * mag);
  return out;
}

}  // namespace

// The plain cases, in their own files (no longer rows of adapters.def).
absl::Status SoftmaxDown13(Step& step);
absl::Status SliceInputsToAttrs(Step& step);

absl::Status SoftmaxAnyAxisDown13(Step& step) {
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  int64_t axis = step.node->GetInt("axis").value_or(-1);
  if (!rank || *rank < 1) return SoftmaxDown13(step);
  if (axis < 0) axis += *rank;
  if (axis < 0 || axis >= *rank) return Block("axis out of range");
  if (axis == *rank - 1) return SoftmaxDown13(step);
  // The axis moves last and back: a swap is its own inverse.
  std::vector<int64_t> perm(static_cast<size_t>(*rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(axis)], perm.back());
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, Transposed(step, step.node->input(0), perm));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * s,
                           AddBefore(step, step.node->op_type(), {t}, 1, {IntAttr("axis", *rank - 1)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * back, Transposed(step, s->output(0), perm));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, back));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status SliceStepsDown10(Step& step) {
  std::optional<std::vector<int64_t>> steps = ConstInts(step, 4);
  if (!steps || std::all_of(steps->begin(), steps->end(), [](int64_t s) { return s == 1; })) {
    return SliceInputsToAttrs(step);
  }
  ir::Value* x = step.node->input(0);
  std::optional<std::vector<int64_t>> shape = KnownShape(*x, *step.ctx);
  if (!shape || std::any_of(shape->begin(), shape->end(), [](int64_t d) { return d < 0; })) {
    return Block("steps other than 1 need a static input shape below opset 10");
  }
  std::optional<std::vector<int64_t>> starts = ConstInts(step, 1);
  std::optional<std::vector<int64_t>> ends = ConstInts(step, 2);
  if (!starts || !ends) return Block("steps other than 1 need constant starts and ends below opset 10");
  const int64_t rank = static_cast<int64_t>(shape->size());
  std::vector<int64_t> axes(starts->size());
  std::iota(axes.begin(), axes.end(), 0);
  if (step.node->num_inputs() > 3 && step.node->input(3) != nullptr) {
    std::optional<std::vector<int64_t>> a = ConstInts(step, 3);
    if (!a) return Block("steps other than 1 need constant axes below opset 10");
    axes = *a;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() || steps->size() != starts->size()) {
    return Block("starts, ends, axes and steps differ in length");
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  std::vector<int64_t> s_axes, s_starts, s_ends;  // unit steps: Slice-1
  std::vector<std::pair<int64_t, std::vector<int64_t>>> gathers;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank || seen[static_cast<size_t>(axis)]) return Block("axes out of range or repeated");
    seen[static_cast<size_t>(axis)] = true;
    const int64_t dim = (*shape)[static_cast<size_t>(axis)];
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, SliceIndices(dim, (*starts)[i], (*ends)[i], (*steps)[i]));
    if ((*steps)[i] == 1) {
      s_axes.push_back(axis);
      s_starts.push_back(idx.empty() ? 0 : idx.front());
      s_ends.push_back(idx.empty() ? 0 : idx.back() + 1);
    } else {
      gathers.emplace_back(axis, std::move(idx));
    }
  }
  ir::Value* cur = x;
  if (!s_axes.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sl, AddBefore(step, "Slice", {cur}, 1,
                                                      {IntsAttr("starts", s_starts), IntsAttr("ends", s_ends),
                                                       IntsAttr("axes", s_axes)}));
    cur = sl->output(0);
  }
  ir::Node* last = nullptr;
  for (auto& [axis, idx] : gathers) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * indices, AddInts(step, "slice_indices", idx));
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Gather", {cur, indices}, 1, {IntAttr("axis", axis)}));
    cur = last->output(0);
  }
  return Finish(step, last);
}

absl::Status EqualFloatDown11(Step& step) {
  ir::Value* a = step.node->input(0);
  ir::Value* b = step.node->input(1);
  std::optional<int32_t> ta = ElemType(*a, *step.ctx);
  std::optional<int32_t> tb = ElemType(*b, *step.ctx);
  // Both inputs are of one type T: one known is enough.
  if (!ta) ta = tb;
  if (!tb) tb = ta;
  // Integers and bool: the generic step (and widening, for the integer
  // types Equal-7 lacks).
  if (!ta || !tb || !IsFloatType(*ta) || !IsFloatType(*tb)) return GenericStep(step);
  if (*ta != *tb) return Block("inputs of different float types");
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * lt, AddBefore(step, "Less", {a, b}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * gt, AddBefore(step, "Greater", {a, b}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * ne, AddBefore(step, "Or", {lt->output(0), gt->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * eq, AddBefore(step, "Not", {ne->output(0)}, 1));
  // Less and Greater are both false on NaN: NaN != NaN needs the NaN test.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * na, NotNaN(step, a, *ta));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * nb, NotNaN(step, b, *tb));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * both, AddBefore(step, "And", {na, nb}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "And", {eq->output(0), both->output(0)}, 1));
  return Finish(step, y);
}

absl::Status PowDown12(Step& step) {
  ir::Value* a = step.node->input(0);
  ir::Value* b = step.node->input(1);
  std::optional<int32_t> ta = ElemType(*a, *step.ctx);
  std::optional<int32_t> tb = ElemType(*b, *step.ctx);
  if (!ta || !tb || (IsFloatType(*ta) && *ta == *tb)) return GenericStep(step);
  const auto castable = [](int32_t t) { return IsFloatType(t) || t == pb::kInt32 || t == pb::kInt64; };
  if (!castable(*ta) || !castable(*tb)) return Block("Pow-7 takes one float type, and these inputs have none");
  // Every int32 and float value is exact in double, and the reference
  // computes every Pow-12 in double; an integer power is exact where it
  // fits its type (int64: within 2^53).
  ir::Value* da = a;
  ir::Value* db = b;
  if (*ta != pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(da, CastTo(step, a, pb::kDouble));
  }
  if (*tb != pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(db, CastTo(step, b, pb::kDouble));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * p, AddBefore(step, "Pow", {da, db}, 1));
  ir::Node* y = p;
  if (*ta != pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(y, AddBefore(step, "Cast", {p->output(0)}, 1, {IntAttr("to", *ta)}));
  }
  return Finish(step, y);
}

absl::Status MaxMinInt64Down12(Step& step) {
  bool wide = false;
  for (ir::Value* v : step.node->inputs()) {
    if (v == nullptr) continue;
    std::optional<int32_t> t = ElemType(*v, *step.ctx);
    wide |= t && (*t == pb::kInt64 || *t == pb::kUint64);
  }
  // Other types: the generic step, or widening into a type Max-8 takes.
  if (!wide) return GenericStep(step);
  const std::string cmp = step.node->op_type() == "Max" ? "Greater" : "Less";
  ir::Value* cur = nullptr;
  ir::Node* last = nullptr;
  for (ir::Value* v : step.node->inputs()) {
    if (v == nullptr) continue;
    if (cur == nullptr) {
      cur = v;
      continue;
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * c, AddBefore(step, cmp, {cur, v}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Where", {c->output(0), cur, v}, 1));
    cur = last->output(0);
  }
  if (last == nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Identity", {cur}, 1));
  }
  return Finish(step, last);
}

// RNN/GRU/LSTM layout=1 (batch first) below 14: the op runs sequence
// first between Transposes.
absl::Status RnnLayoutDown14(Step& step) {
  ir::Node& node = *step.node;
  if (node.GetInt("layout").value_or(0) == 0) {
    node.RemoveAttribute("layout");
    return GenericStep(step);
  }
  std::vector<pb::AttributeProto> attrs;
  for (const ir::Attribute& at : node.attributes()) {
    if (at.g || !at.graphs.empty()) return Block("unexpected graph attribute");
    if (at.name() != "layout") attrs.push_back(at.proto);
  }
  // Inputs: X [batch, seq, in] and initial_h/initial_c [batch, dirs, hidden]
  // swap their first two axes; the others (weights, lengths) stay.
  std::vector<ir::Value*> inputs(node.inputs().begin(), node.inputs().end());
  const std::string& op = node.op_type();
  std::vector<size_t> moved = {0, 5};
  if (op == "LSTM") moved.push_back(6);
  for (size_t i : moved) {
    if (i >= inputs.size() || inputs[i] == nullptr || inputs[i]->name().empty()) continue;
    std::optional<int64_t> rank = RankOf(step, inputs[i]);
    if (rank && *rank != 3) return Block("layout=1 input of rank other than 3");
    ONNXKIT_ASSIGN_OR_RETURN(inputs[i], Transposed(step, inputs[i], {1, 0, 2}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * seq, AddBefore(step, op, inputs, node.num_outputs(), attrs));
  // Outputs: Y [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden];
  // Y_h/Y_c [dirs, batch, hidden] -> [batch, dirs, hidden].
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (int i = 0; i < node.num_outputs(); ++i) {
    ir::Value* o = node.output(i);
    if (o == nullptr || o->name().empty() || (!o->has_uses() && !o->IsGraphOutput())) continue;
    std::vector<int64_t> perm = i == 0 ? std::vector<int64_t>{2, 0, 1, 3} : std::vector<int64_t>{1, 0, 2};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, Transposed(step, seq->output(i), perm));
    if (o->IsGraphOutput()) renames.emplace_back(r, o->name());
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(o, r));
  }
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveNode(&node));
  for (auto& [v, name] : renames) ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(v, name));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status DepthToSpaceCrdDown11(Step& step) {
  if (step.node->GetString("mode").value_or("DCR") != "CRD") {
    step.node->RemoveAttribute("mode");
    return GenericStep(step);
  }
  ir::Value* x = step.node->input(0);
  std::optional<std::vector<int64_t>> shape = KnownShape(*x, *step.ctx);
  const int64_t b = step.node->GetInt("blocksize").value_or(0);
  if (!shape || shape->size() != 4) return Block("mode=CRD needs a 4-D input of known rank below opset 11");
  const int64_t c = (*shape)[1], h = (*shape)[2], w = (*shape)[3];
  if (c < 0 || h < 0 || w < 0) return Block("mode=CRD needs known channel and spatial dims below opset 11");
  if (h > (int64_t{1} << 40) || w > (int64_t{1} << 40)) return Block("spatial dims out of range");
  if (b <= 0 || b > (int64_t{1} << 16) || c % (b * b) != 0) return Block("blocksize does not divide the channels");
  // Dim 0 of a Reshape-5 shape copies the batch.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s6, AddInts(step, "crd_shape", {0, c / (b * b), b, b, h, w}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s4, AddInts(step, "crd_out_shape", {0, c / (b * b), h * b, w * b}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * r6, AddBefore(step, "Reshape", {x, s6}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, Transposed(step, r6->output(0), {0, 1, 4, 2, 5, 3}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * r4, AddBefore(step, "Reshape", {t, s4}, 1));
  return Finish(step, r4);
}

absl::Status MaxPoolCeilDown10(Step& step) {
  ir::Node& node = *step.node;
  if (node.GetInt("ceil_mode").value_or(0) == 0) return GenericStep(step);
  const std::string auto_pad = node.GetString("auto_pad").value_or("NOTSET");
  if (auto_pad != "NOTSET") return Block("ceil_mode=1 with auto_pad has no MaxPool-8 equivalent");
  std::optional<std::vector<int64_t>> shape = KnownShape(*node.input(0), *step.ctx);
  const ir::Attribute* ks = node.FindAttribute("kernel_shape");
  if (ks == nullptr || ks->proto.ints.empty()) return Block("kernel_shape is missing");
  const std::vector<int64_t> kernel = ks->proto.ints;
  const size_t n = kernel.size();
  if (!shape || shape->size() != n + 2) return Block("ceil_mode=1 needs the input rank below opset 10");
  std::vector<int64_t> strides(n, 1), pads(2 * n, 0), dilations(n, 1);
  if (const ir::Attribute* a = node.FindAttribute("strides"); a != nullptr && !a->proto.ints.empty()) strides = a->proto.ints;
  if (const ir::Attribute* a = node.FindAttribute("pads"); a != nullptr && !a->proto.ints.empty()) pads = a->proto.ints;
  if (const ir::Attribute* a = node.FindAttribute("dilations"); a != nullptr && !a->proto.ints.empty()) {
    dilations = a->proto.ints;
  }
  if (strides.size() != n || pads.size() != 2 * n || dilations.size() != n) return Block("attribute lengths differ");
  for (int64_t d : dilations) {
    if (d != 1) return Block("dilations other than 1 have no MaxPool-8 equivalent");
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = (*shape)[i + 2], s = strides[i], k = kernel[i], d = dilations[i];
    const int64_t pb = pads[i], pe = pads[i + n];
    if (in < 0) return Block("ceil_mode=1 needs static spatial dims below opset 10");
    if (s <= 0 || k <= 0 || d <= 0 || pb < 0 || pe < 0 || k > (int64_t{1} << 20) || d > (int64_t{1} << 20) ||
        in > (int64_t{1} << 40) || s > (int64_t{1} << 20) || pb > (int64_t{1} << 20) || pe > (int64_t{1} << 20)) {
      return Block("pool attributes out of range");
    }
    const int64_t eff = (k - 1) * d + 1;
    const int64_t total = in + pb + pe - eff;
    if (total < 0) return Block("the window is larger than the padded input");
    int64_t out = (total + s - 1) / s + 1;
    // A last window that would start in the end padding is dropped.
    if ((out - 1) * s >= in + pb) --out;
    const int64_t extra = std::max<int64_t>(0, (out - 1) * s + eff - (in + pb + pe));
    if ((total + extra) / s + 1 != out || pe >= eff) return Block("the ceil count has no floor-mode padding");
    pads[i + n] = pe + extra;
  }
  node.SetAttribute(IntsAttr("pads", pads));
  node.RemoveAttribute("ceil_mode");
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
