// The packed AVX-512 matrix product of matmul_packed.h.
//
// Loop order: rows of A in blocks that stay in L2, then the panels of B,
// then tiles of up to 8 rows; a tile runs the whole k extent with its 8 x 48
// results in 24 registers. The first tile of a panel pulls the panel from
// memory; every tile also prefetches its share of the next panel.
#include "runner/cpu/matmul_packed.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"

namespace onnxkit::runner::cpu {
namespace {

constexpr int64_t kW = PackedMatrix::kPanelWidth;  // 3 vectors of 16 floats
constexpr int kTileRows = 8;
// Rows of A kept in L2 while the panels go by: about 1.5 MB of them.
constexpr int64_t kRowBlockBytes = int64_t{3} << 19;
// How many rows of a panel ahead of the current one the kernel prefetches into L1.
constexpr int64_t kAheadRows = 8;

// The tail masks of a panel with `cols` columns (1..48) used: one per vector.
struct Masks {
  __mmask16 m[3];
};

__attribute__((target("avx512f"))) Masks MasksFor(int64_t cols) {
  Masks masks;
  for (int j = 0; j < 3; ++j) {
    int64_t left = std::clamp<int64_t>(cols - 16 * j, 0, 16);
    masks.m[j] = static_cast<__mmask16>((uint32_t{1} << left) - 1);
  }
  return masks;
}

// C[rows, cols] of one tile over the whole k extent of panel `bp`. `next`
// (may be null) is the part of the next panel to prefetch: `lines` cache
// lines spread over the k loop.
template <int kRows>
__attribute__((target("avx512f"), always_inline)) inline void Tile(const float* a, int64_t lda, const float* bp,
                                                                   int64_t k, const float* bias, const Masks& masks,
                                                                   float* c, int64_t ldc, const char* next,
                                                                   int64_t lines) {
  __m512 acc[kRows][3];
  __m512 init[3];
#pragma GCC unroll 3
  for (int j = 0; j < 3; ++j) {
    init[j] = bias != nullptr ? _mm512_maskz_loadu_ps(masks.m[j], bias + 16 * j) : _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) acc[i][j] = init[j];
  }
  const int64_t every = lines > 0 ? std::max<int64_t>(1, k / lines) : k + 1;
  int64_t due = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* row = bp + kk * kW;
    __m512 b0 = _mm512_load_ps(row), b1 = _mm512_load_ps(row + 16), b2 = _mm512_load_ps(row + 32);
    const char* ahead = reinterpret_cast<const char*>(row + kAheadRows * kW);
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    _mm_prefetch(ahead + 128, _MM_HINT_T0);
    if (kk == due && lines > 0) {
      _mm_prefetch(next, _MM_HINT_T1);
      next += 64;
      --lines;
      due += every;
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      __m512 av = _mm512_set1_ps(a[i * lda + kk]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(av, b2, acc[i][2]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm512_mask_storeu_ps(c + i * ldc + 16 * j, masks.m[j], acc[i][j]);
  }
}

__attribute__((target("avx512f"))) void TileRows(int rows, const float* a, int64_t lda, const float* bp, int64_t k,
                                                 const float* bias, const Masks& masks, float* c, int64_t ldc,
                                                 const char* next, int64_t lines) {
  switch (rows) {
    case 8: return Tile<8>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 7: return Tile<7>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 6: return Tile<6>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 5: return Tile<5>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 4: return Tile<4>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 3: return Tile<3>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    case 2: return Tile<2>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
    default: return Tile<1>(a, lda, bp, k, bias, masks, c, ldc, next, lines);
  }
}

// Panels [first, last) for all m rows.
__attribute__((target("avx512f"))) void GemmPanels(const float* a, int64_t m, int64_t lda, const PackedMatrix& b,
                                                   const float* bias, float* c, int64_t ldc, int64_t first,
                                                   int64_t last) {
  const int64_t k = b.k();
  const int64_t block = std::max<int64_t>(kTileRows, kRowBlockBytes / (k * 4) / kTileRows * kTileRows);
  const int64_t panel_lines = k * kW * 4 / 64;
  for (int64_t m0 = 0; m0 < m; m0 += block) {
    const int64_t rows = std::min(block, m - m0);
    const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
    const int64_t share = (panel_lines + tiles - 1) / tiles;  // lines of the next panel per tile
    for (int64_t p = first; p < last; ++p) {
      const int64_t col = p * kW;
      const Masks masks = MasksFor(std::min(kW, b.n() - col));
      const char* next = p + 1 < last ? reinterpret_cast<const char*>(b.panel(p + 1)) : nullptr;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t r = m0 + t * kTileRows;
        const int64_t lines = next == nullptr ? 0 : std::clamp<int64_t>(panel_lines - t * share, 0, share);
        TileRows(static_cast<int>(std::min<int64_t>(kTileRows, m - r)), a + r * lda, lda, b.panel(p), k,
                 bias != nullptr ? bias + col : nullptr, masks, c + r * ldc + col, ldc,
                 next != nullptr ? next + t * share * 64 : nullptr, lines);
      }
    }
  }
}

}  // namespace

bool PackedGemmAvailable() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return available;
}

absl::StatusOr<PackedMatrix> PackedMatrix::Allocated(int64_t k, int64_t n) {
  if (k <= 0 || n <= 0) return absl::InvalidArgumentError("packed matrix: empty matrix");
  PackedMatrix out;
  out.k_ = k;
  out.n_ = n;
  out.panels_ = (n + kW - 1) / kW;
  std::optional<int64_t> floats = CheckedMul(out.panels_ * kW, k);
  std::optional<int64_t> bytes = floats ? CheckedMul(*floats, 4) : std::nullopt;
  if (!bytes) return absl::ResourceExhaustedError("packed matrix: size overflows");
  out.data_.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((*bytes + 63) / 64 * 64))));
  if (out.data_ == nullptr) return absl::ResourceExhaustedError("packed matrix: out of memory");
  out.capacity_ = *floats;
  return out;
}

absl::StatusOr<PackedMatrix> PackedMatrix::Pack(const float* b, int64_t k, int64_t n) {
  absl::StatusOr<PackedMatrix> out = Allocated(k, n);
  if (!out.ok()) return out.status();
  for (int64_t p = 0; p < out->panels_; ++p) {
    const int64_t col = p * kW, cols = std::min(kW, n - col);
    float* dst = out->data_.get() + p * k * kW;
    for (int64_t r = 0; r < k; ++r) {
      std::memcpy(dst + r * kW, b + r * n + col, static_cast<size_t>(cols) * 4);
      std::fill(dst + r * kW + cols, dst + (r + 1) * kW, 0.f);
    }
  }
  return out;
}

absl::StatusOr<PackedMatrix> PackedMatrix::PackTransposed(const float* bt, int64_t k, int64_t n) {
  absl::StatusOr<PackedMatrix> out = Allocated(k, n);
  if (!out.ok()) return out.status();
  std::fill(out->data_.get(), out->data_.get() + out->panels_ * kW * k, 0.f);
  for (int64_t p = 0; p < out->panels_; ++p) {
    const int64_t col = p * kW, cols = std::min(kW, n - col);
    float* dst = out->data_.get() + p * k * kW;
    for (int64_t j = 0; j < cols; ++j) {  // column col + j of B is row col + j of B^T
      const float* src = bt + (col + j) * k;
      for (int64_t r = 0; r < k; ++r) dst[r * kW + j] = src[r];
    }
  }
  return out;
}

absl::Status PackedMatrix::Reshape(int64_t k, int64_t n) {
  if (k <= 0 || n <= 0) return absl::InvalidArgumentError("packed matrix: empty matrix");
  const int64_t panels = (n + kW - 1) / kW;
  const std::optional<int64_t> floats = CheckedMul(panels * kW, k);
  if (!floats || *floats > capacity_) {
    ONNXKIT_ASSIGN_OR_RETURN(*this, Allocated(k, n));
    return absl::OkStatus();
  }
  k_ = k;
  n_ = n;
  panels_ = panels;
  return absl::OkStatus();
}

absl::StatusOr<const PackedMatrix*> PackedWeightCache::Get(const Tensor& b, bool transposed) {
  if (source_ != b.raw() || packed_.panels() == 0) {
    source_ = nullptr;
    absl::StatusOr<PackedMatrix> packed =
        transposed ? PackedMatrix::PackTransposed(b.data<float>(), b.dim(1), b.dim(0))
                   : PackedMatrix::Pack(b.data<float>(), b.dim(0), b.dim(1));
    if (!packed.ok()) return packed.status();
    packed_ = *std::move(packed);
    source_ = b.raw();
  }
  return &packed_;
}

bool PackedGemmTakes(const Tensor& a, const Tensor& b) {
  if (!PackedGemmAvailable() || a.dtype() != pb::kFloat || b.dtype() != pb::kFloat || a.rank() < 1 ||
      b.rank() != 2 || a.size() == 0 || b.size() == 0 || a.shape().back() != b.dim(0)) {
    return false;
  }
  return PackedGemmTakesShape(b.dim(0), b.dim(1));
}

bool PackedGemmTakesShape(int64_t k, int64_t n) {
  if (!PackedGemmAvailable()) return false;
  // Narrow or short products, and widths that leave much of the last panel
  // empty, do better on oneDNN.
  const int64_t padded = (n + PackedMatrix::kPanelWidth - 1) / PackedMatrix::kPanelWidth * PackedMatrix::kPanelWidth;
  return k >= 16 && k <= kPackedGemmMaxK && n >= 32 && padded * 4 <= n * 5;
}

void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedMatrix& b, const float* bias, float* c,
                int64_t ldc) {
  // Products under about 10 microseconds of one core's work (a recurrent
  // step's matrix-vector product) cost less than waking the other threads.
  constexpr int64_t kMinParallelMacs = int64_t{1} << 18;
  const int64_t parts =
      m * b.k() * b.n() < kMinParallelMacs ? 1 : std::min<int64_t>(omp_get_max_threads(), b.panels());
  if (parts <= 1) {
    // No parallel region at all: even an inactive one costs a recurrent
    // step a noticeable share of its time.
    GemmPanels(a, m, lda, b, bias, c, ldc, 0, b.panels());
    return;
  }
#pragma omp parallel for
  for (int64_t part = 0; part < parts; ++part) {
    GemmPanels(a, m, lda, b, bias, c, ldc, b.panels() * part / parts, b.panels() * (part + 1) / parts);
  }
}

}  // namespace onnxkit::runner::cpu
