// CUDA kernels that move data or only change shapes:
//   - views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
//     Dropout) and shape queries (Shape, Size): the reference kernels, which
//     read only the input's shape and their host-side shape/axes inputs; the
//     output shares the device buffer (Shape, Size and Dropout's mask are
//     host tensors);
//   - Concat (one 2-D copy per input), Slice (a strided copy; the window is
//     the reference backend's, shared), Gather (indices checked on the host,
//     then copied up; constant indices once), Expand (a broadcasting copy).
// Fixed-size element types of 1, 2, 4 or 8 bytes; strings and sub-byte
// types run on the cpu backend.
#include <cstring>

#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/misc.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::cuda {
namespace {

// Bytes per element of a type the copy kernels move, or 0.
int CopyableBytes(const Tensor& t) {
  if (t.is_string() || !reference::IsStandardNumeric(t.dtype())) return 0;
  std::optional<int64_t> bytes = RawByteSize(t.dtype(), 1);
  if (!bytes || (*bytes != 1 && *bytes != 2 && *bytes != 4 && *bytes != 8)) return 0;
  return static_cast<int>(*bytes);
}

// A reference kernel that never reads the elements of input 0 (only its
// shape) and reads its other inputs on the host: it runs as it is on a
// device tensor, and its outputs are views of it (or host tensors).
class ShapeOnlyKernel : public CudaKernel {
 public:
  ShapeOnlyKernel(std::unique_ptr<Kernel> inner, int max_outputs)
      : inner_(std::move(inner)), max_outputs_(max_outputs) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kAny : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    for (int i = max_outputs_; i < ctx.num_outputs(); ++i) {
      if (ctx.OutputRequested(i)) return false;
    }
    const RtValue* x = ctx.Value(0);
    return x != nullptr && x->is_tensor() && x->tensor().defined() && !x->tensor().is_string();
  }

  absl::Status Run(KernelContext& ctx) override { return inner_->Run(ctx); }

 private:
  std::unique_ptr<Kernel> inner_;
  int max_outputs_;
};

class ConcatKernel : public CudaKernel {
 public:
  ConcatKernel(std::shared_ptr<Context> context, int64_t axis) : context_(std::move(context)), axis_(axis) {}

  bool Accepts(const KernelContext& ctx) const override { return OutputShape(ctx).ok(); }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, OutputShape(ctx));
    const Tensor& first = ctx.Value(0)->tensor();
    const auto a = static_cast<size_t>(*reference::NormalizeAxis(axis_, first.rank()));
    const int64_t outer = reference::shape_ops::DimProduct(shape, 0, a);
    const int64_t inner = reference::shape_ops::DimProduct(shape, a + 1, shape.size());
    const int64_t es = CopyableBytes(first);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(first.dtype(), shape));
    const int64_t out_row = shape[a] * inner * es;
    int64_t at = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.Value(i)->tensor();
      const int64_t row = x.dim(static_cast<int>(a)) * inner * es;
      if (row > 0 && outer > 0) {
        ONNXKIT_RETURN_IF_ERROR(CudaStatus(
            cudaMemcpy2DAsync(static_cast<char*>(y.mutable_raw()) + at, static_cast<size_t>(out_row), x.raw(),
                              static_cast<size_t>(row), static_cast<size_t>(row), static_cast<size_t>(outer),
                              cudaMemcpyDeviceToDevice, context_->stream()),
            "Concat copy"));
      }
      at += row;
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  absl::StatusOr<std::vector<int64_t>> OutputShape(const KernelContext& ctx) const {
    auto in = TensorInputs(ctx, ctx.num_inputs());
    if (!in || in->empty()) return absl::InvalidArgumentError("inputs");
    const Tensor& first = *(*in)[0];
    if (CopyableBytes(first) == 0) return absl::UnimplementedError("element type");
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, reference::NormalizeAxis(axis_, first.rank()));
    std::vector<int64_t> shape = first.shape();
    shape[static_cast<size_t>(axis)] = 0;
    for (const Tensor* t : *in) {
      if (t->dtype() != first.dtype() || t->rank() != first.rank())
        return absl::InvalidArgumentError("inputs");
      for (int d = 0; d < t->rank(); ++d) {
        if (d != axis && t->dim(d) != first.dim(d)) return absl::InvalidArgumentError("shapes");
      }
      shape[static_cast<size_t>(axis)] += t->dim(static_cast<int>(axis));
    }
    return shape;
  }

  std::shared_ptr<Context> context_;
  int64_t axis_;
};

class SliceKernel : public CudaKernel {
 public:
  explicit SliceKernel(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    const RtValue* x = ctx.Value(0);
    return x != nullptr && x->is_tensor() && x->tensor().defined() && CopyableBytes(x->tensor()) != 0 &&
           x->tensor().rank() <= kMaxRank;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(reference::shape_ops::SliceGeometry s,
                             reference::shape_ops::ResolveSlice(ctx, x.shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), s.out_shape));
    if (y.size() == 0) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    const std::vector<int64_t> strides = reference::Strides(x.shape());
    StridedGeometry g;
    g.rank = x.rank();
    int64_t base = 0;
    for (int d = 0; d < x.rank(); ++d) {
      const auto u = static_cast<size_t>(d);
      g.dims[d] = s.out_shape[u];
      g.a[d] = strides[u] * s.step[u];
      base += s.start[u] * strides[u];
    }
    const int es = CopyableBytes(x);
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchStridedCopy(es, static_cast<const char*>(x.raw()) + base * es,
                                                       y.mutable_raw(), y.size(), g, context_->stream()),
                                     "Slice"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
};

// Constant indices are read on the host (checked there, an out-of-range
// index is an error naming it) and uploaded once; other indices stay where
// they are computed, on the device, where the kernel checks them and flags
// one out of range (CheckDeviceErrors reports it at the end of the run).
class GatherKernel : public CudaKernel {
 public:
  GatherKernel(std::shared_ptr<Context> context, int64_t axis, bool constant_indices)
      : context_(std::move(context)), axis_(axis), constant_indices_(constant_indices) {}

  Side InputSide(int i) const override { return i == 0 || !constant_indices_ ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 2);
    if (!in || CopyableBytes(*(*in)[0]) == 0 || (*in)[0]->rank() == 0) return false;
    const int32_t it = (*in)[1]->dtype();
    return (it == kInt32 || it == kInt64) && reference::NormalizeAxis(axis_, (*in)[0]->rank()).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& data = ctx.Value(0)->tensor();
    const Tensor& ind = ctx.Value(1)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, reference::NormalizeAxis(axis_, data.rank()));
    const auto a = static_cast<size_t>(axis);
    const int64_t dim = data.shape()[a];
    std::vector<int64_t> out_shape(data.shape().begin(), data.shape().begin() + axis);
    out_shape.insert(out_shape.end(), ind.shape().begin(), ind.shape().end());
    out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
    const void* device_indices = nullptr;
    int index_bytes = 8;
    int* flag = nullptr;
    if (ind.on_device()) {
      device_indices = ind.raw();
      index_bytes = ind.dtype() == kInt32 ? 4 : 8;
      flag = context_->error_flag();
    } else if (cached_.has_value() && cached_dim_ == dim) {
      device_indices = cached_->raw();
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, reference::shape_ops::ReadInts(ind, "indices"));
      ONNXKIT_ASSIGN_OR_RETURN(Tensor host,
                               Tensor::AllocateUninitialized(kInt64, {static_cast<int64_t>(idx.size())}));
      for (size_t i = 0; i < idx.size(); ++i) {
        const int64_t v = idx[i] < 0 ? idx[i] + dim : idx[i];
        if (v < 0 || v >= dim) {
          return absl::OutOfRangeError(
              absl::StrCat("Gather index ", idx[i], " is out of range for an axis of size ", dim));
        }
        host.mutable_data<int64_t>()[i] = v;
      }
      ONNXKIT_ASSIGN_OR_RETURN(Tensor uploaded, ToDevice(*context_, host));
      cached_ = std::move(uploaded);
      cached_dim_ = dim;
      device_indices = cached_->raw();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(data.dtype(), out_shape));
    const int64_t outer = reference::shape_ops::DimProduct(data.shape(), 0, a);
    const int64_t inner = reference::shape_ops::DimProduct(data.shape(), a + 1, data.shape().size());
    if (flag != nullptr && y.size() > 0) context_->ExpectErrorCheck();
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchGather(CopyableBytes(data), data.raw(), device_indices, index_bytes, y.mutable_raw(),
                              outer, dim, ind.size(), inner, flag, context_->stream()),
                 "Gather"));
    if (!constant_indices_) cached_.reset();
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  int64_t axis_;
  bool constant_indices_;
  // The device copy of host indices (kept across runs when they are constant).
  std::optional<Tensor> cached_;
  int64_t cached_dim_ = -1;
};

// Where: a bool condition choosing between two operands of one type, the
// three broadcast together.
class WhereKernel : public CudaKernel {
 public:
  explicit WhereKernel(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 3);
    if (!in || ctx.num_inputs() != 3 || (*in)[0]->dtype() != kBool || CopyableBytes(*(*in)[1]) == 0 ||
        (*in)[1]->dtype() != (*in)[2]->dtype()) {
      return false;
    }
    return Plan(*in).has_value();
  }

  absl::Status Run(KernelContext& ctx) override {
    auto in = TensorInputs(ctx, 3);
    if (!in) return absl::InternalError("Where inputs changed after the kernel accepted them");
    std::optional<std::pair<std::vector<int64_t>, WhereGeometry>> plan = Plan(*in);
    if (!plan) return absl::InternalError("Where shapes changed after the kernel accepted them");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate((*in)[1]->dtype(), plan->first));
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchWhere(CopyableBytes(*(*in)[1]), (*in)[0]->raw(), (*in)[1]->raw(), (*in)[2]->raw(),
                             y.mutable_raw(), y.size(), plan->second, context_->stream()),
                 "Where"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  static std::optional<std::pair<std::vector<int64_t>, WhereGeometry>> Plan(
      const std::vector<const Tensor*>& in) {
    std::vector<int64_t> shapes[] = {in[0]->shape(), in[1]->shape(), in[2]->shape()};
    auto shape = reference::BroadcastShapes(shapes);
    if (!shape.ok() || shape->size() > static_cast<size_t>(kMaxRank)) return std::nullopt;
    auto gc = BroadcastGeometry(in[0]->shape(), *shape);
    auto gx = BroadcastGeometry(in[1]->shape(), *shape);
    auto gz = BroadcastGeometry(in[2]->shape(), *shape);
    if (!gc || !gx || !gz) return std::nullopt;
    WhereGeometry g;
    g.rank = gc->rank;
    for (int d = 0; d < g.rank; ++d) {
      g.dims[d] = gc->dims[d];
      g.c[d] = gc->a[d];
      g.x[d] = gx->a[d];
      g.z[d] = gz->a[d];
    }
    return std::make_pair(*std::move(shape), g);
  }

  std::shared_ptr<Context> context_;
};

class ExpandKernel : public CudaKernel {
 public:
  explicit ExpandKernel(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  Side InputSide(int i) const override { return i == 0 ? Side::kDevice : Side::kHost; }

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 2);
    return in && CopyableBytes(*(*in)[0]) != 0 && (*in)[1]->rank() == 1 &&
           ((*in)[1]->dtype() == kInt64 || (*in)[1]->dtype() == kInt32);
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> requested,
                             reference::shape_ops::ReadInts(ctx.Value(1)->tensor(), "shape"));
    std::vector<int64_t> shapes[] = {x.shape(), requested};
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, reference::BroadcastShapes(shapes));
    auto g = BroadcastGeometry(x.shape(), shape);
    if (!g) return absl::UnimplementedError("Expand above the CUDA kernels' rank limit");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), shape));
    ONNXKIT_RETURN_IF_ERROR(Launched(
        LaunchStridedCopy(CopyableBytes(x), x.raw(), y.mutable_raw(), y.size(), *g, context_->stream()),
        "Expand"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
};

absl::StatusOr<std::unique_ptr<CudaKernel>> Wrap(absl::StatusOr<std::unique_ptr<Kernel>> inner,
                                                 int max_outputs) {
  if (!inner.ok() || *inner == nullptr) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  return std::unique_ptr<CudaKernel>(new ShapeOnlyKernel(*std::move(inner), max_outputs));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeView(const std::shared_ptr<Context>&, const ir::Node& node,
                                                     const KernelInfo& info) {
  const std::string& op = node.op_type();
  if (op == "Reshape") return Wrap(reference::MakeReshape(node, info), 1);
  if (op == "Flatten") return Wrap(reference::MakeFlatten(node, info), 1);
  if (op == "Squeeze") return Wrap(reference::MakeSqueeze(node, info), 1);
  if (op == "Unsqueeze") return Wrap(reference::MakeUnsqueeze(node, info), 1);
  if (op == "Identity") return Wrap(std::unique_ptr<Kernel>(new FnKernel(reference::Identity)), 1);
  if (op == "Shape") return Wrap(std::unique_ptr<Kernel>(new FnKernel(reference::Shape)), 1);
  if (op == "Size") return Wrap(std::unique_ptr<Kernel>(new FnKernel(reference::Size)), 1);
  if (op == "Dropout") {
    // The inference form: the output is the input, the mask (when named) a
    // host tensor of ones. training_mode (input 2 from opset 12) draws a
    // mask from the elements' positions and scales them: the cpu backend.
    if (info.opset >= 12 && node.num_inputs() > 2 && node.input(2) != nullptr)
      return std::unique_ptr<CudaKernel>();
    if (info.opset < 7 && reference::AttrInt(node, "is_test", 0) == 0) return std::unique_ptr<CudaKernel>();
    return Wrap(reference::MakeDropout(node, info), 2);
  }
  return std::unique_ptr<CudaKernel>();
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConcat(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo& info) {
  const ir::Attribute* axis = node.FindAttribute("axis");
  if (axis == nullptr && info.opset >= 4) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  return std::unique_ptr<CudaKernel>(new ConcatKernel(context, reference::AttrInt(node, "axis", 1)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSlice(const std::shared_ptr<Context>& context,
                                                      const ir::Node&, const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new SliceKernel(context));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeGather(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(
      new GatherKernel(context, reference::AttrInt(node, "axis", 0), IsSessionConstantInput(node, 1)));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeExpand(const std::shared_ptr<Context>& context,
                                                       const ir::Node&, const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new ExpandKernel(context));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeWhere(const std::shared_ptr<Context>& context,
                                                      const ir::Node&, const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new WhereKernel(context));
}

}  // namespace onnxkit::runner::cuda
