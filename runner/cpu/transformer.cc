// Transformer chain kernels: MatMul + bias, erf GELU, SiLU and Mish (transformer.h).
#include "runner/cpu/transformer.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/erf_approx.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/vector_math.h"

namespace onnxkit::runner::cpu {
namespace {

// Input index (of the fused kernel) of chain node k's input that is not the
// chained one; the node has two inputs.
int OtherInput(const FusionChain& chain, size_t k) {
  return chain.input_offset[k] + (chain.chained_input[k] == 0 ? 1 : 0);
}

// The value of a one-element float tensor that broadcasts to `shape`
// without changing it; nullopt otherwise.
std::optional<float> Scalar(const Tensor* t, const std::vector<int64_t>& shape) {
  if (t == nullptr || t->dtype() != pb::kFloat || t->size() != 1 || t->rank() > static_cast<int>(shape.size())) {
    return std::nullopt;
  }
  return t->data<float>()[0];
}

class MatMulBiasKernel : public Kernel {
 public:
  MatMulBiasKernel(int bias, bool constant_b, std::unique_ptr<Kernel> fallback)
      : bias_(bias), constant_b_(constant_b), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.Input(bias_));
    if (!constant_b_ || !PackedGemmTakes(*a, *b) || !MatMulBiasFits(*bias, a->rank(), b->dim(1))) {
      return fallback_->Run(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(const PackedMatrix* packed, packed_.Get(*b));
    std::vector<int64_t> shape(a->shape().begin(), a->shape().end() - 1);
    shape.push_back(b->dim(1));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    PackedGemm(a->data<float>(), a->size() / b->dim(0), b->dim(0), *packed, bias->data<float>(),
               y->mutable_data<float>(), b->dim(1));
    return absl::OkStatus();
  }

 private:
  int bias_;
  bool constant_b_;
  std::unique_ptr<Kernel> fallback_;
  PackedWeightCache packed_;
};

__attribute__((target_clones("avx512f", "avx2", "default"))) void GeluChunk(const float* x, float* y, int64_t n,
                                                                            float c, float one, float half) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float s = ErfApprox(x[i] / c) + one;
    y[i] = (x[i] * s) * half;
  }
}

class GeluKernel : public Kernel {
 public:
  GeluKernel(int one, int half, std::unique_ptr<Kernel> fallback)
      : one_(one), half_(half), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->size() == 0) return fallback_->Run(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* one, ctx.Input(one_));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* half, ctx.Input(half_));
    std::optional<float> cv = Scalar(c, x->shape()), ov = Scalar(one, x->shape()), hv = Scalar(half, x->shape());
    if (!cv || !ov || !hv) return fallback_->Run(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    const float* px = x->data<float>();
    float* py = y->mutable_data<float>();
    constexpr int64_t kChunk = 16384;
    const int64_t total = x->size(), chunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 1)
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t begin = i * kChunk;
      GeluChunk(px + begin, py + begin, std::min(kChunk, total - begin), *cv, *ov, *hv);
    }
    return absl::OkStatus();
  }

 private:
  int one_, half_;
  std::unique_ptr<Kernel> fallback_;
};

// An activation written out as nodes, computed by `row` (SwishRowTo for
// SiLU, MishRow for Mish); a SiLU chain ending with the Mul by u (`u` its
// input index, else -1) multiplies in the same pass (SwishMulRow). u must
// have x's shape; other shapes, types and empty tensors run the chain node
// by node.
class ActivationKernel : public Kernel {
 public:
  using Row = void (*)(const float* x, float* y, int64_t n);
  ActivationKernel(Row row, int u, std::unique_ptr<Kernel> fallback)
      : row_(row), u_(u), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->size() == 0) return fallback_->Run(ctx);
    const float* pu = nullptr;
    if (u_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* u, ctx.Input(u_));
      if (u->dtype() != pb::kFloat || u->shape() != x->shape()) return fallback_->Run(ctx);
      pu = u->data<float>();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    const float* px = x->data<float>();
    float* py = y->mutable_data<float>();
    constexpr int64_t kChunk = 16384;
    const int64_t total = x->size(), chunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 1)
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t begin = i * kChunk, n = std::min(kChunk, total - begin);
      if (pu != nullptr) {
        SwishMulRow(px + begin, pu + begin, py + begin, n);
      } else {
        row_(px + begin, py + begin, n);
      }
    }
    return absl::OkStatus();
  }

 private:
  Row row_;
  int u_;
  std::unique_ptr<Kernel> fallback_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTransformerChain(const FusionChain& chain, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeChainKernel(chain, Backend::kCpu, info));
  const std::string& head = chain.head().op_type();
  if (head == "MatMul" && chain.nodes.size() == 2 && info.bf16) {
    return MakeMatMulBias(chain.head(), info, OtherInput(chain, 1), std::move(fallback));
  }
  if (head == "MatMul" && chain.nodes.size() == 2) {
    return std::unique_ptr<Kernel>(
        new MatMulBiasKernel(OtherInput(chain, 1), IsSessionConstantInput(chain.head(), 1), std::move(fallback)));
  }
  if (head == "MatMul" && chain.nodes.size() >= 3 && chain.nodes.size() <= 6) {
    return MakeAttentionChain(chain, info, std::move(fallback));
  }
  if (head == "Add" && chain.nodes.size() == 2) return MakeAddLayerNormChain(chain, info, std::move(fallback));
  if (head == "ReduceMean") return MakeDecomposedLayerNormChain(chain, info, std::move(fallback));
  if (head == "Pow" || head == "Mul") return MakeRmsNormChain(chain, info, std::move(fallback));
  if (head == "Div" && chain.nodes.size() == 5) {
    return std::unique_ptr<Kernel>(new GeluKernel(OtherInput(chain, 2), OtherInput(chain, 4), std::move(fallback)));
  }
  if (head == "Sigmoid" && (chain.nodes.size() == 2 || chain.nodes.size() == 3)) {
    return std::unique_ptr<Kernel>(new ActivationKernel(
        SwishRowTo, chain.nodes.size() == 3 ? OtherInput(chain, 2) : -1, std::move(fallback)));
  }
  if (head == "Softplus" && chain.nodes.size() == 3) {
    return std::unique_ptr<Kernel>(new ActivationKernel(MishRow, -1, std::move(fallback)));
  }
  return absl::InternalError("not a transformer chain");
}

}  // namespace onnxkit::runner::cpu
