// Reference kernels: unary elementwise ops, one table of formulas (UnaryOp)
// evaluated in double for every floating-point type and rounded once to the
// output type; the few ops defined on integers (Abs, Neg, Sign, Relu,
// BitwiseNot) wrap like two's complement. Also Clip, IsNaN, IsInf and PRelu.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <optional>
#include <type_traits>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/elementwise.h"

namespace onnxkit::runner::reference {
namespace {

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

bool IsFloatType(int32_t dtype) {
  return dtype == pb::kFloat || dtype == pb::kDouble || dtype == pb::kFloat16 || dtype == pb::kBfloat16;
}
bool IsIntType(int32_t dtype) {
  switch (dtype) {
    case pb::kInt8: case pb::kInt16: case pb::kInt32: case pb::kInt64:
    case pb::kUint8: case pb::kUint16: case pb::kUint32: case pb::kUint64: return true;
    default: return false;
  }
}

// Attributes of the activation ops.
struct UnaryParams {
  double alpha = 0;
  double beta = 0;
  double gamma = 0;
  bool tanh_approximation = false;  // Gelu approximate="tanh"
};

// Clamps to [0, 1], keeping NaN.
double Clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

double Sigmoid(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  double e = std::exp(x);
  return e / (1 + e);
}

double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

double ApplyFloat(UnaryOp op, double x, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::kAbs: return std::fabs(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kExp: return std::exp(x);
    case UnaryOp::kLog: return std::log(x);
    case UnaryOp::kSqrt: return std::sqrt(x);
    case UnaryOp::kReciprocal: return 1 / x;
    case UnaryOp::kFloor: return std::floor(x);
    case UnaryOp::kCeil: return std::ceil(x);
    case UnaryOp::kRound: return std::nearbyint(x);  // halves to even
    case UnaryOp::kSign: return x > 0 ? 1 : x < 0 ? -1 : x;  // 0 and NaN unchanged
    case UnaryOp::kSin: return std::sin(x);
    case UnaryOp::kCos: return std::cos(x);
    case UnaryOp::kTan: return std::tan(x);
    case UnaryOp::kAsin: return std::asin(x);
    case UnaryOp::kAcos: return std::acos(x);
    case UnaryOp::kAtan: return std::atan(x);
    case UnaryOp::kSinh: return std::sinh(x);
    case UnaryOp::kCosh: return std::cosh(x);
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kAsinh: return std::asinh(x);
    case UnaryOp::kAcosh: return std::acosh(x);
    case UnaryOp::kAtanh: return std::atanh(x);
    case UnaryOp::kErf: return std::erf(x);
    case UnaryOp::kSigmoid: return Sigmoid(x);
    case UnaryOp::kHardSigmoid: return Clamp01(p.alpha * x + p.beta);
    case UnaryOp::kHardSwish: return x * Clamp01(x / 6 + 0.5);
    case UnaryOp::kSoftplus: return Softplus(x);
    case UnaryOp::kSoftsign: return x / (1 + std::fabs(x));
    case UnaryOp::kElu: return x >= 0 ? x : p.alpha * std::expm1(x);
    case UnaryOp::kSelu: return x > 0 ? p.gamma * x : p.gamma * (p.alpha * std::exp(x) - p.alpha);
    case UnaryOp::kCelu: return std::max(0.0, x) + std::min(0.0, p.alpha * std::expm1(x / p.alpha));
    case UnaryOp::kLeakyRelu: return x >= 0 ? x : p.alpha * x;
    case UnaryOp::kThresholdedRelu: return x > p.alpha ? x : 0;
    case UnaryOp::kRelu: return x < 0 ? 0 : x;
    case UnaryOp::kGelu:
      if (p.tanh_approximation) {
        constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
        return 0.5 * x * (1 + std::tanh(kC * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
    case UnaryOp::kMish: return x * std::tanh(Softplus(x));
    case UnaryOp::kSwish: return x * Sigmoid(p.alpha * x);
    case UnaryOp::kBitwiseNot:
    case UnaryOp::kNot: break;
  }
  return x;
}

bool DefinedOnIntegers(UnaryOp op) {
  return op == UnaryOp::kAbs || op == UnaryOp::kNeg || op == UnaryOp::kSign || op == UnaryOp::kRelu ||
         op == UnaryOp::kBitwiseNot;
}

template <typename T>
T WrapNeg(T x) { return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(x)); }

template <typename T>
T ApplyInt(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::kAbs:
      if constexpr (std::is_signed_v<T>) return x < 0 ? WrapNeg(x) : x;
      return x;
    case UnaryOp::kNeg: return WrapNeg(x);
    case UnaryOp::kSign: return static_cast<T>(x > 0 ? 1 : x == 0 ? 0 : -1);
    case UnaryOp::kRelu: return x > 0 ? x : T{0};
    case UnaryOp::kBitwiseNot: return static_cast<T>(~x);
    default: return x;
  }
}

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(UnaryOp op, UnaryParams params) : op_(op), params_(params) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    const int32_t dtype = x->dtype();
    const bool ok = op_ == UnaryOp::kNot          ? dtype == pb::kBool
                    : op_ == UnaryOp::kBitwiseNot ? IsIntType(dtype)
                                                  : IsFloatType(dtype) || (DefinedOnIntegers(op_) && IsIntType(dtype));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.node().op_type(), " does not support element type ",
                                                     Sv(DataTypeName(dtype))));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, x->shape()));
    return VisitNumeric(dtype, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      const T* px = x->data<T>();
      T* py = y->mutable_data<T>();
      if constexpr (std::is_same_v<T, bool>) {
        // Not; bool bytes are read as bytes (a model may hold values other than 0/1).
        const uint8_t* bytes = x->data<uint8_t>();
        uint8_t* out = reinterpret_cast<uint8_t*>(py);
        const int64_t n = x->size();
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) out[i] = bytes[i] == 0;
      } else if constexpr (kIsInt<T>) {
        for (int64_t i = 0; i < x->size(); ++i) py[i] = ApplyInt(op_, px[i]);
      } else {
        for (int64_t i = 0; i < x->size(); ++i) {
          double v = static_cast<double>(static_cast<ComputeT<T>>(px[i]));
          py[i] = RoundFromDouble<T>(ApplyFloat(op_, v, params_));
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  UnaryOp op_;
  UnaryParams params_;
};

// --- Clip ---

// y = min(max(x, lo), hi) in T's compute type; NaN stays NaN, and lo > hi
// gives hi everywhere (as Min(hi, Max(x, lo))).
template <typename T, typename C>
void ClipTyped(const Tensor& x, Tensor* y, std::optional<C> lo, std::optional<C> hi) {
  const T* px = x.data<T>();
  T* py = y->mutable_data<T>();
  for (int64_t i = 0; i < x.size(); ++i) {
    C v = static_cast<C>(px[i]);
    if (lo && v < *lo) v = *lo;
    if (hi && v > *hi) v = *hi;
    py[i] = static_cast<T>(v);
  }
}

class ClipAttrKernel : public Kernel {
 public:
  ClipAttrKernel(std::optional<float> lo, std::optional<float> hi) : lo_(lo), hi_(hi) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    return VisitFloat(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      std::optional<C> lo, hi;
      if (lo_) lo = static_cast<C>(*lo_);
      if (hi_) hi = static_cast<C>(*hi_);
      ClipTyped<T, C>(*x, y, lo, hi);
      return absl::OkStatus();
    });
  }

 private:
  std::optional<float> lo_, hi_;
};

// The value of an optional one-element bound input of Clip, checked against
// the type of X.
absl::StatusOr<const Tensor*> ClipBound(KernelContext& ctx, int i, const Tensor& x) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.OptionalInput(i));
  if (t == nullptr) return t;
  const char* name = i == 1 ? "min" : "max";
  if (t->dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is ", DescribeTensor(*t), " but X is ",
                                                   DescribeTensor(x)));
  }
  if (t->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' must be a scalar, got ", DescribeTensor(*t)));
  }
  return t;
}

// --- PRelu ---

template <typename T>
void PReluTyped(const Tensor& x, const Tensor& slope, const std::vector<int64_t>& slope_shape, Tensor* y) {
  const T* px = x.data<T>();
  const T* ps = slope.data<T>();
  T* py = y->mutable_data<T>();
  ForEachBroadcast2(x.shape(), x.shape(), slope_shape, [&](int64_t o, int64_t i, int64_t j) {
    if constexpr (kIsInt<T>) {
      py[o] = px[i] < 0 ? static_cast<T>(static_cast<uint64_t>(px[i]) * static_cast<uint64_t>(ps[j])) : px[i];
    } else {
      using C = ComputeT<T>;
      C v = static_cast<C>(px[i]);
      py[o] = v < 0 ? static_cast<T>(v * static_cast<C>(ps[j])) : px[i];
    }
  });
}

// Runs PRelu with the slope viewed as `slope_shape`, which must broadcast to
// X's shape.
absl::Status RunPRelu(KernelContext& ctx, const Tensor& x, const Tensor& slope, const std::vector<int64_t>& slope_shape) {
  if (slope.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input types differ: ", DescribeTensor(x), " and ", DescribeTensor(slope)));
  }
  std::vector<int64_t> shapes[] = {x.shape(), slope_shape};
  absl::StatusOr<std::vector<int64_t>> out = BroadcastShapes(shapes);
  if (!out.ok() || *out != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slope ", DescribeTensor(slope), " does not broadcast to X ", DescribeTensor(x)));
  }
  if (x.dtype() == pb::kBool) return absl::InvalidArgumentError("PRelu does not support element type bool");
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) PReluTyped<T>(x, slope, slope_shape, y);
    return absl::OkStatus();
  });
}

// --- IsNaN, IsInf ---

// Calls fn(double value) for each element of a float or float8 tensor.
template <typename F>
absl::Status ForEachFloatValue(const Tensor& x, std::string_view op, F&& fn) {
  const MiniFloatFormat* f8 = nullptr;
  switch (x.dtype()) {
    case pb::kFloat8E4M3FN: f8 = &kFloat8E4M3FN; break;
    case pb::kFloat8E4M3FNUZ: f8 = &kFloat8E4M3FNUZ; break;
    case pb::kFloat8E5M2: f8 = &kFloat8E5M2; break;
    case pb::kFloat8E5M2FNUZ: f8 = &kFloat8E5M2FNUZ; break;
    default: break;
  }
  if (f8 != nullptr) {
    const uint8_t* p = x.data<uint8_t>();
    for (int64_t i = 0; i < x.size(); ++i) fn(i, MiniFloatToDouble(*f8, p[i]));
    return absl::OkStatus();
  }
  if (!IsFloatType(x.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(op), " does not support element type ", Sv(DataTypeName(x.dtype()))));
  }
  return VisitFloat(x.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i) fn(i, static_cast<double>(static_cast<ComputeT<T>>(p[i])));
    return absl::OkStatus();
  });
}

class IsInfKernel : public Kernel {
 public:
  IsInfKernel(bool negative, bool positive) : negative_(negative), positive_(positive) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kBool, x->shape()));
    bool* py = y->mutable_data<bool>();
    return ForEachFloatValue(*x, "IsInf", [&](int64_t i, double v) {
      py[i] = std::isinf(v) && (v > 0 ? positive_ : negative_);
    });
  }

 private:
  bool negative_, positive_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> CreateUnaryKernel(UnaryOp op, const ir::Node& node, const KernelInfo& info) {
  UnaryParams p;
  switch (op) {
    case UnaryOp::kHardSigmoid:
      p.alpha = AttrFloat(node, "alpha", 0.2f);
      p.beta = AttrFloat(node, "beta", 0.5f);
      break;
    case UnaryOp::kElu:
    case UnaryOp::kCelu:
    case UnaryOp::kThresholdedRelu:
    case UnaryOp::kSwish:
      p.alpha = AttrFloat(node, "alpha", 1.0f);
      if (op == UnaryOp::kCelu && p.alpha == 0) return absl::InvalidArgumentError("attribute alpha must not be 0");
      break;
    case UnaryOp::kLeakyRelu:
      p.alpha = AttrFloat(node, "alpha", 0.01f);
      break;
    case UnaryOp::kSelu:
      // Opset 6 made the defaults the exact constants of the SELU paper.
      p.alpha = AttrFloat(node, "alpha", info.opset < 6 ? 1.6732f : 1.67326319217681884765625f);
      p.gamma = AttrFloat(node, "gamma", info.opset < 6 ? 1.0507f : 1.05070102214813232421875f);
      break;
    case UnaryOp::kGelu: {
      std::string approximate = AttrString(node, "approximate", "none");
      if (approximate != "none" && approximate != "tanh") {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute approximate must be \"none\" or \"tanh\", got \"", approximate, "\""));
      }
      p.tanh_approximation = approximate == "tanh";
      break;
    }
    default:
      break;
  }
  return std::unique_ptr<Kernel>(new UnaryKernel(op, p));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeClipAttr(const ir::Node& node, const KernelInfo& info) {
  std::optional<float> lo = node.GetFloat("min"), hi = node.GetFloat("max");
  if (info.opset >= 6) {  // opset 6 gave the bounds defaults; opset 1 left them open
    if (!lo) lo = -FLT_MAX;
    if (!hi) hi = FLT_MAX;
  }
  return std::unique_ptr<Kernel>(new ClipAttrKernel(lo, hi));
}

absl::Status Clip(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* lo, ClipBound(ctx, 1, *x));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* hi, ClipBound(ctx, 2, *x));
  if (x->dtype() == pb::kBool) return absl::InvalidArgumentError("Clip does not support element type bool");
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    std::optional<C> l, h;
    if (lo != nullptr) l = static_cast<C>(lo->data<T>()[0]);
    if (hi != nullptr) h = static_cast<C>(hi->data<T>()[0]);
    ClipTyped<T, C>(*x, y, l, h);
    return absl::OkStatus();
  });
}

absl::Status IsNaN(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kBool, x->shape()));
  bool* py = y->mutable_data<bool>();
  return ForEachFloatValue(*x, "IsNaN", [&](int64_t i, double v) { py[i] = std::isnan(v); });
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeIsInf(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(
      new IsInfKernel(AttrInt(node, "detect_negative", 1) != 0, AttrInt(node, "detect_positive", 1) != 0));
}

absl::Status PRelu(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* slope, ctx.Input(1));
  return RunPRelu(ctx, *x, *slope, slope->shape());
}

absl::Status PReluLegacy(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* slope, ctx.Input(1));
  std::vector<int64_t> shape = slope->shape();
  if (slope->size() == 1) {
    shape.clear();  // shared by all channels
  } else if (slope->rank() == 1 && x->rank() >= 2 && slope->dim(0) == x->dim(1)) {
    shape.assign(static_cast<size_t>(x->rank() - 1), 1);  // one slope per channel (dim 1)
    shape[0] = slope->dim(0);
  }
  return RunPRelu(ctx, *x, *slope, shape);
}

}  // namespace onnxkit::runner::reference
