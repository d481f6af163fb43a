// Transformer chain kernels: MatMul + bias, erf GELU, SiLU and Mish, and
// element-wise chains (transformer.h).
#include "runner/cpu/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/erf_approx.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/parallel_for.h"
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
    ParallelFor(chunks, chunks > 1, [&](int64_t i) {
      const int64_t begin = i * kChunk;
      GeluChunk(px + begin, py + begin, std::min(kChunk, total - begin), *cv, *ov, *hv);
    });
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
    ParallelFor(chunks, chunks > 1, [&](int64_t i) {
      const int64_t begin = i * kChunk, n = std::min(kChunk, total - begin);
      if (pu != nullptr) {
        SwishMulRow(px + begin, pu + begin, py + begin, n);
      } else {
        row_(px + begin, py + begin, n);
      }
    });
    return absl::OkStatus();
  }

 private:
  Row row_;
  int u_;
  std::unique_ptr<Kernel> fallback_;
};

enum class EwOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kTanh,
  kErf,
  kSigmoid,
  kRelu,
  kNeg,
  kAbs,
  kSqrt,
  kReciprocal
};

std::optional<EwOp> EwOpOf(const std::string& op) {
  static const std::pair<const char*, EwOp> kOps[] = {{"Add", EwOp::kAdd},
                                                      {"Sub", EwOp::kSub},
                                                      {"Mul", EwOp::kMul},
                                                      {"Div", EwOp::kDiv},
                                                      {"Pow", EwOp::kPow},
                                                      {"Tanh", EwOp::kTanh},
                                                      {"Erf", EwOp::kErf},
                                                      {"Sigmoid", EwOp::kSigmoid},
                                                      {"Relu", EwOp::kRelu},
                                                      {"Neg", EwOp::kNeg},
                                                      {"Abs", EwOp::kAbs},
                                                      {"Sqrt", EwOp::kSqrt},
                                                      {"Reciprocal", EwOp::kReciprocal}};
  for (const auto& [name, e] : kOps) {
    if (op == name) return e;
  }
  return std::nullopt;
}

// v[i] = v[i] op b[i * step] (b[i * step] op v[i] unless `left`).
template <typename F>
inline void EwLoop(float* v, const float* b, int64_t step, int64_t n, bool left, F f) {
  if (step == 0) {
    const float c = b[0];
    if (left) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = f(v[i], c);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = f(c, v[i]);
    }
  } else if (left) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) v[i] = f(v[i], b[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) v[i] = f(b[i], v[i]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void EwBinaryRow(EwOp op, bool left, float* v,
                                                                              const float* b, int64_t step,
                                                                              int64_t n) {
  switch (op) {
    case EwOp::kAdd:
      EwLoop(v, b, step, n, left, [](float x, float y) { return x + y; });
      break;
    case EwOp::kSub:
      EwLoop(v, b, step, n, left, [](float x, float y) { return x - y; });
      break;
    case EwOp::kMul:
      EwLoop(v, b, step, n, left, [](float x, float y) { return x * y; });
      break;
    default:
      EwLoop(v, b, step, n, left, [](float x, float y) { return x / y; });
      break;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void EwUnaryRow(EwOp op, float* v, int64_t n) {
  switch (op) {
    case EwOp::kErf:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = ErfApprox(v[i]);
      break;
    case EwOp::kRelu:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] < 0.f ? 0.f : v[i];  // NaN stays NaN
      break;
    case EwOp::kNeg:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = -v[i];
      break;
    case EwOp::kAbs:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = std::fabs(v[i]);
      break;
    case EwOp::kSqrt:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = std::sqrt(v[i]);
      break;
    default:  // kReciprocal
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) v[i] = 1.f / v[i];
      break;
  }
}

// Runs an element-wise chain; see MakeElementwiseChain.
class ElementwiseChainKernel : public Kernel {
 public:
  struct Step {
    EwOp op;
    int operand = -1;  // the other operand's input index (binary ops)
    bool left = true;  // the chain's value is the left operand
  };

  // `a`, `b`: the head's inputs (b -1 for a unary head); `steps`: the
  // nodes after the head.
  ElementwiseChainKernel(EwOp head, int a, int b, std::vector<Step> steps, std::unique_ptr<Kernel> fallback)
      : head_(head), a_(a), b_(b), steps_(std::move(steps)), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(a_));
    const Tensor* b = nullptr;
    if (b_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(b, ctx.Input(b_));
    }
    // The chain's first value: the head's input of the chain's shape (its
    // largest operand).
    const Tensor* base = a;
    bool base_left = true;
    if (b != nullptr && b->size() > a->size()) base = b, base_left = false;
    const Tensor* first = b == nullptr ? nullptr : base == a ? b : a;
    const std::vector<int64_t>& shape = base->shape();
    // A Pow's base is its first input (an exponent of more values widens it).
    if (base->dtype() != pb::kFloat || base->size() == 0 || (head_ == EwOp::kPow && base != a)) {
      return fallback_->Run(ctx);
    }
    std::vector<Operand> operands;
    operands.reserve(steps_.size() + 1);
    if (first != nullptr) {
      std::optional<Operand> o = Classify(*first, shape, head_);
      if (!o) return fallback_->Run(ctx);
      operands.push_back(*o);
    }
    for (const Step& s : steps_) {
      if (s.operand < 0) continue;
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(s.operand));
      std::optional<Operand> o = Classify(*t, shape, s.op);
      if (!o) return fallback_->Run(ctx);
      operands.push_back(*o);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    const float* px = base->data<float>();
    float* py = y->mutable_data<float>();
    const int64_t total = base->size(), chunks = (total + kChunk - 1) / kChunk;
    const int64_t last = shape.empty() ? 1 : shape.back();
    ParallelFor(chunks, total >= 4 * kChunk, [&](int64_t c) {
      const int64_t begin = c * kChunk, n = std::min(kChunk, total - begin);
      float* v = py + begin;
      std::memcpy(v, px + begin, static_cast<size_t>(n) * sizeof(float));
      size_t k = 0;
      if (first != nullptr) {
        Apply(head_, base_left, operands[k++], v, begin, n, last);
      } else {
        ApplyUnary(head_, v, n);
      }
      for (const Step& s : steps_) {
        if (s.operand >= 0) {
          Apply(s.op, s.left, operands[k++], v, begin, n, last);
        } else {
          ApplyUnary(s.op, v, n);
        }
      }
    });
    return absl::OkStatus();
  }

 private:
  static constexpr int64_t kChunk = 4096;

  // An operand: one value (step 0), the chain's shape (step 1), or a row
  // along the last axis (`row`); `power` for a Pow's exponent (2 or 3).
  struct Operand {
    const float* data;
    int64_t step;
    bool row;
    int power;
  };

  static std::optional<Operand> Classify(const Tensor& t, const std::vector<int64_t>& shape, EwOp op) {
    if (t.dtype() != pb::kFloat || t.rank() > static_cast<int>(shape.size())) return std::nullopt;
    if (op == EwOp::kPow) {
      if (t.size() != 1) return std::nullopt;
      const float e = t.data<float>()[0];
      if (e != 2.f && e != 3.f) return std::nullopt;
      return Operand{t.data<float>(), 0, false, static_cast<int>(e)};
    }
    if (t.size() == 1) return Operand{t.data<float>(), 0, false, 0};
    if (t.shape() == shape) return Operand{t.data<float>(), 1, false, 0};
    // A row: every dim 1 but the last, which is the chain's last dim.
    for (int i = 0; i + 1 < t.rank(); ++i) {
      if (t.dim(i) != 1) return std::nullopt;
    }
    if (t.rank() >= 1 && !shape.empty() && t.dim(t.rank() - 1) == shape.back()) {
      return Operand{t.data<float>(), 1, true, 0};
    }
    return std::nullopt;
  }

  static void ApplyUnary(EwOp op, float* v, int64_t n) {
    if (op == EwOp::kTanh) {
      TanhRow(v, n);
    } else if (op == EwOp::kSigmoid) {
      SigmoidRow(v, n);
    } else {
      EwUnaryRow(op, v, n);
    }
  }

  // v (values [begin, begin + n) of the chain) op the operand.
  static void Apply(EwOp op, bool left, const Operand& o, float* v, int64_t begin, int64_t n, int64_t last) {
    if (op == EwOp::kPow) {
      if (o.power == 2) {
        EwBinaryRow(EwOp::kMul, true, v, v, 1, n);
      } else {
        CubeRow(v, v, n);
      }
    } else if (!o.row) {
      EwBinaryRow(op, left, v, o.step == 0 ? o.data : o.data + begin, o.step, n);
    } else {
      for (int64_t pos = begin; pos < begin + n;) {
        const int64_t col = pos % last, len = std::min(last - col, begin + n - pos);
        EwBinaryRow(op, left, v + (pos - begin), o.data + col, 1, len);
        pos += len;
      }
    }
  }

  EwOp head_;
  int a_, b_;
  std::vector<Step> steps_;
  std::unique_ptr<Kernel> fallback_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTransformerChain(const FusionChain& chain, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeChainKernel(chain, Backend::kCpu, info));
  const std::string& head = chain.head().op_type();
  if (head == "MatMul" && chain.nodes.size() == 1 && chain.extra_inputs.size() == 3) {
    return MakePackedMatMulChain(chain, info, std::move(fallback));
  }
  if (head == "Gather" && chain.nodes.size() == 1 && chain.extra_inputs.size() == 3 &&
      chain.packed_bits != 0) {
    return MakePackedGatherChain(chain, std::move(fallback));
  }
  if (head == "MatMul" && chain.nodes.size() == 2 && info.bf16) {
    return MakeMatMulBias(chain.head(), info, OtherInput(chain, 1), std::move(fallback));
  }
  if (head == "MatMul" && chain.nodes.size() == 2) {
    return std::unique_ptr<Kernel>(
        new MatMulBiasKernel(OtherInput(chain, 1), IsSessionConstantInput(chain.head(), 1), std::move(fallback)));
  }
  if (head == "MatMulInteger" && chain.nodes.size() == 3)
    return MakeMatMulIntegerScaleChain(chain, std::move(fallback));
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

absl::StatusOr<std::unique_ptr<Kernel>> MakeElementwiseChain(const FusionChain& chain,
                                                             const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeChainKernel(chain, Backend::kCpu, info));
  std::optional<EwOp> head = EwOpOf(chain.head().op_type());
  if (!head) return absl::InternalError("not an element-wise chain");
  const bool binary = chain.head().num_inputs() == 2;
  std::vector<ElementwiseChainKernel::Step> steps;
  for (size_t k = 1; k < chain.nodes.size(); ++k) {
    std::optional<EwOp> op = EwOpOf(chain.nodes[k]->op_type());
    if (!op) return absl::InternalError("not an element-wise chain");
    ElementwiseChainKernel::Step s{*op};
    if (chain.nodes[k]->num_inputs() == 2) {
      s.operand = OtherInput(chain, k);
      s.left = chain.chained_input[k] == 0;
    }
    steps.push_back(s);
  }
  return std::unique_ptr<Kernel>(new ElementwiseChainKernel(*head, chain.input_offset[0],
                                                            binary ? chain.input_offset[0] + 1 : -1,
                                                            std::move(steps), std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
