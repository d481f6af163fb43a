// ir::Value: one named tensor (or sequence, map...) of a graph, with its
// definition (graph input, initializer, node output), its description from the
// file's value_info entries, and its use list.
//
// A Value is owned by the Graph that defines it. Nodes of subgraphs that name
// it (outer-scope references) appear in its use list like any other user.
// Values are renamed only through Graph::RenameValue, which keeps the graph's
// name index and the name generator in sync.
#ifndef ONNXKIT_LIB_IR_VALUE_H_
#define ONNXKIT_LIB_IR_VALUE_H_

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::ir {

class Graph;
class Node;

// One use of a value: `node->inputs()[input_index] == value`.
struct Use {
  Node* node = nullptr;
  int input_index = 0;
  friend bool operator==(const Use& a, const Use& b) {
    return a.node == b.node && a.input_index == b.input_index;
  }
};

// How a value is defined in its graph.
enum class ValueKind {
  kUndefined,    // declared only (an orphan value_info entry, or a CreateValue
                 // result not yet used as an output or input); never a use
  kGraphInput,   // listed in the graph inputs, no initializer
  kInitializer,  // holds a TensorProto or a SparseTensorProto; may also be
                 // listed as a graph input (IR < 4 style: an overridable default)
  kNodeOutput,   // output `producer_output()` of `producer()`
};

// Printable name of a kind ("graph input", ...).
const char* ValueKindName(ValueKind kind);

// True when two value_info entries describe a value identically (type,
// doc_string, metadata_props, presence bits, unknown fields), names aside.
bool SameDescription(const pb::ValueInfoProto& a, const pb::ValueInfoProto& b);

class Value {
 public:
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  // The name; empty only for an omitted optional node output.
  const std::string& name() const { return name_; }
  ValueKind kind() const { return kind_; }
  // The graph defining this value (for outer-scope uses: an enclosing graph of
  // the user node).
  Graph* graph() const { return graph_; }

  // The producing node and output index; null / -1 unless kNodeOutput.
  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }

  // Users in deterministic order (file order after FromProto, then the order
  // uses were added). Includes nodes of subgraphs using this value.
  const std::vector<Use>& uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }

  // True when listed in the graph inputs of graph() (kGraphInput always; an
  // initializer when it is also an input).
  bool is_graph_input() const { return is_graph_input_; }
  // An initializer that is not overridable by a graph input: a constant.
  bool IsConstant() const { return kind_ == ValueKind::kInitializer && !is_graph_input_; }
  // True when a graph output of graph() or of one of its subgraphs names it.
  bool IsGraphOutput() const;

  // The description from the file's graph input / value_info / graph output
  // entry (type, doc_string, metadata_props, unknown fields). `name` in it is
  // not maintained: name() is authoritative.
  const pb::ValueInfoProto& info() const { return info_; }
  // Mutable access. Also drops the per-entry copies kept for files that
  // described this value differently in two entries, so every entry gets the
  // edited description when lowered.
  pb::ValueInfoProto& mutable_info();
  // The type, or null when unknown.
  const pb::TypeProto* type() const { return info_.type.get(); }
  void set_type(pb::TypeProto type) { mutable_info().type = std::move(type); }
  void clear_type() { mutable_info().type.reset(); }

  // The initializer data (kInitializer); null otherwise. A value holds either
  // a dense or a sparse initializer, never both. Its `name` field is not
  // maintained: name() is authoritative.
  const pb::TensorProto* initializer() const { return tensor_.get(); }
  pb::TensorProto* mutable_initializer() { return tensor_.get(); }
  const pb::SparseTensorProto* sparse_initializer() const { return sparse_.get(); }
  pb::SparseTensorProto* mutable_sparse_initializer() { return sparse_.get(); }

 private:
  friend class Graph;
  friend class Node;
  friend class Importer;

  Value(Graph* graph, std::string name, ValueKind kind)
      : name_(std::move(name)), kind_(kind), graph_(graph) {}

  void AddUse(Node* node, int index) { uses_.push_back(Use{node, index}); }
  // Removes the first use equal to {node, index}; false when absent.
  bool RemoveUse(Node* node, int index);

  std::string name_;
  ValueKind kind_;
  Graph* graph_;
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  std::vector<Use> uses_;
  bool is_graph_input_ = false;
  bool has_info_ = false;  // info_ came from an entry of the file or a setter
  pb::ValueInfoProto info_;
  std::unique_ptr<pb::TensorProto> tensor_;
  std::unique_ptr<pb::SparseTensorProto> sparse_;
  std::list<std::unique_ptr<Value>>::iterator pos_;  // in graph_->values_
};

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_VALUE_H_
