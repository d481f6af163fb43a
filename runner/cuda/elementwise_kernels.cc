// CUDA element-wise kernels: unary activations and math, broadcasting
// binary arithmetic, Cast. Floating-point types (float, float16, bfloat16)
// only, except Cast; other types, ranks above kMaxRank and variadic
// Max/Min run on the cpu backend.
#include <algorithm>
#include <string>

#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cuda {
namespace {

class UnaryKernel : public CudaKernel {
 public:
  UnaryKernel(std::shared_ptr<Context> context, UnaryOp op, float alpha, float beta)
      : context_(std::move(context)), op_(op), alpha_(alpha), beta_(beta) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 1);
    return in && IsFloatType((*in)[0]->dtype());
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), x.shape()));
    ONNXKIT_RETURN_IF_ERROR(Launched(
        LaunchUnary(op_, x.dtype(), x.raw(), y.mutable_raw(), x.size(), alpha_, beta_, context_->stream()),
        ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  UnaryOp op_;
  float alpha_, beta_;
};

class BinaryKernel : public CudaKernel {
 public:
  BinaryKernel(std::shared_ptr<Context> context, BinaryOp op) : context_(std::move(context)), op_(op) {}

  bool Accepts(const KernelContext& ctx) const override {
    if (ctx.num_inputs() != 2) return false;
    auto in = TensorInputs(ctx, 2);
    if (!in || !IsFloatType((*in)[0]->dtype()) || (*in)[0]->dtype() != (*in)[1]->dtype()) return false;
    return Geometry(*(*in)[0], *(*in)[1]).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Plan plan, Geometry(a, b));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), plan.shape));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchBinary(op_, a.dtype(), a.raw(), b.raw(), y.mutable_raw(), y.size(),
                                                  plan.geometry, context_->stream()),
                                     ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  struct Plan {
    std::vector<int64_t> shape;
    StridedGeometry geometry;  // rank 0: equal shapes
  };

  static absl::StatusOr<Plan> Geometry(const Tensor& a, const Tensor& b) {
    Plan plan;
    if (a.shape() == b.shape()) {
      plan.shape = a.shape();
      return plan;
    }
    std::vector<int64_t> shapes[] = {a.shape(), b.shape()};
    ONNXKIT_ASSIGN_OR_RETURN(plan.shape, reference::BroadcastShapes(shapes));
    int64_t a_div = 1, a_period = 0, b_div = 1, b_period = 0;
    if (Periodic(a.shape(), plan.shape, &a_div, &a_period) &&
        Periodic(b.shape(), plan.shape, &b_div, &b_period)) {
      plan.geometry.a_div = a_div;
      plan.geometry.a_period = a_period;
      plan.geometry.b_div = b_div;
      plan.geometry.b_period = b_period;
      return plan;
    }
    auto ga = BroadcastGeometry(a.shape(), plan.shape);
    auto gb = BroadcastGeometry(b.shape(), plan.shape);
    if (!ga || !gb) return absl::UnimplementedError("rank above the CUDA kernels' limit");
    plan.geometry = *ga;
    for (int d = 0; d < gb->rank; ++d) plan.geometry.b[d] = gb->a[d];
    return plan;
  }

  // Whether operand `in` broadcast to `out` reads element (i / div) %
  // period of output element i: its dims that are not 1 form one run
  // equal to out's dims there (a row, one value per channel, a scalar).
  // Period 0: the operand has out's shape.
  static bool Periodic(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t* div,
                       int64_t* period) {
    if (in == out) {
      *div = 1;
      *period = 0;
      return true;
    }
    const size_t lead = out.size() - in.size();
    auto dim = [&](size_t j) { return j < lead ? int64_t{1} : in[j - lead]; };
    size_t first = out.size(), last = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      if (dim(j) != 1) {
        first = std::min(first, j);
        last = j + 1;
      }
    }
    int64_t p = 1, d = 1;
    for (size_t j = 0; j < out.size(); ++j) {
      if (j >= first && j < last) {
        if (dim(j) != out[j]) return false;
        p *= out[j];
      } else if (j >= last) {
        d *= out[j];
      }
    }
    *div = d > 0 ? d : 1;
    *period = p > 0 ? p : 1;
    return true;
  }

  std::shared_ptr<Context> context_;
  BinaryOp op_;
};

class CastKernel : public CudaKernel {
 public:
  CastKernel(std::shared_ptr<Context> context, int32_t to) : context_(std::move(context)), to_(to) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, 1);
    return in && CastSupported((*in)[0]->dtype(), to_);
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    if (x.dtype() == to_) return ctx.SetOutput(0, *ctx.Value(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(to_, x.shape()));
    ONNXKIT_RETURN_IF_ERROR(
        Launched(LaunchCast(x.dtype(), to_, x.raw(), y.mutable_raw(), x.size(), context_->stream()), "Cast"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  int32_t to_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeUnary(const std::shared_ptr<Context>& context, const ir::Node& node,
                                                      const KernelInfo&) {
  const std::string& op = node.op_type();
  float alpha = 0, beta = 0;
  UnaryOp u;
  if (op == "Relu") u = UnaryOp::kRelu;
  else if (op == "Sigmoid") u = UnaryOp::kSigmoid;
  else if (op == "Tanh") u = UnaryOp::kTanh;
  else if (op == "Exp") u = UnaryOp::kExp;
  else if (op == "Log") u = UnaryOp::kLog;
  else if (op == "Sqrt") u = UnaryOp::kSqrt;
  else if (op == "Abs") u = UnaryOp::kAbs;
  else if (op == "Neg") u = UnaryOp::kNeg;
  else if (op == "Reciprocal") u = UnaryOp::kReciprocal;
  else if (op == "Erf") u = UnaryOp::kErf;
  else if (op == "Floor") u = UnaryOp::kFloor;
  else if (op == "Ceil") u = UnaryOp::kCeil;
  else if (op == "LeakyRelu") {
    u = UnaryOp::kLeakyRelu;
    alpha = reference::AttrFloat(node, "alpha", 0.01f);
  } else if (op == "Elu") {
    u = UnaryOp::kElu;
    alpha = reference::AttrFloat(node, "alpha", 1.0f);
  } else if (op == "HardSigmoid") {
    u = UnaryOp::kHardSigmoid;
    alpha = reference::AttrFloat(node, "alpha", 0.2f);
    beta = reference::AttrFloat(node, "beta", 0.5f);
  } else if (op == "Gelu") {
    std::string approximate = reference::AttrString(node, "approximate", "none");
    if (approximate != "none" && approximate != "tanh") return std::unique_ptr<CudaKernel>();
    u = approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
  } else {
    return std::unique_ptr<CudaKernel>();
  }
  return std::unique_ptr<CudaKernel>(new UnaryKernel(context, u, alpha, beta));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeBinary(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo&) {
  const std::string& op = node.op_type();
  BinaryOp b;
  if (op == "Add") b = BinaryOp::kAdd;
  else if (op == "Sub") b = BinaryOp::kSub;
  else if (op == "Mul") b = BinaryOp::kMul;
  else if (op == "Div") b = BinaryOp::kDiv;
  else if (op == "Pow") b = BinaryOp::kPow;
  else if (op == "Max") b = BinaryOp::kMax;
  else if (op == "Min") b = BinaryOp::kMin;
  else return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(new BinaryKernel(context, b));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeCast(const std::shared_ptr<Context>& context, const ir::Node& node,
                                                     const KernelInfo&) {
  int64_t to = reference::AttrInt(node, "to", 0);
  if (!CastSupported(kFloat, static_cast<int32_t>(to)) || to != static_cast<int32_t>(to)) {
    return std::unique_ptr<CudaKernel>();
  }
  return std::unique_ptr<CudaKernel>(new CastKernel(context, static_cast<int32_t>(to)));
}

}  // namespace onnxkit::runner::cuda
