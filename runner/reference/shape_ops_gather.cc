// Reference kernels for indexing: Gather, GatherElements, GatherND
// (batch_dims), Scatter / ScatterElements and ScatterND (reduction none, add,
// mul, max, min), TensorScatter (linear and circular caches) and NonZero.
// Every index is checked against its axis; negative indices count from the
// end where the op allows them.
#include <cstring>
#include <type_traits>

#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/element_word.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {

using shape_ops::DimProduct;

namespace {

using shape_ops::ShapeString;


// An index into an axis of size dim, negative counting from the end.
absl::StatusOr<int64_t> CheckIndex(int64_t index, int64_t dim, std::string_view what) {
  int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim) {
    return absl::OutOfRangeError(
        absl::StrCat(Sv(what), " index ", index, " is out of range for an axis of size ", dim));
  }
  return i;
}

}  // namespace

absl::Status Gather(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  if (data->rank() == 0) return absl::InvalidArgumentError("Gather data must have rank >= 1");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 0), data->rank()));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, shape_ops::ReadInts(*ind, "indices"));
  size_t a = static_cast<size_t>(axis);
  int64_t dim = data->shape()[a];
  for (int64_t& i : idx) {
    ONNXKIT_ASSIGN_OR_RETURN(i, CheckIndex(i, dim, "Gather"));
  }
  std::vector<int64_t> out_shape(data->shape().begin(), data->shape().begin() + axis);
  out_shape.insert(out_shape.end(), ind->shape().begin(), ind->shape().end());
  out_shape.insert(out_shape.end(), data->shape().begin() + axis + 1, data->shape().end());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, data->dtype(), out_shape));
  int64_t outer = DimProduct(data->shape(), 0, a);
  int64_t inner = DimProduct(data->shape(), a + 1, data->shape().size());
  ElementCopier copy(*data, *y);
  int64_t out = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : idx) {
      copy.CopyRun((o * dim + i) * inner, out, inner);
      out += inner;
    }
  }
  return absl::OkStatus();
}

// For GatherElements and ScatterElements: calls fn(out, at) for every
// element of `ind_shape` in row-major order, `out` its flat index and `at`
// the flat offset in data of the element it addresses (index idx[out] on
// axis a, its own coordinates on the other axes), a row of the last axis at
// a time; stops at the first index out of range, with its error.
template <typename F>
absl::Status ForEachElementOffset(const std::vector<int64_t>& ind_shape,
                                  const std::vector<int64_t>& data_shape, size_t a,
                                  const std::vector<int64_t>& idx, std::string_view what, F&& fn) {
  const std::vector<int64_t> strides = Strides(data_shape);
  const size_t last = ind_shape.size() - 1;
  const int64_t n = ind_shape[last], dim = data_shape[a];
  std::vector<int64_t> outer(ind_shape.begin(), ind_shape.end() - 1);
  int64_t out = 0;
  absl::Status status;
  ForEachIndex(outer, [&](const std::vector<int64_t>& c) {
    if (!status.ok()) return;
    int64_t base = 0;
    for (size_t d = 0; d < last; ++d) {
      if (d != a) base += c[d] * strides[d];
    }
    for (int64_t j = 0; j < n; ++j, ++out) {
      const int64_t index = idx[static_cast<size_t>(out)];
      const int64_t i = index < 0 ? index + dim : index;
      if (i < 0 || i >= dim) {
        status = CheckIndex(index, dim, what).status();
        return;
      }
      fn(out, base + (a == last ? i : j + i * strides[a]));  // the last axis' stride is 1
    }
  });
  return status;
}

absl::Status GatherElements(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  if (data->rank() == 0 || ind->rank() != data->rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "indices ", DescribeTensor(*ind), " must have the rank of data ", DescribeTensor(*data), " (>= 1)"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 0), data->rank()));
  for (int d = 0; d < data->rank(); ++d) {
    if (d != axis && ind->dim(d) > data->dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeTensor(*ind), " exceed data ",
                                                     DescribeTensor(*data), " on dim ", d));
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, shape_ops::ReadInts(*ind, "indices"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, data->dtype(), ind->shape()));
  size_t a = static_cast<size_t>(axis);
  absl::Status status;
  const bool typed = VisitElementWord(data->dtype(), [&](auto word) {
    using T = decltype(word);
    const T* src = static_cast<const T*>(data->raw());
    T* dst = static_cast<T*>(y->mutable_raw());
    status = ForEachElementOffset(ind->shape(), data->shape(), a, idx, "GatherElements",
                                  [&](int64_t out, int64_t at) { dst[out] = src[at]; });
  });
  if (typed) return status;
  ElementCopier copy(*data, *y);
  return ForEachElementOffset(ind->shape(), data->shape(), a, idx, "GatherElements",
                              [&](int64_t out, int64_t at) { copy.Copy(at, out); });
}

namespace {

// For GatherND and ScatterND: per index tuple of `ind` (last dim m), the
// element offset of the addressed slice of `data` (after batch_dims).
absl::StatusOr<std::vector<int64_t>> SliceOffsets(const Tensor& data, const Tensor& ind, int64_t batch_dims,
                                                  std::string_view op) {
  int64_t r = data.rank(), q = ind.rank();
  if (q < 1 || batch_dims < 0 || batch_dims >= q || batch_dims >= r) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(op), ": batch_dims ", batch_dims,
                                                   " is invalid for data ", DescribeTensor(data),
                                                   " and indices ", DescribeTensor(ind)));
  }
  int64_t m = ind.dim(static_cast<int>(q - 1));
  if (m < 1 || m > r - batch_dims) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(op), ": the last dim of indices ", DescribeTensor(ind),
                                                   " must be in [1, ", r - batch_dims, "]"));
  }
  for (int d = 0; d < batch_dims; ++d) {
    if (ind.dim(d) != data.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat(Sv(op), ": batch dims of indices ", DescribeTensor(ind),
                                                     " and data ", DescribeTensor(data), " differ"));
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, shape_ops::ReadInts(ind, "indices"));
  size_t b = static_cast<size_t>(batch_dims);
  int64_t slice = DimProduct(data.shape(), b + static_cast<size_t>(m), data.shape().size());
  int64_t per_batch_data = DimProduct(data.shape(), b, data.shape().size());
  int64_t tuples = m == 0 ? 0 : ind.size() / m;
  int64_t tuples_per_batch = DimProduct(ind.shape(), b, ind.shape().size() - 1);
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t batch = tuples_per_batch == 0 ? 0 : t / tuples_per_batch;
    int64_t off = 0;
    for (int64_t k = 0; k < m; ++k) {
      int64_t dim = data.dim(static_cast<int>(batch_dims + k));
      ONNXKIT_ASSIGN_OR_RETURN(int64_t i, CheckIndex(idx[static_cast<size_t>(t * m + k)], dim, op));
      off = off * dim + i;
    }
    offsets[static_cast<size_t>(t)] = batch * per_batch_data + off * slice;
  }
  return offsets;
}

}  // namespace

absl::Status GatherND(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  int64_t b = AttrInt(ctx.node(), "batch_dims", 0);
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, SliceOffsets(*data, *ind, b, "GatherND"));
  int64_t m = ind->dim(ind->rank() - 1);
  std::vector<int64_t> out_shape(ind->shape().begin(), ind->shape().end() - 1);
  out_shape.insert(out_shape.end(), data->shape().begin() + b + m, data->shape().end());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, data->dtype(), out_shape));
  int64_t slice = DimProduct(data->shape(), static_cast<size_t>(b + m), data->shape().size());
  ElementCopier copy(*data, *y);
  for (size_t t = 0; t < offsets.size(); ++t)
    copy.CopyRun(offsets[t], static_cast<int64_t>(t) * slice, slice);
  return absl::OkStatus();
}

namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::StatusOr<Reduction> ParseReduction(const ir::Node& node, int64_t opset) {
  std::string r = AttrString(node, "reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add" && opset >= 16) return Reduction::kAdd;
  if (r == "mul" && opset >= 16) return Reduction::kMul;
  if (r == "max" && opset >= 18) return Reduction::kMax;
  if (r == "min" && opset >= 18) return Reduction::kMin;
  return absl::InvalidArgumentError(absl::StrCat("reduction '", r, "' is not supported at opset ", opset));
}

// One scatter write: updates[from, from + n) into out[to, to + n).
struct Write {
  int64_t from, to, n;
};

template <typename C>
C Combine(Reduction r, C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    switch (r) {
      case Reduction::kAdd:
      case Reduction::kMax:
        return a || b;
      case Reduction::kMul:
      case Reduction::kMin:
        return a && b;
      default:
        return b;
    }
  } else if constexpr (std::is_integral_v<C>) {  // wrap around like the hardware, without UB
    using U = std::make_unsigned_t<C>;
    switch (r) {
      case Reduction::kAdd:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case Reduction::kMul:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case Reduction::kMax:
        return a > b ? a : b;
      case Reduction::kMin:
        return a < b ? a : b;
      default:
        return b;
    }
  } else {
    switch (r) {
      case Reduction::kAdd:
        return a + b;
      case Reduction::kMul:
        return a * b;
      case Reduction::kMax:
        return a > b ? a : b;
      case Reduction::kMin:
        return a < b ? a : b;
      default:
        return b;
    }
  }
}

// out = data, then the writes applied in order.
absl::Status ApplyScatter(KernelContext& ctx, const Tensor& data, const Tensor& updates,
                          const std::vector<Write>& writes, Reduction r) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, data.dtype(), data.shape()));
  ElementCopier init(data, *y);
  init.CopyRun(0, 0, data.size());
  if (r == Reduction::kNone) {
    ElementCopier copy(updates, *y);
    for (const Write& w : writes) copy.CopyRun(w.from, w.to, w.n);
    return absl::OkStatus();
  }
  return VisitNumeric(data.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    const T* pu = updates.data<T>();
    T* py = y->mutable_data<T>();
    for (const Write& w : writes) {
      for (int64_t k = 0; k < w.n; ++k) {
        py[w.to + k] =
            static_cast<T>(Combine<C>(r, static_cast<C>(py[w.to + k]), static_cast<C>(pu[w.from + k])));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status CheckSameType(const Tensor& data, const Tensor& updates) {
  if (data.dtype() != updates.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("updates ", DescribeTensor(updates),
                                                   " must have the type of data ", DescribeTensor(data)));
  }
  return absl::OkStatus();
}

class ScatterElementsKernel : public Kernel {
 public:
  explicit ScatterElementsKernel(Reduction r) : r_(r) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(2));
    ONNXKIT_RETURN_IF_ERROR(CheckSameType(*data, *upd));
    if (data->rank() == 0 || ind->rank() != data->rank() || ind->shape() != upd->shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("indices ", DescribeTensor(*ind), " and updates ", DescribeTensor(*upd),
                       " must have one shape, of the rank of data ", DescribeTensor(*data)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 0), data->rank()));
    for (int d = 0; d < data->rank(); ++d) {
      if (d != axis && ind->dim(d) > data->dim(d)) {
        return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeTensor(*ind), " exceed data ",
                                                       DescribeTensor(*data), " on dim ", d));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, shape_ops::ReadInts(*ind, "indices"));
    size_t a = static_cast<size_t>(axis);
    // Every index is checked before anything is written.
    ONNXKIT_RETURN_IF_ERROR(ForEachElementOffset(ind->shape(), data->shape(), a, idx, "ScatterElements",
                                                 [](int64_t, int64_t) {}));
    if (r_ == Reduction::kNone && VisitElementWord(data->dtype(), [](auto) {})) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, data->dtype(), data->shape()));
      std::memcpy(y->mutable_raw(), data->raw(), static_cast<size_t>(data->nbytes()));
      absl::Status status;
      VisitElementWord(data->dtype(), [&](auto word) {
        using T = decltype(word);
        const T* src = static_cast<const T*>(upd->raw());
        T* dst = static_cast<T*>(y->mutable_raw());
        status = ForEachElementOffset(ind->shape(), data->shape(), a, idx, "ScatterElements",
                                      [&](int64_t out, int64_t at) { dst[at] = src[out]; });
      });
      return status;
    }
    std::vector<Write> writes;
    writes.reserve(idx.size());
    ONNXKIT_RETURN_IF_ERROR(ForEachElementOffset(ind->shape(), data->shape(), a, idx, "ScatterElements",
                                                 [&](int64_t out, int64_t at) {
                                                   writes.push_back({out, at, 1});
                                                 }));
    return ApplyScatter(ctx, *data, *upd, writes, r_);
  }

 private:
  Reduction r_;
};

class ScatterNDKernel : public Kernel {
 public:
  explicit ScatterNDKernel(Reduction r) : r_(r) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* data, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(2));
    ONNXKIT_RETURN_IF_ERROR(CheckSameType(*data, *upd));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, SliceOffsets(*data, *ind, 0, "ScatterND"));
    int64_t m = ind->dim(ind->rank() - 1);
    std::vector<int64_t> want(ind->shape().begin(), ind->shape().end() - 1);
    want.insert(want.end(), data->shape().begin() + m, data->shape().end());
    if (upd->shape() != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("updates ", DescribeTensor(*upd), " must have shape ", ShapeString(want)));
    }
    int64_t slice = DimProduct(data->shape(), static_cast<size_t>(m), data->shape().size());
    std::vector<Write> writes;
    for (size_t t = 0; t < offsets.size(); ++t)
      writes.push_back({static_cast<int64_t>(t) * slice, offsets[t], slice});
    return ApplyScatter(ctx, *data, *upd, writes, r_);
  }

 private:
  Reduction r_;
};

class TensorScatterKernel : public Kernel {
 public:
  TensorScatterKernel(int64_t axis, bool circular) : axis_(axis), circular_(circular) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cache, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* wi, ctx.OptionalInput(2));
    ONNXKIT_RETURN_IF_ERROR(CheckSameType(*cache, *upd));
    int64_t rank = cache->rank();
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, rank));
    bool ok = axis != 0 && upd->rank() == rank;
    for (int d = 0; ok && d < rank; ++d)
      ok = d == axis ? upd->dim(d) <= cache->dim(d) : upd->dim(d) == cache->dim(d);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("update ", DescribeTensor(*upd), " does not fit past_cache ", DescribeTensor(*cache),
                       " along axis ", axis_, " (which must not be the batch axis 0)"));
    }
    int64_t batch = cache->dim(0);
    std::vector<int64_t> starts(static_cast<size_t>(batch), 0);
    if (wi != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(starts, shape_ops::ReadInts(*wi, "write_indices"));
      if (wi->rank() != 1 || static_cast<int64_t>(starts.size()) != batch) {
        return absl::InvalidArgumentError(
            absl::StrCat("write_indices must be 1-D with ", batch, " values, got ", DescribeTensor(*wi)));
      }
    }
    size_t a = static_cast<size_t>(axis);
    int64_t max_len = cache->shape()[a];
    std::vector<int64_t> strides = Strides(cache->shape());
    std::vector<Write> writes;
    int64_t from = 0;
    absl::Status status;
    ForEachIndex(upd->shape(), [&](const std::vector<int64_t>& c) {
      int64_t start = starts[static_cast<size_t>(c[0])];
      int64_t pos = start + c[a];  // start is checked below before use
      if (start < 0 || start > max_len) {
        pos = -1;
      } else if (circular_ && max_len > 0) {
        pos %= max_len;
      }
      if (pos < 0 || pos >= max_len) {
        if (status.ok()) {
          status =
              absl::OutOfRangeError(absl::StrCat("write index ", start, " + ", c[a],
                                                 " is outside the cache of ", max_len, " along axis ", axis));
        }
        ++from;
        return;
      }
      int64_t dst = 0;
      for (size_t d = 0; d < c.size(); ++d) dst += (d == a ? pos : c[d]) * strides[d];
      writes.push_back({from++, dst, 1});
    });
    ONNXKIT_RETURN_IF_ERROR(status);
    return ApplyScatter(ctx, *cache, *upd, writes, Reduction::kNone);
  }

 private:
  int64_t axis_;
  bool circular_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeScatterElements(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(Reduction r, ParseReduction(node, info.opset));
  return std::unique_ptr<Kernel>(new ScatterElementsKernel(r));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeScatterND(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(Reduction r, ParseReduction(node, info.opset));
  return std::unique_ptr<Kernel>(new ScatterNDKernel(r));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeTensorScatter(const ir::Node& node, const KernelInfo&) {
  std::string mode = AttrString(node, "mode", "linear");
  if (mode != "linear" && mode != "circular") {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorScatter mode must be linear or circular, got '", mode, "'"));
  }
  return std::unique_ptr<Kernel>(new TensorScatterKernel(AttrInt(node, "axis", -2), mode == "circular"));
}

absl::Status NonZero(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  // A scalar is treated as a 1-D tensor of one element.
  const std::vector<int64_t> shape = x->rank() == 0 ? std::vector<int64_t>{1} : x->shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t size = x->size();
  return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* p = x->data<T>();
    auto hit = [p](int64_t i) { return static_cast<ComputeT<T>>(p[i]) != ComputeT<T>{}; };
    int64_t n = 0;
    for (int64_t i = 0; i < size; ++i) n += hit(i) ? 1 : 0;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {rank, n}));
    if (n == 0) return absl::OkStatus();
    // Rows of the last dim in order, the coordinates before it counted up
    // like an odometer: no division per element.
    int64_t* py = y->mutable_data<int64_t>();
    const int64_t last = shape.back(), rows = size / last;
    std::vector<int64_t> at(static_cast<size_t>(rank - 1), 0);
    std::vector<int64_t> cols(static_cast<size_t>(last) + 1);  // a row's hits, gathered without branches
    int64_t k = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t count = 0;
      for (int64_t j = 0; j < last; ++j) {
        cols[static_cast<size_t>(count)] = j;
        count += hit(r * last + j) ? 1 : 0;
      }
      for (int64_t d = 0; d + 1 < rank; ++d) std::fill_n(py + d * n + k, count, at[static_cast<size_t>(d)]);
      std::copy_n(cols.data(), count, py + (rank - 1) * n + k);
      k += count;
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++at[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
        at[static_cast<size_t>(d)] = 0;
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace onnxkit::runner::reference
