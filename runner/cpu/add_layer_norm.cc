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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/transformer.h"
#include "runner/reference/dispatch.h"

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
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (rows >= 32 && a->size() >= 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const float sum = RowSum(pa + r * n, pb + r * n, n);
      if (!std::isfinite(sum)) {
        bad = 1;
        continue;
      }
      NormRow(pa + r * n, pb + r * n, sum / static_cast<float>(n), epsilon_, ps, pbias, py + r * n, n);
    }
    if (bad != 0) return fallback_->Run(ctx);  // replaces the output
    return absl::OkStatus();
  }

 private:
  int64_t axis_;
  float epsilon_;
  int64_t stash_type_;
  bool has_bias_;
  std::unique_ptr<Kernel> fallback_;
};

}  // namespace

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

}  // namespace onnxkit::runner::cpu
