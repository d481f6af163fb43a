// merge-reshape: a chain of Reshape / Squeeze / Unsqueeze / Flatten whose
// last output shape is fully known becomes one Reshape of the chain's input
// to a constant shape.
// Before: %a = Unsqueeze(%x, [0]); %b = Flatten[axis=1](%a); %y = Reshape(%b, %s)   (%y: [6, 4])
// After:  %y = Reshape(%x, [6, 4])
//
// Decisions:
//   - Every op of the chain only relabels dims (the elements keep their
//     order), so the chain is a Reshape of its input to the last shape.
//   - The last shape must be fully known (inferred or declared), so no 0 or
//     -1 is written; a 0 dim (an empty tensor) is written with allowzero=1
//     where the opset has it (14+), else the chain stays.
//   - Every intermediate value must feed only the next op of the chain (and
//     be no graph output); chains of one op are left alone.
// Anchored at the last op; its earlier ops were visited before, so a chain
// is found whole.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/tensor/tensor_data.h"
#include "passes/eliminate_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool HasInput(const ir::Node& node, int i) { return node.num_inputs() > i && node.input(i) != nullptr; }

// A well-formed op of the chain (a malformed one is left for check to
// report, not silently dropped).
bool IsReshapeLike(const ir::Node& node, int64_t opset) {
  if (!HasInput(node, 0) || node.num_outputs() != 1) return false;
  if (IsOp(node, "Reshape")) return opset < 5 ? node.GetInts("shape").has_value() : HasInput(node, 1);
  if (IsOp(node, "Unsqueeze")) return opset < 13 ? node.GetInts("axes").has_value() : HasInput(node, 1);
  return IsOp(node, "Squeeze") || IsOp(node, "Flatten");
}

// False when the chain's input has a fully known shape whose element count
// differs from the result's (a malformed chain).
bool SameElementCount(const ir::Value& x, const std::vector<int64_t>& dims, const PassContext& ctx) {
  std::optional<std::vector<int64_t>> x_dims = KnownShape(x, ctx);
  if (!x_dims) return true;
  for (int64_t d : *x_dims) {
    if (d < 0) return true;
  }
  std::optional<int64_t> a = CheckedElementCount(*x_dims), b = CheckedElementCount(dims);
  return a && b && *a == *b;
}

struct Match {
  std::vector<ir::Node*> chain;  // last first
  std::vector<int64_t> dims;     // of the last output
  bool allowzero = false;
};

std::optional<Match> MatchChain(ir::Node& last, const PassContext& ctx) {
  const int64_t opset = ctx.Opset("");
  if (!IsReshapeLike(last, opset) || last.output(0) == nullptr) return std::nullopt;
  std::optional<std::vector<int64_t>> dims = KnownShape(*last.output(0), ctx);
  if (!dims) return std::nullopt;
  Match m;
  for (int64_t d : *dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) m.allowzero = true;
  }
  if (m.allowzero && ctx.Opset("") < 14) return std::nullopt;
  m.dims = *dims;
  m.chain.push_back(&last);
  ir::Node* cur = &last;
  while (true) {
    ir::Node* prev = cur->input(0)->producer();
    if (prev == nullptr || prev->graph() != last.graph() || !IsReshapeLike(*prev, opset) ||
        SoleConsumer(*cur->input(0)) != cur) {
      break;
    }
    m.chain.push_back(prev);
    cur = prev;
  }
  if (m.chain.size() < 2 || !SameElementCount(*cur->input(0), m.dims, ctx)) return std::nullopt;
  // A fresh output of a new node can always take the last output's place
  // (the last op has one output): no CanReplace check needed.
  return m;
}

// The int64 tensor `dims`: an initializer, or a Constant node before
// `before` in a function body (functions have no initializers).
absl::StatusOr<ir::Value*> AddShape(ir::Graph& graph, const std::vector<int64_t>& dims, ir::Node* before) {
  std::string bytes;  // raw layout: little-endian
  for (int64_t d : dims) {
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((static_cast<uint64_t>(d) >> (8 * b)) & 0xff));
  }
  std::string name = graph.FreshName("merged_shape");
  pb::TensorProto t = tensor::FromRawBytes(name, pb::kInt64, {static_cast<int64_t>(dims.size())}, std::move(bytes));
  if (graph.Root()->model() != nullptr) return graph.AddInitializer(std::move(t));
  pb::AttributeProto value;
  value.name = "value";
  value.type = pb::kAttrTensor;
  value.t = std::move(t);
  ir::NodeSpec spec{.op_type = "Constant", .domain = "", .name = "", .inputs = {}, .outputs = {name},
                    .attributes = {std::move(value)}};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * constant, graph.AddNode(std::move(spec), ir::Position::Before(before)));
  return constant->output(0);
}

absl::Status Rewrite(ir::Graph& graph, const Match& m) {
  ir::Node* last = m.chain.front();
  ir::Value* x = m.chain.back()->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape_value, AddShape(graph, m.dims, last));
  ir::NodeSpec spec{.op_type = "Reshape",
                    .domain = "",
                    .name = graph.FreshName("merged_reshape"),
                    .inputs = {x, shape_value},
                    .outputs = {graph.FreshName(last->output(0)->name())},
                    .attributes = {}};
  if (m.allowzero) spec.attributes.push_back(IntAttr("allowzero", 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * reshape, graph.AddNode(std::move(spec), ir::Position::Before(last)));
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, last->output(0), reshape->output(0)));  // removes `last`
  for (size_t i = 1; i < m.chain.size(); ++i) {
    ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, m.chain[i]).status());
  }
  return absl::OkStatus();
}

class MergeReshape : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    // Each rewrite removes the node it is at and earlier ones.
    for (ir::Node* node : SnapshotNodes(graph)) {
      std::optional<Match> m = MatchChain(*node, ctx);
      if (!m) continue;
      if (!ctx.Allow(*node, "Reshape chain")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateMergeReshape() { return std::make_unique<MergeReshape>(); }

}  // namespace onnxkit::passes
