// Expansions of ops that do not exist below their first opset into older
// ops, as the ONNX spec defines them:
//   Gelu (20, approximate="none"):  0.5 * x * (1 + Erf(x / sqrt(2)))
//   Gelu (20, approximate="tanh"):  0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//   HardSwish (14):                 x * HardSigmoid[alpha=1/6, beta=0.5](x)
//   Mish (18):                      x * Tanh(Softplus(x))
//   LayerNormalization (17):        (x - mean) / sqrt(var + eps) * scale + B
//                                   over axes [axis, rank)
//   Trilu (14):                     Where(keep, x, 0) (And(x, keep) for bool),
//                                   keep[i, j] = j - i >= k (upper) or <= k
//                                   (lower) over the last two dims: a constant
//                                   mask when those dims and k are known, else
//                                   built with Shape, Gather, Range and a
//                                   comparison (opset 11 and up)
//   RMSNormalization (23):          x / sqrt(mean(x^2) + eps) * scale over
//                                   axes [axis, rank), in stash_type
//   Swish (24):                     x * Sigmoid(alpha * x)
//   SwiGLU (28):                    Swish[alpha](A) * B
//   AffineGrid (20):                MatMul(base, Transpose(theta)), base the
//                                   constant grid of (x, y[, z], 1) points
//                                   of a size known at conversion
//   CenterCropPad (18):             Slice then Pad (zeros) about the centre,
//                                   for known dims and target shape
//   NegativeLogLikelihoodLoss (12): -input[n, target, d...] (GatherElements
//                                   along axis 1) times weight[target], 0
//                                   where target is ignore_index; summed,
//                                   or summed over the summed weights (mean)
//   SoftmaxCrossEntropyLoss (12):   the same over LogSoftmax(scores) along
//                                   axis 1 (transposed last for rank > 2),
//                                   which is also log_prob
//   HannWindow, HammingWindow,      a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
//   BlackmanWindow (17):            (N = size, or size - 1 when not periodic)
//                                   in double, cast to output_datatype: a
//                                   constant for a known size, else over
//                                   Range(0, size) (opset 11)
// The new nodes are converted further down like any other.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
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

absl::StatusOr<int32_t> ElemOf(Step& step) {
  std::optional<int32_t> e = ElemType(*step.node->input(0), *step.ctx);
  if (!e || (*e != pb::kFloat && *e != pb::kDouble)) return Block("the expansion needs a float or double input");
  return *e;
}

absl::Status ExpandGeluTanh(Step& step, int32_t t) {
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k, AddScalar(step, "sqrt_2_over_pi", t, std::sqrt(2.0 / M_PI)));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddScalar(step, "gelu_cubic", t, 0.044715));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddScalar(step, "one", t, 1.0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * half, AddScalar(step, "half", t, 0.5));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * x2, AddBefore(step, "Mul", {x, x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * x3, AddBefore(step, "Mul", {x2->output(0), x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cx3, AddBefore(step, "Mul", {x3->output(0), c}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * in, AddBefore(step, "Add", {x, cx3->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * arg, AddBefore(step, "Mul", {in->output(0), k}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * th, AddBefore(step, "Tanh", {arg->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * a, AddBefore(step, "Add", {th->output(0), one}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * m, AddBefore(step, "Mul", {x, a->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {m->output(0), half}, 1));
  return Finish(step, y);
}

// The largest constant Trilu mask written into the model (elements, one
// byte each); larger ones are computed in the graph.
constexpr int64_t kMaxTriluMask = int64_t{1} << 22;

// keep[i, j] of Trilu over [rows, cols] as a bool constant.
absl::StatusOr<ir::Value*> TriluMaskConstant(Step& step, int64_t rows, int64_t cols, int64_t k, bool upper) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(pb::kBool, {rows, cols}));
  uint8_t* keep = static_cast<uint8_t*>(t.mutable_raw());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      // j - i cannot overflow (both below 2^22); k may be any int64.
      const int64_t d = j - i;
      keep[i * cols + j] = (upper ? d >= k : d <= k) ? 1 : 0;
    }
  }
  return AddConstant(*step.graph, "trilu_mask", t);
}

// keep[i, j] computed from x's shape at run time (opset 13 ops).
absl::StatusOr<ir::Value*> TriluMaskNodes(Step& step, ir::Value* x, ir::Value* k, bool upper) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape, AddBefore(step, "Shape", {x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddScalar(step, "zero", pb::kInt64, 0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddScalar(step, "one", pb::kInt64, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * row_dim, AddScalar(step, "row_dim", pb::kInt64, -2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * col_dim, AddScalar(step, "col_dim", pb::kInt64, -1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, AddBefore(step, "Gather", {shape->output(0), row_dim}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * m, AddBefore(step, "Gather", {shape->output(0), col_dim}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * rows, AddBefore(step, "Range", {zero, n->output(0), one}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cols, AddBefore(step, "Range", {zero, m->output(0), one}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * column, AddInts(step, "column_shape", {-1, 1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * rows_col, AddBefore(step, "Reshape", {rows->output(0), column}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * diff,
                           AddBefore(step, "Sub", {cols->output(0), rows_col->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Node * keep, AddBefore(step, upper ? "GreaterOrEqual" : "LessOrEqual", {diff->output(0), k}, 1));
  return keep->output(0);
}

}  // namespace

absl::Status ExpandTrilu(Step& step) {
  ir::Value* x = step.node->input(0);
  std::optional<int32_t> elem = ElemType(*x, *step.ctx);
  if (!elem || *elem == pb::kString) return Block("the expansion needs a numeric or bool input");
  std::optional<std::vector<int64_t>> shape = KnownShape(*x, *step.ctx);
  if (shape && shape->size() < 2) return Block("the input has fewer than 2 dims");
  const bool upper = step.node->GetInt("upper").value_or(1) != 0;
  ir::Value* k_input = step.node->num_inputs() > 1 ? step.node->input(1) : nullptr;
  std::optional<int64_t> k = 0;
  if (k_input != nullptr) {
    std::optional<std::vector<int64_t>> ks = ConstInts(step, 1);
    k = ks && ks->size() == 1 ? std::optional<int64_t>((*ks)[0]) : std::nullopt;
  }
  ir::Value* keep = nullptr;
  const int64_t rows = shape ? (*shape)[shape->size() - 2] : -1;
  const int64_t cols = shape ? (*shape)[shape->size() - 1] : -1;
  if (k && rows >= 0 && cols >= 0 && rows <= kMaxTriluMask && cols <= kMaxTriluMask &&
      (rows == 0 || cols <= kMaxTriluMask / rows)) {
    ONNXKIT_ASSIGN_OR_RETURN(keep, TriluMaskConstant(step, rows, cols, *k, upper));
  } else {
    if (step.target < 11)
      return Block("its dims or k are known only at run time, and the mask needs Range (opset 11)");
    ir::Value* kv = k_input;
    if (k) {
      ONNXKIT_ASSIGN_OR_RETURN(kv, AddScalar(step, "k", pb::kInt64, *k));
    }
    ONNXKIT_ASSIGN_OR_RETURN(keep, TriluMaskNodes(step, x, kv, upper));
  }
  if (*elem == pb::kBool) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "And", {x, keep}, 1));
    return Finish(step, y);
  }
  // Zero of x's type: a Cast of an int64 zero covers every numeric type.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero64, AddScalar(step, "zero", pb::kInt64, 0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * zero, AddBefore(step, "Cast", {zero64}, 1, {IntAttr("to", *elem)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Where", {keep, x, zero->output(0)}, 1));
  return Finish(step, y);
}

absl::Status ExpandGelu(Step& step) {
  std::string approx = step.node->GetString("approximate").value_or("none");
  if (approx != "none" && approx != "tanh") return Block(absl::StrCat("approximate='", approx, "' is unknown"));
  ONNXKIT_ASSIGN_OR_RETURN(int32_t t, ElemOf(step));
  if (approx == "tanh") return ExpandGeluTanh(step, t);
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sqrt2, AddScalar(step, "sqrt2", t, std::sqrt(2.0)));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddScalar(step, "one", t, 1.0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * half, AddScalar(step, "half", t, 0.5));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * d, AddBefore(step, "Div", {x, sqrt2}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * e, AddBefore(step, "Erf", {d->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * a, AddBefore(step, "Add", {e->output(0), one}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * m, AddBefore(step, "Mul", {x, a->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {m->output(0), half}, 1));
  return Finish(step, y);
}

absl::Status ExpandHardSwish(Step& step) {
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * h, AddBefore(step, "HardSigmoid", {x}, 1,
                                                   {FloatAttr("alpha", 1.0f / 6), FloatAttr("beta", 0.5f)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {x, h->output(0)}, 1));
  return Finish(step, y);
}

absl::Status ExpandMish(Step& step) {
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * s, AddBefore(step, "Softplus", {x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * t, AddBefore(step, "Tanh", {s->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {x, t->output(0)}, 1));
  return Finish(step, y);
}

absl::Status ExpandLayerNorm(Step& step) {
  if (step.node->GetInt("stash_type").value_or(1) != 1) return Block("stash_type other than float");
  std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx);
  if (!elem ||
      (*elem != pb::kFloat && *elem != pb::kDouble && *elem != pb::kFloat16 && *elem != pb::kBfloat16)) {
    return Block("the expansion needs a float, double, float16 or bfloat16 input");
  }
  // As the op defines stash_type 1: a 16-bit input is normalized in float,
  // cast back, then scaled and shifted in its own type (Mean and InvStdDev
  // are float).
  const bool stash = *elem == pb::kFloat16 || *elem == pb::kBfloat16;
  const int32_t t = stash ? pb::kFloat : *elem;
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  int64_t axis = step.node->GetInt("axis").value_or(-1);
  if (!rank) return Block("the expansion needs the input rank");
  if (axis < 0) axis += *rank;
  if (axis < 0 || axis >= *rank) return Block("axis out of range");
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < *rank; ++a) axes.push_back(a);
  float eps = step.node->GetFloat("epsilon").value_or(1e-5f);
  ir::Value* x = step.node->input(0);
  ir::Value* scale = step.node->input(1);
  ir::Value* bias = step.node->num_inputs() > 2 ? step.node->input(2) : nullptr;
  if (stash) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * wide, AddBefore(step, "Cast", {x}, 1, {IntAttr("to", pb::kFloat)}));
    x = wide->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, AddScalar(step, "epsilon", t, eps));
  // Written for opset 16: ReduceMean takes axes as an attribute.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * mean, AddBefore(step, "ReduceMean", {x}, 1, {IntsAttr("axes", axes)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * d, AddBefore(step, "Sub", {x, mean->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sq, AddBefore(step, "Mul", {d->output(0), d->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * var, AddBefore(step, "ReduceMean", {sq->output(0)}, 1, {IntsAttr("axes", axes)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * ve, AddBefore(step, "Add", {var->output(0), e}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sd, AddBefore(step, "Sqrt", {ve->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, AddBefore(step, "Div", {d->output(0), sd->output(0)}, 1));
  if (stash) {
    ONNXKIT_ASSIGN_OR_RETURN(n, AddBefore(step, "Cast", {n->output(0)}, 1, {IntAttr("to", *elem)}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {n->output(0), scale}, 1));
  if (bias != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * b, AddBefore(step, "Add", {y->output(0), bias}, 1));
    y = b;
  }
  // Mean and InvStdDev, when used: the reduced mean and 1 / sqrt(var + eps);
  // graph outputs get their names back once the node is gone.
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (int i : {1, 2}) {
    if (i >= step.node->num_outputs()) break;
    ir::Value* o = step.node->output(i);
    if (o->name().empty() || (!o->has_uses() && !o->IsGraphOutput())) continue;
    ir::Value* r = mean->output(0);
    if (i == 2) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * inv, AddBefore(step, "Reciprocal", {sd->output(0)}, 1));
      r = inv->output(0);
    }
    // The node goes away whole, so its other outputs being in use is fine
    // (CanReplace's condition for a lone output).
    if (r->IsGraphOutput() || r->graph() != o->graph()) return Block("output Mean/InvStdDev cannot be rerouted");
    if (o->IsGraphOutput()) renames.emplace_back(r, o->name());
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(o, r));
  }
  ONNXKIT_RETURN_IF_ERROR(Finish(step, y));
  for (auto& [v, name] : renames) ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(v, name));
  return absl::OkStatus();
}

// Written for opset 22 (ReduceMean takes its axes as an input).
absl::Status ExpandRmsNorm(Step& step) {
  ir::Value* x = step.node->input(0);
  ir::Value* scale = step.node->input(1);
  std::optional<int32_t> t = ElemType(*x, *step.ctx), v = ElemType(*scale, *step.ctx);
  if (!IsFloatElem(t) || !IsFloatElem(v)) return Block("the expansion needs float inputs of known types");
  const int64_t stash = step.node->GetInt("stash_type").value_or(pb::kFloat);
  if (!IsFloatElem(static_cast<int32_t>(stash)))
    return Block(absl::StrCat("stash_type ", stash, " is not a float type"));
  const int32_t s = static_cast<int32_t>(stash);
  std::optional<int64_t> rank = RankOf(step, x);
  if (!rank) return Block("the expansion needs the input rank");
  int64_t axis = step.node->GetInt("axis").value_or(-1);
  if (axis < 0) axis += *rank;
  if (axis < 0 || axis >= *rank) return Block("axis out of range");
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < *rank; ++a) axes.push_back(a);
  if (*t != s) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * wide, AddBefore(step, "Cast", {x}, 1, {IntAttr("to", s)}));
    x = wide->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Value * eps, AddFloatScalar(step, "epsilon", s, step.node->GetFloat("epsilon").value_or(1e-5f)));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axes_v, AddInts(step, "axes", axes));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sq, AddBefore(step, "Mul", {x, x}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * mean, AddBefore(step, "ReduceMean", {sq->output(0), axes_v}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * me, AddBefore(step, "Add", {mean->output(0), eps}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * rms, AddBefore(step, "Sqrt", {me->output(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, AddBefore(step, "Div", {x, rms->output(0)}, 1));
  if (s != *v) {
    ONNXKIT_ASSIGN_OR_RETURN(n, AddBefore(step, "Cast", {n->output(0)}, 1, {IntAttr("to", *v)}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {n->output(0), scale}, 1));
  return Finish(step, y);
}

absl::Status ExpandSwish(Step& step) {
  ir::Value* x = step.node->input(0);
  std::optional<int32_t> t = ElemType(*x, *step.ctx);
  if (!IsFloatElem(t)) return Block("the expansion needs a float input of known type");
  const float alpha = step.node->GetFloat("alpha").value_or(1.0f);
  ir::Value* arg = x;
  if (alpha != 1.0f) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, AddFloatScalar(step, "alpha", *t, alpha));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * ax, AddBefore(step, "Mul", {x, a}, 1));
    arg = ax->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sig, AddBefore(step, "Sigmoid", {arg}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {x, sig->output(0)}, 1));
  return Finish(step, y);
}

// Written for opset 27, where Swish exists; it is expanded in turn below 24.
absl::Status ExpandSwiGlu(Step& step) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * gate,
                           AddBefore(step, "Swish", {step.node->input(0)}, 1,
                                     {FloatAttr("alpha", step.node->GetFloat("alpha").value_or(1.0f))}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {gate->output(0), step.node->input(1)}, 1));
  return Finish(step, y);
}

// The largest constant grid AffineGrid's expansion writes (elements).
constexpr int64_t kMaxAffineGrid = int64_t{1} << 24;

// Written for opset 19.
absl::Status ExpandAffineGrid(Step& step) {
  ir::Value* theta = step.node->input(0);
  std::optional<int32_t> t = ElemType(*theta, *step.ctx);
  if (!IsFloatElem(t)) return Block("the expansion needs a float theta of known type");
  std::optional<std::vector<int64_t>> size = ConstInts(step, 1);
  if (!size) return Block("size is known only at run time");
  if (size->size() != 4 && size->size() != 5) return Block("size must be [N, C, H, W] or [N, C, D, H, W]");
  const int64_t k = static_cast<int64_t>(size->size()) - 2;
  std::vector<int64_t> spatial(size->begin() + 2, size->end());
  int64_t points = 1;
  for (int64_t d : spatial) {
    if (d < 0 || (d > 0 && points > kMaxAffineGrid / d))
      return Block("the grid is too large to write as a constant");
    points *= d;
  }
  if (points * (k + 1) > kMaxAffineGrid || (*size)[0] < 0)
    return Block("the grid is too large to write as a constant");
  const bool align = step.node->GetInt("align_corners").value_or(0) != 0;
  auto base = [align](int64_t i, int64_t len) {
    if (align) return len <= 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  // base[p] = (x, y[, z], 1) of spatial point p (row-major); x runs along
  // the last dim.
  const int32_t grid_type = *t == pb::kDouble ? pb::kDouble : pb::kFloat;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor grid, runner::Tensor::Allocate(grid_type, {points, k + 1}));
  std::vector<int64_t> c(spatial.size(), 0);
  for (int64_t p = 0; p < points; ++p) {
    for (int64_t j = 0; j <= k; ++j) {
      double v = 1.0;
      if (j < k) {
        const size_t axis = static_cast<size_t>(k - 1 - j);
        v = base(c[axis], spatial[axis]);
      }
      if (grid_type == pb::kDouble) {
        grid.mutable_data<double>()[p * (k + 1) + j] = v;
      } else {
        grid.mutable_data<float>()[p * (k + 1) + j] = static_cast<float>(v);
      }
    }
    for (size_t d = c.size(); d-- > 0;) {
      if (++c[d] < spatial[d]) break;
      c[d] = 0;
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * grid_v, AddConstant(*step.graph, "affine_grid_base", grid));
  if (grid_type != *t) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddBefore(step, "Cast", {grid_v}, 1, {IntAttr("to", *t)}));
    grid_v = cast->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * tt,
                           AddBefore(step, "Transpose", {theta}, 1, {IntsAttr("perm", {0, 2, 1})}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * mm, AddBefore(step, "MatMul", {grid_v, tt->output(0)}, 1));
  std::vector<int64_t> shape = {(*size)[0]};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(k);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape_v, AddInts(step, "grid_shape", shape));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Reshape", {mm->output(0), shape_v}, 1));
  return Finish(step, y);
}

// Written for opset 17: Slice and Pad take their lists as inputs.
absl::Status ExpandCenterCropPad(Step& step) {
  ir::Value* x = step.node->input(0);
  std::optional<std::vector<int64_t>> dims = KnownShape(*x, *step.ctx);
  std::optional<std::vector<int64_t>> want = ConstInts(step, 1);
  if (!dims || !want) return Block("the expansion needs the input dims and the target shape");
  const int64_t rank = static_cast<int64_t>(dims->size());
  std::vector<int64_t> axes;
  if (std::optional<std::vector<int64_t>> a = step.node->GetInts("axes")) {
    for (int64_t v : *a) {
      if (v < -rank || v >= rank) return Block("axis out of range");
      axes.push_back(v < 0 ? v + rank : v);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (want->size() != axes.size()) return Block("shape must hold one value per axis");
  std::vector<int64_t> starts, ends, slice_axes, pads(static_cast<size_t>(2 * rank), 0);
  bool pad = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i], dim = (*dims)[static_cast<size_t>(a)], w = (*want)[i];
    if (dim < 0) return Block("the expansion needs the input dims");
    if (w < 0) return Block("shape holds a negative value");
    if (w < dim) {
      starts.push_back((dim - w) / 2);
      ends.push_back((dim - w) / 2 + w);
      slice_axes.push_back(a);
    } else if (w > dim) {
      pads[static_cast<size_t>(a)] += (w - dim) / 2;
      pads[static_cast<size_t>(a + rank)] += w - dim - (w - dim) / 2;
      pad = true;
    }
  }
  ir::Value* y = x;
  ir::Node* last = nullptr;
  if (!slice_axes.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AddInts(step, "starts", starts));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, AddInts(step, "ends", ends));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, AddInts(step, "axes", slice_axes));
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Slice", {y, s, e, a}, 1));
    y = last->output(0);
  }
  if (pad) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * p, AddInts(step, "pads", pads));
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Pad", {y, p}, 1));
  }
  if (last == nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(last, AddBefore(step, "Identity", {x}, 1));
  }
  return Finish(step, last);
}

// The largest window written as a constant (elements).
constexpr int64_t kMaxWindowConstant = int64_t{1} << 20;

// Written for opset 16.
absl::Status ExpandWindow(Step& step) {
  const std::string_view op = step.node->op_type();
  const double a0 = op == "HannWindow" ? 0.5 : op == "HammingWindow" ? 25.0 / 46.0 : 0.42;
  const double a1 = op == "HannWindow" ? 0.5 : op == "HammingWindow" ? 21.0 / 46.0 : 0.5;
  const double a2 = op == "BlackmanWindow" ? 0.08 : 0.0;
  const int64_t dtype = step.node->GetInt("output_datatype").value_or(pb::kFloat);
  if (dtype == pb::kString || dtype == pb::kBool || !IsKnownDataType(static_cast<int32_t>(dtype)) ||
      DataTypeBits(static_cast<int32_t>(dtype)) < 8 || dtype == pb::kComplex64 || dtype == pb::kComplex128)
    return Block(absl::StrCat("output_datatype ", dtype, " is not a real numeric type"));
  const bool periodic = step.node->GetInt("periodic").value_or(1) != 0;
  ir::Value* size_in = step.node->num_inputs() > 0 ? step.node->input(0) : nullptr;
  if (size_in == nullptr || size_in->name().empty()) return Block("size is required");
  ir::Value* w = nullptr;
  std::optional<std::vector<int64_t>> size = ConstInts(step, 0);
  if (size && size->size() == 1 && (*size)[0] >= 0 && (*size)[0] <= kMaxWindowConstant) {
    const int64_t n = (*size)[0];
    const double n_div = static_cast<double>(periodic ? n : n - 1);
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(pb::kDouble, {n}));
    double* p = t.mutable_data<double>();
    for (int64_t i = 0; i < n; ++i) {
      const double x = 2 * std::numbers::pi * static_cast<double>(i) / n_div;
      p[i] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
    }
    ONNXKIT_ASSIGN_OR_RETURN(w, AddConstant(*step.graph, "window", t));
  } else {
    if (step.target < 11)
      return Block("size is known only at run time, and the window needs Range (opset 11)");
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scalar_shape, AddInts(step, "scalar_shape", {}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Op(step, "Cast", {size_in}, {IntAttr("to", pb::kInt64)}));
    ONNXKIT_ASSIGN_OR_RETURN(s, Op(step, "Reshape", {s, scalar_shape}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddScalar(step, "zero", pb::kInt64, 0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddScalar(step, "one", pb::kInt64, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * range, Op(step, "Range", {zero, s, one}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * n, Op(step, "Cast", {range}, {IntAttr("to", pb::kDouble)}));
    ir::Value* div = s;
    if (!periodic) {
      ONNXKIT_ASSIGN_OR_RETURN(div, Op(step, "Sub", {s, one}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(div, Op(step, "Cast", {div}, {IntAttr("to", pb::kDouble)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * two_pi,
                             AddScalar(step, "two_pi", pb::kDouble, 2 * std::numbers::pi));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, Op(step, "Mul", {two_pi, n}));
    ONNXKIT_ASSIGN_OR_RETURN(x, Op(step, "Div", {x, div}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c0, AddScalar(step, "a0", pb::kDouble, a0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c1, AddScalar(step, "a1", pb::kDouble, a1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cos1, Op(step, "Cos", {x}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t1, Op(step, "Mul", {c1, cos1}));
    ONNXKIT_ASSIGN_OR_RETURN(w, Op(step, "Sub", {c0, t1}));
    if (a2 != 0) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * two, AddScalar(step, "two", pb::kDouble, 2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c2, AddScalar(step, "a2", pb::kDouble, a2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x2, Op(step, "Mul", {x, two}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cos2, Op(step, "Cos", {x2}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t2, Op(step, "Mul", {c2, cos2}));
      ONNXKIT_ASSIGN_OR_RETURN(w, Op(step, "Add", {w, t2}));
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Cast", {w}, {IntAttr("to", dtype)}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

namespace {

// input[n, target, d...] losses of NegativeLogLikelihoodLoss over `logp`,
// reduced; written for opset 11.
absl::StatusOr<ir::Value*> NllLossNodes(Step& step, ir::Value* logp, int32_t t) {
  ir::Value* target = PresentInput(step, 1);
  ir::Value* weight = PresentInput(step, 2);
  if (target == nullptr) return Block("target is required");
  std::optional<int32_t> tt = ElemType(*target, *step.ctx);
  if (!tt || (*tt != pb::kInt32 && *tt != pb::kInt64))
    return Block("the expansion needs int32 or int64 targets");
  const std::string reduction = step.node->GetString("reduction").value_or("mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return Block(absl::StrCat("reduction '", reduction, "' is not one of none, sum, mean"));
  ir::Value* safe = target;
  ir::Value* keep = nullptr;
  if (std::optional<int64_t> ignore = step.node->GetInt("ignore_index")) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ii, AddIntScalar(step, "ignore_index", *tt, *ignore));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddScalar(step, "zero", *tt, 0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * eq, Op(step, "Equal", {target, ii}));
    ONNXKIT_ASSIGN_OR_RETURN(keep, Op(step, "Not", {eq}));
    ONNXKIT_ASSIGN_OR_RETURN(safe, Op(step, "Where", {keep, target, zero}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * at, Op(step, "Unsqueeze", {safe}, {IntsAttr("axes", {1})}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * picked, Op(step, "GatherElements", {logp, at}, {IntAttr("axis", 1)}));
  ONNXKIT_ASSIGN_OR_RETURN(picked, Op(step, "Squeeze", {picked}, {IntsAttr("axes", {1})}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * loss, Op(step, "Neg", {picked}));
  // The weight of each position: weight[target], 0 where ignored.
  ir::Value* wt = nullptr;
  if (weight != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(wt, Op(step, "Gather", {weight, safe}));
  }
  if (keep != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kept, Op(step, "Cast", {keep}, {IntAttr("to", t)}));
    if (wt == nullptr) {
      wt = kept;
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(wt, Op(step, "Mul", {wt, kept}));
    }
  }
  if (wt != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(loss, Op(step, "Mul", {loss, wt}));
  }
  if (reduction == "none") return loss;
  const std::vector<pb::AttributeProto> all = {IntAttr("keepdims", 0)};
  if (reduction == "sum") return Op(step, "ReduceSum", {loss}, all);
  if (wt == nullptr) return Op(step, "ReduceMean", {loss}, all);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * total, Op(step, "ReduceSum", {loss}, all));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * weights, Op(step, "ReduceSum", {wt}, all));
  return Op(step, "Div", {total, weights});
}

absl::StatusOr<int32_t> LossType(Step& step) {
  if (step.target < 11)
    return Block("the expansion picks the targets' values with GatherElements (opset 11)");
  std::optional<int32_t> t = ElemType(*step.node->input(0), *step.ctx);
  if (!t || (*t != pb::kFloat && *t != pb::kDouble && *t != pb::kFloat16))
    return Block("the expansion needs float, double or float16 inputs of known type");
  return *t;
}

}  // namespace

absl::Status ExpandNllLoss(Step& step) {
  if (PresentInput(step, 0) == nullptr) return Block("input is required");
  ONNXKIT_ASSIGN_OR_RETURN(int32_t t, LossType(step));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, NllLossNodes(step, step.node->input(0), t));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ExpandSoftmaxCrossEntropy(Step& step) {
  ir::Value* scores = PresentInput(step, 0);
  if (scores == nullptr) return Block("scores is required");
  ONNXKIT_ASSIGN_OR_RETURN(int32_t t, LossType(step));
  std::optional<int64_t> rank = RankOf(step, scores);
  if (!rank || *rank < 2) return Block("the expansion needs scores of known rank 2 or more");
  // LogSoftmax along axis 1: below 13 it flattens from its axis on, so the
  // classes go last first when more dims follow them.
  ir::Value* logp = nullptr;
  if (*rank == 2) {
    ONNXKIT_ASSIGN_OR_RETURN(logp, Op(step, "LogSoftmax", {scores}, {IntAttr("axis", 1)}));
  } else {
    std::vector<int64_t> perm = {0}, back(static_cast<size_t>(*rank));
    for (int64_t d = 2; d < *rank; ++d) perm.push_back(d);
    perm.push_back(1);
    for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * last, Op(step, "Transpose", {scores}, {IntsAttr("perm", perm)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lp, Op(step, "LogSoftmax", {last}, {IntAttr("axis", *rank - 1)}));
    ONNXKIT_ASSIGN_OR_RETURN(logp, Op(step, "Transpose", {lp}, {IntsAttr("perm", back)}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, NllLossNodes(step, logp, t));
  return ReplaceNodeOutputs(step, y, {{1, logp}});
}

}  // namespace onnxkit::passes::convert
