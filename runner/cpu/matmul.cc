// cpu matrix products: MatMul (numpy batching, 1-D operands promoted) and
// Gemm (transposes, alpha, beta * C) on oneDNN's float32 matmul.
//
// A constant B is reordered once into the layout oneDNN prefers; a 2-D B
// lets A's batch dims fold into M (one large product instead of many small
// ones). Anything else the primitive does not cover runs on the reference.
// A constant 2-D B runs on the packed AVX-512 product where the CPU has it
// (matmul_packed.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A primitive built for one set of input shapes; `ok` false when oneDNN
// refused those shapes (the kernel then falls back for them).
struct MatMulPlan {
  std::vector<std::vector<int64_t>> key;
  bool ok = false;
  dnnl::memory::desc src, weights_user, weights, dst, bias;
  dnnl::matmul primitive;
};

// Row-major strides of `dims`.
dnnl::memory::dims RowMajorStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// Builds `plan.primitive` from the descs already in `plan`; records refusal
// (also of oneDNN's slow reference implementation).
void BuildPlan(MatMulPlan& plan, bool constant_b, const dnnl::primitive_attr& attr, bool with_bias) {
  bool reference_impl = false;  // oneDNN's reference code: slower than the reference kernel
  absl::Status s = Guard("matmul", [&] {
    dnnl::memory::desc want_w =
        constant_b ? dnnl::memory::desc(plan.weights_user.dims(), dt::f32, tag::any) : plan.weights_user;
    std::unique_ptr<dnnl::matmul::desc> d;
    if (with_bias) {
      d = std::make_unique<dnnl::matmul::desc>(plan.src, want_w, plan.bias, plan.dst);
    } else {
      d = std::make_unique<dnnl::matmul::desc>(plan.src, want_w, plan.dst);
    }
    dnnl::matmul::primitive_desc pd(*d, attr, Engine());
    reference_impl = std::string_view(pd.impl_info_str()).substr(0, 3) == "ref";
    plan.weights = pd.weights_desc();
    plan.primitive = dnnl::matmul(pd);
  });
  plan.ok = s.ok() && !reference_impl;
}

// Runs `plan` on raw buffers; weights through `prepared` when B is constant.
absl::Status RunPlan(MatMulPlan& plan, PreparedWeight* prepared, const Tensor& a, const Tensor& b,
                     const Tensor* bias, Tensor& y) {
  dnnl::memory w;
  if (prepared != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(w, prepared->Get(b, plan.weights_user, plan.weights));
  } else {
    w = UserMemory(b, plan.weights_user);
  }
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, UserMemory(a, plan.src)},
                                                {DNNL_ARG_WEIGHTS, w},
                                                {DNNL_ARG_DST, UserMemory(y, plan.dst)}};
  if (bias != nullptr) args[DNNL_ARG_BIAS] = UserMemory(*bias, plan.bias);
  return Execute("matmul", plan.primitive, args);
}

// The numpy broadcast of two batch shapes (right-aligned); false when they
// do not broadcast.
bool BroadcastBatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& out) {
  size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

class MatMulKernel : public CpuKernel {
 public:
  MatMulKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), constant_b_(IsSessionConstantInput(node, 1)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != pb::kFloat || b->dtype() != pb::kFloat || a->rank() < 1 || b->rank() < 1 ||
        a->size() == 0 || b->size() == 0) {
      return Fallback(ctx);
    }
    if (constant_b_ && PackedGemmTakes(*a, *b)) return RunPacked(ctx, *a, *b);
    std::vector<std::vector<int64_t>> key = {a->shape(), b->shape()};
    if (plan_.key != key) {
      plan_ = MatMulPlan();
      plan_.key = key;
      Plan(*a, *b);
    }
    if (!plan_.ok) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, out_shape_));
    return RunPlan(plan_, constant_b_ ? &prepared_ : nullptr, *a, *b, nullptr, *y);
  }

 private:
  absl::Status RunPacked(KernelContext& ctx, const Tensor& a, const Tensor& b) {
    ONNXKIT_ASSIGN_OR_RETURN(const PackedMatrix* packed, packed_.Get(b));
    std::vector<int64_t> shape(a.shape().begin(), a.shape().end() - 1);
    shape.push_back(b.dim(1));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, shape));
    PackedGemm(a.data<float>(), a.size() / b.dim(0), b.dim(0), *packed, nullptr, y->mutable_data<float>(),
               b.dim(1));
    return absl::OkStatus();
  }

  // Resolves the shapes (promoting 1-D operands) and builds the primitive.
  void Plan(const Tensor& ta, const Tensor& tb) {
    std::vector<int64_t> a = ta.shape(), b = tb.shape();
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
    if (k != b[b.size() - 2]) return;
    std::vector<int64_t> batch;
    if (!BroadcastBatch({a.begin(), a.end() - 2}, {b.begin(), b.end() - 2}, batch)) return;
    out_shape_ = batch;
    if (ta.rank() > 1) out_shape_.push_back(m);
    if (tb.rank() > 1) out_shape_.push_back(n);
    int64_t a_rows = 1;
    for (size_t i = 0; i + 1 < a.size(); ++i) a_rows *= a[i];
    if (b.size() == 2) {  // fold A's batch into M
      plan_.src = PlainDesc({a_rows, k}, dt::f32);
      plan_.weights_user = PlainDesc({k, n}, dt::f32);
      plan_.dst = PlainDesc({a_rows, n}, dt::f32);
    } else {
      size_t r = batch.size() + 2;
      if (r > 6) return;
      a.insert(a.begin(), r - a.size(), 1);
      b.insert(b.begin(), r - b.size(), 1);
      std::vector<int64_t> dst = batch;
      dst.push_back(m);
      dst.push_back(n);
      plan_.src = PlainDesc(a, dt::f32);
      plan_.weights_user = PlainDesc(b, dt::f32);
      plan_.dst = PlainDesc(dst, dt::f32);
    }
    BuildPlan(plan_, constant_b_, dnnl::primitive_attr(), false);
  }

  bool constant_b_;
  MatMulPlan plan_;
  std::vector<int64_t> out_shape_;
  PreparedWeight prepared_;
  PackedWeightCache packed_;
};

// Gemm: Y = alpha * A' B' + beta * C with C broadcast to [M, N]. alpha is
// an output scale; beta * C a bias (alpha and beta 1, C a row) or a binary post-op
// (beta * (alpha / beta * A'B' + C)).
class GemmKernel : public CpuKernel {
 public:
  GemmKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        constant_b_(IsSessionConstantInput(node, 1)),
        alpha_(reference::AttrFloat(node, "alpha", 1.f)),
        beta_(reference::AttrFloat(node, "beta", 1.f)),
        trans_a_(reference::AttrInt(node, "transA", 0) != 0),
        trans_b_(reference::AttrInt(node, "transB", 0) != 0) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.OptionalInput(2));
    if (a->dtype() != pb::kFloat || b->dtype() != pb::kFloat || a->rank() != 2 || b->rank() != 2 ||
        a->size() == 0 || b->size() == 0 || (c != nullptr && (c->dtype() != pb::kFloat || c->rank() > 2))) {
      return Fallback(ctx);
    }
    if (c != nullptr && (beta_ == 0.f || c->size() == 0)) return Fallback(ctx);  // 0 * NaN stays NaN there
    std::vector<std::vector<int64_t>> key = {a->shape(), b->shape(),
                                             c ? c->shape() : std::vector<int64_t>{-1}};
    if (plan_.key != key) {
      plan_ = MatMulPlan();
      plan_.key = key;
      Plan(*a, *b, c);
    }
    if (!plan_.ok) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, {m_, n_}));
    if (c == nullptr || bias_) return RunPlan(plan_, constant_b_ ? &prepared_ : nullptr, *a, *b, c, *y);
    dnnl::memory w;
    if (constant_b_) {
      ONNXKIT_ASSIGN_OR_RETURN(w, prepared_.Get(*b, plan_.weights_user, plan_.weights));
    } else {
      w = UserMemory(*b, plan_.weights_user);
    }
    return Execute("gemm", plan_.primitive,
                   {{DNNL_ARG_SRC, UserMemory(*a, plan_.src)},
                    {DNNL_ARG_WEIGHTS, w},
                    {DNNL_ARG_DST, UserMemory(*y, plan_.dst)},
                    {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, UserMemory(*c, plan_.bias)}});
  }

 private:
  void Plan(const Tensor& a, const Tensor& b, const Tensor* c) {
    m_ = trans_a_ ? a.dim(1) : a.dim(0);
    int64_t k = trans_a_ ? a.dim(0) : a.dim(1);
    n_ = trans_b_ ? b.dim(0) : b.dim(1);
    if (k != (trans_b_ ? b.dim(1) : b.dim(0))) return;
    // A transposed operand is the stored matrix read with swapped strides.
    plan_.src =
        dnnl::memory::desc({m_, k}, dt::f32, trans_a_ ? dnnl::memory::dims{1, m_} : dnnl::memory::dims{k, 1});
    plan_.weights_user =
        dnnl::memory::desc({k, n_}, dt::f32, trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n_, 1});
    plan_.dst = PlainDesc({m_, n_}, dt::f32);
    dnnl::primitive_attr attr;
    bias_ = false;
    if (c != nullptr) {
      std::vector<int64_t> cs = c->shape();
      cs.insert(cs.begin(), 2 - cs.size(), 1);
      if ((cs[0] != 1 && cs[0] != m_) || (cs[1] != 1 && cs[1] != n_)) return;
      plan_.bias = dnnl::memory::desc(Dims(cs), dt::f32, RowMajorStrides(Dims(cs)));
      bias_ = alpha_ == 1.f && beta_ == 1.f && cs[0] == 1 && cs[1] == n_;  // the bias is added before scales
      if (!bias_) {
        dnnl::post_ops ops;
        ops.append_binary(dnnl::algorithm::binary_add, plan_.bias);
        if (beta_ != 1.f) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, beta_, 0.f);
        attr.set_post_ops(ops);
      }
    }
    float scale = c != nullptr && !bias_ ? alpha_ / beta_ : alpha_;
    if (!std::isfinite(scale) || !std::isfinite(alpha_) || !std::isfinite(beta_))
      return;  // rescaling would lose them
    if (scale != 1.f) attr.set_output_scales(0, {scale});
    BuildPlan(plan_, constant_b_, attr, bias_);
  }

  bool constant_b_;
  float alpha_, beta_;
  bool trans_a_, trans_b_;
  bool bias_ = false;
  int64_t m_ = 0, n_ = 0;
  MatMulPlan plan_;
  PreparedWeight prepared_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeMatMul(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<MatMulKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGemm(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<GemmKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
