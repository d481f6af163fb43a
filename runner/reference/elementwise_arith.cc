// Reference kernels: Add, Sub, Mul, Div, Pow (numpy broadcasting; the
// legacy broadcast/axis attributes below opset 7), Mod, and the variadic
// Max, Min, Sum, Mean; plus the broadcasting helpers of elementwise.h.
//
// Integer arithmetic wraps (two's complement), as numpy's does; integer
// division or remainder by zero is an error.
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/elementwise.h"

namespace onnxkit::runner::reference {

// --- Broadcasting helpers ---

BroadcastRuns::BroadcastRuns(const std::vector<int64_t>& out_shape, const std::vector<std::vector<int64_t>>& in_shapes) {
  const size_t rank = out_shape.size();
  std::optional<int64_t> total = CheckedElementCount(out_shape);
  // Right-aligned strides of each input over the output's dims; 0 where the
  // input repeats.
  std::vector<std::vector<int64_t>> full;
  for (const std::vector<int64_t>& in : in_shapes) {
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (size_t i = in.size(); i-- > 0;) {
      size_t d = rank - in.size() + i;
      if (d < rank) strides[d] = in[i] == 1 ? 0 : stride;
      stride *= in[i];
    }
    full.push_back(std::move(strides));
  }
  // Dims of one value dropped, and neighbours merged where every input
  // steps through them as through one dim (both contiguous, or both
  // repeated): a scalar against a tensor, or two equal shapes, make one run.
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides(full.size());
  for (size_t d = 0; d < rank; ++d) {
    if (out_shape[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < full.size() && merge; ++k) merge = strides[k].back() == full[k][d] * out_shape[d];
    if (merge) {
      shape.back() *= out_shape[d];
      for (size_t k = 0; k < full.size(); ++k) strides[k].back() = full[k][d];
    } else {
      shape.push_back(out_shape[d]);
      for (size_t k = 0; k < full.size(); ++k) strides[k].push_back(full[k][d]);
    }
  }
  length_ = shape.empty() ? 1 : shape.back();
  runs_left_ = !total || length_ == 0 ? 0 : *total / length_;
  if (!shape.empty()) outer_shape_.assign(shape.begin(), shape.end() - 1);
  counter_.assign(outer_shape_.size(), 0);
  for (std::vector<int64_t>& st : strides) {
    steps_.push_back(st.empty() ? 0 : st.back());
    if (!st.empty()) st.pop_back();
    in_strides_.push_back(std::move(st));
    offsets_.push_back(0);
  }
}

bool BroadcastRuns::Next() {
  if (runs_left_ == 0) return false;
  if (started_) {
    out_offset_ += length_;
    for (size_t d = outer_shape_.size(); d-- > 0;) {
      ++counter_[d];
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += in_strides_[k][d];
      if (counter_[d] < outer_shape_[d]) break;
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= in_strides_[k][d] * outer_shape_[d];
      counter_[d] = 0;
    }
  }
  started_ = true;
  --runs_left_;
  return true;
}

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

}  // namespace

absl::StatusOr<BinaryShapes> ResolveBinaryShapes(const ir::Node& node, bool legacy, const std::vector<int64_t>& a,
                                                 const std::vector<int64_t>& b) {
  if (!legacy) {
    std::vector<int64_t> shapes[] = {a, b};
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out, BroadcastShapes(shapes));
    return BinaryShapes{std::move(out), b};
  }
  if (AttrInt(node, "broadcast", 0) == 0) {
    if (a != b) {
      return absl::InvalidArgumentError(absl::StrCat("input shapes differ (", ShapeString(a), " and ", ShapeString(b),
                                                     ") and attribute broadcast is 0"));
    }
    return BinaryShapes{a, b};
  }
  std::optional<int64_t> b_count = CheckedElementCount(b);
  if (b_count && *b_count == 1) return BinaryShapes{a, {}};  // one element: a scalar
  const int64_t rank = static_cast<int64_t>(a.size());
  const int64_t b_rank = static_cast<int64_t>(b.size());
  int64_t axis = rank - b_rank;  // suffix matching
  if (node.FindAttribute("axis") != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(axis, NormalizeAxis(AttrInt(node, "axis", 0), rank));
  }
  if (b_rank > rank || axis < 0 || axis + b_rank > rank) {
    return absl::InvalidArgumentError(absl::StrCat("input B ", ShapeString(b), " does not fit input A ", ShapeString(a),
                                                   " at axis ", axis));
  }
  std::vector<int64_t> aligned(static_cast<size_t>(rank - axis), 1);
  for (int64_t i = 0; i < b_rank; ++i) {
    int64_t d = b[static_cast<size_t>(i)];
    if (d != 1 && d != a[static_cast<size_t>(axis + i)]) {
      return absl::InvalidArgumentError(absl::StrCat("input B ", ShapeString(b), " does not match input A ",
                                                     ShapeString(a), " at axis ", axis));
    }
    aligned[static_cast<size_t>(i)] = d;
  }
  return BinaryShapes{a, std::move(aligned)};
}

namespace {

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Wrapping integer arithmetic through uint64 (no signed overflow).
template <typename T>
T WrapAdd(T x, T y) { return static_cast<T>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)); }
template <typename T>
T WrapSub(T x, T y) { return static_cast<T>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)); }
template <typename T>
T WrapMul(T x, T y) { return static_cast<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)); }
template <typename T>
T WrapDiv(T x, T y) {  // y != 0; the one overflowing case, min / -1, wraps to min
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return WrapSub<T>(0, x);
  }
  return static_cast<T>(x / y);
}

template <typename T>
absl::Status CheckNoZero(const Tensor& b, std::string_view what) {
  const T* p = b.data<T>();
  for (int64_t i = 0; i < b.size(); ++i) {
    if (p[i] == T{0}) return absl::InvalidArgumentError(absl::StrCat("integer ", Sv(what), " by zero (input B element ", i, ")"));
  }
  return absl::OkStatus();
}

// A float value converted to integer type T: truncated toward zero, NaN to
// 0, out of range values to the nearest end of T's range.
template <typename T>
T FloatToIntSaturating(double v) {
  if (std::isnan(v)) return T{0};
  v = std::trunc(v);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// x^n for integers, wrapping; negative n truncates 1 / x^|n|.
template <typename T>
absl::StatusOr<T> IntPow(T x, int64_t n) {
  if (n < 0) {
    if (x == T{0}) return absl::InvalidArgumentError("integer 0 raised to a negative power");
    if (x == T{1}) return T{1};
    if constexpr (std::is_signed_v<T>) {
      if (x == T{-1}) return static_cast<T>(n % 2 == 0 ? 1 : -1);
    }
    return T{0};
  }
  T result{1};
  T base = x;
  for (uint64_t e = static_cast<uint64_t>(n); e != 0; e >>= 1) {
    if (e & 1) result = WrapMul(result, base);
    base = WrapMul(base, base);
  }
  return result;
}

class ArithKernel : public Kernel {
 public:
  ArithKernel(ArithOp op, bool legacy) : op_(op), legacy_(legacy) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (op_ != ArithOp::kPow && a->dtype() != b->dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input types differ: ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
    }
    if (a->dtype() == 9 || b->dtype() == 9) return absl::InvalidArgumentError("arithmetic on bool tensors");
    ONNXKIT_ASSIGN_OR_RETURN(BinaryShapes shapes, ResolveBinaryShapes(ctx.node(), legacy_, a->shape(), b->shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), shapes.out));
    return VisitNumeric(a->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::InternalError("unreachable");
      } else if (op_ == ArithOp::kPow) {
        return RunPow<T>(*a, *b, shapes, y);
      } else {
        return RunBasic<T>(*a, *b, shapes, y);
      }
    });
  }

 private:
  template <typename T>
  absl::Status RunBasic(const Tensor& a, const Tensor& b, const BinaryShapes& shapes, Tensor* y) const {
    using C = ComputeT<T>;
    if constexpr (kIsInt<T>) {
      if (op_ == ArithOp::kDiv) ONNXKIT_RETURN_IF_ERROR(CheckNoZero<T>(b, "division"));
    }
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->mutable_data<T>();
    const ArithOp op = op_;
    ForEachBroadcast2(shapes.out, a.shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
      if constexpr (kIsInt<T>) {
        T x = pa[i], z = pb[j];
        py[o] = op == ArithOp::kAdd ? WrapAdd(x, z) : op == ArithOp::kSub ? WrapSub(x, z)
              : op == ArithOp::kMul ? WrapMul(x, z) : WrapDiv(x, z);
      } else {
        C x = static_cast<C>(pa[i]), z = static_cast<C>(pb[j]);
        C r = op == ArithOp::kAdd ? x + z : op == ArithOp::kSub ? x - z : op == ArithOp::kMul ? x * z : x / z;
        py[o] = static_cast<T>(r);
      }
    });
    return absl::OkStatus();
  }

  // Pow: the base's type T decides the result type; the exponent may be any
  // numeric type (opset 12+), read as int64 or double.
  template <typename T>
  absl::Status RunPow(const Tensor& a, const Tensor& b, const BinaryShapes& shapes, Tensor* y) const {
    std::vector<int64_t> int_exp;
    std::vector<double> float_exp;
    ONNXKIT_RETURN_IF_ERROR(VisitNumeric(b.dtype(), [&](auto etag) -> absl::Status {
      using E = decltype(etag);
      const E* pe = b.data<E>();
      for (int64_t i = 0; i < b.size(); ++i) {
        if constexpr (kIsInt<E>) {
          int_exp.push_back(static_cast<int64_t>(pe[i]));  // uint64 beyond int64 wraps: irrelevant for powers
        } else {
          float_exp.push_back(static_cast<double>(static_cast<ComputeT<E>>(pe[i])));
        }
      }
      return absl::OkStatus();
    }));
    const T* pa = a.data<T>();
    T* py = y->mutable_data<T>();
    absl::Status status;
    ForEachBroadcast2(shapes.out, a.shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
      if constexpr (kIsInt<T>) {
        if (!int_exp.empty()) {
          absl::StatusOr<T> r = IntPow(pa[i], int_exp[static_cast<size_t>(j)]);
          if (!r.ok()) {
            status = r.status();
            return;
          }
          py[o] = *r;
        } else {
          py[o] = FloatToIntSaturating<T>(std::pow(static_cast<double>(pa[i]), float_exp[static_cast<size_t>(j)]));
        }
      } else {
        double e = int_exp.empty() ? float_exp[static_cast<size_t>(j)] : static_cast<double>(int_exp[static_cast<size_t>(j)]);
        double r = std::pow(static_cast<double>(static_cast<ComputeT<T>>(pa[i])), e);
        if constexpr (std::is_same_v<T, double>) {
          py[o] = r;
        } else {
          py[o] = static_cast<T>(DoubleToFloat(r));
        }
      }
    });
    return status;
  }

  ArithOp op_;
  bool legacy_;
};

// --- Mod ---

class ModKernel : public Kernel {
 public:
  explicit ModKernel(bool fmod) : fmod_(fmod) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != b->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input types differ: ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
    }
    if (a->dtype() == 9) return absl::InvalidArgumentError("Mod on bool tensors");
    ONNXKIT_ASSIGN_OR_RETURN(BinaryShapes shapes, ResolveBinaryShapes(ctx.node(), false, a->shape(), b->shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), shapes.out));
    return VisitNumeric(a->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::InternalError("unreachable");
      } else {
        return RunTyped<T>(*a, *b, shapes, y);
      }
    });
  }

 private:
  template <typename T>
  absl::Status RunTyped(const Tensor& a, const Tensor& b, const BinaryShapes& shapes, Tensor* y) const {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->mutable_data<T>();
    if constexpr (kIsInt<T>) {
      ONNXKIT_RETURN_IF_ERROR(CheckNoZero<T>(b, "remainder"));
      const bool fmod = fmod_;
      ForEachBroadcast2(shapes.out, a.shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
        T x = pa[i], z = pb[j];
        T r{0};
        if constexpr (std::is_signed_v<T>) {
          if (z != T{-1}) r = static_cast<T>(x % z);  // x % -1 is 0 (and min % -1 overflows)
          if (!fmod && r != 0 && ((r < 0) != (z < 0))) r = WrapAdd(r, z);  // sign of the divisor
        } else {
          r = static_cast<T>(x % z);
        }
        py[o] = r;
      });
      return absl::OkStatus();
    } else {
      if (!fmod_) return absl::InvalidArgumentError("Mod of floating-point inputs needs attribute fmod=1");
      using C = ComputeT<T>;
      BroadcastRuns runs(shapes.out, {a.shape(), shapes.b});
      while (runs.Next()) {
        const T* x = pa + runs.offset(0);
        const T* z = pb + runs.offset(1);
        T* r = py + runs.out_offset();
        const int64_t n = runs.length(), sx = runs.step(0), sz = runs.step(1);
        bool exact = false;
        if constexpr (std::is_same_v<C, float>) {
          exact = sx == 1 && sz == 1   ? FmodRun<T, 1, 1>(x, z, r, n, sx, sz)
                  : sx == 1 && sz == 0 ? FmodRun<T, 1, 0>(x, z, r, n, sx, sz)
                  : sx == 0 && sz == 1 ? FmodRun<T, 0, 1>(x, z, r, n, sx, sz)
                                       : FmodRun<T, -1, -1>(x, z, r, n, sx, sz);
        }
        if (exact) continue;
        for (int64_t j = 0; j < n; ++j) {
          const C a = static_cast<C>(x[j * sx]), b = static_cast<C>(z[j * sz]);
          if constexpr (std::is_same_v<C, float>) {
            if (FmodExact(a, b)) continue;
          }
          r[j] = static_cast<T>(std::fmod(a, b));
        }
      }
      return absl::OkStatus();
    }
  }

  // fmod of float operands without libm's loop of exact subtractions, in
  // double. While |x / z| < 2^29 the quotient truncated there is the true
  // one (a quotient of floats that is not an integer lies at least 2^-24
  // from one, while the division rounds by under 2^-53 x 2^29 = 2^-24),
  // and q * z (at most 53 bits) and x - q * z are exact: the result is std::fmod's bit
  // for bit, a zero taking the dividend's sign. False when an element falls
  // outside that (z zero, infinite or NaN, x infinite or NaN, |x / z| >=
  // 2^29): the caller recomputes those elements (FmodExact false) with
  // std::fmod. kSx / kSz: the operands' steps when fixed (-1: sx, sz).
  static bool FmodExact(double a, double b) {
    return std::fabs(std::trunc(a / b)) < 0x1p29 &&
           std::fabs(b) <= static_cast<double>(std::numeric_limits<float>::max());
  }
  template <typename T, int kSx, int kSz>
  static bool FmodRun(const T* x, const T* z, T* r, int64_t n, int64_t sx, int64_t sz) {
    const int64_t step_x = kSx >= 0 ? kSx : sx, step_z = kSz >= 0 ? kSz : sz;
    bool exact = true;
    for (int64_t j = 0; j < n; ++j) {
      const double a = static_cast<float>(x[j * step_x]);
      const double b = static_cast<float>(z[j * step_z]);
      const double q = std::trunc(a / b);
      exact &= FmodExact(a, b);
      double m = a - q * b;
      m = m == 0 ? std::copysign(0.0, a) : m;
      r[j] = static_cast<T>(static_cast<float>(m));
    }
    return exact;
  }

  bool fmod_;
};

// --- Max, Min, Sum, Mean ---

class VariadicKernel : public Kernel {
 public:
  VariadicKernel(VariadicOp op, bool same_shape) : op_(op), same_shape_(same_shape) {}

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_inputs() < 1) return absl::InvalidArgumentError("needs at least one input");
    std::vector<const Tensor*> inputs;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
      if (!inputs.empty() && t->dtype() != inputs[0]->dtype()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input types differ: ", DescribeTensor(*inputs[0]), " and ", DescribeTensor(*t)));
      }
      if (same_shape_ && !inputs.empty() && t->shape() != inputs[0]->shape()) {
        return absl::InvalidArgumentError(absl::StrCat("input shapes differ (", ShapeString(inputs[0]->shape()), " and ",
                                                       ShapeString(t->shape()), "); broadcasting needs opset 8"));
      }
      inputs.push_back(t);
      shapes.push_back(t->shape());
    }
    if (inputs[0]->dtype() == 9) return absl::InvalidArgumentError("arithmetic on bool tensors");
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, inputs[0]->dtype(), out_shape));
    return VisitNumeric(inputs[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::InternalError("unreachable");
      } else {
        RunTyped<T>(inputs, y);
        return absl::OkStatus();
      }
    });
  }

 private:
  // y = f(input 0, input 1) broadcast, then y = f(y, input k) for the
  // others, a row at a time with the op fixed for the loop (Mean: the sum,
  // divided at the end).
  template <typename T>
  void RunTyped(const std::vector<const Tensor*>& inputs, Tensor* y) const {
    switch (op_) {
      case VariadicOp::kMax:
        return Fold<VariadicOp::kMax, T>(inputs, y);
      case VariadicOp::kMin:
        return Fold<VariadicOp::kMin, T>(inputs, y);
      case VariadicOp::kSum:
      case VariadicOp::kMean:
        Fold<VariadicOp::kSum, T>(inputs, y);
        break;
    }
    if (op_ == VariadicOp::kMean) {
      using C = ComputeT<T>;
      T* py = y->mutable_data<T>();
      const C n = static_cast<C>(inputs.size());
      for (int64_t i = 0; i < y->size(); ++i) py[i] = static_cast<T>(static_cast<C>(py[i]) / n);
    }
  }

  // f(x, z) in T's compute type: Max and Min propagate NaN (as numpy's
  // maximum); integer sums wrap.
  template <VariadicOp kOp, typename T>
  static T Combine(T a, T b) {
    using C = ComputeT<T>;
    if constexpr (kOp == VariadicOp::kSum) {
      if constexpr (kIsInt<T>) {
        return WrapAdd(a, b);
      } else {
        return static_cast<T>(static_cast<C>(a) + static_cast<C>(b));
      }
    } else {
      const C x = static_cast<C>(a), z = static_cast<C>(b);
      if constexpr (!kIsInt<T>) {
        if (x != x) return a;
        if (z != z) return b;
      }
      return (kOp == VariadicOp::kMax) == (x < z) ? b : a;
    }
  }

  template <VariadicOp kOp, typename T>
  static void Fold(const std::vector<const Tensor*>& inputs, Tensor* y) {
    T* py = y->mutable_data<T>();
    const std::vector<int64_t>& out = y->shape();
    const T* p0 = inputs[0]->data<T>();
    if (inputs.size() == 1) {
      BroadcastRuns runs(out, {inputs[0]->shape()});
      while (runs.Next()) {
        const int64_t o = runs.out_offset(), i0 = runs.offset(0), s0 = runs.step(0);
        for (int64_t j = 0; j < runs.length(); ++j) py[o + j] = p0[i0 + j * s0];
      }
      return;
    }
    const T* p1 = inputs[1]->data<T>();
    BroadcastRuns first(out, {inputs[0]->shape(), inputs[1]->shape()});
    while (first.Next()) {
      const int64_t o = first.out_offset(), n = first.length();
      const T* a = p0 + first.offset(0);
      const T* b = p1 + first.offset(1);
      T* r = py + o;
      if (first.step(0) == 1 && first.step(1) == 1) {
        for (int64_t j = 0; j < n; ++j) r[j] = Combine<kOp>(a[j], b[j]);
      } else if (first.step(0) == 1 && first.step(1) == 0) {
        const T z = *b;
        for (int64_t j = 0; j < n; ++j) r[j] = Combine<kOp>(a[j], z);
      } else {
        const int64_t sa = first.step(0), sb = first.step(1);
        for (int64_t j = 0; j < n; ++j) r[j] = Combine<kOp>(a[j * sa], b[j * sb]);
      }
    }
    for (size_t k = 2; k < inputs.size(); ++k) {
      const T* pk = inputs[k]->data<T>();
      BroadcastRuns runs(out, {inputs[k]->shape()});
      while (runs.Next()) {
        const int64_t n = runs.length();
        T* r = py + runs.out_offset();
        const T* b = pk + runs.offset(0);
        if (runs.step(0) == 1) {
          for (int64_t j = 0; j < n; ++j) r[j] = Combine<kOp>(r[j], b[j]);
        } else {
          const T z = *b;
          for (int64_t j = 0; j < n; ++j) r[j] = Combine<kOp>(r[j], z);
        }
      }
    }
  }

  VariadicOp op_;
  bool same_shape_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> CreateArithKernel(ArithOp op, const ir::Node&, const KernelInfo& info) {
  return std::unique_ptr<Kernel>(new ArithKernel(op, info.opset < 7));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMod(const ir::Node& node, const KernelInfo&) {
  int64_t fmod = AttrInt(node, "fmod", 0);
  if (fmod != 0 && fmod != 1) return absl::InvalidArgumentError(absl::StrCat("attribute fmod must be 0 or 1, got ", fmod));
  return std::unique_ptr<Kernel>(new ModKernel(fmod == 1));
}

absl::StatusOr<std::unique_ptr<Kernel>> CreateVariadicKernel(VariadicOp op, const ir::Node&, const KernelInfo& info) {
  return std::unique_ptr<Kernel>(new VariadicKernel(op, info.opset < 8));
}

}  // namespace onnxkit::runner::reference
