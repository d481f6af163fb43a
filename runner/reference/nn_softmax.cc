// Reference kernels: Softmax, LogSoftmax and Hardmax (before opset 13 the
// input is coerced to 2-D at `axis`; from 13 they work along one axis),
// Shrink, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// Hardmax over rows of `n` elements spaced `inner` apart: 1 at the first
// largest element (a NaN is never larger; a NaN first element stays
// chosen), 0 elsewhere. Rows spaced apart advance together, `inner` at a
// time, so the reads run along memory.
template <typename C>
void HardmaxRows(const C* x, C* y, int64_t outer, int64_t n, int64_t inner) {
  if (n <= 0 || inner <= 0) return;
  std::vector<C> best_value(static_cast<size_t>(inner));
  std::vector<int64_t> best(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const C* px = x + o * n * inner;
    C* py = y + o * n * inner;
    if (inner == 1) {
      C bv = px[0];
      int64_t b = 0;
      for (int64_t k = 1; k < n; ++k) {
        if (px[k] > bv) {
          bv = px[k];
          b = k;
        }
      }
      std::fill(py, py + n, C{0});
      py[b] = C{1};
      continue;
    }
    std::copy(px, px + inner, best_value.begin());
    std::fill(best.begin(), best.end(), int64_t{0});
    for (int64_t k = 1; k < n; ++k) {
      const C* row = px + k * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const bool larger = row[i] > best_value[static_cast<size_t>(i)];
        best_value[static_cast<size_t>(i)] = larger ? row[i] : best_value[static_cast<size_t>(i)];
        best[static_cast<size_t>(i)] = larger ? k : best[static_cast<size_t>(i)];
      }
    }
    std::fill(py, py + n * inner, C{0});
    for (int64_t i = 0; i < inner; ++i) py[best[static_cast<size_t>(i)] * inner + i] = C{1};
  }
}

// One softmax-like op over rows of `n` elements spaced `inner` apart.
template <typename C>
void SoftmaxRows(SoftmaxKind kind, const C* x, C* y, int64_t outer, int64_t n, int64_t inner) {
  if (kind == SoftmaxKind::kHardmax) return HardmaxRows(x, y, outer, n, inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const C* px = x + o * n * inner + i;
      C* py = y + o * n * inner + i;
      C mx = -std::numeric_limits<C>::infinity();
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, px[k * inner]);
      C sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(px[k * inner] - mx);
      for (int64_t k = 0; k < n; ++k) {
        py[k * inner] = kind == SoftmaxKind::kSoftmax ? std::exp(px[k * inner] - mx) / sum
                                                      : px[k * inner] - mx - std::log(sum);
      }
    }
  }
}

class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(SoftmaxKind kind, int64_t axis, bool coerce_2d) : kind_(kind), axis_(axis), coerce_2d_(coerce_2d) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    int64_t outer = 1, n = 1, inner = 1;
    if (x->rank() > 0 || !coerce_2d_) {
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, std::max(x->rank(), 1)));
      for (int i = 0; i < x->rank(); ++i) {
        if (i < axis) {
          outer *= x->dim(i);
        } else if (i == axis || coerce_2d_) {
          n *= x->dim(i);
        } else {
          inner *= x->dim(i);
        }
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    return VisitFloat(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      std::vector<C> sx;
      const C* px = ElementsAs<T, C>(*x, sx);
      if constexpr (std::is_same_v<T, C>) {
        SoftmaxRows<C>(kind_, px, y->mutable_data<T>(), outer, n, inner);
      } else {
        std::vector<C> out(static_cast<size_t>(x->size()));
        SoftmaxRows<C>(kind_, px, out.data(), outer, n, inner);
        for (size_t i = 0; i < out.size(); ++i) y->mutable_data<T>()[i] = static_cast<T>(out[i]);
      }
      return absl::OkStatus();
    });
  }

 private:
  SoftmaxKind kind_;
  int64_t axis_;
  bool coerce_2d_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmaxLike(const ir::Node& node, const KernelInfo& info, SoftmaxKind kind) {
  bool coerce = info.opset < 13;
  return std::unique_ptr<Kernel>(new SoftmaxKernel(kind, AttrInt(node, "axis", coerce ? 1 : -1), coerce));
}

class ShrinkKernel : public Kernel {
 public:
  ShrinkKernel(double lambd, double bias) : lambd_(lambd), bias_(bias) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::UnimplementedError("Shrink on bool");
      } else {
        const T* px = x->data<T>();
        T* py = y->mutable_data<T>();
        for (int64_t i = 0; i < x->size(); ++i) {
          double v = static_cast<double>(static_cast<ComputeT<T>>(px[i]));
          double r = v < -lambd_ ? v + bias_ : (v > lambd_ ? v - bias_ : 0.0);
          py[i] = static_cast<T>(r);
        }
        return absl::OkStatus();
      }
    });
  }

 private:
  double lambd_, bias_;
};

// --- Losses ---

enum class Reduction { kNone, kSum, kMean };

struct LossOptions {
  Reduction reduction = Reduction::kMean;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
};

absl::StatusOr<LossOptions> ParseLossOptions(const ir::Node& node) {
  LossOptions o;
  std::string r = AttrString(node, "reduction", "mean");
  if (r == "none") {
    o.reduction = Reduction::kNone;
  } else if (r == "sum") {
    o.reduction = Reduction::kSum;
  } else if (r == "mean") {
    o.reduction = Reduction::kMean;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("reduction '", r, "' is not one of none, sum, mean"));
  }
  auto ii = node.GetInt("ignore_index");
  o.has_ignore_index = ii.has_value();
  o.ignore_index = ii.value_or(0);
  return o;
}

// Negative log-likelihood of log-probabilities `logp` [N, C, d...] (as
// doubles) at `target` [N, d...] with optional class weights. Writes the
// loss (per element, or reduced) into output 0 with element type `dtype`.
absl::Status NllLoss(KernelContext& ctx, const LossOptions& o, const std::vector<double>& logp,
                     const std::vector<int64_t>& in_shape, const Tensor& target, const Tensor* weight, int32_t dtype) {
  if (in_shape.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("input ", ShapeString(in_shape), " needs shape [N, C, d...]"));
  }
  std::vector<int64_t> t_shape = in_shape;
  t_shape.erase(t_shape.begin() + 1);
  if (target.shape() != t_shape) {
    return absl::InvalidArgumentError(absl::StrCat("target ", DescribeTensor(target), " must have shape ",
                                                   ShapeString(t_shape)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> labels, ReadInt64s(target));
  int64_t n = in_shape[0], c = in_shape[1];
  int64_t inner = c == 0 || n == 0 ? 0 : static_cast<int64_t>(logp.size()) / n / c;
  std::vector<double> w;
  if (weight != nullptr) {
    if (weight->rank() != 1 || weight->dim(0) != c) {
      return absl::InvalidArgumentError(absl::StrCat("weight ", DescribeTensor(*weight), " must be [", c, "]"));
    }
    ONNXKIT_RETURN_IF_ERROR(VisitFloat(weight->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      std::vector<double> s;
      const double* p = ElementsAs<T, double>(*weight, s);
      w.assign(p, p + c);
      return absl::OkStatus();
    }));
  }
  std::vector<double> loss(labels.size(), 0);
  double total_weight = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    int64_t t = labels[i];
    if (o.has_ignore_index && t == o.ignore_index) continue;
    if (t < 0 || t >= c) {
      return absl::InvalidArgumentError(absl::StrCat("target ", t, " at ", i, " is outside [0, ", c, ")"));
    }
    int64_t b = static_cast<int64_t>(i) / std::max<int64_t>(inner, 1), d = static_cast<int64_t>(i) % std::max<int64_t>(inner, 1);
    double wt = w.empty() ? 1.0 : w[static_cast<size_t>(t)];
    loss[i] = -logp[static_cast<size_t>((b * c + t) * inner + d)] * wt;
    total_weight += wt;
  }
  std::vector<int64_t> out_shape;
  std::vector<double> out;
  if (o.reduction == Reduction::kNone) {
    out_shape = t_shape;
    out = loss;
  } else {
    double sum = 0;
    for (double v : loss) sum += v;
    out.push_back(o.reduction == Reduction::kSum ? sum : sum / total_weight);
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, out_shape));
  return VisitFloat(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (size_t i = 0; i < out.size(); ++i) y->mutable_data<T>()[i] = static_cast<T>(out[i]);
    return absl::OkStatus();
  });
}

std::vector<double> FloatsAsDoubles(const Tensor& t) {
  std::vector<double> out;
  (void)VisitFloat(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    std::vector<double> s;
    const double* p = ElementsAs<T, double>(t, s);
    out.assign(p, p + t.size());
    return absl::OkStatus();
  });
  return out;
}

bool IsFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 11 || dtype == 16; }

class NllKernel : public Kernel {
 public:
  explicit NllKernel(LossOptions o) : o_(o) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* input, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* target, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* weight, ctx.OptionalInput(2));
    if (!IsFloat(input->dtype())) return absl::UnimplementedError(absl::StrCat("input ", DescribeTensor(*input)));
    return NllLoss(ctx, o_, FloatsAsDoubles(*input), input->shape(), *target, weight, input->dtype());
  }

 private:
  LossOptions o_;
};

class SceKernel : public Kernel {
 public:
  explicit SceKernel(LossOptions o) : o_(o) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scores, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* labels, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* weight, ctx.OptionalInput(2));
    if (!IsFloat(scores->dtype())) return absl::UnimplementedError(absl::StrCat("scores ", DescribeTensor(*scores)));
    if (scores->rank() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("scores ", DescribeTensor(*scores), " needs shape [N, C, d...]"));
    }
    std::vector<double> x = FloatsAsDoubles(*scores), logp(x.size());
    int64_t c = scores->dim(1);
    int64_t inner = c == 0 ? 0 : scores->size() / std::max<int64_t>(scores->dim(0), 1) / c;
    SoftmaxRows<double>(SoftmaxKind::kLogSoftmax, x.data(), logp.data(), scores->dim(0), c, inner);
    ONNXKIT_RETURN_IF_ERROR(NllLoss(ctx, o_, logp, scores->shape(), *labels, weight, scores->dtype()));
    if (ctx.OutputRequested(1)) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * lp, ctx.AllocateOutput(1, scores->dtype(), scores->shape()));
      return VisitFloat(scores->dtype(), [&](auto tag) -> absl::Status {
        using T = decltype(tag);
        for (size_t i = 0; i < logp.size(); ++i) lp->mutable_data<T>()[i] = static_cast<T>(logp[i]);
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }

 private:
  LossOptions o_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmax(const ir::Node& node, const KernelInfo& info) {
  return MakeSoftmaxLike(node, info, SoftmaxKind::kSoftmax);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeLogSoftmax(const ir::Node& node, const KernelInfo& info) {
  return MakeSoftmaxLike(node, info, SoftmaxKind::kLogSoftmax);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeHardmax(const ir::Node& node, const KernelInfo& info) {
  return MakeSoftmaxLike(node, info, SoftmaxKind::kHardmax);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeShrink(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new ShrinkKernel(AttrFloat(node, "lambd", 0.5f), AttrFloat(node, "bias", 0.0f)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeNegativeLogLikelihoodLoss(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(LossOptions o, ParseLossOptions(node));
  return std::unique_ptr<Kernel>(new NllKernel(o));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmaxCrossEntropyLoss(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(LossOptions o, ParseLossOptions(node));
  return std::unique_ptr<Kernel>(new SceKernel(o));
}

}  // namespace onnxkit::runner::reference
