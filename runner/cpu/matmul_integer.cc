// cpu MatMulInteger and QLinearMatMul on oneDNN's int8 matmul: A uint8 or
// int8 (any rank >= 2, its batch folded into M), B a 2-D int8 matrix, exact
// int32 accumulation with one-element zero points passed at run time (or
// per-column weight zero points that are all 0). A
// constant B is reordered once into the layout oneDNN prefers (AMX where
// present). QLinearMatMul requantizes the int32 results with the reference's
// arithmetic (multiplier rounded to float, final multiply in double, half to
// even), so both backends agree exactly. uint8 B (oneDNN 2.6 has no u8
// weights), per-row / per-column parameters, non-float scales, empty tensors
// and very long rows (int32 could overflow) run on the reference kernels.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/transformer.h"
#include "runner/reference/float_types.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// |(a - za) * (b - zb)| <= 255 * 255: rows up to this length cannot
// overflow the int32 accumulator.
constexpr int64_t kMaxK = 32768;

// The value of a one-element int8/uint8 zero point of type `dtype`; false
// when it is another type or size.
bool ScalarZeroPoint(const Tensor* zp, int32_t dtype, int32_t& value) {
  value = 0;
  if (zp == nullptr) return true;
  if (zp->dtype() != dtype || zp->size() != 1) return false;
  value = dtype == pb::kInt8 ? zp->data<int8_t>()[0] : zp->data<uint8_t>()[0];
  return true;
}

// acc = (A - za) x (B - zb) in int32 for A [.., K] and B [K, N].
class Int8MatMul {
 public:
  explicit Int8MatMul(bool constant_b) : constant_b_(constant_b) {}

  // False when the operands are not covered (the caller falls back).
  bool Covers(const Tensor& a, const Tensor& b, const Tensor* a_zp, const Tensor* b_zp) {
    // Per-column weight zero points that are all 0 (symmetric per-channel
    // weights, as ONNX Runtime's quantizer writes them) are no zero points.
    if (b_zp != nullptr && b_zp->size() > 1 && b.rank() == 2 && b_zp->rank() == 1 &&
        b_zp->dtype() == pb::kInt8 && b_zp->size() == b.dim(1)) {
      const int8_t* z = b_zp->data<int8_t>();
      if (std::all_of(z, z + b_zp->size(), [](int8_t v) { return v == 0; })) b_zp = nullptr;
    }
    bool types = (a.dtype() == pb::kUint8 || a.dtype() == pb::kInt8) && b.dtype() == pb::kInt8;
    if (!types || a.rank() < 2 || a.rank() > 6 || b.rank() != 2 || a.size() == 0 || b.size() == 0 ||
        b.dim(0) > kMaxK || !ScalarZeroPoint(a_zp, a.dtype(), za_) ||
        !ScalarZeroPoint(b_zp, b.dtype(), zb_)) {
      return false;
    }
    std::vector<std::vector<int64_t>> key = {
        a.shape(), b.shape(), {a.dtype(), a_zp != nullptr, b_zp != nullptr}};
    if (key != key_) {
      key_ = key;
      ok_ = Build(a, b, a_zp != nullptr, b_zp != nullptr);
    }
    return ok_;
  }

  // A's shape with the last dim N.
  const std::vector<int64_t>& out_shape() const { return out_shape_; }

  // Runs on the operands last passed to Covers; writes int32 into `acc`.
  absl::Status Run(const Tensor& a, const Tensor& b, void* acc) {
    dnnl::memory w, zpa, zpb, dst;
    if (constant_b_) {
      ONNXKIT_ASSIGN_OR_RETURN(w, prepared_.Get(b, weights_user_, weights_));
    } else {
      w = UserMemory(b, weights_user_);
    }
    ONNXKIT_RETURN_IF_ERROR(Guard("int8 matmul memory", [&] {
      zpa = dnnl::memory({{1}, dt::s32, tag::a}, Engine(), &za_);
      zpb = dnnl::memory({{1}, dt::s32, tag::a}, Engine(), &zb_);
      dst = dnnl::memory(dst_, Engine(), acc);
    }));
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, UserMemory(a, src_)}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
    if (key_[2][1] != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zpa;
    if (key_[2][2] != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS] = zpb;
    return Execute("int8 matmul", primitive_, args);
  }

 private:
  bool Build(const Tensor& a, const Tensor& b, bool with_a_zp, bool with_b_zp) {
    int64_t k = a.dim(a.rank() - 1), n = b.dim(1);
    if (k != b.dim(0)) return false;
    int64_t rows = a.size() / k;
    out_shape_ = a.shape();
    out_shape_.back() = n;
    src_ = PlainDesc({rows, k}, *DnnlType(a.dtype()));
    weights_user_ = PlainDesc({k, n}, dt::s8);
    dst_ = PlainDesc({rows, n}, dt::s32);
    return Guard("int8 matmul",
                 [&] {
                   dnnl::primitive_attr attr;
                   if (with_a_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
                   if (with_b_zp) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {DNNL_RUNTIME_S32_VAL});
                   dnnl::memory::desc want =
                       constant_b_ ? dnnl::memory::desc({k, n}, dt::s8, tag::any) : weights_user_;
                   dnnl::matmul::desc d(src_, want, dst_);
                   dnnl::matmul::primitive_desc pd(d, attr, Engine());
                   weights_ = pd.weights_desc();
                   primitive_ = dnnl::matmul(pd);
                 })
        .ok();
  }

  bool constant_b_;
  bool ok_ = false;
  int32_t za_ = 0, zb_ = 0;
  std::vector<std::vector<int64_t>> key_;
  std::vector<int64_t> out_shape_;
  dnnl::memory::desc src_, weights_user_, weights_, dst_;
  dnnl::matmul primitive_;
  PreparedWeight prepared_;
};

class MatMulIntegerKernel : public CpuKernel {
 public:
  MatMulIntegerKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), matmul_(IsSessionConstantInput(node, 1)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a_zp, ctx.OptionalInput(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b_zp, ctx.OptionalInput(3));
    if (!matmul_.Covers(*a, *b, a_zp, b_zp)) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kInt32, matmul_.out_shape()));
    return matmul_.Run(*a, *b, y->mutable_raw());
  }

 private:
  Int8MatMul matmul_;
};

// A one-element float32 scale; nullopt otherwise.
std::optional<float> ScalarScale(const Tensor& t) {
  if (t.dtype() != pb::kFloat || t.size() != 1 || t.rank() > 1) return std::nullopt;
  return t.data<float>()[0];
}

class QLinearMatMulKernel : public CpuKernel {
 public:
  QLinearMatMulKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), matmul_(IsSessionConstantInput(node, 3)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a_scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a_zp, ctx.OptionalInput(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(3));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b_scale, ctx.Input(4));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b_zp, ctx.OptionalInput(5));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y_scale, ctx.Input(6));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y_zp, ctx.OptionalInput(7));
    std::optional<float> sa = ScalarScale(*a_scale), sb = ScalarScale(*b_scale), sy = ScalarScale(*y_scale);
    int32_t y_type = y_zp != nullptr ? y_zp->dtype() : a->dtype();
    int32_t zy = 0;
    if (!sa || !sb || !sy || !ScalarZeroPoint(y_zp, y_type, zy) ||
        (y_type != pb::kUint8 && y_type != pb::kInt8) || !matmul_.Covers(*a, *b, a_zp, b_zp)) {
      return Fallback(ctx);
    }
    // The output first: its allocation checks the size before the scratch.
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, matmul_.out_shape()));
    acc_.resize(static_cast<size_t>(a->size() / a->dim(a->rank() - 1) * b->dim(1)));
    ONNXKIT_RETURN_IF_ERROR(matmul_.Run(*a, *b, acc_.data()));
    // The reference's multiplier: the scale product and quotient in float.
    double product = DoubleToFloat(static_cast<double>(*sa) * static_cast<double>(*sb));
    double multiplier = DoubleToFloat(product / static_cast<double>(*sy));
    double lo = y_type == pb::kUint8 ? 0 : -128, hi = y_type == pb::kUint8 ? 255 : 127;
    for (size_t i = 0; i < acc_.size(); ++i) {
      double r = std::nearbyint(static_cast<double>(acc_[i]) * multiplier + static_cast<double>(zy));
      if (std::isnan(r)) r = zy;
      r = std::clamp(r, lo, hi);
      if (y_type == pb::kUint8) {
        y->mutable_data<uint8_t>()[i] = static_cast<uint8_t>(r);
      } else {
        y->mutable_data<int8_t>()[i] = static_cast<int8_t>(r);
      }
    }
    return absl::OkStatus();
  }

 private:
  Int8MatMul matmul_;
  std::vector<int32_t> acc_;
};

// MatMulInteger -> Cast(to float) -> Mul by a scale (a transformer chain,
// runner/fusion.h): the int32 product is converted and scaled in one pass
// as Cast and Mul would, float(acc) * s in float, so the result is the
// same. The scale must be one value or a row of N along the last axis that
// leaves the product's shape as it is; other inputs run node by node.
class MatMulIntegerScaleKernel : public Kernel {
 public:
  MatMulIntegerScaleKernel(int a_zp, int b_zp, int scale, bool constant_b, std::unique_ptr<Kernel> fallback)
      : a_zp_(a_zp), b_zp_(b_zp), scale_(scale), matmul_(constant_b), fallback_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    const Tensor* a_zp = nullptr;
    const Tensor* b_zp = nullptr;
    if (a_zp_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(a_zp, ctx.OptionalInput(a_zp_));
    }
    if (b_zp_ >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(b_zp, ctx.OptionalInput(b_zp_));
    }
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(scale_));
    if (!matmul_.Covers(*a, *b, a_zp, b_zp) || !ScaleFits(*s, matmul_.out_shape()))
      return fallback_->Run(ctx);
    const int64_t n = matmul_.out_shape().back();
    const int64_t rows = a->size() / a->dim(a->rank() - 1);
    // The output first: its allocation checks the size (the limits, the
    // memory cap) before the int32 scratch of as many elements is made.
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, matmul_.out_shape()));
    acc_.resize(static_cast<size_t>(rows * n));
    ONNXKIT_RETURN_IF_ERROR(matmul_.Run(*a, *b, acc_.data()));
    ScaleRows(acc_.data(), s->data<float>(), s->size() == 1, y->mutable_data<float>(), rows, n);
    return absl::OkStatus();
  }

 private:
  static bool ScaleFits(const Tensor& s, const std::vector<int64_t>& shape) {
    if (s.dtype() != pb::kFloat || s.rank() > static_cast<int>(shape.size())) return false;
    if (s.size() == 1) return true;
    for (int d = 0; d + 1 < s.rank(); ++d) {
      if (s.dim(d) != 1) return false;
    }
    return s.rank() >= 1 && s.dim(s.rank() - 1) == shape.back();
  }

  static void ScaleRows(const int32_t* acc, const float* s, bool one, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* in = acc + r * n;
      float* out = y + r * n;
      if (one) {
        const float v = s[0];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(in[j]) * v;
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(in[j]) * s[j];
      }
    }
  }

  int a_zp_, b_zp_, scale_;
  Int8MatMul matmul_;
  std::vector<int32_t> acc_;
  std::unique_ptr<Kernel> fallback_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeMatMulInteger(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<MatMulIntegerKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMatMulIntegerScaleChain(const FusionChain& chain,
                                                                    std::unique_ptr<Kernel> fallback) {
  const ir::Node& mmi = chain.head();
  const int a_zp = mmi.num_inputs() > 2 && mmi.input(2) != nullptr ? 2 : -1;
  const int b_zp = mmi.num_inputs() > 3 && mmi.input(3) != nullptr ? 3 : -1;
  const int scale = chain.input_offset[2] + (chain.chained_input[2] == 0 ? 1 : 0);
  return std::unique_ptr<Kernel>(
      new MatMulIntegerScaleKernel(a_zp, b_zp, scale, IsSessionConstantInput(mmi, 1), std::move(fallback)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeQLinearMatMul(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<QLinearMatMulKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
