// fuse-layer-norm: the decomposed layer normalization that exporters write
// becomes one LayerNormalization (opset 17+).
// Before: %m = ReduceMean(%x, axes=last k); %d = Sub(%x, %m); %p = Pow(%d, 2) (or Mul(%d, %d))
//         %v = ReduceMean(%p, same axes); %e = Add(%v, eps); %s = Sqrt(%e); %n = Div(%d, %s)
//         [%g = Mul(%n, gamma) [; %y = Add(%g, beta)]]
// After:  %y = LayerNormalization[axis=-k, epsilon=eps](%x, gamma, beta)
// gamma and beta are constants; without a gamma, ones of the normalized dims
// (which must be known) take its place. float and float16 only (the op
// computes in float: double inputs would lose precision). Every
// intermediate must be used by the pattern only.
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/status_macros.h"
#include "passes/fuse_norm_util.h"
#include "passes/fuse_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

struct Match {
  ir::Value* x = nullptr;
  int64_t axis = -1;
  double epsilon = 0;
  int32_t dtype = 0;
  NormAffine affine;
  std::vector<ir::Node*> nodes;  // every node of the pattern
};

// The Pow / Mul squaring `d` among its users, and its output.
ir::Node* FindSquare(const ir::Value& d, const ir::Graph& graph, PassContext& ctx) {
  for (const ir::Use& u : d.uses()) {
    if (u.node->num_outputs() != 1 || u.node->graph() != &graph) continue;
    ir::Node* sq = nullptr;
    if (SquareBase(*u.node->output(0), graph, ctx, &sq) == &d) return sq;
  }
  return nullptr;
}

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* mean, PassContext& ctx) {
  if (mean->num_inputs() < 1 || mean->input(0) == nullptr || mean->num_outputs() != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = KeptReduceAxes(*mean, ctx);
  if (!axes) return std::nullopt;
  Match m;
  m.x = mean->input(0);
  ir::Node* sub = ConsumerOp(*mean->output(0), "Sub", graph);
  if (sub == nullptr || sub->num_inputs() != 2 || sub->input(0) != m.x || sub->input(1) != mean->output(0) ||
      sub->num_outputs() != 1) {
    return std::nullopt;
  }
  ir::Value* d = sub->output(0);
  ir::Node* sq = FindSquare(*d, graph, ctx);
  if (sq == nullptr) return std::nullopt;
  ir::Node* var = ConsumerOp(*sq->output(0), "ReduceMean", graph);
  if (var == nullptr || var->input(0) != sq->output(0) || var->num_outputs() != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> var_axes = KeptReduceAxes(*var, ctx);
  std::optional<std::vector<int64_t>> shape = KnownShape(*m.x, ctx);
  std::optional<size_t> rank = shape ? std::optional<size_t>(shape->size()) : std::nullopt;
  std::optional<int64_t> axis = TrailingAxis(*axes, rank);
  if (!var_axes || !axis || TrailingAxis(*var_axes, rank) != axis) return std::nullopt;
  m.axis = *axis;
  std::optional<NormTail> tail = MatchNormTail(*var->output(0), *d, graph, ctx);
  if (!tail || !OnlyUsedBy(*d, {sq, tail->nodes.back()})) return std::nullopt;
  m.dtype = tail->dtype;
  if (m.dtype != pb::kFloat && m.dtype != pb::kFloat16) return std::nullopt;
  std::optional<int32_t> x_type = ElemType(*m.x, ctx);
  if (x_type && *x_type != m.dtype) return std::nullopt;
  m.epsilon = tail->epsilon;
  m.affine = MatchAffine(*tail->out, *m.x, m.axis, m.dtype, /*with_bias=*/true, graph, ctx);
  if (m.affine.scale == nullptr && !CanMakeOnes(*m.x, m.axis, ctx)) return std::nullopt;
  m.nodes = {mean, sub, sq, var};
  m.nodes.insert(m.nodes.end(), tail->nodes.begin(), tail->nodes.end());
  m.nodes.insert(m.nodes.end(), m.affine.nodes.begin(), m.affine.nodes.end());
  return m;
}

absl::Status Rewrite(ir::Graph& graph, const Match& m, PassContext& ctx) {
  ir::Value* scale = m.affine.scale;
  if (scale == nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(scale, OnesForNorm(graph, *m.x, m.axis, m.dtype, ctx));
  }
  ir::NodeSpec spec;
  spec.op_type = "LayerNormalization";
  spec.name = m.nodes.back()->name();
  spec.inputs = {m.x, scale};
  if (m.affine.bias != nullptr) spec.inputs.push_back(m.affine.bias);
  spec.attributes = {IntAttr("axis", m.axis), FloatAttr("epsilon", static_cast<float>(m.epsilon))};
  return ReplaceWithNode(graph, std::move(spec), m.affine.out, m.nodes).status();
}

class FuseLayerNorm : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    if (ctx.Opset("") < 17) return false;
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "ReduceMean")) continue;
      std::optional<Match> m = MatchAt(graph, node, ctx);
      if (!m || !ctx.Allow(*node, "LayerNormalization pattern")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m, ctx));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseLayerNorm() { return std::make_unique<FuseLayerNorm>(); }

}  // namespace onnxkit::passes
