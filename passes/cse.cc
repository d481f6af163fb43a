// cse: merges nodes that compute the same op on the same inputs with the
// same attributes; the first one stays, the later one's outputs are replaced.
// Before: %a = Relu(%x); %b = Relu(%x); %y = Add(%a, %b)
// After:  %a = Relu(%x); %y = Add(%a, %a)
//
// Decisions:
//   - Nodes are equal when domain, op_type, overload, inputs (the same
//     values, omitted ones at the same places), the number of outputs and
//     the encoded attributes (sorted by name, so order does not matter)
//     are. Two Constant nodes with equal values merge this way.
//   - Never merged: nodes with subgraphs (If/Loop/Scan), random generators
//     (RandomNormal[Like], RandomUniform[Like], Multinomial, Bernoulli), a
//     Dropout that may run in training mode, and nodes of domains other than
//     ai.onnx / ai.onnx.ml (their ops may be stateful or random).
//   - A later node whose used output the first node omits, or whose
//     replacement cannot keep a graph output's name, stays.
// Order lives in the node list; the hash map only indexes candidates.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto_codec.h"
#include "passes/eliminate_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool IsRandom(const ir::Node& node, PassContext& ctx) {
  const std::string& op = node.op_type();
  if (op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
      op == "Multinomial" || op == "Bernoulli") {
    return true;
  }
  if (op == "Dropout") {
    if (ctx.Opset("") < 7) return node.GetInt("is_test").value_or(0) == 0;
    if (ctx.Opset("") < 12 || node.num_inputs() < 3 || node.input(2) == nullptr) return false;
    return !IsConstantFalse(node.input(2), ctx);
  }
  return false;
}

bool Eligible(const ir::Node& node, PassContext& ctx) {
  if (!(IsStandardOp(node) || node.domain() == "ai.onnx.ml") || node.num_outputs() == 0) return false;
  if (!node.Subgraphs().empty() || IsRandom(node, ctx)) return false;
  for (const ir::Attribute& a : node.attributes()) {
    if (a.type() == pb::kAttrGraph || a.type() == pb::kAttrGraphs) return false;
  }
  return true;
}

// The attributes, sorted by name, encoded as a NodeProto holding only them.
std::string EncodedAttributes(const ir::Node& node) {
  pb::NodeProto holder;
  for (const ir::Attribute& a : node.attributes()) holder.attribute.push_back(a.proto);
  std::stable_sort(holder.attribute.begin(), holder.attribute.end(),
                   [](const pb::AttributeProto& a, const pb::AttributeProto& b) { return a.name < b.name; });
  return io::Encode(holder);
}

// Everything but the attributes, plus a hash of those.
std::string Key(const ir::Node& node, const std::string& attributes) {
  std::string key = absl::StrCat(node.domain(), "\n", node.op_type(), "\n", node.overload(), "\n",
                                 node.num_outputs(), "\n", absl::Hash<std::string>{}(attributes), "\n");
  for (const ir::Value* in : node.inputs()) {
    absl::StrAppend(&key, reinterpret_cast<uintptr_t>(in), ",");
  }
  return key;
}

// Every used output of `later` has a counterpart in `first` that can
// replace it.
bool CanMerge(const ir::Node& first, const ir::Node& later) {
  for (int i = 0; i < later.num_outputs(); ++i) {
    const ir::Value* out = later.output(i);
    if (out == nullptr || (!out->has_uses() && !out->IsGraphOutput())) continue;
    const ir::Value* keep = first.output(i);
    if (keep == nullptr || keep->name().empty() || !CanReplace(*out, *keep)) return false;
  }
  return true;
}

bool HasUsedOutput(const ir::Node& node) {
  for (const ir::Value* out : node.outputs()) {
    if (out != nullptr && (out->has_uses() || out->IsGraphOutput())) return true;
  }
  return false;
}

// ReplaceValue removes `later` once its last used output is replaced.
absl::Status Rewrite(ir::Graph& graph, ir::Node* first, ir::Node* later) {
  std::vector<std::pair<ir::Value*, ir::Value*>> replacements;
  for (int i = 0; i < later->num_outputs(); ++i) {
    ir::Value* out = later->output(i);
    if (out != nullptr && (out->has_uses() || out->IsGraphOutput())) replacements.emplace_back(out, first->output(i));
  }
  for (auto [out, keep] : replacements) ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, out, keep));
  return absl::OkStatus();
}

struct Seen {
  ir::Node* node;
  std::string attributes;
};

class Cse : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    absl::flat_hash_map<std::string, std::vector<Seen>> index;
    // Each rewrite removes only the node it is at; earlier nodes stay.
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!Eligible(*node, ctx) || !HasUsedOutput(*node)) continue;  // dead: dce's job
      std::string attributes = EncodedAttributes(*node);
      std::vector<Seen>& bucket = index[Key(*node, attributes)];
      ir::Node* first = nullptr;
      for (const Seen& s : bucket) {
        if (s.attributes == attributes) {
          first = s.node;
          break;
        }
      }
      if (first == nullptr) {
        bucket.push_back(Seen{node, std::move(attributes)});
        continue;
      }
      if (!CanMerge(*first, *node)) continue;
      if (!ctx.Allow(*node, absl::StrCat("same ", node->op_type(), " as ", ir::NodeLabel(*first)))) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, first, node));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateCse() { return std::make_unique<Cse>(); }

}  // namespace onnxkit::passes
