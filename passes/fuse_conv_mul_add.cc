// fuse-conv-mul-add: Mul and Add by constants that vary only along the
// channel axis fold into the preceding Conv's weights and bias.
// Before: %y = Conv(%x, %w, %b); %z = Mul(%y, %c)      (%c: [C,1,1], [1,C,1,1], scalar...)
// After:  %z = Conv(%x, %w * c, %b * c)
// Before: %y = Conv(%x, %w, %b); %z = Add(%y, %d)
// After:  %z = Conv(%x, %w, %b + d)                  (%b created when absent)
// Weights are computed in double and rounded once; a chain Conv -> Mul ->
// Add folds step by step within one run. Below opset 7 the Mul or Add
// broadcasts %c only with broadcast=1 (aligned at `axis`, else at the end).
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
  ir::Node* op = nullptr;  // the Mul or Add after the Conv
  ir::Value* constant = nullptr;
  std::vector<double> per_channel;  // one factor / addend per output channel
};

// The values of `c` per output channel when it broadcasts onto the Conv
// output (rank `rank`, `channels` channels) along the channel axis only,
// without changing the output's shape; nullopt otherwise. `axis`: where
// c's dims start among the output's (legacy broadcast), else aligned at
// the end.
std::optional<std::vector<double>> PerChannel(const ir::Value* c, int64_t rank, int64_t channels,
                                              int32_t dtype, std::optional<int64_t> axis, PassContext& ctx) {
  std::optional<runner::Tensor> t = FloatConstant(c, ctx);
  if (!t || t->dtype() != dtype || t->rank() > rank) return std::nullopt;
  const int64_t start = axis.value_or(rank - t->rank());
  if (start < 0 || start + t->rank() > rank) return std::nullopt;
  const int64_t channel_axis = 1 - start;  // in t's dims; < 0: not covered
  for (int i = 0; i < t->rank(); ++i) {
    if (t->dim(i) == 1) continue;
    if (i != channel_axis || t->dim(i) != channels) return std::nullopt;
  }
  std::vector<double> v = *ToDoubles(*t);
  if (v.size() == 1) v.assign(static_cast<size_t>(channels), v[0]);
  if (v.size() != static_cast<size_t>(channels)) return std::nullopt;
  return v;
}

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* conv, const ConvWeights& cw, PassContext& ctx) {
  ir::Value* y = conv->output(0);
  ir::Node* op = ConsumerOp(*y, "Mul", graph);
  if (op == nullptr) op = ConsumerOp(*y, "Add", graph);
  if (op == nullptr || op->num_outputs() != 1) return std::nullopt;
  ir::Value* c = OtherInput(*op, y);
  if (c == nullptr || c == y) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(cw.w_shape.size());
  std::optional<int64_t> axis;
  if (ctx.Opset("") < 7) {
    // Legacy broadcasting: only B (input 1) onto A, only with broadcast=1.
    if (op->input(1) != c || op->GetInt("broadcast").value_or(0) != 1) return std::nullopt;
    axis = op->GetInt("axis");
    if (axis && *axis < 0) *axis += rank;
  }
  std::optional<std::vector<double>> v = PerChannel(c, rank, cw.channels, cw.dtype, axis, ctx);
  if (!v) return std::nullopt;
  const bool mul = op->op_type() == "Mul";
  const std::vector<double> neutral(v->size(), mul ? 0.0 : 1.0);
  if (!FoldStaysFinite(cw, mul ? *v : neutral, mul ? neutral : *v)) return std::nullopt;
  return Match{op, c, *std::move(v)};
}

absl::Status Rewrite(ir::Graph& graph, ir::Node* conv, ConvWeights& cw, const Match& m) {
  const size_t channels = static_cast<size_t>(cw.channels);
  if (m.op->op_type() == "Mul") {
    const size_t per_channel = cw.w.size() / channels;
    for (size_t c = 0; c < channels; ++c) {
      for (size_t i = c * per_channel; i < (c + 1) * per_channel; ++i) cw.w[i] *= m.per_channel[c];
      cw.b[c] *= m.per_channel[c];
    }
  } else {
    for (size_t c = 0; c < channels; ++c) cw.b[c] += m.per_channel[c];
    cw.has_bias = true;
  }
  ONNXKIT_RETURN_IF_ERROR(WriteConvWeights(graph, *conv, cw));
  ONNXKIT_RETURN_IF_ERROR(ReplaceKeepingName(graph, m.op->output(0), conv->output(0)));
  return DropIfUnused(graph, m.constant);
}

class FuseConvMulAdd : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "Conv") || node->num_outputs() != 1) continue;
      // Conv -> Mul -> Add: fold one op at a time, re-reading the new weights.
      while (true) {
        if (SoleConsumer(*node->output(0)) == nullptr) break;
        std::optional<ConvWeights> cw = ReadConvWeights(*node, ctx);
        if (!cw) break;
        std::optional<Match> m = MatchAt(graph, node, *cw, ctx);
        if (!m || !ctx.Allow(*node, m->op->op_type() == "Mul" ? "Conv + Mul" : "Conv + Add")) break;
        ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, node, *cw, *m));
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseConvMulAdd() { return std::make_unique<FuseConvMulAdd>(); }

}  // namespace onnxkit::passes
