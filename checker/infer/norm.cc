// Shape functions of normalizations and losses: BatchNormalization (and its
// training outputs), LayerNormalization (Mean/InvStdDev), the losses with a
// `reduction` attribute.
//
//   BatchNormalization(X [2, 3, 8, 8], scale [3], ...) -> Y [2, 3, 8, 8]
//   BatchNormalization(X [2, 3, 8, 8], scale [4], ...) -> E0601 scale [4], expected [3]
//   LayerNormalization(X [2, 5, 8], axis=-1) -> Y [2, 5, 8], Mean [2, 5, 1]
#include <utility>

#include "absl/strings/str_cat.h"
#include "checker/infer/context.h"
#include "checker/infer/shape_fns.h"

namespace onnxkit::checker::infer {

void ShapeBatchNormalization(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr || x->size() < 2) return;
  const Dim& c = (*x)[1];
  // Before opset 9, `spatial=0` allowed per-position parameters.
  if (ctx.opset() >= 9) {
    static constexpr const char* kNames[] = {"scale", "B", "mean", "var"};
    for (int i = 1; i <= 4; ++i) {
      const Dims* p = ctx.input_shape(i);
      if (p == nullptr) continue;
      if (p->size() != 1 || (c.value && (*p)[0].value && *(*p)[0].value != *c.value)) {
        ctx.Fail(absl::StrCat("input '", kNames[i - 1], "' has shape ", DimsToString(*p), ", expected [",
                              c.value ? std::to_string(*c.value) : std::string("C"), "] (the channels of X)"));
        return;
      }
    }
  }
  if (ctx.opset() < 9 && ctx.attr_int("spatial", 1) == 0) return;
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_shape(i, {c});
}

void ShapeLayerNormalization(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  ctx.set_elem(1, static_cast<int32_t>(ctx.attr_int("stash_type", pb::kFloat)));
  ctx.set_elem(2, static_cast<int32_t>(ctx.attr_int("stash_type", pb::kFloat)));
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr) return;
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", -1), static_cast<int64_t>(x->size()));
  if (!axis) return;
  Dims stats = *x;
  for (size_t i = static_cast<size_t>(*axis); i < stats.size(); ++i) stats[i] = Dim::Of(1);
  ctx.set_shape(1, stats);
  ctx.set_shape(2, std::move(stats));
}

// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: `none` keeps
// [N, d1, ...] (the input without its class dim), else a scalar.
void ShapeLoss(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (ctx.attr_string("reduction", "mean") != "none") {
    ctx.set_shape(0, {});
  } else if (x != nullptr) {
    if (x->size() < 2) {
      ctx.Fail(absl::StrCat("input must have rank at least 2, got rank ", x->size()));
      return;
    }
    Dims out = *x;
    out.erase(out.begin() + 1);
    ctx.set_shape(0, std::move(out));
  }
  ctx.PropagateShape(0, 1);  // SoftmaxCrossEntropyLoss's log_prob
}

}  // namespace onnxkit::checker::infer
