// Reference kernels: the gated and recurrent blocks of sequence models.
//
//   SwiGLU (opset 28)               Y = Swish(A, alpha) * B, numpy broadcasting;
//                                   Swish(x) = x * sigmoid(alpha * x).
//   CausalConvWithState (opset 27)  depthwise causal 1-D convolution of input
//                                   [B, C, L] with weight [C, 1, K] and
//                                   optional bias [C], left-padded by
//                                   past_state [B, C, K - 1] (zeros when
//                                   absent); present_state holds the last
//                                   K - 1 steps of the padded input. Optional
//                                   activation "silu" (alias "swish").
//   LinearAttention (opset 27)      the recurrent form of linear attention
//                                   over 3-D inputs [B, T, heads * head_size]
//                                   with a state [B, kv_heads, dk, dv] per
//                                   kv head, updated at each step t by
//                                     linear       S += k v^T
//                                     gated        S = exp(g) S + k v^T
//                                     delta        S += k (beta (v - S^T k))^T
//                                     gated_delta  S = exp(g) S, then delta
//                                   and read by o = scale * S^T q (query head
//                                   h reads kv head h / (q_heads / kv_heads)).
//                                   The decay g is per key row [B, T,
//                                   kv_heads * dk] or per head [B, T,
//                                   kv_heads]; beta is per head [B, T,
//                                   kv_heads] or shared [B, T, 1].
//
// Values are computed in double; results that the ops' function bodies hold
// in the input type (Swish in SwiGLU, the convolution before the activation)
// are rounded to it before the next step.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/elementwise.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

bool IsFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 11 || dtype == 16; }

// The float types of CausalConvWithState and LinearAttention.
bool IsSequenceFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 16; }

double Sigmoid(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  double e = std::exp(x);
  return e / (1 + e);
}

// Stores `values` (count = y's size) into the float tensor y.
void StoreDoubles(Tensor& y, const double* values) {
  (void)VisitFloat(y.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    T* p = y.mutable_data<T>();
    for (int64_t j = 0; j < y.size(); ++j) p[j] = static_cast<T>(static_cast<ComputeT<T>>(values[j]));
    return absl::OkStatus();
  });
}

// --- SwiGLU ---

class SwiGluKernel : public Kernel {
 public:
  explicit SwiGluKernel(double alpha) : alpha_(alpha) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (!IsFloat(a->dtype()) || b->dtype() != a->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("SwiGLU A ", DescribeTensor(*a), " and B ",
                                                     DescribeTensor(*b), " must be one float type"));
    }
    std::vector<std::vector<int64_t>> shapes = {a->shape(), b->shape()};
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, a->dtype(), out_shape));
    std::vector<double> av = FloatsAsDoubles(*a), bv = FloatsAsDoubles(*b);
    const int32_t dtype = a->dtype();
    return VisitFloat(dtype, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      T* p = y->mutable_data<T>();
      ForEachBroadcast2(out_shape, a->shape(), b->shape(), [&](int64_t o, int64_t ia, int64_t ib) {
        double x = av[static_cast<size_t>(ia)];
        double gate = RoundToFloatType(dtype, x * Sigmoid(alpha_ * x));
        p[o] = static_cast<T>(static_cast<ComputeT<T>>(gate * bv[static_cast<size_t>(ib)]));
      });
      return absl::OkStatus();
    });
  }

 private:
  double alpha_;
};

// --- CausalConvWithState ---

class CausalConvKernel : public Kernel {
 public:
  explicit CausalConvKernel(bool silu) : silu_(silu) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.OptionalInput(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* past, ctx.OptionalInput(3));
    const int32_t dtype = x->dtype();
    for (const Tensor* t : {x, w, bias, past}) {
      if (t != nullptr && (!IsSequenceFloat(t->dtype()) || t->dtype() != dtype)) {
        return absl::InvalidArgumentError(absl::StrCat("CausalConvWithState input ", DescribeTensor(*t),
                                                       " must be float, float16 or bfloat16 like input ",
                                                       DescribeTensor(*x)));
      }
    }
    if (x->rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat("CausalConvWithState input ", DescribeTensor(*x),
                                                     " must be 3-D [batch, channels, length]"));
    }
    const int64_t batch = x->dim(0), channels = x->dim(1), len = x->dim(2);
    if (w->rank() != 3 || w->dim(0) != channels || w->dim(1) != 1 || w->dim(2) < 1) {
      return absl::InvalidArgumentError(absl::StrCat("CausalConvWithState weight ", DescribeTensor(*w),
                                                     " must be [", channels,
                                                     ", 1, kernel_size] with kernel_size >= 1"));
    }
    const int64_t k = w->dim(2), state_len = k - 1;
    if (bias != nullptr && bias->shape() != std::vector<int64_t>{channels}) {
      return absl::InvalidArgumentError(
          absl::StrCat("CausalConvWithState bias ", DescribeTensor(*bias), " must be [", channels, "]"));
    }
    if (past != nullptr && past->shape() != std::vector<int64_t>{batch, channels, state_len}) {
      return absl::InvalidArgumentError(absl::StrCat("CausalConvWithState past_state ", DescribeTensor(*past),
                                                     " must be [", batch, ", ", channels, ", ", state_len,
                                                     "]"));
    }
    std::optional<int64_t> padded_len = CheckedAdd(len, state_len);
    std::optional<int64_t> rows = CheckedMul(batch, channels);
    std::optional<int64_t> padded_count = rows && padded_len ? CheckedMul(*rows, *padded_len) : std::nullopt;
    if (!padded_count) {
      return absl::InvalidArgumentError(absl::StrCat("CausalConvWithState input ", DescribeTensor(*x),
                                                     " with kernel size ", k, " is too large"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, dtype, x->shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * present,
                             ctx.AllocateOutputUninitialized(1, dtype, {batch, channels, state_len}));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor padded_t, Scratch<double>(*padded_count));
    double* padded = padded_t.mutable_data<double>();
    std::vector<double> xv = FloatsAsDoubles(*x), wv = FloatsAsDoubles(*w);
    std::vector<double> bv = bias != nullptr ? FloatsAsDoubles(*bias) : std::vector<double>();
    std::vector<double> pv = past != nullptr ? FloatsAsDoubles(*past) : std::vector<double>();
    // padded[row] = past_state[row] (or zeros) then input[row].
    for (int64_t r = 0; r < *rows; ++r) {
      double* dst = padded + r * *padded_len;
      for (int64_t i = 0; i < state_len; ++i)
        dst[i] = pv.empty() ? 0.0 : pv[static_cast<size_t>(r * state_len + i)];
      for (int64_t i = 0; i < len; ++i) dst[state_len + i] = xv[static_cast<size_t>(r * len + i)];
    }
    std::vector<double> out(static_cast<size_t>(x->size())), state(static_cast<size_t>(present->size()));
    for (int64_t r = 0; r < *rows; ++r) {
      const int64_t c = r % channels;
      const double* src = padded + r * *padded_len;
      const double* wc = wv.data() + c * k;
      for (int64_t t = 0; t < len; ++t) {
        double acc = bv.empty() ? 0.0 : bv[static_cast<size_t>(c)];
        for (int64_t j = 0; j < k; ++j) acc += wc[j] * src[t + j];
        acc = RoundToFloatType(dtype, acc);
        if (silu_) acc *= Sigmoid(acc);
        out[static_cast<size_t>(r * len + t)] = acc;
      }
      for (int64_t i = 0; i < state_len; ++i) state[static_cast<size_t>(r * state_len + i)] = src[len + i];
    }
    StoreDoubles(*y, out.data());
    StoreDoubles(*present, state.data());
    return absl::OkStatus();
  }

 private:
  bool silu_;
};

// --- LinearAttention ---

enum class UpdateRule { kLinear, kGated, kDelta, kGatedDelta };

struct LinearAttentionAttrs {
  int64_t q_heads = 0, kv_heads = 0;
  double scale = 0;  // 0: 1 / sqrt(dk)
  UpdateRule rule = UpdateRule::kGatedDelta;
};

class LinearAttentionKernel : public Kernel {
 public:
  explicit LinearAttentionKernel(LinearAttentionAttrs a) : a_(a) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[6] = {};
    for (int i = 0; i < 6; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    }
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
    const Tensor *past = in[3], *decay = in[4], *beta = in[5];
    const bool gated = a_.rule == UpdateRule::kGated || a_.rule == UpdateRule::kGatedDelta;
    const bool delta = a_.rule == UpdateRule::kDelta || a_.rule == UpdateRule::kGatedDelta;
    if (gated && decay == nullptr) {
      return absl::InvalidArgumentError(
          "LinearAttention update_rule gated and gated_delta need the decay input");
    }
    if (delta && beta == nullptr) {
      return absl::InvalidArgumentError(
          "LinearAttention update_rule delta and gated_delta need the beta input");
    }
    if (!gated) decay = nullptr;
    if (!delta) beta = nullptr;
    const int32_t dtype = q.dtype();
    for (const Tensor* t : {in[0], in[1], in[2], decay, beta}) {
      if (t != nullptr && (!IsSequenceFloat(t->dtype()) || t->dtype() != dtype)) {
        return absl::InvalidArgumentError(absl::StrCat("LinearAttention input ", DescribeTensor(*t),
                                                       " must be float, float16 or bfloat16 like query ",
                                                       DescribeTensor(q)));
      }
    }
    if (past != nullptr && !IsSequenceFloat(past->dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("LinearAttention past_state ", DescribeTensor(*past),
                                                     " must be float, float16 or bfloat16"));
    }
    const int64_t hq = a_.q_heads, hkv = a_.kv_heads;
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat("LinearAttention query ", DescribeTensor(q), ", key ",
                                                     DescribeTensor(k), " and value ", DescribeTensor(v),
                                                     " must be 3-D [batch, sequence, heads * head_size]"));
    }
    const int64_t batch = q.dim(0), seq = q.dim(1);
    const int64_t dk = q.dim(2) / hq, dv = v.dim(2) / hkv;
    std::optional<int64_t> key_width = CheckedMul(hkv, dk);
    std::optional<int64_t> out_width = CheckedMul(hq, dv);
    if (k.dim(0) != batch || v.dim(0) != batch || k.dim(1) != seq || v.dim(1) != seq || q.dim(2) % hq != 0 ||
        v.dim(2) % hkv != 0 || !key_width || k.dim(2) != *key_width || !out_width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LinearAttention shapes do not fit: query ", DescribeTensor(q), ", key ", DescribeTensor(k),
          ", value ", DescribeTensor(v), " with q_num_heads ", hq, " and kv_num_heads ", hkv,
          " (need one batch and sequence length, query and key of one head size, value divisible by kv "
          "heads)"));
    }
    // Decay per key row or per head; beta per head or shared.
    int64_t decay_width = 0, beta_width = 0;
    if (decay != nullptr) {
      decay_width = decay->rank() == 3 ? decay->dim(2) : -1;
      if (decay->rank() != 3 || decay->dim(0) != batch || decay->dim(1) != seq ||
          (decay_width != *key_width && decay_width != hkv)) {
        return absl::InvalidArgumentError(absl::StrCat("LinearAttention decay ", DescribeTensor(*decay),
                                                       " must be [", batch, ", ", seq, ", ", *key_width,
                                                       "] or [", batch, ", ", seq, ", ", hkv, "]"));
      }
    }
    if (beta != nullptr) {
      beta_width = beta->rank() == 3 ? beta->dim(2) : -1;
      if (beta->rank() != 3 || beta->dim(0) != batch || beta->dim(1) != seq ||
          (beta_width != hkv && beta_width != 1)) {
        return absl::InvalidArgumentError(absl::StrCat("LinearAttention beta ", DescribeTensor(*beta),
                                                       " must be [", batch, ", ", seq, ", ", hkv, "] or [",
                                                       batch, ", ", seq, ", 1]"));
      }
    }
    const std::vector<int64_t> state_shape = {batch, hkv, dk, dv};
    if (past != nullptr && past->shape() != state_shape) {
      return absl::InvalidArgumentError(absl::StrCat("LinearAttention past_state ", DescribeTensor(*past),
                                                     " must be ", ShapeString(state_shape)));
    }
    std::optional<int64_t> state_count = CheckedElementCount(state_shape);
    if (!state_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("LinearAttention state ", ShapeString(state_shape), " is too large"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, dtype, {batch, seq, *out_width}));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * present, ctx.AllocateOutputUninitialized(
                                                   1, past != nullptr ? past->dtype() : dtype, state_shape));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor state_t, Scratch<double>(*state_count));
    double* state = state_t.mutable_data<double>();
    if (past != nullptr) {
      std::vector<double> pv = FloatsAsDoubles(*past);
      std::copy(pv.begin(), pv.end(), state);
    }
    std::vector<double> qv = FloatsAsDoubles(q), kv = FloatsAsDoubles(k), vv = FloatsAsDoubles(v);
    std::vector<double> gv = decay != nullptr ? FloatsAsDoubles(*decay) : std::vector<double>();
    std::vector<double> bv = beta != nullptr ? FloatsAsDoubles(*beta) : std::vector<double>();
    std::vector<double> out(static_cast<size_t>(y->size()));
    std::vector<double> write(static_cast<size_t>(dv));
    const double scale = a_.scale != 0 ? a_.scale : 1.0 / std::sqrt(static_cast<double>(dk));
    const int64_t group = hq / hkv;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t bt = b * seq + t;
        for (int64_t g = 0; g < hkv; ++g) {
          double* s = state + (b * hkv + g) * dk * dv;
          const double* kt = kv.data() + (bt * hkv + g) * dk;
          const double* vt = vv.data() + (bt * hkv + g) * dv;
          if (decay != nullptr) {
            for (int64_t i = 0; i < dk; ++i) {
              const int64_t gi = decay_width == hkv ? bt * hkv + g : (bt * hkv + g) * dk + i;
              const double factor = std::exp(gv[static_cast<size_t>(gi)]);
              for (int64_t j = 0; j < dv; ++j) s[i * dv + j] *= factor;
            }
          }
          // The row written against k: v, or for the delta rules
          // beta * (v - S^T k).
          for (int64_t j = 0; j < dv; ++j) {
            double w = vt[j];
            if (beta != nullptr) {
              double retrieved = 0;
              for (int64_t i = 0; i < dk; ++i) retrieved += s[i * dv + j] * kt[i];
              w = bv[static_cast<size_t>(beta_width == 1 ? bt : bt * hkv + g)] * (w - retrieved);
            }
            write[static_cast<size_t>(j)] = w;
          }
          for (int64_t i = 0; i < dk; ++i) {
            for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += kt[i] * write[static_cast<size_t>(j)];
          }
        }
        for (int64_t h = 0; h < hq; ++h) {
          const double* s = state + (b * hkv + h / group) * dk * dv;
          const double* qt = qv.data() + (bt * hq + h) * dk;
          double* o = out.data() + (bt * hq + h) * dv;
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t i = 0; i < dk; ++i) acc += qt[i] * s[i * dv + j];
            o[j] = scale * acc;
          }
        }
      }
    }
    StoreDoubles(*y, out.data());
    StoreDoubles(*present, state);
    return absl::OkStatus();
  }

 private:
  LinearAttentionAttrs a_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSwiGlu(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new SwiGluKernel(AttrFloat(node, "alpha", 1.0f)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeCausalConvWithState(const ir::Node& node, const KernelInfo&) {
  std::string activation = AttrString(node, "activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish") {
    return absl::InvalidArgumentError(
        absl::StrCat("CausalConvWithState activation must be none, silu or swish, got '", activation, "'"));
  }
  return std::unique_ptr<Kernel>(new CausalConvKernel(activation != "none"));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLinearAttention(const ir::Node& node, const KernelInfo&) {
  LinearAttentionAttrs a;
  std::optional<int64_t> q_heads = node.GetInt("q_num_heads"), kv_heads = node.GetInt("kv_num_heads");
  if (!q_heads || !kv_heads) {
    return absl::InvalidArgumentError("LinearAttention needs the attributes q_num_heads and kv_num_heads");
  }
  a.q_heads = *q_heads;
  a.kv_heads = *kv_heads;
  if (a.q_heads < 1 || a.kv_heads < 1 || a.q_heads % a.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearAttention q_num_heads ", a.q_heads, " and kv_num_heads ", a.kv_heads,
                     " must be positive, q_num_heads a multiple of kv_num_heads"));
  }
  int64_t chunk_size = AttrInt(node, "chunk_size", 64);
  if (chunk_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearAttention chunk_size must be positive, got ", chunk_size));
  }
  a.scale = AttrFloat(node, "scale", 0.0f);
  if (!std::isfinite(a.scale)) {
    return absl::InvalidArgumentError(absl::StrCat("LinearAttention scale must be finite, got ", a.scale));
  }
  std::string rule = AttrString(node, "update_rule", "gated_delta");
  if (rule == "linear") {
    a.rule = UpdateRule::kLinear;
  } else if (rule == "gated") {
    a.rule = UpdateRule::kGated;
  } else if (rule == "delta") {
    a.rule = UpdateRule::kDelta;
  } else if (rule == "gated_delta") {
    a.rule = UpdateRule::kGatedDelta;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearAttention update_rule must be linear, gated, delta or gated_delta, got '", rule, "'"));
  }
  return std::unique_ptr<Kernel>(new LinearAttentionKernel(a));
}

}  // namespace onnxkit::runner::reference
