// cpu ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare on oneDNN's reduction
// primitive (float32): the destination keeps the input's rank with 1 on the
// reduced axes; keepdims=0 only changes the output shape. Axes come from
// the attribute, or from the axes input (read per run, any int64 tensor).
// Empty inputs, empty axes with noop_with_empty_axes, invalid axes (the
// reference reports them), other types, NaN or infinite inputs of ReduceMax
// and ReduceMin, and axes oneDNN only has slow reference code for run on the
// reference kernels. Axes that make one run of adjacent dims with more dims
// after them (a channel axis of NCHW, the batch axis) reduce here instead:
// x seen as [outer, R, inner], each output row folds the R rows of inner
// contiguous values in order, vectorized along inner (oneDNN runs such
// axes on its reference code, 6 x slower than ONNX Runtime over the
// channels of a 64 x 56 x 56 tensor). ReduceLogSumExp has no oneDNN
// algorithm: with one run of reduced axes and finite inputs it is computed
// here as the reference does (largest value out, the sum of exponentials in
// double; vector_math.h), along inner or row by row; otherwise, and with
// NaN or infinities, on the reference kernel.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/vector_math.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;

std::atomic<int64_t> g_strided_reductions{0};

struct ReduceSpec {
  dnnl::algorithm alg;
  float p = 0;
  // ReduceLogSumExp: no oneDNN algorithm; one run of reduced axes only
  // (vector_math.h's LogSumExp rows), finite inputs.
  bool log_sum_exp = false;
};

// How each value enters the fold of the strided path, and what ends it.
enum class Fold { kSum, kMax, kMin, kProd, kAbsSum, kSquareSum };

Fold FoldOf(const ReduceSpec& spec) {
  using a = dnnl::algorithm;
  switch (spec.alg) {
    case a::reduction_max:
      return Fold::kMax;
    case a::reduction_min:
      return Fold::kMin;
    case a::reduction_mul:
      return Fold::kProd;
    case a::reduction_norm_lp_power_p_sum:
    case a::reduction_norm_lp_sum:
      return spec.p == 1.f ? Fold::kAbsSum : Fold::kSquareSum;
    default:
      return Fold::kSum;
  }
}

template <Fold F>
inline float Enter(float v) {
  if constexpr (F == Fold::kAbsSum) return std::fabs(v);
  if constexpr (F == Fold::kSquareSum) return v * v;
  return v;
}

template <Fold F>
inline float Combine(float acc, float v) {
  if constexpr (F == Fold::kMax) return v > acc ? v : acc;
  if constexpr (F == Fold::kMin) return v < acc ? v : acc;
  if constexpr (F == Fold::kProd) return acc * v;
  return acc + Enter<F>(v);
}

// y[o, i] = fold over r < rows of x[o, r, i], for n values i from `x`'s
// row start (stride `inner` between rows).
template <Fold F>
void FoldRows(const float* __restrict x, int64_t rows, int64_t inner, int64_t n, float* __restrict y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = Enter<F>(x[i]);
  for (int64_t r = 1; r < rows; ++r) {
    const float* __restrict row = x + r * inner;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Combine<F>(y[i], row[i]);
  }
}

// ReduceLogSumExp of x seen as [outer, rows, inner] (finite values): along
// inner where it is wide, else row by row.
void LogSumExp(const float* x, int64_t outer, int64_t rows, int64_t inner, float* y) {
  const bool parallel = outer * rows * inner >= (int64_t{1} << 16);
  if (inner == 1) {
    ParallelFor(outer, parallel && outer > 1, [&](int64_t o) { y[o] = LogSumExpRow(x + o * rows, rows); });
    return;
  }
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  const int64_t tasks = outer * chunks;
  ParallelFor(tasks, parallel && tasks > 1, [&](int64_t t) {
    const int64_t o = t / chunks, first = (t % chunks) * kChunk;
    LogSumExpColumns(x + o * rows * inner + first, rows, inner, std::min(kChunk, inner - first),
                     y + o * inner + first);
  });
}

void FoldStrided(Fold fold, const float* x, int64_t outer, int64_t rows, int64_t inner, float* y) {
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  const int64_t tasks = outer * chunks;
  ParallelFor(tasks, tasks > 1 && outer * rows * inner >= (int64_t{1} << 16), [&](int64_t t) {
    const int64_t o = t / chunks, first = (t % chunks) * kChunk;
    const int64_t n = std::min(kChunk, inner - first);
    const float* src = x + o * rows * inner + first;
    float* dst = y + o * inner + first;
    switch (fold) {
      case Fold::kSum:
        FoldRows<Fold::kSum>(src, rows, inner, n, dst);
        break;
      case Fold::kMax:
        FoldRows<Fold::kMax>(src, rows, inner, n, dst);
        break;
      case Fold::kMin:
        FoldRows<Fold::kMin>(src, rows, inner, n, dst);
        break;
      case Fold::kProd:
        FoldRows<Fold::kProd>(src, rows, inner, n, dst);
        break;
      case Fold::kAbsSum:
        FoldRows<Fold::kAbsSum>(src, rows, inner, n, dst);
        break;
      case Fold::kSquareSum:
        FoldRows<Fold::kSquareSum>(src, rows, inner, n, dst);
        break;
    }
  });
}

std::optional<ReduceSpec> SpecOf(const std::string& op) {
  using a = dnnl::algorithm;
  if (op == "ReduceMean") return ReduceSpec{a::reduction_mean};
  if (op == "ReduceSum") return ReduceSpec{a::reduction_sum};
  if (op == "ReduceMax") return ReduceSpec{a::reduction_max};
  if (op == "ReduceMin") return ReduceSpec{a::reduction_min};
  if (op == "ReduceProd") return ReduceSpec{a::reduction_mul};
  if (op == "ReduceL1") return ReduceSpec{a::reduction_norm_lp_power_p_sum, 1.f};
  if (op == "ReduceL2") return ReduceSpec{a::reduction_norm_lp_sum, 2.f};
  if (op == "ReduceSumSquare") return ReduceSpec{a::reduction_norm_lp_power_p_sum, 2.f};
  if (op == "ReduceLogSumExp") return ReduceSpec{a::reduction_sum, 0.f, true};
  return std::nullopt;
}

// True when x holds a NaN or an infinity: oneDNN's max / min skip NaN (the
// reference propagates it) and start from the lowest finite float (a row of
// -inf gives -3.4e38 instead of -inf), so such inputs fall back.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool HasNonFinite(const float* x, int64_t n) {
  int found = 0;
#pragma omp simd reduction(| : found)
  for (int64_t i = 0; i < n; ++i) found |= !(x[i] - x[i] == 0.f);
  return found != 0;
}

class ReduceKernel : public CpuKernel {
 public:
  ReduceKernel(const ir::Node& node, const KernelInfo& info, ReduceSpec spec,
               std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        spec_(spec),
        axes_input_(info.opset >= (node.op_type() == "ReduceSum" ? 13 : 18)),
        axes_attr_(reference::AttrInts(node, "axes")),
        keepdims_(reference::AttrInt(node, "keepdims", 1) != 0),
        noop_(axes_input_ && reference::AttrInt(node, "noop_with_empty_axes", 0) != 0) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->rank() < 1 || x->rank() > 6 || x->size() == 0) return Fallback(ctx);
    bool max_min = spec_.alg == dnnl::algorithm::reduction_max || spec_.alg == dnnl::algorithm::reduction_min;
    if ((max_min || spec_.log_sum_exp) && HasNonFinite(x->data<float>(), x->size())) return Fallback(ctx);
    std::vector<int64_t> axes = axes_attr_;
    if (axes_input_) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.OptionalInput(1));
      axes.clear();
      if (a != nullptr) {
        if (a->dtype() != pb::kInt64 || a->rank() > 1) return Fallback(ctx);
        axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->size());
      }
    }
    if (axes.empty() && noop_) return Fallback(ctx);
    std::vector<int64_t> kept = x->shape();
    std::vector<bool> reduced(kept.size(), axes.empty());
    for (int64_t axis : axes) {
      if (axis < -x->rank() || axis >= x->rank()) return Fallback(ctx);
      size_t i = static_cast<size_t>(axis < 0 ? axis + x->rank() : axis);
      if (reduced[i] && !axes.empty()) return Fallback(ctx);  // repeated
      reduced[i] = true;
    }
    std::vector<int64_t> out_shape;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (reduced[i]) kept[i] = 1;
      if (!reduced[i] || keepdims_) out_shape.push_back(kept[i]);
    }
    if (kept == x->shape()) return Fallback(ctx);  // nothing to reduce: a copy
    // One run of adjacent reduced dims [first, last] followed by kept dims
    // of more than one value: the strided fold.
    size_t first = 0;
    while (!reduced[first]) ++first;
    size_t last = first;
    while (last + 1 < reduced.size() && reduced[last + 1]) ++last;
    bool one_run = true;
    for (size_t i = last + 1; i < reduced.size(); ++i) one_run = one_run && !reduced[i];
    int64_t outer = 1, rows = 1, inner = 1;
    for (size_t i = 0; i < kept.size(); ++i) {
      (i < first ? outer : i <= last ? rows : inner) *= x->shape()[i];
    }
    if (spec_.log_sum_exp) {
      if (!one_run) return Fallback(ctx);
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out_shape));
      LogSumExp(x->data<float>(), outer, rows, inner, y->mutable_data<float>());
      if (inner > 1) g_strided_reductions.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    if (one_run && inner > 1) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out_shape));
      float* out = y->mutable_data<float>();
      FoldStrided(FoldOf(spec_), x->data<float>(), outer, rows, inner, out);
      if (spec_.alg == dnnl::algorithm::reduction_mean) {
        const float count = static_cast<float>(rows);
        for (int64_t i = 0; i < y->size(); ++i) out[i] /= count;
      } else if (spec_.alg == dnnl::algorithm::reduction_norm_lp_sum) {
        for (int64_t i = 0; i < y->size(); ++i) out[i] = std::sqrt(out[i]);
      }
      g_strided_reductions.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    if (x->shape() != src_shape_ || kept != dst_shape_ || !built_) {
      built_ = true;
      src_shape_ = x->shape();
      dst_shape_ = kept;
      src_ = PlainDesc(x->shape(), dt::f32);
      dst_ = PlainDesc(kept, dt::f32);
      bool reference_impl = false;  // oneDNN's reference code: slower than the reference kernel
      absl::Status s = Guard("reduction", [&] {
        dnnl::reduction::desc d(spec_.alg, src_, dst_, spec_.p, 0.f);
        dnnl::reduction::primitive_desc pd(d, Engine());
        reference_impl = std::string_view(pd.impl_info_str()).substr(0, 3) == "ref";
        primitive_ = dnnl::reduction(pd);
      });
      ok_ = s.ok() && !reference_impl;
    }
    if (!ok_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, out_shape));
    return Execute("reduction", primitive_,
                   {{DNNL_ARG_SRC, UserMemory(*x, src_)}, {DNNL_ARG_DST, UserMemory(*y, dst_)}});
  }

 private:
  ReduceSpec spec_;
  bool axes_input_;
  std::vector<int64_t> axes_attr_;
  bool keepdims_, noop_;
  bool built_ = false, ok_ = false;
  std::vector<int64_t> src_shape_, dst_shape_;
  dnnl::memory::desc src_, dst_;
  dnnl::reduction primitive_;
};

}  // namespace

int64_t StridedReductions() { return g_strided_reductions.load(std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<Kernel>> MakeReduce(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  std::optional<ReduceSpec> spec = SpecOf(node.op_type());
  if (!spec) return fallback;
  return std::unique_ptr<Kernel>(new ReduceKernel(node, info, *spec, std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
