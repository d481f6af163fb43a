// Channel shuffles inside Conv sequences (conv_sequence.cc): checking a
// shuffle's Reshape shapes against its source, the strided 5-D views
// between which one reorder shuffles the channels, and the loop that
// shuffles dense channels-last tensors in 2 or 4 groups instead (each
// pixel's channels gathered 16 at a time in vector registers: a few times
// quicker than oneDNN's strided reorder). Also the transposes between
// plain and channels-last tensors, or 16-channel blocks, at a sequence's
// ends (16 x 16 tiles in registers), quicker than oneDNN's reorders on the
// small images where sequences enter and leave their layout, and 2-3 x
// quicker into and out of blocks padded past the channels (58 or 116 of
// them: oneDNN's generic reorder).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/conv_common.h"

namespace onnxkit::runner::cpu {

using dnnl::memory;

namespace {

// The shape a Reshape (allowzero 0) of a tensor of shape `in` to `spec`
// gives: 0 copies the input dim, -1 takes what is left; nullopt when the
// spec does not fit.
std::optional<std::vector<int64_t>> ReshapeTo(const std::vector<int64_t>& in, const Tensor& spec) {
  int64_t total = 1;
  for (int64_t d : in) total *= d;
  std::vector<int64_t> out(spec.data<int64_t>(), spec.data<int64_t>() + spec.size());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= in.size()) return std::nullopt;
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else if (out[i] <= 0 || out[i] > total) {
      return std::nullopt;
    } else {
      known *= out[i];
      if (known > total) return std::nullopt;
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    out[static_cast<size_t>(infer)] = total / known;
  }
  int64_t product = 1;
  for (int64_t d : out) product *= d;
  if (product != total) return std::nullopt;
  return out;
}

// Shuffles pixels [begin, end): y[p, i * G + j] = x[p, j * C/G + i], G
// being 2 or 4; 16 / G channels of each group make one vector.
__attribute__((target("avx512f"))) void ShufflePixels(const float* x, float* y, int64_t begin, int64_t end,
                                                      int64_t channels, int64_t groups) {
  const int64_t per_group = channels / groups, run = 16 / groups, full = per_group / run * run;
  // Lane i * G + j of the result takes lane j * run + i of the loads.
  alignas(64) int32_t order[16];
  for (int64_t i = 0; i < run; ++i) {
    for (int64_t j = 0; j < groups; ++j) order[i * groups + j] = static_cast<int32_t>(j * run + i);
  }
  const __m512i index = _mm512_load_si512(order);
  for (int64_t p = begin; p < end; ++p) {
    const float* xp = x + p * channels;
    float* yp = y + p * channels;
    for (int64_t i = 0; i < full; i += run) {
      // (The masked forms: the plain ones read an undefined register.)
      __m512 v = _mm512_setzero_ps();
      if (groups == 2) {
        __m512d halves = _mm512_castps_pd(v);
        halves = _mm512_mask_insertf64x4(halves, 0xFF, halves, _mm256_castps_pd(_mm256_loadu_ps(xp + i)), 0);
        halves = _mm512_mask_insertf64x4(halves, 0xFF, halves,
                                         _mm256_castps_pd(_mm256_loadu_ps(xp + per_group + i)), 1);
        v = _mm512_castpd_ps(halves);
      } else {
        v = _mm512_mask_insertf32x4(v, 0xFFFF, v, _mm_loadu_ps(xp + i), 0);
        v = _mm512_mask_insertf32x4(v, 0xFFFF, v, _mm_loadu_ps(xp + per_group + i), 1);
        v = _mm512_mask_insertf32x4(v, 0xFFFF, v, _mm_loadu_ps(xp + 2 * per_group + i), 2);
        v = _mm512_mask_insertf32x4(v, 0xFFFF, v, _mm_loadu_ps(xp + 3 * per_group + i), 3);
      }
      _mm512_storeu_ps(yp + i * groups, _mm512_maskz_permutexvar_ps(0xFFFF, index, v));
    }
    for (int64_t i = full; i < per_group; ++i) {
      for (int64_t j = 0; j < groups; ++j) yp[i * groups + j] = xp[j * per_group + i];
    }
  }
}

// 16 floats at p, or with kMasked those of `mask` (the rest zero): the
// full tiles take plain accesses (quicker).
template <bool kMasked>
__attribute__((target("avx512f"))) inline __m512 Load16(__mmask16 mask, const float* p) {
  if constexpr (kMasked) {
    return _mm512_maskz_loadu_ps(mask, p);
  } else {
    return _mm512_loadu_ps(p);
  }
}

template <bool kMasked>
__attribute__((target("avx512f"))) inline void Store16(float* p, __mmask16 mask, __m512 v) {
  if constexpr (kMasked) {
    _mm512_mask_storeu_ps(p, mask, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}

// b = a transposed for 16 rows of 16 floats: b[c * ldb + r] = a[r * lda + c].
// Rows are interleaved in pairs, then in 64-bit pairs (each 128-bit lane
// then holds one column of four rows), then the lanes of four such
// vectors are transposed. kCheck: `bad` gets the lanes holding NaN or -inf.
// Rows of a from `rows_in` on are read as zeros (not read); rows of b from
// `rows_out` on are not written (a channel block padded past the channels,
// or the matrix's last columns). Only the first `cols_in` columns of a are
// read (the rest as zeros), and only the lanes of `store` are written in
// each row of b (the matrix's last rows).
template <bool kCheck, bool kMasked = false>
__attribute__((target("avx512f"))) inline void Transpose16x16(const float* a, int64_t lda, float* b,
                                                              int64_t ldb, __mmask16& bad,
                                                              int64_t rows_in = 16, int64_t rows_out = 16,
                                                              int64_t cols_in = 16,
                                                              __mmask16 store = 0xFFFF) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 load =
      cols_in >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols_in) - 1);
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    const __m512 r0 = 2 * i < rows_in ? Load16<kMasked>(load, a + (2 * i) * lda) : _mm512_setzero_ps();
    const __m512 r1 =
        2 * i + 1 < rows_in ? Load16<kMasked>(load, a + (2 * i + 1) * lda) : _mm512_setzero_ps();
    if constexpr (kCheck) {
      // Not greater than -inf, or unordered: -inf or NaN.
      bad |= _mm512_cmp_ps_mask(r0, minus_inf, _CMP_NGT_UQ) | _mm512_cmp_ps_mask(r1, minus_inf, _CMP_NGT_UQ);
    }
    t[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r0, r1);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r0, r1);
  }
  // u[g * 4 + j], lane L: column 4L + j of rows 4g .. 4g + 3.
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, t1, t3));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 s0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[j], u[4 + j], 0x44),
                 s1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[j], u[4 + j], 0xEE);
    const __m512 s2 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + j], u[12 + j], 0x44);
    const __m512 s3 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + j], u[12 + j], 0xEE);
    if (j < rows_out) Store16<kMasked>(b + j * ldb, store, _mm512_maskz_shuffle_f32x4(0xFFFF, s0, s2, 0x88));
    if (4 + j < rows_out)
      Store16<kMasked>(b + (4 + j) * ldb, store, _mm512_maskz_shuffle_f32x4(0xFFFF, s0, s2, 0xDD));
    if (8 + j < rows_out)
      Store16<kMasked>(b + (8 + j) * ldb, store, _mm512_maskz_shuffle_f32x4(0xFFFF, s1, s3, 0x88));
    if (12 + j < rows_out)
      Store16<kMasked>(b + (12 + j) * ldb, store, _mm512_maskz_shuffle_f32x4(0xFFFF, s1, s3, 0xDD));
  }
}

// The lane indices of TransposeFewRows: lane l of vector k holds row
// (16k + l) % kRows of column (16k + l) / kRows; `pair` picks it from the
// first two rows (16 and up: the second), `third` from the third, whose
// lanes are `from_third`.
template <int kRows>
struct FewRowsIndex {
  alignas(64) int32_t pair[3][16] = {};
  alignas(64) int32_t third[3][16] = {};
  __mmask16 from_third[3] = {};
  constexpr FewRowsIndex() {
    for (int k = 0; k < 3; ++k) {
      for (int l = 0; l < 16; ++l) {
        const int f = 16 * k + l, column = f / kRows % 16, row = f % kRows;
        pair[k][l] = column + (row == 1 ? 16 : 0);
        third[k][l] = column;
        if (row == 2) from_third[k] = static_cast<__mmask16>(from_third[k] | (1u << l));
      }
    }
  }
};

// Columns [begin, end) of a matrix of kRows rows (kRows < 4; `begin` a
// multiple of 16) into b = a transposed, whose rows are the kRows floats
// of a column, together: 16 columns (kRows vectors) at a time, each vector
// written gathering its lanes from the loaded rows by index. Rows from
// `rows_in` on read as zeros. kCheck: `bad` gets the lanes holding NaN or
// -inf.
template <int kRows, bool kCheck>
__attribute__((target("avx512f"))) void TransposeFewRows(const float* a, int64_t cols, float* b,
                                                         int64_t begin, int64_t end, int64_t rows_in,
                                                         __mmask16& bad) {
  static_assert(kRows >= 1 && kRows <= 3);
  static constexpr FewRowsIndex<kRows> kIndex;
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512i pair[3], third[3];
  for (int k = 0; k < kRows; ++k) {
    pair[k] = _mm512_load_si512(kIndex.pair[k]);
    third[k] = _mm512_load_si512(kIndex.third[k]);
  }
  for (int64_t c = begin; c < end; c += 16) {
    const int64_t w = std::min<int64_t>(16, end - c);
    const __mmask16 load = w == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << w) - 1);
    __m512 r[3];
    for (int i = 0; i < kRows; ++i) {
      r[i] = i < rows_in ? _mm512_maskz_loadu_ps(load, a + i * cols + c) : _mm512_setzero_ps();
      if constexpr (kCheck) bad |= _mm512_cmp_ps_mask(r[i], minus_inf, _CMP_NGT_UQ);
    }
    float* out = b + c * kRows;
    const int64_t total = kRows * w;
    for (int k = 0; k < kRows && 16 * k < total; ++k) {
      const int64_t n = std::min<int64_t>(16, total - 16 * k);
      const __mmask16 store = static_cast<__mmask16>(n == 16 ? 0xFFFFu : (1u << n) - 1);
      __m512 v = r[0];
      if constexpr (kRows > 1) v = _mm512_maskz_permutex2var_ps(0xFFFF, r[0], pair[k], r[1]);
      if constexpr (kRows > 2) v = _mm512_mask_permutexvar_ps(v, kIndex.from_third[k], third[k], r[2]);
      _mm512_mask_storeu_ps(out + 16 * k, store, v);
    }
  }
}

// The lane indices of TransposeFewColumns: lane l of column j's vector is
// float kCols * l + j of the 16 * kCols loaded; `pair` picks it from the
// first two vectors loaded, `third` from the third, for the lanes
// `from_third`.
template <int kCols>
struct FewColumnsIndex {
  alignas(64) int32_t pair[3][16] = {};
  alignas(64) int32_t third[3][16] = {};
  __mmask16 from_third[3] = {};
  constexpr FewColumnsIndex() {
    for (int j = 0; j < 3; ++j) {
      for (int l = 0; l < 16; ++l) {
        const int f = (kCols * l + j) % 48;
        pair[j][l] = f < 32 ? f : 0;
        third[j][l] = f % 16;
        if (f >= 32) from_third[j] = static_cast<__mmask16>(from_third[j] | (1u << l));
      }
    }
  }
};

// Rows [begin, end) of a matrix of kCols columns (kCols < 4; `begin` a
// multiple of 16) into b = a transposed (kCols rows): 16 rows (kCols
// vectors, together in a) at a time, each column's vector gathered by
// index. kCheck: `bad` gets the lanes holding NaN or -inf.
template <int kCols, bool kCheck>
__attribute__((target("avx512f"))) void TransposeFewColumns(const float* a, int64_t rows, float* b,
                                                            int64_t begin, int64_t end, __mmask16& bad) {
  static_assert(kCols >= 1 && kCols <= 3);
  static constexpr FewColumnsIndex<kCols> kIndex;
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512i pair[3], third[3];
  for (int j = 0; j < kCols; ++j) {
    pair[j] = _mm512_load_si512(kIndex.pair[j]);
    third[j] = _mm512_load_si512(kIndex.third[j]);
  }
  for (int64_t r = begin; r < end; r += 16) {
    const int64_t n = std::min<int64_t>(16, end - r), total = kCols * n;
    __m512 v[3];
    for (int k = 0; k < kCols; ++k) {
      const int64_t left = std::max<int64_t>(0, std::min<int64_t>(16, total - 16 * k));
      const __mmask16 load = static_cast<__mmask16>(left == 16 ? 0xFFFFu : (1u << left) - 1);
      v[k] = _mm512_maskz_loadu_ps(load, a + r * kCols + 16 * k);
      if constexpr (kCheck) bad |= _mm512_cmp_ps_mask(v[k], minus_inf, _CMP_NGT_UQ);
    }
    const __mmask16 store = static_cast<__mmask16>(n == 16 ? 0xFFFFu : (1u << n) - 1);
    for (int j = 0; j < kCols; ++j) {
      __m512 out = v[0];
      if constexpr (kCols > 1) out = _mm512_maskz_permutex2var_ps(0xFFFF, v[0], pair[j], v[1]);
      if constexpr (kCols > 2) out = _mm512_mask_permutexvar_ps(out, kIndex.from_third[j], third[j], v[2]);
      _mm512_mask_storeu_ps(b + j * rows + r, store, out);
    }
  }
}

// Rows [begin, end) and columns [col_begin, col_end) of a (rows x cols,
// row-major) into b = a transposed (cols x rows): 16 x 16 tiles in
// registers; at the last rows and columns masked tiles (neither reading nor
// writing past the matrix) where at least kMinMasked rows or columns are
// left, else one float at a time; a matrix of fewer rows (an image's
// three colour planes) a few vectors at a time by index. `col_begin` is a
// multiple of 16; columns of a from `cols_out` on are not written to b (a
// padded channel block, into or out of; col_end <= cols_out). Rows of a
// from `rows_in` on are taken as zeros (not read). kCheck: true when those
// rows hold NaN or -inf.
template <bool kCheck>
__attribute__((target("avx512f"))) bool TransposeRows(const float* a, int64_t rows, int64_t cols, float* b,
                                                      int64_t begin, int64_t end, int64_t rows_in,
                                                      int64_t col_begin, int64_t col_end) {
  constexpr int64_t kMinMasked = 4;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  __mmask16 bad = 0;
  bool edge_bad = false;
  auto one = [&](int64_t r, int64_t c) {
    const float v = r < rows_in ? a[r * cols + c] : 0.f;
    if constexpr (kCheck) edge_bad |= !(v > kMinusInf);
    b[c * rows + r] = v;
  };
  if (begin == 0 && end == rows && rows < kMinMasked) {
    if (rows == 1) TransposeFewRows<1, kCheck>(a, cols, b, col_begin, col_end, rows_in, bad);
    if (rows == 2) TransposeFewRows<2, kCheck>(a, cols, b, col_begin, col_end, rows_in, bad);
    if (rows == 3) TransposeFewRows<3, kCheck>(a, cols, b, col_begin, col_end, rows_in, bad);
    return bad != 0;
  }
  if (cols < kMinMasked && col_begin == 0 && col_end == cols && rows_in >= end && begin % 16 == 0) {
    if (cols == 1) TransposeFewColumns<1, kCheck>(a, rows, b, begin, end, bad);
    if (cols == 2) TransposeFewColumns<2, kCheck>(a, rows, b, begin, end, bad);
    if (cols == 3) TransposeFewColumns<3, kCheck>(a, rows, b, begin, end, bad);
    return bad != 0;
  }
  for (int64_t r = begin; r < end; r += 16) {
    const int64_t n = std::min<int64_t>(16, end - r);
    if (n < kMinMasked) {
      for (int64_t i = r; i < end; ++i) {
        for (int64_t c = col_begin; c < col_end; ++c) one(i, c);
      }
      break;
    }
    const __mmask16 store = static_cast<__mmask16>(n == 16 ? 0xFFFFu : (1u << n) - 1);
    // Rows past `end` are another strip's (or past the matrix): not read.
    const int64_t in = std::min(rows_in, end) - r;
    int64_t c = col_begin;
    if (n == 16) {
      for (; c + 16 <= cols && c < col_end; c += 16)
        Transpose16x16<kCheck>(a + r * cols + c, cols, b + c * rows + r, rows, bad, in, col_end - c);
    }
    for (; c < col_end && cols - c >= kMinMasked; c += 16) {
      Transpose16x16<kCheck, true>(a + r * cols + c, cols, b + c * rows + r, rows, bad, in, col_end - c,
                                   std::min<int64_t>(16, cols - c), store);
    }
    for (int64_t i = r; i < r + n; ++i) {
      for (int64_t k = c; k < col_end; ++k) one(i, k);
    }
  }
  return bad != 0 || edge_bad;
}

}  // namespace

namespace {

// True when `desc` is a dense float32 [N, C, H, W] without blocking whose
// dims, from the innermost out, are `order` (each stride the product of
// the dims inside it).
bool Dense4d(const memory::desc& desc, const int (&order)[4]) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.offset0 != 0 || d.data_type != dnnl_f32)
    return false;
  int64_t stride = 1;
  for (int dim : order) {
    if (d.format_desc.blocking.strides[dim] != stride) return false;
    stride *= d.dims[dim];
  }
  return true;
}

// True when `desc` is a dense float32 [N, C, H, W] stored plain.
bool DensePlain(const memory::desc& desc) { return Dense4d(desc, {3, 2, 1, 0}); }

}  // namespace

bool DenseChannelsLast(const memory::desc& desc) { return Dense4d(desc, {1, 3, 2, 0}); }

bool OwnShuffle(const memory::desc& from, const memory::desc& to, int64_t groups) {
  if (groups != 2 && groups != 4) return false;
  if (!WinogradSupported()) return false;  // AVX-512
  return DenseChannelsLast(from) && DenseChannelsLast(to) && from.data.dims[1] % groups == 0 &&
         std::equal(from.data.dims, from.data.dims + 4, to.data.dims);
}

void ShuffleChannelsLast(const memory::desc& desc, int64_t groups, const float* x, float* y) {
  const dnnl_memory_desc_t& d = desc.data;
  const int64_t channels = d.dims[1], pixels = d.dims[0] * d.dims[2] * d.dims[3];
  // Threads for tensors of at least 64K floats each.
  constexpr int64_t kMinPerThread = 1 << 16;
  const int64_t threads = std::min<int64_t>(omp_get_max_threads(), pixels * channels / kMinPerThread);
  if (threads <= 1) {
    ShufflePixels(x, y, 0, pixels, channels, groups);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
  for (int64_t t = 0; t < threads; ++t) {
    ShufflePixels(x, y, pixels * t / threads, pixels * (t + 1) / threads, channels, groups);
  }
}

namespace {

// True when `desc` is a dense float32 [N, C, H, W] in 16-channel blocks
// ([N, ceil(C/16), H, W, 16]; the last block padded when 16 does not
// divide C).
bool DenseBlocked16(const memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked || b.inner_nblks != 1 || b.inner_blks[0] != 16 ||
      b.inner_idxs[0] != 1 || d.offset0 != 0 || d.data_type != dnnl_f32 ||
      d.padded_dims[1] != (d.dims[1] + 15) / 16 * 16 ||
      !std::equal(d.dims + 2, d.dims + 4, d.padded_dims + 2) || d.dims[0] != d.padded_dims[0])
    return false;
  const int64_t pixels = d.dims[2] * d.dims[3];
  return b.strides[3] == 16 && b.strides[2] == d.dims[3] * 16 && b.strides[1] == pixels * 16 &&
         b.strides[0] == d.padded_dims[1] * pixels;
}

// A reorder between plain and channels-last or 16-channel blocks as a
// batch of `count` matrix transposes, each of rows x cols dense floats:
// `per_image` of them in each image, matrix k of an image at k * rows *
// cols floats from its start in both tensors, the images `from_image` and
// `to_image` floats apart. Into blocks, the last matrix of an image has
// `valid` rows of channels (the rest read as zeros); out of blocks, the
// last writes `valid` rows.
struct Transposes {
  int64_t count = 0, rows = 0, cols = 0;
  bool blocks = false;  // between plain and 16-channel blocks
  bool padded = false;  // the last block of each image holds fewer than 16 channels
  bool into_blocks = false;
  int64_t per_image = 1, from_image = 0, to_image = 0, valid = 16;
};

std::optional<Transposes> TransposesOf(const memory::desc& from, const memory::desc& to) {
  if (!std::equal(from.data.dims, from.data.dims + 4, to.data.dims)) return std::nullopt;
  const dnnl_dims_t& d = from.data.dims;
  const int64_t n = d[0], c = d[1], pixels = d[2] * d[3];
  const bool from_plain = DensePlain(from), to_plain = DensePlain(to);
  if (from_plain && DenseChannelsLast(to))
    return Transposes{
        .count = n, .rows = c, .cols = pixels, .from_image = c * pixels, .to_image = c * pixels};
  if (DenseChannelsLast(from) && to_plain)
    return Transposes{
        .count = n, .rows = pixels, .cols = c, .from_image = c * pixels, .to_image = c * pixels};
  const int64_t blocks = (c + 15) / 16, padded_image = blocks * 16 * pixels;
  const int64_t valid = c - (blocks - 1) * 16;
  if (from_plain && DenseBlocked16(to))
    return Transposes{.count = n * blocks,
                      .rows = 16,
                      .cols = pixels,
                      .blocks = true,
                      .padded = valid != 16,
                      .into_blocks = true,
                      .per_image = blocks,
                      .from_image = c * pixels,
                      .to_image = padded_image,
                      .valid = valid};
  if (DenseBlocked16(from) && to_plain)
    return Transposes{.count = n * blocks,
                      .rows = pixels,
                      .cols = 16,
                      .blocks = true,
                      .padded = valid != 16,
                      .per_image = blocks,
                      .from_image = padded_image,
                      .to_image = c * pixels,
                      .valid = valid};
  return std::nullopt;
}

}  // namespace

bool OwnTranspose(const memory::desc& from, const memory::desc& to, bool blocks) {
  if (!WinogradSupported() || from.data.ndims != 4 || to.data.ndims != 4) return false;  // AVX-512
  std::optional<Transposes> t = TransposesOf(from, to);
  // Into or out of channel blocks the channels fill, oneDNN's reorder is
  // quicker (but for the check of TransposeChannelsFindingNaN); where the
  // last block is padded it takes a slow generic path (2-3 x slower than
  // the transposes on ShuffleNet-v2's 58 to 232 channels). Rows of the
  // result 4 KiB apart (or a multiple: 1024 channels channels-last) put a
  // tile's 16 stores in one cache set: oneDNN's reorder is quicker there too.
  return t.has_value() && (blocks || !t->blocks || t->padded) && t->rows % 1024 != 0;
}

namespace {

// nullopt when `from` to `to` is not one of TransposesOf's; else, with
// kCheck, whether x holds NaN or -inf.
template <bool kCheck>
std::optional<bool> Transpose(const memory::desc& from, const memory::desc& to, const float* x, float* y) {
  std::optional<Transposes> t = TransposesOf(from, to);
  if (!t) return std::nullopt;
  const int64_t matrix = t->rows * t->cols;
  // Threads for tensors of at least 16K floats each: whole matrices where
  // there are enough of them, else bands of columns of a (each thread
  // writing whole rows of the result: strips of rows would have threads
  // write parts of the same rows, sharing cache lines), else, where the
  // columns are too few, strips of 16 rows.
  constexpr int64_t kMinPerThread = 1 << 14;
  const int64_t max_threads = omp_get_max_threads();
  const int64_t tiles = (t->rows + 15) / 16, col_tiles = (t->cols + 15) / 16;
  const bool by_matrix = t->count >= max_threads, by_columns = !by_matrix && col_tiles >= max_threads;
  // Units: matrices, (matrix, band) pairs or (matrix, strip) pairs.
  const int64_t per_matrix = by_matrix ? 1 : by_columns ? max_threads : tiles;
  const int64_t band = (col_tiles + max_threads - 1) / max_threads * 16, units = t->count * per_matrix;
  const int64_t threads = std::min<int64_t>({max_threads, units, matrix * t->count / kMinPerThread});
  // Rows [begin, end) and columns [col_begin, col_end) of matrix i.
  auto part = [&](int64_t i, int64_t begin, int64_t end, int64_t col_begin, int64_t col_end) {
    const int64_t image = i / t->per_image, k = i % t->per_image;
    const bool last = k + 1 == t->per_image;
    const int64_t rows_in = last && t->into_blocks ? t->valid : t->rows;
    const int64_t cols_out = last && t->blocks && !t->into_blocks ? t->valid : t->cols;
    return TransposeRows<kCheck>(x + image * t->from_image + k * matrix, t->rows, t->cols,
                                 y + image * t->to_image + k * matrix, begin, end, rows_in, col_begin,
                                 std::min(col_end, cols_out));
  };
  bool found = false;
  if (threads <= 1) {
    for (int64_t i = 0; i < t->count; ++i) found |= part(i, 0, t->rows, 0, t->cols);
    return found;
  }
  // Each thread takes a run of units; strips of one matrix next to each
  // other in it go in one call.
#pragma omp parallel num_threads(static_cast <int>(threads)) reduction(| : found)
  {
    const int64_t thread = omp_get_thread_num();
    const int64_t end = units * (thread + 1) / threads;
    for (int64_t u = units * thread / threads; u < end;) {
      const int64_t i = u / per_matrix, k = u % per_matrix;
      if (by_matrix) {
        found |= part(i, 0, t->rows, 0, t->cols);
        ++u;
      } else if (by_columns) {
        found |= part(i, 0, t->rows, k * band, std::min(t->cols, k * band + band));
        ++u;
      } else {
        const int64_t last = std::min(end, (i + 1) * per_matrix);
        found |= part(i, k * 16, std::min(t->rows, (last - i * per_matrix) * 16), 0, t->cols);
        u = last;
      }
    }
  }
  return found;
}

}  // namespace

absl::Status TransposeChannels(const memory::desc& from, const memory::desc& to, const float* x, float* y) {
  if (!Transpose<false>(from, to, x, y)) return absl::InternalError("a transpose between unexpected layouts");
  return absl::OkStatus();
}

absl::StatusOr<bool> TransposeChannelsFindingNaN(const memory::desc& from, const memory::desc& to,
                                                 const float* x, float* y) {
  std::optional<bool> found = Transpose<true>(from, to, x, y);
  if (!found) return absl::InternalError("a transpose between unexpected layouts");
  return *found;
}

// The 4-D strided `desc` ([N, C, H, W], no blocking) as [N, C/G, G, H, W]
// (G = `groups`): with `source`, element (n, i, j) is channel j * C/G + i
// (the value a channel shuffle reads); else channel i * G + j (the value
// it writes). nullopt when `desc` is blocked or not 4-D.
std::optional<memory::desc> ChannelView(const memory::desc& desc, int64_t groups, bool source) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.offset0 != 0 || groups <= 0 || d.dims[1] % groups != 0)
    return std::nullopt;
  const dnnl_dims_t& st = d.format_desc.blocking.strides;
  const int64_t per_group = d.dims[1] / groups;
  memory::dims dims = {d.dims[0], per_group, groups, d.dims[2], d.dims[3]};
  memory::dims strides = {st[0], source ? st[1] : st[1] * groups, source ? st[1] * per_group : st[1], st[2], st[3]};
  return memory::desc(dims, static_cast<memory::data_type>(d.data_type), strides);
}

// Checks the shapes of stage `stage`'s channel shuffle against its source
// (`x_shape`, held as `current`) and sets `from`, the view it reads.
bool ShuffleViews(KernelContext& ctx, const SequenceStage& stage, const std::vector<int64_t>& x_shape,
                  const memory::desc& current, memory::desc* from) {
  absl::StatusOr<const Tensor*> shape = ctx.Input(stage.shuffle_shape);
  absl::StatusOr<const Tensor*> back = ctx.Input(stage.shuffle_back);
  if (!shape.ok() || !back.ok() || x_shape.size() != 4) return false;
  for (const Tensor* t : {*shape, *back}) {
    if (t->dtype() != pb::kInt64 || t->rank() != 1) return false;
  }
  std::optional<std::vector<int64_t>> split = ReshapeTo(x_shape, **shape);
  if (!split || split->size() != 5) return false;
  const std::vector<int64_t>& s = *split;
  const int64_t groups = s[1];
  std::optional<std::vector<int64_t>> to = ReshapeTo({s[0], s[2], s[1], s[3], s[4]}, **back);
  if (!to || *to != x_shape) return false;
  if (groups <= 0 || x_shape[1] % groups != 0 || s[0] != x_shape[0] || s[2] != x_shape[1] / groups ||
      s[3] != x_shape[2] || s[4] != x_shape[3])
    return false;
  bool ok = false;
  absl::Status status = Guard("shuffle view", [&] {
    std::optional<memory::desc> view = ChannelView(current, groups, /*source=*/true);
    if (view) *from = *view;
    ok = view.has_value();
  });
  return status.ok() && ok;
}

}  // namespace onnxkit::runner::cpu
