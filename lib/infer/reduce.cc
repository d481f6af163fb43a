// Shape functions of reductions and axis ops: Reduce* (axes attribute or,
// from ReduceSum-13 and every Reduce-18, input; keepdims;
// noop_with_empty_axes), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax (axis
// check), TopK, Det; and of the normalizations and losses that reduce over
// axes: BatchNormalization (and its training outputs), LayerNormalization
// (Mean/InvStdDev), the losses with a `reduction` attribute.
//
//   ReduceSum([2, 3, 4], axes=[1], keepdims=0) -> [2, 4]
//   ReduceMean([2, 3, 4], axes=[3])            -> E0601 axis 3 is out of range for rank 3
//   TopK([5, 10], K=3, axis=-1)                -> [5, 3], [5, 3]
//   BatchNormalization(X [2, 3, 8, 8], scale [4], ...) -> E0601 scale [4], expected [3]
//   LayerNormalization(X [2, 5, 8], axis=-1) -> Y [2, 5, 8], Mean [2, 5, 1]
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"

namespace onnxkit::infer {

void ShapeReduce(NodeContext& ctx) {
  const bool axes_input = ctx.opset() >= 18 || (ctx.op() == "ReduceSum" && ctx.opset() >= 13);
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const Dims* in = ctx.input_shape(0);
  std::optional<std::vector<int64_t>> axes;
  if (axes_input) {
    if (ctx.has_input(1)) {
      axes = ctx.input_ints(1);
      if (!axes) {
        if (in != nullptr && keepdims) ctx.set_shape(0, Dims(in->size()));
        return;
      }
    }
  } else {
    axes = ctx.attr_ints("axes");
  }
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::vector<bool> reduced(in->size(), false);
  if (!axes || axes->empty()) {
    if (axes_input && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
      ctx.set_shape(0, *in);
      return;
    }
    reduced.assign(in->size(), true);
  } else {
    for (int64_t a : *axes) {
      std::optional<int64_t> axis = ctx.NormalizeAxis(a, rank);
      if (!axis) return;
      reduced[static_cast<size_t>(*axis)] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < in->size(); ++i) {
    if (!reduced[i]) {
      out.push_back((*in)[i]);
    } else if (keepdims) {
      out.push_back(Dim::Of(1));
    }
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeArgMax(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(in->size()));
  if (!axis) return;
  Dims out = *in;
  if (ctx.attr_int("keepdims", 1) != 0) {
    out[static_cast<size_t>(*axis)] = Dim::Of(1);
  } else {
    out.erase(out.begin() + *axis);
  }
  ctx.set_shape(0, std::move(out));
}

// Softmax, LogSoftmax, Hardmax: same shape; the axis must exist.
void ShapeSoftmax(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  const int64_t fallback = ctx.opset() >= 13 ? -1 : 1;
  const int64_t rank = static_cast<int64_t>(in->size());
  // Before opset 13 the input is coerced to 2-D at `axis`, which may be rank.
  int64_t axis = ctx.attr_int("axis", fallback);
  if (ctx.opset() < 13 && axis == rank && rank > 0) axis = rank - 1;
  if (!ctx.NormalizeAxis(axis, rank)) return;
  ctx.set_shape(0, *in);
}

void ShapeTopK(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", -1), static_cast<int64_t>(in->size()));
  if (!axis) return;
  std::optional<int64_t> k = ctx.opset() < 10 ? ctx.node().GetInt("k") : ctx.input_scalar(1);
  Dims out = *in;
  Dim& d = out[static_cast<size_t>(*axis)];
  if (k) {
    if (*k < 0 || (d.value && *k > *d.value)) {
      ctx.Fail(absl::StrCat("K ", *k, " is out of range for axis ", *axis, " of ", DimsToString(*in)));
      return;
    }
    d = Dim::Of(*k);
  } else {
    d = Dim::Unknown();
  }
  ctx.set_shape(0, out);
  ctx.set_shape(1, std::move(out));
}

void ShapeDet(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  if (in->size() < 2) {
    ctx.Fail(absl::StrCat("input must have rank at least 2, got rank ", in->size()));
    return;
  }
  const Dim& a = (*in)[in->size() - 2];
  const Dim& b = (*in)[in->size() - 1];
  if (a.value && b.value && *a.value != *b.value) {
    ctx.Fail(absl::StrCat("input ", DimsToString(*in), " is not made of square matrices"));
    return;
  }
  ctx.set_shape(0, Dims(in->begin(), in->end() - 2));
}

void ShapeBatchNormalization(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr || x->size() < 2) return;
  const Dim& c = (*x)[1];
  // Before opset 9, `spatial=0` allowed per-position parameters.
  if (ctx.opset() >= 9) {
    static constexpr const char* kNames[] = {"scale", "B", "mean", "var"};
    for (int i = 1; i <= 4; ++i) {
      const Dims* p = ctx.input_shape(i);
      if (p == nullptr) continue;
      if (p->size() != 1 || (c.value && (*p)[0].value && *(*p)[0].value != *c.value)) {
        ctx.Fail(absl::StrCat("input '", kNames[i - 1], "' has shape ", DimsToString(*p), ", expected [",
                              c.value ? std::to_string(*c.value) : std::string("C"), "] (the channels of X)"));
        return;
      }
    }
  }
  if (ctx.opset() < 9 && ctx.attr_int("spatial", 1) == 0) return;
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_shape(i, {c});
}

void ShapeLayerNormalization(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  ctx.set_elem(1, static_cast<int32_t>(ctx.attr_int("stash_type", pb::kFloat)));
  ctx.set_elem(2, static_cast<int32_t>(ctx.attr_int("stash_type", pb::kFloat)));
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", -1), static_cast<int64_t>(x->size()));
  if (!axis) return;
  Dims stats = *x;
  for (size_t i = static_cast<size_t>(*axis); i < stats.size(); ++i) stats[i] = Dim::Of(1);
  ctx.set_shape(1, stats);
  ctx.set_shape(2, std::move(stats));
}

// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: `none` keeps
// [N, d1, ...] (the input without its class dim), else a scalar.
void ShapeLoss(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (ctx.attr_string("reduction", "mean") != "none") {
    ctx.set_shape(0, {});
  } else if (x != nullptr) {
    if (x->size() < 2) {
      ctx.Fail(absl::StrCat("input must have rank at least 2, got rank ", x->size()));
      return;
    }
    Dims out = *x;
    out.erase(out.begin() + 1);
    ctx.set_shape(0, std::move(out));
  }
  ctx.PropagateShape(0, 1);  // SoftmaxCrossEntropyLoss's log_prob
}

}  // namespace onnxkit::infer
