// Shape functions of reductions and axis ops: Reduce* (axes attribute or,
// from ReduceSum-13 and every Reduce-18, input; keepdims;
// noop_with_empty_axes), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax (axis
// check), TopK, Det.
//
//   ReduceSum([2, 3, 4], axes=[1], keepdims=0) -> [2, 4]
//   ReduceMean([2, 3, 4], axes=[3])            -> E0601 axis 3 is out of range for rank 3
//   TopK([5, 10], K=3, axis=-1)                -> [5, 3], [5, 3]
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checker/infer/context.h"
#include "checker/infer/shape_fns.h"

namespace onnxkit::checker::infer {

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

}  // namespace onnxkit::checker::infer
