// cpu MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool. Float
// MaxPool and AveragePool over NCHW (2 spatial dims) run on the loops below:
// one plane at a time (planes in parallel), each output row split into
// border columns (windows touching padding, bounds from per-column tap
// ranges) and interior columns (blocks of 16, 8 or 4 outputs computed in
// vector registers). Taps are visited in the reference's order (kernel rows,
// then kernel columns), so MaxPool equals the reference (ties keep the first
// tap; a block that meets a NaN is redone by the checked path, which keeps
// the first NaN) and AveragePool's float sums are the reference's.
// Windows of stride 1 whose output is as large as the input (the pooling
// branches of Inception-style models) run separable instead: each row's
// windows, then each column's, over the flattened plane, so that planes of
// 7 x 7 or 14 x 14 vectorize too; MaxPool there gives the reference's
// values (planes holding NaN take the loops above), AveragePool adds row
// sums (rounding may differ from the reference's tap order in the last
// bits). The commonest of them, 3x3 padded by one, runs with the same sums
// in AVX-512 registers, 16 columns of a row at a time, three rows' window
// sums kept while the output rows are made (Window3x3Plane): about twice as
// fast as channel blocks with their reorders on Inception's 576 x 14 x 14
// and 192 x 28 x 28 pools, so these never take the blocks. Nor do 2x2
// windows of stride 2 that all lie inside the input (DenseNet's
// transitions): 16 outputs of a row at a time from the even and odd columns
// of two rows (Window2x2Plane), the reference's values bit for bit, NaN
// included (DenseNet-121's three AveragePools 0.19 -> 0.08 ms).
// Other float 2-D pooling over channels that fill 16-channel blocks (a
// multiple of 16, or at least 128) runs on oneDNN's pooling over a
// channel-blocked copy instead (reordered in and out): every vector lane
// busy however small the planes (strided MaxPools, other windows on
// 14 x 14 and 7 x 7 planes), 2-4 x faster than the loops there. MaxPool's input goes into
// the blocks through the backend's own transpose, which checks its values
// on the way: over NaN or -inf the loops above run instead (oneDNN's would
// skip NaN). Blocks padded past the channels go in and out through the
// backend's transposes too (quicker there than oneDNN's reorders).
// AveragePool's sums carry NaN and infinities as the reference's do
// (rounding may differ in the last bits).
// GlobalAveragePool over float runs on the loop below (16 planes at once,
// each summed in float in index order: the reference's values).
// The rest (1-D and 3-D windows, GlobalMaxPool, int8/uint8 MaxPool) runs on
// oneDNN pooling_v2 (dilations) over plain tensors of rank 3 to 5 (oneDNN's
// plain float pooling kernels beat a reorder to blocked layouts here; its
// 8-bit ones exist only channels-last, so 8-bit tensors are reordered in
// and out). The window
// is the reference kernels' (auto_pad, pads, ceil_mode resolved per input
// shape); for oneDNN, ceil_mode becomes extra end padding.
//
// Falls back to the reference kernel when MaxPool's Indices output is
// requested, for types other than float32 (and int8/uint8 for MaxPool), when
// an output window holds no input element (the reference gives -inf/NaN
// there), for AveragePool with count_include_pad where ceil_mode added
// padding (oneDNN would count it in the divisor; ONNX does not), and for
// float inputs holding NaN or -inf on oneDNN's max pooling.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/conv_common.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;
using reference::Window;
using reference::WindowAttrs;

enum class PoolMode { kMax, kAverage };

// True when x holds NaN or -infinity: oneDNN's max pooling skips NaN (the
// reference keeps the window's first NaN) and may start from the lowest
// finite float, so such inputs fall back.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool HasNaNOrMinusInf(const float* x,
                                                                                   int64_t n) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  int found = 0;
#pragma omp simd reduction(| : found)
  for (int64_t i = 0; i < n; ++i) found |= !(x[i] > kMinusInf);
  return found != 0;
}

// Float 2-D pooling runs over channel blocks when the channels fill the
// blocks (a multiple of 16, or enough that the last block's padding costs
// little): the reorders in and out cost less than the plane loops lose on
// planes of a few rows, or on strided windows. Fewer channels keep the
// plane loops (a 3- or 24-channel image would be mostly padding).
bool BlockedPays(int64_t channels) { return channels >= 16 && (channels % 16 == 0 || channels >= 128); }

// True when every output position of dim d reads at least one input element.
bool EveryWindowReadsInput(const Window& w, size_t d) {
  for (int64_t o = 0; o < w.out[d]; ++o) {
    bool reads = false;
    for (int64_t k = 0; k < w.kernel[d] && !reads; ++k) {
      int64_t i = o * w.strides[d] - w.pad_begin[d] + k * w.dilations[d];
      reads = i >= 0 && i < w.in[d];
    }
    if (!reads) return false;
  }
  return true;
}

// The geometry of a 2-D pooling, resolved once per input shape: per output
// row and column the kernel taps that read input, the interior columns and
// the AveragePool divisors.
struct Pool2d {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_h = 0, pad_w = 0;
  // Kernel rows [row_begin[oh], row_end[oh]) of output row oh read input
  // rows; the same for columns.
  std::vector<int64_t> row_begin, row_end, col_begin, col_end;
  // Output columns [interior_begin, interior_end) read every kernel column.
  int64_t interior_begin = 0, interior_end = 0;
  // AveragePool divides output (oh, ow) by row_div[oh] * col_div[ow].
  std::vector<float> row_div, col_div;
  // Stride 1, no dilation, output as large as the input (pads adding up to
  // the kernel extent less one): SeparablePlane pools rows, then columns.
  bool separable = false;
  int64_t kernel_h = 0;
  // Separable with a 3x3 kernel padded by one on each side, on a CPU with
  // AVX-512: Window3x3Plane.
  bool window3x3 = false;
  // A 2x2 kernel of stride 2 without padding at the start, every window
  // inside the input, on a CPU with AVX-512: Window2x2Plane.
  bool window2x2 = false;
};

// Fills the tap ranges and divisors of spatial dim d of `w`; the divisor
// counts the taps inside the input, or with count_include_pad the taps
// inside the explicitly padded input (as the reference does).
void ResolveDim(const Window& w, size_t d, bool count_include_pad, std::vector<int64_t>& begin,
                std::vector<int64_t>& end, std::vector<float>& div) {
  int64_t padded = w.in[d] + w.pad_begin[d] + w.pad_end[d];
  for (int64_t o = 0; o < w.out[d]; ++o) {
    int64_t start = o * w.strides[d] - w.pad_begin[d];
    int64_t b = 0, e = w.kernel[d], inside_padded = 0;
    while (b < e && start + b * w.dilations[d] < 0) ++b;
    while (e > b && start + (e - 1) * w.dilations[d] >= w.in[d]) --e;
    for (int64_t k = 0; k < w.kernel[d]; ++k) inside_padded += o * w.strides[d] + k * w.dilations[d] < padded;
    begin.push_back(b);
    end.push_back(e);
    div.push_back(static_cast<float>(count_include_pad ? inside_padded : e - b));
  }
}

Pool2d MakePool2d(const Window& w, bool count_include_pad) {
  Pool2d g;
  g.in_h = w.in[0];
  g.in_w = w.in[1];
  g.out_h = w.out[0];
  g.out_w = w.out[1];
  g.kernel_w = w.kernel[1];
  g.stride_h = w.strides[0];
  g.stride_w = w.strides[1];
  g.dilation_h = w.dilations[0];
  g.dilation_w = w.dilations[1];
  g.pad_h = w.pad_begin[0];
  g.pad_w = w.pad_begin[1];
  ResolveDim(w, 0, count_include_pad, g.row_begin, g.row_end, g.row_div);
  ResolveDim(w, 1, count_include_pad, g.col_begin, g.col_end, g.col_div);
  int64_t first = -1, last = -1;
  for (int64_t o = 0; o < g.out_w; ++o) {
    if (g.col_begin[static_cast<size_t>(o)] == 0 && g.col_end[static_cast<size_t>(o)] == g.kernel_w) {
      if (first < 0) first = o;
      last = o;
    }
  }
  if (first >= 0) {
    g.interior_begin = first;
    g.interior_end = last + 1;
  }
  g.kernel_h = w.kernel[0];
  g.separable = g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 &&
                g.out_h == g.in_h && g.out_w == g.in_w && g.pad_h < g.kernel_h && g.pad_w < g.kernel_w;
  g.window3x3 = g.separable && g.kernel_h == 3 && g.kernel_w == 3 && g.pad_h == 1 && g.pad_w == 1 &&
                __builtin_cpu_supports("avx512f");
  g.window2x2 = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
                g.dilation_h == 1 && g.dilation_w == 1 && g.pad_h == 0 && g.pad_w == 0 &&
                2 * g.out_h <= g.in_h && 2 * g.out_w <= g.in_w && __builtin_cpu_supports("avx512f");
  return g;
}

// One tap of a window: MaxPool keeps the first of equal values and the
// first NaN (as the reference kernel), AveragePool sums.
template <PoolMode kMode>
inline float Accumulate(float acc, float v) {
  if constexpr (kMode == PoolMode::kMax) {
    bool take = (v > acc) | ((v != v) & (acc == acc));
    return take ? v : acc;
  } else {
    return acc + v;
  }
}

template <PoolMode kMode>
inline float Finish(float acc, float divisor) {
  if constexpr (kMode == PoolMode::kMax) {
    return acc;
  } else {
    return acc / divisor;
  }
}

typedef float Floats16 __attribute__((vector_size(16 * sizeof(float))));
typedef float Floats8 __attribute__((vector_size(8 * sizeof(float))));
typedef float Floats4 __attribute__((vector_size(4 * sizeof(float))));

// One tap of a block of kBlock outputs reading v[l * step]: AveragePool
// sums; MaxPool keeps the larger value (the earlier one on ties) and flags
// NaN in `nan`.
template <PoolMode kMode, int64_t kBlock>
[[gnu::always_inline]] inline void BlockTap(float* acc, int32_t* nan, const float* v, int64_t step) {
#pragma omp simd
  for (int64_t l = 0; l < kBlock; ++l) {
    float t = v[l * step];
    if constexpr (kMode == PoolMode::kMax) {
      acc[l] = t > acc[l] ? t : acc[l];
      nan[l] |= t != t;
    } else {
      acc[l] += t;
    }
  }
}

// Pools the kBlock interior outputs yr[o, o + kBlock) of an output row
// whose window starts at input row row0 and reads kernel rows
// [k_begin, k_end). Under stride 2 each tap copies 2 * kBlock floats, one
// past the last it uses. False (nothing stored) when a MaxPool window holds
// a NaN: the checked path then gives the reference's NaN.
template <PoolMode kMode, int64_t kStride, int64_t kBlock>
[[gnu::always_inline]] inline bool PoolBlock(const Pool2d& g, const float* x, int64_t row0, int64_t k_begin,
                                             int64_t k_end, float row_div, int64_t o, float* yr) {
  constexpr float kInit = kMode == PoolMode::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t stride_w = kStride > 0 ? kStride : g.stride_w;
  float acc[kBlock];
  int32_t nan[kBlock];
  for (int64_t l = 0; l < kBlock; ++l) {
    acc[l] = kInit;
    nan[l] = 0;
  }
  for (int64_t k = k_begin; k < k_end; ++k) {
    const float* xr = x + (row0 + k * g.dilation_h) * g.in_w + o * stride_w - g.pad_w;
    for (int64_t j = 0; j < g.kernel_w; ++j) {
      const float* xs = xr + j * g.dilation_w;
      if constexpr (kStride == 2) {
        // The even floats of xs[0, 2 * kBlock), deinterleaved in registers.
        float in[kBlock];
        if constexpr (kBlock == 16) {
          Floats16 lo, hi, even;
          std::memcpy(&lo, xs, sizeof lo);
          std::memcpy(&hi, xs + kBlock, sizeof hi);
          even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
          std::memcpy(in, &even, sizeof in);
        } else if constexpr (kBlock == 8) {
          Floats8 lo, hi, even;
          std::memcpy(&lo, xs, sizeof lo);
          std::memcpy(&hi, xs + kBlock, sizeof hi);
          even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
          std::memcpy(in, &even, sizeof in);
        } else {
          Floats4 lo, hi, even;
          std::memcpy(&lo, xs, sizeof lo);
          std::memcpy(&hi, xs + kBlock, sizeof hi);
          even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
          std::memcpy(in, &even, sizeof in);
        }
        BlockTap<kMode, kBlock>(acc, nan, in, 1);
      } else {
        BlockTap<kMode, kBlock>(acc, nan, xs, stride_w);
      }
    }
  }
  if constexpr (kMode == PoolMode::kMax) {
    int32_t any_nan = 0;
    for (int64_t l = 0; l < kBlock; ++l) any_nan |= nan[l];
    if (any_nan != 0) return false;
  }
  const float* col_div = g.col_div.data() + o;
#pragma omp simd
  for (int64_t l = 0; l < kBlock; ++l) yr[o + l] = Finish<kMode>(acc[l], row_div * col_div[l]);
  return true;
}

// Pools one plane x (in_h x in_w) into y (out_h x out_w). kStride is the
// column stride when known at compile time (1 or 2), else 0 (read from g).
// x_end bounds what may be read: the end of the input tensor.
template <PoolMode kMode, int64_t kStride>
[[gnu::always_inline]] inline void PoolPlane(const Pool2d& g, const float* x, const float* x_end, float* y) {
  constexpr float kInit = kMode == PoolMode::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t stride_w = kStride > 0 ? kStride : g.stride_w;
  const int64_t interior = g.interior_end - g.interior_begin;
  // Interior outputs go in blocks of 16, 8 or 4 (the widest that fits).
  const int64_t block = interior >= 16 ? 16 : interior >= 8 ? 8 : interior >= 4 ? 4 : 0;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const int64_t k_begin = g.row_begin[static_cast<size_t>(oh)], k_end = g.row_end[static_cast<size_t>(oh)];
    const int64_t row0 = oh * g.stride_h - g.pad_h;
    const float row_div = g.row_div[static_cast<size_t>(oh)];
    float* yr = y + oh * g.out_w;
    // One output column with its tap range checked.
    auto column = [&](int64_t ow) {
      const int64_t j_begin = g.col_begin[static_cast<size_t>(ow)],
                    j_end = g.col_end[static_cast<size_t>(ow)];
      const int64_t col0 = ow * stride_w - g.pad_w;
      float acc = kInit;
      for (int64_t k = k_begin; k < k_end; ++k) {
        const float* xr = x + (row0 + k * g.dilation_h) * g.in_w + col0;
        for (int64_t j = j_begin; j < j_end; ++j) acc = Accumulate<kMode>(acc, xr[j * g.dilation_w]);
      }
      yr[ow] = Finish<kMode>(acc, row_div * g.col_div[static_cast<size_t>(ow)]);
    };
    for (int64_t ow = 0; ow < g.interior_begin; ++ow) column(ow);
    for (int64_t ow = g.interior_end; ow < g.out_w; ++ow) column(ow);
    if (block == 0) {
      for (int64_t ow = g.interior_begin; ow < g.interior_end; ++ow) column(ow);
      continue;
    }
    // The last block overlaps the one before it when the block size does
    // not divide the interior.
    for (int64_t b = 0; b < interior; b += block) {
      const int64_t o = g.interior_begin + std::min(b, interior - block);
      if (kStride == 2) {
        // A block whose stride-2 copies would pass x_end takes the checked path.
        const float* last = x + (row0 + (k_end - 1) * g.dilation_h) * g.in_w + o * kStride - g.pad_w +
                            (g.kernel_w - 1) * g.dilation_w;
        if (x_end - last < kStride * block) {
          for (int64_t ow = o; ow < o + block; ++ow) column(ow);
          continue;
        }
      }
      bool stored = block == 16  ? PoolBlock<kMode, kStride, 16>(g, x, row0, k_begin, k_end, row_div, o, yr)
                    : block == 8 ? PoolBlock<kMode, kStride, 8>(g, x, row0, k_begin, k_end, row_div, o, yr)
                                 : PoolBlock<kMode, kStride, 4>(g, x, row0, k_begin, k_end, row_div, o, yr);
      if (!stored) {
        for (int64_t ow = o; ow < o + block; ++ow) column(ow);
      }
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void MaxPoolPlane(const Pool2d& g,
                                                                               const float* x,
                                                                               const float* x_end, float* y) {
  switch (g.stride_w) {
    case 1:
      PoolPlane<PoolMode::kMax, 1>(g, x, x_end, y);
      break;
    case 2:
      PoolPlane<PoolMode::kMax, 2>(g, x, x_end, y);
      break;
    default:
      PoolPlane<PoolMode::kMax, 0>(g, x, x_end, y);
      break;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void AveragePoolPlane(const Pool2d& g,
                                                                                   const float* x,
                                                                                   const float* x_end,
                                                                                   float* y) {
  switch (g.stride_w) {
    case 1:
      PoolPlane<PoolMode::kAverage, 1>(g, x, x_end, y);
      break;
    case 2:
      PoolPlane<PoolMode::kAverage, 2>(g, x, x_end, y);
      break;
    default:
      PoolPlane<PoolMode::kAverage, 0>(g, x, x_end, y);
      break;
  }
}

// True when the n floats of x hold a NaN.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool HasNaN(const float* x, int64_t n) {
  int found = 0;
#pragma omp simd reduction(| : found)
  for (int64_t i = 0; i < n; ++i) found |= x[i] != x[i];
  return found != 0;
}

// One plane of a separable pooling (Pool2d::separable; MaxPool only on
// planes without NaN): each row's windows first, into h (in_h x in_w
// floats), then each column's windows over h. Interior rows and columns
// run over the flattened plane (a window that would wrap to the next row
// is redone with its taps clipped), so small planes vectorize as well as
// large ones. MaxPool gives the reference's values; AveragePool sums each
// window's rows first, then adds the row sums (the reference adds tap by
// tap), and divides by the reference's divisor.
template <PoolMode kMode>
[[gnu::always_inline]] inline void SeparablePlaneImpl(const Pool2d& g, const float* x, float* h, float* y) {
  const int64_t rows = g.in_h, cols = g.in_w, n = rows * cols;
  const int64_t kh = g.kernel_h, kw = g.kernel_w;
  const int64_t pt = g.pad_h, pl = g.pad_w, pb = kh - 1 - pt, pr = kw - 1 - pl;
  auto op = [](float a, float b) {
    if constexpr (kMode == PoolMode::kMax) {
      return b > a ? b : a;
    } else {
      return a + b;
    }
  };
  // Rows: h[i] pools x[i - pl, i + pr].
  if (n - pr > pl) {
    float* __restrict hd = h + pl;
    const int64_t count = n - pr - pl;
    std::memcpy(hd, x, static_cast<size_t>(count) * sizeof(float));
    for (int64_t j = 1; j < kw; ++j) {
      const float* __restrict xs = x + j;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) hd[i] = op(hd[i], xs[i]);
    }
  }
  // Border columns: the first pl and the last pr (all of them when the
  // plane is narrower than the kernel).
  const int64_t left = std::min(pl, cols), right = std::max(left, cols - pr);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    auto clipped = [&](int64_t c) {
      const int64_t begin = std::max<int64_t>(0, c - pl), end = std::min<int64_t>(cols, c + pr + 1);
      float t = xr[begin];
      for (int64_t j = begin + 1; j < end; ++j) t = op(t, xr[j]);
      h[r * cols + c] = t;
    };
    for (int64_t c = 0; c < left; ++c) clipped(c);
    for (int64_t c = right; c < cols; ++c) clipped(c);
  }
  // Columns: y at row r pools h rows [r - pt, r + pb].
  const int64_t inner_begin = std::min(pt, rows), inner_end = std::max(inner_begin, rows - pb);
  if (inner_end > inner_begin) {
    float* __restrict yd = y + inner_begin * cols;
    const int64_t count = (inner_end - inner_begin) * cols;
    const float* h0 = h + (inner_begin - pt) * cols;
    std::memcpy(yd, h0, static_cast<size_t>(count) * sizeof(float));
    for (int64_t k = 1; k < kh; ++k) {
      const float* __restrict hs = h0 + k * cols;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) yd[i] = op(yd[i], hs[i]);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (r >= inner_begin && r < inner_end) continue;
    const int64_t begin = std::max<int64_t>(0, r - pt), end = std::min<int64_t>(rows, r + pb + 1);
    float* yr = y + r * cols;
    std::memcpy(yr, h + begin * cols, static_cast<size_t>(cols) * sizeof(float));
    for (int64_t k = begin + 1; k < end; ++k) {
      const float* __restrict hr = h + k * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) yr[c] = op(yr[c], hr[c]);
    }
  }
  if constexpr (kMode == PoolMode::kAverage) {
    for (int64_t r = 0; r < rows; ++r) {
      const float row_div = g.row_div[static_cast<size_t>(r)];
      const float* col_div = g.col_div.data();
      float* yr = y + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) yr[c] = yr[c] / (row_div * col_div[c]);
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SeparableMaxPlane(const Pool2d& g,
                                                                                    const float* x, float* h,
                                                                                    float* y) {
  SeparablePlaneImpl<PoolMode::kMax>(g, x, h, y);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SeparableAveragePlane(const Pool2d& g,
                                                                                        const float* x,
                                                                                        float* h, float* y) {
  SeparablePlaneImpl<PoolMode::kAverage>(g, x, h, y);
}

// One plane of a 3x3 stride-1 pooling padded by one on every side
// (Pool2d::window3x3; MaxPool only on planes without NaN), 16 columns at a
// time in AVX-512 registers: each row's windows (masked loads of the left
// and right neighbours; border lanes skip the tap the padding holds), then
// each output row from three rows' results kept in registers. The values
// are SeparablePlaneImpl's (the same sums in the same order, the same
// divisors), without its passes over a scratch plane.
template <PoolMode kMode>
__attribute__((target("avx512f"))) inline __m512 RowWindows(const float* xr, int64_t c0, __mmask16 valid,
                                                            __mmask16 left, __mmask16 right) {
  const __m512 xc = _mm512_maskz_loadu_ps(valid, xr + c0);
  const __m512 xl = _mm512_maskz_loadu_ps(left, xr + c0 - 1);
  const __m512 xn = _mm512_maskz_loadu_ps(right, xr + c0 + 1);
  if constexpr (kMode == PoolMode::kMax) {
    // acc = x[c - 1]; acc = x[c] > acc ? x[c] : acc; then x[c + 1].
    const __m512 h = _mm512_mask_max_ps(xc, left, xc, xl);
    return _mm512_mask_max_ps(h, right, xn, h);
  } else {
    const __m512 h = _mm512_mask_add_ps(xc, left, xl, xc);
    return _mm512_mask_add_ps(h, right, h, xn);
  }
}

template <PoolMode kMode>
__attribute__((target("avx512f"))) void Window3x3Plane(const Pool2d& g, const float* x, float* y) {
  const int64_t rows = g.in_h, cols = g.in_w;
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const int64_t n = std::min<int64_t>(16, cols - c0), n_right = std::min<int64_t>(16, cols - c0 - 1);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 left = c0 == 0 ? static_cast<__mmask16>(valid & ~1u) : valid;
    const __mmask16 right = static_cast<__mmask16>(n_right > 0 ? (1u << n_right) - 1 : 0);
    __m512 col_div = _mm512_set1_ps(1.f);
    if constexpr (kMode == PoolMode::kAverage)
      col_div = _mm512_mask_loadu_ps(col_div, valid, g.col_div.data() + c0);
    __m512 prev = _mm512_setzero_ps();
    __m512 cur = RowWindows<kMode>(x, c0, valid, left, right);
    for (int64_t r = 0; r < rows; ++r) {
      const bool below = r + 1 < rows;
      const __m512 next = below ? RowWindows<kMode>(x + (r + 1) * cols, c0, valid, left, right) : cur;
      __m512 v = cur;
      if constexpr (kMode == PoolMode::kMax) {
        if (r > 0) v = _mm512_maskz_max_ps(0xFFFF, cur, prev);
        if (below) v = _mm512_maskz_max_ps(0xFFFF, next, v);
      } else {
        if (r > 0) v = _mm512_add_ps(prev, cur);
        if (below) v = _mm512_add_ps(v, next);
        v = _mm512_div_ps(v, _mm512_mul_ps(_mm512_set1_ps(g.row_div[static_cast<size_t>(r)]), col_div));
      }
      _mm512_mask_storeu_ps(y + r * cols + c0, valid, v);
      prev = cur;
      cur = next;
    }
  }
}

// One plane of a 2x2 stride-2 pooling whose windows all lie inside the
// input (Pool2d::window2x2), 16 outputs of a row at a time in AVX-512
// registers: the 32 input columns they read from each of the two rows,
// split into even and odd columns. The taps in the reference's order (first
// row, then second; left, then right) and as it takes them: MaxPool keeps
// the larger value, the earlier on ties, and the first NaN; AveragePool sums
// from zero and divides by the reference's divisor. So the values are the
// reference's, NaN and infinities included.
template <PoolMode kMode>
__attribute__((target("avx512f"))) inline __m512 Tap2x2(__m512 acc, __m512 v) {
  if constexpr (kMode == PoolMode::kMax) {
    const __mmask16 take =
        _mm512_cmp_ps_mask(v, acc, _CMP_GT_OQ) |
        (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(acc, acc, _CMP_ORD_Q));
    return _mm512_mask_mov_ps(acc, take, v);
  } else {
    return _mm512_add_ps(acc, v);
  }
}

template <PoolMode kMode>
__attribute__((target("avx512f"))) void Window2x2Plane(const Pool2d& g, const float* x, float* y) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 init =
      kMode == PoolMode::kMax ? _mm512_set1_ps(-std::numeric_limits<float>::infinity()) : _mm512_setzero_ps();
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const float* r0 = x + 2 * oh * g.in_w;
    const float* r1 = r0 + g.in_w;
    float* yr = y + oh * g.out_w;
    const float row_div = g.row_div[static_cast<size_t>(oh)];
    for (int64_t o = 0; o < g.out_w; o += 16) {
      const int64_t n = std::min<int64_t>(16, g.out_w - o);
      const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);
      // Inputs 2o .. 2o + 2n - 1: the first 16 and the rest.
      const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1);
      const __mmask16 hi = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
      __m512 acc = init;
      for (const float* r : {r0, r1}) {
        const __m512 a = _mm512_maskz_loadu_ps(lo, r + 2 * o);
        const __m512 b = _mm512_maskz_loadu_ps(hi, r + 2 * o + 16);
        acc = Tap2x2<kMode>(acc, _mm512_permutex2var_ps(a, even, b));
        acc = Tap2x2<kMode>(acc, _mm512_permutex2var_ps(a, odd, b));
      }
      if constexpr (kMode == PoolMode::kAverage) {
        const __m512 col_div = _mm512_mask_loadu_ps(_mm512_set1_ps(1.f), out, g.col_div.data() + o);
        acc = _mm512_div_ps(acc, _mm512_mul_ps(_mm512_set1_ps(row_div), col_div));
      }
      _mm512_mask_storeu_ps(yr + o, out, acc);
    }
  }
}

// The means of 16 planes of n floats, plane j at x + j * n, each summed in
// float in index order and divided by n as the reference does (so the
// same values, overflow to infinity included); the planes' sums are the
// vector's lanes.
__attribute__((target_clones("avx512f", "avx2", "default"))) void Means16(const float* x, int64_t n,
                                                                          float* y) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) {
#pragma omp simd
    for (int j = 0; j < 16; ++j) acc[j] += x[j * n + i];
  }
  const float count = static_cast<float>(n);
  for (int j = 0; j < 16; ++j) y[j] = acc[j] / count;
}

// Pools every plane of x (planes of in_h x in_w floats) into y, planes in
// parallel when there is enough work for more than one thread.
void Pool2dPlanes(const Pool2d& g, PoolMode mode, int64_t planes, int64_t taps_per_plane, const float* x,
                  float* y) {
  constexpr int64_t kMinTapsPerThread = 1 << 16;  // keeps small pools on the calling thread
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const float* x_end = x + planes * in_plane;
  // MaxPool runs separable on planes without NaN (checking each plane only
  // when the whole input is not finite).
  const bool check_planes =
      g.separable && mode == PoolMode::kMax && !(MaxAbs(x, planes * in_plane) <= FLT_MAX);
  auto run = [&](int64_t p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    // Separable on this plane: a MaxPool plane holding NaN is not.
    const bool separable = g.separable && !(check_planes && HasNaN(xp, in_plane));
    if (g.window2x2) {
      if (mode == PoolMode::kMax) {
        Window2x2Plane<PoolMode::kMax>(g, xp, yp);
      } else {
        Window2x2Plane<PoolMode::kAverage>(g, xp, yp);
      }
    } else if (separable && g.window3x3) {
      if (mode == PoolMode::kMax) {
        Window3x3Plane<PoolMode::kMax>(g, xp, yp);
      } else {
        Window3x3Plane<PoolMode::kAverage>(g, xp, yp);
      }
    } else if (separable) {
      // Scratch for one plane's row pools, kept by each thread.
      thread_local std::vector<float> rows;
      if (rows.size() < static_cast<size_t>(in_plane)) rows.resize(static_cast<size_t>(in_plane));
      if (mode == PoolMode::kMax) {
        SeparableMaxPlane(g, xp, rows.data(), yp);
      } else {
        SeparableAveragePlane(g, xp, rows.data(), yp);
      }
    } else if (mode == PoolMode::kMax) {
      MaxPoolPlane(g, xp, x_end, yp);
    } else {
      AveragePoolPlane(g, xp, x_end, yp);
    }
  };
  int64_t threads =
      std::min<int64_t>({omp_get_max_threads(), planes, planes * taps_per_plane / kMinTapsPerThread});
  if (threads <= 1) {
    for (int64_t p = 0; p < planes; ++p) run(p);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
  for (int64_t p = 0; p < planes; ++p) run(p);
}

class PoolKernel : public CpuKernel {
 public:
  PoolKernel(std::unique_ptr<Kernel> fallback, PoolMode mode, bool global, bool count_include_pad,
             WindowAttrs attrs)
      : CpuKernel(std::move(fallback)),
        mode_(mode),
        global_(global),
        count_include_pad_(count_include_pad),
        attrs_(std::move(attrs)) {}

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_outputs() > 1 && ctx.OutputRequested(1)) return Fallback(ctx);  // Indices
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!built_ || x->shape() != shape_ || x->dtype() != dtype_) {
      primitive_ = dnnl::primitive();
      to_last_ = dnnl::reorder();
      from_last_ = dnnl::reorder();
      blocked_ = false;
      supported_ = Build(*x);
      built_ = true;
      shape_ = x->shape();
      dtype_ = x->dtype();
    }
    if (!supported_) return Fallback(ctx);
    if (!own_ && mode_ == PoolMode::kMax && x->dtype() == pb::kFloat &&
        HasNaNOrMinusInf(x->data<float>(), x->size())) {
      return Fallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), y_shape_));
    // Channel blocks, but for a MaxPool over NaN or -inf (the loops below
    // keep the reference's values there).
    if (blocked_) {
      ONNXKIT_ASSIGN_OR_RETURN(bool pooled, RunBlocked(*x, *y));
      if (pooled) return absl::OkStatus();
    }
    if (own_ && global_) {
      const int64_t planes = x->dim(0) * x->dim(1);
      GlobalMeans(x->data<float>(), planes, x->size() / planes, y->mutable_data<float>());
      return absl::OkStatus();
    }
    if (own_) {
      Pool2dPlanes(pool2d_, mode_, x->dim(0) * x->dim(1), pool2d_.out_h * pool2d_.out_w * taps_,
                   x->data<float>(), y->mutable_data<float>());
      return absl::OkStatus();
    }
    std::unordered_map<int, memory> args;
    memory x_user, y_user;
    ONNXKIT_RETURN_IF_ERROR(Guard("pooling memory", [&] {
      x_user = x_mem_.At(*x, src_);
      y_user = y_mem_.At(*y, dst_);
    }));
    if (to_last_) {
      ONNXKIT_RETURN_IF_ERROR(Execute("pooling source reorder", to_last_,
                                      {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, src_last_}}));
      ONNXKIT_RETURN_IF_ERROR(
          Execute("pooling", primitive_, {{DNNL_ARG_SRC, src_last_}, {DNNL_ARG_DST, dst_last_}}));
      return Execute("pooling result reorder", from_last_, {{DNNL_ARG_FROM, dst_last_}, {DNNL_ARG_TO, y_user}});
    }
    args[DNNL_ARG_SRC] = x_user;
    args[DNNL_ARG_DST] = y_user;
    return Execute("pooling", primitive_, args);
  }

 private:
  bool Build(const Tensor& x) {
    std::optional<memory::data_type> dt = DnnlType(x.dtype());
    bool type_ok = x.dtype() == pb::kFloat ||
                   (mode_ == PoolMode::kMax && (x.dtype() == pb::kInt8 || x.dtype() == pb::kUint8));
    if (!dt || !type_ok || x.rank() < 3 || x.rank() > 5 || x.size() == 0) return false;
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel = global_ ? in : attrs_.kernel_shape;
    memory::dims pad_end;
    std::optional<Window> resolved = DnnlPoolWindow(global_ ? WindowAttrs{} : attrs_, in, kernel, &pad_end);
    if (!resolved) return false;
    const Window& w = *resolved;
    for (size_t d = 0; d < in.size(); ++d) {
      if (pad_end[d] > w.pad_end[d] && mode_ == PoolMode::kAverage && count_include_pad_) return false;
    }
    y_shape_ = {x.dim(0), x.dim(1)};
    y_shape_.insert(y_shape_.end(), w.out.begin(), w.out.end());
    own_ = (!global_ && x.dtype() == pb::kFloat && x.rank() == 4) ||
           (global_ && mode_ == PoolMode::kAverage && x.dtype() == pb::kFloat);
    if (own_ && global_) return true;
    if (own_) {
      pool2d_ = MakePool2d(w, count_include_pad_);
      taps_ = w.kernel_size;
      blocked_ =
          !pool2d_.window3x3 && !pool2d_.window2x2 && BlockedPays(x.dim(1)) && BuildBlocked(x, w, pad_end);
      return true;
    }
    src_ = PlainDesc(x.shape(), *dt);
    dst_ = PlainDesc(y_shape_, *dt);
    // 8-bit pooling has vector kernels only channels-last (plain runs
    // oneDNN's reference loops, ~100x slower): reorder in and out.
    const bool bytes = x.dtype() != pb::kFloat;
    const memory::format_tag last = x.rank() == 3 ? memory::format_tag::acb
                                    : x.rank() == 4 ? memory::format_tag::acdb
                                                    : memory::format_tag::acdeb;
    dnnl::algorithm alg = mode_ == PoolMode::kMax ? dnnl::algorithm::pooling_max
                          : count_include_pad_    ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    memory::dims dilations;
    for (int64_t d : w.dilations) dilations.push_back(d - 1);
    absl::Status s = Guard("pooling", [&] {
      memory::desc src = bytes ? memory::desc(Dims(x.shape()), *dt, last) : src_;
      memory::desc dst = bytes ? memory::desc(Dims(y_shape_), *dt, last) : dst_;
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst, Dims(w.strides),
                                       Dims(w.kernel), dilations, Dims(w.pad_begin), pad_end);
      primitive_ = dnnl::pooling_v2_forward(dnnl::pooling_v2_forward::primitive_desc(d, Engine()));
      if (bytes) {
        src_last_ = memory(src, Engine());
        dst_last_ = memory(dst, Engine());
        to_last_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_, Engine(), src));
        from_last_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), dst, Engine(), dst_));
      }
    });
    return s.ok();
  }

  // Float 2-D pooling over channel blocks (oneDNN's vector kernel on
  // [N, C/16, H, W, 16] copies, which keeps every lane busy however small
  // the planes); the loops above stay for a MaxPool over NaN or -inf.
  bool BuildBlocked(const Tensor& x, const Window& w, const memory::dims& pad_end) {
    const memory::format_tag tag = memory::format_tag::aBcd16b;
    dnnl::algorithm alg = mode_ == PoolMode::kMax ? dnnl::algorithm::pooling_max
                          : count_include_pad_    ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    absl::Status s = Guard("pooling", [&] {
      src_ = PlainDesc(x.shape(), memory::data_type::f32);
      dst_ = PlainDesc(y_shape_, memory::data_type::f32);
      block_src_ = memory::desc(Dims(x.shape()), memory::data_type::f32, tag);
      block_dst_ = memory::desc(Dims(y_shape_), memory::data_type::f32, tag);
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, block_src_, block_dst_,
                                       Dims(w.strides), Dims(w.kernel), Minus1(w.dilations),
                                       Dims(w.pad_begin), pad_end);
      dnnl::pooling_v2_forward::primitive_desc pd(d, Engine());
      if (IsReference(pd)) return;
      primitive_ = dnnl::pooling_v2_forward(pd);
      to_last_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_, Engine(), block_src_));
      from_last_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), block_dst_, Engine(), dst_));
    });
    own_check_ = mode_ == PoolMode::kMax && OwnTranspose(src_, block_src_, /*blocks=*/true);
    // Blocks padded past the channels: the backend's transposes.
    own_in_ = OwnTranspose(src_, block_src_);
    own_out_ = OwnTranspose(block_dst_, dst_);
    return s.ok() && primitive_ && to_last_ && from_last_;
  }

  // False, having written nothing, for a MaxPool over NaN or -inf.
  absl::StatusOr<bool> RunBlocked(const Tensor& x, Tensor& y) {
    const bool max = mode_ == PoolMode::kMax;
    if (max && !own_check_ && HasNaNOrMinusInf(x.data<float>(), x.size())) return false;
    void* in = ThreadScratch(0, block_src_.get_size());
    void* out = ThreadScratch(1, block_dst_.get_size());
    if (in == nullptr || out == nullptr) return absl::ResourceExhaustedError("out of memory for pooling");
    memory x_user, y_user, x_block, y_block;
    ONNXKIT_RETURN_IF_ERROR(Guard("pooling memory", [&] {
      x_user = x_mem_.At(x, src_);
      y_user = y_mem_.At(y, dst_);
      x_block = x_block_mem_.At(in, block_src_);
      y_block = y_block_mem_.At(out, block_dst_);
    }));
    if (own_check_) {
      // MaxPool checks the values as they are reordered.
      ONNXKIT_ASSIGN_OR_RETURN(bool found, TransposeChannelsFindingNaN(src_, block_src_, x.data<float>(),
                                                                       static_cast<float*>(in)));
      if (found) return false;
    } else if (own_in_) {
      ONNXKIT_RETURN_IF_ERROR(TransposeChannels(src_, block_src_, x.data<float>(), static_cast<float*>(in)));
    } else {
      ONNXKIT_RETURN_IF_ERROR(
          Execute("pooling source reorder", to_last_, {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, x_block}}));
    }
    ONNXKIT_RETURN_IF_ERROR(
        Execute("pooling", primitive_, {{DNNL_ARG_SRC, x_block}, {DNNL_ARG_DST, y_block}}));
    if (own_out_) {
      ONNXKIT_RETURN_IF_ERROR(
          TransposeChannels(block_dst_, dst_, static_cast<const float*>(out), y.mutable_data<float>()));
    } else {
      ONNXKIT_RETURN_IF_ERROR(
          Execute("pooling result reorder", from_last_, {{DNNL_ARG_FROM, y_block}, {DNNL_ARG_TO, y_user}}));
    }
    return true;
  }

  PoolMode mode_;
  bool global_;
  bool count_include_pad_;
  WindowAttrs attrs_;
  bool built_ = false;
  bool supported_ = false;
  bool own_ = false;  // runs on the loops above, not oneDNN
  bool blocked_ = false;  // or, from own_, on channel blocks (BuildBlocked)
  bool own_check_ = false;  // a MaxPool's input reordered into them by TransposeChannelsFindingNaN
  bool own_in_ = false, own_out_ = false;  // else into / out of them by TransposeChannels
  memory::desc block_src_, block_dst_;
  Pool2d pool2d_;
  int64_t taps_ = 0;
  std::vector<int64_t> shape_;
  int32_t dtype_ = 0;
  std::vector<int64_t> y_shape_;
  memory::desc src_, dst_;
  dnnl::primitive primitive_;
  // The arguments' memory objects, re-pointed at each run's buffers.
  HeldMemory x_mem_, y_mem_, x_block_mem_, y_block_mem_;
  // 8-bit: the channels-last copies and their reorders (blocked_: the
  // reorders to and from channel blocks).
  memory src_last_, dst_last_;
  dnnl::reorder to_last_, from_last_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakePool(const ir::Node& node, const KernelInfo& info, PoolMode mode,
                                                 bool global) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  WindowAttrs attrs;
  if (!global) {
    ONNXKIT_ASSIGN_OR_RETURN(attrs, reference::ParseWindowAttrs(node));
  }
  bool count_include_pad =
      mode == PoolMode::kAverage && !global && reference::AttrInt(node, "count_include_pad", 0) != 0;
  return std::unique_ptr<Kernel>(
      new PoolKernel(std::move(fallback), mode, global, count_include_pad, std::move(attrs)));
}

}  // namespace

// GlobalAveragePool of `planes` planes of n floats (the reference's values):
// groups of 16 planes in parallel when there is enough work for more than
// one thread.
void GlobalMeans(const float* x, int64_t planes, int64_t n, float* y) {
  constexpr int64_t kMinPerThread = 1 << 16;
  const int64_t groups = planes / 16;
  const int64_t threads = std::min<int64_t>({omp_get_max_threads(), groups, groups * 16 * n / kMinPerThread});
  if (threads > 1) {
#pragma omp parallel for num_threads(static_cast <int>(threads))
    for (int64_t g = 0; g < groups; ++g) Means16(x + g * 16 * n, n, y + g * 16);
  } else {
    // No parallel region: even an inactive one costs about 0.4 µs.
    for (int64_t g = 0; g < groups; ++g) Means16(x + g * 16 * n, n, y + g * 16);
  }
  for (int64_t p = groups * 16; p < planes; ++p) {
    float acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += x[p * n + i];
    y[p] = acc / static_cast<float>(n);
  }
}

std::optional<Window> DnnlPoolWindow(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& kernel, memory::dims* pad_end) {
  if (kernel.size() != in.size()) return std::nullopt;
  absl::StatusOr<Window> resolved = reference::ResolveWindow(attrs, in, kernel);
  if (!resolved.ok() || resolved->out_size == 0) return std::nullopt;
  const Window& w = *resolved;
  pad_end->clear();
  for (size_t d = 0; d < in.size(); ++d) {
    if (!EveryWindowReadsInput(w, d)) return std::nullopt;
    int64_t extent = (w.kernel[d] - 1) * w.dilations[d] + 1;
    // End padding the last window needs (more than pad_end under ceil_mode).
    int64_t needed = (w.out[d] - 1) * w.strides[d] + extent - w.in[d] - w.pad_begin[d];
    int64_t end = std::max(needed, w.pad_end[d]);
    if ((w.in[d] + w.pad_begin[d] + end - extent) / w.strides[d] + 1 != w.out[d]) return std::nullopt;
    pad_end->push_back(end);
  }
  return w;
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxPool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kMax, false);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeAveragePool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kAverage, false);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalAveragePool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kAverage, true);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalMaxPool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kMax, true);
}

}  // namespace onnxkit::runner::cpu
