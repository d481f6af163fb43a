// Reference kernels that build tensors from shapes and values: Expand,
// Tile, ConstantOfShape, Range, EyeLike, OneHot, Trilu, CumSum, CumProd.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

using shape_ops::ShapeString;

// A 1-D int64/int32 input read as values.
absl::StatusOr<std::vector<int64_t>> Read1D(const Tensor& t, std::string_view what) {
  if (t.rank() != 1)
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), " must be 1-D, got ", DescribeTensor(t)));
  return shape_ops::ReadInts(t, what);
}

absl::Status CheckDims(const std::vector<int64_t>& dims, std::string_view what) {
  for (int64_t d : dims) {
    if (d < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(what), " ", ShapeString(dims), " has a negative value"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Expand(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Read1D(*s, "shape"));
  ONNXKIT_RETURN_IF_ERROR(CheckDims(shape, "shape"));
  std::vector<int64_t> shapes[] = {x->shape(), shape};
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  // Source strides aligned to the output's rank; broadcast dims step 0.
  size_t offset = out_shape.size() - x->shape().size();
  std::vector<int64_t> in_strides = Strides(x->shape());
  std::vector<int64_t> strides(out_shape.size(), 0);
  for (size_t i = 0; i < x->shape().size(); ++i) strides[offset + i] = x->shape()[i] == 1 ? 0 : in_strides[i];
  ElementCopier copy(*x, *y);
  int64_t out = 0;
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& c) {
    int64_t src = 0;
    for (size_t d = 0; d < c.size(); ++d) src += c[d] * strides[d];
    copy.Copy(src, out++);
  });
  return absl::OkStatus();
}

absl::Status Tile(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  std::vector<int64_t> repeats(x->shape().size(), 1);
  if (ctx.opset() < 6) {  // Tile-1: (input, tiles, axis)
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(2));
    ONNXKIT_ASSIGN_OR_RETURN(double tiles, shape_ops::ReadScalar(*t, "tiles"));
    ONNXKIT_ASSIGN_OR_RETURN(double axis_value, shape_ops::ReadScalar(*a, "axis"));
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(static_cast<int64_t>(axis_value), x->rank()));
    if (!(tiles >= 0 && tiles < 9.0e18))
      return absl::InvalidArgumentError(absl::StrCat("tiles ", tiles, " is invalid"));
    repeats[static_cast<size_t>(axis)] = static_cast<int64_t>(tiles);
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* r, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(repeats, Read1D(*r, "repeats"));
    if (repeats.size() != x->shape().size()) {
      return absl::InvalidArgumentError(absl::StrCat("repeats ", ShapeString(repeats),
                                                     " must have one value per dim of ", DescribeTensor(*x)));
    }
    ONNXKIT_RETURN_IF_ERROR(CheckDims(repeats, "repeats"));
  }
  std::vector<int64_t> out_shape(x->shape().size());
  for (size_t i = 0; i < out_shape.size(); ++i) {
    auto d = CheckedMul(x->shape()[i], repeats[i]);
    if (!d)
      return absl::InvalidArgumentError(
          absl::StrCat("tiling ", DescribeTensor(*x), " by ", ShapeString(repeats), " overflows"));
    out_shape[i] = *d;
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  if (y->size() == 0) return absl::OkStatus();
  std::vector<int64_t> strides = Strides(x->shape());
  ElementCopier copy(*x, *y);
  if (out_shape.empty()) {
    copy.Copy(0, 0);
    return absl::OkStatus();
  }
  // A row of the last axis is its source row copied `repeats` times.
  const size_t last = out_shape.size() - 1;
  const int64_t row = x->shape()[last];
  std::vector<int64_t> outer(out_shape.begin(), out_shape.end() - 1);
  int64_t out = 0;
  ForEachIndex(outer, [&](const std::vector<int64_t>& c) {
    int64_t src = 0;
    for (size_t d = 0; d < last; ++d) src += (c[d] % x->shape()[d]) * strides[d];
    for (int64_t r = 0; r < repeats[last]; ++r) {
      copy.CopyRun(src, out, row);
      out += row;
    }
  });
  return absl::OkStatus();
}

namespace {

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(Tensor value) : value_(std::move(value)) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Read1D(*s, "shape"));
    ONNXKIT_RETURN_IF_ERROR(CheckDims(shape, "shape"));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, value_.dtype(), shape));
    const int bits = value_.is_string() ? 0 : DataTypeBits(value_.dtype());
    if (bits == 8 || bits == 16 || bits == 32 || bits == 64) {
      // The output is zero-filled: a zero value is already there.
      const auto* v = static_cast<const unsigned char*>(value_.raw());
      if (std::all_of(v, v + bits / 8, [](unsigned char b) { return b == 0; })) return absl::OkStatus();
      auto fill = [&](auto word) {
        using T = decltype(word);
        T w;
        std::memcpy(&w, v, sizeof(T));
        std::fill_n(static_cast<T*>(y->mutable_raw()), y->size(), w);
      };
      if (bits == 8) fill(uint8_t{});
      if (bits == 16) fill(uint16_t{});
      if (bits == 32) fill(uint32_t{});
      if (bits == 64) fill(uint64_t{});
      return absl::OkStatus();
    }
    ElementCopier copy(value_, *y);
    for (int64_t i = 0; i < y->size(); ++i) copy.Copy(0, i);
    return absl::OkStatus();
  }

 private:
  Tensor value_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeConstantOfShape(const ir::Node& node, const KernelInfo&) {
  Tensor value = Tensor::Scalar<float>(1, 0.0f);
  const ir::Attribute* a = node.FindAttribute("value");
  if (a != nullptr) {
    if (!a->proto.t) return absl::InvalidArgumentError("ConstantOfShape value must be a tensor attribute");
    ONNXKIT_ASSIGN_OR_RETURN(value, TensorFromProto(*a->proto.t));
    if (value.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("ConstantOfShape value must hold one element, got ", DescribeTensor(value)));
    }
  }
  if (!value.defined()) return absl::ResourceExhaustedError("memory limit reached");
  return std::unique_ptr<Kernel>(new ConstantOfShapeKernel(std::move(value)));
}

namespace {

template <typename T>
absl::Status RangeTyped(KernelContext& ctx, const Tensor& start_t, const Tensor& limit_t,
                        const Tensor& delta_t) {
  using C = ComputeT<T>;
  C start = static_cast<C>(start_t.data<T>()[0]);
  C limit = static_cast<C>(limit_t.data<T>()[0]);
  C delta = static_cast<C>(delta_t.data<T>()[0]);
  if (delta == C{}) return absl::InvalidArgumentError("delta must not be zero");
  int64_t n = 0;
  if constexpr (std::is_integral_v<C>) {
    __int128 span = static_cast<__int128>(limit) - static_cast<__int128>(start);
    __int128 d = delta;
    __int128 count = span / d + ((span % d != 0 && ((span > 0) == (d > 0))) ? 1 : 0);
    if (count > (__int128{1} << 62)) return absl::InvalidArgumentError("Range has too many elements");
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  } else {
    double count =
        std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (std::isnan(count) || count > 4.0e18) {
      return absl::InvalidArgumentError(
          absl::StrCat("Range(", static_cast<double>(start), ", ", static_cast<double>(limit), ", ",
                       static_cast<double>(delta), ") has no finite element count"));
    }
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, start_t.dtype(), {n}));
  T* py = y->mutable_data<T>();
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<C>) {
      py[i] = static_cast<T>(static_cast<__int128>(start) + static_cast<__int128>(i) * delta);
    } else {
      py[i] = static_cast<T>(
          static_cast<C>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(delta)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Range(KernelContext& ctx) {
  const Tensor* in[3];
  const char* names[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(in[i], ctx.Input(i));
    if (in[i]->size() != 1 || in[i]->dtype() != in[0]->dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat(names[i], " must be a scalar of the type of start, got ", DescribeTensor(*in[i])));
    }
  }
  return VisitNumeric(in[0]->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return absl::UnimplementedError(absl::StrCat("Range of ", DescribeTensor(*in[0])));
    } else {
      return RangeTyped<T>(ctx, *in[0], *in[1], *in[2]);
    }
  });
}

absl::Status EyeLike(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() != 2)
    return absl::InvalidArgumentError(absl::StrCat("input must be 2-D, got ", DescribeTensor(*x)));
  int32_t dtype = static_cast<int32_t>(AttrInt(ctx.node(), "dtype", x->dtype()));
  int64_t k = AttrInt(ctx.node(), "k", 0);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, x->shape()));
  int64_t rows = x->dim(0), cols = x->dim(1);
  if (k >= cols || k <= -rows)
    return absl::OkStatus();  // no diagonal inside (and i + k cannot overflow below)
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j = i + k;
    if (j < 0 || j >= cols) continue;
    ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*y, i * cols + j, 1.0));
  }
  return absl::OkStatus();
}

absl::Status OneHot(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* indices, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* depth_t, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* values, ctx.Input(2));
  if (values->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("values must hold [off_value, on_value], got ", DescribeTensor(*values)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(double depth_value, shape_ops::ReadScalar(*depth_t, "depth"));
  if (!(depth_value >= 0 && depth_value < 9.0e18)) {
    return absl::InvalidArgumentError(absl::StrCat("depth ", depth_value, " is invalid"));
  }
  int64_t depth = static_cast<int64_t>(depth_value);
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> idx, shape_ops::ReadDoubles(*indices, "indices"));
  int64_t out_rank = indices->rank() + 1;
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", -1), out_rank));
  std::vector<int64_t> out_shape = indices->shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  // Every element is written (off_value first), so only strings start set.
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, values->is_string()
                                           ? ctx.AllocateOutput(0, values->dtype(), out_shape)
                                           : ctx.AllocateOutputUninitialized(0, values->dtype(), out_shape));
  ElementCopier copy(*values, *y);
  // Output index = (outer, d, inner) where indices index = (outer, inner).
  int64_t inner = 1;
  for (int64_t i = axis; i < indices->rank(); ++i) inner *= indices->dim(static_cast<int>(i));
  bool negative_ok = ctx.opset() >= 11;
  copy.Fill(0, 0, y->size());
  for (size_t i = 0; i < idx.size(); ++i) {
    double v = std::trunc(idx[i]);
    if (negative_ok && v < 0) v += static_cast<double>(depth);
    if (!(v >= 0 && v < static_cast<double>(depth))) continue;
    int64_t outer = static_cast<int64_t>(i) / inner, in = static_cast<int64_t>(i) % inner;
    copy.Copy(1, (outer * depth + static_cast<int64_t>(v)) * inner + in);
  }
  return absl::OkStatus();
}

absl::Status Trilu(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() < 2)
    return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 2, got ", DescribeTensor(*x)));
  int64_t k = 0;
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* k_t, ctx.OptionalInput(1));
  if (k_t != nullptr) {
    if (k_t->size() != 1)
      return absl::InvalidArgumentError(absl::StrCat("k must be a scalar, got ", DescribeTensor(*k_t)));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, shape_ops::ReadInts(*k_t, "k"));
    k = kv[0];
  }
  bool upper = AttrInt(ctx.node(), "upper", 1) != 0;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  int64_t rows = x->dim(x->rank() - 2), cols = x->dim(x->rank() - 1);
  if (y->size() == 0) return absl::OkStatus();
  ElementCopier copy(*x, *y);
  // Row i keeps the columns j with j - i >= k (upper) or <= k (lower): one
  // run [first, last) per row, computed without overflow (k is any int64);
  // the rest stays zero.
  const int64_t matrices = x->size() / (rows * cols);
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      const __int128 edge = static_cast<__int128>(i) + k;
      const __int128 first = upper ? std::max<__int128>(edge, 0) : 0;
      const __int128 last = upper ? cols : std::min<__int128>(edge + 1, cols);
      if (first >= last) continue;
      const int64_t at = (m * rows + i) * cols + static_cast<int64_t>(first);
      copy.CopyRun(at, at, static_cast<int64_t>(last - first));
    }
  }
  return absl::OkStatus();
}

namespace {

// a + b, wrapping for integers (no signed-overflow UB).
template <typename C>
C Add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

// a * b, wrapping for integers (no signed-overflow UB).
template <typename C>
C Mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // no int promotion
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

// Running sums (kProduct false) or products along `axis`.
template <typename T, bool kProduct>
void CumulateTyped(const Tensor& x, Tensor& y, int64_t axis, bool exclusive, bool reverse) {
  using C = ComputeT<T>;
  int64_t n = x.dim(static_cast<int>(axis));
  int64_t inner = 1;
  for (int i = static_cast<int>(axis) + 1; i < x.rank(); ++i) inner *= x.dim(i);
  int64_t outer = n == 0 || inner == 0 ? 0 : x.size() / (n * inner);
  const T* px = x.data<T>();
  T* py = y.mutable_data<T>();
  if (inner > 1) {
    // A row of inner running totals advanced together along the axis: the
    // same additions in the same order per element, read along memory.
    std::vector<C> acc(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(acc.begin(), acc.end(), kProduct ? static_cast<C>(1) : C{});
      for (int64_t s = 0; s < n; ++s) {
        const int64_t at = (o * n + (reverse ? n - 1 - s : s)) * inner;
        const T* xr = px + at;
        T* yr = py + at;
        C* a = acc.data();
        if (exclusive) {
          for (int64_t in = 0; in < inner; ++in) {
            const C v = static_cast<C>(xr[in]);
            yr[in] = static_cast<T>(a[in]);
            a[in] = kProduct ? Mul(a[in], v) : Add(a[in], v);
          }
        } else {
          for (int64_t in = 0; in < inner; ++in) {
            a[in] = kProduct ? Mul(a[in], static_cast<C>(xr[in])) : Add(a[in], static_cast<C>(xr[in]));
            yr[in] = static_cast<T>(a[in]);
          }
        }
      }
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      C acc = kProduct ? static_cast<C>(1) : C{};
      for (int64_t s = 0; s < n; ++s) {
        int64_t k = reverse ? n - 1 - s : s;
        int64_t at = (o * n + k) * inner + in;
        C v = static_cast<C>(px[at]);
        if (!exclusive) acc = kProduct ? Mul(acc, v) : Add(acc, v);
        py[at] = static_cast<T>(acc);
        if (exclusive) acc = kProduct ? Mul(acc, v) : Add(acc, v);
      }
    }
  }
}

template <bool kProduct>
absl::Status Cumulate(KernelContext& ctx) {
  const char* op = kProduct ? "CumProd" : "CumSum";
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(1));
  if (a->size() != 1 || a->rank() > 1)
    return absl::InvalidArgumentError(absl::StrCat("axis must be a scalar, got ", DescribeTensor(*a)));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> av, shape_ops::ReadInts(*a, "axis"));
  if (x->rank() == 0) return absl::InvalidArgumentError(absl::StrCat(op, " input must have rank >= 1"));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(av[0], x->rank()));
  bool exclusive = AttrInt(ctx.node(), "exclusive", 0) != 0;
  bool reverse = AttrInt(ctx.node(), "reverse", 0) != 0;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return absl::UnimplementedError(absl::StrCat(op, " of bool tensors"));
    } else {
      CumulateTyped<T, kProduct>(*x, *y, axis, exclusive, reverse);
      return absl::OkStatus();
    }
  });
}

}  // namespace

absl::Status CumSum(KernelContext& ctx) { return Cumulate<false>(ctx); }
absl::Status CumProd(KernelContext& ctx) { return Cumulate<true>(ctx); }

}  // namespace onnxkit::runner::reference
