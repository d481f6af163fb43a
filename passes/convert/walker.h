// Converts every node of one domain (ai.onnx or ai.onnx.ml) in one graph tree (a graph and the bodies of
// its nodes) from one opset to another, step by step (see adapter.h).
#ifndef ONNXKIT_PASSES_CONVERT_WALKER_H_
#define ONNXKIT_PASSES_CONVERT_WALKER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/infer/types.h"
#include "lib/ir/ir.h"
#include "passes/convert/convert.h"
#include "passes/pass.h"

namespace onnxkit::passes::convert {

// What adapters see of the model while converting.
class ConvertContext : public PassContext {
 public:
  ConvertContext(int64_t opset, const std::map<std::string, infer::ValueState>* states,
                 io::ExternalDataResolver* resolver, int64_t ml_opset = 0)
      : opset_(opset), ml_opset_(ml_opset), states_(states), resolver_(resolver) {}
  int64_t Opset(std::string_view domain) const override {
    if (domain.empty() || domain == "ai.onnx") return opset_;
    return domain == "ai.onnx.ml" ? ml_opset_ : 0;
  }
  const infer::ValueState* State(const ir::Value& value) const override {
    if (states_ == nullptr) return nullptr;
    auto it = states_->find(value.name());
    return it == states_->end() ? nullptr : &it->second;
  }
  io::ExternalDataResolver* resolver() override { return resolver_; }
  const PassOptions& options() const override { return options_; }
  bool Allow(const ir::Node&, std::string_view) override { return true; }

 private:
  int64_t opset_;
  int64_t ml_opset_;
  const std::map<std::string, infer::ValueState>* states_;
  io::ExternalDataResolver* resolver_;
  PassOptions options_;
};

struct WalkStats {
  std::vector<Blocker>* blockers;
  std::map<std::string, int64_t>* steps;
  std::set<std::string>* foreign_ops;  // "domain::Op" kept as they are
  std::set<std::string> local_functions;  // "domain::name" of model-local functions
  // Domains another walk converts: their nodes are not reported as kept.
  std::set<std::string> converted_domains;
  int64_t nodes = 0;
};

// Converts the nodes of `domain` ("" for ai.onnx, or "ai.onnx.ml") in
// `graph` and its subgraphs from opset `from` to `to` of that domain; never
// fails on a node (it becomes a Blocker) unless the IR itself breaks.
absl::Status ConvertGraph(ir::Graph& graph, const std::string& path, std::string_view domain, int64_t from,
                          int64_t to, ConvertContext& ctx, WalkStats& stats);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_WALKER_H_
