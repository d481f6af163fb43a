// fuse-rms-norm: the decomposed RMS normalization that exporters write
// becomes one RMSNormalization (opset 23+).
// Before: %p = Pow(%x, 2) (or Mul(%x, %x)); %m = ReduceMean(%p, axes=last k)
//         %e = Add(%m, eps); %s = Sqrt(%e); %n = Div(%x, %s) (or Mul(%x, Reciprocal(%s)))
//         [%y = Mul(%n, gamma)]
// After:  %y = RMSNormalization[axis=-k, epsilon=eps](%x, gamma)
// gamma is a constant; without one, ones of the normalized dims (which must
// be known) take its place. float and float16 only (the op computes in
// float). Every intermediate must be used by the pattern only.
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

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* mean, PassContext& ctx) {
  if (mean->num_inputs() < 1 || mean->input(0) == nullptr || mean->num_outputs() != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = KeptReduceAxes(*mean, ctx);
  if (!axes) return std::nullopt;
  ir::Value* p = mean->input(0);
  ir::Node* sq = nullptr;
  Match m;
  m.x = SquareBase(*p, graph, ctx, &sq);
  if (m.x == nullptr || !OnlyUsedBy(*p, {mean})) return std::nullopt;
  std::optional<std::vector<int64_t>> shape = KnownShape(*m.x, ctx);
  std::optional<int64_t> axis =
      TrailingAxis(*axes, shape ? std::optional<size_t>(shape->size()) : std::nullopt);
  if (!axis) return std::nullopt;
  m.axis = *axis;
  std::optional<NormTail> tail = MatchNormTail(*mean->output(0), *m.x, graph, ctx);
  if (!tail) return std::nullopt;
  m.dtype = tail->dtype;
  if (m.dtype != pb::kFloat && m.dtype != pb::kFloat16) return std::nullopt;
  std::optional<int32_t> x_type = ElemType(*m.x, ctx);
  if (x_type && *x_type != m.dtype) return std::nullopt;
  m.epsilon = tail->epsilon;
  m.affine = MatchAffine(*tail->out, *m.x, m.axis, m.dtype, /*with_bias=*/false, graph, ctx);
  if (m.affine.scale == nullptr && !CanMakeOnes(*m.x, m.axis, ctx)) return std::nullopt;
  m.nodes = {sq, mean};
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
  spec.op_type = "RMSNormalization";
  spec.name = m.nodes.back()->name();
  spec.inputs = {m.x, scale};
  spec.attributes = {IntAttr("axis", m.axis), FloatAttr("epsilon", static_cast<float>(m.epsilon))};
  return ReplaceWithNode(graph, std::move(spec), m.affine.out, m.nodes).status();
}

class FuseRmsNorm : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    if (ctx.Opset("") < 23) return false;
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "ReduceMean")) continue;
      std::optional<Match> m = MatchAt(graph, node, ctx);
      if (!m || !ctx.Allow(*node, "RMSNormalization pattern")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m, ctx));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseRmsNorm() { return std::make_unique<FuseRmsNorm>(); }

}  // namespace onnxkit::passes
