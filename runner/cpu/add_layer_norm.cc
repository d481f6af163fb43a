// Residual Add + LayerNormalization as one pass (a transformer chain,
// runner/fusion.h):
//
//   %x = Add(%a, %b); %y = LayerNormalization(%x, %scale, %bias)
//
// per row of the normalized extent: x = a + b, its mean, the mean of
// (x - mean)^2, then (x - mean) / sqrt(var + epsilon) * scale + bias, with x
// never stored. A row sum that is not finite (an input holding NaN or an
// infinity, or an overflow) runs the chain node by node, as do broadcasting
// Adds, requested Mean / InvStdDev outputs, stash_type other than float and
// scales that do not match the normalized dims.
//
// Also the layer normalization written out as ReduceMean, Sub, Pow,
// ReduceMean, Add, Sqrt, Div [, Mul [, Add]] (exports below opset 17), one
// pass per row (DecomposedLayerNormKernel), and the RMS normalization
// (Pow, ReduceMean, Add, Sqrt, Div or Reciprocal and Mul [, Mul]) likewise
// (RmsNormKernel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/transformer.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::cpu {
namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) float RowSum(const float* a, const float* b,
                                                                          int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] + b[i];
  return s;
}

// One normalized row: y = (x - mean) * rstd * scale (+ bias), x = a + b.
__attribute__((target_clones("avx512f", "avx2", "default"))) void NormRow(const float* a, const float* b, float mean,
                                                                          float epsilon, const float* scale,
                                                                          const float* bias, float* y, int64_t n) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) {
    float d = (a[i] + b[i]) - mean;
    ss += d * d;
  }
  const float rstd = 1.f / std::sqrt(ss / static_cast<float>(n) + epsilon);
  if (bias != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = ((a[i] + b[i]) - mean) * rstd * scale[i] + bias[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = ((a[i] + b[i]) - mean) * rstd * scale[i];
  }
}

// True when `param` (float) holds the `inner` normalized elements: its
// shape, leading 1s dropped, equals `tail`'s.
bool FitsTail(const Tensor* param, std::vector<int64_t> tail) {
  if (param == nullptr) return true;
  std::vector<int64_t> p = param->shape();
  while (!p.empty() && p.front() == 1) p.erase(p.begin());
  while (!tail.empty() && tail.front() == 1) tail.erase(tail.begin());
  return param->dtype() == pb::kFloat && p == tail;
}

class AddLayerNormKernel : public Kernel {
 public:
  AddLayerNormKernel(int64_t axis, float epsilon, int64_t stash_type, bool has_bias, std::unique_ptr<Kernel> fallback)
      : axis_(axis), epsilon_(epsilon), stash_type_(stash_type), has_bias_(has_bias), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(3));
    const Tensor* bias = nullptr;
    if (has_bias_) {
      ONNXKIT_ASSIGN_OR_RETURN(bias, ctx.OptionalInput(4));
    }
    const int64_t rank = a->rank();
    if (a->dtype() != pb::kFloat || b->dtype() != pb::kFloat || a->shape() != b->shape() || a->size() == 0 ||
        stash_type_ != 1 || axis_ < -rank || axis_ >= rank || ctx.OutputRequested(1) || ctx.OutputRequested(2)) {
      return fallback_->Run(ctx);
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    std::vector<int64_t> tail(a->shape().begin() + static_cast<std::ptrdiff_t>(axis), a->shape().end());
    if (!FitsTail(scale, tail) || !FitsTail(bias, tail)) return fallback_->Run(ctx);
    int64_t rows = 1;
    for (size_t i = 0; i < axis; ++i) rows *= a->dim(static_cast<int>(i));
    const int64_t n = a->size() / rows;
    const float* pa = a->data<float>();
    const float* pb = b->data<float>();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, a->shape()));
    float* py = y->mutable_data<float>();
    const float* ps = scale->data<float>();
    const float* pbias = bias != nullptr ? bias->data<float>() : nullptr;
    const bool bad = ParallelAny(rows, rows >= 32 && a->size() >= 65536, [&](int64_t r) {
      const float sum = RowSum(pa + r * n, pb + r * n, n);
      if (!std::isfinite(sum)) return true;
      NormRow(pa + r * n, pb + r * n, sum / static_cast<float>(n), epsilon_, ps, pbias, py + r * n, n);
      return false;
    });
    if (bad) return fallback_->Run(ctx);  // replaces the output
    return absl::OkStatus();
  }

 private:
  int64_t axis_;
  float epsilon_;
  int64_t stash_type_;
  bool has_bias_;
  std::unique_ptr<Kernel> fallback_;
};

__attribute__((target_clones("avx512f", "avx2", "default"))) float PlainRowSum(const float* x, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

// One row of the written-out normalization: the sum of squared deviations
// from `mean`, then y = (x - mean) / sqrt(var + epsilon) [* gamma [+ beta]]
// (a division, as the Div node computes). False when the squares overflow.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool DecomposedRow(
    const float* x, float mean, float epsilon, const float* gamma, const float* beta, float* y, int64_t n) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) {
    float d = x[i] - mean;
    ss += d * d;
  }
  if (!std::isfinite(ss)) return false;
  const float s = std::sqrt(ss / static_cast<float>(n) + epsilon);
  if (gamma == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) / s;
  } else if (beta == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) / s * gamma[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) / s * gamma[i] + beta[i];
  }
  return true;
}

// The rows of `x` (its elements, non-empty) before axis `first`: the
// product of the leading dims.
int64_t LeadingRows(const Tensor& x, int64_t first) {
  int64_t rows = 1;
  for (int64_t i = 0; i < first; ++i) rows *= x.dim(static_cast<int>(i));
  return rows;
}

// A ReduceMean of a written-out normalization: its attributes.
struct ReduceSpec {
  std::vector<int64_t> axes;  // the attribute (opsets < 18)
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};

// The first axis of the trailing run a ReduceMean (`r`, axes input at
// `slot`) reduces with kept dims over a tensor of `rank`; nullopt when it
// reduces anything else.
std::optional<int64_t> TrailingAxes(KernelContext& ctx, const ReduceSpec& r, int slot, int64_t rank) {
  if (!r.keepdims) return std::nullopt;
  std::vector<int64_t> axes = r.axes;
  if (slot >= 0) {
    absl::StatusOr<const Tensor*> t = ctx.OptionalInput(slot);
    if (!t.ok()) return std::nullopt;
    if (*t != nullptr) {
      absl::StatusOr<std::vector<int64_t>> v = reference::shape_ops::ReadInts(**t, "axes");
      if (!v.ok()) return std::nullopt;
      axes = *std::move(v);
    }
  }
  if (axes.empty()) {
    if (r.noop_with_empty_axes) return std::nullopt;
    return 0;  // every axis
  }
  absl::StatusOr<std::vector<int64_t>> normalized = reference::shape_ops::NormalizeAxes(axes, rank);
  if (!normalized.ok()) return std::nullopt;
  std::vector<int64_t> sorted = *std::move(normalized);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != rank - static_cast<int64_t>(sorted.size()) + static_cast<int64_t>(i))
      return std::nullopt;
  }
  return sorted.front();
}

// The layer normalization written out as ReduceMean, Sub, Pow, ReduceMean,
// Add, Sqrt, Div [, Mul [, Add]] (runner/fusion_transformer.cc) as one
// pass per row. Both ReduceMeans must keep dims and reduce the same
// trailing axes, the exponent be 2 and epsilon, gamma and beta fit the
// normalized dims without broadcasting x; a row whose sum or squares are
// not finite (NaN, an infinity, an overflow) runs the chain node by node,
// as do other inputs.
class DecomposedLayerNormKernel : public Kernel {
 public:
  struct Slots {
    int x = 0, axes_mean = -1, two = 0, axes_var = -1, epsilon = 0, gamma = -1, beta = -1;
  };
  using Reduce = ReduceSpec;

  DecomposedLayerNormKernel(Slots slots, Reduce mean, Reduce var, std::unique_ptr<Kernel> fallback)
      : slots_(slots), mean_(std::move(mean)), var_(std::move(var)), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(slots_.x));
    if (x->dtype() != pb::kFloat || x->size() == 0 || x->rank() < 1) return fallback_->Run(ctx);
    const int64_t rank = x->rank();
    std::optional<int64_t> first = TrailingAxes(ctx, mean_, slots_.axes_mean, rank);
    std::optional<int64_t> first_var = TrailingAxes(ctx, var_, slots_.axes_var, rank);
    if (!first || first != first_var) return fallback_->Run(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* two, ctx.Input(slots_.two));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* eps, ctx.Input(slots_.epsilon));
    const Tensor* gamma = nullptr;
    const Tensor* beta = nullptr;
    if (slots_.gamma >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(gamma, ctx.Input(slots_.gamma));
    }
    if (slots_.beta >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(beta, ctx.Input(slots_.beta));
    }
    std::vector<int64_t> tail(x->shape().begin() + *first, x->shape().end());
    auto scalar = [&](const Tensor* t) {
      return t->dtype() == pb::kFloat && t->size() == 1 && t->rank() <= rank;
    };
    auto fits = [&](const Tensor* t) { return t == nullptr || (t->rank() <= rank && FitsTail(t, tail)); };
    if (!scalar(two) || two->data<float>()[0] != 2.f || !scalar(eps) || !fits(gamma) || !fits(beta)) {
      return fallback_->Run(ctx);
    }
    const int64_t rows = LeadingRows(*x, *first);
    const int64_t n = x->size() / rows;
    const float epsilon = eps->data<float>()[0];
    const float* px = x->data<float>();
    const float* pg = gamma != nullptr ? gamma->data<float>() : nullptr;
    const float* pbeta = beta != nullptr ? beta->data<float>() : nullptr;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    float* py = y->mutable_data<float>();
    const bool bad = ParallelAny(rows, rows >= 32 && x->size() >= 65536, [&](int64_t r) {
      const float sum = PlainRowSum(px + r * n, n);
      return !std::isfinite(sum) ||
             !DecomposedRow(px + r * n, sum / static_cast<float>(n), epsilon, pg, pbeta, py + r * n, n);
    });
    if (bad) return fallback_->Run(ctx);  // replaces the output
    return absl::OkStatus();
  }

 private:
  Slots slots_;
  Reduce mean_, var_;
  std::unique_ptr<Kernel> fallback_;
};

// One row of the RMS normalization: s = sqrt(sum(x^2) / n + epsilon), then
// y = x / s, or x * (1 / s) when `inverse` (as the Div or the Reciprocal and
// Mul compute it) [* gamma]. False when the squares are not finite.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool RmsRow(const float* x, float epsilon,
                                                                         bool inverse, const float* gamma,
                                                                         float* y, int64_t n) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  if (!std::isfinite(ss)) return false;
  const float s = std::sqrt(ss / static_cast<float>(n) + epsilon);
  if (inverse) {
    const float r = 1.f / s;
    if (gamma == nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * gamma[i];
    }
  } else if (gamma == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / s;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / s * gamma[i];
  }
  return true;
}

// Output 0 = RmsRow of every row of float `x` (the dims from `first` on);
// `fallback` replaces it when a row's squares are not finite.
absl::Status RmsRows(KernelContext& ctx, const Tensor& x, int64_t first, float epsilon, bool inverse,
                     const Tensor* gamma, Kernel& fallback) {
  const int64_t rows = LeadingRows(x, first);
  const int64_t n = x.size() / rows;
  const float* px = x.data<float>();
  const float* pg = gamma != nullptr ? gamma->data<float>() : nullptr;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x.shape()));
  float* py = y->mutable_data<float>();
  const bool bad = ParallelAny(rows, rows >= 32 && x.size() >= 65536, [&](int64_t r) {
    return !RmsRow(px + r * n, epsilon, inverse, pg, py + r * n, n);
  });
  if (bad) return fallback.Run(ctx);  // replaces the output
  return absl::OkStatus();
}

// The RMS normalization written out (runner/fusion_transformer.cc,
// RmsNormChain) as one pass per row. The ReduceMean must keep dims and
// reduce trailing axes, the exponent be 2 (a Mul of x by itself needs no
// check), the numerator of a Div(1, s) be 1, and epsilon and gamma fit the
// normalized dims; a row whose squares are not finite (NaN, an infinity,
// an overflow) runs the chain node by node, as do other inputs.
class RmsNormKernel : public Kernel {
 public:
  struct Slots {
    int x = 0, two = -1, axes = -1, epsilon = 0, one = -1, gamma = -1;
  };

  RmsNormKernel(Slots slots, ReduceSpec mean, bool inverse, std::unique_ptr<Kernel> fallback)
      : slots_(slots), mean_(std::move(mean)), inverse_(inverse), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(slots_.x));
    if (x->dtype() != pb::kFloat || x->size() == 0 || x->rank() < 1) return fallback_->Run(ctx);
    const int64_t rank = x->rank();
    std::optional<int64_t> first = TrailingAxes(ctx, mean_, slots_.axes, rank);
    if (!first) return fallback_->Run(ctx);
    auto scalar_is = [&](int slot, double want) -> absl::StatusOr<bool> {
      if (slot < 0) return true;
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(slot));
      if (t->size() != 1 || t->rank() > rank) return false;
      if (t->dtype() == pb::kFloat) return t->data<float>()[0] == static_cast<float>(want);
      if (t->dtype() == pb::kDouble) return t->data<double>()[0] == want;
      if (t->dtype() == pb::kInt64) return t->data<int64_t>()[0] == static_cast<int64_t>(want);
      if (t->dtype() == pb::kInt32) return t->data<int32_t>()[0] == static_cast<int32_t>(want);
      return false;
    };
    ONNXKIT_ASSIGN_OR_RETURN(const bool two_ok, scalar_is(slots_.two, 2));
    ONNXKIT_ASSIGN_OR_RETURN(const bool one_ok, scalar_is(slots_.one, 1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* eps, ctx.Input(slots_.epsilon));
    const Tensor* gamma = nullptr;
    if (slots_.gamma >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(gamma, ctx.Input(slots_.gamma));
    }
    std::vector<int64_t> tail(x->shape().begin() + *first, x->shape().end());
    const bool eps_ok = eps->dtype() == pb::kFloat && eps->size() == 1 && eps->rank() <= rank;
    const bool gamma_ok = gamma == nullptr || (gamma->rank() <= rank && FitsTail(gamma, tail));
    if (!two_ok || !one_ok || !eps_ok || !gamma_ok) return fallback_->Run(ctx);
    return RmsRows(ctx, *x, *first, eps->data<float>()[0], inverse_, gamma, *fallback_);
  }

 private:
  Slots slots_;
  ReduceSpec mean_;
  bool inverse_;
  std::unique_ptr<Kernel> fallback_;
};

// The RMSNormalization op (opset 23) on float X and scale over the
// trailing axes [axis, rank): RmsRow per row (y = x / s * scale). Other
// types, a stash_type other than float, a scale that is not the
// normalized dims, and rows whose squares are not finite run the
// reference kernel.
class RmsNormOpKernel : public Kernel {
 public:
  RmsNormOpKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback)
      : axis_(reference::AttrInt(node, "axis", -1)),
        epsilon_(reference::AttrFloat(node, "epsilon", 1e-5f)),
        stash_type_(reference::AttrInt(node, "stash_type", 1)),
        fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    const int64_t rank = x->rank();
    if (x->dtype() != pb::kFloat || x->size() == 0 || stash_type_ != 1 || axis_ < -rank || axis_ >= rank) {
      return fallback_->Run(ctx);
    }
    const int64_t first = axis_ < 0 ? axis_ + rank : axis_;
    std::vector<int64_t> tail(x->shape().begin() + first, x->shape().end());
    if (scale->rank() > rank || !FitsTail(scale, tail)) return fallback_->Run(ctx);
    return RmsRows(ctx, *x, first, epsilon_, false, scale, *fallback_);
  }

 private:
  int64_t axis_;
  float epsilon_;
  int64_t stash_type_;
  std::unique_ptr<Kernel> fallback_;
};
}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeDecomposedLayerNormChain(const FusionChain& chain,
                                                                     const KernelInfo&,
                                                                     std::unique_ptr<Kernel> fallback) {
  const size_t size = chain.nodes.size();
  if (size < 7 || size > 9 || chain.head().op_type() != "ReduceMean") {
    return absl::InternalError("not a written-out layer normalization chain");
  }
  auto other = [&](size_t k) { return chain.input_offset[k] + (chain.chained_input[k] == 0 ? 1 : 0); };
  auto reduce = [](const ir::Node& node) {
    DecomposedLayerNormKernel::Reduce r;
    r.axes = reference::AttrInts(node, "axes");
    r.keepdims = reference::AttrInt(node, "keepdims", 1) != 0;
    r.noop_with_empty_axes = reference::AttrInt(node, "noop_with_empty_axes", 0) != 0;
    return r;
  };
  auto axes_slot = [&](size_t k) {
    const ir::Node& node = *chain.nodes[k];
    return node.num_inputs() > 1 && node.input(1) != nullptr ? chain.input_offset[k] + 1 : -1;
  };
  DecomposedLayerNormKernel::Slots slots;
  slots.x = chain.input_offset[0];
  slots.axes_mean = axes_slot(0);
  slots.two = chain.input_offset[2] + 1;
  slots.axes_var = axes_slot(3);
  slots.epsilon = other(4);
  if (size > 7) slots.gamma = other(7);
  if (size > 8) slots.beta = other(8);
  return std::unique_ptr<Kernel>(new DecomposedLayerNormKernel(slots, reduce(*chain.nodes[0]),
                                                               reduce(*chain.nodes[3]), std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRmsNormChain(const FusionChain& chain, const KernelInfo&,
                                                         std::unique_ptr<Kernel> fallback) {
  const size_t size = chain.nodes.size();
  if (size < 5 || size > 7) return absl::InternalError("not an RMS normalization chain");
  auto other = [&](size_t k) { return chain.input_offset[k] + (chain.chained_input[k] == 0 ? 1 : 0); };
  const ir::Node& head = chain.head();
  const ir::Node& mean = *chain.nodes[1];
  const ir::Node& fifth = *chain.nodes[4];
  RmsNormKernel::Slots slots;
  slots.x = chain.input_offset[0];
  if (head.op_type() == "Pow") slots.two = chain.input_offset[0] + 1;
  if (mean.num_inputs() > 1 && mean.input(1) != nullptr) slots.axes = chain.input_offset[1] + 1;
  slots.epsilon = other(2);
  // Div(x, s) divides; Div(1, s) or Reciprocal(s), then Mul by x, inverts.
  const bool inverse = fifth.op_type() == "Reciprocal" || fifth.input(0) != head.input(0);
  if (fifth.op_type() == "Div" && inverse) slots.one = chain.input_offset[4];
  const size_t body = inverse ? 6 : 5;
  if (size < body) return absl::InternalError("not an RMS normalization chain");
  if (size > body) slots.gamma = other(body);
  ReduceSpec r;
  r.axes = reference::AttrInts(mean, "axes");
  r.keepdims = reference::AttrInt(mean, "keepdims", 1) != 0;
  r.noop_with_empty_axes = reference::AttrInt(mean, "noop_with_empty_axes", 0) != 0;
  return std::unique_ptr<Kernel>(new RmsNormKernel(slots, std::move(r), inverse, std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeAddLayerNormChain(const FusionChain& chain, const KernelInfo&,
                                                              std::unique_ptr<Kernel> fallback) {
  if (chain.nodes.size() != 2 || chain.chained_input[1] != 0) {
    return absl::InternalError("not an Add + LayerNormalization chain");
  }
  const ir::Node& ln = *chain.nodes[1];
  return std::unique_ptr<Kernel>(new AddLayerNormKernel(
      reference::AttrInt(ln, "axis", -1), reference::AttrFloat(ln, "epsilon", 1e-5f),
      reference::AttrInt(ln, "stash_type", 1), ln.num_inputs() > 2 && ln.input(2) != nullptr, std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRmsNorm(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  return std::unique_ptr<Kernel>(new RmsNormOpKernel(node, std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
