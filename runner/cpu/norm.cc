// cpu BatchNormalization (inference) and LRN on float32 tensors.
//
// BatchNormalization in inference mode is a per-channel affine map,
// y = (x - mean) * scale / sqrt(var + epsilon) + bias: a plain loop over
// channel planes (OpenMP), which is memory-bound and about three times as
// fast as oneDNN's plain-layout batch normalization here. Training mode
// (training_mode = 1, or the statistics outputs requested), the per-element
// parameters of spatial = 0 and the opset 1-5 forms fall back.
//
// LRN is oneDNN's across-channels LRN (ONNX's alpha / size convention is
// oneDNN's), for odd sizes (oneDNN centres even windows differently).
#include <cmath>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/parallel_for.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;

class BatchNormKernel : public CpuKernel {
 public:
  BatchNormKernel(std::unique_ptr<Kernel> fallback, bool inference, double epsilon)
      : CpuKernel(std::move(fallback)), inference_(inference), epsilon_(epsilon) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!inference_ || ctx.num_inputs() != 5) return Fallback(ctx);
    for (int i = 1; i < ctx.num_outputs(); ++i) {
      if (ctx.OutputRequested(i)) return Fallback(ctx);
    }
    const Tensor* in[5];
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<const Tensor*> t = ctx.Input(i);
      if (!t.ok() || (*t)->dtype() != pb::kFloat) return Fallback(ctx);
      in[i] = *t;
    }
    const Tensor& x = *in[0];
    if (x.rank() < 2 || x.size() == 0) return Fallback(ctx);
    int64_t channels = x.dim(1);
    for (int i = 1; i < 5; ++i) {
      if (in[i]->size() != channels) return Fallback(ctx);
    }
    const float* scale = in[1]->data<float>();
    const float* mean = in[3]->data<float>();
    const float* var = in[4]->data<float>();
    multiplier_.resize(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      multiplier_[static_cast<size_t>(c)] = static_cast<float>(
          static_cast<double>(scale[c]) / std::sqrt(static_cast<double>(var[c]) + epsilon_));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x.shape()));
    int64_t planes = x.dim(0) * channels;
    int64_t inner = x.size() / planes;
    Normalize(x.data<float>(), y->mutable_data<float>(), planes, inner, channels, mean, multiplier_.data(),
              in[2]->data<float>());
    return absl::OkStatus();
  }

 private:
  static void Normalize(const float* x, float* y, int64_t planes, int64_t inner, int64_t channels,
                        const float* mean, const float* multiplier, const float* bias) {
    ParallelFor(planes, planes * inner >= (int64_t{1} << 16), [&](int64_t p) {
      int64_t c = p % channels;
      float m = mean[c], a = multiplier[c], b = bias[c];
      const float* xp = x + p * inner;
      float* yp = y + p * inner;
      for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * a + b;
    });
  }

  bool inference_;
  double epsilon_;
  std::vector<float> multiplier_;
};

class LrnKernel : public CpuKernel {
 public:
  LrnKernel(std::unique_ptr<Kernel> fallback, float alpha, float beta, float bias, int64_t size)
      : CpuKernel(std::move(fallback)), alpha_(alpha), beta_(beta), bias_(bias), size_(size) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->dtype() != pb::kFloat || x->rank() < 3 || x->rank() > 5 || x->size() == 0 || size_ % 2 == 0) {
      return Fallback(ctx);
    }
    memory::desc desc = PlainDesc(x->shape(), memory::data_type::f32);
    if (!built_ || desc != desc_) {
      primitive_ = dnnl::primitive();
      absl::Status s = Guard("lrn", [&] {
        dnnl::lrn_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels,
                                  desc, size_, alpha_, beta_, bias_);
        primitive_ = dnnl::lrn_forward(dnnl::lrn_forward::primitive_desc(d, Engine()));
      });
      supported_ = s.ok();
      built_ = true;
      desc_ = desc;
    }
    if (!supported_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    std::unordered_map<int, memory> args;
    ONNXKIT_RETURN_IF_ERROR(Guard("lrn memory", [&] {
      args[DNNL_ARG_SRC] = x_mem_.At(*x, desc_);
      args[DNNL_ARG_DST] = y_mem_.At(*y, desc_);
    }));
    return Execute("lrn", primitive_, args);
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
  bool built_ = false;
  bool supported_ = false;
  memory::desc desc_;
  HeldMemory x_mem_, y_mem_;  // re-pointed at each run's buffers
  dnnl::primitive primitive_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeBatchNormalization(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  // Opset 6-8 may ask for per-element parameters (spatial = 0); opset 14
  // adds training_mode.
  bool inference = info.opset >= 6 && (info.opset >= 9 || reference::AttrInt(node, "spatial", 1) != 0) &&
                   (info.opset < 14 || reference::AttrInt(node, "training_mode", 0) == 0);
  double epsilon = reference::AttrFloat(node, "epsilon", 1e-5f);
  return std::unique_ptr<Kernel>(new BatchNormKernel(std::move(fallback), inference, epsilon));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLRN(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  int64_t size = reference::AttrInt(node, "size", 1);
  return std::unique_ptr<Kernel>(new LrnKernel(
      std::move(fallback), reference::AttrFloat(node, "alpha", 1e-4f),
      reference::AttrFloat(node, "beta", 0.75f), reference::AttrFloat(node, "bias", 1.0f), size));
}

}  // namespace onnxkit::runner::cpu
