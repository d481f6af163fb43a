// CUDA MatMul and Gemm on cuBLAS (strided batched GEMM, fp32 / fp16 /
// bf16 with fp32 accumulation; TF32 for fp32 only when the session allows
// it). Row-major products are computed as the column-major product of the
// transposes: Y^T = op(B)^T op(A)^T, so no data is moved. MatMul batches
// that broadcast other than "one side has a single matrix" and K = 0 run on
// the cpu backend.
#include <climits>

#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/cuda/libraries.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cuda {
namespace {

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

cudaDataType_t CudaType(int32_t dtype) {
  return dtype == kFloat16 ? CUDA_R_16F : dtype == kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// Row-major Y[i] (M x N) = alpha * op(A[i]) op(B[i]) + beta * Y[i] for i
// in [0, batch); A[i] starts stride_a elements after A[i-1] (0: shared).
absl::Status RowMajorGemm(Context& context, int32_t dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
                          int64_t k, const void* a, int64_t stride_a, const void* b, int64_t stride_b, void* y,
                          int64_t batch, float alpha, float beta) {
  const cudaDataType_t type = CudaType(dtype);
  const cublasComputeType_t compute =
      dtype == kFloat && context.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return CublasStatus(
      Libs().cublasGemmStridedBatchedEx(
          context.cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
          static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, type,
          static_cast<int>(trans_b ? k : n), stride_b, a, type, static_cast<int>(trans_a ? m : k), stride_a,
          &beta, y, type, static_cast<int>(n), m * n, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

// The geometry of one MatMul: ONNX's 1-D promotion and batch broadcasting.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0, batch = 1, stride_a = 0, stride_b = 0;
  std::vector<int64_t> out_shape;
};

// The batch dims of `shape` (without its last two) broadcast to `batch`
// advance one matrix per step, or are all 1 (a shared matrix): the stride
// of its matrices; nullopt otherwise.
std::optional<int64_t> BatchStride(const std::vector<int64_t>& dims, const std::vector<int64_t>& batch,
                                   int64_t matrix) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count == 1) return 0;
  if (dims.size() > batch.size()) return std::nullopt;
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t lead = batch.size() - dims.size();
    const int64_t d = i < lead ? 1 : dims[i - lead];
    if (d != batch[i]) return std::nullopt;
  }
  return matrix;
}

std::optional<MatMulPlan> PlanMatMul(const Tensor& a, const Tensor& b) {
  if (a.rank() < 1 || b.rank() < 1) return std::nullopt;
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (a.rank() == 1) as.insert(as.begin(), 1);
  if (b.rank() == 1) bs.push_back(1);
  MatMulPlan p;
  p.m = as[as.size() - 2];
  p.k = as.back();
  p.n = bs.back();
  if (bs[bs.size() - 2] != p.k || p.k == 0) return std::nullopt;
  std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> shapes[] = {a_batch, b_batch};
  auto batch = reference::BroadcastShapes(shapes);
  if (!batch.ok()) return std::nullopt;
  for (int64_t d : *batch) p.batch *= d;
  auto sa = BatchStride(a_batch, *batch, p.m * p.k);
  auto sb = BatchStride(b_batch, *batch, p.k * p.n);
  if (!sa || !sb || !FitsInt(p.m) || !FitsInt(p.n) || !FitsInt(p.k) || !FitsInt(p.batch)) return std::nullopt;
  p.stride_a = *sa;
  p.stride_b = *sb;
  p.out_shape = *batch;
  if (a.rank() > 1) p.out_shape.push_back(p.m);
  if (b.rank() > 1) p.out_shape.push_back(p.n);
  return p;
}

bool SameFloatType(const std::vector<const Tensor*>& in) {
  for (const Tensor* t : in) {
    if (t->dtype() != in[0]->dtype()) return false;
  }
  return IsFloatType(in[0]->dtype());
}

class MatMulKernel : public CudaKernel {
 public:
  explicit MatMulKernel(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 2);
    return in && SameFloatType(*in) && PlanMatMul(*(*in)[0], *(*in)[1]).has_value();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    std::optional<MatMulPlan> p = PlanMatMul(a, b);
    if (!p) return absl::InternalError("MatMul shapes changed after the kernel accepted them");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), p->out_shape));
    if (y.size() > 0) {
      ONNXKIT_RETURN_IF_ERROR(RowMajorGemm(*context_, a.dtype(), false, false, p->m, p->n, p->k, a.raw(),
                                           p->stride_a, b.raw(), p->stride_b, y.mutable_raw(), p->batch, 1.f, 0.f));
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
};

class GemmKernel : public CudaKernel {
 public:
  GemmKernel(std::shared_ptr<Context> context, bool trans_a, bool trans_b, float alpha, float beta)
      : context_(std::move(context)), trans_a_(trans_a), trans_b_(trans_b), alpha_(alpha), beta_(beta) {}

  bool Accepts(const KernelContext& ctx) const override {
    const RtValue* c = ctx.Value(2);
    auto in = TensorInputs(ctx, c != nullptr ? 3 : 2);
    if (!in || !SameFloatType(*in) || (*in)[0]->rank() != 2 || (*in)[1]->rank() != 2) return false;
    auto [m, n, k] = Dims(*(*in)[0], *(*in)[1]);
    if (k == 0 || !FitsInt(m) || !FitsInt(n) || !FitsInt(k)) return false;
    if ((trans_b_ ? (*in)[1]->dim(1) : (*in)[1]->dim(0)) != k) return false;
    return in->size() < 3 || BroadcastGeometry((*in)[2]->shape(), {m, n}).has_value();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    auto [m, n, k] = Dims(a, b);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), {m, n}));
    if (y.size() == 0) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    float beta = 0.f;
    const RtValue* c = ctx.Value(2);
    if (c != nullptr && beta_ != 0.f) {
      std::optional<StridedGeometry> g = BroadcastGeometry(c->tensor().shape(), {m, n});
      if (!g) return absl::InternalError("Gemm C shape changed after the kernel accepted it");
      const int elem_bytes = a.dtype() == kFloat ? 4 : 2;
      ONNXKIT_RETURN_IF_ERROR(Launched(
          LaunchStridedCopy(elem_bytes, c->tensor().raw(), y.mutable_raw(), y.size(), *g, context_->stream()),
          "Gemm bias"));
      beta = beta_;
    }
    ONNXKIT_RETURN_IF_ERROR(RowMajorGemm(*context_, a.dtype(), trans_a_, trans_b_, m, n, k, a.raw(), 0, b.raw(), 0,
                                         y.mutable_raw(), 1, alpha_, beta));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  struct MNK {
    int64_t m, n, k;
  };
  MNK Dims(const Tensor& a, const Tensor& b) const {
    return {trans_a_ ? a.dim(1) : a.dim(0), trans_b_ ? b.dim(0) : b.dim(1), trans_a_ ? a.dim(0) : a.dim(1)};
  }

  std::shared_ptr<Context> context_;
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeMatMul(const std::shared_ptr<Context>& context, const ir::Node&,
                                                       const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new MatMulKernel(context));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeGemm(const std::shared_ptr<Context>& context, const ir::Node& node,
                                                     const KernelInfo&) {
  return std::unique_ptr<CudaKernel>(new GemmKernel(context, reference::AttrInt(node, "transA", 0) != 0,
                                                    reference::AttrInt(node, "transB", 0) != 0,
                                                    reference::AttrFloat(node, "alpha", 1.f),
                                                    reference::AttrFloat(node, "beta", 1.f)));
}

}  // namespace onnxkit::runner::cuda
