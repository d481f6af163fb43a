// CUDA element-wise kernels: unary activations and math, broadcasting
// binary arithmetic, Cast. Floating-point types (float, float16, bfloat16)
// only, except Cast; other types, ranks above kMaxRank and variadic
// Max/Min run on the cpu backend.
#include <algorithm>
#include <optional>
#include <string>

#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cuda {
namespace {

// Whether operand `in` broadcast to `out` reads element (i / div) %
// period of output element i: its dims that are not 1 form one run
// equal to out's dims there (a row, one value per channel, a scalar).
// Period 0: the operand has out's shape.
bool Periodic(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t* div,
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

// The output shape of a broadcasting binary op and how its operands are read.
struct BinaryPlan {
  std::vector<int64_t> shape;
  StridedGeometry geometry;  // rank 0: equal shapes or periodic operands
};

absl::StatusOr<BinaryPlan> BinaryGeometry(const Tensor& a, const Tensor& b) {
  BinaryPlan plan;
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
    return BinaryGeometry(*(*in)[0], *(*in)[1]).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = ctx.Value(1)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(BinaryPlan plan, BinaryGeometry(a, b));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(a.dtype(), plan.shape));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchBinary(op_, a.dtype(), a.raw(), b.raw(), y.mutable_raw(), y.size(),
                                                  plan.geometry, context_->stream()),
                                     ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  BinaryOp op_;
};

// Comparisons and logic ops: a bool result of broadcast operands of one type.
class CompareKernel : public CudaKernel {
 public:
  CompareKernel(std::shared_ptr<Context> context, CompareOp op) : context_(std::move(context)), op_(op) {}

  bool Accepts(const KernelContext& ctx) const override {
    const int n = op_ == CompareOp::kNot ? 1 : 2;
    if (ctx.num_inputs() != n) return false;
    auto in = TensorInputs(ctx, n);
    if (!in) return false;
    const int32_t dtype = (*in)[0]->dtype();
    const bool logic =
        op_ == CompareOp::kAnd || op_ == CompareOp::kOr || op_ == CompareOp::kXor || op_ == CompareOp::kNot;
    if (logic ? dtype != kBool
              : !(IsFloatType(dtype) || dtype == kInt32 || dtype == kInt64 ||
                  (dtype == kBool && op_ == CompareOp::kEqual))) {
      return false;
    }
    if (n == 1) return true;
    return (*in)[1]->dtype() == dtype && BinaryGeometry(*(*in)[0], *(*in)[1]).ok();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& a = ctx.Value(0)->tensor();
    const Tensor& b = op_ == CompareOp::kNot ? a : ctx.Value(1)->tensor();
    ONNXKIT_ASSIGN_OR_RETURN(BinaryPlan plan, BinaryGeometry(a, b));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(kBool, plan.shape));
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchCompare(op_, a.dtype(), a.raw(), b.raw(), y.mutable_raw(),
                                                   y.size(), plan.geometry, context_->stream()),
                                     ctx.node().op_type()));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::shared_ptr<Context> context_;
  CompareOp op_;
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

// A Softmax or LogSoftmax after the chain (MakeSoftmaxChain).
struct SoftmaxTail {
  bool log = false;
  int64_t axis = -1;
  bool flatten = false;  // opsets before 13: rows are everything from axis on
};

// Element-wise nodes as one kernel (LaunchChain): inputs of one floating
// type broadcast together to the result's shape; with a softmax tail, the
// Softmax of that result (LaunchChainSoftmax).
class ElementwiseChainKernel : public CudaKernel {
 public:
  ElementwiseChainKernel(std::shared_ptr<Context> context, std::vector<ChainOp> ops, int num_inputs,
                         std::optional<SoftmaxTail> softmax = std::nullopt)
      : context_(std::move(context)), ops_(std::move(ops)), num_inputs_(num_inputs), softmax_(softmax) {}

  bool Accepts(const KernelContext& ctx) const override {
    auto in = TensorInputs(ctx, num_inputs_);
    if (!in || !IsFloatType((*in)[0]->dtype())) return false;
    for (const Tensor* t : *in) {
      if (t->dtype() != (*in)[0]->dtype() || t->rank() > kMaxRank) return false;
    }
    absl::StatusOr<std::vector<int64_t>> shape = Shape(*in);
    if (!shape.ok()) return false;
    return !softmax_.has_value() ||
           (!shape->empty() &&
            reference::NormalizeAxis(softmax_->axis, static_cast<int64_t>(shape->size())).ok());
  }

  absl::Status Run(KernelContext& ctx) override {
    auto in = TensorInputs(ctx, num_inputs_);
    if (!in) return absl::InternalError("element-wise chain inputs changed after the kernel accepted them");
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Shape(*in));
    if (shape.size() > static_cast<size_t>(kMaxRank))
      return absl::UnimplementedError("rank above the CUDA limit");
    ChainProgram p;
    p.num_ops = static_cast<int>(ops_.size());
    for (size_t k = 0; k < ops_.size(); ++k) p.ops[k] = ops_[k];
    p.num_inputs = num_inputs_;
    p.rank = static_cast<int>(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) p.dims[d] = shape[d];
    for (int j = 0; j < num_inputs_; ++j) {
      const Tensor& t = *(*in)[static_cast<size_t>(j)];
      ChainInput& input = p.inputs[j];
      input.data = t.raw();
      if (!Periodic(t.shape(), shape, &input.div, &input.period)) {
        auto g = BroadcastGeometry(t.shape(), shape);
        if (!g) return absl::UnimplementedError("rank above the CUDA limit");
        input.strided = true;
        for (int d = 0; d < g->rank; ++d) input.strides[d] = g->a[d];
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate((*in)[0]->dtype(), shape));
    if (softmax_.has_value()) {
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis,
                               reference::NormalizeAxis(softmax_->axis, static_cast<int64_t>(shape.size())));
      const SoftmaxRows r = SoftmaxRowsOf(shape, axis, softmax_->flatten);
      ONNXKIT_RETURN_IF_ERROR(Launched(LaunchChainSoftmax(y.dtype(), p, softmax_->log, y.mutable_raw(),
                                                          r.outer, r.len, r.inner, context_->stream()),
                                       "element-wise chain and Softmax"));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    ONNXKIT_RETURN_IF_ERROR(Launched(LaunchChain(y.dtype(), p, y.mutable_raw(), y.size(), context_->stream()),
                                     "element-wise chain"));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  static absl::StatusOr<std::vector<int64_t>> Shape(const std::vector<const Tensor*>& in) {
    std::vector<std::vector<int64_t>> shapes;
    for (const Tensor* t : in) shapes.push_back(t->shape());
    return reference::BroadcastShapes(shapes);
  }

  std::shared_ptr<Context> context_;
  std::vector<ChainOp> ops_;
  int num_inputs_;
  std::optional<SoftmaxTail> softmax_;
};

// The chain program's ops for element-wise `nodes` reading earlier nodes'
// outputs and `inputs`; nullopt when they cannot run as one.
std::optional<std::vector<ChainOp>> ChainOps(const std::vector<const ir::Node*>& nodes,
                                             const std::vector<const ir::Value*>& inputs) {
  if (nodes.empty() || nodes.size() > static_cast<size_t>(kMaxChainOps) ||
      inputs.size() > static_cast<size_t>(kMaxChainInputs) || inputs.empty()) {
    return std::nullopt;
  }
  std::vector<ChainOp> ops;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!ChainableOp(*nodes[k])) return std::nullopt;
    ChainOp op = *ElementwiseOpOf(*nodes[k]);
    int* operands[] = {&op.a, &op.b};
    for (int i = 0; i < nodes[k]->num_inputs(); ++i) {
      const ir::Value* v = nodes[k]->input(i);
      int source = -1;
      for (size_t m = 0; m < k; ++m) {
        if (nodes[m]->output(0) == v) source = static_cast<int>(m);
      }
      for (size_t j = 0; source < 0 && j < inputs.size(); ++j) {
        if (inputs[j] == v) source = kMaxChainOps + static_cast<int>(j);
      }
      if (v == nullptr || source < 0) return std::nullopt;
      *operands[i] = source;
    }
    ops.push_back(op);
  }
  return ops;
}

}  // namespace

std::optional<ChainOp> ElementwiseOpOf(const ir::Node& node) {
  const std::string& op = node.op_type();
  ChainOp c;
  UnaryOp& u = c.unary;
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
    c.alpha = reference::AttrFloat(node, "alpha", 0.01f);
  } else if (op == "Elu") {
    u = UnaryOp::kElu;
    c.alpha = reference::AttrFloat(node, "alpha", 1.0f);
  } else if (op == "HardSigmoid") {
    u = UnaryOp::kHardSigmoid;
    c.alpha = reference::AttrFloat(node, "alpha", 0.2f);
    c.beta = reference::AttrFloat(node, "beta", 0.5f);
  } else if (op == "Gelu") {
    std::string approximate = reference::AttrString(node, "approximate", "none");
    if (approximate != "none" && approximate != "tanh") return std::nullopt;
    u = approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
  } else {
    c.binary = true;
    BinaryOp& b = c.binary_op;
    if (op == "Add")
      b = BinaryOp::kAdd;
    else if (op == "Sub")
      b = BinaryOp::kSub;
    else if (op == "Mul")
      b = BinaryOp::kMul;
    else if (op == "Div")
      b = BinaryOp::kDiv;
    else if (op == "Pow")
      b = BinaryOp::kPow;
    else if (op == "Max")
      b = BinaryOp::kMax;
    else if (op == "Min")
      b = BinaryOp::kMin;
    else
      return std::nullopt;
  }
  return c;
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeUnary(const std::shared_ptr<Context>& context,
                                                      const ir::Node& node, const KernelInfo&) {
  std::optional<ChainOp> op = ElementwiseOpOf(node);
  if (!op || op->binary) return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(new UnaryKernel(context, op->unary, op->alpha, op->beta));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeBinary(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo&) {
  std::optional<ChainOp> op = ElementwiseOpOf(node);
  if (!op || !op->binary) return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(new BinaryKernel(context, op->binary_op));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeCompare(const std::shared_ptr<Context>& context,
                                                        const ir::Node& node, const KernelInfo&) {
  const std::string& op = node.op_type();
  CompareOp c;
  if (op == "Equal")
    c = CompareOp::kEqual;
  else if (op == "Less")
    c = CompareOp::kLess;
  else if (op == "Greater")
    c = CompareOp::kGreater;
  else if (op == "LessOrEqual")
    c = CompareOp::kLessOrEqual;
  else if (op == "GreaterOrEqual")
    c = CompareOp::kGreaterOrEqual;
  else if (op == "And")
    c = CompareOp::kAnd;
  else if (op == "Or")
    c = CompareOp::kOr;
  else if (op == "Xor")
    c = CompareOp::kXor;
  else if (op == "Not")
    c = CompareOp::kNot;
  else
    return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(new CompareKernel(context, c));
}

bool ChainableOp(const ir::Node& node) {
  std::optional<ChainOp> op = ElementwiseOpOf(node);
  return op.has_value() && node.num_outputs() == 1 && node.num_inputs() == (op->binary ? 2 : 1);
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeElementwiseChain(
    const std::shared_ptr<Context>& context, const std::vector<const ir::Node*>& nodes,
    const std::vector<const ir::Value*>& inputs) {
  std::optional<std::vector<ChainOp>> ops = ChainOps(nodes, inputs);
  if (!ops) return std::unique_ptr<CudaKernel>();
  return std::unique_ptr<CudaKernel>(
      new ElementwiseChainKernel(context, *std::move(ops), static_cast<int>(inputs.size())));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeSoftmaxChain(const std::shared_ptr<Context>& context,
                                                             const std::vector<const ir::Node*>& nodes,
                                                             const ir::Node& softmax, int64_t softmax_opset,
                                                             const std::vector<const ir::Value*>& inputs) {
  std::optional<std::vector<ChainOp>> ops = ChainOps(nodes, inputs);
  const bool is_softmax = softmax.op_type() == "Softmax" || softmax.op_type() == "LogSoftmax";
  if (!ops || !is_softmax || softmax.num_inputs() != 1 || softmax.input(0) != nodes.back()->output(0)) {
    return std::unique_ptr<CudaKernel>();
  }
  SoftmaxTail tail;
  tail.log = softmax.op_type() == "LogSoftmax";
  tail.flatten = softmax_opset < 13;
  tail.axis = reference::AttrInt(softmax, "axis", tail.flatten ? 1 : -1);
  return std::unique_ptr<CudaKernel>(
      new ElementwiseChainKernel(context, *std::move(ops), static_cast<int>(inputs.size()), tail));
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
