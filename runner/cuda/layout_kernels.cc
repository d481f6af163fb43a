// CUDA Transpose (any fixed-size element type up to rank kMaxRank) and
// Softmax / LogSoftmax (floating-point types; opsets before 13 flatten the
// input to 2-D at `axis`, later ones normalize along `axis` only).
#include <functional>
#include <numeric>

#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cuda {
namespace {

class TransposeKernel : public CudaKernel {
 public:
  TransposeKernel(std::shared_ptr<Context> context, std::vector<int64_t> perm, bool has_perm)
      : context_(std::move(context)), perm_(std::move(perm)), has_perm_(has_perm) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 1);
    if (!in || !reference::IsStandardNumeric((*in)[0]->dtype()) || (*in)[0]->rank() > kMaxRank) return false;
    return Perm(*(*in)[0]).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Perm(x));
    const std::vector<int64_t> strides = reference::Strides(x.shape());
    StridedGeometry g;
    g.rank = x.rank();
    std::vector<int64_t> shape(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      shape[i] = x.dim(static_cast<int>(perm[i]));
      g.dims[i] = shape[i];
      g.a[i] = strides[static_cast<size_t>(perm[i])];
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), std::move(shape)));
    const int elem_bytes = static_cast<int>(*RawByteSize(x.dtype(), 1));
    ONNXKIT_RETURN_IF_ERROR(Launched(
        LaunchStridedCopy(elem_bytes, x.raw(), y.mutable_raw(), y.size(), g, context_->stream()), "Transpose"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  // The permutation for x: the attribute (checked to be one) or reversal.
  absl::StatusOr<std::vector<int64_t>> Perm(const Tensor& x) const {
    std::vector<int64_t> perm = perm_;
    if (!has_perm_) {
      perm.resize(static_cast<size_t>(x.rank()));
      for (int i = 0; i < x.rank(); ++i) perm[static_cast<size_t>(i)] = x.rank() - 1 - i;
    }
    std::vector<bool> seen(perm.size(), false);
    if (perm.size() != static_cast<size_t>(x.rank())) return absl::InvalidArgumentError("perm length");
    for (int64_t p : perm) {
      if (p < 0 || p >= x.rank() || seen[static_cast<size_t>(p)]) return absl::InvalidArgumentError("perm");
      seen[static_cast<size_t>(p)] = true;
    }
    return perm;
  }

  std::shared_ptr<Context> context_;
  std::vector<int64_t> perm_;
  bool has_perm_;
};

class SoftmaxKernel : public CudaKernel {
 public:
  SoftmaxKernel(std::shared_ptr<Context> context, bool log, int64_t axis, bool flatten)
      : context_(std::move(context)), log_(log), axis_(axis), flatten_(flatten) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 1);
    return in && IsFloatType((*in)[0]->dtype()) && (*in)[0]->rank() > 0 &&
           reference::NormalizeAxis(axis_, (*in)[0]->rank()).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, reference::NormalizeAxis(axis_, x.rank()));
    const SoftmaxRows r = SoftmaxRowsOf(x.shape(), axis, flatten_);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(
        LaunchSoftmax(x.dtype(), log_, x.raw(), y.mutable_raw(), r.outer, r.len, r.inner, context_->stream()),
        ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  bool log_;
  int64_t axis_;
  bool flatten_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeTranspose(const std::shared_ptr<Context>& context,
                                                          const ir::Node& node, const KernelInfo&) {
  const bool has_perm = node.FindAttribute("perm") != nullptr;
  return std::unique_ptr<CudaKernel>(new TransposeKernel(context, reference::AttrInts(node, "perm"), has_perm));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSoftmax(const std::shared_ptr<Context>& context,
                                                        const ir::Node& node, const KernelInfo& info) {
  const bool flatten = info.opset < 13;
  const int64_t axis = reference::AttrInt(node, "axis", flatten ? 1 : -1);
  return std::unique_ptr<CudaKernel>(new SoftmaxKernel(context, node.op_type() == "LogSoftmax", axis, flatten));
}

SoftmaxRows SoftmaxRowsOf(const std::vector<int64_t>& shape, int64_t axis, bool flatten) {
  const auto a = shape.begin() + static_cast<std::ptrdiff_t>(axis);
  SoftmaxRows r;
  r.outer = std::accumulate(shape.begin(), a, int64_t{1}, std::multiplies<>());
  const int64_t after = std::accumulate(a + 1, shape.end(), int64_t{1}, std::multiplies<>());
  r.len = flatten ? *a * after : *a;
  r.inner = flatten ? 1 : after;
  return r;
}

}  // namespace onnxkit::runner::cuda
