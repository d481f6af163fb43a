// Fused scaled dot-product attention (a transformer chain, runner/fusion.h):
//
//   %s = MatMul(%q, %kt); %d = Div(%s, %c); %w = Where(%cond, %d, %fill);
//   %m = Add(%w, %mask); %p = Softmax(%m, axis=-1); %y = MatMul(%p, %v)
//
// (the Div, the Where and the Add each optional: a query scaled
// beforehand, no boolean or no additive mask; the Where's fill may be its
// second operand, masked_fill's form) computed eight query rows at a time:
// their scores (q kt), divided by c, the fill where the condition says,
// plus the mask, softmax, then times v, without the [.., S, S] tensors ever
// existing. The same operations in the same order as the nodes; a row
// whose softmax the reference makes NaN (it holds NaN, +inf, or nothing
// above -inf) comes out NaN. Inputs holding NaN or infinities (a mask:
// NaN or +inf; its -inf are padding and computed here; a fill: the same),
// a c that is not a finite non-zero scalar, a fill that is not a scalar,
// masks that do not broadcast to the
// scores without widening them, batch dims that differ and other types run
// the chain node by node.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/transformer.h"
#include "runner/reference/dispatch.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip
// -Wmaybe-uninitialized (and, in _mm512_reduce_*_ps, -Wuninitialized) when
// inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace onnxkit::runner::cpu {
namespace {

constexpr int kRows = 8;  // query rows per step

// C[kR x n] (row stride ldc) = A[kR x k] (lda) B[k x n] (ldb), 16 kV
// columns at a time in kR x kV registers.
template <int kR, int kV>
__attribute__((target("avx512f"), always_inline)) inline void SmallGemm(const float* a, int64_t lda, const float* b,
                                                                        int64_t ldb, int64_t k, int64_t n, float* c,
                                                                        int64_t ldc) {
  for (int64_t j = 0; j < n; j += 16 * kV) {
    __mmask16 mask[kV];
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) {
      int64_t left = std::clamp<int64_t>(n - j - 16 * v, 0, 16);
      mask[v] = static_cast<__mmask16>((uint32_t{1} << left) - 1);
    }
    __m512 acc[kR][kV];
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t q = 0; q < k; ++q) {
      const float* row = b + q * ldb + j;
      __m512 bv[kV];
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], row + 16 * v);
#pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) {
        __m512 av = _mm512_set1_ps(a[r * lda + q]);
#pragma GCC unroll 4
        for (int v = 0; v < kV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) _mm512_mask_storeu_ps(c + r * ldc + j + 16 * v, mask[v], acc[r][v]);
    }
  }
}

template <int kV>
__attribute__((target("avx512f"), always_inline)) inline void GemmUpTo(int rows, const float* a, int64_t lda,
                                                                       const float* b, int64_t ldb, int64_t k,
                                                                       int64_t n, float* c, int64_t ldc) {
  switch (rows) {
    case 8: return SmallGemm<8, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 7: return SmallGemm<7, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 6: return SmallGemm<6, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 5: return SmallGemm<5, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 4: return SmallGemm<4, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 3: return SmallGemm<3, kV>(a, lda, b, ldb, k, n, c, ldc);
    case 2: return SmallGemm<2, kV>(a, lda, b, ldb, k, n, c, ldc);
    default: return SmallGemm<1, kV>(a, lda, b, ldb, k, n, c, ldc);
  }
}

// Up to kRows rows: blocks of 48 columns in 8 x 3 registers (three loads
// of B and eight broadcasts of A feed 24 multiply-adds), then the last
// columns in as few registers as cover them.
__attribute__((target("avx512f"))) void SmallGemmRows(int rows, const float* a, int64_t lda, const float* b,
                                                      int64_t ldb, int64_t k, int64_t n, float* c, int64_t ldc) {
  const int64_t full = n / 48 * 48, tail = n - full;
  if (full > 0) GemmUpTo<3>(rows, a, lda, b, ldb, k, full, c, ldc);
  if (tail == 0) return;
  if (tail <= 16) return GemmUpTo<1>(rows, a, lda, b + full, ldb, k, tail, c + full, ldc);
  if (tail <= 32) return GemmUpTo<2>(rows, a, lda, b + full, ldb, k, tail, c + full, ldc);
  GemmUpTo<3>(rows, a, lda, b + full, ldb, k, tail, c + full, ldc);
}

// exp(v) for v <= 0 (below -88: 0, as float's exp nearly is), NaN kept:
// 2^n e^r with |r| <= ln2 / 2 and a degree-7 polynomial.
__attribute__((target("avx512f"), always_inline)) inline __m512 ExpNonPositive16(__m512 v) {
  const __m512 lo = _mm512_set1_ps(-88.f);
  const __mmask16 under = _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ);  // false for NaN
  const __m512 x = _mm512_max_ps(lo, v);                             // NaN stays NaN
  const __m512 round = _mm512_set1_ps(12582912.f);
  __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), round), round);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  bits = _mm512_max_epi32(bits, _mm512_setzero_si512());
  return _mm512_maskz_mul_ps(static_cast<__mmask16>(~under), p, _mm512_castsi512_ps(bits));
}

// s[j] = s[j] / c + mask (times c's reciprocal unless kDivide) in place;
// returns the lane-wise maximum (-inf where every element was NaN).
template <bool kDivide>
__attribute__((target("avx512f"), always_inline)) inline __m512 ScaleRow(float* s, int64_t n, __m512 cv,
                                                                         const float* mask,
                                                                         int64_t mask_step) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, n - j)) - 1);
    __m512 add = mask_step == 1 ? _mm512_maskz_loadu_ps(m, mask + j) : _mm512_set1_ps(mask[0]);
    __m512 x = _mm512_maskz_loadu_ps(m, s + j);
    __m512 v = _mm512_add_ps(kDivide ? _mm512_div_ps(x, cv) : _mm512_mul_ps(x, cv), add);
    _mm512_mask_storeu_ps(s + j, m, v);
    mx = _mm512_mask_max_ps(mx, m, v, mx);  // a NaN v leaves mx, as std::max(max, x) does
  }
  return mx;
}

// One row of scores s[n] becomes softmax(s / c + mask) in place, as the
// reference computes it; `mask_step` 0 broadcasts mask[0]. Divisions by c
// and by the sum are multiplications by their reciprocals (within an ulp),
// by c only where 1 / c is a normal number.
__attribute__((target("avx512f"))) void SoftmaxRow(float* s, int64_t n, float c, bool multiply,
                                                   const float* mask, int64_t mask_step) {
  const bool reciprocal = multiply || std::isnormal(1.f / c);
  const __m512 cv = _mm512_set1_ps(multiply ? c : reciprocal ? 1.f / c : c);
  const __m512 mx =
      reciprocal ? ScaleRow<false>(s, n, cv, mask, mask_step) : ScaleRow<true>(s, n, cv, mask, mask_step);
  const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));  // no lane is NaN
  // x - max is NaN for a NaN x, for x = max = +inf and for a max of -inf;
  // the sum then is NaN, and so is the reference's whole row.
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, n - j)) - 1);
    __m512 e = ExpNonPositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), top));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const float total = _mm512_reduce_add_ps(sum);
  if (total != total) {
    std::fill(s, s + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const __m512 tv = _mm512_set1_ps(1.f / total);  // total >= 1: the maximum's own term is 1
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, n - j)) - 1);
    _mm512_mask_storeu_ps(s + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), tv));
  }
}

// True when every element of the float tensor is finite.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool AllFinite(const float* x, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) bad |= !(std::fabs(x[i]) < kInf);
  return bad == 0;
}

// True when every element is finite or -inf (a padding mask's).
__attribute__((target_clones("avx512f", "avx2", "default"))) bool FiniteOrMinusInf(const float* x,
                                                                                   int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) bad |= !(x[i] < kInf);  // NaN and +inf
  return bad == 0;
}

// The shapes of one run: batch dims (equal for q, kt, v), rows s, depth d,
// keys sk, value width dv; the mask's element strides over the scores'
// dims [batch..., s, sk] (0 where it broadcasts).
struct Geometry {
  std::vector<int64_t> batch;
  int64_t s = 0, d = 0, sk = 0, dv = 0;
  std::vector<int64_t> mask_strides, cond_strides;

  // The element strides of a tensor of `shape` over the scores' dims (0
  // where it broadcasts); nullopt when it does not broadcast to them
  // without widening them.
  std::optional<std::vector<int64_t>> StridesOver(const std::vector<int64_t>& shape) const {
    const size_t r = batch.size() + 2;
    if (shape.size() > r) return std::nullopt;
    std::vector<int64_t> scores = batch;
    scores.push_back(s);
    scores.push_back(sk);
    std::vector<int64_t> m(r - shape.size(), 1);
    m.insert(m.end(), shape.begin(), shape.end());
    std::vector<int64_t> strides(r, 0);
    int64_t stride = 1;
    for (size_t i = r; i-- > 0;) {
      if (m[i] != 1 && m[i] != scores[i]) return std::nullopt;
      strides[i] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
    return strides;
  }

  // The offset of (the batch indices of head h, row 0, key 0) in a tensor
  // with `strides`.
  int64_t HeadOffset(const std::vector<int64_t>& strides, int64_t h) const {
    int64_t offset = 0;
    for (size_t i = batch.size(); i-- > 0;) {
      offset += h % batch[i] * strides[i];
      h /= batch[i];
    }
    return offset;
  }
};

// A Where in the chain: scores where `cond` (bool, broadcast over the
// scores by Geometry::cond_strides) is true become `fill` (false, when
// !fill_when_true: Where(cond, s, fill)).
struct Select {
  const uint8_t* cond = nullptr;
  float fill = 0;
  bool fill_when_true = true;
};

// s[j] = s[j] / c (times c when `multiply`; times c's reciprocal where that
// is a normal number, as SoftmaxRow divides), then the fill where the
// condition (cond[j], or cond[0] for every j when `step` is 0) selects it.
__attribute__((target("avx512f"))) void ScaleSelectRow(float* s, int64_t n, float c, bool multiply,
                                                       const Select& select, const uint8_t* cond,
                                                       int64_t step) {
  const bool reciprocal = multiply || std::isnormal(1.f / c);
  const __m512 cv = _mm512_set1_ps(multiply ? c : reciprocal ? 1.f / c : c);
  const __m512 fill = _mm512_set1_ps(select.fill);
  const __mmask16 all = step == 0 && (cond[0] != 0) == select.fill_when_true ? 0xFFFF : 0;
  for (int64_t j = 0; j < n; j += 16) {
    const int64_t left = std::min<int64_t>(16, n - j);
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << left) - 1);
    __m512 x = _mm512_maskz_loadu_ps(m, s + j);
    x = reciprocal ? _mm512_mul_ps(x, cv) : _mm512_div_ps(x, cv);
    __mmask16 hit = all;
    if (step != 0) {
      __m128i b;
      if (left == 16) {
        b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cond + j));
      } else {  // the last bytes of the row, not past them
        alignas(16) uint8_t bytes[16] = {};
        std::memcpy(bytes, cond + j, static_cast<size_t>(left));
        b = _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
      }
      const __m512i w = _mm512_cvtepu8_epi32(b);
      hit = _mm512_test_epi32_mask(w, w);
      if (!select.fill_when_true) hit = static_cast<__mmask16>(~hit);
    }
    _mm512_mask_storeu_ps(s + j, m, _mm512_mask_mov_ps(x, hit, fill));
  }
}

std::optional<Geometry> Resolve(const Tensor& q, const Tensor& kt, const Tensor& mask, const Tensor& v) {
  const int r = q.rank();
  if (r < 2 || r > 6 || kt.rank() != r || v.rank() != r || mask.rank() > r) return std::nullopt;
  Geometry g;
  g.batch.assign(q.shape().begin(), q.shape().end() - 2);
  if (!std::equal(g.batch.begin(), g.batch.end(), kt.shape().begin()) ||
      !std::equal(g.batch.begin(), g.batch.end(), v.shape().begin())) {
    return std::nullopt;
  }
  g.s = q.dim(r - 2), g.d = q.dim(r - 1), g.sk = kt.dim(r - 1), g.dv = v.dim(r - 1);
  if (kt.dim(r - 2) != g.d || v.dim(r - 2) != g.sk || g.s == 0 || g.d == 0 || g.sk == 0 || g.dv == 0) {
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> strides = g.StridesOver(mask.shape());
  if (!strides) return std::nullopt;
  g.mask_strides = *std::move(strides);
  return g;
}

class AttentionKernel : public Kernel {
 public:
  // Inputs of the fused kernel: the divisor `c` (the factor when
  // `multiply`) and the `mask` (-1: the chain has no Div or Mul / no Add;
  // 1 and a scalar 0 stand in, exact: s / 1 + 0 is s) and `v`.
  // The Where's condition `cond` and `fill` (-1: no Where), the fill
  // taken where the condition is true when `fill_when_true`.
  AttentionKernel(int c, bool multiply, int mask, int v, int64_t axis, int cond, int fill,
                  bool fill_when_true, std::unique_ptr<Kernel> fallback)
      : c_(c),
        multiply_(multiply),
        mask_(mask),
        v_(v),
        axis_(axis),
        cond_(cond),
        fill_(fill),
        fill_when_true_(fill_when_true),
        fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* q, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* kt, ctx.Input(1));
    const Tensor* c = &one_;
    const Tensor* mask = &zero_;
    if (c_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(c, ctx.Input(c_));
    }
    if (mask_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(mask, ctx.Input(mask_));
    }
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* v, ctx.Input(v_));
    if (!PackedGemmAvailable() || one_.size() != 1 || zero_.size() != 1) return fallback_->Run(ctx);
    for (const Tensor* t : {q, kt, c, mask, v}) {
      if (t->dtype() != pb::kFloat || t->size() == 0) return fallback_->Run(ctx);
    }
    std::optional<Geometry> g = Resolve(*q, *kt, *mask, *v);
    if (!g || c->size() != 1 || c->rank() > q->rank() || (axis_ != -1 && axis_ != q->rank() - 1)) {
      return fallback_->Run(ctx);
    }
    const float cv = c->data<float>()[0];
    if (!std::isfinite(cv) || cv == 0.f) return fallback_->Run(ctx);
    for (const Tensor* t : {q, kt, v}) {
      if (!AllFinite(t->data<float>(), t->size())) return fallback_->Run(ctx);
    }
    // A mask may hold -inf (padding): those scores weigh 0, as in the
    // reference, and a row with nothing above -inf comes out NaN.
    if (!FiniteOrMinusInf(mask->data<float>(), mask->size())) return fallback_->Run(ctx);
    std::optional<Select> select;
    if (cond_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(cond_));
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* fill, ctx.Input(fill_));
      if (cond->dtype() != pb::kBool || cond->size() == 0 || fill->dtype() != pb::kFloat ||
          fill->size() != 1 || fill->rank() > q->rank() || !FiniteOrMinusInf(fill->data<float>(), 1)) {
        return fallback_->Run(ctx);
      }
      std::optional<std::vector<int64_t>> strides = g->StridesOver(cond->shape());
      if (!strides) return fallback_->Run(ctx);
      g->cond_strides = *std::move(strides);
      select = Select{static_cast<const uint8_t*>(cond->raw()), fill->data<float>()[0], fill_when_true_};
    }
    std::vector<int64_t> shape = g->batch;
    shape.push_back(g->s);
    shape.push_back(g->dv);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    Compute(*g, q->data<float>(), kt->data<float>(), cv, multiply_, select, mask->data<float>(),
            v->data<float>(), y->mutable_data<float>());
    return absl::OkStatus();
  }

 private:
  static void Compute(const Geometry& g, const float* q, const float* kt, float c, bool multiply,
                      const std::optional<Select>& select, const float* mask, const float* v, float* y) {
    int64_t heads = 1;
    for (int64_t b : g.batch) heads *= b;
    const int64_t blocks = (g.s + kRows - 1) / kRows, steps = heads * blocks;
    const size_t nb = g.batch.size();
    const int64_t row_stride = g.mask_strides[nb], key_stride = g.mask_strides[nb + 1];
    // Steps [first, last), with a scores buffer of their own.
    auto run_steps = [&](int64_t first, int64_t last) {
      std::vector<float> scores(static_cast<size_t>(kRows * g.sk));
      for (int64_t step = first; step < last; ++step) {
        const int64_t h = step / blocks, r0 = step % blocks * kRows;
        const int rows = static_cast<int>(std::min<int64_t>(kRows, g.s - r0));
        const int64_t mask_offset = g.HeadOffset(g.mask_strides, h);
        const int64_t cond_offset = select ? g.HeadOffset(g.cond_strides, h) : 0;
        SmallGemmRows(rows, q + (h * g.s + r0) * g.d, g.d, kt + h * g.d * g.sk, g.sk, g.d, g.sk, scores.data(),
                      g.sk);
        for (int r = 0; r < rows; ++r) {
          float* row = scores.data() + r * g.sk;
          const float* mask_row = mask + mask_offset + (r0 + r) * row_stride;
          if (select) {
            // Scaled and filled here; the softmax then multiplies by 1 (exact).
            const uint8_t* cond = select->cond + cond_offset + (r0 + r) * g.cond_strides[nb];
            ScaleSelectRow(row, g.sk, c, multiply, *select, cond, g.cond_strides[nb + 1]);
            SoftmaxRow(row, g.sk, 1.f, true, mask_row, key_stride);
          } else {
            SoftmaxRow(row, g.sk, c, multiply, mask_row, key_stride);
          }
        }
        SmallGemmRows(rows, scores.data(), g.sk, v + h * g.sk * g.dv, g.dv, g.sk, g.dv,
                      y + (h * g.s + r0) * g.dv, g.dv);
      }
    };
    const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), steps));
    if (threads <= 1) {  // no OpenMP region (see ParallelFor)
      run_steps(0, steps);
      return;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) run_steps(steps * t / threads, steps * (t + 1) / threads);
  }

  static Tensor ScalarTensor(float value) {
    absl::StatusOr<Tensor> t = Tensor::Allocate(pb::kFloat, {});
    if (!t.ok()) return Tensor();  // empty: Run falls back
    t->mutable_data<float>()[0] = value;
    return *std::move(t);
  }

  int c_;
  bool multiply_;  // the scores are multiplied by c (a Mul), not divided
  int mask_, v_;
  int64_t axis_;
  int cond_, fill_;
  bool fill_when_true_;
  std::unique_ptr<Kernel> fallback_;
  Tensor one_ = ScalarTensor(1.f), zero_ = ScalarTensor(0.f);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeAttentionChain(const FusionChain& chain, const KernelInfo& info,
                                                           std::unique_ptr<Kernel> fallback) {
  const size_t n = chain.nodes.size();
  if (n < 3 || n > 6 || chain.nodes[n - 2]->op_type() != "Softmax" || chain.chained_input[n - 1] != 0) {
    return absl::InternalError("not an attention chain");
  }
  int c = -1, mask = -1, cond = -1, fill = -1;
  bool multiply = false, fill_when_true = true;
  for (size_t k = 1; k + 2 < n; ++k) {
    const std::string& op = chain.nodes[k]->op_type();
    if (op == "Div" && k == 1 && chain.chained_input[k] == 0) {
      c = chain.input_offset[k] + 1;
    } else if (op == "Mul" && k == 1) {
      c = chain.input_offset[k] + (chain.chained_input[k] == 0 ? 1 : 0);
      multiply = true;
    } else if (op == "Where" && cond < 0 && mask < 0 && chain.chained_input[k] >= 1) {
      cond = chain.input_offset[k];
      fill_when_true = chain.chained_input[k] == 2;
      fill = chain.input_offset[k] + (fill_when_true ? 1 : 2);
    } else if (op == "Add" && mask < 0) {
      mask = chain.input_offset[k] + (chain.chained_input[k] == 0 ? 1 : 0);
    } else {
      return absl::InternalError("not an attention chain");
    }
  }
  const int v = chain.input_offset[n - 1] + 1;
  const ir::Node& softmax = *chain.nodes[n - 2];
  // Before opset 13 the input is coerced to 2-D at axis: the last axis is
  // the same rows.
  const int64_t axis = reference::AttrInt(softmax, "axis", info.opset < 13 ? 1 : -1);
  return std::unique_ptr<Kernel>(
      new AttentionKernel(c, multiply, mask, v, axis, cond, fill, fill_when_true, std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
