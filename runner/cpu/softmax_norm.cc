// cpu Softmax, LogSoftmax (oneDNN softmax / logsoftmax over rows: before
// opset 13 the input is coerced to 2-D at `axis`; from 13 only an axis with
// no inner dims > 1 runs here) and LayerNormalization (oneDNN
// layer normalization over the last axis of the input viewed as
// [prod(dims < axis), prod(dims >= axis)]). Float32 only; the Mean and
// InvStdDev outputs of LayerNormalization, other types, shapes oneDNN does
// not take and inputs holding NaN or infinities run on the reference kernels.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;

// True when x holds NaN or an infinity (`positive_only`: +infinity): oneDNN
// skips NaN in the row maximum and treats infinite rows differently from
// the reference (whose rows then become NaN), so such inputs fall back.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool HasNonFinite(const float* x, int64_t n,
                                                                               bool positive_only) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int found = 0;
  if (positive_only) {
#pragma omp simd reduction(| : found)
    for (int64_t i = 0; i < n; ++i) found |= !(x[i] < kInf);
  } else {
#pragma omp simd reduction(| : found)
    for (int64_t i = 0; i < n; ++i) found |= !(std::fabs(x[i]) < kInf);
  }
  return found != 0;
}

class SoftmaxKernel : public CpuKernel {
 public:
  SoftmaxKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        log_(node.op_type() == "LogSoftmax"),
        coerce_2d_(info.opset < 13),
        axis_(reference::AttrInt(node, "axis", info.opset < 13 ? 1 : -1)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->rank() < 1 || x->rank() > 6 || x->size() == 0 ||
        HasNonFinite(x->data<float>(), x->size(), true)) {
      return Fallback(ctx);
    }
    if (x->shape() != key_ || !built_) {
      key_ = x->shape();
      built_ = true;
      ok_ = Build();
    }
    if (!ok_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    return Execute("softmax", primitive_,
                   {{DNNL_ARG_SRC, UserMemory(*x, desc_)}, {DNNL_ARG_DST, UserMemory(*y, desc_)}});
  }

 private:
  bool Build() {
    int64_t rank = static_cast<int64_t>(key_.size());
    if (axis_ < -rank || axis_ >= rank) return false;
    int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    // Rows of n contiguous elements: [outer, n]. oneDNN's kernels for an
    // axis with inner elements are far slower than the reference loop.
    int64_t outer = 1, n = 1, inner = 1;
    for (int i = 0; i < rank; ++i) {
      int64_t d = key_[static_cast<size_t>(i)];
      (i < axis ? outer : i == axis || coerce_2d_ ? n : inner) *= d;
    }
    if (inner != 1) return false;
    desc_ = PlainDesc({outer, n}, dt::f32);
    axis = 1;
    return Guard("softmax",
                 [&] {
                   if (log_) {
                     dnnl::logsoftmax_forward::desc d(dnnl::prop_kind::forward_inference, desc_, axis);
                     primitive_ =
                         dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(d, Engine()));
                   } else {
                     dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, desc_, axis);
                     primitive_ = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, Engine()));
                   }
                 })
        .ok();
  }

  bool log_, coerce_2d_;
  int64_t axis_;
  bool built_ = false, ok_ = false;
  std::vector<int64_t> key_;
  dnnl::memory::desc desc_;
  dnnl::primitive primitive_;
};

// True when `param` broadcasts onto `tail` (the normalized dims) as a whole:
// its shape, leading 1s dropped, equals `tail` with leading 1s dropped.
bool MatchesTail(const Tensor& param, std::vector<int64_t> tail) {
  std::vector<int64_t> p = param.shape();
  while (!p.empty() && p.front() == 1) p.erase(p.begin());
  while (!tail.empty() && tail.front() == 1) tail.erase(tail.begin());
  return param.dtype() == pb::kFloat && p == tail;
}

class LayerNormKernel : public CpuKernel {
 public:
  LayerNormKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        axis_(reference::AttrInt(node, "axis", -1)),
        epsilon_(reference::AttrFloat(node, "epsilon", 1e-5f)),
        stash_type_(reference::AttrInt(node, "stash_type", 1)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.OptionalInput(2));
    int64_t rank = x->rank();
    if (x->dtype() != pb::kFloat || x->size() == 0 || stash_type_ != 1 || axis_ < -rank || axis_ >= rank ||
        ctx.OutputRequested(1) || ctx.OutputRequested(2) ||
        HasNonFinite(x->data<float>(), x->size(), false)) {
      return Fallback(ctx);
    }
    size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    std::vector<int64_t> tail(x->shape().begin() + static_cast<std::ptrdiff_t>(axis), x->shape().end());
    if (!MatchesTail(*scale, tail) || (bias != nullptr && !MatchesTail(*bias, tail))) return Fallback(ctx);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < x->shape().size(); ++i) (i < axis ? outer : inner) *= x->shape()[i];
    dnnl::memory::desc desc = PlainDesc({outer, inner}, dt::f32);
    if (!primitive_ || desc != desc_ || (bias != nullptr) != with_bias_) {
      with_bias_ = bias != nullptr;
      ONNXKIT_RETURN_IF_ERROR(Guard("layer normalization", [&] {
        auto flags = dnnl::normalization_flags::use_scale;
        if (with_bias_) flags = flags | dnnl::normalization_flags::use_shift;
        dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, desc, epsilon_, flags);
        primitive_ =
            dnnl::layer_normalization_forward(dnnl::layer_normalization_forward::primitive_desc(d, Engine()));
      }));
      desc_ = desc;
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    dnnl::memory::desc param = PlainDesc({inner}, dt::f32);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, UserMemory(*x, desc)},
                                                  {DNNL_ARG_DST, UserMemory(*y, desc)},
                                                  {DNNL_ARG_SCALE, UserMemory(*scale, param)}};
    if (bias != nullptr) args[DNNL_ARG_SHIFT] = UserMemory(*bias, param);
    return Execute("layer normalization", primitive_, args);
  }

 private:
  int64_t axis_;
  float epsilon_;
  int64_t stash_type_;
  bool with_bias_ = false;
  dnnl::memory::desc desc_;
  dnnl::primitive primitive_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSoftmax(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<SoftmaxKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLayerNorm(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<LayerNormKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
