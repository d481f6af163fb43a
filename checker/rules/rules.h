// Internals shared by the checker's rule groups (checker/rules/*.cc): the
// diagnostic sink, facts the model group establishes for later groups,
// location labels, and the walk over subgraphs. Not a public API: use
// checker/checker.h.
#ifndef ONNXKIT_CHECKER_RULES_RULES_H_
#define ONNXKIT_CHECKER_RULES_RULES_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "checker/checker.h"
#include "checker/diagnostic.h"
#include "lib/io/proto.h"

namespace onnxkit::checker::internal {

// Collects the diagnostics of one file, applying the options: severity
// (--werror, --strict-custom) and the error limit (--max-errors).
class Sink {
 public:
  Sink(const CheckOptions& options, CheckResult* result);

  // Records a finding of rule `id` at `location` ("" for the whole file).
  // Ignored once stopped().
  void Report(rules::RuleId id, std::string location, std::string message, std::string hint = "",
              int64_t byte_offset = -1);
  // Adds a note line (a skipped group, truncation).
  void Note(std::string note);

  // True once max_errors errors were reported: rule groups stop early.
  bool stopped() const { return stopped_; }
  // Errors (severity kError) so far.
  int errors() const { return result_->errors; }
  // Findings of invalid/refused rules so far (warnings promoted by --werror
  // or --strict-custom not counted): what decides whether later groups run.
  int hard_errors() const { return hard_errors_; }

 private:
  void Stop(std::string note);

  const CheckOptions& options_;
  CheckResult* result_;
  bool stopped_ = false;
  int hard_errors_ = 0;
};

// (domain, name, overload) of a model-local function, domain canonical.
struct FunctionKey {
  std::string domain;
  std::string name;
  std::string overload;
  friend bool operator<(const FunctionKey& a, const FunctionKey& b) {
    return std::tie(a.domain, a.name, a.overload) < std::tie(b.domain, b.name, b.overload);
  }
};
FunctionKey KeyOf(const pb::FunctionProto& function);
FunctionKey KeyOf(const pb::NodeProto& node);

// What the model rules establish for the later groups.
struct ModelFacts {
  // Imported opset per canonical domain ("ai.onnx" for ""), first entry
  // wins; IR < 3 without imports implies ai.onnx 1.
  std::map<std::string, int64_t, std::less<>> opsets;
  // The model-local functions by key (the first of duplicates).
  std::map<FunctionKey, const pb::FunctionProto*> functions;
  // False when an opset import (of the model or a function) is broken:
  // node rules cannot resolve schemas.
  bool opsets_sound = true;
  // IR version (0 when missing).
  int64_t ir_version = 0;
};

// The opset version in effect for `domain` at a node of the main graph
// (function == nullptr) or of `function`'s body: the function's own import,
// else the model's.
std::optional<int64_t> OpsetFor(const ModelFacts& facts, const pb::FunctionProto* function,
                                std::string_view domain);

// Rule groups (one file each), in the order CheckModel runs them.
void CheckModelRules(const pb::ModelProto& model, ModelFacts* facts, Sink* sink);
void CheckGraphRules(const pb::ModelProto& model, const ModelFacts& facts, Sink* sink);
void CheckNodeRules(const pb::ModelProto& model, const ModelFacts& facts, const CheckOptions& options,
                    Sink* sink);
void CheckTensorRules(const pb::ModelProto& model, const std::filesystem::path& base_dir, Sink* sink);

// --- Locations and quoting -------------------------------------------------

// `s` with control bytes and bytes that are not valid UTF-8 as \xNN (and
// also ' and \ when `escape_quotes`), cut after `max_bytes` with "...":
// names from hostile files can forge report lines or be megabytes long.
std::string EscapeText(std::string_view s, bool escape_quotes, size_t max_bytes = std::string_view::npos);
// EscapeText(s, true, 120) between single quotes.
std::string Quote(std::string_view s);
// "graph 'main'" ("graph (unnamed)" when empty).
std::string GraphLabel(const pb::GraphProto& graph);
// "node 'conv1' (Conv)", or "node #3 (Conv)" when unnamed; custom domains
// as "node 'n' (com.x::Op)".
std::string NodeLabel(const pb::NodeProto& node, size_t index);
// "function 'custom::Gelu'" (with ":overload" when set).
std::string FunctionLabel(const pb::FunctionProto& function);
// "a › b"; `a` may be empty.
std::string Join(std::string_view a, std::string_view b);

// The location of a node, built only when a finding needs it (a file may
// hold millions of nodes, deep in subgraphs). Converts to the location
// string "<graph location> › node 'n' (Op)".
class NodeWhere {
 public:
  NodeWhere(const std::string& graph, const pb::NodeProto& node, size_t index)
      : graph_(graph), node_(node), index_(index) {}
  operator std::string() const { return Join(graph_, NodeLabel(node_, index_)); }  // NOLINT: implicit

 private:
  const std::string& graph_;
  const pb::NodeProto& node_;
  size_t index_;
};

// A graph held by a node attribute: the attribute's `g`, or one of its
// `graphs`.
struct SubgraphRef {
  const pb::GraphProto* graph;
  std::string label;  // "attribute 'body'" or "attribute 'branches'[1]"
};
// The subgraphs of `node`, in attribute order.
std::vector<SubgraphRef> Subgraphs(const pb::NodeProto& node);

// The names a graph reads from enclosing scopes: inputs of its nodes (and of
// nested subgraphs) and its outputs that no graph on the way defines. First
// use order, each once. Recursion stops at limits::kMaxGraphDepth.
std::vector<std::string> OuterReferences(const pb::GraphProto& graph, int depth);

// Element type name for messages: "float", or "data_type 9999".
std::string ElemTypeLabel(int32_t elem_type);

}  // namespace onnxkit::checker::internal

#endif  // ONNXKIT_CHECKER_RULES_RULES_H_
