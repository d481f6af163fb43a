// A MatMul by 4- or 8-bit block-quantized weights (ONNX Runtime's
// MatMulNBits, written as standard ops by lib/ops/contrib_lowering): a few
// rows of A (decoding one token) are multiplied by the packed codes
// directly, each block's codes turned into floats in registers, so a step
// reads an eighth (a quarter) of the bytes of the float weights. More rows
// (a prompt) dequantize the weights a panel of columns at a time into
// scratch for the packed product (matmul_packed.h; oneDNN's sgemm where it
// does not apply): the session holds the codes alone. Where the session
// computed the float weights after all (they feed other nodes too), more
// rows take them (oneDNN's MatMul, the fallback). Also the Gather of
// GatherBlockQuantized's rows, dequantized as they are gathered.
#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dnnl.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/transformer.h"

namespace onnxkit::runner::cpu {
namespace {

// Rows of A up to which the packed codes are read (above, the float weights).
constexpr int64_t kMaxPackedRows = 4;

// The zero point of block b of row `row` (a column of W, a row of a
// table): uint8 rows of `zrow` bytes holding two (4 bits, the low nibble
// first) or one (8 bits); absent: 8 or 128.
inline float ZeroPoint(const uint8_t* zeros, int bits, int64_t zrow, int64_t row, int64_t b) {
  if (zeros == nullptr) return bits == 8 ? 128.f : 8.f;
  if (bits == 8) return static_cast<float>(zeros[row * zrow + b]);
  const uint8_t z = zeros[row * zrow + b / 2];
  return static_cast<float>(b % 2 == 0 ? (z & 15) : (z >> 4));
}

// y[r * n] = the sum of row r of `sums` (rows of `width`), for each of `rows`.
void StoreSums(const float* sums, int64_t rows, int64_t width, float* y, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float total = 0;
    for (int64_t i = 0; i < width; ++i) total += sums[r * width + i];
    y[r * n] = total;
  }
}

// The sum of the 8 floats of `t`.
__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 t) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Columns [begin, end) of y = A W for `rows` rows of A held as `even` and
// `odd` elements (rows of `padded`), W's column c being blocks of codes
// `half` bytes long (two codes a byte, the low nibble first), each
// (code - zero point) * scale. `sums` holds rows * half floats.
__attribute__((target_clones("avx512f", "avx2", "default"))) void PackedColumns(
    const uint8_t* codes, const float* scales, const uint8_t* zeros, int64_t blocks, int64_t half,
    const float* even, const float* odd, int64_t rows, int64_t padded, int64_t begin, int64_t end, int64_t n,
    float* sums, float* y) {
  const int64_t zrow = (blocks + 1) / 2;
  for (int64_t col = begin; col < end; ++col) {
    std::fill(sums, sums + rows * half, 0.f);
    for (int64_t b = 0; b < blocks; ++b) {
      float zero = 8.f;
      if (zeros != nullptr) {
        const uint8_t z = zeros[col * zrow + b / 2];
        zero = static_cast<float>(b % 2 == 0 ? (z & 15) : (z >> 4));
      }
      const float s = scales[col * blocks + b], c = -zero * s;
      const uint8_t* bytes = codes + (col * blocks + b) * half;
      for (int64_t r = 0; r < rows; ++r) {
        float* acc = sums + r * half;
        const float* e = even + r * padded + b * half;
        const float* o = odd + r * padded + b * half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          acc[i] += e[i] * (static_cast<float>(bytes[i] & 15) * s + c) +
                    o[i] * (static_cast<float>(bytes[i] >> 4) * s + c);
        }
      }
    }
    StoreSums(sums, rows, half, y + col, n);
  }
}

// The same for `half` a multiple of 16 on AVX2 and FMA: 16 bytes (32 codes)
// at a time, R rows.
template <int R>
__attribute__((target("avx2,fma"))) void PackedColumnsAvx2(const uint8_t* codes, const float* scales,
                                                           const uint8_t* zeros, int64_t blocks, int64_t half,
                                                           const float* even, const float* odd, int64_t padded,
                                                           int64_t begin, int64_t end, int64_t n, float* y) {
  const int64_t zrow = (blocks + 1) / 2;
  const __m128i low4 = _mm_set1_epi8(15);
  for (int64_t col = begin; col < end; ++col) {
    __m256 acc_lo[R], acc_hi[R];
    for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      float zero = 8.f;
      if (zeros != nullptr) {
        const uint8_t z = zeros[col * zrow + b / 2];
        zero = static_cast<float>(b % 2 == 0 ? (z & 15) : (z >> 4));
      }
      const float sf = scales[col * blocks + b];
      const __m256 s = _mm256_set1_ps(sf), c = _mm256_set1_ps(-zero * sf);
      const uint8_t* bytes = codes + (col * blocks + b) * half;
      for (int64_t j = 0; j < half; j += 16) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + j));
        const __m128i lo = _mm_and_si128(raw, low4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
        const __m256 w0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), s, c);
        const __m256 w1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), s, c);
        const __m256 w2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), s, c);
        const __m256 w3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), s, c);
        for (int r = 0; r < R; ++r) {
          const float* e = even + r * padded + b * half + j;
          const float* o = odd + r * padded + b * half + j;
          acc_lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(e), w0, acc_lo[r]);
          acc_hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(o), w2, acc_hi[r]);
          acc_lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(e + 8), w1, acc_lo[r]);
          acc_hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(o + 8), w3, acc_hi[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) y[r * n + col] = HorizontalSum(_mm256_add_ps(acc_lo[r], acc_hi[r]));
  }
}

// Columns [begin, end) of y = A W for `rows` rows of A (rows of `padded`
// floats, zero past K), W's column c being blocks of `block` 8-bit codes,
// each (code - zero point) * scale. `sums` holds rows * block floats.
__attribute__((target_clones("avx512f", "avx2", "default"))) void Packed8Columns(
    const uint8_t* codes, const float* scales, const uint8_t* zeros, int64_t blocks, int64_t block,
    const float* a, int64_t rows, int64_t padded, int64_t begin, int64_t end, int64_t n, float* sums,
    float* y) {
  for (int64_t col = begin; col < end; ++col) {
    std::fill(sums, sums + rows * block, 0.f);
    for (int64_t b = 0; b < blocks; ++b) {
      const float zero = zeros != nullptr ? static_cast<float>(zeros[col * blocks + b]) : 128.f;
      const float s = scales[col * blocks + b], c = -zero * s;
      const uint8_t* bytes = codes + (col * blocks + b) * block;
      for (int64_t r = 0; r < rows; ++r) {
        float* acc = sums + r * block;
        const float* x = a + r * padded + b * block;
#pragma omp simd
        for (int64_t i = 0; i < block; ++i) acc[i] += x[i] * (static_cast<float>(bytes[i]) * s + c);
      }
    }
    StoreSums(sums, rows, block, y + col, n);
  }
}

// The same for `block` a multiple of 16 on AVX2 and FMA, R rows.
template <int R>
__attribute__((target("avx2,fma"))) void Packed8ColumnsAvx2(const uint8_t* codes, const float* scales,
                                                            const uint8_t* zeros, int64_t blocks,
                                                            int64_t block, const float* a, int64_t padded,
                                                            int64_t begin, int64_t end, int64_t n, float* y) {
  for (int64_t col = begin; col < end; ++col) {
    __m256 acc_lo[R], acc_hi[R];
    for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const float zero = zeros != nullptr ? static_cast<float>(zeros[col * blocks + b]) : 128.f;
      const float sf = scales[col * blocks + b];
      const __m256 s = _mm256_set1_ps(sf), c = _mm256_set1_ps(-zero * sf);
      const uint8_t* bytes = codes + (col * blocks + b) * block;
      for (int64_t j = 0; j < block; j += 16) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + j));
        const __m256 w0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(raw)), s, c);
        const __m256 w1 =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(raw, 8))), s, c);
        for (int r = 0; r < R; ++r) {
          const float* x = a + r * padded + b * block + j;
          acc_lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x), w0, acc_lo[r]);
          acc_hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), w1, acc_hi[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) y[r * n + col] = HorizontalSum(_mm256_add_ps(acc_lo[r], acc_hi[r]));
  }
}

// Columns [begin, end) of W as rows of `padded` floats at `panel`: column
// c's blocks in order, each block's 4-bit codes even elements first, then
// odd ones (as the rows of A are reordered for the product), each
// (code - zero point) * scale.
__attribute__((target_clones("avx512f", "avx2", "default"))) void DequantizeColumns(
    const uint8_t* codes, const float* scales, const uint8_t* zeros, int bits, int64_t blocks, int64_t width,
    int64_t begin, int64_t end, float* panel) {
  const int64_t block = width * 8 / bits, padded = blocks * block;
  const int64_t zrow = bits == 8 ? blocks : (blocks + 1) / 2;
  for (int64_t col = begin; col < end; ++col) {
    float* column = panel + (col - begin) * padded;
    for (int64_t b = 0; b < blocks; ++b) {
      const float zero = ZeroPoint(zeros, bits, zrow, col, b);
      const float s = scales[col * blocks + b];
      const uint8_t* bytes = codes + (col * blocks + b) * width;
      float* out = column + b * block;
      if (bits == 8) {
#pragma omp simd
        for (int64_t i = 0; i < width; ++i) out[i] = (static_cast<float>(bytes[i]) - zero) * s;
        continue;
      }
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) out[i] = (static_cast<float>(bytes[i] & 15) - zero) * s;
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) out[width + i] = (static_cast<float>(bytes[i] >> 4) - zero) * s;
    }
  }
}

// Columns [begin, begin + cols) of W (cols <= kPanelWidth) as a panel of
// the packed product at `dst`: padded rows of kPanelWidth floats (zero
// past cols), the rows in DequantizeColumns' order. AVX-512 (the packed
// product's own requirement): 16 columns at a time, 4 bytes of each
// gathered into a vector, so that a row of 16 columns is stored whole.
// `width` (bytes of a block) is a multiple of 4 and the bytes of a column,
// blocks * width, fit an int32 16 times over.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip
// -Wmaybe-uninitialized when inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) void DequantizePanel(const uint8_t* codes, const float* scales,
                                                        const uint8_t* zeros, int bits, int64_t blocks,
                                                        int64_t width, int64_t begin, int64_t cols,
                                                        float* dst) {
  constexpr int64_t kW = PackedMatrix::kPanelWidth;
  const int64_t block = width * 8 / bits;
  const int64_t zrow = bits == 8 ? blocks : (blocks + 1) / 2;
  const int32_t stride = static_cast<int32_t>(blocks * width);  // bytes between columns
  const __m512i lanes = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(stride));
  const __m512i low8 = _mm512_set1_epi32(255), low4 = _mm512_set1_epi32(15);
  alignas(64) float s[kW], z[kW];
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t c = 0; c < kW; ++c) {
      s[c] = c < cols ? scales[(begin + c) * blocks + b] : 0.f;
      z[c] = c < cols ? ZeroPoint(zeros, bits, zrow, begin + c, b) : 0.f;
    }
    float* rows = dst + b * block * kW;
    for (int64_t g = 0; g < kW; g += 16) {
      const __mmask16 live =
          g >= cols ? 0 : static_cast<__mmask16>((cols - g >= 16 ? 0x10000 : 1 << (cols - g)) - 1);
      const __m512 sv = _mm512_load_ps(s + g), zv = _mm512_load_ps(z + g);
      const uint8_t* base = codes + ((begin + g) * blocks + b) * width;
      for (int64_t i = 0; i < width; i += 4) {
        const __m512i v = live == 0
                              ? _mm512_setzero_si512()
                              : _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, lanes, base + i, 1);
        for (int j = 0; j < 4; ++j) {
          const __m512i byte = _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), low8);
          if (bits == 8) {
            _mm512_storeu_ps(rows + (i + j) * kW + g,
                             _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(byte), zv), sv));
            continue;
          }
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(byte, low4));
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(byte, 4));
          _mm512_storeu_ps(rows + (i + j) * kW + g, _mm512_mul_ps(_mm512_sub_ps(lo, zv), sv));
          _mm512_storeu_ps(rows + (width + i + j) * kW + g, _mm512_mul_ps(_mm512_sub_ps(hi, zv), sv));
        }
      }
    }
  }
}
#pragma GCC diagnostic pop

bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

class PackedMatMulKernel : public Kernel {
 public:
  PackedMatMulKernel(int bits, int64_t k, bool parallel, std::unique_ptr<Kernel> fallback)
      : bits_(bits), k_(k), parallel_(parallel), fallback_(std::move(fallback)) {}

  // Inputs: 0 A, 1 the float weights [K, N] (omitted where the session
  // does not compute them), 2 the codes [N, blocks, bytes of a block] (4
  // bits: two codes a byte; 8 bits: one), 3 the scales (N * blocks), 4 the
  // zero points (uint8, a row per column of ceil(blocks / 2) bytes of two
  // (4 bits) or of blocks bytes (8 bits); absent: 8 or 128).
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.OptionalInput(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* codes, ctx.Input(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scales, ctx.Input(3));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zeros, ctx.OptionalInput(4));
    const bool covered = Covers(*a, w, *codes, *scales, zeros);
    const int64_t k = w != nullptr ? w->dim(0) : k_;
    const int64_t rows = covered ? a->size() / k : 0;
    if (w != nullptr && (!covered || rows > kMaxPackedRows)) return fallback_->Run(ctx);
    if (!covered) {
      return absl::InvalidArgumentError(
          absl::StrCat("MatMul by 4- or 8-bit weights (MatMulNBits) of K ", k_, " and N ", codes->dim(0),
                       ": A (", std::string(DataTypeName(a->dtype())), " [", absl::StrJoin(a->shape(), ", "),
                       "]) is not float32 with K as its last dimension, or the codes, scales or zero points "
                       "do not agree"));
    }
    const int64_t n = codes->dim(0), blocks = codes->dim(1), width = codes->dim(2);
    std::vector<int64_t> shape = a->shape();
    shape.back() = n;
    // The output first: its allocation checks the size before the scratch.
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    if (rows == 0) return absl::OkStatus();
    if (rows > kMaxPackedRows) return Panels(*a, rows, k, n, *codes, *scales, zeros, y);
    // A's rows, zero past K; for 4 bits split into even and odd elements.
    const int64_t padded = blocks * width;
    even_.assign(static_cast<size_t>(rows * padded), 0.f);
    const float* av = a->data<float>();
    if (bits_ == 8) {
      for (int64_t r = 0; r < rows; ++r) std::copy(av + r * k, av + r * k + k, even_.begin() + r * padded);
    } else {
      odd_.assign(static_cast<size_t>(rows * padded), 0.f);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k; ++i) {
          (i % 2 == 0 ? even_ : odd_)[static_cast<size_t>(r * padded + i / 2)] = av[r * k + i];
        }
      }
    }
    const uint8_t* cv = codes->data<uint8_t>();
    const float* sv = scales->data<float>();
    const uint8_t* zv = zeros != nullptr ? zeros->data<uint8_t>() : nullptr;
    float* yv = y->mutable_data<float>();
    // Columns in groups of 64 per task.
    const int64_t groups = (n + 63) / 64;
    const bool avx2 = width % 16 == 0 && HasAvx2Fma();
    ParallelFor(groups, parallel_ && groups > 1, [&](int64_t g) {
      const int64_t begin = g * 64, end = std::min(n, g * 64 + 64);
      if (bits_ == 8) {
        if (avx2) {
          auto run = rows == 1   ? Packed8ColumnsAvx2<1>
                     : rows == 2 ? Packed8ColumnsAvx2<2>
                     : rows == 3 ? Packed8ColumnsAvx2<3>
                                 : Packed8ColumnsAvx2<4>;
          run(cv, sv, zv, blocks, width, even_.data(), padded, begin, end, n, yv);
          return;
        }
        std::vector<float> sums(static_cast<size_t>(rows * width));
        Packed8Columns(cv, sv, zv, blocks, width, even_.data(), rows, padded, begin, end, n, sums.data(), yv);
        return;
      }
      if (avx2) {
        auto run = rows == 1   ? PackedColumnsAvx2<1>
                   : rows == 2 ? PackedColumnsAvx2<2>
                   : rows == 3 ? PackedColumnsAvx2<3>
                               : PackedColumnsAvx2<4>;
        run(cv, sv, zv, blocks, width, even_.data(), odd_.data(), padded, begin, end, n, yv);
        return;
      }
      std::vector<float> sums(static_cast<size_t>(rows * width));
      PackedColumns(cv, sv, zv, blocks, width, even_.data(), odd_.data(), rows, padded, begin, end, n,
                    sums.data(), yv);
    });
    return absl::OkStatus();
  }

 private:
  // y = A W for more rows than the packed kernels take: groups of kPanel
  // columns of W dequantized into scratch, each multiplied by A (its
  // blocks' elements reordered as DequantizeColumns lays out 4-bit codes)
  // on the packed AVX-512 product (K up to kPackedGemmMaxK), else with
  // oneDNN's sgemm.
  absl::Status Panels(const Tensor& a, int64_t rows, int64_t k, int64_t n, const Tensor& codes,
                      const Tensor& scales, const Tensor* zeros, Tensor* y) {
    constexpr int64_t kPanel = 4 * PackedMatrix::kPanelWidth;
    const int64_t blocks = codes.dim(1), width = codes.dim(2), block = width * 8 / bits_;
    const int64_t padded = blocks * block;
    const float* av = a.data<float>();
    even_.assign(static_cast<size_t>(rows * padded), 0.f);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = even_.data() + r * padded;
      const float* x = av + r * k;
      if (bits_ == 8) {
        std::copy(x, x + k, row);
        continue;
      }
      const int64_t half = block / 2;
      for (int64_t i = 0; i < k; ++i) row[(i / block) * block + (i % 2) * half + (i % block) / 2] = x[i];
    }
    const uint8_t* cv = codes.data<uint8_t>();
    const float* sv = scales.data<float>();
    const uint8_t* zv = zeros != nullptr ? zeros->data<uint8_t>() : nullptr;
    float* yv = y->mutable_data<float>();
    const int64_t groups = (n + kPanel - 1) / kPanel;
    const bool packed = PackedGemmAvailable() && padded <= kPackedGemmMaxK && width % 4 == 0;
    std::vector<absl::Status> status(static_cast<size_t>(groups));
    ParallelFor(groups, parallel_ && groups > 1, [&](int64_t g) {
      const int64_t begin = g * kPanel, end = std::min(n, begin + kPanel);
      // Per thread, kept for the next product (no page faults on fresh
      // memory every time).
      thread_local std::vector<float> panel;
      thread_local PackedMatrix packed_panel;
      absl::Status& s = status[static_cast<size_t>(g)];
      if (packed) {
        s = packed_panel.Reshape(padded, end - begin);
        if (!s.ok()) return;
        for (int64_t p = 0; p < packed_panel.panels(); ++p) {
          const int64_t first = begin + p * PackedMatrix::kPanelWidth;
          DequantizePanel(cv, sv, zv, bits_, blocks, width, first,
                          std::min(PackedMatrix::kPanelWidth, end - first), packed_panel.mutable_panel(p));
        }
        PackedGemm(even_.data(), rows, padded, packed_panel, nullptr, yv + begin, n);
        return;
      }
      panel.resize(static_cast<size_t>((end - begin) * padded));
      DequantizeColumns(cv, sv, zv, bits_, blocks, width, begin, end, panel.data());
      const dnnl_status_t done = dnnl_sgemm('N', 'T', rows, end - begin, padded, 1.f, even_.data(), padded,
                                            panel.data(), padded, 0.f, yv + begin, n);
      if (done != dnnl_success)
        s = absl::InternalError(absl::StrCat("oneDNN sgemm failed (status ", done, ")"));
    });
    for (const absl::Status& s : status) ONNXKIT_RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  // Whether A, the codes, scales and zero points have the types and shapes
  // the kernels read (K from the float weights where given).
  bool Covers(const Tensor& a, const Tensor* w, const Tensor& codes, const Tensor& scales,
              const Tensor* zeros) const {
    if ((bits_ != 4 && bits_ != 8) || a.dtype() != pb::kFloat || codes.dtype() != pb::kUint8 ||
        scales.dtype() != pb::kFloat || a.rank() < 1 || codes.rank() != 3) {
      return false;
    }
    if (w != nullptr && (w->dtype() != pb::kFloat || w->rank() != 2 || w->dim(1) != codes.dim(0)))
      return false;
    const int64_t k = w != nullptr ? w->dim(0) : k_, n = codes.dim(0);
    if (k <= 0 || n <= 0 || a.dim(a.rank() - 1) != k) return false;
    // Codes a block: width * 8 / bits.
    const int64_t blocks = codes.dim(1), width = codes.dim(2), block = width * 8 / bits_;
    if (codes.dim(0) != n || width < 1 || blocks < 1 || blocks > k || (k + block - 1) / block != blocks) {
      return false;
    }
    if (scales.size() != n * blocks) return false;
    const int64_t zero_row = bits_ == 8 ? blocks : (blocks + 1) / 2;
    return zeros == nullptr || (zeros->dtype() == pb::kUint8 && zeros->size() == n * zero_row);
  }

  int bits_;
  int64_t k_;
  bool parallel_;
  std::unique_ptr<Kernel> fallback_;
  std::vector<float> even_, odd_;
};

// Gather (axis 0) of rows of K floats from a table of 4- or 8-bit codes
// quantized in blocks along its rows (GatherBlockQuantized), each row
// dequantized as it is gathered: the session never computes the table.
class PackedGatherKernel : public Kernel {
 public:
  PackedGatherKernel(int bits, int64_t k, std::unique_ptr<Kernel> fallback)
      : bits_(bits), k_(k), fallback_(std::move(fallback)) {}

  // Inputs: 0 the float table [V, K] (omitted where the session does not
  // compute it), 1 the indices, 2 the codes [V, K * bits / 8] (4 bits: two
  // a byte, the low nibble first), 3 the scales [V, blocks], 4 the zero
  // points (uint8, V rows of ceil(blocks / 2) bytes of two (4 bits) or of
  // blocks bytes (8 bits); absent: 8 or 128).
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* table, ctx.OptionalInput(0));
    if (table != nullptr) return fallback_->Run(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* indices, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* codes, ctx.Input(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scales, ctx.Input(3));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* zeros, ctx.OptionalInput(4));
    if (indices->dtype() != pb::kInt64 && indices->dtype() != pb::kInt32) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gather of 4- or 8-bit rows (GatherBlockQuantized): indices are ",
                       std::string(DataTypeName(indices->dtype())), ", not int32 or int64"));
    }
    const int64_t rows = codes->rank() == 2 ? codes->dim(0) : 0;
    const int64_t blocks = scales->rank() == 2 ? scales->dim(1) : 0;
    const int64_t zero_row = bits_ == 8 ? blocks : (blocks + 1) / 2;
    if ((bits_ != 4 && bits_ != 8) || codes->dtype() != pb::kUint8 || codes->rank() != 2 ||
        codes->dim(1) != k_ * bits_ / 8 || scales->dtype() != pb::kFloat || scales->rank() != 2 ||
        scales->dim(0) != rows || blocks < 1 || k_ % blocks != 0 ||
        (zeros != nullptr && (zeros->dtype() != pb::kUint8 || zeros->size() != rows * zero_row))) {
      return absl::InvalidArgumentError(
          "Gather of 4- or 8-bit rows (GatherBlockQuantized): the codes, scales or zero points do not agree");
    }
    std::vector<int64_t> shape = indices->shape();
    shape.push_back(k_);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    const int64_t block = k_ / blocks, width = k_ * bits_ / 8;
    const uint8_t* cv = codes->data<uint8_t>();
    const float* sv = scales->data<float>();
    const uint8_t* zv = zeros != nullptr ? zeros->data<uint8_t>() : nullptr;
    float* yv = y->mutable_data<float>();
    for (int64_t i = 0; i < indices->size(); ++i) {
      const int64_t index =
          indices->dtype() == pb::kInt64 ? indices->data<int64_t>()[i] : int64_t{indices->data<int32_t>()[i]};
      const int64_t row = index < 0 ? index + rows : index;
      if (row < 0 || row >= rows) {
        return absl::OutOfRangeError(
            absl::StrCat("Gather index ", index, " is out of range for an axis of size ", rows));
      }
      const uint8_t* bytes = cv + row * width;
      float* out = yv + i * k_;
      for (int64_t b = 0; b < blocks; ++b) {
        const float zero = ZeroPoint(zv, bits_, zero_row, row, b);
        const float s = sv[row * blocks + b];
        for (int64_t j = b * block; j < (b + 1) * block; ++j) {
          const uint8_t code =
              bits_ == 8 ? bytes[j] : (j % 2 == 0 ? (bytes[j / 2] & 15) : (bytes[j / 2] >> 4));
          out[j] = (static_cast<float>(code) - zero) * s;
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  int bits_;
  int64_t k_;
  std::unique_ptr<Kernel> fallback_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakePackedGatherChain(const FusionChain& chain,
                                                              std::unique_ptr<Kernel> fallback) {
  return std::unique_ptr<Kernel>(
      new PackedGatherKernel(chain.packed_bits, chain.packed_k, std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakePackedMatMulChain(const FusionChain& chain, const KernelInfo& info,
                                                              std::unique_ptr<Kernel> fallback) {
  return std::unique_ptr<Kernel>(
      new PackedMatMulKernel(chain.packed_bits, chain.packed_k, info.threads > 1, std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
