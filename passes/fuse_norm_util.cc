// Helpers of the normalization fusions (see fuse_norm_util.h).
#include "passes/fuse_norm_util.h"

#include <algorithm>
#include <string>

#include "lib/base/status_macros.h"
#include "passes/fuse_util.h"
#include "passes/util.h"

namespace onnxkit::passes {

std::optional<std::vector<int64_t>> KeptReduceAxes(const ir::Node& reduce, PassContext& ctx) {
  if (reduce.GetInt("keepdims").value_or(1) != 1 || reduce.num_outputs() != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> axes;
  if (ctx.Opset("") < 18) {
    axes = reduce.GetInts("axes");
  } else if (reduce.num_inputs() == 2 && reduce.input(1) != nullptr && IsConstantValue(*reduce.input(1))) {
    absl::StatusOr<runner::Tensor> t = ConstantTensor(*reduce.input(1), ctx);
    if (t.ok() && t->dtype() == pb::kInt64 && t->rank() <= 1) {
      axes.emplace(t->data<int64_t>(), t->data<int64_t>() + t->size());
    }
  }
  if (!axes || axes->empty()) return std::nullopt;
  return axes;
}

std::optional<int64_t> TrailingAxis(std::vector<int64_t> axes, std::optional<size_t> rank) {
  const int64_t k = static_cast<int64_t>(axes.size());
  if (k == 0) return std::nullopt;
  for (int64_t& a : axes) {
    if (a >= 0) {
      if (!rank || a >= static_cast<int64_t>(*rank)) return std::nullopt;
      a -= static_cast<int64_t>(*rank);
    }
    if (rank && a < -static_cast<int64_t>(*rank)) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  for (int64_t i = 0; i < k; ++i) {
    if (axes[static_cast<size_t>(i)] != i - k) return std::nullopt;
  }
  return -k;
}

std::optional<NormTail> MatchNormTail(ir::Value& var, const ir::Value& num, const ir::Graph& graph,
                                      PassContext& ctx) {
  NormTail tail;
  ir::Node* add = ConsumerOp(var, "Add", graph);
  if (add == nullptr || add->num_outputs() != 1) return std::nullopt;
  const ir::Value* eps_value = OtherInput(*add, &var);
  std::optional<double> eps = SmallScalar(eps_value, ctx);
  if (!eps || !(*eps >= 0) || *eps > 1) return std::nullopt;
  tail.epsilon = *eps;
  tail.dtype = ElemType(*eps_value, ctx).value_or(0);
  ir::Node* sqrt = ConsumerOp(*add->output(0), "Sqrt", graph);
  if (sqrt == nullptr || sqrt->num_outputs() != 1) return std::nullopt;
  tail.nodes = {add, sqrt};
  ir::Value* s = sqrt->output(0);
  ir::Node* last = ConsumerOp(*s, "Div", graph);
  if (last != nullptr) {
    if (last->num_inputs() != 2 || last->input(0) != &num || last->input(1) != s) return std::nullopt;
  } else {
    ir::Node* recip = ConsumerOp(*s, "Reciprocal", graph);
    if (recip == nullptr || recip->num_outputs() != 1) return std::nullopt;
    last = ConsumerOp(*recip->output(0), "Mul", graph);
    if (last == nullptr || OtherInput(*last, recip->output(0)) != &num) return std::nullopt;
    tail.nodes.push_back(recip);
  }
  if (last->num_outputs() != 1) return std::nullopt;
  tail.nodes.push_back(last);
  tail.out = last->output(0);
  return tail;
}

ir::Value* SquareBase(const ir::Value& sq, const ir::Graph& graph, PassContext& ctx, ir::Node** node) {
  ir::Node* p = ProducerOp(&sq, "Pow", graph);
  if (p != nullptr) {
    std::optional<double> e = p->num_inputs() == 2 ? SmallScalar(p->input(1), ctx) : std::nullopt;
    if (!e || *e != 2.0) return nullptr;
  } else {
    p = ProducerOp(&sq, "Mul", graph);
    if (p == nullptr || p->num_inputs() != 2 || p->input(0) != p->input(1)) return nullptr;
  }
  if (p->num_outputs() != 1 || p->input(0) == nullptr) return nullptr;
  *node = p;
  return p->input(0);
}

namespace {

// The most elements of a ones scale the normalization fusions create: the
// normalized size of real models is at most a few hundred thousand; declared
// dims of a hostile file must not size an allocation.
constexpr int64_t kMaxOnes = int64_t{1} << 24;

// The last -axis dims of `x`, when its rank is known and at least -axis.
std::optional<std::vector<int64_t>> TrailingDims(const ir::Value& x, int64_t axis, const PassContext& ctx) {
  std::optional<std::vector<int64_t>> shape = KnownShape(x, ctx);
  if (!shape || axis >= 0 || static_cast<int64_t>(shape->size()) < -axis) return std::nullopt;
  return std::vector<int64_t>(shape->end() + axis, shape->end());
}

}  // namespace

bool IsNormParam(const ir::Value* param, const ir::Value& x, int64_t axis, int32_t dtype, PassContext& ctx) {
  std::optional<runner::Tensor> t = FloatConstant(param, ctx);
  if (!t || t->dtype() != dtype) return false;
  if (t->rank() > -axis) return false;
  std::optional<std::vector<int64_t>> dims = TrailingDims(x, axis, ctx);
  for (int i = 0; i < t->rank(); ++i) {
    int64_t d = t->dim(i);
    if (d == 1) continue;
    if (!dims) continue;  // unknown dims: the pattern's Mul/Add broadcast the same way
    int64_t xd = (*dims)[dims->size() - static_cast<size_t>(t->rank() - i)];
    if (xd >= 0 && xd != d) return false;
  }
  return true;
}

NormAffine MatchAffine(ir::Value& n, const ir::Value& x, int64_t axis, int32_t dtype, bool with_bias,
                       const ir::Graph& graph, PassContext& ctx) {
  NormAffine a;
  a.out = &n;
  ir::Node* mul = ConsumerOp(n, "Mul", graph);
  if (mul == nullptr || mul->num_outputs() != 1) return a;
  ir::Value* gamma = OtherInput(*mul, &n);
  if (gamma == &n || !IsNormParam(gamma, x, axis, dtype, ctx)) return a;
  a.scale = gamma;
  a.out = mul->output(0);
  a.nodes.push_back(mul);
  ir::Node* add = with_bias ? ConsumerOp(*a.out, "Add", graph) : nullptr;
  if (add == nullptr || add->num_outputs() != 1) return a;
  ir::Value* beta = OtherInput(*add, a.out);
  if (beta == a.out || !IsNormParam(beta, x, axis, dtype, ctx)) return a;
  a.bias = beta;
  a.out = add->output(0);
  a.nodes.push_back(add);
  return a;
}

bool CanMakeOnes(const ir::Value& x, int64_t axis, const PassContext& ctx) {
  std::optional<std::vector<int64_t>> dims = TrailingDims(x, axis, ctx);
  if (!dims) return false;
  int64_t count = 1;
  for (int64_t d : *dims) {
    if (d < 0 || (d > 0 && count > kMaxOnes / d)) return false;
    count *= d;
  }
  return true;
}

absl::StatusOr<ir::Value*> OnesForNorm(ir::Graph& graph, const ir::Value& x, int64_t axis, int32_t dtype,
                                       PassContext& ctx) {
  std::optional<std::vector<int64_t>> dims = TrailingDims(x, axis, ctx);
  if (!dims || !CanMakeOnes(x, axis, ctx)) {
    return absl::FailedPreconditionError("the normalized dims of '" + x.name() + "' are unknown");
  }
  int64_t count = 1;
  for (int64_t d : *dims) count *= d;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor ones,
                           FromDoubles(dtype, *dims, std::vector<double>(static_cast<size_t>(count), 1.0)));
  return AddConstant(graph, x.name() + "_scale", ones);
}

}  // namespace onnxkit::passes
