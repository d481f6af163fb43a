// cpu element-wise kernels on float tensors: oneDNN eltwise primitives for
// the activations and unary math (Relu, Sigmoid, Tanh, Exp, Sqrt, Abs,
// Neg, Reciprocal, Elu, LeakyRelu, HardSwish, Clip, Gelu, Round),
// and a vectorized loop for Erf, which oneDNN 2.6 lacks. NaN inputs give NaN
// as in the reference. Other element types, ranks above 6 and empty tensors
// run on the reference kernels.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/erf_approx.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using alg = dnnl::algorithm;

// y[i] = x[i] where x[i] is NaN: eltwise relu, exp and clip_v2 turn NaN into
// numbers, the reference keeps it.
__attribute__((target_clones("avx512f", "avx2", "default"))) void CopyNaNChunk(const float* x, float* y,
                                                                               int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] != x[i] ? x[i] : y[i];
}

void CopyNaN(const Tensor& x, Tensor& y) {
  constexpr int64_t kChunk = 65536;
  int64_t total = x.size(), chunks = (total + kChunk - 1) / kChunk;
  const float* px = x.data<float>();
  float* py = y.mutable_data<float>();
  ParallelFor(chunks, chunks > 1, [&](int64_t c) {
    CopyNaNChunk(px + c * kChunk, py + c * kChunk, std::min(kChunk, total - c * kChunk));
  });
}

bool KeepsNaN(alg a) { return a != alg::eltwise_relu && a != alg::eltwise_exp && a != alg::eltwise_clip_v2; }

// An eltwise primitive for one input desc and parameters, rebuilt when
// either changes.
class EltwisePrimitive {
 public:
  absl::Status Run(const Tensor& x, Tensor& y, alg a, float alpha, float beta) {
    dnnl::memory::desc desc = PlainDesc(x.shape(), dnnl::memory::data_type::f32);
    if (!primitive_ || desc != desc_ || alpha != alpha_ || beta != beta_) {
      ONNXKIT_RETURN_IF_ERROR(Guard("eltwise", [&] {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, a, desc, alpha, beta);
        primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, Engine()));
      }));
      desc_ = desc;
      alpha_ = alpha;
      beta_ = beta;
    }
    args_[DNNL_ARG_SRC] = src_.At(x, desc);
    args_[DNNL_ARG_DST] = dst_.At(y, desc);
    ONNXKIT_RETURN_IF_ERROR(Execute("eltwise", primitive_, args_));
    if (!KeepsNaN(a)) CopyNaN(x, y);
    return absl::OkStatus();
  }

 private:
  dnnl::memory::desc desc_;
  float alpha_ = 0, beta_ = 0;
  dnnl::primitive primitive_;
  HeldMemory src_, dst_;
  std::unordered_map<int, dnnl::memory> args_;
};

bool Covered(const Tensor& x) { return x.dtype() == pb::kFloat && x.rank() <= 6 && x.size() > 0; }

// y = alg(x) with fixed parameters.
// Tensors of at most this many elements skip oneDNN where a plain loop gives
// the same values.
constexpr int64_t kSmall = 1024;

class EltwiseKernel : public CpuKernel {
 public:
  EltwiseKernel(alg a, float alpha, float beta, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), alg_(a), alpha_(alpha), beta_(beta) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!Covered(*x)) return Fallback(ctx);
    // In place only where no NaN pass reads x after the primitive wrote y.
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, KeepsNaN(alg_)
                                             ? ctx.AllocateOutputReusing(0, 0, x->dtype(), x->shape())
                                             : ctx.AllocateOutputUninitialized(0, x->dtype(), x->shape()));
    // Small tensors of the exactly rounded ops: a loop costs less than calling oneDNN.
    if (x->size() <= kSmall && (alg_ == alg::eltwise_relu || alg_ == alg::eltwise_abs)) {
      const float* px = x->data<float>();
      float* py = y->mutable_data<float>();
      const float alpha = alpha_;
      if (alg_ == alg::eltwise_abs) {
        for (int64_t i = 0; i < x->size(); ++i) py[i] = std::fabs(px[i]);
      } else {
        // (-inf times 0 would be NaN: Relu's negatives are 0; NaN stays NaN.)
        for (int64_t i = 0; i < x->size(); ++i) {
          const float v = px[i];
          py[i] = v > 0 || v != v ? v : (alpha == 0 ? 0.0f : v * alpha);
        }
      }
      return absl::OkStatus();
    }
    return primitive_.Run(*x, *y, alg_, alpha_, beta_);
  }

 private:
  alg alg_;
  float alpha_, beta_;
  EltwisePrimitive primitive_;
};

// Clip (opset 11+) with optional one-element min/max inputs, read per run;
// Clip (opset 6-10) with min/max attributes.
class ClipKernel : public CpuKernel {
 public:
  ClipKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), attrs_(info.opset < 11) {
    lo_ = reference::AttrFloat(node, "min", std::numeric_limits<float>::lowest());
    hi_ = reference::AttrFloat(node, "max", std::numeric_limits<float>::max());
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!Covered(*x)) return Fallback(ctx);
    float lo = attrs_ ? lo_ : -std::numeric_limits<float>::infinity();
    float hi = attrs_ ? hi_ : std::numeric_limits<float>::infinity();
    if (!attrs_) {
      for (int i = 1; i <= 2; ++i) {
        ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.OptionalInput(i));
        if (b == nullptr) continue;
        if (b->dtype() != pb::kFloat || b->size() != 1) return Fallback(ctx);
        (i == 1 ? lo : hi) = b->data<float>()[0];
      }
    }
    // lo > hi gives hi everywhere, which clip_v2 does not.
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), x->shape()));
    return primitive_.Run(*x, *y, alg::eltwise_clip_v2, lo, hi);
  }

 private:
  bool attrs_;
  float lo_, hi_;
  EltwisePrimitive primitive_;
};

__attribute__((target_clones("avx512f", "avx2", "default"))) void ErfChunk(const float* x, float* y,
                                                                           int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = ErfApprox(x[i]);
}

class ErfKernel : public CpuKernel {
 public:
  ErfKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->size() == 0) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputReusing(0, 0, x->dtype(), x->shape()));
    const float* px = x->data<float>();
    float* py = y->mutable_data<float>();
    constexpr int64_t kChunk = 16384;
    int64_t total = x->size(), chunks = (total + kChunk - 1) / kChunk;
    ParallelFor(chunks, chunks > 1, [&](int64_t c) {
      int64_t begin = c * kChunk;
      ErfChunk(px + begin, py + begin, std::min(kChunk, total - begin));
    });
    return absl::OkStatus();
  }
};

struct EltwiseSpec {
  alg a;
  float alpha = 0, beta = 0;
};

// The oneDNN algorithm and parameters of a unary op; nullopt for ops this
// file does not map (or attribute values it does not cover).
std::optional<EltwiseSpec> SpecOf(const ir::Node& node) {
  const std::string& op = node.op_type();
  if (op == "Relu") return EltwiseSpec{alg::eltwise_relu};
  if (op == "Sigmoid") return EltwiseSpec{alg::eltwise_logistic};
  if (op == "Tanh") return EltwiseSpec{alg::eltwise_tanh};
  if (op == "Exp") return EltwiseSpec{alg::eltwise_exp};
  if (op == "Sqrt") return EltwiseSpec{alg::eltwise_sqrt};
  if (op == "Abs") return EltwiseSpec{alg::eltwise_abs};
  if (op == "Neg") return EltwiseSpec{alg::eltwise_linear, -1.f, 0.f};
  if (op == "Reciprocal") return EltwiseSpec{alg::eltwise_pow, 1.f, -1.f};
  if (op == "Elu") return EltwiseSpec{alg::eltwise_elu, reference::AttrFloat(node, "alpha", 1.f)};
  if (op == "LeakyRelu") return EltwiseSpec{alg::eltwise_relu, reference::AttrFloat(node, "alpha", 0.01f)};
  if (op == "HardSwish") return EltwiseSpec{alg::eltwise_hardswish};
  if (op == "Round") return EltwiseSpec{alg::eltwise_round};
  if (op == "Gelu") {
    std::string approximate = reference::AttrString(node, "approximate", "none");
    if (approximate == "none") return EltwiseSpec{alg::eltwise_gelu_erf};
    if (approximate == "tanh") return EltwiseSpec{alg::eltwise_gelu_tanh};
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeEltwise(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  std::optional<EltwiseSpec> spec = SpecOf(node);
  if (!spec) return fallback;
  return std::unique_ptr<Kernel>(new EltwiseKernel(spec->a, spec->alpha, spec->beta, std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeClip(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ClipKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeErf(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ErfKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
