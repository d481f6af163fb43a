// Shape functions of ops that cut or join tensors: Concat, Split, Slice,
// Pad, CenterCropPad, and the shape queries Shape and Size (whose outputs
// carry shape data to Reshape, Expand, ConstantOfShape...).
//
//   Concat([2, 3], [2, 5], axis=1) -> [2, 8]
//   Concat([2, 3], [4, 5], axis=1) -> E0601 input 1 dim 0 is 4, expected 2
//   Split([6, 4], split=[2, 4])    -> [2, 4], [4, 4]
//   Slice([10], starts=[-3], ends=[INT64_MAX]) -> [3]
//   Shape([N, 3], start=1)         -> [1] holding [3]
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/base/checked_math.h"

namespace onnxkit::infer {

void ShapeConcat(NodeContext& ctx) {
  const ir::Attribute* axis_attr = ctx.attr("axis");
  if (axis_attr == nullptr && ctx.opset() >= 4) return;
  const int64_t axis_value = ctx.attr_int("axis", 1);
  std::optional<int64_t> rank;
  for (int i = 0; i < ctx.num_inputs() && !rank; ++i) rank = ctx.input_rank(i);
  if (!rank) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(axis_value, *rank);
  if (!axis) return;
  Dims out(static_cast<size_t>(*rank));
  Dim sum = Dim::Of(0);
  bool first = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Dims* s = ctx.input_shape(i);
    if (s == nullptr) {
      sum = Dim::Unknown();
      continue;
    }
    if (static_cast<int64_t>(s->size()) != *rank) {
      ctx.Fail(absl::StrCat("input ", i, " has rank ", s->size(), ", expected ", *rank, " like the others"));
      return;
    }
    for (size_t k = 0; k < s->size(); ++k) {
      const Dim& d = (*s)[k];
      if (static_cast<int64_t>(k) == *axis) continue;
      Dim& o = out[k];
      if (first || (d.value && !o.value)) {
        o = d;
      } else if (o.value && d.value && *o.value != *d.value) {
        ctx.Fail(absl::StrCat("input ", i, " ", DimsToString(*s), " has dim ", k, " = ", *d.value, ", expected ",
                              *o.value, " (only the axis ", *axis, " dims may differ)"));
        return;
      } else if (!o.value && !d.value && !d.param.empty() && o.param != d.param) {
        o = o.param.empty() ? d : Dim::Unknown();
      }
    }
    sum = ctx.Add(sum, (*s)[static_cast<size_t>(*axis)]);
    if (ctx.failed()) return;
    first = false;
  }
  out[static_cast<size_t>(*axis)] = sum;
  ctx.set_shape(0, std::move(out));
  if (*rank != 1) return;
  Dims data;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Dims* d = ctx.input_data(i);
    if (d == nullptr) return;
    data.insert(data.end(), d->begin(), d->end());
    if (static_cast<int64_t>(data.size()) > kMaxDataElements) return;
  }
  ctx.set_data(0, std::move(data));
}

void ShapeSplit(NodeContext& ctx) {
  const int64_t n = ctx.num_outputs();
  if (const ir::Attribute* a = ctx.attr("num_outputs"); a != nullptr && a->proto.i != n) {
    ctx.Fail(absl::StrCat("attribute 'num_outputs' is ", a->proto.i, " but the node has ", n, " outputs"));
    return;
  }
  if (ctx.opset() >= 18 && ctx.has_input(1) == (ctx.attr("num_outputs") != nullptr)) {
    ctx.Fail(ctx.has_input(1) ? "Split-18 takes the split input or the num_outputs attribute, not both"
                              : "Split-18 needs the split input or the num_outputs attribute");
    return;
  }
  std::optional<std::vector<int64_t>> split;
  bool split_given = false;
  if (ctx.has_input(1)) {
    split_given = true;
    split = ctx.input_ints(1);
  } else if (ctx.opset() < 13 && ctx.has_attr("split")) {
    split_given = true;
    split = ctx.attr_ints("split");
  }
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(in->size()));
  if (!axis) return;
  const Dim& d = (*in)[static_cast<size_t>(*axis)];
  std::vector<Dim> sizes(static_cast<size_t>(n), Dim::Unknown());
  if (split_given && split) {
    if (static_cast<int64_t>(split->size()) != n) {
      ctx.Fail(absl::StrCat("split ", IntsToString(*split), " has ", split->size(), " sizes for ", n, " outputs"));
      return;
    }
    int64_t total = 0;
    for (size_t i = 0; i < split->size(); ++i) {
      std::optional<int64_t> t = CheckedAdd(total, (*split)[i]);
      if (!t) {
        ctx.Fail(absl::StrCat("split ", IntsToString(*split), " has a negative or overflowing size"));
        return;
      }
      total = *t;
      sizes[i] = Dim::Of((*split)[i]);
    }
    if (d.value && total != *d.value) {
      ctx.Fail(absl::StrCat("split ", IntsToString(*split), " sums to ", total, ", but dim ", *axis, " of ",
                            DimsToString(*in), " is ", *d.value));
      return;
    }
  } else if (!split_given && d.value && n > 0) {
    int64_t chunk = *d.value / n;
    if (*d.value % n != 0) {
      if (!ctx.has_attr("num_outputs")) {
        ctx.Fail(absl::StrCat("dim ", *axis, " of ", DimsToString(*in), " (", *d.value,
                              ") does not split evenly into ", n, " outputs"));
        return;
      }
      chunk = chunk + 1;  // opset 18: the last chunk is smaller
    }
    for (int64_t i = 0; i < n; ++i) sizes[static_cast<size_t>(i)] = Dim::Of(chunk);
    int64_t last = *d.value - chunk * (n - 1);
    if (last < 0) {
      ctx.Fail(absl::StrCat("dim ", *axis, " of ", DimsToString(*in), " (", *d.value, ") cannot feed ", n,
                            " outputs of ", chunk));
      return;
    }
    sizes.back() = Dim::Of(last);
  }
  for (int64_t i = 0; i < n; ++i) {
    Dims out = *in;
    out[static_cast<size_t>(*axis)] = sizes[static_cast<size_t>(i)];
    ctx.set_shape(static_cast<int>(i), std::move(out));
  }
}

namespace {

// Elements of [start, end) by `step` on a dim of size `dim`, with the
// clamping of the Slice spec. `step` is not 0.
int64_t SliceCount(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t* first) {
  if (start < 0) start += dim;  // no overflow: dim >= 0 and start < 0
  if (end < 0) end += dim;
  int64_t diff;
  int64_t magnitude;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    diff = end - start;
    magnitude = step;
  } else {
    if (dim == 0) return 0;
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    diff = start - end;
    magnitude = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
  }
  *first = start;
  if (diff <= 0) return 0;
  return (diff - 1) / magnitude + 1;
}

}  // namespace

void ShapeSlice(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  } else {
    starts = ctx.input_ints(1);
    ends = ctx.input_ints(2);
    if (ctx.has_input(3)) {
      axes = ctx.input_ints(3);
      if (!axes) starts.reset();
    }
    if (ctx.has_input(4)) {
      steps = ctx.input_ints(4);
      if (!steps) starts.reset();
    }
  }
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  if (!starts || !ends) {
    ctx.set_shape(0, Dims(in->size()));
    return;
  }
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
  if (ends->size() != starts->size() || axes->size() != starts->size() || steps->size() != starts->size()) {
    ctx.Fail(absl::StrCat("starts, ends, axes and steps have different lengths (", starts->size(), ", ",
                          ends->size(), ", ", axes->size(), ", ", steps->size(), ")"));
    return;
  }
  Dims out = *in;
  std::vector<bool> seen(in->size(), false);
  const Dims* data = ctx.input_data(0);
  Dims sliced_data;
  for (size_t i = 0; i < axes->size(); ++i) {
    std::optional<int64_t> axis = ctx.NormalizeAxis((*axes)[i], rank);
    if (!axis) return;
    if (seen[static_cast<size_t>(*axis)]) {
      ctx.Fail(absl::StrCat("axes ", IntsToString(*axes), " repeat axis ", *axis));
      return;
    }
    seen[static_cast<size_t>(*axis)] = true;
    const int64_t step = (*steps)[i];
    if (step == 0) {
      ctx.Fail(absl::StrCat("steps ", IntsToString(*steps), " has a 0 step"));
      return;
    }
    Dim& o = out[static_cast<size_t>(*axis)];
    if (!o.value) {
      // An unknown dim taken whole stays what it is.
      bool whole = step == 1 && (*starts)[i] == 0 && (*ends)[i] >= std::numeric_limits<int32_t>::max();
      if (!whole) o = Dim::Unknown();
      data = nullptr;
      continue;
    }
    int64_t first = 0;
    int64_t count = SliceCount(*o.value, (*starts)[i], (*ends)[i], step, &first);
    if (data != nullptr && rank == 1 && static_cast<int64_t>(data->size()) == *o.value) {
      for (int64_t k = 0; k < count; ++k) sliced_data.push_back((*data)[static_cast<size_t>(first + k * step)]);
    } else {
      data = nullptr;
    }
    o = Dim::Of(count);
  }
  ctx.set_shape(0, std::move(out));
  if (data != nullptr && rank == 1) ctx.set_data(0, std::move(sliced_data));
}

void ShapePad(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::optional<std::vector<int64_t>> pads;
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints(ctx.opset() < 2 ? "paddings" : "pads");
  } else {
    pads = ctx.input_ints(1);
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    std::optional<std::vector<int64_t>> a = ctx.input_ints(3);
    if (!a) pads.reset();
    for (int64_t x : a.value_or(std::vector<int64_t>{})) {
      std::optional<int64_t> axis = ctx.NormalizeAxis(x, rank, "axes value");
      if (!axis) return;
      axes.push_back(*axis);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (!pads) {
    ctx.set_shape(0, Dims(in->size()));
    return;
  }
  const size_t n = axes.size();
  if (pads->size() != 2 * n) {
    ctx.Fail(absl::StrCat("pads ", IntsToString(*pads), " has ", pads->size(), " values, expected ", 2 * n));
    return;
  }
  Dims out = *in;
  for (size_t i = 0; i < n; ++i) {
    Dim& o = out[static_cast<size_t>(axes[i])];
    if (!o.value) {
      if ((*pads)[i] != 0 || (*pads)[i + n] != 0) o = Dim::Unknown();
      continue;
    }
    std::optional<int64_t> d = SignedAdd(*o.value, (*pads)[i]);
    if (d) d = SignedAdd(*d, (*pads)[i + n]);
    if (!d || *d < 0) {
      ctx.Fail(absl::StrCat("padding dim ", axes[i], " of ", DimsToString(*in), " by ", (*pads)[i], " and ",
                            (*pads)[i + n], " gives ", d ? absl::StrCat("a negative size ", *d) : "an overflow"));
      return;
    }
    o = Dim::Of(*d);
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeCenterCropPad(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  std::optional<std::vector<int64_t>> shape = ctx.input_ints(1);
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  if (!shape) {
    ctx.set_shape(0, Dims(in->size()));
    return;
  }
  std::vector<int64_t> axes;
  if (std::optional<std::vector<int64_t>> a = ctx.attr_ints("axes")) {
    axes = *a;
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (axes.size() != shape->size()) {
    ctx.Fail(absl::StrCat("shape ", IntsToString(*shape), " has ", shape->size(), " values for ", axes.size(),
                          " axes"));
    return;
  }
  Dims out = *in;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> axis = ctx.NormalizeAxis(axes[i], rank, "axes value");
    if (!axis) return;
    if ((*shape)[i] < 0) {
      ctx.Fail(absl::StrCat("shape ", IntsToString(*shape), " has the negative value ", (*shape)[i]));
      return;
    }
    out[static_cast<size_t>(*axis)] = Dim::Of((*shape)[i]);
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeShape(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) {
    ctx.set_shape(0, {Dim::Unknown()});
    return;
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(ctx.attr_int("start", 0));
  int64_t end = clamp(ctx.attr_int("end", rank));
  int64_t n = std::max<int64_t>(0, end - start);
  ctx.set_shape(0, {Dim::Of(n)});
  ctx.set_data(0, Dims(in->begin() + start, in->begin() + start + n));
}

void ShapeSize(NodeContext& ctx) {
  ctx.set_shape(0, {});
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  std::optional<std::vector<int64_t>> dims = KnownValues(*in);
  std::optional<int64_t> count = dims ? CheckedElementCount(*dims) : std::nullopt;
  if (count) ctx.set_data(0, {Dim::Of(*count)});
}

}  // namespace onnxkit::infer
