// Einsum (12) going down, as the products runtimes without Einsum run:
//
//   each operand: ReduceSum over the labels no other operand and not the
//   output names;
//   operands folded left to right, two at a time: with B the labels both
//   have and a later operand or the output needs, K those both have that
//   nothing later needs, L and R the kept labels only one side has,
//     A -> Transpose [B.., L.., K..] -> Reshape [B.., |L|, |K|]
//     C -> Transpose [B.., K.., R..] -> Reshape [B.., |K|, |R|]
//     MatMul -> [B.., |L|, |R|] -> Reshape [B.., L.., R..]
//   (|L| the product of L's dims: a constant when they are known, else read
//   at run time through Shape, Slice and ReduceProd, so no dim has to be
//   known); a final Transpose to the output.
//
// Broadcast "..." dims need the operands' ranks; they are always in the
// output, so where two operands both have one it is a batch dim, which
// MatMul broadcasts. A label repeated within one term (a diagonal) and
// element types MatMul lacks (8- and 16-bit integers, bfloat16) block.
// Written for opset 11.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/reference/einsum_labels.h"

namespace onnxkit::passes::convert {
namespace {

struct Operand {
  ir::Value* value = nullptr;
  std::vector<int> labels;  // per axis
};

bool Has(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

int64_t IndexOf(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) - labels.begin();
}

// `x` with its axes in `order` (labels of x); no node when already so.
absl::StatusOr<ir::Value*> Arrange(Step& step, const Operand& x, const std::vector<int>& order) {
  std::vector<int64_t> perm;
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) {
    perm.push_back(IndexOf(x.labels, order[i]));
    identity = identity && perm.back() == static_cast<int64_t>(i);
  }
  if (identity) return x.value;
  return Op(step, "Transpose", {x.value}, {IntsAttr("perm", perm)});
}

// Sums `x` over its labels that `keep` does not name.
absl::StatusOr<Operand> SumAway(Step& step, Operand x, const std::vector<int>& keep) {
  std::vector<int64_t> axes;
  std::vector<int> left;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (Has(keep, x.labels[i])) {
      left.push_back(x.labels[i]);
    } else {
      axes.push_back(static_cast<int64_t>(i));
    }
  }
  if (axes.empty()) return x;
  ONNXKIT_ASSIGN_OR_RETURN(
      x.value, Op(step, "ReduceSum", {x.value}, {IntsAttr("axes", axes), IntAttr("keepdims", 0)}));
  x.labels = left;
  return x;
}

// Dims [start, end) of the 1-D shape `shape` (Slice-10 with constant bounds).
absl::StatusOr<ir::Value*> SliceDims(Step& step, ir::Value* shape, int64_t start, int64_t end) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * starts, AddInts(step, "einsum_start", {start}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ends, AddInts(step, "einsum_end", {end}));
  return Op(step, "Slice", {shape, starts, ends});
}

// The product of dims [start, end) of `shape` as a 1-D value of one
// element (1 for no dims).
absl::StatusOr<ir::Value*> DimProduct(Step& step, ir::Value* shape, int64_t start, int64_t end) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * dims, SliceDims(step, shape, start, end));
  return Op(step, "ReduceProd", {dims}, {IntAttr("keepdims", 1)});
}

// Each label's size where every input that has it knows it and agrees.
using LabelSizes = std::map<int, std::optional<int64_t>>;

// One contraction of the fold: a and c into the labels B.., L.., R...
// Products of dims known when converting are constants; the others are
// read at run time.
absl::StatusOr<Operand> Contract(Step& step, const Operand& a, const Operand& c, const std::vector<int>& keep,
                                 const LabelSizes& sizes) {
  std::vector<int> batch, contracted, left, right;
  for (int label : a.labels) {
    if (Has(c.labels, label)) {
      (Has(keep, label) ? batch : contracted).push_back(label);
    } else {
      left.push_back(label);
    }
  }
  for (int label : c.labels) {
    if (!Has(a.labels, label)) right.push_back(label);
  }
  const int64_t nb = static_cast<int64_t>(batch.size()), nl = static_cast<int64_t>(left.size()),
                nk = static_cast<int64_t>(contracted.size()), nr = static_cast<int64_t>(right.size());
  std::vector<int> a_order = batch, c_order = batch;
  a_order.insert(a_order.end(), left.begin(), left.end());
  a_order.insert(a_order.end(), contracted.begin(), contracted.end());
  c_order.insert(c_order.end(), contracted.begin(), contracted.end());
  c_order.insert(c_order.end(), right.begin(), right.end());
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a2, Arrange(step, a, a_order));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c2, Arrange(step, c, c_order));
  ir::Value* a_shape = nullptr;
  ir::Value* c_shape = nullptr;
  auto shape_of = [&step](ir::Value* x, ir::Value*& shape) -> absl::StatusOr<ir::Value*> {
    if (shape == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(shape, Op(step, "Shape", {x}));
    }
    return shape;
  };
  // The dims of `labels` (at [start, end) of x's shape): their product, or
  // each of them; constants when known (`known`), else a value.
  struct Dims {
    std::optional<std::vector<int64_t>> known;
    ir::Value* value = nullptr;
  };
  auto dims = [&](const std::vector<int>& labels, bool product, ir::Value* x, ir::Value*& shape,
                  int64_t start) -> absl::StatusOr<Dims> {
    std::vector<int64_t> known;
    for (int label : labels) {
      auto it = sizes.find(label);
      if (it == sizes.end() || !it->second) break;
      known.push_back(*it->second);
    }
    const int64_t end = start + static_cast<int64_t>(labels.size());
    Dims out;
    if (known.size() == labels.size()) {
      if (!product) {
        out.known = known;
        return out;
      }
      int64_t p = 1;
      for (int64_t d : known) {
        if (d != 0 && p > INT64_MAX / d) return Block("the dims' product overflows");
        p *= d;
      }
      out.known = std::vector<int64_t>{p};
      return out;
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, shape_of(x, shape));
    if (product) {
      ONNXKIT_ASSIGN_OR_RETURN(out.value, DimProduct(step, s, start, end));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(out.value, SliceDims(step, s, start, end));
    }
    return out;
  };
  // A shape from parts: one constant when every part is known, else a
  // Concat. Reshape's 0 keeps a batch dim as it is (each side its own, for
  // MatMul to broadcast; the product's own after it).
  auto shape = [&](const std::vector<Dims>& parts) -> absl::StatusOr<ir::Value*> {
    std::vector<int64_t> all(static_cast<size_t>(nb), 0);
    bool known = true;
    for (const Dims& d : parts) {
      if (!d.known) {
        known = false;
        break;
      }
      all.insert(all.end(), d.known->begin(), d.known->end());
    }
    if (known) return AddInts(step, "einsum_shape", all);
    std::vector<ir::Value*> values;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * batch_dims,
                             AddInts(step, "einsum_batch", std::vector<int64_t>(nb, 0)));
    values.push_back(batch_dims);
    for (const Dims& d : parts) {
      if (d.known) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v, AddInts(step, "einsum_dims", *d.known));
        values.push_back(v);
      } else {
        values.push_back(d.value);
      }
    }
    return Op(step, "Concat", values, {IntAttr("axis", 0)});
  };
  // A side whose two groups are one label each is already a matrix.
  ir::Value* a3 = a2;
  if (nl != 1 || nk != 1) {
    ONNXKIT_ASSIGN_OR_RETURN(Dims size_l, dims(left, true, a2, a_shape, nb));
    ONNXKIT_ASSIGN_OR_RETURN(Dims size_k, dims(contracted, true, a2, a_shape, nb + nl));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a_rows, shape({size_l, size_k}));
    ONNXKIT_ASSIGN_OR_RETURN(a3, Op(step, "Reshape", {a2, a_rows}));
  }
  ir::Value* c3 = c2;
  if (nk != 1 || nr != 1) {
    ONNXKIT_ASSIGN_OR_RETURN(Dims size_k, dims(contracted, true, a2, a_shape, nb + nl));
    ONNXKIT_ASSIGN_OR_RETURN(Dims size_r, dims(right, true, c2, c_shape, nb + nk));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c_rows, shape({size_k, size_r}));
    ONNXKIT_ASSIGN_OR_RETURN(c3, Op(step, "Reshape", {c2, c_rows}));
  }
  Operand out;
  ONNXKIT_ASSIGN_OR_RETURN(out.value, Op(step, "MatMul", {a3, c3}));
  // [B.. (broadcast), |L|, |R|] -> [B.., L.., R..].
  if (nl != 1 || nr != 1) {
    ONNXKIT_ASSIGN_OR_RETURN(Dims l_dims, dims(left, false, a2, a_shape, nb));
    ONNXKIT_ASSIGN_OR_RETURN(Dims r_dims, dims(right, false, c2, c_shape, nb + nk));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out_shape, shape({l_dims, r_dims}));
    ONNXKIT_ASSIGN_OR_RETURN(out.value, Op(step, "Reshape", {out.value, out_shape}));
  }
  out.labels = batch;
  out.labels.insert(out.labels.end(), left.begin(), left.end());
  out.labels.insert(out.labels.end(), right.begin(), right.end());
  return out;
}

}  // namespace

absl::Status ExpandEinsum(Step& step) {
  const std::optional<std::string> equation = step.node->GetString("equation");
  if (!equation) return Block("equation is required");
  const size_t n = step.node->inputs().size();
  if (n == 0) return Block("Einsum needs an input");
  std::optional<int32_t> elem;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < n; ++i) {
    ir::Value* x = PresentInput(step, static_cast<int>(i));
    if (x == nullptr) return Block("every input is required");
    std::optional<int32_t> t = ElemType(*x, *step.ctx);
    if (!t) return Block("the expansion needs inputs of known element type");
    elem = t;
    // Labels only need the rank (sizes of 1 never disagree); the rank is
    // the term's when it has no "...".
    std::optional<int64_t> rank = RankOf(step, x);
    if (!rank) return Block("the expansion needs inputs of known rank");
    shapes.emplace_back(static_cast<size_t>(*rank), 1);
  }
  const int32_t t = *elem;
  if (t != pb::kFloat && t != pb::kDouble && t != pb::kFloat16 && t != pb::kInt32 && t != pb::kInt64 &&
      t != pb::kUint32 && t != pb::kUint64) {
    return Block(
        "MatMul below opset 12 has no kernel for this element type (8- and 16-bit integers, bfloat16)");
  }
  absl::StatusOr<runner::reference::EinsumLabels> labels = runner::reference::LabelEinsum(*equation, shapes);
  if (!labels.ok()) return Block(absl::StrCat("equation \"", *equation, "\": ", labels.status().message()));
  std::vector<Operand> operands;
  for (size_t i = 0; i < n; ++i) {
    Operand x{PresentInput(step, static_cast<int>(i)), labels->inputs[i]};
    for (size_t a = 0; a < x.labels.size(); ++a) {
      if (std::count(x.labels.begin(), x.labels.end(), x.labels[a]) > 1) {
        return Block("a label repeated within one term (a diagonal) has no expansion");
      }
    }
    operands.push_back(std::move(x));
  }
  LabelSizes sizes;
  for (const Operand& x : operands) {
    for (size_t axis = 0; axis < x.labels.size(); ++axis) {
      std::optional<int64_t> d = KnownDim(step, x.value, axis);
      auto [it, fresh] = sizes.emplace(x.labels[axis], d);
      if (!fresh && it->second != d) it->second = std::nullopt;  // unknown somewhere, or broadcast
    }
  }
  // Fold left to right; each step keeps what a later operand or the output needs.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = labels->output;
    for (size_t j = i + 1; j < n; ++j)
      keep.insert(keep.end(), operands[j].labels.begin(), operands[j].labels.end());
    return keep;
  };
  auto needed_besides = [&](size_t i, const std::vector<int>& current) {
    std::vector<int> keep = needed_after(i);
    keep.insert(keep.end(), current.begin(), current.end());
    return keep;
  };
  std::vector<int> rest;  // labels of every operand but the first
  for (size_t j = 1; j < n; ++j)
    rest.insert(rest.end(), operands[j].labels.begin(), operands[j].labels.end());
  std::vector<int> keep_first = labels->output;
  keep_first.insert(keep_first.end(), rest.begin(), rest.end());
  ONNXKIT_ASSIGN_OR_RETURN(Operand acc, SumAway(step, operands[0], keep_first));
  for (size_t i = 1; i < n; ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(Operand next, SumAway(step, operands[i], needed_besides(i, acc.labels)));
    ONNXKIT_ASSIGN_OR_RETURN(acc, SumAway(step, acc, needed_besides(i, next.labels)));
    ONNXKIT_ASSIGN_OR_RETURN(acc, Contract(step, acc, next, needed_after(i), sizes));
  }
  ONNXKIT_ASSIGN_OR_RETURN(acc, SumAway(step, acc, labels->output));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * result, Arrange(step, acc, labels->output));
  if (result == step.node->inputs()[0]) {
    ONNXKIT_ASSIGN_OR_RETURN(result, Op(step, "Identity", {result}));
  }
  return ReplaceNodeOutput(step, result);
}

}  // namespace onnxkit::passes::convert
