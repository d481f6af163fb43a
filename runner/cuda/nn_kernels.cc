// CUDA kernels of normalization and pooling ops: BatchNormalization
// (inference), LayerNormalization, LRN, MaxPool / AveragePool and their
// Global forms, Clip, Sum. Floating-point types (float, float16, bfloat16)
// only; what a kernel declines (training outputs, pooling Indices, mixed
// parameter types, more than 3 spatial dims) runs on the cpu backend. The
// pooling windows are the reference backend's geometry (runner/reference/
// nn.h), shared.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"
#include "runner/reference/quantization.h"
#include "runner/reference/resize_geometry.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::cuda {
namespace {

// Whether every present input among [0, n) is a tensor of x's float type.
bool SameFloatType(const KernelContext& ctx, int n, int required) {
  auto in = TensorInputs(ctx, required);
  if (!in || !IsFloatType((*in)[0]->dtype())) return false;
  for (int i = 0; i < n; ++i) {
    const RtValue* v = ctx.Value(i);
    if (v == nullptr) continue;
    if (!v->is_tensor() || !v->tensor().defined() || v->tensor().dtype() != (*in)[0]->dtype()) return false;
  }
  return true;
}

// Whether output i beyond the first is requested (named) by the node.
bool ExtraOutputsRequested(const KernelContext& ctx) {
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.OutputRequested(i)) return true;
  }
  return false;
}

class BatchNormKernel : public CudaKernel {
 public:
  BatchNormKernel(std::shared_ptr<Context> context, float epsilon)
      : context_(std::move(context)), epsilon_(epsilon) {}

  bool Accepts(const KernelContext& ctx) const override {
    if (ExtraOutputsRequested(ctx) || !SameFloatType(ctx, 5, 5)) return false;
    const Tensor& x = ctx.Value(0)->tensor();
    if (x.rank() < 2) return false;
    for (int i = 1; i < 5; ++i) {
      const Tensor& p = ctx.Value(i)->tensor();
      if (p.rank() != 1 || p.dim(0) != x.dim(1)) return false;
    }
    return true;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    const int64_t c = x.dim(1);
    const int64_t inner = reference::shape_ops::DimProduct(x.shape(), 2, x.shape().size());
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(
        LaunchBatchNorm(x.dtype(), x.raw(), ctx.Value(1)->tensor().raw(), ctx.Value(2)->tensor().raw(),
                        ctx.Value(3)->tensor().raw(), ctx.Value(4)->tensor().raw(), y.mutable_raw(), x.size(),
                        c, inner, epsilon_, context_->stream()),
        "BatchNormalization"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  float epsilon_;
};

class LayerNormKernel : public CudaKernel {
 public:
  LayerNormKernel(std::shared_ptr<Context> context, int64_t axis, float epsilon)
      : context_(std::move(context)), axis_(axis), epsilon_(epsilon) {}

  bool Accepts(const KernelContext& ctx) const override {
    if (ExtraOutputsRequested(ctx) || !SameFloatType(ctx, 3, 2)) return false;
    const Tensor& x = ctx.Value(0)->tensor();
    auto axis = reference::NormalizeAxis(axis_, x.rank());
    if (!axis.ok()) return false;
    const int64_t len =
        reference::shape_ops::DimProduct(x.shape(), static_cast<size_t>(*axis), x.shape().size());
    // Scale and bias of exactly the normalized size (broadcast ones run on
    // the cpu backend).
    for (int i = 1; i < 3; ++i) {
      const RtValue* v = ctx.Value(i);
      if (v != nullptr && v->tensor().size() != len) return false;
    }
    return len > 0;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, reference::NormalizeAxis(axis_, x.rank()));
    const int64_t len =
        reference::shape_ops::DimProduct(x.shape(), static_cast<size_t>(axis), x.shape().size());
    const int64_t rows = x.size() / len;
    const void* bias = ctx.Value(2) != nullptr ? ctx.Value(2)->tensor().raw() : nullptr;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchLayerNorm(x.dtype(), x.raw(), ctx.Value(1)->tensor().raw(), bias, y.mutable_raw(),
                                 rows, len, epsilon_, context_->stream()),
                 "LayerNormalization"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  int64_t axis_;
  float epsilon_;
};

class LrnKernel : public CudaKernel {
 public:
  LrnKernel(std::shared_ptr<Context> context, int64_t size, float alpha, float beta, float bias)
      : context_(std::move(context)), size_(size), alpha_(alpha), beta_(beta), bias_(bias) {}

  bool Accepts(const KernelContext& ctx) const override {
    return SameFloatType(ctx, 1, 1) && ctx.Value(0)->tensor().rank() >= 2;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    const int64_t inner = reference::shape_ops::DimProduct(x.shape(), 2, x.shape().size());
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchLrn(x.dtype(), x.raw(), y.mutable_raw(), x.size(), x.dim(1), inner,
                                               size_, alpha_, beta_, bias_, context_->stream()),
                                     "LRN"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  int64_t size_;
  float alpha_, beta_, bias_;
};

class PoolKernel : public CudaKernel {
 public:
  PoolKernel(std::shared_ptr<Context> context, reference::WindowAttrs attrs, PoolMode mode, bool global)
      : context_(std::move(context)), attrs_(std::move(attrs)), mode_(mode), global_(global) {}

  bool Accepts(const KernelContext& ctx) const override {
    if (ExtraOutputsRequested(ctx) || !SameFloatType(ctx, 1, 1)) return false;
    return Geometry(ctx.Value(0)->tensor()).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Plan plan, Geometry(x));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), plan.shape));
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchPool(mode_, x.dtype(), x.raw(), y.mutable_raw(), plan.g, context_->stream()),
                 ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  struct Plan {
    PoolGeometry g;
    std::vector<int64_t> shape;
  };

  absl::StatusOr<Plan> Geometry(const Tensor& x) const {
    const int spatial = x.rank() - 2;
    if (spatial < 1 || spatial > 3) return absl::UnimplementedError("pooling over 1 to 3 spatial dims");
    std::span<const int64_t> in(x.shape().data() + 2, static_cast<size_t>(spatial));
    std::vector<int64_t> kernel = global_ ? std::vector<int64_t>(in.begin(), in.end()) : attrs_.kernel_shape;
    if (kernel.size() != in.size()) return absl::InvalidArgumentError("kernel_shape does not match X");
    reference::WindowAttrs attrs = global_ ? reference::WindowAttrs{} : attrs_;
    ONNXKIT_ASSIGN_OR_RETURN(reference::Window w, reference::ResolveWindow(attrs, in, kernel));
    Plan plan;
    plan.shape = {x.dim(0), x.dim(1)};
    plan.shape.insert(plan.shape.end(), w.out.begin(), w.out.end());
    if (!CheckedElementCount(plan.shape)) return absl::InvalidArgumentError("output size overflows");
    PoolGeometry& g = plan.g;
    g.rank = spatial;
    g.planes = x.dim(0) * x.dim(1);
    for (int d = 0; d < spatial; ++d) {
      const auto u = static_cast<size_t>(d);
      g.in[d] = w.in[u];
      g.out[d] = w.out[u];
      g.kernel[d] = w.kernel[u];
      g.stride[d] = w.strides[u];
      g.dilation[d] = w.dilations[u];
      g.pad_begin[d] = w.pad_begin[u];
      g.limit[d] = w.in[u] + w.pad_begin[u] + w.pad_end[u];
    }
    g.in_size = w.in_size;
    g.out_size = w.out_size;
    return plan;
  }

  std::shared_ptr<Context> context_;
  reference::WindowAttrs attrs_;
  PoolMode mode_;
  bool global_;
};

// Clip: bounds from attributes (before opset 11) or from the optional
// one-element inputs 1 and 2, read on the host.
class ClipKernel : public CudaKernel {
 public:
  ClipKernel(std::shared_ptr<Context> context, bool from_inputs, float lo, float hi)
      : context_(std::move(context)), from_inputs_(from_inputs), lo_(lo), hi_(hi) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    if (!SameFloatType(ctx, from_inputs_ ? 3 : 1, 1)) return false;
    for (int i = 1; i < 3 && from_inputs_; ++i) {
      if (ctx.Value(i) != nullptr && ctx.Value(i)->tensor().size() != 1) return false;
    }
    return true;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    float lo = lo_, hi = hi_;
    if (from_inputs_) {
      for (int i = 1; i < 3; ++i) {
        if (ctx.Value(i) == nullptr) continue;
        ONNXKIT_ASSIGN_OR_RETURN(
            double v, reference::shape_ops::ReadScalar(ctx.Value(i)->tensor(), i == 1 ? "min" : "max"));
        (i == 1 ? lo : hi) = static_cast<float>(v);
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchUnary(UnaryOp::kClip, x.dtype(), x.raw(), y.mutable_raw(),
                                                 x.size(), lo, hi, context_->stream()),
                                     "Clip"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  bool from_inputs_;
  float lo_, hi_;
};

// Sum of one or more broadcasting inputs: the first two added into the
// output, each further one added in place.
class SumKernel : public CudaKernel {
 public:
  explicit SumKernel(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  bool Accepts(const KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !SameFloatType(ctx, ctx.num_inputs(), ctx.num_inputs())) return false;
    return OutputShape(ctx).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x0 = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, OutputShape(ctx));
    if (ctx.num_inputs() == 1) return ctx.SetOutput(0, *ctx.Value(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x0.dtype(), shape));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const Tensor& a = i == 1 ? x0 : y;
      const Tensor& b = ctx.Value(i)->tensor();
      auto ga = BroadcastGeometry(a.shape(), shape);
      auto gb = BroadcastGeometry(b.shape(), shape);
      if (!ga || !gb) return absl::InternalError("Sum shapes changed after the kernel accepted them");
      StridedGeometry g = *ga;
      for (int d = 0; d < gb->rank; ++d) g.b[d] = gb->a[d];
      ONNXKIT_RETURN_IF_ERROR(Launched(LaunchBinary(BinaryOp::kAdd, x0.dtype(), a.raw(), b.raw(),
                                                    y.mutable_raw(), y.size(), g, context_->stream()),
                                       "Sum"));
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  static absl::StatusOr<std::vector<int64_t>> OutputShape(const KernelContext& ctx) {
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.Value(i)->tensor().shape());
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, reference::BroadcastShapes(shapes));
    if (shape.size() > static_cast<size_t>(kMaxRank)) return absl::UnimplementedError("rank above the limit");
    return shape;
  }

  std::shared_ptr<Context> context_;
};

// Reductions over any axes (attribute before the opset where axes became
// an input, read on the host after).
class ReduceKernel : public CudaKernel {
 public:
  ReduceKernel(std::shared_ptr<Context> context, ReduceOp op, bool axes_input,
               std::optional<std::vector<int64_t>> axes_attr, bool keepdims, bool noop)
      : context_(std::move(context)),
        op_(op),
        axes_input_(axes_input),
        axes_attr_(std::move(axes_attr)),
        keepdims_(keepdims),
        noop_(noop) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    const RtValue* x = ctx.Value(0);
    if (x == nullptr || !x->is_tensor() || !IsFloatType(x->tensor().dtype()) ||
        x->tensor().rank() > kMaxRank) {
      return false;
    }
    const RtValue* axes = axes_input_ ? ctx.Value(1) : nullptr;
    if (axes != nullptr && (!axes->is_tensor() || axes->tensor().on_device() || axes->tensor().rank() > 1)) {
      return false;
    }
    auto g = Geometry(ctx);
    return g.ok() && g->first.count > 0;
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(auto plan, Geometry(ctx));
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), plan.second));
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchReduce(op_, x.dtype(), x.raw(), y.mutable_raw(), plan.first, context_->stream()),
                 ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  // The device geometry and the output shape; an error when the axes are
  // bad or empty with noop_with_empty_axes (left to the cpu backend).
  absl::StatusOr<std::pair<ReduceGeometry, std::vector<int64_t>>> Geometry(const KernelContext& ctx) const {
    const Tensor& x = ctx.Value(0)->tensor();
    std::vector<int64_t> axes;
    if (axes_input_) {
      const RtValue* a = ctx.Value(1);
      if (a != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(axes, reference::shape_ops::ReadInts(a->tensor(), "axes"));
      }
    } else if (axes_attr_) {
      axes = *axes_attr_;
    }
    if (axes.empty() && noop_) return absl::UnimplementedError("no axes: nothing reduced");
    const int rank = x.rank();
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : axes) {
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, reference::NormalizeAxis(a, rank, "axes value"));
      if (reduced[static_cast<size_t>(axis)]) return absl::InvalidArgumentError("repeated axis");
      reduced[static_cast<size_t>(axis)] = true;
    }
    std::pair<ReduceGeometry, std::vector<int64_t>> plan;
    ReduceGeometry& g = plan.first;
    std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
    for (int d = rank - 2; d >= 0; --d)
      strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d) + 1] * x.dim(d + 1);
    g.outputs = 1;
    g.count = 1;
    int last_kept = -1;
    for (int d = 0; d < rank; ++d) {
      const auto u = static_cast<size_t>(d);
      if (reduced[u]) {
        g.reduced_dims[g.reduced_rank] = x.dim(d);
        g.reduced_strides[g.reduced_rank++] = strides[u];
        g.count *= x.dim(d);
        if (keepdims_) plan.second.push_back(1);
      } else {
        g.kept_dims[g.kept_rank] = x.dim(d);
        g.kept_strides[g.kept_rank++] = strides[u];
        g.outputs *= x.dim(d);
        plan.second.push_back(x.dim(d));
        last_kept = d;
      }
    }
    // The reduced axes trailing the kept ones: each output's values are
    // count consecutive elements.
    g.contiguous = true;
    for (int d = 0; d < rank; ++d) {
      if (reduced[static_cast<size_t>(d)] && d < last_kept) g.contiguous = false;
    }
    return plan;
  }

  std::shared_ptr<Context> context_;
  ReduceOp op_;
  bool axes_input_;
  std::optional<std::vector<int64_t>> axes_attr_;
  bool keepdims_, noop_;
};

// Resize and Upsample (experimental: not yet run on a GPU) of float,
// float16 and bfloat16 tensors: the reference backend's geometry (its taps
// and weights per output coordinate of every axis, runner/reference/
// resize_geometry.h), shared, made on the host and copied up once per
// shape; the device sums the product of the axes' taps in float. Scales,
// sizes and roi are read on the host.
class ResizeKernel : public CudaKernel {
 public:
  ResizeKernel(std::shared_ptr<Context> context, reference::resize::Config config)
      : context_(std::move(context)), config_(std::move(config)) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 1);
    return in && IsFloatType((*in)[0]->dtype()) && (*in)[0]->rank() >= 1 && (*in)[0]->rank() <= kMaxRank;
  }

  absl::Status Run(KernelContext& ctx) override {
    namespace rs = reference::resize;
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(rs::Geometry g, rs::ResolveGeometry(ctx, config_, x));
    for (int d = 0; d < x.rank(); ++d) {
      if (x.dim(d) == 0 && g.out_shape[static_cast<size_t>(d)] > 0) {
        return absl::InvalidArgumentError(absl::StrCat("cannot resize the empty axis ", d, " of X"));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), g.out_shape));
    if (y.size() == 0) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    if (!tables_ || x.shape() != planned_x_ || g.out_shape != planned_.out_shape ||
        g.scales != planned_.scales || g.roi_start != planned_.roi_start || g.roi_end != planned_.roi_end) {
      ONNXKIT_RETURN_IF_ERROR(Tables(x.shape(), g));
      planned_x_ = x.shape();
      planned_ = g;
    }
    ONNXKIT_RETURN_IF_ERROR(Launch(x, y));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  // Per axis, in one int64 tensor: first[out], count[out] and the taps'
  // element offsets; the taps' weights in one float tensor
  // (reference::resize::FlattenTaps). Copied up once per geometry.
  absl::Status Tables(const std::vector<int64_t>& x_shape, const reference::resize::Geometry& g) {
    const reference::resize::FlatTaps f = reference::resize::FlattenTaps(config_, x_shape, g);
    std::vector<int64_t> ints;
    std::vector<float> weights;
    layout_.assign(x_shape.size(), AxisLayout{});
    for (size_t d = 0; d < x_shape.size(); ++d) {
      AxisLayout& a = layout_[d];
      a.first = ints.size();
      ints.insert(ints.end(), f.first[d].begin(), f.first[d].end());
      a.count = ints.size();
      ints.insert(ints.end(), f.count[d].begin(), f.count[d].end());
      a.offset = ints.size();
      ints.insert(ints.end(), f.offset[d].begin(), f.offset[d].end());
      a.weight = weights.size();
      weights.insert(weights.end(), f.weight[d].begin(), f.weight[d].end());
    }
    ints.push_back(0);  // neither is ever empty
    weights.push_back(0.f);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor host_ints,
                             Tensor::AllocateUninitialized(kInt64, {static_cast<int64_t>(ints.size())}));
    std::copy(ints.begin(), ints.end(), host_ints.mutable_data<int64_t>());
    ONNXKIT_ASSIGN_OR_RETURN(Tensor host_weights,
                             Tensor::AllocateUninitialized(kFloat, {static_cast<int64_t>(weights.size())}));
    std::copy(weights.begin(), weights.end(), host_weights.mutable_data<float>());
    ONNXKIT_ASSIGN_OR_RETURN(Tensor ints_on_device, ToDevice(*context_, host_ints));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor weights_on_device, ToDevice(*context_, host_weights));
    tables_ = std::move(ints_on_device);
    weights_ = std::move(weights_on_device);
    return absl::OkStatus();
  }

  absl::Status Launch(const Tensor& x, Tensor& y) {
    ResizeGeometry g;
    g.rank = y.rank();
    g.extrapolation = static_cast<float>(config_.extrapolation);
    const auto* ints = static_cast<const int64_t*>(tables_->raw());
    const auto* weights = static_cast<const float*>(weights_->raw());
    for (int d = 0; d < y.rank(); ++d) {
      const AxisLayout& a = layout_[static_cast<size_t>(d)];
      g.out_dims[d] = y.dim(d);
      g.first[d] = ints + a.first;
      g.count[d] = ints + a.count;
      g.offset[d] = ints + a.offset;
      g.weight[d] = weights + a.weight;
    }
    return Launched(LaunchResize(x.dtype(), x.raw(), y.mutable_raw(), y.size(), g, context_->stream()),
                    "Resize");
  }

  struct AxisLayout {
    size_t first = 0, count = 0, offset = 0, weight = 0;
  };

  std::shared_ptr<Context> context_;
  reference::resize::Config config_;
  std::vector<int64_t> planned_x_;
  reference::resize::Geometry planned_;
  std::vector<AxisLayout> layout_;
  std::optional<Tensor> tables_, weights_;
};

// QuantizeLinear and DequantizeLinear (experimental) of 8- and 16-bit
// integer types, per tensor, per axis or blocked; the node is read as the
// reference kernel reads it (reference::QuantizeSpecOf). x and the scale
// of QuantizeLinear share a floating-point type, in which the quotient is
// computed; DequantizeLinear's scale has the output's type. Other types
// (4-bit, float8, a scale of another type) run on the cpu backend.
class QuantizeLinearKernel : public CudaKernel {
 public:
  QuantizeLinearKernel(std::shared_ptr<Context> context, bool dequantize)
      : context_(std::move(context)), dequantize_(dequantize) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 2);
    if (!in) return false;
    const Tensor* zp = nullptr;
    if (const RtValue* v = ctx.Value(2); v != nullptr) {
      if (!v->is_tensor() || !v->tensor().defined()) return false;
      zp = &v->tensor();
    }
    const Tensor& x = *(*in)[0];
    const Tensor& scale = *(*in)[1];
    if (dequantize_) {
      auto spec = reference::DequantizeSpecOf(ctx, x, scale, zp);
      const int32_t t = x.dtype();
      return spec.ok() && spec->out_type == scale.dtype() && IsFloatType(scale.dtype()) &&
             (t == kUint8 || t == kInt8 || t == kUint16 || t == kInt16 || t == kInt32);
    }
    auto spec = reference::QuantizeSpecOf(ctx, x, scale, zp);
    const int32_t t = spec.ok() ? spec->out_type : 0;
    return spec.ok() && IsFloatType(x.dtype()) && scale.dtype() == x.dtype() &&
           spec->precision == x.dtype() && (t == kUint8 || t == kInt8 || t == kUint16 || t == kInt16);
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    const Tensor& scale = ctx.Value(1)->tensor();
    const Tensor* zp = ctx.Value(2) != nullptr ? &ctx.Value(2)->tensor() : nullptr;
    const void* zp_data = zp != nullptr ? zp->raw() : nullptr;
    if (dequantize_) {
      ONNXKIT_ASSIGN_OR_RETURN(reference::DequantizeSpec spec,
                               reference::DequantizeSpecOf(ctx, x, scale, zp));
      ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(spec.out_type, x.shape()));
      ONNXKIT_RETURN_IF_ERROR(
          Launched(LaunchDequantize(x.dtype(), spec.out_type, x.raw(), scale.raw(), zp_data, y.mutable_raw(),
                                    x.size(), spec.map, context_->stream()),
                   "DequantizeLinear"));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(reference::QuantizeSpec spec, reference::QuantizeSpecOf(ctx, x, scale, zp));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(spec.out_type, x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchQuantize(x.dtype(), spec.out_type, x.raw(), scale.raw(), zp_data,
                                                    y.mutable_raw(), x.size(), spec.map, context_->stream()),
                                     "QuantizeLinear"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  bool dequantize_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeBatchNorm(const std::shared_ptr<Context>& context,
                                                          const ir::Node& node, const KernelInfo& info) {
  // Training mode (opset 14+) and per-element parameters (spatial = 0,
  // before opset 9) run on the cpu backend.
  if (info.opset >= 14 && reference::AttrInt(node, "training_mode", 0) != 0)
    return std::unique_ptr<CudaKernel>();
  if (info.opset < 9 && reference::AttrInt(node, "spatial", 1) == 0) return std::unique_ptr<CudaKernel>();
  if (info.opset < 7) return std::unique_ptr<CudaKernel>();  // is_test and consumed_inputs
  return std::unique_ptr<CudaKernel>(
      new BatchNormKernel(context, reference::AttrFloat(node, "epsilon", 1e-5f)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeLayerNorm(const std::shared_ptr<Context>& context,
                                                          const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new LayerNormKernel(context, reference::AttrInt(node, "axis", -1),
                                                         reference::AttrFloat(node, "epsilon", 1e-5f)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeLrn(const std::shared_ptr<Context>& context,
                                                    const ir::Node& node, const KernelInfo&) {
  const int64_t size = reference::AttrInt(node, "size", 0);
  if (size < 1) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  return std::unique_ptr<CudaKernel>(new LrnKernel(context, size, reference::AttrFloat(node, "alpha", 1e-4f),
                                                   reference::AttrFloat(node, "beta", 0.75f),
                                                   reference::AttrFloat(node, "bias", 1.0f)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakePool(const std::shared_ptr<Context>& context,
                                                     const ir::Node& node, const KernelInfo&) {
  const std::string& op = node.op_type();
  const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  const bool max = op == "MaxPool" || op == "GlobalMaxPool";
  reference::WindowAttrs attrs;
  if (!global) {
    auto parsed = reference::ParseWindowAttrs(node);
    if (!parsed.ok() || parsed->kernel_shape.empty()) return std::unique_ptr<CudaKernel>();
    attrs = *std::move(parsed);
    // Indices in column-major order exist only with the Indices output,
    // which runs on the cpu backend anyway.
  }
  PoolMode mode =
      max ? PoolMode::kMax
          : (!global && reference::AttrInt(node, "count_include_pad", 0) != 0 ? PoolMode::kAverageIncludePad
                                                                              : PoolMode::kAverage);
  return std::unique_ptr<CudaKernel>(new PoolKernel(context, std::move(attrs), mode, global));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeClip(const std::shared_ptr<Context>& context,
                                                     const ir::Node& node, const KernelInfo& info) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (info.opset >= 11) return std::unique_ptr<CudaKernel>(new ClipKernel(context, true, -kInf, kInf));
  const ir::Attribute* lo = node.FindAttribute("min");
  const ir::Attribute* hi = node.FindAttribute("max");
  return std::unique_ptr<CudaKernel>(new ClipKernel(context, false,
                                                    lo ? reference::AttrFloat(node, "min", 0) : -kInf,
                                                    hi ? reference::AttrFloat(node, "max", 0) : kInf));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSum(const std::shared_ptr<Context>& context, const ir::Node&,
                                                    const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new SumKernel(context));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeReduce(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo& info) {
  const std::string& type = node.op_type();
  ReduceOp op;
  if (type == "ReduceSum")
    op = ReduceOp::kSum;
  else if (type == "ReduceMean")
    op = ReduceOp::kMean;
  else if (type == "ReduceMax")
    op = ReduceOp::kMax;
  else if (type == "ReduceMin")
    op = ReduceOp::kMin;
  else if (type == "ReduceSumSquare")
    op = ReduceOp::kSumSquare;
  else if (type == "ReduceL2")
    op = ReduceOp::kL2;
  else
    return std::unique_ptr<CudaKernel>();
  // Axes became an input at opset 13 for ReduceSum, 18 for the others.
  const bool axes_input = info.opset >= (op == ReduceOp::kSum ? 13 : 18);
  std::optional<std::vector<int64_t>> axes_attr;
  if (!axes_input) axes_attr = node.GetInts("axes");
  return std::unique_ptr<CudaKernel>(new ReduceKernel(
      context, op, axes_input, std::move(axes_attr), reference::AttrInt(node, "keepdims", 1) != 0,
      axes_input && reference::AttrInt(node, "noop_with_empty_axes", 0) != 0));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeResize(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo& info) {
  if (!context->experimental()) return std::unique_ptr<CudaKernel>();
  auto config = node.op_type() == "Upsample" ? reference::resize::ParseUpsample(node, info.opset)
                                             : reference::resize::ParseResize(node, info.opset);
  if (!config.ok()) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  return std::unique_ptr<CudaKernel>(new ResizeKernel(context, *std::move(config)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeQuantizeLinear(const std::shared_ptr<Context>& context,
                                                               const ir::Node& node,
                                                               const KernelInfo& /*info*/) {
  if (!context->experimental()) return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(new QuantizeLinearKernel(context, node.op_type() == "DequantizeLinear"));
}

}  // namespace onnxkit::runner::cuda
