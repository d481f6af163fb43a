// cpu RNN, GRU and LSTM (float32): every attribute the reference takes
// (directions, layout, clip, sequence_lens, initial states, activations with
// alpha and beta, GRU's linear_before_reset, LSTM's peepholes and
// input_forget).
//
// Per direction, the input projection of every time step is one matrix
// product (X W^T plus both biases, oneDNN's sgemm); each step then multiplies
// the hidden state of the whole batch by R^T (one product, two for GRU
// without linear_before_reset, whose candidate gate needs r * h first) and
// applies the gates over contiguous rows of H values. Nothing is
// allocated per run once the buffers have grown to the largest shapes seen.
// Other element types and inputs the reference rejects (it reports why) run
// on the reference kernel. Arithmetic is float32 (the reference's is double),
// NaN and infinities propagate as in the reference: no comparison or clamp
// other than the ops' own (Relu, clip) is involved, and those pass NaN on.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "dnnl.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/vector_math.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/rnn_options.h"

namespace onnxkit::runner::cpu {
namespace {

using reference::RnnActivation;
using reference::RnnCell;
using reference::RnnOptions;

// C[m, n] (ldc) = A[m, k] (lda) times B[n, k]^T (ldb): row-major, C
// overwritten.
absl::Status GemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    float* c, int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return absl::OkStatus();
  }
  if (dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc) != dnnl_success) {
    return absl::InternalError("oneDNN sgemm failed in a recurrent layer");
  }
  return absl::OkStatus();
}

// v[i] = act(v[i]) for n values.
void Apply(const RnnActivation& act, float* v, int64_t n) {
  switch (act.kind) {
    case RnnActivation::kSigmoid:
      SigmoidRow(v, n);
      return;
    case RnnActivation::kTanh:
      TanhRow(v, n);
      return;
    case RnnActivation::kRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = std::max(v[i], 0.0f);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) v[i] = act(v[i]);
      return;
  }
}

void Clip(float* v, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -limit, limit);
}

// The most floats the input projection of one direction may take (1 GiB);
// larger layers run on the reference kernel.
constexpr int64_t kMaxProjection = int64_t{1} << 28;

class RecurrentKernel : public CpuKernel {
 public:
  RecurrentKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback, RnnOptions o)
      : CpuKernel(std::move(fallback)),
        o_(std::move(o)),
        constant_weights_(IsSessionConstantInput(node, 1) && IsSessionConstantInput(node, 2)) {}

  absl::Status Run(KernelContext& ctx) override {
    const bool lstm = o_.cell == RnnCell::kLstm;
    const int num_in = lstm ? 8 : 6;
    const Tensor* in[8] = {};
    for (int i = 0; i < num_in; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    }
    for (int i = 0; i < num_in; ++i) {
      if (i != 4 && in[i] != nullptr && in[i]->dtype() != pb::kFloat) return Fallback(ctx);
    }
    const Tensor& x = *in[0];
    if (x.rank() != 3 || in[2]->rank() != 3) return Fallback(ctx);
    seq_ = o_.batch_first ? x.dim(1) : x.dim(0);
    batch_ = o_.batch_first ? x.dim(0) : x.dim(1);
    isz_ = x.dim(2);
    g_ = reference::RnnGates(o_.cell);
    const int64_t nd = o_.directions;
    h_ = o_.hidden > 0 ? o_.hidden : in[2]->dim(2);
    if (seq_ <= 0 || batch_ <= 0 || isz_ <= 0 || h_ <= 0) return Fallback(ctx);
    state_shape_ =
        o_.batch_first ? std::vector<int64_t>{batch_, nd, h_} : std::vector<int64_t>{nd, batch_, h_};
    auto fits = [&](int i, std::vector<int64_t> shape) {
      return in[i] == nullptr || in[i]->shape() == shape;
    };
    if (!fits(1, {nd, g_ * h_, isz_}) || !fits(2, {nd, g_ * h_, h_}) || !fits(3, {nd, 2 * g_ * h_}) ||
        !fits(5, state_shape_) || (lstm && (!fits(6, state_shape_) || !fits(7, {nd, 3 * h_})))) {
      return Fallback(ctx);
    }
    // Sizes of the buffers below: overflow or absurd sizes go to the
    // reference, which reports them.
    std::optional<int64_t> xw_size = CheckedElementCount(std::vector<int64_t>{seq_, batch_, g_, h_});
    std::optional<int64_t> y_size = CheckedElementCount(std::vector<int64_t>{seq_, batch_, nd, h_});
    if (!xw_size || !y_size || *xw_size > kMaxProjection) return Fallback(ctx);
    lens_.assign(static_cast<size_t>(batch_), seq_);
    bool ragged = false;
    if (in[4] != nullptr) {
      absl::StatusOr<std::vector<int64_t>> lens = reference::ReadInt64s(*in[4]);
      if (!lens.ok() || static_cast<int64_t>(lens->size()) != batch_) return Fallback(ctx);
      for (int64_t l : *lens) {
        if (l < 0 || l > seq_) return Fallback(ctx);
        ragged |= l != seq_;
      }
      lens_ = *std::move(lens);
    }

    Tensor* out[3] = {};
    const std::vector<int64_t> y_shape = o_.batch_first ? std::vector<int64_t>{batch_, seq_, nd, h_}
                                                        : std::vector<int64_t>{seq_, nd, batch_, h_};
    for (int i = 0; i < (lstm ? 3 : 2) && i < ctx.num_outputs(); ++i) {
      if (!ctx.OutputRequested(i)) continue;
      ONNXKIT_ASSIGN_OR_RETURN(
          out[i], ctx.AllocateOutputUninitialized(i, pb::kFloat, i == 0 ? y_shape : state_shape_));
    }
    if (out[0] != nullptr && ragged) std::fill_n(out[0]->mutable_data<float>(), *y_size, 0.0f);

    for (int64_t d = 0; d < nd; ++d) {
      Scratch& sc = scratch_[d];
      sc.xw.resize(static_cast<size_t>(*xw_size));
      sc.hr.resize(static_cast<size_t>(batch_ * g_ * h_));
      sc.hs.resize(static_cast<size_t>(batch_ * h_));
      sc.cs.resize(static_cast<size_t>(batch_ * h_));
      sc.tmp.resize(static_cast<size_t>(batch_ * h_));
      sc.bias.resize(static_cast<size_t>(g_ * h_));
      sc.zeros.assign(static_cast<size_t>(h_), 0.0f);
    }
    packed_ = constant_weights_ && PackedGemmAvailable() && isz_ <= kPackedGemmMaxK &&
              h_ <= kPackedGemmMaxK && Pack(*in[1], *in[2]);
    if (nd == 2 && omp_get_max_threads() >= 2 && !omp_in_parallel()) {
      // The two directions are independent: one thread each (the products
      // inside then run on their own thread).
      absl::Status status[2];
#pragma omp parallel for num_threads(2)
      for (int d = 0; d < 2; ++d) status[d] = Direction(d, in, out);
      ONNXKIT_RETURN_IF_ERROR(status[0]);
      return status[1];
    }
    for (int64_t d = 0; d < nd; ++d) {
      ONNXKIT_RETURN_IF_ERROR(Direction(d, in, out));
    }
    return absl::OkStatus();
  }

 private:
  int64_t StateIndex(int64_t d, int64_t b) const {
    return o_.batch_first ? (b * o_.directions + d) * h_ : (d * batch_ + b) * h_;
  }
  int64_t InputRow(int64_t t, int64_t b) const { return o_.batch_first ? b * seq_ + t : t * batch_ + b; }
  int64_t OutputIndex(int64_t t, int64_t d, int64_t b) const {
    return o_.batch_first ? ((b * seq_ + t) * o_.directions + d) * h_
                          : ((t * o_.directions + d) * batch_ + b) * h_;
  }

  absl::Status Direction(int64_t d, const Tensor* const* in, Tensor* const* out) {
    Scratch& sc = scratch_[d];
    const int64_t gh = g_ * h_, h = h_;
    const bool gru = o_.cell == RnnCell::kGru, lbr = gru && o_.linear_before_reset;
    const float* w = in[1]->data<float>() + d * gh * isz_;
    const float* r = in[2]->data<float>() + d * gh * h;
    const float* wb = in[3] != nullptr ? in[3]->data<float>() + d * 2 * gh : nullptr;
    const float* rb = wb != nullptr ? wb + gh : nullptr;
    const float* peep =
        o_.cell == RnnCell::kLstm && in[7] != nullptr ? in[7]->data<float>() + d * 3 * h : nullptr;
    const RnnActivation* act = o_.acts.data() + d * reference::RnnActivationsPerDirection(o_.cell);
    // Both biases go with the input projection, except the recurrent bias of
    // GRU's candidate gate under linear_before_reset (it is scaled by r).
    for (int64_t j = 0; j < gh; ++j) {
      float bias = wb != nullptr ? wb[j] : 0.0f;
      if (rb != nullptr && !(lbr && j >= 2 * h)) bias += rb[j];
      sc.bias[static_cast<size_t>(j)] = bias;
    }
    if (packed_) {
      PackedGemm(in[0]->data<float>(), seq_ * batch_, isz_, packs_[static_cast<size_t>(d)].w, sc.bias.data(),
                 sc.xw.data(), gh);
    } else {
      ONNXKIT_RETURN_IF_ERROR(
          GemmNT(seq_ * batch_, gh, isz_, in[0]->data<float>(), isz_, w, isz_, sc.xw.data(), gh));
      for (int64_t row = 0; row < seq_ * batch_; ++row) {
        float* p = sc.xw.data() + row * gh;
        for (int64_t j = 0; j < gh; ++j) p[j] += sc.bias[static_cast<size_t>(j)];
      }
    }
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t si = StateIndex(d, b);
      float* hb = sc.hs.data() + b * h;
      float* cb = sc.cs.data() + b * h;
      if (in[5] != nullptr) {
        std::memcpy(hb, in[5]->data<float>() + si, static_cast<size_t>(h) * sizeof(float));
      } else {
        std::fill_n(hb, h, 0.0f);
      }
      if (o_.cell == RnnCell::kLstm && in[6] != nullptr) {
        std::memcpy(cb, in[6]->data<float>() + si, static_cast<size_t>(h) * sizeof(float));
      } else {
        std::fill_n(cb, h, 0.0f);
      }
    }
    const bool reverse = o_.reverse_only || d == 1;
    const int64_t steps = *std::max_element(lens_.begin(), lens_.end());
    const float clip = o_.clip ? static_cast<float>(*o_.clip) : 0.0f;
    const float* clip_ptr = o_.clip ? &clip : nullptr;
    // The default activations (LSTM without peepholes or input_forget) take
    // one pass over the units per step.
    const bool fused_cell =
        (o_.cell == RnnCell::kLstm && peep == nullptr && !o_.input_forget &&
         act[0].kind == RnnActivation::kSigmoid && act[1].kind == RnnActivation::kTanh &&
         act[2].kind == RnnActivation::kTanh) ||
        (lbr && act[0].kind == RnnActivation::kSigmoid && act[1].kind == RnnActivation::kTanh);
    auto active = [&](int64_t b, int64_t s) { return s < lens_[static_cast<size_t>(b)]; };
    auto time_of = [&](int64_t b, int64_t s) { return reverse ? lens_[static_cast<size_t>(b)] - 1 - s : s; };
    for (int64_t s = 0; s < steps; ++s) {
      // The recurrent product: all gates, or GRU's z and r first.
      if (packed_) {
        PackedGemm(sc.hs.data(), batch_, h, packs_[static_cast<size_t>(d)].r, nullptr, sc.hr.data(), gh);
      } else {
        ONNXKIT_RETURN_IF_ERROR(
            GemmNT(batch_, gru && !lbr ? 2 * h : gh, h, sc.hs.data(), h, r, h, sc.hr.data(), gh));
      }
      for (int64_t b = 0; b < batch_; ++b) {
        if (!active(b, s)) continue;
        float* g = sc.hr.data() + b * gh;
        const float* xg = sc.xw.data() + InputRow(time_of(b, s), b) * gh;
        float* hb = sc.hs.data() + b * h;
        float* cb = sc.cs.data() + b * h;
        switch (o_.cell) {
          case RnnCell::kRnn:
            for (int64_t k = 0; k < h; ++k) hb[k] = g[k] + xg[k];
            if (o_.clip) Clip(hb, h, clip);
            Apply(act[0], hb, h);
            break;
          case RnnCell::kGru:
            if (lbr && fused_cell) {
              GruCellRow(g, xg, rb != nullptr ? rb + 2 * h : sc.zeros.data(), clip_ptr, hb, h);
              break;
            }
            // z and r; GRU without linear_before_reset stops here and keeps
            // r * h for the candidate's product.
            for (int64_t k = 0; k < 2 * h; ++k) g[k] += xg[k];
            if (o_.clip) Clip(g, 2 * h, clip);
            Apply(act[0], g, 2 * h);
            if (!lbr) {
              float* rh = sc.tmp.data() + b * h;
              for (int64_t k = 0; k < h; ++k) rh[k] = g[h + k] * hb[k];
            } else {
              GruUpdate(g, xg, rb != nullptr ? rb + 2 * h : nullptr, act[1], clip, hb);
            }
            break;
          case RnnCell::kLstm:
            if (fused_cell) {
              LstmCellRow(g, xg, clip_ptr, hb, cb, h);
            } else {
              LstmUpdate(g, xg, peep, act, clip, hb, cb);
            }
            break;
        }
      }
      if (gru && !lbr) {
        // Inactive items' rows are not read back; zero them so the product
        // sees defined values.
        for (int64_t b = 0; b < batch_; ++b) {
          if (!active(b, s)) std::fill_n(sc.tmp.data() + b * h, h, 0.0f);
        }
        if (packed_) {
          PackedGemm(sc.tmp.data(), batch_, h, packs_[static_cast<size_t>(d)].r_h, nullptr,
                     sc.hr.data() + 2 * h, gh);
        } else {
          ONNXKIT_RETURN_IF_ERROR(
              GemmNT(batch_, h, h, sc.tmp.data(), h, r + 2 * h * h, h, sc.hr.data() + 2 * h, gh));
        }
        for (int64_t b = 0; b < batch_; ++b) {
          if (active(b, s))
            GruUpdate(sc.hr.data() + b * gh, sc.xw.data() + InputRow(time_of(b, s), b) * gh, nullptr, act[1],
                      clip, sc.hs.data() + b * h);
        }
      }
      if (out[0] != nullptr) {
        for (int64_t b = 0; b < batch_; ++b) {
          if (!active(b, s)) continue;
          std::memcpy(out[0]->mutable_data<float>() + OutputIndex(time_of(b, s), d, b), sc.hs.data() + b * h,
                      static_cast<size_t>(h) * sizeof(float));
        }
      }
    }
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t si = StateIndex(d, b);
      if (out[1] != nullptr) {
        std::memcpy(out[1]->mutable_data<float>() + si, sc.hs.data() + b * h,
                    static_cast<size_t>(h) * sizeof(float));
      }
      if (out[2] != nullptr) {
        std::memcpy(out[2]->mutable_data<float>() + si, sc.cs.data() + b * h,
                    static_cast<size_t>(h) * sizeof(float));
      }
    }
    return absl::OkStatus();
  }

  // Packs W^T and R^T of every direction for PackedGemm (R's candidate
  // rows apart for GRU without linear_before_reset), once per weight
  // buffers; false when a packed copy cannot be allocated.
  bool Pack(const Tensor& w, const Tensor& r) {
    if (w.raw() == packed_w_ && r.raw() == packed_r_ && packs_.size() == static_cast<size_t>(o_.directions)) {
      return true;
    }
    packed_w_ = packed_r_ = nullptr;
    packs_.clear();
    const int64_t gh = g_ * h_;
    const bool split = o_.cell == RnnCell::kGru && !o_.linear_before_reset;
    std::vector<float> t;
    // The transpose of rows [first, first + n) of the [rows, k] matrix m: [k, n].
    auto packed = [&](const float* m, int64_t first, int64_t n, int64_t k) -> absl::StatusOr<PackedMatrix> {
      t.resize(static_cast<size_t>(k * n));
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < k; ++i) t[static_cast<size_t>(i * n + j)] = m[(first + j) * k + i];
      }
      return PackedMatrix::Pack(t.data(), k, n);
    };
    for (int64_t d = 0; d < o_.directions; ++d) {
      DirectionPack p;
      absl::StatusOr<PackedMatrix> pw = packed(w.data<float>() + d * gh * isz_, 0, gh, isz_);
      absl::StatusOr<PackedMatrix> pr = packed(r.data<float>() + d * gh * h_, 0, split ? 2 * h_ : gh, h_);
      if (!pw.ok() || !pr.ok()) return false;
      p.w = *std::move(pw);
      p.r = *std::move(pr);
      if (split) {
        absl::StatusOr<PackedMatrix> ph = packed(r.data<float>() + d * gh * h_, 2 * h_, h_, h_);
        if (!ph.ok()) return false;
        p.r_h = *std::move(ph);
      }
      packs_.push_back(std::move(p));
    }
    packed_w_ = w.raw();
    packed_r_ = r.raw();
    return true;
  }

  // GRU's candidate and new state from activated z, r (g[0, 2h)) and the
  // candidate's recurrent part g[2h, 3h): with linear_before_reset it is
  // h R_h^T, to which `rb_h` (when present) is added before scaling by r;
  // without, it is already (r * h) R_h^T and xg holds both biases.
  void GruUpdate(float* g, const float* xg, const float* rb_h, const RnnActivation& act, float clip,
                 float* hb) const {
    const int64_t h = h_;
    float* cand = g + 2 * h;
    if (o_.linear_before_reset) {
      for (int64_t k = 0; k < h; ++k)
        cand[k] = xg[2 * h + k] + g[h + k] * (cand[k] + (rb_h ? rb_h[k] : 0.0f));
    } else {
      for (int64_t k = 0; k < h; ++k) cand[k] += xg[2 * h + k];
    }
    if (o_.clip) Clip(cand, h, clip);
    Apply(act, cand, h);
    for (int64_t k = 0; k < h; ++k) hb[k] = (1.0f - g[k]) * cand[k] + g[k] * hb[k];
  }

  // LSTM's gates i, o, f, c in g (recurrent parts) and xg (input parts),
  // peepholes i, o, f; updates the cell state cb and the hidden state hb.
  void LstmUpdate(float* g, const float* xg, const float* peep, const RnnActivation* act, float clip,
                  float* hb, float* cb) const {
    const int64_t h = h_;
    float *gi = g, *go = g + h, *gf = g + 2 * h, *gc = g + 3 * h;
    for (int64_t k = 0; k < 4 * h; ++k) g[k] += xg[k];
    if (peep != nullptr) {
      for (int64_t k = 0; k < h; ++k) {
        gi[k] += peep[k] * cb[k];
        gf[k] += peep[2 * h + k] * cb[k];
      }
    }
    if (o_.clip) {
      Clip(gi, h, clip);
      Clip(gf, 2 * h, clip);  // f and c
    }
    Apply(act[0], gi, h);
    if (o_.input_forget) {
      for (int64_t k = 0; k < h; ++k) gf[k] = 1.0f - gi[k];
    } else {
      Apply(act[0], gf, h);
    }
    Apply(act[1], gc, h);
    for (int64_t k = 0; k < h; ++k) cb[k] = gf[k] * cb[k] + gi[k] * gc[k];
    if (peep != nullptr) {
      for (int64_t k = 0; k < h; ++k) go[k] += peep[h + k] * cb[k];
    }
    if (o_.clip) Clip(go, h, clip);
    Apply(act[0], go, h);
    // h = o * act2(c), act2 applied to a copy of c (gc is free now).
    std::memcpy(gc, cb, static_cast<size_t>(h) * sizeof(float));
    Apply(act[2], gc, h);
    for (int64_t k = 0; k < h; ++k) hb[k] = go[k] * gc[k];
  }

  struct DirectionPack {
    // W^T; R^T (GRU without linear_before_reset: its z and r columns, and
    // the candidate's in r_h).
    PackedMatrix w, r, r_h;
  };

  // Buffers of one direction; grown to the largest shapes seen.
  struct Scratch {
    // zeros: GRU's candidate recurrent bias when there is none (adding 0,
    // as the gate-by-gate path does).
    std::vector<float> xw, hr, hs, cs, tmp, bias, zeros;
  };

  RnnOptions o_;
  const bool constant_weights_;
  bool packed_ = false;
  std::vector<DirectionPack> packs_;
  const void* packed_w_ = nullptr;
  const void* packed_r_ = nullptr;
  int64_t seq_ = 0, batch_ = 0, isz_ = 0, g_ = 0, h_ = 0;
  std::vector<int64_t> state_shape_, lens_;
  Scratch scratch_[2];
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeRecurrent(const ir::Node& node, const KernelInfo& info) {
  RnnCell cell = node.op_type() == "LSTM"  ? RnnCell::kLstm
                 : node.op_type() == "GRU" ? RnnCell::kGru
                                           : RnnCell::kRnn;
  ONNXKIT_ASSIGN_OR_RETURN(RnnOptions o, reference::ParseRnnOptions(node, info, cell));
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  return std::unique_ptr<Kernel>(new RecurrentKernel(node, info, std::move(fallback), std::move(o)));
}

}  // namespace onnxkit::runner::cpu
