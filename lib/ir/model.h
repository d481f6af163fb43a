// ir::Model: the in-memory model that passes, extract, convert, quantize and
// the runner work on, and its conversion from and to the pb mirror.
//
// FromProto builds a Model from a structurally sound pb::ModelProto (the
// checker validates arbitrary ones); ToProto lowers it back. The pair is
// lossless: every field, presence bit, unknown field and the order of every
// repeated field survives, so Encode(ToProto(*FromProto(m))) == Encode(m).
// Tensor data is moved, never copied (raw_data stays a view into the file).
#ifndef ONNXKIT_LIB_IR_MODEL_H_
#define ONNXKIT_LIB_IR_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/proto.h"
#include "lib/ir/graph.h"

namespace onnxkit::ir {

class Model {
 public:
  // A model with an empty main graph.
  Model();
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  int64_t ir_version() const { return ir_version_; }
  void set_ir_version(int64_t v) { ir_version_ = v; }
  const std::string& producer_name() const { return producer_name_; }
  void set_producer_name(std::string s) { producer_name_ = std::move(s); }
  const std::string& producer_version() const { return producer_version_; }
  void set_producer_version(std::string s) { producer_version_ = std::move(s); }
  const std::string& domain() const { return domain_; }
  void set_domain(std::string s) { domain_ = std::move(s); }
  int64_t model_version() const { return model_version_; }
  void set_model_version(int64_t v) { model_version_ = v; }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string s) { doc_string_ = std::move(s); }

  // opset_import in file order.
  std::vector<pb::OperatorSetIdProto>& opset_import() { return opset_import_; }
  const std::vector<pb::OperatorSetIdProto>& opset_import() const { return opset_import_; }
  // The imported version of `domain` ("" and "ai.onnx" are the same domain);
  // nullopt when not imported. The first entry wins if a domain repeats.
  std::optional<int64_t> OpsetVersion(std::string_view domain) const;
  // Sets the version of `domain`, adding an entry at the end if absent.
  void SetOpsetVersion(std::string_view domain, int64_t version);

  std::vector<pb::StringStringEntryProto>& metadata_props() { return metadata_props_; }
  const std::vector<pb::StringStringEntryProto>& metadata_props() const { return metadata_props_; }
  // Training information, kept as it is in the file.
  std::vector<pb::TrainingInfoProto>& training_info() { return training_info_; }
  const std::vector<pb::TrainingInfoProto>& training_info() const { return training_info_; }
  // Model-local functions, kept as pb (see FunctionBody).
  std::vector<pb::FunctionProto>& functions() { return functions_; }
  const std::vector<pb::FunctionProto>& functions() const { return functions_; }
  // Presence bits and unknown fields of the ModelProto (e.g. configuration).
  pb::MessageBase& extra() { return extra_; }
  const pb::MessageBase& extra() const { return extra_; }

  // The main graph (never null).
  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  // Replaces the main graph by `graph`, a root graph.
  void set_graph(std::unique_ptr<Graph> graph);

  // The body of functions()[index] as a root ir::Graph: inputs and outputs
  // without types, value_info, nodes (the same errors as FromProto).
  // OutOfRange for a bad index.
  absl::StatusOr<std::unique_ptr<Graph>> FunctionBody(size_t index) const;

 private:
  int64_t ir_version_ = 0;
  std::string producer_name_;
  std::string producer_version_;
  std::string domain_;
  int64_t model_version_ = 0;
  std::string doc_string_;
  std::vector<pb::OperatorSetIdProto> opset_import_;
  std::vector<pb::StringStringEntryProto> metadata_props_;
  std::vector<pb::TrainingInfoProto> training_info_;
  std::vector<pb::FunctionProto> functions_;
  pb::MessageBase extra_;
  std::unique_ptr<Graph> graph_;
};

// Builds a Model, moving everything out of `proto`. InvalidArgument naming
// the graph, node and value for: no graph; an empty input, initializer,
// value_info or output name; a name defined twice in one graph (two
// producers, input and node output, ...); a node input or graph output
// defined nowhere in scope; an attribute of type GRAPH without g.
// ResourceExhausted for graphs nested deeper than limits::kMaxGraphDepth.
absl::StatusOr<std::unique_ptr<Model>> FromProto(pb::ModelProto proto);

// Lowers a model (copying; tensors' raw_data are views, so weights are not
// copied unless stored in typed fields such as float_data).
pb::ModelProto ToProto(const Model& model);
// Lowers a model, moving its contents out (no copies at all).
pb::ModelProto ToProto(std::unique_ptr<Model> model);

// A function body converted to an ir::Graph (see Model::FunctionBody), and the
// way back: sets `function`'s input, output, node and value_info from `body`,
// keeping its other fields.
absl::StatusOr<std::unique_ptr<Graph>> FunctionBodyFromProto(const pb::FunctionProto& function);
void FunctionBodyToProto(const Graph& body, pb::FunctionProto* function);

// Calls `fn` on the main graph and every subgraph, pre-order (see
// ForEachGraph(Graph&)). Model-local functions are pb and not visited.
void ForEachGraph(Model& model, const std::function<void(Graph&)>& fn);
void ForEachGraph(const Model& model, const std::function<void(const Graph&)>& fn);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_MODEL_H_
