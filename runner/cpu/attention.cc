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
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/transformer.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

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

// --- The Attention op (opset 23 and later) ---

// One row of scores s[n] (the raw products q k) becomes the softmax of
// s * scale (softcap * tanh(. / softcap) when softcap > 0) + bias over the
// keys [lo, hi], 0 elsewhere; bias[j * bias_step] (null: 0) is additive.
// A row with no key in range or only -inf biases gets zeros, as the
// reference computes it.
__attribute__((target("avx512f"))) void MaskedSoftmaxRow(float* s, int64_t n, float scale, float softcap,
                                                         const float* bias, int64_t bias_step, int64_t lo,
                                                         int64_t hi) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, n - 1);
  float mx = kNegInf;
  for (int64_t j = lo; j <= hi; ++j) {
    float x = s[j] * scale;
    if (softcap > 0) x = softcap * std::tanh(x / softcap);
    if (bias != nullptr) x += bias[j * bias_step];
    s[j] = x;
    mx = std::max(mx, x);
  }
  if (hi < lo || mx == kNegInf) {
    std::fill(s, s + n, 0.f);
    return;
  }
  std::fill(s, s + lo, 0.f);
  std::fill(s + hi + 1, s + n, 0.f);
  const __m512 top = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = lo; j <= hi; j += 16) {
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, hi + 1 - j)) - 1);
    __m512 e = ExpNonPositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), top));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 tv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum));  // >= 1: the maximum's own term
  for (int64_t j = lo; j <= hi; j += 16) {
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, hi + 1 - j)) - 1);
    _mm512_mask_storeu_ps(s + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), tv));
  }
}

// Attention on float32 Q, K, V (3-D with head counts, or 4-D), a KV cache,
// grouped-query heads, a boolean or additive mask broadcast onto
// [B, Hq, Sq, T] (its last dim may be shorter: the rest is masked),
// is_causal, nonpad_kv_seqlen and the local windows, softcap; present_key
// and present_value. Eight query rows at a time, as the chain kernel: the
// [.., Sq, T] scores never exist whole. The qk_matmul_output, other types,
// non-finite inputs (NaN or +inf in a mask) and shapes that do not fit run
// the reference kernel.
class AttentionOpKernel : public Kernel {
 public:
  AttentionOpKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback)
      : causal_(reference::AttrInt(node, "is_causal", 0) != 0),
        q_heads_(reference::AttrInt(node, "q_num_heads", 0)),
        kv_heads_(reference::AttrInt(node, "kv_num_heads", 0)),
        scale_(node.GetFloat("scale")),
        softcap_(reference::AttrFloat(node, "softcap", 0.f)),
        left_(reference::AttrInt(node, "left_window_size", -1)),
        right_(reference::AttrInt(node, "right_window_size", -1)),
        fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[7] = {};
    for (int i = 0; i < 7; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    }
    std::optional<Shapes> g = Resolve(in);
    if (!g || ctx.OutputRequested(3) || !PackedGemmAvailable()) return fallback_->Run(ctx);
    for (int i : {0, 1, 2, 4, 5}) {
      if (in[i] != nullptr && !AllFinite(in[i]->data<float>(), in[i]->size())) return fallback_->Run(ctx);
    }
    const Tensor* mask = in[3];
    if (mask != nullptr && mask->dtype() == pb::kFloat &&
        !FiniteOrMinusInf(mask->data<float>(), mask->size())) {
      return fallback_->Run(ctx);
    }
    std::vector<int64_t> nonpad;
    if (in[6] != nullptr) {
      if (in[6]->dtype() != pb::kInt64 || in[6]->size() != g->b) return fallback_->Run(ctx);
      nonpad.assign(in[6]->data<int64_t>(), in[6]->data<int64_t>() + g->b);
    }
    // The keys: K' transposed per kv head, [B * Hkv][E][T]; the values
    // [B * Hkv][T][Ev] (V itself, read through its strides, without a
    // cache).
    const int64_t groups = g->b * g->hkv;
    std::vector<float> kt(static_cast<size_t>(groups * g->e * g->t));
    Gather(*g, in[4], *in[1], g->e, [&](int64_t group, int64_t t, const float* row) {
      float* dst = kt.data() + group * g->e * g->t + t;
      for (int64_t c = 0; c < g->e; ++c) dst[c * g->t] = row[c];
    });
    Tensor* present_k = nullptr;
    Tensor* present_v = nullptr;
    if (ctx.OutputRequested(1)) {
      ONNXKIT_ASSIGN_OR_RETURN(present_k,
                               ctx.AllocateOutputUninitialized(1, pb::kFloat, {g->b, g->hkv, g->t, g->e}));
      float* pk = present_k->mutable_data<float>();
      Gather(*g, in[4], *in[1], g->e, [&](int64_t group, int64_t t, const float* row) {
        std::copy(row, row + g->e, pk + (group * g->t + t) * g->e);
      });
    }
    std::vector<float> v_cache;
    const float* v = in[2]->data<float>();
    int64_t ldv = g->rank == 4 ? g->ev : g->hkv * g->ev;
    if (ctx.OutputRequested(2) || in[5] != nullptr) {
      float* pv = nullptr;
      if (ctx.OutputRequested(2)) {
        ONNXKIT_ASSIGN_OR_RETURN(present_v,
                                 ctx.AllocateOutputUninitialized(2, pb::kFloat, {g->b, g->hkv, g->t, g->ev}));
        pv = present_v->mutable_data<float>();
      } else {
        v_cache.resize(static_cast<size_t>(groups * g->t * g->ev));
        pv = v_cache.data();
      }
      Gather(*g, in[5], *in[2], g->ev, [&](int64_t group, int64_t t, const float* row) {
        std::copy(row, row + g->ev, pv + (group * g->t + t) * g->ev);
      });
      v = pv;
      ldv = g->ev;
    }
    const bool v_cached = v != in[2]->data<float>();
    std::vector<int64_t> y_shape = {g->b, g->hq, g->sq, g->ev};
    if (g->rank == 3) y_shape = {g->b, g->sq, g->hq * g->ev};
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_t, ctx.AllocateOutputUninitialized(0, pb::kFloat, y_shape));
    // The mask as float biases (a boolean one as 0 / -inf).
    std::vector<float> mask_bias;
    MaskView mv;
    if (mask != nullptr) {
      const float* m = nullptr;
      if (mask->dtype() == pb::kBool) {
        const uint8_t* b = static_cast<const uint8_t*>(mask->raw());
        mask_bias.resize(static_cast<size_t>(mask->size()));
        for (int64_t i = 0; i < mask->size(); ++i) {
          mask_bias[static_cast<size_t>(i)] = b[i] != 0 ? 0.f : -std::numeric_limits<float>::infinity();
        }
        m = mask_bias.data();
      } else {
        m = mask->data<float>();
      }
      mv = MaskView::Of(*mask, m);
    }
    const float scale = scale_ ? *scale_ : 1.f / std::sqrt(static_cast<float>(g->e));
    const int64_t reps = g->hq / g->hkv;
    const int64_t blocks = (g->sq + kRows - 1) / kRows, steps = g->b * g->hq * blocks;
    const float* q = in[0]->data<float>();
    float* y = y_t->mutable_data<float>();
    const Shapes& sh = *g;
    auto run_steps = [&](int64_t first, int64_t last) {
      std::vector<float> scores(static_cast<size_t>(kRows * sh.t));
      for (int64_t step = first; step < last; ++step) {
        const int64_t bh = step / blocks, r0 = step % blocks * kRows;
        const int64_t b = bh / sh.hq, h = bh % sh.hq, group = b * sh.hkv + h / reps;
        const int rows = static_cast<int>(std::min<int64_t>(kRows, sh.sq - r0));
        const float* qrow = sh.rank == 4 ? q + ((b * sh.hq + h) * sh.sq + r0) * sh.e
                                         : q + (b * sh.sq + r0) * sh.hq * sh.e + h * sh.e;
        const int64_t ldq = sh.rank == 4 ? sh.e : sh.hq * sh.e;
        SmallGemmRows(rows, qrow, ldq, kt.data() + group * sh.e * sh.t, sh.t, sh.e, sh.t, scores.data(),
                      sh.t);
        // Query i's absolute position: the cache length, else (an external
        // cache) the valid keys before this query block. Positions and
        // window bounds come from the model and its inputs (any int64), so
        // they are computed in 128 bits and only the clamped key range
        // narrows back.
        using Wide = __int128;
        const Wide valid = nonpad.empty() ? sh.t : nonpad[static_cast<size_t>(b)];
        const Wide offset = sh.past > 0 || nonpad.empty() ? Wide{sh.past} : valid - sh.sq;
        for (int r = 0; r < rows; ++r) {
          const int64_t i = r0 + r;
          const Wide pos = i + offset;
          Wide lo = 0, hi = std::min<Wide>(sh.t, valid) - 1;
          if (causal_) hi = std::min(hi, pos);
          if (left_ >= 0) lo = std::max(lo, pos - left_);
          if (right_ >= 0) hi = std::min(hi, pos + right_);
          const float* bias = nullptr;
          int64_t bias_step = 0;
          if (mask != nullptr) {
            bias = mv.Row(b, h, i);
            bias_step = mv.key_step;
            hi = std::min<Wide>(hi, mv.keys - 1);
          }
          lo = std::clamp<Wide>(lo, 0, sh.t);
          hi = std::clamp<Wide>(hi, -1, sh.t - 1);
          MaskedSoftmaxRow(scores.data() + r * sh.t, sh.t, scale, softcap_, bias, bias_step,
                           static_cast<int64_t>(lo), static_cast<int64_t>(hi));
        }
        const float* vh =
            v_cached || sh.rank == 4 ? v + group * sh.t * sh.ev : v + b * sh.t * ldv + (h / reps) * sh.ev;
        float* yrow = sh.rank == 4 ? y + ((b * sh.hq + h) * sh.sq + r0) * sh.ev
                                   : y + (b * sh.sq + r0) * sh.hq * sh.ev + h * sh.ev;
        const int64_t ldy = sh.rank == 4 ? sh.ev : sh.hq * sh.ev;
        SmallGemmRows(rows, scores.data(), sh.t, vh, ldv, sh.t, sh.ev, yrow, ldy);
      }
    };
    const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), steps));
    if (threads <= 1) {
      run_steps(0, steps);
      return absl::OkStatus();
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) run_steps(steps * t / threads, steps * (t + 1) / threads);
    return absl::OkStatus();
  }

 private:
  // B, heads, query rows, keys (past + new), head sizes.
  struct Shapes {
    int rank = 4;
    int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, past = 0, t = 0, e = 0, ev = 0;
  };

  // The mask broadcast onto [B, Hq, Sq, keys]: element strides (0 where it
  // broadcasts) and its key count.
  struct MaskView {
    const float* data = nullptr;
    int64_t b_step = 0, h_step = 0, row_step = 0, key_step = 0, keys = 0;

    static MaskView Of(const Tensor& m, const float* data) {
      int64_t dims[4] = {1, 1, 1, 1};
      for (int i = 0; i < m.rank(); ++i) dims[4 - m.rank() + i] = m.dim(i);
      MaskView v;
      v.data = data;
      v.keys = dims[3];
      v.key_step = dims[3] == 1 ? 0 : 1;
      v.row_step = dims[2] == 1 ? 0 : dims[3];
      v.h_step = dims[1] == 1 ? 0 : dims[2] * dims[3];
      v.b_step = dims[0] == 1 ? 0 : dims[1] * dims[2] * dims[3];
      return v;
    }
    const float* Row(int64_t b, int64_t h, int64_t i) const {
      return data + b * b_step + h * h_step + i * row_step;
    }
  };

  std::optional<Shapes> Resolve(const Tensor* const* in) const {
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
    for (int i : {0, 1, 2, 4, 5}) {
      if (in[i] != nullptr && (in[i]->dtype() != pb::kFloat || in[i]->size() == 0)) return std::nullopt;
    }
    Shapes s;
    s.rank = q.rank();
    if ((s.rank != 3 && s.rank != 4) || k.rank() != s.rank || v.rank() != s.rank) return std::nullopt;
    if (s.rank == 4) {
      s.b = q.dim(0), s.hq = q.dim(1), s.sq = q.dim(2), s.e = q.dim(3);
      s.hkv = k.dim(1), s.skv = k.dim(2), s.ev = v.dim(3);
      if (k.dim(0) != s.b || k.dim(3) != s.e || v.dim(0) != s.b || v.dim(1) != s.hkv || v.dim(2) != s.skv) {
        return std::nullopt;
      }
    } else {
      if (q_heads_ < 1 || kv_heads_ < 1 || q.dim(2) % q_heads_ != 0 || k.dim(2) % kv_heads_ != 0 ||
          v.dim(2) % kv_heads_ != 0) {
        return std::nullopt;
      }
      s.b = q.dim(0), s.sq = q.dim(1), s.hq = q_heads_, s.e = q.dim(2) / q_heads_;
      s.hkv = kv_heads_, s.skv = k.dim(1), s.ev = v.dim(2) / kv_heads_;
      if (k.dim(0) != s.b || k.dim(2) / kv_heads_ != s.e || v.dim(0) != s.b || v.dim(1) != s.skv)
        return std::nullopt;
    }
    if (s.hkv < 1 || s.hq % s.hkv != 0) return std::nullopt;
    if ((in[4] == nullptr) != (in[5] == nullptr)) return std::nullopt;
    if (in[4] != nullptr) {
      if (in[4]->rank() != 4) return std::nullopt;
      s.past = in[4]->dim(2);
      if (in[4]->shape() != std::vector<int64_t>{s.b, s.hkv, s.past, s.e} ||
          in[5]->shape() != std::vector<int64_t>{s.b, s.hkv, s.past, s.ev}) {
        return std::nullopt;
      }
    }
    s.t = s.past + s.skv;
    if (const Tensor* m = in[3]) {
      if ((m->dtype() != pb::kFloat && m->dtype() != pb::kBool) || m->rank() < 1 || m->rank() > 4 ||
          m->size() == 0) {
        return std::nullopt;
      }
      const int64_t want[4] = {s.b, s.hq, s.sq, s.t};
      for (int i = 0; i < m->rank(); ++i) {
        const int d = 4 - m->rank() + i;
        const int64_t n = m->dim(i);
        if (d == 3 ? n > s.t : (n != 1 && n != want[d])) return std::nullopt;
      }
    }
    if (s.sq == 0 || s.t == 0 || s.e == 0 || s.ev == 0) return std::nullopt;
    return s;
  }

  // Calls f(group, t, row) for every kv head group (b * Hkv + h) and key
  // t of concat(past, new) along the sequence; `row` holds its `width`
  // values (read from the 3-D or 4-D new tensor by its layout).
  template <typename F>
  static void Gather(const Shapes& s, const Tensor* past, const Tensor& cur, int64_t width, F f) {
    const float* p = past != nullptr ? past->data<float>() : nullptr;
    const float* c = cur.data<float>();
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t h = 0; h < s.hkv; ++h) {
        const int64_t group = b * s.hkv + h;
        for (int64_t t = 0; t < s.t; ++t) {
          const float* row;
          if (t < s.past) {
            row = p + (group * s.past + t) * width;
          } else if (s.rank == 4) {
            row = c + (group * s.skv + (t - s.past)) * width;
          } else {
            row = c + ((b * s.skv + (t - s.past)) * s.hkv + h) * width;
          }
          f(group, t, row);
        }
      }
    }
  }

  bool causal_;
  int64_t q_heads_, kv_heads_;
  std::optional<float> scale_;
  float softcap_;
  int64_t left_, right_;
  std::unique_ptr<Kernel> fallback_;
};

// The RotaryEmbedding op (opset 23) on float32: the reference's rotation,
// computed in float, rows in parallel. Other types, shapes and position
// ids outside the caches run the reference kernel (which reports them).
class RotaryOpKernel : public Kernel {
 public:
  RotaryOpKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback)
      : interleaved_(reference::AttrInt(node, "interleaved", 0) != 0),
        num_heads_(reference::AttrInt(node, "num_heads", 0)),
        rot_dim_(reference::AttrInt(node, "rotary_embedding_dim", 0)),
        fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cos_t, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* sin_t, ctx.Input(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* pos_t, ctx.OptionalInput(3));
    if (x->dtype() != pb::kFloat || cos_t->dtype() != pb::kFloat || sin_t->dtype() != pb::kFloat ||
        x->size() == 0) {
      return fallback_->Run(ctx);
    }
    std::optional<reference::RotaryDims> dims = reference::RotaryDimsOf(*x, num_heads_);
    if (!dims) return fallback_->Run(ctx);
    const int64_t b = dims->b, s = dims->s, h = dims->h, d = dims->d;
    const int64_t rot = rot_dim_ > 0 ? rot_dim_ : d;
    if (rot > d || rot % 2 != 0) return fallback_->Run(ctx);
    const int64_t half = rot / 2;
    const int64_t* positions = nullptr;
    if (pos_t != nullptr) {
      if (pos_t->dtype() != pb::kInt64 || pos_t->shape() != std::vector<int64_t>{b, s} ||
          cos_t->rank() != 2 || cos_t->dim(1) != half || sin_t->shape() != cos_t->shape()) {
        return fallback_->Run(ctx);
      }
      positions = pos_t->data<int64_t>();
      for (int64_t i = 0; i < b * s; ++i) {
        if (positions[i] < 0 || positions[i] >= cos_t->dim(0)) return fallback_->Run(ctx);
      }
    } else if (cos_t->shape() != std::vector<int64_t>{b, s, half} || sin_t->shape() != cos_t->shape()) {
      return fallback_->Run(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y_t, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    const float* xv = x->data<float>();
    const float* cv = cos_t->data<float>();
    const float* sv = sin_t->data<float>();
    float* y = y_t->mutable_data<float>();
    const bool four = x->rank() == 4;
    // One (b, s, h) row of d values per step.
    ParallelFor(b * s * h, b * s * h * d >= 65536, [&](int64_t step) {
      const int64_t hi = step % h, bs = step / h, si = bs % s, bi = bs / s;
      const int64_t row = positions == nullptr ? bs : positions[bs];
      const float* c = cv + row * half;
      const float* sn = sv + row * half;
      const int64_t base = four ? ((bi * h + hi) * s + si) * d : (bs * h + hi) * d;
      const float* in = xv + base;
      float* out = y + base;
      if (interleaved_) {
        for (int64_t k = 0; k < half; ++k) {
          const float x1 = in[2 * k], x2 = in[2 * k + 1];
          out[2 * k] = c[k] * x1 - sn[k] * x2;
          out[2 * k + 1] = sn[k] * x1 + c[k] * x2;
        }
      } else {
        for (int64_t k = 0; k < half; ++k) {
          const float x1 = in[k], x2 = in[k + half];
          out[k] = c[k] * x1 - sn[k] * x2;
          out[k + half] = sn[k] * x1 + c[k] * x2;
        }
      }
      std::copy(in + rot, in + d, out + rot);
    });
    return absl::OkStatus();
  }

 private:
  bool interleaved_;
  int64_t num_heads_, rot_dim_;
  std::unique_ptr<Kernel> fallback_;
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

absl::StatusOr<std::unique_ptr<Kernel>> MakeAttention(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  return std::unique_ptr<Kernel>(new AttentionOpKernel(node, std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRotaryEmbedding(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  return std::unique_ptr<Kernel>(new RotaryOpKernel(node, std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
