// Reference kernels that rearrange elements: Transpose, Concat, Split (split
// attribute, split input, num_outputs), Slice (attributes before opset 10,
// inputs with steps from 10), Compress, ReverseSequence, DepthToSpace
// (DCR/CRD) and SpaceToDepth. All copy elements by type (ElementCopier).
#include <cstring>
#include <numeric>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {

using shape_ops::DimProduct;
using shape_ops::ShapeString;

namespace {

// y = x transposed, for element types of sizeof(T) bytes: the innermost
// output axis is a strided loop; the outer axes advance an odometer.
template <typename T>
void TransposeWords(const Tensor& x, Tensor& y, const std::vector<int64_t>& out_shape,
                    const std::vector<int64_t>& src_strides) {
  const T* src = static_cast<const T*>(x.raw());
  T* dst = static_cast<T*>(y.mutable_raw());
  size_t rank = out_shape.size();
  int64_t inner = out_shape[rank - 1], inner_stride = src_strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t base = 0;
  for (int64_t out = 0, total = y.size(); out < total; out += inner) {
    const T* s = src + base;
    for (int64_t k = 0; k < inner; ++k) dst[out + k] = s[k * inner_stride];
    for (size_t d = rank - 1; d-- > 0;) {
      base += src_strides[d];
      if (++index[d] < out_shape[d]) break;
      base -= src_strides[d] * out_shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace

absl::Status Transpose(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  size_t rank = x->shape().size();
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the dims
  if (auto p = ctx.node().GetInts("perm")) perm = *p;
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) {
      valid = false;
      break;
    }
    seen[static_cast<size_t>(p)] = true;
  }
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "perm [", absl::StrJoin(perm, ", "), "] is not a permutation of the dims of ", DescribeTensor(*x)));
  }
  std::vector<int64_t> out_shape(rank), src_strides(rank);
  std::vector<int64_t> in_strides = Strides(x->shape());
  for (size_t i = 0; i < rank; ++i) {
    out_shape[i] = x->shape()[static_cast<size_t>(perm[i])];
    src_strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  int bits = x->is_string() ? 0 : DataTypeBits(x->dtype());
  if (rank > 0 && x->size() > 0 && (bits == 8 || bits == 16 || bits == 32 || bits == 64)) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), out_shape));
    // Whole elements: an odometer over the output, source offset updated
    // incrementally, typed loads and stores.
    switch (bits) {
      case 8: TransposeWords<uint8_t>(*x, *y, out_shape, src_strides); break;
      case 16: TransposeWords<uint16_t>(*x, *y, out_shape, src_strides); break;
      case 32: TransposeWords<uint32_t>(*x, *y, out_shape, src_strides); break;
      default: TransposeWords<uint64_t>(*x, *y, out_shape, src_strides); break;
    }
    return absl::OkStatus();
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  ElementCopier copy(*x, *y);
  int64_t out = 0;
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& c) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += c[d] * src_strides[d];
    copy.Copy(src, out++);
  });
  return absl::OkStatus();
}

absl::Status Concat(KernelContext& ctx) {
  std::vector<const Tensor*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
    ins.push_back(t);
  }
  if (ins.empty()) return absl::InvalidArgumentError("Concat needs at least one input");
  const Tensor& first = *ins[0];
  if (first.rank() == 0) return absl::InvalidArgumentError("Concat inputs must have rank >= 1");
  int64_t default_axis = ctx.opset() < 4 ? 1 : 0;
  auto axis_attr = ctx.node().GetInt("axis");
  if (!axis_attr && ctx.opset() >= 4) return absl::InvalidArgumentError("Concat needs the axis attribute");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr.value_or(default_axis), first.rank()));
  std::vector<int64_t> out_shape = first.shape();
  out_shape[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : ins) {
    bool ok = t->dtype() == first.dtype() && t->rank() == first.rank();
    for (int d = 0; ok && d < first.rank(); ++d) ok = d == axis || t->dim(d) == first.dim(d);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("cannot concatenate ", DescribeTensor(first), " and ",
                                                     DescribeTensor(*t), " along axis ", axis));
    }
    out_shape[static_cast<size_t>(axis)] += t->dim(static_cast<int>(axis));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, first.dtype(), out_shape));
  size_t a = static_cast<size_t>(axis);
  int64_t outer = DimProduct(out_shape, 0, a);
  int64_t inner = DimProduct(out_shape, a + 1, out_shape.size());
  int64_t out_row = out_shape[a] * inner;
  int64_t at = 0;  // offset of the current input inside an output row
  for (const Tensor* t : ins) {
    int64_t row = t->shape()[a] * inner;
    ElementCopier copy(*t, *y);
    for (int64_t o = 0; o < outer; ++o) copy.CopyRun(o * row, o * out_row + at, row);
    at += row;
  }
  return absl::OkStatus();
}

namespace {

// The split sizes of Split at this opset, or an error.
absl::StatusOr<std::vector<int64_t>> SplitSizes(KernelContext& ctx, int64_t dim) {
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset() < 13) split = ctx.node().GetInts("split");
  if (ctx.opset() >= 13 || ctx.opset() < 2) {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.OptionalInput(1));
    if (s != nullptr) {
      if (s->rank() > 1)
        return absl::InvalidArgumentError(absl::StrCat("split must be 1-D, got ", DescribeTensor(*s)));
      ONNXKIT_ASSIGN_OR_RETURN(split, shape_ops::ReadInts(*s, "split"));
    }
  }
  int64_t n = ctx.num_outputs();
  auto num_outputs = ctx.opset() >= 18 ? ctx.node().GetInt("num_outputs") : std::nullopt;
  if (split) {
    if (num_outputs)
      return absl::InvalidArgumentError("Split takes either the split input or num_outputs, not both");
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0 || s > dim - sum) {
        return absl::InvalidArgumentError(
            absl::StrCat("split ", ShapeString(*split), " does not divide a dim of ", dim));
      }
      sum += s;
    }
    if (sum != dim || static_cast<int64_t>(split->size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("split ", ShapeString(*split), " must have ", n, " values summing to the dim ", dim));
    }
    return *split;
  }
  if (num_outputs) {
    if (*num_outputs < 1 || *num_outputs != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_outputs ", *num_outputs, " does not match the ", n, " outputs"));
    }
    int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
    std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
    if (chunk * (n - 1) > dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot split a dim of ", dim, " into ", n, " chunks of ", chunk));
    }
    sizes.back() = dim - chunk * (n - 1);
    return sizes;
  }
  if (n < 1 || dim % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dim of ", dim, " does not split evenly into ", n, " outputs"));
  }
  return std::vector<int64_t>(static_cast<size_t>(n), dim / n);
}

}  // namespace

namespace {

// count rows of `bytes` each from src (rows `src_stride` bytes apart) to
// dst (packed): element-sized rows (a last axis split in ones or twos) as
// typed loads and stores, others memcpy'd.
void CopyRows(const char* src, size_t src_stride, char* dst, size_t bytes, int64_t count) {
  auto typed = [&](auto zero) {
    using T = decltype(zero);
    const size_t per = bytes / sizeof(T);
    for (int64_t r = 0; r < count; ++r) {
      const char* s = src + static_cast<size_t>(r) * src_stride;
      for (size_t k = 0; k < per; ++k) {
        T v;
        std::memcpy(&v, s + k * sizeof(T), sizeof(T));
        std::memcpy(dst + (static_cast<size_t>(r) * per + k) * sizeof(T), &v, sizeof(T));
      }
    }
  };
  if (bytes == 4 || bytes == 12) {
    typed(uint32_t{});
  } else if (bytes == 8 || bytes == 16) {
    typed(uint64_t{});
  } else {
    for (int64_t r = 0; r < count; ++r)
      std::memcpy(dst + static_cast<size_t>(r) * bytes, src + static_cast<size_t>(r) * src_stride, bytes);
  }
}

}  // namespace

absl::Status Split(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() == 0) return absl::InvalidArgumentError("Split input must have rank >= 1");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 0), x->rank()));
  size_t a = static_cast<size_t>(axis);
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(ctx, x->shape()[a]));
  int64_t outer = DimProduct(x->shape(), 0, a);
  int64_t inner = DimProduct(x->shape(), a + 1, x->shape().size());
  int64_t in_row = x->shape()[a] * inner;
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> shape = x->shape();
    shape[a] = sizes[i];
    int64_t row = sizes[i] * inner;
    const int bits = x->is_string() ? 0 : DataTypeBits(x->dtype());
    if (ctx.OutputRequested(static_cast<int>(i)) && bits >= 8 && bits % 8 == 0) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                               ctx.AllocateOutputUninitialized(static_cast<int>(i), x->dtype(), shape));
      const size_t esize = static_cast<size_t>(bits / 8);
      CopyRows(static_cast<const char*>(x->raw()) + static_cast<size_t>(at) * esize,
               static_cast<size_t>(in_row) * esize, static_cast<char*>(y->mutable_raw()),
               static_cast<size_t>(row) * esize, outer);
    } else if (ctx.OutputRequested(static_cast<int>(i))) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(static_cast<int>(i), x->dtype(), shape));
      ElementCopier copy(*x, *y);
      for (int64_t o = 0; o < outer; ++o) copy.CopyRun(o * in_row + at, o * row, row);
    }
    at += row;
  }
  return absl::OkStatus();
}

namespace {

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

absl::StatusOr<SliceParams> ReadSliceParams(KernelContext& ctx, int64_t rank) {
  SliceParams p;
  if (ctx.opset() < 10) {
    auto starts = ctx.node().GetInts("starts");
    auto ends = ctx.node().GetInts("ends");
    if (!starts || !ends)
      return absl::InvalidArgumentError("Slice before opset 10 needs starts and ends attributes");
    p.starts = *starts;
    p.ends = *ends;
    if (auto axes = ctx.node().GetInts("axes")) p.axes = *axes;
  } else {
    const char* names[] = {"starts", "ends", "axes", "steps"};
    std::vector<int64_t>* dst[] = {&p.starts, &p.ends, &p.axes, &p.steps};
    for (int i = 0; i < 4; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, i < 2 ? ctx.Input(i + 1) : ctx.OptionalInput(i + 1));
      if (t == nullptr) continue;
      if (t->rank() != 1)
        return absl::InvalidArgumentError(absl::StrCat(names[i], " must be 1-D, got ", DescribeTensor(*t)));
      ONNXKIT_ASSIGN_OR_RETURN(*dst[i], shape_ops::ReadInts(*t, names[i]));
    }
  }
  size_t n = p.starts.size();
  if (p.axes.empty() && n > 0) {
    p.axes.resize(n);
    std::iota(p.axes.begin(), p.axes.end(), 0);
  }
  if (p.steps.empty()) p.steps.assign(n, 1);
  if (p.ends.size() != n || p.axes.size() != n || p.steps.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("starts, ends, axes and steps have different lengths (", n,
                                                   ", ", p.ends.size(), ", ", p.axes.size(), ", ",
                                                   p.steps.size(), ")"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(p.axes, shape_ops::NormalizeAxes(p.axes, rank));
  return p;
}

}  // namespace

absl::StatusOr<shape_ops::SliceGeometry> shape_ops::ResolveSlice(KernelContext& ctx,
                                                                 const std::vector<int64_t>& shape) {
  ONNXKIT_ASSIGN_OR_RETURN(SliceParams p, ReadSliceParams(ctx, static_cast<int64_t>(shape.size())));
  size_t rank = shape.size();
  SliceGeometry g;
  g.start.assign(rank, 0);
  g.step.assign(rank, 1);
  g.out_shape = shape;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    size_t a = static_cast<size_t>(p.axes[i]);
    int64_t dim = shape[a], s = p.starts[i], e = p.ends[i], st = p.steps[i];
    if (st == 0) return absl::InvalidArgumentError(absl::StrCat("step of axis ", a, " is 0"));
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    __int128 count;
    if (dim == 0) {
      count = 0;
    } else if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (static_cast<__int128>(e) - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      __int128 neg = -static_cast<__int128>(st);
      count = s > e ? (static_cast<__int128>(s) - e + neg - 1) / neg : 0;
    }
    g.start[a] = s;
    g.step[a] = st;
    g.out_shape[a] = static_cast<int64_t>(count);
  }
  return g;
}

absl::Status Slice(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(shape_ops::SliceGeometry g, shape_ops::ResolveSlice(ctx, x->shape()));
  size_t rank = x->shape().size();
  const std::vector<int64_t>& start = g.start;
  const std::vector<int64_t>& step = g.step;
  const std::vector<int64_t>& out_shape = g.out_shape;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  if (y->size() == 0) return absl::OkStatus();
  std::vector<int64_t> strides = Strides(x->shape());
  ElementCopier copy(*x, *y);
  // Trailing axes copied whole are one contiguous block of `inner`
  // elements; so is the run along the last sliced axis when its step is 1.
  // The axes before it are walked index by index.
  size_t outer_rank = rank;
  int64_t inner = 1;
  while (outer_rank > 0 && start[outer_rank - 1] == 0 && step[outer_rank - 1] == 1 &&
         out_shape[outer_rank - 1] == x->shape()[outer_rank - 1]) {
    inner *= out_shape[--outer_rank];
  }
  int64_t run = inner;
  if (outer_rank > 0 && step[outer_rank - 1] == 1) {
    --outer_rank;
    run *= out_shape[outer_rank];
  } else if (outer_rank > 0 && inner == 1) {
    // The last axis read with a step (YOLO's Focus: x[..., ::2, ::2]): one
    // strided copy along it per index of the axes before it.
    const size_t k = outer_rank - 1;
    const int64_t n = out_shape[k], stride = step[k] * strides[k];
    std::vector<int64_t> lead(out_shape.begin(), out_shape.begin() + static_cast<std::ptrdiff_t>(k));
    int64_t out = 0;
    ForEachIndex(lead, [&](const std::vector<int64_t>& c) {
      int64_t src = start[k] * strides[k];
      for (size_t d = 0; d < k; ++d) src += (start[d] + c[d] * step[d]) * strides[d];
      copy.CopyStrided(src, stride, out, n);
      out += n;
    });
    return absl::OkStatus();
  }
  std::vector<int64_t> outer_shape(out_shape.begin(),
                                   out_shape.begin() + static_cast<std::ptrdiff_t>(outer_rank));
  // The contiguous run starts at the sliced axis' start.
  int64_t base = outer_rank < rank ? start[outer_rank] * strides[outer_rank] : 0;
  int64_t out = 0;
  ForEachIndex(outer_shape, [&](const std::vector<int64_t>& c) {
    int64_t src = base;
    for (size_t d = 0; d < outer_rank; ++d) src += (start[d] + c[d] * step[d]) * strides[d];
    copy.CopyRun(src, out, run);
    out += run;
  });
  return absl::OkStatus();
}

absl::Status Compress(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(1));
  if (cond->dtype() != 9 || cond->rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("condition must be a 1-D bool tensor, got ", DescribeTensor(*cond)));
  }
  auto axis_attr = ctx.node().GetInt("axis");
  // Without an axis the input is read flattened.
  std::vector<int64_t> shape = axis_attr ? x->shape() : std::vector<int64_t>{x->size()};
  int64_t axis = 0;
  if (axis_attr) {
    ONNXKIT_ASSIGN_OR_RETURN(axis, NormalizeAxis(*axis_attr, x->rank()));
  }
  size_t a = static_cast<size_t>(axis);
  int64_t dim = shape[a];
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < cond->size(); ++i) {
    if (!cond->data<bool>()[i]) continue;
    if (i >= dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("condition selects index ", i, " of an axis of size ", dim));
    }
    selected.push_back(i);
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[a] = static_cast<int64_t>(selected.size());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  int64_t outer = DimProduct(shape, 0, a), inner = DimProduct(shape, a + 1, shape.size());
  ElementCopier copy(*x, *y);
  int64_t out = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s : selected) {
      copy.CopyRun((o * dim + s) * inner, out, inner);
      out += inner;
    }
  }
  return absl::OkStatus();
}

absl::Status ReverseSequence(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* lens_t, ctx.Input(1));
  if (x->rank() < 2)
    return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 2, got ", DescribeTensor(*x)));
  int64_t batch_axis = AttrInt(ctx.node(), "batch_axis", 1);
  int64_t time_axis = AttrInt(ctx.node(), "time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return absl::InvalidArgumentError(absl::StrCat("batch_axis ", batch_axis, " and time_axis ", time_axis,
                                                   " must be 0 and 1 in some order"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> lens, shape_ops::ReadInts(*lens_t, "sequence_lens"));
  int64_t batch = x->dim(static_cast<int>(batch_axis)), time = x->dim(static_cast<int>(time_axis));
  if (lens_t->rank() != 1 || static_cast<int64_t>(lens.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence_lens must be 1-D with ", batch, " values, got ", DescribeTensor(*lens_t)));
  }
  for (int64_t l : lens) {
    if (l < 0 || l > time) {
      return absl::InvalidArgumentError(absl::StrCat("sequence length ", l, " is outside [0, ", time, "]"));
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  std::vector<int64_t> strides = Strides(x->shape());
  size_t ta = static_cast<size_t>(time_axis), ba = static_cast<size_t>(batch_axis);
  ElementCopier copy(*x, *y);
  int64_t out = 0;
  ForEachIndex(x->shape(), [&](const std::vector<int64_t>& c) {
    int64_t len = lens[static_cast<size_t>(c[ba])];
    int64_t t = c[ta] < len ? len - 1 - c[ta] : c[ta];
    copy.Copy(out + (t - c[ta]) * strides[ta], out);
    ++out;
  });
  return absl::OkStatus();
}

namespace {

// DepthToSpace / SpaceToDepth on [N, C, H, W]: the element of the depth
// layout at (n, channel, h, w) for block offsets (i, j) and output channel c.
absl::Status CheckBlock(const Tensor& x, int64_t b) {
  if (x.rank() != 4)
    return absl::InvalidArgumentError(absl::StrCat("input must be 4-D, got ", DescribeTensor(x)));
  if (b < 1) return absl::InvalidArgumentError(absl::StrCat("blocksize must be positive, got ", b));
  return absl::OkStatus();
}

// DepthToSpace over elements of sizeof(T) bytes, one output row at a time:
// row (n, c, h * b + i) interleaves the b input rows (n, channel(c, i, j),
// h) for j < b.
template <typename T>
void DepthToSpaceRows(const Tensor& x, Tensor& y, int64_t b, bool crd) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), oc = c / (b * b), ow = w * b;
  const T* src = static_cast<const T*>(x.raw());
  T* dst = static_cast<T*>(y.mutable_raw());
  std::vector<const T*> rows(static_cast<size_t>(b));
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t r = 0; r < h; ++r) {
        for (int64_t i = 0; i < b; ++i) {
          for (int64_t j = 0; j < b; ++j) {
            const int64_t ch = crd ? (o * b + i) * b + j : (i * b + j) * oc + o;
            rows[static_cast<size_t>(j)] = src + ((in * c + ch) * h + r) * w;
          }
          T* out = dst + ((in * oc + o) * h * b + r * b + i) * ow;
          for (int64_t k = 0; k < w; ++k) {
            for (int64_t j = 0; j < b; ++j) out[k * b + j] = rows[static_cast<size_t>(j)][k];
          }
        }
      }
    }
  }
}

// SpaceToDepth over elements of sizeof(T) bytes, one input row at a time:
// row (n, c, r * b + i) deals its columns out to the b output rows
// (n, (i * b + j) * C + c, r) for j < b.
template <typename T>
void SpaceToDepthRows(const Tensor& x, Tensor& y, int64_t b) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), oh = h / b, ow = w / b,
                oc = c * b * b;
  const T* src = static_cast<const T*>(x.raw());
  T* dst = static_cast<T*>(y.mutable_raw());
  std::vector<T*> rows(static_cast<size_t>(b));
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t i = 0; i < b; ++i) {
          const T* row = src + ((in * c + ch) * h + r * b + i) * w;
          for (int64_t j = 0; j < b; ++j)
            rows[static_cast<size_t>(j)] = dst + ((in * oc + (i * b + j) * c + ch) * oh + r) * ow;
          for (int64_t k = 0; k < ow; ++k) {
            for (int64_t j = 0; j < b; ++j) rows[static_cast<size_t>(j)][k] = row[k * b + j];
          }
        }
      }
    }
  }
}

// Runs fn<T> for the word type of x's elements; false for strings and
// sub-byte types.
template <template <typename> class F, typename... Args>
bool ForWords(const Tensor& x, Args&&... args) {
  switch (x.is_string() ? 0 : DataTypeBits(x.dtype())) {
    case 8:
      F<uint8_t>::Run(std::forward<Args>(args)...);
      return true;
    case 16:
      F<uint16_t>::Run(std::forward<Args>(args)...);
      return true;
    case 32:
      F<uint32_t>::Run(std::forward<Args>(args)...);
      return true;
    case 64:
      F<uint64_t>::Run(std::forward<Args>(args)...);
      return true;
    default:
      return false;
  }
}

template <typename T>
struct DepthToSpaceWords {
  static void Run(const Tensor& x, Tensor& y, int64_t b, bool crd) { DepthToSpaceRows<T>(x, y, b, crd); }
};
template <typename T>
struct SpaceToDepthWords {
  static void Run(const Tensor& x, Tensor& y, int64_t b) { SpaceToDepthRows<T>(x, y, b); }
};

bool IsWords(const Tensor& x) {
  const int bits = x.is_string() ? 0 : DataTypeBits(x.dtype());
  return bits == 8 || bits == 16 || bits == 32 || bits == 64;
}

class DepthToSpaceKernel : public Kernel {
 public:
  DepthToSpaceKernel(int64_t blocksize, bool crd) : b_(blocksize), crd_(crd) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_RETURN_IF_ERROR(CheckBlock(*x, b_));
    int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
    if (c % (b_ * b_) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("channels ", c, " are not a multiple of blocksize^2 (", b_, ")"));
    }
    int64_t oc = c / (b_ * b_);
    auto oh = CheckedMul(h, b_), ow = CheckedMul(w, b_);
    if (!oh || !ow)
      return absl::InvalidArgumentError(absl::StrCat("output of ", DescribeTensor(*x), " is too large"));
    if (IsWords(*x)) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), {n, oc, *oh, *ow}));
      ForWords<DepthToSpaceWords>(*x, *x, *y, b_, crd_);
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {n, oc, *oh, *ow}));
    ElementCopier copy(*x, *y);
    int64_t out = 0;
    ForEachIndex(y->shape(), [&](const std::vector<int64_t>& o) {
      int64_t i = o[2] % b_, j = o[3] % b_;
      int64_t ch = crd_ ? (o[1] * b_ + i) * b_ + j : (i * b_ + j) * oc + o[1];
      copy.Copy(((o[0] * c + ch) * h + o[2] / b_) * w + o[3] / b_, out++);
    });
    return absl::OkStatus();
  }

 private:
  int64_t b_;
  bool crd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeDepthToSpace(const ir::Node& node, const KernelInfo&) {
  auto blocksize = node.GetInt("blocksize");
  if (!blocksize || *blocksize < 1 || *blocksize > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError("DepthToSpace needs a positive blocksize attribute");
  }
  std::string mode = AttrString(node, "mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    return absl::InvalidArgumentError(absl::StrCat("DepthToSpace mode must be DCR or CRD, got '", mode, "'"));
  }
  return std::unique_ptr<Kernel>(new DepthToSpaceKernel(*blocksize, mode == "CRD"));
}

absl::Status SpaceToDepth(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t b = AttrInt(ctx.node(), "blocksize", 0);
  if (b > (int64_t{1} << 20))
    return absl::InvalidArgumentError(absl::StrCat("blocksize ", b, " is too large"));
  ONNXKIT_RETURN_IF_ERROR(CheckBlock(*x, b));
  int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  if (h % b != 0 || w % b != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spatial dims of ", DescribeTensor(*x), " are not multiples of blocksize ", b));
  }
  auto oc = CheckedMul(c, b * b);
  if (!oc) return absl::InvalidArgumentError(absl::StrCat("output of ", DescribeTensor(*x), " is too large"));
  if (IsWords(*x)) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutputUninitialized(0, x->dtype(), {n, *oc, h / b, w / b}));
    ForWords<SpaceToDepthWords>(*x, *x, *y, b);
    return absl::OkStatus();
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {n, *oc, h / b, w / b}));
  ElementCopier copy(*x, *y);
  int64_t out = 0;
  ForEachIndex(y->shape(), [&](const std::vector<int64_t>& o) {
    int64_t block = o[1] / c, ch = o[1] % c;
    int64_t i = block / b, j = block % b;
    copy.Copy(((o[0] * c + ch) * h + o[2] * b + i) * w + o[3] * b + j, out++);
  });
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
