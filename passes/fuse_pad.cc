// fuse-pad: a constant zero Pad on the spatial axes only folds into the
// pads of the Conv, or the AveragePool counting its pads, that follows. An
// AveragePool without pads of its own that does not count pads takes them
// and counts them (the padded zeros were elements it averaged).
// Before: %p = Pad[mode=constant](%x, pads=[0,0,1,1, 0,0,1,1]); %y = Conv[pads=[0,0,0,0]](%p, %w)
// After:  %y = Conv[pads=[1,1,1,1]](%x, %w)
// MaxPool is left alone (it pads with -inf, not zero), and so is a consumer
// with auto_pad other than NOTSET, or an AveragePool with ceil_mode.
#include <algorithm>
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

struct Match {
  ir::Node* pad = nullptr;
  ir::Node* consumer = nullptr;
  std::vector<int64_t> pads;  // the consumer's new pads attribute
  bool count_pads = false;    // AveragePool: set count_include_pad
};

// The integer elements of a constant int32/int64 tensor of rank <= 1.
std::optional<std::vector<int64_t>> ConstantInts(const ir::Value* value, PassContext& ctx) {
  if (value == nullptr || !IsConstantValue(*value)) return std::nullopt;
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*value, ctx);
  if (!t.ok() || t->rank() > 1) return std::nullopt;
  if (t->dtype() == pb::kInt64)
    return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + t->size());
  if (t->dtype() == pb::kInt32)
    return std::vector<int64_t>(t->data<int32_t>(), t->data<int32_t>() + t->size());
  return std::nullopt;
}

// The pads of `pad` for every axis of its rank-`rank` input ([begin..., end...]),
// when it pads with constant zeros; nullopt otherwise.
std::optional<std::vector<int64_t>> ZeroPads(const ir::Node& pad, int64_t rank, PassContext& ctx) {
  const int64_t opset = ctx.Opset("");
  if (opset < 2 || pad.GetString("mode").value_or("constant") != "constant") return std::nullopt;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> axes;
  if (opset < 11) {
    if (pad.GetFloat("value").value_or(0.f) != 0.f) return std::nullopt;
    pads = pad.GetInts("pads");
  } else {
    if (pad.num_inputs() < 2 || pad.num_inputs() > (opset >= 18 ? 4 : 3)) return std::nullopt;
    pads = ConstantInts(pad.input(1), ctx);
    if (pad.num_inputs() >= 3 && pad.input(2) != nullptr) {
      std::optional<double> value = SmallScalar(pad.input(2), ctx);
      if (!value || *value != 0) return std::nullopt;
    }
    if (pad.num_inputs() == 4 && pad.input(3) != nullptr) {
      axes = ConstantInts(pad.input(3), ctx);
      if (!axes) return std::nullopt;
    }
  }
  if (!axes) {
    axes.emplace();
    for (int64_t a = 0; a < rank; ++a) axes->push_back(a);
  }
  const size_t k = axes->size();
  if (!pads || pads->size() != 2 * k) return std::nullopt;
  std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = (*axes)[i] < 0 ? (*axes)[i] + rank : (*axes)[i];
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) return std::nullopt;
    seen[static_cast<size_t>(a)] = true;
    full[static_cast<size_t>(a)] = (*pads)[i];
    full[static_cast<size_t>(a + rank)] = (*pads)[i + k];
  }
  return full;
}

// The rank of the consumer's data input, from its weights or kernel shape.
std::optional<int64_t> ConsumerRank(const ir::Node& consumer, const PassContext& ctx) {
  if (consumer.op_type() == "Conv") {
    if (consumer.num_inputs() < 2 || consumer.input(1) == nullptr) return std::nullopt;
    std::optional<std::vector<int64_t>> w = KnownShape(*consumer.input(1), ctx);
    if (!w || w->size() < 3) return std::nullopt;
    return static_cast<int64_t>(w->size());
  }
  std::optional<std::vector<int64_t>> kernel = consumer.GetInts("kernel_shape");
  if (!kernel || kernel->empty()) return std::nullopt;
  return static_cast<int64_t>(kernel->size()) + 2;
}

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* pad, PassContext& ctx) {
  if (pad->num_outputs() != 1 || pad->num_inputs() < 1 || pad->input(0) == nullptr) return std::nullopt;
  ir::Value* p = pad->output(0);
  ir::Node* consumer = ConsumerOp(*p, "Conv", graph);
  bool count_pads = false;
  if (consumer == nullptr) {
    consumer = ConsumerOp(*p, "AveragePool", graph);
    if (consumer == nullptr || consumer->GetInt("ceil_mode").value_or(0) != 0) return std::nullopt;
    if (consumer->GetInt("count_include_pad").value_or(0) != 1) {
      // Padded zeros are elements the average counts: the pool can take the
      // pads if it has none of its own and then counts pads (opset 7 on).
      std::optional<std::vector<int64_t>> own = consumer->GetInts("pads");
      if (ctx.Opset("") < 7 ||
          (own && std::any_of(own->begin(), own->end(), [](int64_t v) { return v != 0; }))) {
        return std::nullopt;
      }
      count_pads = true;
    }
  }
  if (consumer->input(0) != p || consumer->GetString("auto_pad").value_or("NOTSET") != "NOTSET")
    return std::nullopt;
  std::optional<int64_t> rank = ConsumerRank(*consumer, ctx);
  if (!rank) return std::nullopt;
  std::optional<std::vector<int64_t>> x_shape = KnownShape(*pad->input(0), ctx);
  if (x_shape && static_cast<int64_t>(x_shape->size()) != *rank) return std::nullopt;
  std::optional<std::vector<int64_t>> pads = ZeroPads(*pad, *rank, ctx);
  if (!pads) return std::nullopt;
  const int64_t r = *rank, spatial = r - 2;
  for (int64_t a : {int64_t{0}, int64_t{1}, r, r + 1}) {
    if ((*pads)[static_cast<size_t>(a)] != 0) return std::nullopt;
  }
  std::vector<int64_t> merged =
      consumer->GetInts("pads").value_or(std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0));
  if (static_cast<int64_t>(merged.size()) != 2 * spatial) return std::nullopt;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t begin = (*pads)[static_cast<size_t>(2 + i)], end = (*pads)[static_cast<size_t>(r + 2 + i)];
    if (begin < 0 || end < 0 || merged[static_cast<size_t>(i)] < 0 ||
        merged[static_cast<size_t>(spatial + i)] < 0) {
      return std::nullopt;
    }
    merged[static_cast<size_t>(i)] += begin;
    merged[static_cast<size_t>(spatial + i)] += end;
  }
  return Match{pad, consumer, std::move(merged), count_pads};
}

absl::Status Rewrite(ir::Graph& graph, const Match& m) {
  std::vector<ir::Value*> pad_inputs(m.pad->inputs().begin() + 1, m.pad->inputs().end());
  m.consumer->SetAttribute(IntsAttr("pads", m.pads));
  if (m.count_pads) m.consumer->SetAttribute(IntAttr("count_include_pad", 1));
  ONNXKIT_RETURN_IF_ERROR(graph.SetInput(m.consumer, 0, m.pad->input(0)));
  ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(graph, m.pad));
  if (!removed) return absl::InternalError("the folded Pad is still in use");
  ONNXKIT_RETURN_IF_ERROR(DropAllIfUnused(graph, pad_inputs));
  return absl::OkStatus();
}

class FusePad : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "Pad")) continue;
      std::optional<Match> m = MatchAt(graph, node, ctx);
      if (!m || !ctx.Allow(*node, "Pad + " + m->consumer->op_type())) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFusePad() { return std::make_unique<FusePad>(); }

}  // namespace onnxkit::passes
