// fuse-conv-bn: an inference BatchNormalization after a Conv with constant
// weights folds into the Conv's weights and bias.
// Before: %y = Conv(%x, %w, %b); %z = BatchNormalization(%y, %s, %o, %m, %v)
// After:  %z = Conv(%x, %w', %b')
//         with f = s / sqrt(v + epsilon) per output channel,
//         w' = w * f, b' = (b - m) * f + o (computed in double, rounded once)
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/status_macros.h"
#include "passes/fuse_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

struct Match {
  ir::Node* conv = nullptr;
  ir::Node* bn = nullptr;
  ConvWeights weights;
  std::vector<double> params[4];  // scale, bias, mean, var
  double epsilon = 1e-5;
};

// True when `bn` computes with its running statistics and has no output but Y.
bool IsInferenceBn(const ir::Node& bn, int64_t opset) {
  if (bn.num_inputs() != 5 || bn.num_outputs() < 1) return false;
  for (int i = 1; i < bn.num_outputs(); ++i) {
    if (bn.output(i) != nullptr && !bn.output(i)->name().empty()) return false;  // training outputs
  }
  if (bn.GetInt("training_mode").value_or(0) != 0) return false;
  if (opset < 7 && bn.GetInt("is_test").value_or(0) != 1) return false;
  if (opset < 9 && bn.GetInt("spatial").value_or(1) != 1) return false;
  return true;
}

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* conv, PassContext& ctx) {
  if (!IsOp(conv, "Conv") || conv->num_outputs() != 1) return std::nullopt;
  ir::Node* bn = ConsumerOp(*conv->output(0), "BatchNormalization", graph);
  if (bn == nullptr || bn->input(0) != conv->output(0) || !IsInferenceBn(*bn, ctx.Opset("")))
    return std::nullopt;
  for (int i = 1; i < 5; ++i) {
    if (bn->input(i) == nullptr || !IsConstantValue(*bn->input(i))) return std::nullopt;
  }
  Match m;
  m.conv = conv;
  m.bn = bn;
  std::optional<ConvWeights> weights = ReadConvWeights(*conv, ctx);
  if (!weights) return std::nullopt;
  m.weights = *std::move(weights);
  for (int i = 0; i < 4; ++i) {
    std::optional<runner::Tensor> t = FloatConstant(bn->input(i + 1), ctx);
    if (!t || t->rank() != 1 || t->dim(0) != m.weights.channels) return std::nullopt;
    m.params[i] = *ToDoubles(*t);
  }
  m.epsilon = bn->GetFloat("epsilon").value_or(1e-5f);
  // b' = (b - mean) f + bias = b f + (bias - mean f), f = scale / sqrt(var + eps).
  const size_t channels = static_cast<size_t>(m.weights.channels);
  std::vector<double> factor(channels), shift(channels);
  for (size_t c = 0; c < channels; ++c) {
    factor[c] = m.params[0][c] / std::sqrt(m.params[3][c] + m.epsilon);
    shift[c] = m.params[1][c] - m.params[2][c] * factor[c];
  }
  if (!FoldStaysFinite(m.weights, factor, shift)) return std::nullopt;
  return m;
}

absl::Status Rewrite(ir::Graph& graph, Match& m) {
  ConvWeights& cw = m.weights;
  const size_t channels = static_cast<size_t>(cw.channels);
  const size_t per_channel = cw.w.size() / channels;
  const std::vector<double>& scale = m.params[0];
  const std::vector<double>& bias = m.params[1];
  const std::vector<double>& mean = m.params[2];
  const std::vector<double>& var = m.params[3];
  for (size_t c = 0; c < channels; ++c) {
    const double f = scale[c] / std::sqrt(var[c] + m.epsilon);
    for (size_t i = c * per_channel; i < (c + 1) * per_channel; ++i) cw.w[i] *= f;
    cw.b[c] = (cw.b[c] - mean[c]) * f + bias[c];
  }
  cw.has_bias = true;
  std::vector<ir::Value*> bn_params(m.bn->inputs().begin() + 1, m.bn->inputs().end());
  ONNXKIT_RETURN_IF_ERROR(WriteConvWeights(graph, *m.conv, cw));
  ONNXKIT_RETURN_IF_ERROR(ReplaceKeepingName(graph, m.bn->output(0), m.conv->output(0)));
  return DropAllIfUnused(graph, bn_params);
}

class FuseConvBn : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "Conv")) continue;
      std::optional<Match> m = MatchAt(graph, node, ctx);
      if (!m) continue;
      if (!ctx.Allow(*node, "Conv + BatchNormalization")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseConvBn() { return std::make_unique<FuseConvBn>(); }

}  // namespace onnxkit::passes
