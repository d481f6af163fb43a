// fuse-gelu: the Erf and Tanh forms of GELU that exporters write become one
// Gelu (opset 20+).
// Before: %a = Div(%x, 1.4142135) (or Mul(%x, 0.70710678)); %e = Erf(%a); %p = Add(%e, 1)
//         %y = 0.5 * %x * %p, as Mul(Mul(%x, 0.5), %p), Mul(Mul(%x, %p), 0.5) or Mul(Mul(%p, 0.5), %x)
// After:  %y = Gelu(%x)
// Before: %c = Pow(%x, 3) (or Mul(Mul(%x, %x), %x)); %k = Mul(%c, 0.044715); %s = Add(%x, %k)
//         %u = Mul(%s, 0.7978845608); %t = Tanh(%u); %p = Add(%t, 1); %y = 0.5 * %x * %p (as above)
// After:  %y = Gelu[approximate="tanh"](%x)
// Constants match within a relative 1e-4 (1e-3 for float16), in any operand
// order; every intermediate must be used by the pattern only.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/status_macros.h"
#include "passes/fuse_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubeCoefficient = 0.044715;

struct Match {
  ir::Value* x = nullptr;
  ir::Value* out = nullptr;
  bool tanh = false;
  std::vector<ir::Node*> nodes;
};

// For %y = Mul(a, b) with b a constant near `c` (either order): a; else null.
ir::Value* MulByConstant(const ir::Node* mul, double c, PassContext& ctx) {
  if (!IsOp(mul, "Mul") || mul->num_inputs() != 2) return nullptr;
  if (ScalarNear(mul->input(1), c, ctx)) return mul->input(0);
  if (ScalarNear(mul->input(0), c, ctx)) return mul->input(1);
  return nullptr;
}

// The sole Mul of `graph` consuming `v`, with its output, or null.
ir::Node* NextMul(const ir::Value& v, const ir::Graph& graph) {
  ir::Node* n = ConsumerOp(v, "Mul", graph);
  return n != nullptr && n->num_outputs() == 1 ? n : nullptr;
}

// 0.5 * x * p from `p` on, in the three export orders; adds its nodes to m.
bool MatchHalfProduct(ir::Value& p, const ir::Graph& graph, PassContext& ctx, Match& m) {
  ir::Node* m1 = NextMul(p, graph);
  if (m1 == nullptr) return false;
  ir::Value* other = OtherInput(*m1, &p);
  if (other == m.x || ScalarNear(other, 0.5, ctx)) {  // (x * p) * 0.5, (0.5 * p) * x
    ir::Node* m2 = NextMul(*m1->output(0), graph);
    if (m2 == nullptr) return false;
    ir::Value* last = OtherInput(*m2, m1->output(0));
    if (other == m.x ? !ScalarNear(last, 0.5, ctx) : last != m.x) return false;
    m.nodes.insert(m.nodes.end(), {m1, m2});
    m.out = m2->output(0);
    return true;
  }
  ir::Node* half = ProducerOp(other, "Mul", graph);  // (x * 0.5) * p
  if (half == nullptr || MulByConstant(half, 0.5, ctx) != m.x || !OnlyUsedBy(*other, {m1})) return false;
  m.nodes.insert(m.nodes.end(), {half, m1});
  m.out = m1->output(0);
  return true;
}

// %p = Add(%v, 1) consuming the Erf / Tanh output, then the product.
bool MatchOnePlus(ir::Value& v, const ir::Graph& graph, PassContext& ctx, Match& m) {
  ir::Node* add = ConsumerOp(v, "Add", graph);
  if (add == nullptr || add->num_outputs() != 1) return false;
  const ir::Value* one = OtherInput(*add, &v);
  if (!ScalarNear(one, 1.0, ctx)) return false;
  std::optional<int32_t> type = ElemType(*one, ctx);
  if (!type || !(IsFoldableFloat(*type) || *type == pb::kBfloat16)) return false;
  m.nodes.push_back(add);
  return MatchHalfProduct(*add->output(0), graph, ctx, m);
}

std::optional<Match> MatchErf(ir::Graph& graph, ir::Node* erf, PassContext& ctx) {
  if (erf->num_inputs() != 1 || erf->num_outputs() != 1 || erf->input(0) == nullptr) return std::nullopt;
  ir::Value* a = erf->input(0);
  if (ConsumerOp(*a, "Erf", graph) != erf) return std::nullopt;
  Match m;
  ir::Node* scale = ProducerOp(a, "Div", graph);
  if (scale != nullptr && scale->num_inputs() == 2 && ScalarNear(scale->input(1), kSqrt2, ctx)) {
    m.x = scale->input(0);
  } else {
    scale = ProducerOp(a, "Mul", graph);
    m.x = MulByConstant(scale, 1.0 / kSqrt2, ctx);
  }
  if (m.x == nullptr) return std::nullopt;
  m.nodes = {scale, erf};
  if (!MatchOnePlus(*erf->output(0), graph, ctx, m)) return std::nullopt;
  return m;
}

// x^3 as Pow(x, 3) or Mul(Mul(x, x), x) (either order), used only by `user`.
bool MatchCube(ir::Value& cube, ir::Value& x, const ir::Node* user, const ir::Graph& graph, PassContext& ctx,
               Match& m) {
  if (!OnlyUsedBy(cube, {user})) return false;
  if (ir::Node* pow = ProducerOp(&cube, "Pow", graph)) {
    std::optional<double> e = pow->num_inputs() == 2 ? SmallScalar(pow->input(1), ctx) : std::nullopt;
    if (pow->input(0) != &x || !e || *e != 3.0) return false;
    m.nodes.push_back(pow);
    return true;
  }
  ir::Node* mul = ProducerOp(&cube, "Mul", graph);
  if (mul == nullptr) return false;
  ir::Value* sq = OtherInput(*mul, &x);
  ir::Node* sq_node = ProducerOp(sq, "Mul", graph);
  if (sq_node == nullptr || sq_node->input(0) != &x || sq_node->input(1) != &x || !OnlyUsedBy(*sq, {mul})) {
    return false;
  }
  m.nodes.insert(m.nodes.end(), {sq_node, mul});
  return true;
}

std::optional<Match> MatchTanh(ir::Graph& graph, ir::Node* tanh, PassContext& ctx) {
  if (tanh->num_inputs() != 1 || tanh->num_outputs() != 1 || tanh->input(0) == nullptr) return std::nullopt;
  ir::Value* u = tanh->input(0);
  ir::Node* scale = ProducerOp(u, "Mul", graph);
  ir::Value* s = MulByConstant(scale, kSqrt2OverPi, ctx);
  if (s == nullptr || ConsumerOp(*u, "Tanh", graph) != tanh || ConsumerOp(*s, "Mul", graph) != scale) {
    return std::nullopt;
  }
  ir::Node* sum = ProducerOp(s, "Add", graph);
  if (sum == nullptr || sum->num_inputs() != 2) return std::nullopt;
  Match m;
  m.tanh = true;
  for (int i = 0; i < 2 && m.x == nullptr; ++i) {
    ir::Value* k = sum->input(1 - i);
    ir::Node* k_node = ProducerOp(k, "Mul", graph);
    ir::Value* cube = MulByConstant(k_node, kCubeCoefficient, ctx);
    if (cube == nullptr || !OnlyUsedBy(*k, {sum})) continue;
    Match trial = m;
    if (!MatchCube(*cube, *sum->input(i), k_node, graph, ctx, trial)) continue;
    m = trial;
    m.x = sum->input(i);
    m.nodes.insert(m.nodes.end(), {k_node, sum, scale, tanh});
  }
  if (m.x == nullptr || !MatchOnePlus(*tanh->output(0), graph, ctx, m)) return std::nullopt;
  return m;
}

absl::Status Rewrite(ir::Graph& graph, const Match& m) {
  ir::NodeSpec spec;
  spec.op_type = "Gelu";
  spec.name = m.nodes.back()->name();
  spec.inputs = {m.x};
  if (m.tanh) spec.attributes = {StringAttr("approximate", "tanh")};
  return ReplaceWithNode(graph, std::move(spec), m.out, m.nodes).status();
}

class FuseGelu : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    if (ctx.Opset("") < 20) return false;
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node)) continue;
      std::optional<Match> m;
      if (IsOp(node, "Erf")) m = MatchErf(graph, node, ctx);
      if (IsOp(node, "Tanh")) m = MatchTanh(graph, node, ctx);
      if (!m || !ctx.Allow(*node, m->tanh ? "Gelu (tanh) pattern" : "Gelu (erf) pattern")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseGelu() { return std::make_unique<FuseGelu>(); }

}  // namespace onnxkit::passes
