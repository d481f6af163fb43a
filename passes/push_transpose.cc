// push-transpose: moves a Transpose below the op that reads it when the op
// does not care about the layout (element-wise ops, reductions, Softmax,
// ArgMax, Concat, Pad, Slice, Resize), so that layout changes meet and cancel. Exporters that
// work in NHWC (TensorFlow, Keras, TFLite converters) write every
// convolution as Transpose -> Conv -> Transpose, with the activations and
// bias additions in between; pushed down, each NCHW->NHWC Transpose reaches
// the next NHWC->NCHW one and merge-transpose removes both.
// Before: %t = Transpose[perm=p](%x); %y = Relu(%t)
// After:  %u = Relu(%x);              %y = Transpose[perm=p](%u)
// Before: %t = Transpose[perm=p](%x); %y = Add(%t, %c)          (%c constant)
// After:  %u = Add(%x, %c');          %y = Transpose[perm=p](%u)
//         (%c' = %c with leading 1s to the rank, transposed by p's inverse)
// Before: %t = Transpose[perm=p](%x); %y = ReduceMean[axes=a, keepdims=0](%t)
// After:  %y = ReduceMean[axes=p[a], keepdims=0](%x), then Transpose[q] over
//         the kept dims unless q is the identity (NHWC -> global pooling).
//
// Decisions:
//   - Only when the Transpose's output has this one consumer (and is no
//     graph output): a Transpose that others still read would stay, and the
//     pushed copy would be one more. Except when one of its readers is a
//     Transpose undoing it and every other one could take it: then each
//     reader gets a copy, the undoing pair vanishes and the rest are pushed
//     (fewer Transposes in all).
//   - The op's other inputs must not need a Transpose of their own: absent,
//     constants (transposed here once; a one-element one of rank <= the
//     op's is left as it is), values whose every dim is 1 (rank <= the
//     op's), or Transposes with the same perm that only this op reads
//     (their inputs are read instead). Anything else stops the push
//     (the number of Transposes would grow).
//   - Element-wise ops: the unary ones, Clip (bounds are scalars), Cast,
//     the broadcasting binary ones and Where, Sum/Max/Min/Mean, PRelu,
//     QuantizeLinear per tensor or per axis (the axis follows the perm;
//     blocked ones stay). Not DequantizeLinear: its float output is larger
//     than its input, and QDQ runtimes look for DequantizeLinear feeding the
//     op it quantizes (a Transpose between would break that up). Pad,
//     Slice and Resize (11 on) with their per-dim lists or axes constant:
//     the lists are reordered (or the axes moved). Reductions with their axes as an
//     attribute or a constant input, ArgMax/ArgMin, Softmax/LogSoftmax/
//     Hardmax from opset 13 (before, they flatten from the axis on), Concat.
//   - A reduction of every axis (no axes, noop_with_empty_axes 0) needs no
//     Transpose after it at all.
//   - Going up instead: a Transpose between a Pad and a Conv or AveragePool
//     (NHWC exports pad before the layout change) goes above the Pad, so
//     that fuse-pad folds the Pad into the pool or convolution; a Pad
//     feeding one is never pushed below (the two would undo each other).
//   - Reductions may sum in another order afterwards (the same elements):
//     results can differ in the last bits, so the pass is marked as one
//     that may change numerics.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "passes/eliminate_util.h"
#include "passes/fuse_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool IsUnary(const std::string& op) {
  static const std::set<std::string, std::less<>> kOps = {
      "Relu",    "LeakyRelu", "Sigmoid",  "HardSigmoid", "HardSwish", "Tanh", "Exp",   "Log",    "Abs",
      "Neg",     "Sqrt",      "Reciprocal", "Erf",       "Gelu",      "Elu",  "Selu",  "Celu",   "Softplus",
      "Softsign", "Floor",    "Ceil",     "Round",       "Sign",      "Sin",  "Cos",   "Tan",    "Asin",
      "Acos",    "Atan",      "Sinh",     "Cosh",        "Asinh",     "Acosh", "Atanh", "Not",   "IsNaN",
      "IsInf",   "Cast",      "Identity", "Mish",        "ThresholdedRelu", "Shrink", "Clip", "BitwiseNot"};
  return kOps.count(op) > 0;
}

bool IsBroadcasting(const std::string& op) {
  static const std::set<std::string, std::less<>> kOps = {
      "Add",   "Sub",     "Mul",          "Div", "Pow",  "Max",  "Min",  "Sum",  "Mean",       "Equal",
      "Less",  "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Mod", "BitShift",
      "PRelu", "BitwiseAnd", "BitwiseOr", "BitwiseXor"};
  return kOps.count(op) > 0;
}

bool IsReduce(const std::string& op) {
  static const std::set<std::string, std::less<>> kOps = {"ReduceMean", "ReduceSum",     "ReduceMax",
                                                          "ReduceMin",  "ReduceProd",    "ReduceL1",
                                                          "ReduceL2",   "ReduceLogSum",  "ReduceLogSumExp",
                                                          "ReduceSumSquare"};
  return kOps.count(op) > 0;
}

// The opset from which a reduction takes its axes as an input.
int64_t AxesInputSince(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

// A node fuse-pad folds a Pad into.
bool IsPadTarget(const ir::Node* node) {
  return node != nullptr && (IsOp(*node, "Conv") || IsOp(*node, "AveragePool"));
}

// What the op becomes once it reads the Transpose's input.
struct Plan {
  ir::Node* transpose = nullptr;
  ir::Node* op = nullptr;
  std::vector<ir::Value*> inputs;                    // null: absent, or made from new_constants
  std::vector<std::optional<runner::Tensor>> new_constants;  // per input
  std::vector<ir::Node*> absorbed;                   // same-perm Transposes of other inputs
  std::vector<pb::AttributeProto> attributes;
  std::optional<std::vector<int64_t>> after;         // the Transpose after the op; none when nullopt
};

std::vector<int64_t> Inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

// `c` with leading 1s up to `rank`, transposed by `perm` (out dim j is dim
// perm[j]); nullopt for types it cannot copy as whole bytes.
std::optional<runner::Tensor> TransposeConstant(const runner::Tensor& c, size_t rank,
                                                const std::vector<int64_t>& perm) {
  const int bits = DataTypeBits(c.dtype());
  if (c.is_string() || (bits != 8 && bits != 16 && bits != 32 && bits != 64)) return std::nullopt;
  const size_t esize = static_cast<size_t>(bits / 8);
  std::vector<int64_t> ext(rank - static_cast<size_t>(c.rank()), 1);
  ext.insert(ext.end(), c.shape().begin(), c.shape().end());
  std::vector<int64_t> out_shape(rank), in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * ext[d];
  for (size_t j = 0; j < rank; ++j) out_shape[j] = ext[static_cast<size_t>(perm[j])];
  absl::StatusOr<runner::Tensor> out = runner::Tensor::AllocateUninitialized(c.dtype(), out_shape);
  if (!out.ok()) return std::nullopt;
  const auto* src = static_cast<const unsigned char*>(c.raw());
  auto* dst = static_cast<unsigned char*>(out->mutable_raw());
  std::vector<int64_t> coord(rank, 0);
  for (int64_t i = 0; i < out->size(); ++i) {
    int64_t offset = 0;
    for (size_t j = 0; j < rank; ++j) offset += coord[j] * in_strides[static_cast<size_t>(perm[j])];
    std::memcpy(dst + static_cast<size_t>(i) * esize, src + static_cast<size_t>(offset) * esize, esize);
    for (size_t j = rank; j-- > 0;) {
      if (++coord[j] < out_shape[j]) break;
      coord[j] = 0;
    }
  }
  return *std::move(out);
}

// A 1-D int64 tensor holding `values` (new axes or pads); nullopt when it
// cannot be allocated.
std::optional<runner::Tensor> Int64List(const std::vector<int64_t>& values) {
  absl::StatusOr<runner::Tensor> t =
      runner::Tensor::AllocateUninitialized(pb::kInt64, {static_cast<int64_t>(values.size())});
  if (!t.ok()) return std::nullopt;
  std::copy(values.begin(), values.end(), t->mutable_data<int64_t>());
  return *std::move(t);
}

// The attributes of `node` with `replaced` taking the place of those of the
// same name.
std::vector<pb::AttributeProto> AttributesWith(const ir::Node& node,
                                               std::vector<pb::AttributeProto> replaced) {
  std::vector<pb::AttributeProto> out;
  for (const ir::Attribute& a : node.attributes()) {
    bool is_replaced = false;
    for (const pb::AttributeProto& r : replaced) is_replaced = is_replaced || r.name == a.proto.name;
    if (!is_replaced) out.push_back(a.proto);
  }
  for (pb::AttributeProto& r : replaced) out.push_back(std::move(r));
  return out;
}

class Planner {
 public:
  Planner(ir::Graph& graph, PassContext& ctx) : graph_(graph), ctx_(ctx) {}

  // The perm of Transpose `t` (nullopt when it is no plain Transpose or its
  // perm is unknown, empty or the identity).
  std::optional<std::vector<int64_t>> PermOf(const ir::Node& t) const {
    if (!IsOp(t, "Transpose") || t.num_inputs() != 1 || t.input(0) == nullptr || t.num_outputs() != 1 ||
        t.output(0) == nullptr) {
      return std::nullopt;
    }
    std::optional<std::vector<int64_t>> x_shape = KnownShape(*t.input(0), ctx_);
    std::optional<std::vector<int64_t>> perm =
        TransposePerm(t, x_shape ? static_cast<int64_t>(x_shape->size()) : -1);
    if (!perm || perm->empty() || IsIdentityPerm(*perm)) return std::nullopt;
    return perm;
  }

  // The push of Transpose `t` below its sole reader.
  std::optional<Plan> Match(ir::Node* t) {
    if (!PermOf(*t)) return std::nullopt;
    ir::Node* op = SoleConsumer(*t->output(0));
    if (op == nullptr) return std::nullopt;
    return MatchReader(t, op);
  }

  // The push of Transpose `t` below `op`, one of its readers (reading it once).
  std::optional<Plan> MatchReader(ir::Node* t, ir::Node* op) {
    if (op->graph() != &graph_ || !IsStandardOp(*op) || op->num_outputs() != 1 || op->output(0) == nullptr) {
      return std::nullopt;
    }
    std::optional<std::vector<int64_t>> perm = PermOf(*t);
    if (!perm) return std::nullopt;
    perm_ = *perm;
    Plan plan;
    plan.transpose = t;
    plan.op = op;
    const std::string& type = op->op_type();
    const int64_t opset = ctx_.Opset("");
    bool ok = false;
    // Below opset 7 a binary op's broadcast=1 aligns B from `axis`, not
    // from the end.
    if (opset < 7 && op->GetInt("broadcast").value_or(0) != 0) return std::nullopt;
    if (IsUnary(type) || IsBroadcasting(type)) {
      ok = Elementwise(plan);
    } else if (type == "QuantizeLinear") {
      ok = Quantization(plan, opset);
    } else if (IsReduce(type)) {
      ok = Reduce(plan, opset);
    } else if (type == "ArgMax" || type == "ArgMin") {
      ok = ArgReduce(plan);
    } else if ((type == "Softmax" || type == "LogSoftmax" || type == "Hardmax") && opset >= 13) {
      ok = SameRankAxis(plan, -1);
    } else if (type == "Concat") {
      ok = Concat(plan);
    } else if (type == "Pad") {
      ok = Pad(plan, opset);
    } else if (type == "Slice") {
      ok = Slice(plan, opset);
    } else if (type == "Resize" && opset >= 11) {
      ok = Resize(plan, opset);
    }
    if (!ok) return std::nullopt;
    return plan;
  }

 private:
  size_t rank() const { return perm_.size(); }

  // Input i of the op as it reads the untransposed layout; false when it
  // would need a Transpose of its own. A one-element constant of rank <= the
  // op's stays as it is.
  bool MapInput(Plan& plan, int i) {
    ir::Value* v = plan.op->input(i);
    if (v == nullptr) {
      plan.inputs.push_back(nullptr);
      plan.new_constants.emplace_back();
      return true;
    }
    if (v == plan.transpose->output(0)) {
      plan.inputs.push_back(plan.transpose->input(0));
      plan.new_constants.emplace_back();
      return true;
    }
    if (ir::Node* other = ProducerOp(v, "Transpose", graph_);
        other != nullptr && other != plan.transpose && other->num_inputs() == 1 && other->input(0) != nullptr &&
        OnlyUsedBy(*v, {plan.op})) {
      std::optional<std::vector<int64_t>> p = TransposePerm(*other, static_cast<int64_t>(rank()));
      if (!p || *p != perm_) return false;
      if (std::find(plan.absorbed.begin(), plan.absorbed.end(), other) == plan.absorbed.end()) {
        plan.absorbed.push_back(other);
      }
      plan.inputs.push_back(other->input(0));
      plan.new_constants.emplace_back();
      return true;
    }
    if (!IsConstantValue(*v)) {
      // A value of ones in every dim (rank <= the op's) broadcasts the same
      // in either layout.
      std::optional<std::vector<int64_t>> dims = KnownShape(*v, ctx_);
      if (!dims || dims->size() > rank() ||
          std::any_of(dims->begin(), dims->end(), [](int64_t d) { return d != 1; })) {
        return false;
      }
      plan.inputs.push_back(v);
      plan.new_constants.emplace_back();
      return true;
    }
    absl::StatusOr<runner::Tensor> c = ConstantTensor(*v, ctx_);
    if (!c.ok() || static_cast<size_t>(c->rank()) > rank()) return false;
    if (c->size() == 1) {
      plan.inputs.push_back(v);
      plan.new_constants.emplace_back();
      return true;
    }
    std::optional<runner::Tensor> moved = TransposeConstant(*c, rank(), Inverse(perm_));
    if (!moved) return false;
    plan.inputs.push_back(nullptr);
    plan.new_constants.push_back(std::move(moved));
    return true;
  }

  bool MapInputs(Plan& plan, int count) {
    for (int i = 0; i < count; ++i) {
      if (!MapInput(plan, i)) return false;
    }
    return true;
  }

  // Keeps input i as it is (a bound or list that does not depend on the layout).
  static void KeepInput(Plan& plan, int i) {
    plan.inputs.push_back(i < plan.op->num_inputs() ? plan.op->input(i) : nullptr);
    plan.new_constants.emplace_back();
  }

  // Keeps the inputs from `count` on as they are.
  static void KeepRest(Plan& plan, int count) {
    for (int i = count; i < plan.op->num_inputs(); ++i) KeepInput(plan, i);
  }

  // The op keeps its rank: its attributes (with `replaced`), then the
  // Transpose after it.
  bool SameRank(Plan& plan, std::vector<pb::AttributeProto> replaced = {}) const {
    plan.attributes = AttributesWith(*plan.op, std::move(replaced));
    plan.after = perm_;
    return true;
  }

  bool Elementwise(Plan& plan) {
    const std::string& type = plan.op->op_type();
    int mapped = plan.op->num_inputs();
    if (type == "Clip") {
      // Bounds (inputs 1 and 2) are scalars.
      for (int i = 1; i < plan.op->num_inputs(); ++i) {
        if (plan.op->input(i) != nullptr && !SmallScalar(plan.op->input(i), ctx_)) return false;
      }
      mapped = 1;
    } else if (type == "Cast" || IsUnary(type)) {
      mapped = 1;
      if (plan.op->num_inputs() != 1) return false;
    }
    if (plan.op->input(0) != plan.transpose->output(0) && type != "Where" && !IsBroadcasting(type)) return false;
    if (!MapInputs(plan, mapped)) return false;
    KeepRest(plan, mapped);
    return SameRank(plan);
  }

  bool Quantization(Plan& plan, int64_t opset) {
    if (plan.op->input(0) != plan.transpose->output(0)) return false;
    if (opset >= 21 && plan.op->GetInt("block_size").value_or(0) != 0) return false;
    // Per tensor: scalar scale (and zero point); per axis: the axis moves.
    std::optional<std::vector<int64_t>> scale = plan.op->num_inputs() > 1 && plan.op->input(1) != nullptr
                                                    ? KnownShape(*plan.op->input(1), ctx_)
                                                    : std::nullopt;
    if (!scale) return false;
    std::vector<pb::AttributeProto> replaced;
    int64_t elements = 1;
    for (int64_t d : *scale) elements = d < 0 ? -1 : elements * d;
    if (elements != 1) {
      if (scale->size() != 1 || opset < 13) return false;
      int64_t axis = plan.op->GetInt("axis").value_or(1);
      if (axis < 0) axis += static_cast<int64_t>(rank());
      if (axis < 0 || axis >= static_cast<int64_t>(rank())) return false;
      replaced.push_back(IntAttr("axis", perm_[static_cast<size_t>(axis)]));
    }
    if (!MapInputs(plan, 1)) return false;
    KeepRest(plan, 1);
    return SameRank(plan, std::move(replaced));
  }

  // The Transpose after a reduction of `axes` (normalized) of the
  // transposed tensor; nullopt when none is needed.
  std::optional<std::vector<int64_t>> AfterReduction(const std::set<int64_t>& axes, bool keepdims) const {
    if (keepdims) return perm_;
    std::vector<int64_t> kept_x;  // dims of x that stay, in order
    for (int64_t d = 0; d < static_cast<int64_t>(rank()); ++d) {
      bool reduced = false;
      for (int64_t a : axes) reduced = reduced || perm_[static_cast<size_t>(a)] == d;
      if (!reduced) kept_x.push_back(d);
    }
    std::vector<int64_t> after;
    for (int64_t i = 0; i < static_cast<int64_t>(rank()); ++i) {
      if (axes.count(i) > 0) continue;
      const int64_t d = perm_[static_cast<size_t>(i)];
      after.push_back(std::find(kept_x.begin(), kept_x.end(), d) - kept_x.begin());
    }
    if (IsIdentityPerm(after)) return std::nullopt;
    return after;
  }

  std::optional<std::set<int64_t>> Normalized(const std::vector<int64_t>& axes) const {
    std::set<int64_t> out;
    for (int64_t a : axes) {
      if (a < 0) a += static_cast<int64_t>(rank());
      if (a < 0 || a >= static_cast<int64_t>(rank()) || !out.insert(a).second) return std::nullopt;
    }
    return out;
  }

  bool Reduce(Plan& plan, int64_t opset) {
    const std::string& type = plan.op->op_type();
    if (plan.op->input(0) != plan.transpose->output(0)) return false;
    const bool keepdims = plan.op->GetInt("keepdims").value_or(1) != 0;
    const bool axes_input = opset >= AxesInputSince(type);
    std::optional<std::vector<int64_t>> axes;
    if (axes_input) {
      if (plan.op->num_inputs() > 1 && plan.op->input(1) != nullptr) {
        axes = ConstInts(plan.op->input(1), ctx_);
        if (!axes) return false;
      }
    } else {
      axes = plan.op->GetInts("axes");
      if (!axes && plan.op->FindAttribute("axes") != nullptr) return false;
    }
    const bool all = !axes || axes->empty();
    if (all && axes_input && plan.op->GetInt("noop_with_empty_axes").value_or(0) != 0) {
      // No reduction at all: element-wise (an identity).
      if (!MapInputs(plan, 1)) return false;
      KeepRest(plan, 1);
      return SameRank(plan);
    }
    if (!MapInputs(plan, 1)) return false;
    if (all) {
      // Every element: the layout does not matter.
      KeepRest(plan, 1);
      plan.attributes = AttributesWith(*plan.op, {});
      plan.after = std::nullopt;
      return true;
    }
    std::optional<std::set<int64_t>> normalized = Normalized(*axes);
    if (!normalized) return false;
    std::vector<int64_t> moved;
    for (int64_t a : *normalized) moved.push_back(perm_[static_cast<size_t>(a)]);
    std::sort(moved.begin(), moved.end());
    if (axes_input) {
      if (!NewInts(plan, moved)) return false;
      KeepRest(plan, 2);
      plan.attributes = AttributesWith(*plan.op, {});
    } else {
      KeepRest(plan, 1);
      plan.attributes = AttributesWith(*plan.op, {IntsAttr("axes", moved)});
    }
    plan.after = AfterReduction(*normalized, keepdims);
    return true;
  }

  bool ArgReduce(Plan& plan) {
    if (plan.op->num_inputs() != 1) return false;
    std::optional<std::set<int64_t>> axis = Normalized({plan.op->GetInt("axis").value_or(0)});
    if (!axis || !MapInputs(plan, 1)) return false;
    const int64_t a = *axis->begin();
    plan.attributes = AttributesWith(*plan.op, {IntAttr("axis", perm_[static_cast<size_t>(a)])});
    plan.after = AfterReduction(*axis, plan.op->GetInt("keepdims").value_or(1) != 0);
    return true;
  }

  // Softmax-like ops: one input, the output keeps the rank, `axis` moves.
  bool SameRankAxis(Plan& plan, int64_t default_axis) {
    if (plan.op->num_inputs() != 1) return false;
    std::optional<std::set<int64_t>> axis = Normalized({plan.op->GetInt("axis").value_or(default_axis)});
    if (!axis || !MapInputs(plan, 1)) return false;
    return SameRank(plan, {IntAttr("axis", perm_[static_cast<size_t>(*axis->begin())])});
  }

  bool Concat(Plan& plan) {
    std::optional<int64_t> axis_attr = plan.op->GetInt("axis");
    if (!axis_attr) return false;
    std::optional<std::set<int64_t>> axis = Normalized({*axis_attr});
    if (!axis || !MapInputs(plan, plan.op->num_inputs())) return false;
    return SameRank(plan, {IntAttr("axis", perm_[static_cast<size_t>(*axis->begin())])});
  }

  // `c` (1-D, `blocks` x rank() elements, one per dim of the transposed
  // view in each block) for the untransposed tensor: element i of a block
  // goes to p[i]. nullopt for other lengths or types.
  std::optional<runner::Tensor> PerDim(const runner::Tensor& c, size_t blocks) const {
    const int bits = DataTypeBits(c.dtype());
    if (c.is_string() || c.rank() != 1 || static_cast<size_t>(c.size()) != blocks * rank() ||
        (bits != 8 && bits != 16 && bits != 32 && bits != 64)) {
      return std::nullopt;
    }
    const size_t esize = static_cast<size_t>(bits / 8);
    absl::StatusOr<runner::Tensor> out = runner::Tensor::AllocateUninitialized(c.dtype(), c.shape());
    if (!out.ok()) return std::nullopt;
    const auto* src = static_cast<const unsigned char*>(c.raw());
    auto* dst = static_cast<unsigned char*>(out->mutable_raw());
    for (size_t b = 0; b < blocks; ++b) {
      for (size_t i = 0; i < rank(); ++i) {
        std::memcpy(dst + (b * rank() + static_cast<size_t>(perm_[i])) * esize,
                    src + (b * rank() + i) * esize, esize);
      }
    }
    return *std::move(out);
  }

  // Input i (a constant list with `blocks` entries per dim) rewritten by
  // PerDim; an absent or empty input is kept. False when it cannot be.
  bool PerDimInput(Plan& plan, int i, size_t blocks) {
    ir::Value* v = i < plan.op->num_inputs() ? plan.op->input(i) : nullptr;
    if (v == nullptr) {
      plan.inputs.push_back(nullptr);
      plan.new_constants.emplace_back();
      return true;
    }
    if (!IsConstantValue(*v)) return false;
    absl::StatusOr<runner::Tensor> c = ConstantTensor(*v, ctx_);
    if (!c.ok()) return false;
    if (c->size() == 0) {
      plan.inputs.push_back(v);
      plan.new_constants.emplace_back();
      return true;
    }
    std::optional<runner::Tensor> moved = PerDim(*c, blocks);
    if (!moved) return false;
    plan.inputs.push_back(nullptr);
    plan.new_constants.push_back(std::move(moved));
    return true;
  }

  // An int64 constant input holding `values`.
  static bool NewInts(Plan& plan, const std::vector<int64_t>& values) {
    std::optional<runner::Tensor> t = Int64List(values);
    if (!t) return false;
    plan.inputs.push_back(nullptr);
    plan.new_constants.push_back(std::move(t));
    return true;
  }

  // `axes` (of the transposed view) as axes of the untransposed tensor.
  std::optional<std::vector<int64_t>> MovedAxes(const std::vector<int64_t>& axes) const {
    std::vector<int64_t> out;
    std::set<int64_t> seen;
    for (int64_t a : axes) {
      if (a < 0) a += static_cast<int64_t>(rank());
      if (a < 0 || a >= static_cast<int64_t>(rank()) || !seen.insert(a).second) return std::nullopt;
      out.push_back(perm_[static_cast<size_t>(a)]);
    }
    return out;
  }

  bool Pad(Plan& plan, int64_t opset) {
    // A Pad feeding a convolution stays there (LiftAbovePad put the
    // Transpose above it for fuse-pad).
    if (IsPadTarget(SoleConsumer(*plan.op->output(0)))) return false;
    if (plan.op->input(0) != plan.transpose->output(0) || !MapInputs(plan, 1)) return false;
    if (opset < 11) {
      std::optional<std::vector<int64_t>> pads = plan.op->GetInts("pads");
      if (!pads || pads->size() != 2 * rank()) return false;
      std::vector<int64_t> moved(pads->size());
      for (size_t i = 0; i < rank(); ++i) {
        moved[static_cast<size_t>(perm_[i])] = (*pads)[i];
        moved[rank() + static_cast<size_t>(perm_[i])] = (*pads)[rank() + i];
      }
      KeepRest(plan, 1);
      return SameRank(plan, {IntsAttr("pads", moved)});
    }
    ir::Value* axes = plan.op->num_inputs() > 3 ? plan.op->input(3) : nullptr;
    if (axes != nullptr) {
      // Pads per listed axis: the axes move, the pads stay.
      std::optional<std::vector<int64_t>> listed = ConstInts(axes, ctx_);
      std::optional<std::vector<int64_t>> moved = listed ? MovedAxes(*listed) : std::nullopt;
      if (!moved) return false;
      KeepInput(plan, 1);
      KeepInput(plan, 2);
      if (!NewInts(plan, *moved)) return false;
    } else {
      if (plan.op->num_inputs() < 2 || !PerDimInput(plan, 1, 2)) return false;
      KeepRest(plan, 2);
    }
    return SameRank(plan);
  }

  bool Slice(Plan& plan, int64_t opset) {
    if (plan.op->input(0) != plan.transpose->output(0) || !MapInputs(plan, 1)) return false;
    if (opset < 10) {
      std::optional<std::vector<int64_t>> starts = plan.op->GetInts("starts");
      if (!starts) return false;
      std::vector<int64_t> axes = plan.op->GetInts("axes").value_or(std::vector<int64_t>{});
      if (plan.op->FindAttribute("axes") == nullptr) {
        for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
      }
      std::optional<std::vector<int64_t>> moved = MovedAxes(axes);
      if (!moved) return false;
      KeepRest(plan, 1);
      return SameRank(plan, {IntsAttr("axes", *moved)});
    }
    if (plan.op->num_inputs() < 3) return false;
    std::optional<std::vector<int64_t>> axes;
    if (plan.op->num_inputs() > 3 && plan.op->input(3) != nullptr) {
      axes = ConstInts(plan.op->input(3), ctx_);
    } else if (std::optional<std::vector<int64_t>> starts = ConstInts(plan.op->input(1), ctx_)) {
      axes.emplace();
      for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
    }
    std::optional<std::vector<int64_t>> moved = axes ? MovedAxes(*axes) : std::nullopt;
    if (!moved) return false;
    KeepInput(plan, 1);
    KeepInput(plan, 2);
    if (!NewInts(plan, *moved)) return false;
    KeepRest(plan, 4);
    return SameRank(plan);
  }

  // Resize (11 on): roi, scales and sizes have one entry per dim (roi two);
  // with `axes` (18 on) the axes move instead.
  bool Resize(Plan& plan, int64_t opset) {
    if (plan.op->input(0) != plan.transpose->output(0) || !MapInputs(plan, 1)) return false;
    if (opset >= 18 && plan.op->FindAttribute("axes") != nullptr) {
      std::optional<std::vector<int64_t>> listed = plan.op->GetInts("axes");
      std::optional<std::vector<int64_t>> moved = listed ? MovedAxes(*listed) : std::nullopt;
      if (!moved) return false;
      // The lists follow the axes in order; the moved axes must stay sorted
      // for that order to hold either way.
      if (!std::is_sorted(moved->begin(), moved->end())) return false;
      KeepRest(plan, 1);
      return SameRank(plan, {IntsAttr("axes", *moved)});
    }
    if (!PerDimInput(plan, 1, 2) || !PerDimInput(plan, 2, 1) || !PerDimInput(plan, 3, 1)) return false;
    plan.inputs.resize(static_cast<size_t>(plan.op->num_inputs()));
    plan.new_constants.resize(static_cast<size_t>(plan.op->num_inputs()));
    return SameRank(plan);
  }

  ir::Graph& graph_;
  PassContext& ctx_;
  std::vector<int64_t> perm_;
};

// Returns the Transpose now after the op (null when none).
absl::StatusOr<ir::Node*> Rewrite(ir::Graph& graph, Plan& plan) {
  ir::Node* op = plan.op;
  ir::Value* old_out = op->output(0);
  const std::string old_name = old_out->name();
  std::vector<ir::Value*> old_inputs(op->inputs().begin(), op->inputs().end());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!plan.new_constants[i]) continue;
    // Named after the input it replaces (a Slice's implied axes have none).
    const std::string hint =
        i < old_inputs.size() && old_inputs[i] != nullptr ? old_inputs[i]->name() : old_name + "_axes";
    ONNXKIT_ASSIGN_OR_RETURN(plan.inputs[i], AddConstant(graph, hint, *plan.new_constants[i]));
  }
  ir::NodeSpec spec{.op_type = op->op_type(),
                    .domain = op->domain(),
                    .name = op->name(),
                    .inputs = plan.inputs,
                    .outputs = {graph.FreshName(old_name)},
                    .attributes = std::move(plan.attributes)};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * moved, graph.AddNode(std::move(spec), ir::Position::Before(op)));
  ir::Value* result = moved->output(0);
  ir::Node* after = nullptr;
  if (plan.after) {
    ir::NodeSpec t{.op_type = "Transpose",
                   .domain = "",
                   .name = plan.transpose->name(),
                   .inputs = {result},
                   .outputs = {graph.FreshName(old_name)},
                   .attributes = {IntsAttr("perm", *plan.after)}};
    ONNXKIT_ASSIGN_OR_RETURN(after, graph.AddNode(std::move(t), ir::Position::Before(op)));
    result = after->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, old_out, result));  // removes the op
  ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, plan.transpose).status());
  for (ir::Node* other : plan.absorbed) ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, other).status());
  ONNXKIT_RETURN_IF_ERROR(DropAllIfUnused(graph, old_inputs));
  if (result->name() != old_name && !graph.NameInUse(old_name)) {
    ONNXKIT_RETURN_IF_ERROR(graph.RenameValue(result, old_name));
  }
  return after;
}

// A Transpose several nodes read, one of them a Transpose undoing it and
// every other one an op it could be pushed below (a block's input in NHWC
// exports feeds the next convolution and the residual Add): each reader
// gets its own copy. The undoing pairs then vanish and the other copies
// are pushed on; only done when that leaves fewer Transposes (fewer other
// readers than undoing ones plus one). Returns the copies
// made (empty when the Transpose does not qualify).
absl::StatusOr<std::vector<ir::Node*>> FanOut(ir::Graph& graph, ir::Node* t, Planner& planner,
                                              PassContext& ctx) {
  std::optional<std::vector<int64_t>> perm = planner.PermOf(*t);  // a Transpose with one output
  if (!perm) return std::vector<ir::Node*>{};
  ir::Value* out = t->output(0);
  if (out->IsGraphOutput() || out->uses().size() < 2) return std::vector<ir::Node*>{};
  size_t undoing = 0;
  std::vector<ir::Node*> readers;
  for (const ir::Use& use : out->uses()) {
    ir::Node* r = use.node;
    if (r->graph() != &graph || std::find(readers.begin(), readers.end(), r) != readers.end()) {
      return std::vector<ir::Node*>{};
    }
    readers.push_back(r);
    if (std::optional<std::vector<int64_t>> p = planner.PermOf(*r); p && p->size() == perm->size()) {
      bool inverse = true;
      for (size_t j = 0; j < p->size(); ++j)
        inverse = inverse && (*perm)[static_cast<size_t>((*p)[j])] == int64_t(j);
      if (inverse) {
        ++undoing;
        continue;
      }
    }
    if (!planner.MatchReader(t, r)) return std::vector<ir::Node*>{};
  }
  // Before: this one and the `undoing` ones; after: a copy per other reader.
  if (readers.size() - undoing >= 1 + undoing || !ctx.Allow(*t, "Transpose copied for each of its readers")) {
    return std::vector<ir::Node*>{};
  }
  std::vector<ir::Node*> copies;
  for (size_t i = 1; i < readers.size(); ++i) {
    ir::NodeSpec spec{.op_type = "Transpose",
                      .domain = "",
                      .name = t->name(),
                      .inputs = {t->input(0)},
                      .outputs = {graph.FreshName(out->name())},
                      .attributes = {IntsAttr("perm", *perm)}};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * copy, graph.AddNode(std::move(spec), ir::Position::After(t)));
    for (int k = 0; k < readers[i]->num_inputs(); ++k) {
      if (readers[i]->input(k) == out)
        ONNXKIT_RETURN_IF_ERROR(graph.SetInput(readers[i], k, copy->output(0)));
    }
    copies.push_back(copy);
  }
  return copies;
}

// A Transpose reading a Pad that nothing else reads and feeding a Conv or
// AveragePool: NHWC exports pad before the layout change. The Transpose
// goes above the Pad (its pads reordered, or its axes moved), so that
// fuse-pad folds the Pad into the convolution. Returns whether it did.
absl::StatusOr<bool> LiftAbovePad(ir::Graph& graph, ir::Node* t, Planner& planner, PassContext& ctx) {
  std::optional<std::vector<int64_t>> perm = planner.PermOf(*t);
  if (!perm) return false;
  ir::Node* pad = ProducerOp(t->input(0), "Pad", graph);
  ir::Node* reader = SoleConsumer(*t->output(0));
  if (pad == nullptr || pad->num_outputs() != 1 || pad->num_inputs() < 1 || pad->input(0) == nullptr ||
      SoleConsumer(*pad->output(0)) != t || !IsPadTarget(reader) || reader->graph() != &graph) {
    return false;
  }
  const size_t r = perm->size();
  const std::vector<int64_t> inv = Inverse(*perm);
  // Output dim j of the Transpose is dim perm[j] of the Pad.
  auto reorder = [&](const std::vector<int64_t>& pads) {
    std::vector<int64_t> out(2 * r);
    for (size_t j = 0; j < r; ++j) {
      out[j] = pads[static_cast<size_t>((*perm)[j])];
      out[r + j] = pads[r + static_cast<size_t>((*perm)[j])];
    }
    return out;
  };
  std::vector<ir::Value*> inputs(pad->inputs().begin(), pad->inputs().end());
  std::vector<pb::AttributeProto> attributes = AttributesWith(*pad, {});
  std::optional<runner::Tensor> new_list;  // replaces input `list_index`
  size_t list_index = 0;
  if (ctx.Opset("") < 11) {
    std::optional<std::vector<int64_t>> pads = pad->GetInts("pads");
    if (!pads || pads->size() != 2 * r) return false;
    attributes = AttributesWith(*pad, {IntsAttr("pads", reorder(*pads))});
  } else {
    std::vector<int64_t> values;
    if (inputs.size() > 3 && inputs[3] != nullptr) {
      std::optional<std::vector<int64_t>> axes = ConstInts(inputs[3], ctx);
      if (!axes) return false;
      for (int64_t a : *axes) {
        if (a < 0) a += static_cast<int64_t>(r);
        if (a < 0 || a >= static_cast<int64_t>(r)) return false;
        values.push_back(inv[static_cast<size_t>(a)]);
      }
      list_index = 3;
    } else {
      std::optional<std::vector<int64_t>> pads = inputs.size() > 1 ? ConstInts(inputs[1], ctx) : std::nullopt;
      if (!pads || pads->size() != 2 * r) return false;
      values = reorder(*pads);
      list_index = 1;
    }
    new_list = Int64List(values);
    if (!new_list) return false;
  }
  if (!ctx.Allow(*t, "Transpose lifted above Pad")) return false;
  std::vector<ir::Value*> old_inputs = inputs;
  if (new_list) {
    ONNXKIT_ASSIGN_OR_RETURN(inputs[list_index],
                             AddConstant(graph,
                                         old_inputs[list_index] != nullptr ? old_inputs[list_index]->name()
                                                                           : pad->output(0)->name() + "_axes",
                                         *new_list));
  }
  ir::NodeSpec lifted{.op_type = "Transpose",
                      .domain = "",
                      .name = t->name(),
                      .inputs = {pad->input(0)},
                      .outputs = {graph.FreshName(t->output(0)->name())},
                      .attributes = {IntsAttr("perm", *perm)}};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * new_t, graph.AddNode(std::move(lifted), ir::Position::Before(pad)));
  inputs[0] = new_t->output(0);
  ir::NodeSpec padded{.op_type = "Pad",
                      .domain = pad->domain(),
                      .name = pad->name(),
                      .inputs = inputs,
                      .outputs = {graph.FreshName(t->output(0)->name())},
                      .attributes = std::move(attributes)};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * new_pad, graph.AddNode(std::move(padded), ir::Position::Before(t)));
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, t->output(0), new_pad->output(0)));  // removes t
  ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, pad).status());
  ONNXKIT_RETURN_IF_ERROR(DropAllIfUnused(graph, old_inputs));
  return true;
}

class PushTranspose : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    Planner planner(graph, ctx);
    // A pushed Transpose is pushed on at once, down the chain it is in.
    std::vector<ir::Node*> work = SnapshotNodes(graph);
    for (size_t w = 0; w < work.size(); ++w) {
      ir::Node* node = work[w];
      for (int steps = 0; node != nullptr && IsLive(graph, node) && steps < graph.num_nodes(); ++steps) {
        std::optional<Plan> plan = planner.Match(node);
        if (!plan) {
          ONNXKIT_ASSIGN_OR_RETURN(std::vector<ir::Node*> copies, FanOut(graph, node, planner, ctx));
          if (copies.empty()) {
            ONNXKIT_ASSIGN_OR_RETURN(bool lifted, LiftAbovePad(graph, node, planner, ctx));
            changed = changed || lifted;
            break;
          }
          changed = true;
          work.insert(work.end(), copies.begin(), copies.end());
          continue;  // the original now has one reader
        }
        if (!ctx.Allow(*node, "Transpose pushed below " + plan->op->op_type())) break;
        ONNXKIT_ASSIGN_OR_RETURN(node, Rewrite(graph, *plan));
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreatePushTranspose() { return std::make_unique<PushTranspose>(); }

}  // namespace onnxkit::passes
