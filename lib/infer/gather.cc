// Shape functions of indexing ops: Gather (with shape data), GatherElements,
// GatherND, OneHot, Compress, NonZero, Unique.
//
//   Gather([5, 4, 3], indices [2, 7], axis=1) -> [5, 2, 7, 3]
//   Gather([5, 4], axis=2)                    -> E0601 axis 2 is out of range for rank 2
//   GatherND([2, 3, 4], indices [5, 2])       -> [5, 4]
//   OneHot(indices [2, 3], depth 10, axis=-1) -> [2, 3, 10]
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"

namespace onnxkit::infer {

void ShapeGather(NodeContext& ctx) {
  const Dims* data = ctx.input_shape(0);
  const Dims* indices = ctx.input_shape(1);
  if (data == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(data->size()));
  if (!axis) return;
  const Dim& dim = (*data)[static_cast<size_t>(*axis)];
  std::optional<std::vector<int64_t>> index_values = ctx.input_ints(1);
  if (index_values && dim.value) {
    for (int64_t i : *index_values) {
      if (i < -*dim.value || i >= *dim.value) {
        ctx.Fail(absl::StrCat("index ", i, " is out of range for axis ", *axis, " of size ", *dim.value,
                              " (input ", DimsToString(*data), ")"));
        return;
      }
    }
  }
  if (indices == nullptr) return;
  Dims out(data->begin(), data->begin() + *axis);
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), data->begin() + *axis + 1, data->end());
  ctx.set_shape(0, std::move(out));
  // Shape data: Gather from a 1-D shape tensor.
  const Dims* values = ctx.input_data(0);
  if (values == nullptr || !index_values || data->size() != 1 || indices->size() > 1) return;
  Dims picked;
  const int64_t n = static_cast<int64_t>(values->size());
  for (int64_t i : *index_values) {
    if (i < -n || i >= n) return;
    picked.push_back((*values)[static_cast<size_t>(i < 0 ? i + n : i)]);
  }
  ctx.set_data(0, std::move(picked));
}

void ShapeGatherElements(NodeContext& ctx) {
  const Dims* data = ctx.input_shape(0);
  const Dims* indices = ctx.input_shape(1);
  if (data != nullptr && indices != nullptr && data->size() != indices->size()) {
    ctx.Fail(absl::StrCat("indices ", DimsToString(*indices), " must have the rank of data ", DimsToString(*data)));
    return;
  }
  if (data != nullptr && !ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(data->size()))) return;
  ctx.PropagateShape(1, 0);
}

void ShapeGatherND(NodeContext& ctx) {
  const Dims* data = ctx.input_shape(0);
  const Dims* indices = ctx.input_shape(1);
  if (data == nullptr || indices == nullptr) return;
  const int64_t b = ctx.attr_int("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(data->size());
  const int64_t q = static_cast<int64_t>(indices->size());
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q)) {
    ctx.Fail(absl::StrCat("data ", DimsToString(*data), " and indices ", DimsToString(*indices),
                          " do not fit batch_dims ", b));
    return;
  }
  const Dim& k = indices->back();
  if (!k.value) return;
  if (*k.value < 1 || *k.value > r - b) {
    ctx.Fail(absl::StrCat("the last dim of indices ", DimsToString(*indices), " is ", *k.value,
                          ", expected 1 to ", r - b, " for data ", DimsToString(*data)));
    return;
  }
  Dims out(indices->begin(), indices->end() - 1);
  out.insert(out.end(), data->begin() + b + *k.value, data->end());
  ctx.set_shape(0, std::move(out));
}

void ShapeOneHot(NodeContext& ctx) {
  const Dims* indices = ctx.input_shape(0);
  if (indices == nullptr) return;
  const int64_t rank = static_cast<int64_t>(indices->size()) + 1;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", -1), rank);
  if (!axis) return;
  Dim depth = Dim::Unknown();
  std::optional<int64_t> d = ctx.input_scalar(1);
  if (const std::vector<double>* f = ctx.input_floats(1); f != nullptr && f->size() == 1 && (*f)[0] > -1e18 &&
                                                           (*f)[0] < 1e18) {
    d = static_cast<int64_t>((*f)[0]);  // a float depth is truncated, as onnx casts it
  }
  if (d) {
    if (*d < 0) {
      ctx.Fail(absl::StrCat("depth ", *d, " is negative"));
      return;
    }
    depth = Dim::Of(*d);
  }
  Dims out = *indices;
  out.insert(out.begin() + *axis, depth);
  ctx.set_shape(0, std::move(out));
}

void ShapeCompress(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (!ctx.has_attr("axis")) {
    ctx.set_shape(0, {Dim::Unknown()});
    return;
  }
  if (in == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(in->size()));
  if (!axis) return;
  Dims out = *in;
  out[static_cast<size_t>(*axis)] = Dim::Unknown();
  ctx.set_shape(0, std::move(out));
}

void ShapeNonZero(NodeContext& ctx) {
  std::optional<int64_t> rank = ctx.input_rank(0);
  ctx.set_shape(0, {rank ? Dim::Of(*rank) : Dim::Unknown(), Dim::Unknown()});
}

void ShapeUnique(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (!ctx.has_attr("axis")) {
    ctx.set_shape(0, {Dim::Unknown()});
    if (in != nullptr) ctx.set_shape(2, {ctx.Product(*in)});
  } else if (in != nullptr) {
    std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(in->size()));
    if (!axis) return;
    Dims out = *in;
    out[static_cast<size_t>(*axis)] = Dim::Unknown();
    ctx.set_shape(0, std::move(out));
    ctx.set_shape(2, {(*in)[static_cast<size_t>(*axis)]});
  }
  ctx.set_shape(1, {Dim::Unknown()});
  ctx.set_shape(3, {Dim::Unknown()});
}

void ShapeNonMaxSuppression(NodeContext& ctx) { ctx.set_shape(0, {Dim::Unknown(), Dim::Of(3)}); }

}  // namespace onnxkit::infer
