// cpu matrix products: MatMul (numpy batching, 1-D operands promoted) and
// Gemm (transposes, alpha, beta * C) on oneDNN's float32 matmul.
//
// A constant B is reordered once into the layout oneDNN prefers; a 2-D B
// lets A's batch dims fold into M (one large product instead of many small
// ones). Anything else the primitive does not cover runs on the reference.
// A MatMul's constant 2-D B, and a Gemm's constant B (either layout) with
// alpha 1, A not transposed and at most a bias row for C, run on the packed
// AVX-512 product where the CPU has it (matmul_packed.h).
//
// bfloat16 (KernelInfo::bf16): with a constant B, the product runs as
// oneDNN's bfloat16 matmul instead: B rounded to bfloat16 once, A on every
// run (a reorder into scratch space), float32 accumulation and result.
// Where oneDNN has no bfloat16 kernel for the shapes, float32 as above.
// oneDNN's bfloat16 products multiply pairs of values, a padded one among
// them, so an infinity could meet a zero and make NaN where float32 keeps
// it: runs whose A holds NaN or an infinity, and weights holding one, are
// float32.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv_common.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/cpu/transformer.h"
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
  // In bfloat16: A's float32 layout (src is then plain bfloat16) and the
  // reorder between them.
  dnnl::memory::desc src_user;
  dnnl::reorder src_in;
  // The arguments' memory objects, re-pointed at each run's buffers.
  HeldMemory src_mem, rounded_mem, weights_mem, dst_mem, bias_mem;
  std::unordered_map<int, dnnl::memory> args;  // of the last run (no allocation per run)
};

// Row-major strides of `dims`.
dnnl::memory::dims RowMajorStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// Builds `plan.primitive` from the descs already in `plan` (src: A's
// layout); records refusal (also of oneDNN's slow reference
// implementation). `bf16` with a constant B: in bfloat16 where oneDNN can.
void BuildPlan(MatMulPlan& plan, bool constant_b, const dnnl::primitive_attr& attr, bool with_bias,
               bool bf16 = false) {
  plan.src_user = plan.src;
  std::vector<dt> types = {dt::f32};
  if (bf16 && constant_b) types.insert(types.begin(), dt::bf16);
  for (dt type : types) {
    bool reference_impl = false;  // oneDNN's reference code: slower than the reference kernel
    absl::Status s = Guard("matmul", [&] {
      dnnl::memory::desc src = type == dt::f32 ? plan.src_user : PlainDesc(plan.src_user.dims(), type);
      dnnl::memory::desc want_w =
          constant_b ? dnnl::memory::desc(plan.weights_user.dims(), type, tag::any) : plan.weights_user;
      std::unique_ptr<dnnl::matmul::desc> d;
      if (with_bias) {
        d = std::make_unique<dnnl::matmul::desc>(src, want_w, plan.bias, plan.dst);
      } else {
        d = std::make_unique<dnnl::matmul::desc>(src, want_w, plan.dst);
      }
      dnnl::matmul::primitive_desc pd(*d, attr, Engine());
      reference_impl = std::string_view(pd.impl_info_str()).substr(0, 3) == "ref";
      if (reference_impl) return;
      plan.src = src;
      plan.src_in =
          type == dt::f32
              ? dnnl::reorder()
              : dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), plan.src_user, Engine(), src));
      plan.weights = pd.weights_desc();
      plan.primitive = dnnl::matmul(pd);
    });
    plan.ok = s.ok() && !reference_impl;
    if (plan.ok) return;
  }
}

// A's memory for `plan`'s primitive: A itself, or A rounded to bfloat16 in
// scratch space.
absl::StatusOr<dnnl::memory> SourceMemory(MatMulPlan& plan, const Tensor& a) {
  dnnl::memory user;
  ONNXKIT_RETURN_IF_ERROR(Guard("matmul memory", [&] { user = plan.src_mem.At(a, plan.src_user); }));
  if (!plan.src_in) return user;
  void* buffer = ThreadScratch(0, plan.src.get_size());
  if (buffer == nullptr) return absl::ResourceExhaustedError("out of memory for matmul scratch space");
  dnnl::memory rounded;
  ONNXKIT_RETURN_IF_ERROR(Guard("matmul memory", [&] { rounded = plan.rounded_mem.At(buffer, plan.src); }));
  ONNXKIT_RETURN_IF_ERROR(
      Execute("source reorder", plan.src_in, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, rounded}}));
  return rounded;
}

// Runs `plan` on raw buffers; weights through `prepared` when B is constant.
absl::Status RunPlan(MatMulPlan& plan, PreparedWeight* prepared, const Tensor& a, const Tensor& b,
                     const Tensor* bias, Tensor& y) {
  dnnl::memory w;
  if (prepared != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(w, prepared->Get(b, plan.weights_user, plan.weights));
  } else {
    w = plan.weights_mem.At(b, plan.weights_user);
  }
  ONNXKIT_ASSIGN_OR_RETURN(dnnl::memory src, SourceMemory(plan, a));
  std::unordered_map<int, dnnl::memory>& args = plan.args;
  args[DNNL_ARG_SRC] = src;
  args[DNNL_ARG_WEIGHTS] = w;
  args[DNNL_ARG_DST] = plan.dst_mem.At(y, plan.dst);
  if (bias != nullptr) {
    args[DNNL_ARG_BIAS] = plan.bias_mem.At(*bias, plan.bias);
  } else {
    args.erase(DNNL_ARG_BIAS);
  }
  return Execute("matmul", plan.primitive, args);
}

// Whether a constant B holds only finite values, checked once per buffer.
class FiniteCheck {
 public:
  bool operator()(const Tensor& b) {
    if (b.raw() != checked_) {
      finite_ = AllFinite(b);
      checked_ = b.raw();
    }
    return finite_;
  }

 private:
  const void* checked_ = nullptr;
  bool finite_ = false;
};

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

// MatMul, or (bias_input >= 0) a MatMul with a constant 2-D B and a float
// bias of B's columns added (a transformer chain's MatMul + Add).
class MatMulKernel : public CpuKernel {
 public:
  MatMulKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback,
               int bias_input = -1)
      : CpuKernel(std::move(fallback)),
        constant_b_(IsSessionConstantInput(node, 1)),
        bf16_(info.bf16),
        bias_input_(bias_input) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != pb::kFloat || b->dtype() != pb::kFloat || a->rank() < 1 || b->rank() < 1 ||
        a->size() == 0 || b->size() == 0) {
      return Fallback(ctx);
    }
    const Tensor* bias = nullptr;
    if (bias_input_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(bias, ctx.Input(bias_input_));
      if (!constant_b_ || b->rank() != 2 || !MatMulBiasFits(*bias, a->rank(), b->dim(1)))
        return Fallback(ctx);
    }
    const bool bf16 = bf16_ && constant_b_ && finite_b_(*b) && AllFinite(*a);
    if (!bf16 && constant_b_ && bias == nullptr && PackedGemmTakes(*a, *b)) return RunPacked(ctx, *a, *b);
    std::vector<std::vector<int64_t>> key = {a->shape(), b->shape()};
    if (bias != nullptr) key.push_back(bias->shape());
    const int p = bf16 ? 1 : 0;
    if (plans_[p].key != key) {
      plans_[p] = MatMulPlan();
      plans_[p].key = key;
      Plan(plans_[p], *a, *b, bias != nullptr, bf16);
    }
    if (!plans_[p].ok) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, out_shape_));
    return RunPlan(plans_[p], constant_b_ ? &prepared_[p] : nullptr, *a, *b, bias, *y);
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
  void Plan(MatMulPlan& plan, const Tensor& ta, const Tensor& tb, bool with_bias, bool bf16) {
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
      plan.src = PlainDesc({a_rows, k}, dt::f32);
      plan.weights_user = PlainDesc({k, n}, dt::f32);
      plan.dst = PlainDesc({a_rows, n}, dt::f32);
      if (with_bias) plan.bias = PlainDesc({1, n}, dt::f32);
    } else if (with_bias) {
      return;
    } else {
      size_t r = batch.size() + 2;
      if (r > 6) return;
      a.insert(a.begin(), r - a.size(), 1);
      b.insert(b.begin(), r - b.size(), 1);
      std::vector<int64_t> dst = batch;
      dst.push_back(m);
      dst.push_back(n);
      plan.src = PlainDesc(a, dt::f32);
      plan.weights_user = PlainDesc(b, dt::f32);
      plan.dst = PlainDesc(dst, dt::f32);
    }
    BuildPlan(plan, constant_b_, dnnl::primitive_attr(), with_bias, bf16);
  }

  bool constant_b_;
  bool bf16_;
  int bias_input_;
  FiniteCheck finite_b_;
  MatMulPlan plans_[2];  // float32, bfloat16
  std::vector<int64_t> out_shape_;
  PreparedWeight prepared_[2];
  PackedWeightCache packed_;
};

// Gemm: Y = alpha * A' B' + beta * C with C broadcast to [M, N]. alpha is
// an output scale; beta * C a bias (alpha and beta 1, C a row) or a binary post-op
// (beta * (alpha / beta * A'B' + C)).
class GemmKernel : public CpuKernel {
 public:
  GemmKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        constant_b_(IsSessionConstantInput(node, 1)),
        bf16_(info.bf16),
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
    const int64_t k = trans_a_ ? a->dim(0) : a->dim(1), n = trans_b_ ? b->dim(0) : b->dim(1);
    // A x W (+ a bias row): the packed kernel (a linear layer). A single
    // row times weights beyond L2 (a classifier) streams them faster
    // through oneDNN's matrix-vector product.
    if (!bf16_ && constant_b_ && !trans_a_ && alpha_ == 1.f && k == (trans_b_ ? b->dim(1) : b->dim(0)) &&
        (a->dim(0) >= 2 || b->size() <= (int64_t{1} << 18)) &&
        (c == nullptr || (beta_ == 1.f && c->size() == n && (c->rank() == 1 || c->dim(0) == 1))) &&
        PackedGemmTakesShape(k, n)) {
      ONNXKIT_ASSIGN_OR_RETURN(const PackedMatrix* packed, packed_.Get(*b, trans_b_));
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, {a->dim(0), n}));
      PackedGemm(a->data<float>(), a->dim(0), k, *packed, c != nullptr ? c->data<float>() : nullptr,
                 y->mutable_data<float>(), n);
      return absl::OkStatus();
    }
    std::vector<std::vector<int64_t>> key = {a->shape(), b->shape(),
                                             c ? c->shape() : std::vector<int64_t>{-1}};
    const bool bf16 = bf16_ && constant_b_ && finite_b_(*b) && AllFinite(*a);
    const int p = bf16 ? 1 : 0;
    MatMulPlan& plan = plans_[p];
    if (plan.key != key) {
      plan = MatMulPlan();
      plan.key = key;
      Plan(plan, *a, *b, c, bf16);
    }
    if (!plan.ok) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, {m_, n_}));
    if (c == nullptr || bias_) return RunPlan(plan, constant_b_ ? &prepared_[p] : nullptr, *a, *b, c, *y);
    dnnl::memory w;
    if (constant_b_) {
      ONNXKIT_ASSIGN_OR_RETURN(w, prepared_[p].Get(*b, plan.weights_user, plan.weights));
    } else {
      w = plan.weights_mem.At(*b, plan.weights_user);
    }
    ONNXKIT_ASSIGN_OR_RETURN(dnnl::memory src, SourceMemory(plan, *a));
    return Execute("gemm", plan.primitive,
                   {{DNNL_ARG_SRC, src},
                    {DNNL_ARG_WEIGHTS, w},
                    {DNNL_ARG_DST, plan.dst_mem.At(*y, plan.dst)},
                    {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, plan.bias_mem.At(*c, plan.bias)}});
  }

 private:
  void Plan(MatMulPlan& plan, const Tensor& a, const Tensor& b, const Tensor* c, bool bf16) {
    m_ = trans_a_ ? a.dim(1) : a.dim(0);
    int64_t k = trans_a_ ? a.dim(0) : a.dim(1);
    n_ = trans_b_ ? b.dim(0) : b.dim(1);
    if (k != (trans_b_ ? b.dim(1) : b.dim(0))) return;
    // A transposed operand is the stored matrix read with swapped strides.
    plan.src =
        dnnl::memory::desc({m_, k}, dt::f32, trans_a_ ? dnnl::memory::dims{1, m_} : dnnl::memory::dims{k, 1});
    plan.weights_user =
        dnnl::memory::desc({k, n_}, dt::f32, trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n_, 1});
    plan.dst = PlainDesc({m_, n_}, dt::f32);
    dnnl::primitive_attr attr;
    bias_ = false;
    if (c != nullptr) {
      std::vector<int64_t> cs = c->shape();
      cs.insert(cs.begin(), 2 - cs.size(), 1);
      if ((cs[0] != 1 && cs[0] != m_) || (cs[1] != 1 && cs[1] != n_)) return;
      plan.bias = dnnl::memory::desc(Dims(cs), dt::f32, RowMajorStrides(Dims(cs)));
      bias_ = alpha_ == 1.f && beta_ == 1.f && cs[0] == 1 && cs[1] == n_;  // the bias is added before scales
      if (!bias_) {
        dnnl::post_ops ops;
        ops.append_binary(dnnl::algorithm::binary_add, plan.bias);
        if (beta_ != 1.f) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, beta_, 0.f);
        attr.set_post_ops(ops);
      }
    }
    float scale = c != nullptr && !bias_ ? alpha_ / beta_ : alpha_;
    if (!std::isfinite(scale) || !std::isfinite(alpha_) || !std::isfinite(beta_))
      return;  // rescaling would lose them
    if (scale != 1.f) attr.set_output_scales(0, {scale});
    BuildPlan(plan, constant_b_, attr, bias_, bf16);
  }

  bool constant_b_;
  bool bf16_;
  float alpha_, beta_;
  bool trans_a_, trans_b_;
  bool bias_ = false;
  int64_t m_ = 0, n_ = 0;
  FiniteCheck finite_b_;
  MatMulPlan plans_[2];  // float32, bfloat16
  PreparedWeight prepared_[2];
  PackedWeightCache packed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeMatMul(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<MatMulKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGemm(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<GemmKernel>(node, info);
}

bool MatMulBiasFits(const Tensor& bias, int rank, int64_t n) {
  if (bias.dtype() != pb::kFloat || bias.size() != n || bias.rank() > rank) return false;
  return bias.rank() == 0 ? n == 1 : bias.shape().back() == n;
}

std::unique_ptr<Kernel> MakeMatMulBias(const ir::Node& matmul, const KernelInfo& info, int bias_input,
                                       std::unique_ptr<Kernel> fallback) {
  return std::make_unique<MatMulKernel>(matmul, info, std::move(fallback), bias_input);
}

}  // namespace onnxkit::runner::cpu
