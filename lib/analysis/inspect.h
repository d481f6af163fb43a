// Model summary for `onnxkit inspect`: what a model is, computed from the
// decoded protobuf without reading weights (external data is described from
// its entries, never opened), and rendered as text, JSON or Graphviz.
#ifndef ONNXKIT_LIB_ANALYSIS_INSPECT_H_
#define ONNXKIT_LIB_ANALYSIS_INSPECT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::analysis {

// One graph input or output.
struct IoInfo {
  std::string name;
  std::string type;               // "tensor(float)", "seq(tensor(int64))", "?" if absent
  std::vector<std::string> dims;  // "1", "batch" (symbolic), "?" (unknown); empty for scalars
  bool has_shape = false;         // false: rank unknown
  bool is_initializer = false;    // input that also has an initializer (IR < 4 style)
};

// A graph nested in a node attribute (If/Loop/Scan bodies ...).
struct SubgraphInfo {
  std::string path;  // "main › node 'loop1' (Loop) › body"
  int depth = 1;
  int64_t node_count = 0;
  std::vector<std::pair<std::string, int64_t>> op_histogram;  // sorted by op
};

struct FunctionInfo {
  std::string domain, name, overload;
  int64_t inputs = 0, outputs = 0, attributes = 0, node_count = 0;
};

struct ModelSummary {
  std::string path;
  uint64_t file_bytes = 0;
  int64_t ir_version = 0;
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, int64_t>> opset_imports;  // in file order; "" shown as ai.onnx
  std::string graph_name;
  std::vector<IoInfo> inputs, outputs;
  int64_t node_count = 0;        // main graph only
  int64_t total_node_count = 0;  // main graph, subgraphs and functions
  // "domain::Op" for custom domains, "Op" for ai.onnx; sorted by name.
  std::vector<std::pair<std::string, int64_t>> op_histogram;           // main graph
  std::vector<std::pair<std::string, int64_t>> subgraph_op_histogram;  // all subgraphs together
  std::vector<SubgraphInfo> subgraphs;
  int64_t initializer_count = 0, sparse_initializer_count = 0;
  uint64_t inline_bytes = 0, external_bytes = 0;
  std::vector<std::string> external_files;  // distinct locations, sorted
  uint64_t parameter_count = 0;             // elements of all initializers
  bool parameter_count_overflow = false;
  int64_t value_info_count = 0;
  std::vector<FunctionInfo> functions;
  std::vector<std::pair<std::string, std::string>> metadata;  // in file order
  int64_t training_info_count = 0;
};

// Summarizes `model` (loaded from `path`, `file_bytes` long). Never fails:
// missing or odd fields are shown as they are.
ModelSummary Summarize(const pb::ModelProto& model, std::string path, uint64_t file_bytes);

// Human-readable report.
std::string RenderText(const ModelSummary& s);
// JSON report (schema documented in README).
std::string RenderJson(const ModelSummary& s);
// One line per node, subgraph nodes indented under their owner.
std::string RenderNodeList(const pb::ModelProto& model);
// Graphviz digraph of the main graph (subgraphs drawn as clusters).
std::string RenderDot(const pb::ModelProto& model);

}  // namespace onnxkit::analysis

#endif  // ONNXKIT_LIB_ANALYSIS_INSPECT_H_
