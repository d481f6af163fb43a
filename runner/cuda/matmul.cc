// CUDA MatMul and Gemm on cuBLAS (strided batched GEMM, fp32 / fp16 /
// bf16 with fp32 accumulation; TF32 for fp32 only when the session allows
// it). Row-major products are computed as the column-major product of the
// transposes: Y^T = op(B)^T op(A)^T, so no data is moved. MatMul batches
// that broadcast other than "one side has a single matrix" and K = 0 run on
// the cpu backend.
//
// Experimental (ContextOptions::experimental: written, not yet run on a
// GPU): a batch of A against one shared B as one product of batch * M
// rows; products that add a bias row (Gemm's C of N elements; a MatMul
// followed by the Add of one, as linear layers are written) and a tensor
// of the result's shape (Gemm's C of M x N; a residual Add after the bias)
// on cuBLASLt as one kernel, the bias as its epilogue and the tensor as
// its C operand (the sums rounded once, at the end, instead of after each
// node); MatMuls reading their operands and writing their result through
// the Transposes around them (MakeStridedMatMul).
#include <climits>
#include <cstdint>
#include <tuple>

#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/cuda/libraries.h"
#include "runner/gemm_geometry.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cuda {
namespace {

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

cudaDataType_t CudaType(int32_t dtype) {
  return dtype == kFloat16 ? CUDA_R_16F : dtype == kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

cublasComputeType_t ComputeType(const Context& context, int32_t dtype) {
  return dtype == kFloat && context.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// Y = alpha * op(A) op(B) + beta * Y for the row-major product `p`
// (runner/gemm_geometry.h), as one cuBLAS strided batched call.
absl::Status Gemm(Context& context, int32_t dtype, const RowMajorProduct& p, const void* a, const void* b,
                  void* y, float alpha, float beta) {
  const cudaDataType_t type = CudaType(dtype);
  const ColumnMajorCall c = ToColumnMajor(p);
  return CublasStatus(
      Libs().cublasGemmStridedBatchedEx(
          context.cublas(), c.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N, c.trans_w ? CUBLAS_OP_T : CUBLAS_OP_N,
          static_cast<int>(c.rows), static_cast<int>(c.cols), static_cast<int>(c.depth), &alpha, b, type,
          static_cast<int>(c.ldx), c.stride_x, a, type, static_cast<int>(c.ldw), c.stride_w, &beta, y, type,
          static_cast<int>(c.ldc), c.stride_c, static_cast<int>(c.batch), ComputeType(context, dtype),
          CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

// The same for packed matrices.
absl::Status RowMajorGemm(Context& context, int32_t dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
                          int64_t k, const void* a, int64_t stride_a, const void* b, int64_t stride_b,
                          void* y, int64_t batch, float alpha, float beta) {
  return Gemm(context, dtype, PackedProduct(trans_a, trans_b, m, n, k, batch, stride_a, stride_b), a, b, y,
              alpha, beta);
}

// The largest power of two up to 256 dividing the address (cuBLASLt picks
// only kernels that the operands' alignment allows).
uint32_t Alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// One row-major product on cuBLASLt: Y (M x N) = alpha * op(A) op(B) +
// beta * C + bias, C (M x N, null: none) and bias (N elements, null: none)
// of Y's type. The descriptors and the algorithm cuBLASLt's heuristic
// picks are kept for the shapes, types and alignments they were made for.
class LtProduct {
 public:
  struct Key {
    int32_t dtype = 0;
    bool trans_a = false, trans_b = false, bias = false;
    int64_t m = 0, n = 0, k = 0;
    uint32_t align_a = 0, align_b = 0, align_c = 0, align_y = 0;
    bool operator==(const Key& o) const {
      return std::tie(dtype, trans_a, trans_b, bias, m, n, k, align_a, align_b, align_c, align_y) ==
             std::tie(o.dtype, o.trans_a, o.trans_b, o.bias, o.m, o.n, o.k, o.align_a, o.align_b, o.align_c,
                      o.align_y);
    }
  };

  LtProduct() = default;
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;
  ~LtProduct() { Release(); }

  // False (nothing queued) when cuBLASLt has no algorithm for the product;
  // the caller computes it otherwise.
  absl::StatusOr<bool> Run(Context& context, int32_t dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, float alpha, const void* a, const void* b, float beta, const void* c,
                           const void* bias, void* y) {
    Key key;
    key.dtype = dtype;
    key.trans_a = trans_a;
    key.trans_b = trans_b;
    key.bias = bias != nullptr;
    key.m = m;
    key.n = n;
    key.k = k;
    key.align_a = Alignment(a);
    key.align_b = Alignment(b);
    key.align_c = Alignment(c != nullptr ? c : y);
    key.align_y = Alignment(y);
    if (!planned_ || !(key == key_)) {
      Release();
      planned_ = true;
      key_ = key;
      ONNXKIT_RETURN_IF_ERROR(Plan(context));
    }
    if (!usable_) return false;
    if (bias != nullptr) {
      ONNXKIT_RETURN_IF_ERROR(CublasStatus(Libs().cublasLtMatmulDescSetAttribute(
                                               desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                                           "cuBLASLt bias"));
    }
    // cuBLASLt's A is the row-major B and its B the row-major A.
    ONNXKIT_RETURN_IF_ERROR(CublasStatus(
        Libs().cublasLtMatmul(context.cublas_lt(), desc_, &alpha, b, layout_b_, a, layout_a_, &beta,
                              c != nullptr ? c : y, layout_y_, y, layout_y_, &algo_, context.gemm_workspace(),
                              context.gemm_workspace_bytes(), context.stream()),
        "cublasLtMatmul"));
    return true;
  }

 private:
  absl::Status Plan(Context& context) {
    const Key& k = key_;
    const cudaDataType_t type = CudaType(k.dtype);
    ONNXKIT_RETURN_IF_ERROR(
        CublasStatus(Libs().cublasLtMatmulDescCreate(&desc_, ComputeType(context, k.dtype), CUDA_R_32F),
                     "cuBLASLt descriptor"));
    // cuBLASLt's A is the row-major B and its B the row-major A
    // (ToColumnMajor).
    const cublasOperation_t op_b = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = k.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    ONNXKIT_RETURN_IF_ERROR(CublasStatus(
        Libs().cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)),
        "cuBLASLt"));
    ONNXKIT_RETURN_IF_ERROR(CublasStatus(
        Libs().cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)),
        "cuBLASLt"));
    ONNXKIT_RETURN_IF_ERROR(
        CublasStatus(Libs().cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                           sizeof(epilogue)),
                     "cuBLASLt"));
    // Column-major views of the row-major operands as stored.
    const ColumnMajorCall c = ToColumnMajor(PackedProduct(k.trans_a, k.trans_b, k.m, k.n, k.k, 1, 0, 0));
    auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t ld) {
      return CublasStatus(Libs().cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows),
                                                            static_cast<uint64_t>(cols), ld),
                          "cuBLASLt layout");
    };
    ONNXKIT_RETURN_IF_ERROR(layout(&layout_b_, c.x_rows, c.x_cols, c.ldx));
    ONNXKIT_RETURN_IF_ERROR(layout(&layout_a_, c.w_rows, c.w_cols, c.ldw));
    ONNXKIT_RETURN_IF_ERROR(layout(&layout_y_, c.rows, c.cols, c.ldc));
    cublasLtMatmulPreference_t preference = nullptr;
    ONNXKIT_RETURN_IF_ERROR(
        CublasStatus(Libs().cublasLtMatmulPreferenceCreate(&preference), "cuBLASLt preference"));
    const uint64_t workspace = context.gemm_workspace_bytes();
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_y}};
    cublasStatus_t status = Libs().cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    for (const auto& [attribute, bytes] : alignments) {
      if (status == CUBLAS_STATUS_SUCCESS) {
        status = Libs().cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes));
      }
    }
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = Libs().cublasLtMatmulAlgoGetHeuristic(context.cublas_lt(), desc_, layout_b_, layout_a_,
                                                     layout_y_, layout_y_, preference, 1, &result, &found);
    }
    Libs().cublasLtMatmulPreferenceDestroy(preference);
    // No algorithm (NOT_SUPPORTED or none found): the caller's fallback.
    usable_ = status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
      return CublasStatus(status, "cuBLASLt heuristic");
    }
    if (usable_) algo_ = result.algo;
    return absl::OkStatus();
  }

  void Release() {
    if (desc_ != nullptr) Libs().cublasLtMatmulDescDestroy(desc_);
    for (cublasLtMatrixLayout_t* l : {&layout_a_, &layout_b_, &layout_y_}) {
      if (*l != nullptr) Libs().cublasLtMatrixLayoutDestroy(*l);
      *l = nullptr;
    }
    desc_ = nullptr;
    planned_ = usable_ = false;
  }

  bool planned_ = false, usable_ = false;
  Key key_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_y_ = nullptr;
  cublasLtMatmulAlgo_t algo_ = {};
};

// y (rows x n) += bias (n elements), in place.
absl::Status AddBiasRows(Context& context, int32_t dtype, const void* bias, Tensor& y, int64_t n) {
  StridedGeometry g;
  g.b_div = 1;
  g.b_period = n;
  return Launched(
      LaunchBinary(BinaryOp::kAdd, dtype, y.raw(), bias, y.mutable_raw(), y.size(), g, context.stream()),
      "bias");
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

// `merge`: a batch of A's matrices against one B becomes one product of
// batch * M rows.
std::optional<MatMulPlan> PlanMatMul(const Tensor& a, const Tensor& b, bool merge) {
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
  if (merge && p.stride_b == 0 && p.stride_a != 0 && FitsInt(p.batch * p.m)) {
    p.m *= p.batch;
    p.batch = 1;
    p.stride_a = 0;
  }
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
    return in && SameFloatType(*in) && PlanMatMul(*(*in)[0], *(*in)[1], context_->experimental()).has_value();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    std::optional<MatMulPlan> p = PlanMatMul(a, b, context_->experimental());
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

// MatMul, then Add of a bias row, then (optionally) Add of a tensor of the
// result's shape, as one cuBLASLt product. Inputs: A, B, the bias, the
// residual (or none). Declines (node by node then) unless B is one matrix
// of rank 2, the bias has N elements along the last dim only and the
// residual has the result's shape, all of A's type.
class MatMulBiasKernel : public CudaKernel {
 public:
  MatMulBiasKernel(std::shared_ptr<Context> context, bool residual)
      : context_(std::move(context)), residual_(residual) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, residual_ ? 4 : 3);
    if (!in || !SameFloatType(*in)) return false;
    const Tensor& a = *(*in)[0];
    const Tensor& b = *(*in)[1];
    const Tensor& bias = *(*in)[2];
    if (a.rank() < 2 || b.rank() != 2) return false;
    std::optional<MatMulPlan> p = PlanMatMul(a, b, true);
    if (!p || p->batch != 1 || bias.size() != p->n || bias.rank() > static_cast<int>(p->out_shape.size()) ||
        (bias.rank() > 0 && bias.dim(bias.rank() - 1) != p->n)) {
      return false;
    }
    return !residual_ || (*in)[3]->shape() == p->out_shape;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    const Tensor& bias = ctx.Value(2)->tensor();
    const Tensor* residual = residual_ ? &ctx.Value(3)->tensor() : nullptr;
    std::optional<MatMulPlan> p = PlanMatMul(a, b, true);
    if (!p) return absl::InternalError("MatMul shapes changed after the kernel accepted them");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), p->out_shape));
    if (y.size() == 0) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    const float beta = residual != nullptr ? 1.f : 0.f;
    ONNXKIT_ASSIGN_OR_RETURN(
        bool done,
        product_.Run(*context_, a.dtype(), false, false, p->m, p->n, p->k, 1.f, a.raw(), b.raw(), beta,
                     residual != nullptr ? residual->raw() : nullptr, bias.raw(), y.mutable_raw()));
    if (!done) {
      if (residual != nullptr) {
        ONNXKIT_RETURN_IF_ERROR(CopyOnDevice(*context_, *residual, y));
      }
      ONNXKIT_RETURN_IF_ERROR(RowMajorGemm(*context_, a.dtype(), false, false, p->m, p->n, p->k, a.raw(), 0,
                                           b.raw(), 0, y.mutable_raw(), 1, 1.f, beta));
      ONNXKIT_RETURN_IF_ERROR(AddBiasRows(*context_, a.dtype(), bias.raw(), y, p->n));
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  bool residual_;
  LtProduct product_;
};

// MatMul whose operands are read through the Transposes that made them and
// whose result is written through the Transpose that reads it (attention's
// heads split and merged), as one strided batched product: the transposed
// copies are never made. Inputs: the sources of A and B (the Transposes'
// inputs, or the MatMul's own). Declines (node by node then) unless every
// operand's matrices have unit stride along rows or columns and its batch
// advances by one stride.
class StridedMatMulKernel : public CudaKernel {
 public:
  StridedMatMulKernel(std::shared_ptr<Context> context, std::vector<int64_t> perm_a,
                      std::vector<int64_t> perm_b, std::optional<std::vector<int64_t>> perm_y)
      : context_(std::move(context)),
        perm_a_(std::move(perm_a)),
        perm_b_(std::move(perm_b)),
        perm_y_(std::move(perm_y)) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 2);
    return in && SameFloatType(*in) && Plan((*in)[0]->shape(), (*in)[1]->shape()).has_value();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    std::optional<RowMajorProduct> p = Plan(a.shape(), b.shape());
    if (!p) return absl::InternalError("MatMul shapes changed after the kernel accepted them");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), p->out_shape));
    if (y.size() > 0)
      ONNXKIT_RETURN_IF_ERROR(Gemm(*context_, a.dtype(), *p, a.raw(), b.raw(), y.mutable_raw(), 1.f, 0.f));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::optional<RowMajorProduct> Plan(const std::vector<int64_t>& a_shape,
                                      const std::vector<int64_t>& b_shape) const {
    return PlanPermutedMatMul(a_shape, perm_a_, b_shape, perm_b_, perm_y_, kMaxRank);
  }

  std::shared_ptr<Context> context_;
  std::vector<int64_t> perm_a_, perm_b_;
  std::optional<std::vector<int64_t>> perm_y_;
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
    const RtValue* c = ctx.Value(2);
    if (c != nullptr && beta_ != 0.f) {
      const Tensor& ct = c->tensor();
      // A bias row (beta 1) or a whole C: one cuBLASLt product (not yet
      // run on a GPU: experimental).
      const bool lt = context_->experimental();
      const bool row = lt && beta_ == 1.f && ct.size() == n && ct.rank() >= 1 && ct.dim(ct.rank() - 1) == n;
      const bool whole = lt && ct.shape() == std::vector<int64_t>{m, n};
      if (row || whole) {
        ONNXKIT_ASSIGN_OR_RETURN(
            bool done, product_.Run(*context_, a.dtype(), trans_a_, trans_b_, m, n, k, alpha_, a.raw(),
                                    b.raw(), whole ? beta_ : 0.f, whole ? ct.raw() : nullptr,
                                    whole ? nullptr : ct.raw(), y.mutable_raw()));
        if (done) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
      }
      std::optional<StridedGeometry> g = BroadcastGeometry(ct.shape(), {m, n});
      if (!g) return absl::InternalError("Gemm C shape changed after the kernel accepted it");
      ONNXKIT_RETURN_IF_ERROR(Launched(LaunchStridedCopy(DataTypeBits(a.dtype()) / 8, ct.raw(),
                                                         y.mutable_raw(), y.size(), *g, context_->stream()),
                                       "Gemm bias"));
      ONNXKIT_RETURN_IF_ERROR(RowMajorGemm(*context_, a.dtype(), trans_a_, trans_b_, m, n, k, a.raw(), 0,
                                           b.raw(), 0, y.mutable_raw(), 1, alpha_, beta_));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    ONNXKIT_RETURN_IF_ERROR(RowMajorGemm(*context_, a.dtype(), trans_a_, trans_b_, m, n, k, a.raw(), 0,
                                         b.raw(), 0, y.mutable_raw(), 1, alpha_, 0.f));
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
  LtProduct product_;
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

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeMatMulBias(const std::shared_ptr<Context>& context,
                                                           const ir::Node& matmul, const ir::Node& bias_add,
                                                           const ir::Node* residual_add) {
  if (matmul.op_type() != "MatMul" || bias_add.op_type() != "Add" ||
      (residual_add != nullptr && residual_add->op_type() != "Add")) {
    return std::unique_ptr<CudaKernel>();
  }
  return std::unique_ptr<CudaKernel>(new MatMulBiasKernel(context, residual_add != nullptr));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeStridedMatMul(const std::shared_ptr<Context>& context,
                                                              const ir::Node* transpose_a,
                                                              const ir::Node* transpose_b,
                                                              const ir::Node& matmul,
                                                              const ir::Node* transpose_y) {
  auto perm = [](const ir::Node* t) -> std::optional<std::vector<int64_t>> {
    if (t == nullptr) return std::vector<int64_t>{};
    if (t->op_type() != "Transpose") return std::nullopt;
    std::vector<int64_t> p = reference::AttrInts(*t, "perm");
    if (p.empty()) return std::nullopt;  // reversed dims: the rank is not known yet
    return p;
  };
  std::optional<std::vector<int64_t>> pa = perm(transpose_a), pb = perm(transpose_b), py = perm(transpose_y);
  if (matmul.op_type() != "MatMul" || !pa || !pb || !py) return std::unique_ptr<CudaKernel>();
  std::optional<std::vector<int64_t>> out;
  if (transpose_y != nullptr) out = *py;
  return std::unique_ptr<CudaKernel>(new StridedMatMulKernel(context, *pa, *pb, out));
}

}  // namespace onnxkit::runner::cuda
