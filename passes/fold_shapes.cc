// fold-shapes: Shape, Size and the integer arithmetic on them become
// constants where inference knows every element (dims known from the
// declared input shapes and the ops in between).
//
// Before: %s = Shape(%x); %n = Gather(%s, %zero); %t = Concat(%n, %minus1); %y = Reshape(%x, %t)
//         (%x: float[8, 3, 4])
// After:  %y = Reshape(%x, %t)                    (%t = [8, -1], an initializer)
//
// A value is replaced when it is an int64 or int32 tensor whose contents
// (infer::ValueState::data) and shape are completely known; Shape and Size
// also when inference has no contents but the input's shape is known. The
// nodes left without readers on the way (Shape, Gather ...) are removed.
// Constants are initializers named like the values they replace, or
// Constant nodes where initializers cannot hold them (IR < 4 models,
// function bodies).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/infer/context.h"
#include "lib/infer/types.h"
#include "passes/pass_list.h"
#include "passes/util.h"
#include "runner/convert.h"

namespace onnxkit::passes {
namespace {

bool Needed(const ir::Value* v) {
  return v != nullptr && !v->name().empty() && (v->has_uses() || v->IsGraphOutput());
}

bool UseInitializers(ir::Graph& graph) {
  const ir::Model* model = graph.Root()->model();
  return model != nullptr && model->ir_version() >= 4;
}

// A tensor of `dtype` (int64 or int32) and `shape` holding `values`;
// nullopt when a value does not fit or the counts differ.
std::optional<runner::Tensor> IntTensor(int32_t dtype, std::vector<int64_t> shape,
                                        const std::vector<int64_t>& values) {
  std::optional<int64_t> count = CheckedElementCount(shape);
  if (!count || *count != static_cast<int64_t>(values.size())) return std::nullopt;
  absl::StatusOr<runner::Tensor> t = runner::Tensor::Allocate(dtype, std::move(shape));
  if (!t.ok()) return std::nullopt;
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == pb::kInt64) {
      t->mutable_data<int64_t>()[i] = values[i];
    } else if (values[i] >= std::numeric_limits<int32_t>::min() &&
               values[i] <= std::numeric_limits<int32_t>::max()) {
      t->mutable_data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    } else {
      return std::nullopt;
    }
  }
  return *std::move(t);
}

// The contents of `value` when inference knows all of them and its shape.
std::optional<runner::Tensor> FromState(const ir::Value& value, const PassContext& ctx) {
  const infer::ValueState* s = ctx.State(value);
  if (s == nullptr || !s->type.is_tensor() || !s->data || !s->type.shape) return std::nullopt;
  const int32_t dtype = s->type.elem_type;
  if (dtype != pb::kInt64 && dtype != pb::kInt32) return std::nullopt;
  std::optional<std::vector<int64_t>> shape = infer::KnownValues(*s->type.shape);
  std::optional<std::vector<int64_t>> data = infer::KnownValues(*s->data);
  if (!shape || !data) return std::nullopt;
  return IntTensor(dtype, std::move(*shape), *data);
}

// Shape (with start/end from opset 15) or Size of an input of known shape.
std::optional<runner::Tensor> FromInputShape(const ir::Node& node, const PassContext& ctx) {
  const bool is_shape = node.op_type() == "Shape";
  if ((!is_shape && node.op_type() != "Size") || node.num_inputs() != 1 || node.input(0) == nullptr) {
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> dims = KnownShape(*node.input(0), ctx);
  if (!dims) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(dims->size());
  int64_t start = 0, end = rank;
  if (is_shape && ctx.Opset(node.domain()) >= 15) {
    start = node.GetInt("start").value_or(0);
    end = node.GetInt("end").value_or(rank);
  }
  auto clamp = [rank](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  std::vector<int64_t> picked(dims->begin() + start, dims->begin() + end);
  if (std::any_of(picked.begin(), picked.end(), [](int64_t d) { return d < 0; })) return std::nullopt;
  if (is_shape) return IntTensor(pb::kInt64, {static_cast<int64_t>(picked.size())}, picked);
  std::optional<int64_t> size = CheckedElementCount(picked);
  if (!size) return std::nullopt;
  return IntTensor(pb::kInt64, {}, {*size});
}

// Whether values depend on an initializer that is also a graph input (IR < 4
// style): its contents and shape may be fed, though inference reads them
// from the file. Memoized over one run; iterative (graphs can be deep).
class Overridable {
 public:
  bool Depends(const ir::Value* root) {
    std::vector<std::pair<const ir::Value*, bool>> stack{{root, false}};
    while (!stack.empty()) {
      auto [v, expanded] = stack.back();
      stack.pop_back();
      auto [it, fresh] = state_.try_emplace(v, kVisiting);
      if (!fresh && !expanded) continue;  // known, or on a cycle
      const ir::Node* p = v->producer();
      if (v->kind() == ir::ValueKind::kInitializer || p == nullptr || !p->Subgraphs().empty()) {
        // An overridable initializer; a graph input (declared types are
        // contracts); a node with bodies (not followed: assume it does).
        bool yes = v->kind() == ir::ValueKind::kInitializer ? v->is_graph_input() : p != nullptr;
        it->second = yes ? kYes : kNo;
        continue;
      }
      if (!expanded) {
        stack.emplace_back(v, true);
        for (const ir::Value* in : p->inputs()) {
          if (in != nullptr && !state_.contains(in)) stack.emplace_back(in, false);
        }
        continue;
      }
      bool depends = false;
      for (const ir::Value* in : p->inputs()) depends = depends || (in != nullptr && state_[in] == kYes);
      it->second = depends ? kYes : kNo;
    }
    return state_[root] == kYes;
  }

 private:
  enum State { kVisiting, kNo, kYes };
  absl::flat_hash_map<const ir::Value*, State> state_;
};

// The constants replacing the needed outputs of `node` (undefined where not
// needed), or nullopt when one of them is not known.
std::optional<std::vector<runner::Tensor>> Match(const ir::Node& node, const PassContext& ctx,
                                                 Overridable& overridable) {
  const std::string& d = node.domain();
  if ((!d.empty() && d != "ai.onnx") || node.num_inputs() == 0 || node.op_type() == "Constant")
    return std::nullopt;
  if (!node.Subgraphs().empty() || absl::StartsWith(node.op_type(), "Random")) return std::nullopt;
  for (const ir::Value* in : node.inputs()) {
    if (in != nullptr && overridable.Depends(in)) return std::nullopt;
  }
  std::vector<runner::Tensor> out(static_cast<size_t>(node.num_outputs()));
  bool any = false;
  for (int i = 0; i < node.num_outputs(); ++i) {
    if (!Needed(node.output(i))) continue;
    std::optional<runner::Tensor> t = FromState(*node.output(i), ctx);
    if (!t && node.num_outputs() == 1) t = FromInputShape(node, ctx);
    if (!t) return std::nullopt;
    out[static_cast<size_t>(i)] = *std::move(t);
    any = true;
  }
  if (!any) return std::nullopt;
  return out;
}

absl::StatusOr<ir::Value*> MakeConstant(ir::Graph& graph, ir::Node* anchor, const std::string& hint,
                                        const runner::Tensor& t, bool initializers) {
  if (initializers) return AddConstant(graph, hint, t);
  return AddConstantNode(graph, anchor, hint, t);
}

// What a run made and removed: pointers it must not follow again.
struct Ledger {
  absl::flat_hash_set<const ir::Value*> made;     // constants made by this run
  absl::flat_hash_set<const ir::Value*> deleted;  // values removed with their node
  absl::flat_hash_set<const ir::Node*> removed;   // nodes removed
};

// Removes the nodes of `graph` that fed `start` and no longer have readers,
// and the constants this run made that nothing reads any more.
absl::Status RemoveDeadInputs(ir::Graph& graph, std::vector<ir::Value*> start, Ledger& ledger) {
  std::vector<ir::Value*> work = std::move(start);
  while (!work.empty()) {
    ir::Value* v = work.back();
    work.pop_back();
    if (v == nullptr || ledger.deleted.contains(v) || v->graph() != &graph || Needed(v)) continue;
    if (ledger.made.erase(v) > 0 && v->kind() == ir::ValueKind::kInitializer) {
      ledger.deleted.insert(v);
      ONNXKIT_RETURN_IF_ERROR(graph.RemoveInitializer(v));
      continue;
    }
    ir::Node* p = v->producer();
    if (p == nullptr) continue;
    std::vector<ir::Value*> inputs = p->inputs();
    std::vector<ir::Value*> outputs = p->outputs();
    ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(graph, p));
    if (!removed) continue;
    ledger.removed.insert(p);
    ledger.deleted.insert(outputs.begin(), outputs.end());
    work.insert(work.end(), inputs.begin(), inputs.end());
  }
  return absl::OkStatus();
}

// Replaces the needed outputs of `node` by constants, removes it and what
// fed only it; each constant takes the name of the value it replaces.
absl::Status Rewrite(ir::Graph& graph, ir::Node* node, const std::vector<runner::Tensor>& values,
                     bool initializers, Ledger& ledger) {
  std::vector<ir::Value*> inputs = node->inputs();
  std::vector<ir::Value*> outputs = node->outputs();
  std::vector<std::pair<std::string, ir::Value*>> renames;
  for (int i = 0; i < node->num_outputs(); ++i) {
    ir::Value* out = node->output(i);
    if (!Needed(out)) continue;
    ONNXKIT_ASSIGN_OR_RETURN(
        ir::Value * c, MakeConstant(graph, node, out->name(), values[static_cast<size_t>(i)], initializers));
    ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(out, c));
    renames.emplace_back(out->name(), c);
    ledger.made.insert(c);
  }
  ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(graph, node));
  if (!removed) return absl::InternalError(absl::StrCat("node ", ir::NodeLabel(*node), " still in use"));
  ledger.removed.insert(node);
  ledger.deleted.insert(outputs.begin(), outputs.end());
  for (auto& [name, c] : renames) ONNXKIT_RETURN_IF_ERROR(graph.RenameValue(c, name));
  return RemoveDeadInputs(graph, std::move(inputs), ledger);
}

class FoldShapes : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    absl::StatusOr<std::vector<ir::Node*>> order = ir::TopologicalOrder(graph);
    if (!order.ok()) return false;  // a cycle: the checker reports it
    const bool initializers = UseInitializers(graph);
    if (!initializers && ctx.Opset("") < 1) return false;  // no Constant to hold the values
    Ledger ledger;
    Overridable overridable;
    bool changed = false;
    for (ir::Node* node : *order) {
      if (ledger.removed.contains(node)) continue;  // a dead input of an earlier rewrite
      std::optional<std::vector<runner::Tensor>> values = Match(*node, ctx, overridable);
      if (!values) continue;
      if (!ctx.Allow(*node, absl::StrCat("fold-shapes ", node->op_type()))) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, node, *values, initializers, ledger));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFoldShapes() { return std::make_unique<FoldShapes>(); }

}  // namespace onnxkit::passes
