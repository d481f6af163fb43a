// ir::Model: opset queries, function bodies, graph walks.
#include "lib/ir/model.h"

#include "absl/strings/str_cat.h"

namespace onnxkit::ir {
namespace {

bool SameDomain(std::string_view a, std::string_view b) {
  auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  return canonical(a) == canonical(b);
}

}  // namespace

Model::Model() : graph_(std::make_unique<Graph>()) { graph_->model_ = this; }
Model::~Model() = default;

void Model::set_graph(std::unique_ptr<Graph> graph) {
  graph_ = std::move(graph);
  graph_->model_ = this;
  graph_->names_.reset();  // reseeded (with this model's functions) on first use
}

std::optional<int64_t> Model::OpsetVersion(std::string_view domain) const {
  for (const pb::OperatorSetIdProto& op : opset_import_) {
    if (SameDomain(op.domain, domain)) return op.version;
  }
  return std::nullopt;
}

void Model::SetOpsetVersion(std::string_view domain, int64_t version) {
  for (pb::OperatorSetIdProto& op : opset_import_) {
    if (SameDomain(op.domain, domain)) {
      op.version = version;
      return;
    }
  }
  pb::OperatorSetIdProto op;
  op.domain = std::string(domain);
  op.version = version;
  opset_import_.push_back(std::move(op));
}

absl::StatusOr<std::unique_ptr<Graph>> Model::FunctionBody(size_t index) const {
  if (index >= functions_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("model has ", functions_.size(), " functions, no function ", index));
  }
  return FunctionBodyFromProto(functions_[index]);
}

void ForEachGraph(Model& model, const std::function<void(Graph&)>& fn) { ForEachGraph(model.graph(), fn); }

void ForEachGraph(const Model& model, const std::function<void(const Graph&)>& fn) {
  ForEachGraph(model.graph(), fn);
}

}  // namespace onnxkit::ir
