// Reference kernels: Attention (opset 23+: 3-D or 4-D inputs, grouped-query
// heads, KV cache, boolean or additive masks, causal and local-window masks
// aligned to the cache offset, nonpad_kv_seqlen, softcap, the four
// qk_matmul_output modes; a fully masked row attends to nothing),
// RotaryEmbedding and ai.onnx.preview's FlexAttention (score_mod and
// prob_mod graphs, grouped-query heads, softmax_precision).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool IsFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 11 || dtype == 16; }

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> out;
  (void)VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    out.resize(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) {
      out[static_cast<size_t>(i)] = static_cast<double>(static_cast<ComputeT<T>>(t.data<T>()[i]));
    }
    return absl::OkStatus();
  });
  return out;
}

absl::Status Store(KernelContext& ctx, int i, int32_t dtype, std::vector<int64_t> shape, const std::vector<double>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i, dtype, std::move(shape)));
  return VisitFloat(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (size_t j = 0; j < v.size(); ++j) t->mutable_data<T>()[j] = static_cast<T>(v[j]);
    return absl::OkStatus();
  });
}

// A [B, H, S, D] view of Q, K or V given 4-D, or 3-D [B, S, H * D] with
// `heads` heads, as doubles in [B, H, S, D] order.
absl::StatusOr<std::vector<double>> AsBhsd(const Tensor& t, int64_t heads, std::string_view name,
                                           std::vector<int64_t>* dims) {
  if (t.rank() == 4) {
    *dims = t.shape();
    return Doubles(t);
  }
  if (t.rank() != 3 || heads < 1 || t.dim(2) % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(name), " ", DescribeTensor(t),
                                                   " must be 4-D, or 3-D with a hidden size divisible by ", heads,
                                                   " heads"));
  }
  int64_t b = t.dim(0), s = t.dim(1), d = t.dim(2) / heads;
  *dims = {b, heads, s, d};
  std::vector<double> flat = Doubles(t), out(flat.size());
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t si = 0; si < s; ++si) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t k = 0; k < d; ++k) {
          out[static_cast<size_t>(((bi * heads + h) * s + si) * d + k)] =
              flat[static_cast<size_t>(((bi * s + si) * heads + h) * d + k)];
        }
      }
    }
  }
  return out;
}

struct AttentionAttrs {
  bool is_causal = false;
  int64_t q_heads = 0, kv_heads = 0;  // 0: absent
  int64_t mode = 0;                   // qk_matmul_output_mode
  std::optional<double> scale;
  double softcap = 0;
  int64_t left_window = -1, right_window = -1;
};

class AttentionKernel : public Kernel {
 public:
  explicit AttentionKernel(AttentionAttrs a) : a_(a) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[7] = {};
    for (int i = 0; i < 7; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    }
    const Tensor &q_t = *in[0], &k_t = *in[1], &v_t = *in[2];
    for (const Tensor* t : {in[0], in[1], in[2], in[4], in[5]}) {
      if (t != nullptr && !IsFloat(t->dtype())) {
        return absl::UnimplementedError(absl::StrCat("Attention input ", DescribeTensor(*t), " is not a float tensor"));
      }
    }
    if (q_t.rank() != k_t.rank() || q_t.rank() != v_t.rank()) {
      return absl::InvalidArgumentError("Attention Q, K and V must have one rank");
    }
    if (q_t.rank() == 3 && (a_.q_heads < 1 || a_.kv_heads < 1)) {
      return absl::InvalidArgumentError("3-D Attention inputs need q_num_heads and kv_num_heads");
    }
    std::vector<int64_t> qd, kd, vd;
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> q, AsBhsd(q_t, a_.q_heads, "Q", &qd));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> k, AsBhsd(k_t, a_.kv_heads, "K", &kd));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> v, AsBhsd(v_t, a_.kv_heads, "V", &vd));
    int64_t batch = qd[0], hq = qd[1], sq = qd[2], dk = qd[3];
    int64_t hkv = kd[1], skv = kd[2], dv = vd[3];
    if (kd[0] != batch || vd[0] != batch || kd[3] != dk || vd[1] != hkv || vd[2] != skv || hkv < 1 || hq % hkv != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Attention shapes do not fit: Q ", ShapeString(qd), ", K ",
                                                     ShapeString(kd), ", V ", ShapeString(vd),
                                                     " (need one batch, one head size for Q and K, and q heads a "
                                                     "multiple of kv heads)"));
    }
    // KV cache: present = concat(past, new) along the sequence.
    int64_t past = 0;
    if ((in[4] == nullptr) != (in[5] == nullptr)) {
      return absl::InvalidArgumentError("past_key and past_value must be given together");
    }
    if (in[4] != nullptr) {
      past = in[4]->rank() == 4 ? in[4]->dim(2) : -1;
      if (in[4]->shape() != std::vector<int64_t>{batch, hkv, past, dk} ||
          in[5]->shape() != std::vector<int64_t>{batch, hkv, past, dv}) {
        return absl::InvalidArgumentError(absl::StrCat("past_key ", DescribeTensor(*in[4]), " and past_value ",
                                                       DescribeTensor(*in[5]), " do not fit K and V"));
      }
    }
    int64_t total = past + skv;
    std::vector<double> pk = Concat(in[4], k, batch * hkv, past, skv, dk);
    std::vector<double> pv = Concat(in[5], v, batch * hkv, past, skv, dv);
    std::vector<int64_t> nonpad;
    if (in[6] != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(nonpad, ReadInt64s(*in[6]));
      if (static_cast<int64_t>(nonpad.size()) != batch) {
        return absl::InvalidArgumentError(absl::StrCat("nonpad_kv_seqlen must have ", batch, " values"));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(MaskView mask, ResolveMask(in[3], batch, hq, sq, total));
    double scale = a_.scale ? *a_.scale : 1.0 / std::sqrt(static_cast<double>(dk));
    std::vector<double> y(static_cast<size_t>(batch * hq * sq * dv), 0);
    int64_t mode = ctx.OutputRequested(3) ? a_.mode : -1;  // -1: qk_matmul_output not wanted
    std::vector<double> qk_out(mode >= 0 ? static_cast<size_t>(batch * hq * sq * total) : 0);
    std::vector<double> scores(static_cast<size_t>(total)), bias(static_cast<size_t>(total));
    int64_t reps = hq / hkv;
    for (int64_t b = 0; b < batch; ++b) {
      // Absolute position of query 0: the cache length, else (external
      // cache) the valid keys before this query block.
      int64_t offset = past > 0 || nonpad.empty() ? past : nonpad[static_cast<size_t>(b)] - sq;
      for (int64_t h = 0; h < hq; ++h) {
        const double* kh = pk.data() + (b * hkv + h / reps) * total * dk;
        const double* vh = pv.data() + (b * hkv + h / reps) * total * dv;
        for (int64_t i = 0; i < sq; ++i) {
          const double* qi = q.data() + ((b * hq + h) * sq + i) * dk;
          double* qk_row = mode >= 0 ? qk_out.data() + ((b * hq + h) * sq + i) * total : nullptr;
          double bias_max = kNegInf;
          for (int64_t j = 0; j < total; ++j) {
            double s = 0;
            for (int64_t c = 0; c < dk; ++c) s += qi[c] * kh[j * dk + c];
            s *= scale;
            if (mode == 0) qk_row[j] = s;
            if (a_.softcap > 0) s = a_.softcap * std::tanh(s / a_.softcap);
            if (mode == 1) qk_row[j] = s;
            double bv = Bias(mask, b, h, i, j, offset, nonpad);
            bias[static_cast<size_t>(j)] = bv;
            bias_max = std::max(bias_max, bv);
            scores[static_cast<size_t>(j)] = s + bv;
            if (mode == 2) qk_row[j] = s + bv;
          }
          // Softmax over the row; a row whose bias masks every key gets zeros.
          double mx = kNegInf, sum = 0;
          for (double s : scores) mx = std::max(mx, s);
          for (double& s : scores) {
            s = bias_max == kNegInf || std::isinf(mx) ? 0 : std::exp(s - mx);
            sum += s;
          }
          for (int64_t j = 0; j < total; ++j) {
            double p = sum > 0 ? scores[static_cast<size_t>(j)] / sum : 0;
            if (bias_max == kNegInf) p = 0;
            if (mode == 3) qk_row[j] = p;
            double* yi = y.data() + ((b * hq + h) * sq + i) * dv;
            for (int64_t c = 0; c < dv; ++c) yi[c] += p * vh[j * dv + c];
          }
        }
      }
    }
    std::vector<int64_t> y_shape = {batch, hq, sq, dv};
    if (q_t.rank() == 3) {
      std::vector<double> t(y.size());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < hq; ++h) {
          for (int64_t i = 0; i < sq; ++i) {
            for (int64_t c = 0; c < dv; ++c) {
              t[static_cast<size_t>(((b * sq + i) * hq + h) * dv + c)] = y[static_cast<size_t>(((b * hq + h) * sq + i) * dv + c)];
            }
          }
        }
      }
      y = std::move(t);
      y_shape = {batch, sq, hq * dv};
    }
    ONNXKIT_RETURN_IF_ERROR(Store(ctx, 0, q_t.dtype(), y_shape, y));
    if (ctx.OutputRequested(1)) ONNXKIT_RETURN_IF_ERROR(Store(ctx, 1, k_t.dtype(), {batch, hkv, total, dk}, pk));
    if (ctx.OutputRequested(2)) ONNXKIT_RETURN_IF_ERROR(Store(ctx, 2, v_t.dtype(), {batch, hkv, total, dv}, pv));
    if (ctx.OutputRequested(3)) ONNXKIT_RETURN_IF_ERROR(Store(ctx, 3, q_t.dtype(), {batch, hq, sq, total}, qk_out));
    return absl::OkStatus();
  }

 private:
  // attn_mask broadcast (right-aligned) onto [B, H, Sq, total]; its last dim
  // may be shorter than total (the missing keys are masked).
  struct MaskView {
    std::vector<double> values;  // additive; bool masks as 0 / -inf
    int64_t dims[4] = {1, 1, 1, 1};
    bool present = false;
  };

  static absl::StatusOr<MaskView> ResolveMask(const Tensor* m, int64_t batch, int64_t hq, int64_t sq, int64_t total) {
    MaskView view;
    if (m == nullptr) return view;
    if (m->rank() < 1 || m->rank() > 4) {
      return absl::InvalidArgumentError(absl::StrCat("attn_mask ", DescribeTensor(*m), " must have rank 1 to 4"));
    }
    view.present = true;
    for (int i = 0; i < m->rank(); ++i) view.dims[4 - m->rank() + i] = m->dim(i);
    int64_t want[4] = {batch, hq, sq, total};
    for (int i = 0; i < 4; ++i) {
      bool ok = i == 3 ? view.dims[i] <= total : (view.dims[i] == 1 || view.dims[i] == want[i]);
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat("attn_mask ", DescribeTensor(*m), " does not broadcast to ",
                                                       ShapeString(want)));
      }
    }
    view.values = Doubles(*m);
    if (m->dtype() == 9) {
      for (double& v : view.values) v = v != 0 ? 0 : kNegInf;
    }
    return view;
  }

  double Bias(const MaskView& m, int64_t b, int64_t h, int64_t i, int64_t j, int64_t offset,
              const std::vector<int64_t>& nonpad) const {
    double bias = 0;
    if (m.present) {
      if (j >= m.dims[3]) return kNegInf;
      int64_t idx = (((m.dims[0] == 1 ? 0 : b) * m.dims[1] + (m.dims[1] == 1 ? 0 : h)) * m.dims[2] +
                     (m.dims[2] == 1 ? 0 : i)) * m.dims[3] + j;
      bias = m.values[static_cast<size_t>(idx)];
    }
    int64_t pos = i + offset;  // absolute position of the query
    if (a_.is_causal && j > pos) return kNegInf;
    if (a_.left_window >= 0 && pos - j > a_.left_window) return kNegInf;
    if (a_.right_window >= 0 && j - pos > a_.right_window) return kNegInf;
    if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) return kNegInf;
    return bias;
  }

  // [groups, past + cur, d]: the past tensor (if any) then the new values.
  static std::vector<double> Concat(const Tensor* past_t, const std::vector<double>& cur, int64_t groups,
                                    int64_t past, int64_t len, int64_t d) {
    if (past_t == nullptr) return cur;
    std::vector<double> p = Doubles(*past_t), out(static_cast<size_t>(groups * (past + len) * d));
    for (int64_t g = 0; g < groups; ++g) {
      std::copy(p.begin() + g * past * d, p.begin() + (g + 1) * past * d, out.begin() + g * (past + len) * d);
      std::copy(cur.begin() + g * len * d, cur.begin() + (g + 1) * len * d, out.begin() + (g * (past + len) + past) * d);
    }
    return out;
  }

  AttentionAttrs a_;
};

class RotaryKernel : public Kernel {
 public:
  RotaryKernel(bool interleaved, int64_t num_heads, int64_t rot_dim)
      : interleaved_(interleaved), num_heads_(num_heads), rot_dim_(rot_dim) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cos_t, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* sin_t, ctx.Input(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* pos_t, ctx.OptionalInput(3));
    if (!IsFloat(x->dtype()) || cos_t->dtype() != x->dtype() || sin_t->dtype() != x->dtype()) {
      return absl::InvalidArgumentError("RotaryEmbedding X, cos_cache and sin_cache must be one float type");
    }
    // Work in [B, S, H, D] as the spec describes; 4-D X is [B, H, S, D].
    std::optional<RotaryDims> dims = RotaryDimsOf(*x, num_heads_);
    if (!dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("X ", DescribeTensor(*x), " must be 4-D, or 3-D with num_heads dividing its hidden size"));
    }
    const int64_t b = dims->b, s = dims->s, h = dims->h, d = dims->d;
    int64_t rot = rot_dim_ > 0 ? rot_dim_ : d;
    if (rot > d || rot % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("rotary_embedding_dim ", rot, " must be even and at most ", d));
    }
    int64_t half = rot / 2;
    std::vector<int64_t> positions;
    if (pos_t != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(positions, ReadInt64s(*pos_t));
      if (pos_t->shape() != std::vector<int64_t>{b, s} || cos_t->rank() != 2 || cos_t->dim(1) != half ||
          sin_t->shape() != cos_t->shape()) {
        return absl::InvalidArgumentError(absl::StrCat("position_ids ", DescribeTensor(*pos_t), " must be [", b, ", ",
                                                       s, "] and the caches [max_position, ", half, "]"));
      }
      for (int64_t p : positions) {
        if (p < 0 || p >= cos_t->dim(0)) {
          return absl::InvalidArgumentError(absl::StrCat("position id ", p, " is outside the cache of ", cos_t->dim(0)));
        }
      }
    } else if (cos_t->shape() != std::vector<int64_t>{b, s, half} || sin_t->shape() != cos_t->shape()) {
      return absl::InvalidArgumentError(absl::StrCat("without position_ids the caches must be [", b, ", ", s, ", ",
                                                     half, "], got ", DescribeTensor(*cos_t)));
    }
    std::vector<double> xv = Doubles(*x), cv = Doubles(*cos_t), sv = Doubles(*sin_t), y = xv;
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t si = 0; si < s; ++si) {
        int64_t row = positions.empty() ? bi * s + si : positions[static_cast<size_t>(bi * s + si)];
        const double* c = cv.data() + row * half;
        const double* sn = sv.data() + row * half;
        for (int64_t hi = 0; hi < h; ++hi) {
          int64_t base = x->rank() == 4 ? ((bi * h + hi) * s + si) * d : ((bi * s + si) * h + hi) * d;
          for (int64_t k = 0; k < half; ++k) {
            int64_t i1 = base + (interleaved_ ? 2 * k : k), i2 = base + (interleaved_ ? 2 * k + 1 : k + half);
            double x1 = xv[static_cast<size_t>(i1)], x2 = xv[static_cast<size_t>(i2)];
            y[static_cast<size_t>(i1)] = c[k] * x1 - sn[k] * x2;
            y[static_cast<size_t>(i2)] = sn[k] * x1 + c[k] * x2;
          }
        }
      }
    }
    return Store(ctx, 0, x->dtype(), x->shape(), y);
  }

 private:
  bool interleaved_;
  int64_t num_heads_, rot_dim_;
};

// FlexAttention (ai.onnx.preview 1): Q [B, Hq, L, E], K [B, Hkv, S, E], V
// [B, Hkv, S, Ev] of one float type T; Y [B, Hq, L, Ev]. As the operator's
// function body computes it: Q and K each scaled by sqrt(scale) in T (scale
// 1/sqrt(E) unless given), their product in T, cast to the softmax precision
// P (softmax_precision, else float, double for double inputs), score_mod's
// graph applied to the [B, Hq, L, S] scores, Softmax over S in P,
// prob_mod's graph applied, then the product with V (in P when P is not T,
// the result cast back to T). Head h reads kv head h / (Hq / Hkv). Sums
// run in double, each step rounded to its type.
class FlexAttentionKernel : public Kernel {
 public:
  FlexAttentionKernel(std::optional<float> scale, int32_t precision, const ir::Graph* score_mod,
                      const ir::Graph* prob_mod)
      : scale_(scale), precision_(precision), score_mod_(score_mod), prob_mod_(prob_mod) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[3];
    for (int i = 0; i < 3; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], ctx.Input(i));
    }
    const int32_t t = in[0]->dtype();
    for (int i = 0; i < 3; ++i) {
      if (in[i]->rank() != 4 || in[i]->dtype() != t || !IsFloat(t)) {
        return absl::InvalidArgumentError(
            absl::StrCat("FlexAttention's Q, K and V must be 4-D of one float type, got ",
                         DescribeTensor(*in[0]), ", ", DescribeTensor(*in[1]), ", ", DescribeTensor(*in[2])));
      }
    }
    const std::vector<int64_t>&qd = in[0]->shape(), &kd = in[1]->shape(), &vd = in[2]->shape();
    const int64_t batch = qd[0], hq = qd[1], sq = qd[2], dk = qd[3];
    const int64_t hkv = kd[1], skv = kd[2], dv = vd[3];
    if (kd[0] != batch || vd[0] != batch || kd[3] != dk || vd[1] != hkv || vd[2] != skv || hkv < 1 ||
        hq % hkv != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("FlexAttention shapes do not fit: Q ", ShapeString(qd), ", K ", ShapeString(kd),
                       ", V ", ShapeString(vd),
                       " (need one batch, one head size for Q and K, and q heads a "
                       "multiple of kv heads)"));
    }
    // (MakeFlexAttention admits float types only.)
    const int32_t p = precision_ != 0 ? precision_ : (t == 11 ? 11 : 1);
    const std::vector<int64_t> s_shape = {batch, hq, sq, skv};  // checked by Tensor::Allocate below
    // sqrt(scale) computed in float, as the function body does, then in T.
    const float scale = scale_ ? *scale_ : 1.0f / std::sqrt(static_cast<float>(dk));
    const double root = RoundToFloatType(t, std::sqrt(scale));
    std::vector<double> q = Doubles(*in[0]), k = Doubles(*in[1]), v = Doubles(*in[2]);
    for (double& x : q) x = RoundToFloatType(t, x * root);
    for (double& x : k) x = RoundToFloatType(t, x * root);
    if (p != t) {
      for (double& x : v) x = RoundToFloatType(p, x);
    }
    const int64_t reps = hq / hkv;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor scores, Tensor::Allocate(p, s_shape));
    ONNXKIT_RETURN_IF_ERROR(VisitFloat(p, [&](auto tag) -> absl::Status {
      using P = decltype(tag);
      P* out = scores.mutable_data<P>();
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < hq; ++h) {
          const double* kh = k.data() + (b * hkv + h / reps) * skv * dk;
          for (int64_t i = 0; i < sq; ++i) {
            const double* qi = q.data() + ((b * hq + h) * sq + i) * dk;
            for (int64_t j = 0; j < skv; ++j) {
              double s = 0;
              for (int64_t c = 0; c < dk; ++c) s += qi[c] * kh[j * dk + c];
              *out++ = static_cast<P>(RoundToFloatType(t, s));
            }
          }
        }
      }
      return absl::OkStatus();
    }));
    ONNXKIT_ASSIGN_OR_RETURN(scores, ApplyMod(ctx, score_mod_, "score_mod", std::move(scores)));
    ONNXKIT_RETURN_IF_ERROR(VisitFloat(p, [&](auto tag) -> absl::Status {
      using P = decltype(tag);
      P* row = scores.mutable_data<P>();
      std::vector<double> e(static_cast<size_t>(skv));
      for (int64_t r = 0; r < batch * hq * sq; ++r, row += skv) {
        double mx = kNegInf, sum = 0;
        for (int64_t j = 0; j < skv; ++j)
          mx = std::max(mx, static_cast<double>(static_cast<ComputeT<P>>(row[j])));
        for (int64_t j = 0; j < skv; ++j) {
          e[static_cast<size_t>(j)] = std::exp(static_cast<double>(static_cast<ComputeT<P>>(row[j])) - mx);
          sum += e[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < skv; ++j) row[j] = static_cast<P>(e[static_cast<size_t>(j)] / sum);
      }
      return absl::OkStatus();
    }));
    ONNXKIT_ASSIGN_OR_RETURN(scores, ApplyMod(ctx, prob_mod_, "prob_mod", std::move(scores)));
    // Y row by row, straight into the output (allocated, and so bounded,
    // like any tensor): a row of probabilities and one of sums at a time.
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, t, {batch, hq, sq, dv}));
    std::vector<double> probs(static_cast<size_t>(skv)), acc(static_cast<size_t>(dv));
    return VisitFloat(t, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      T* out = y->mutable_data<T>();
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < hq; ++h) {
          const double* vh = v.data() + (b * hkv + h / reps) * skv * dv;
          for (int64_t i = 0; i < sq; ++i) {
            const int64_t row = (b * hq + h) * sq + i;
            for (int64_t j = 0; j < skv; ++j)
              probs[static_cast<size_t>(j)] = *ElementAsDouble(scores, row * skv + j);
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j < skv; ++j) {
              for (int64_t c = 0; c < dv; ++c)
                acc[static_cast<size_t>(c)] += probs[static_cast<size_t>(j)] * vh[j * dv + c];
            }
            for (int64_t c = 0; c < dv; ++c) {
              const double value =
                  p != t ? RoundToFloatType(p, acc[static_cast<size_t>(c)]) : acc[static_cast<size_t>(c)];
              out[row * dv + c] = static_cast<T>(value);
            }
          }
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  // `graph` (one input, one output) applied to `x`; its result must keep
  // x's type and shape. Without a graph, x itself.
  static absl::StatusOr<Tensor> ApplyMod(KernelContext& ctx, const ir::Graph* graph, std::string_view name,
                                         Tensor x) {
    if (graph == nullptr) return x;
    const int32_t dtype = x.dtype();
    const std::vector<int64_t> shape = x.shape();
    std::vector<RtValue> args;
    args.push_back(RtValue::FromTensor(std::move(x)));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                             ctx.subgraphs()->RunSubgraph(*graph, std::move(args)));
    if (outs.size() != 1 || !outs[0].is_tensor() || outs[0].tensor().dtype() != dtype ||
        outs[0].tensor().shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          Sv(name), " must give one tensor of the scores' type and shape ", ShapeString(shape), ", it gave ",
          outs.size() == 1 && outs[0].is_tensor() ? DescribeTensor(outs[0].tensor())
                                                  : std::string("another value")));
    }
    return outs[0].tensor();
  }

  std::optional<float> scale_;
  int32_t precision_;
  const ir::Graph* score_mod_;
  const ir::Graph* prob_mod_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeAttention(const ir::Node& node, const KernelInfo&) {
  AttentionAttrs a;
  a.is_causal = AttrInt(node, "is_causal", 0) != 0;
  a.q_heads = AttrInt(node, "q_num_heads", 0);
  a.kv_heads = AttrInt(node, "kv_num_heads", 0);
  a.mode = AttrInt(node, "qk_matmul_output_mode", 0);
  if (a.mode < 0 || a.mode > 3) {
    return absl::InvalidArgumentError(absl::StrCat("qk_matmul_output_mode must be 0 to 3, got ", a.mode));
  }
  if (auto s = node.GetFloat("scale")) a.scale = *s;
  a.softcap = AttrFloat(node, "softcap", 0.0f);
  a.left_window = AttrInt(node, "left_window_size", -1);
  a.right_window = AttrInt(node, "right_window_size", -1);
  return std::unique_ptr<Kernel>(new AttentionKernel(a));
}

std::optional<RotaryDims> RotaryDimsOf(const Tensor& x, int64_t num_heads) {
  if (x.rank() == 4) return RotaryDims{x.dim(0), x.dim(2), x.dim(1), x.dim(3)};
  if (x.rank() == 3 && num_heads > 0 && x.dim(2) % num_heads == 0) {
    return RotaryDims{x.dim(0), x.dim(1), num_heads, x.dim(2) / num_heads};
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRotaryEmbedding(const ir::Node& node, const KernelInfo&) {
  int64_t rot = AttrInt(node, "rotary_embedding_dim", 0);
  if (rot < 0) return absl::InvalidArgumentError("rotary_embedding_dim must be non-negative");
  return std::unique_ptr<Kernel>(new RotaryKernel(AttrInt(node, "interleaved", 0) != 0,
                                                  AttrInt(node, "num_heads", 0), rot));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeFlexAttention(const ir::Node& node, const KernelInfo&) {
  const ir::Graph* mods[2] = {nullptr, nullptr};
  const char* names[2] = {"score_mod", "prob_mod"};
  for (int i = 0; i < 2; ++i) {
    const ir::Attribute* a = node.FindAttribute(names[i]);
    if (a == nullptr) continue;
    if (a->g == nullptr) return absl::InvalidArgumentError(absl::StrCat(names[i], " must be a graph"));
    if (a->g->inputs().size() != 1 || a->g->outputs().size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(names[i], " must take one input and give one output, it takes ", a->g->inputs().size(),
                       " and gives ", a->g->outputs().size()));
    }
    mods[i] = a->g.get();
  }
  const int64_t precision = AttrInt(node, "softmax_precision", 0);
  if (precision != 0 && precision != 1 && precision != 10 && precision != 11 && precision != 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_precision must be a float type (1, 10, 11 or 16), got ", precision));
  }
  return std::unique_ptr<Kernel>(
      new FlexAttentionKernel(node.GetFloat("scale"), static_cast<int32_t>(precision), mods[0], mods[1]));
}

}  // namespace onnxkit::runner::reference
