// ir::Graph: an ordered list of nodes with its inputs, outputs, initializers
// and value_info, owning the Values it defines and the subgraphs of its nodes'
// attributes (through those nodes).
//
// Order lives in vectors and lists (nodes in file order; inputs, outputs,
// initializers, value_info in file order); hash maps are name indexes only.
// Scoping follows ONNX: a name used in a subgraph resolves to the nearest
// graph (this one, then enclosing ones) that defines it.
//
// Every mutating call keeps use lists, producers and the name index
// consistent, checks what it needs and returns a Status rather than breaking
// an invariant; ir::Verify checks the invariants from scratch.
#ifndef ONNXKIT_LIB_IR_GRAPH_H_
#define ONNXKIT_LIB_IR_GRAPH_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/box.h"
#include "lib/io/proto.h"
#include "lib/ir/names.h"
#include "lib/ir/node.h"
#include "lib/ir/value.h"

namespace onnxkit::ir {

class Model;

// A forward range of T* over a list of unique_ptr<T> (the graph's nodes or
// values), in list order. Stays valid while elements other than the current
// one are added or removed; take a copy (std::vector<Node*>) to remove the
// current element while iterating.
template <typename T>
class PtrRange {
 public:
  using List = std::list<std::unique_ptr<T>>;
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T*;
    using difference_type = std::ptrdiff_t;
    using pointer = T**;
    using reference = T*;
    iterator() = default;
    explicit iterator(typename List::const_iterator it) : it_(it) {}
    T* operator*() const { return it_->get(); }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator r = *this;
      ++it_;
      return r;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.it_ == b.it_; }

   private:
    typename List::const_iterator it_;
  };
  explicit PtrRange(const List& list) : list_(&list) {}
  iterator begin() const { return iterator(list_->begin()); }
  iterator end() const { return iterator(list_->end()); }
  size_t size() const { return list_->size(); }
  bool empty() const { return list_->empty(); }

 private:
  const List* list_;
};

// Where AddNode / MoveNode put a node.
struct Position {
  enum class Kind { kEnd, kBefore, kAfter };
  Kind kind = Kind::kEnd;
  Node* anchor = nullptr;
  static Position End() { return {}; }
  static Position Before(Node* n) { return {Kind::kBefore, n}; }
  static Position After(Node* n) { return {Kind::kAfter, n}; }
};

// What AddNode creates.
struct NodeSpec {
  std::string op_type;
  std::string domain;  // "" is ai.onnx
  std::string name;    // node name; may be empty
  // Inputs: values of the graph or of an enclosing graph; null for an
  // omitted optional input.
  std::vector<Value*> inputs;
  // Output names: "" for an omitted optional output; a name must be unused
  // in the whole graph tree, or name a kUndefined value of this graph (from
  // CreateValue), which the node then defines.
  std::vector<std::string> outputs;
  // Scalar, list and tensor attributes (no GRAPH/GRAPHS: use
  // Node::AddSubgraph on the new node).
  std::vector<pb::AttributeProto> attributes;
};

class Graph {
 public:
  // An empty root graph (not part of a model until Model::set_graph).
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // --- GraphProto fields the IR keeps as they are ---
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string doc) { doc_string_ = std::move(doc); }
  std::vector<pb::StringStringEntryProto>& metadata_props() { return metadata_props_; }
  const std::vector<pb::StringStringEntryProto>& metadata_props() const { return metadata_props_; }
  std::vector<pb::TensorAnnotation>& quantization_annotation() { return quantization_annotation_; }
  const std::vector<pb::TensorAnnotation>& quantization_annotation() const {
    return quantization_annotation_;
  }
  // Presence bits and unknown fields of the GraphProto.
  pb::MessageBase& extra() { return extra_; }
  const pb::MessageBase& extra() const { return extra_; }

  // --- Structure ---
  // The enclosing graph and the node whose attribute holds this graph; null
  // for a root graph.
  Graph* parent() const { return parent_; }
  Node* owner_node() const { return owner_node_; }
  // The model, for the root graph of a model; null otherwise.
  Model* model() const { return model_; }
  // 0 for a root graph, parent's depth + 1 for a subgraph.
  int depth() const;
  Graph* Root();
  // True when `g` is this graph or encloses it.
  bool IsSelfOrDescendantOf(const Graph* g) const;
  // False only for a root graph none of whose nodes has ever held a subgraph
  // (walks over the nodes looking for subgraphs can then be skipped).
  bool MayHoldSubgraphs() const { return parent_ != nullptr || has_subgraphs_; }

  PtrRange<Node> nodes() const { return PtrRange<Node>(nodes_); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  // Every value this graph defines or declares, in creation order.
  PtrRange<Value> values() const { return PtrRange<Value>(values_); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  const std::vector<Value*>& sparse_initializers() const { return sparse_initializers_; }
  const std::vector<Value*>& value_info() const { return value_info_; }
  // The ValueInfoProto each entry lowers to (named after the value): the
  // value's info(), or the entry's own description when the file described
  // the value differently in two entries.
  pb::ValueInfoProto InputEntry(int i) const;
  pb::ValueInfoProto OutputEntry(int i) const;
  pb::ValueInfoProto ValueInfoEntry(int i) const;

  // --- Lookup ---
  // The value `name` resolves to from this graph: the nearest graph (this,
  // then enclosing ones) defining it; if none defines it, the nearest graph
  // declaring it (kUndefined); else null.
  Value* FindValue(std::string_view name) const;
  // Values defined or declared in this graph only.
  Value* FindLocalValue(std::string_view name) const;
  // The first node of this graph named `name` (no subgraphs); null if none.
  Node* FindNode(std::string_view name) const;
  // True when `node` is a node of this graph (not of a subgraph), in
  // constant time. A removed node is not, unless a node added since (to
  // this graph) was given its address.
  bool HasNode(const Node* node) const { return node_set_.contains(node); }
  // True when a value of this graph tree (root and every subgraph) has `name`.
  bool NameInUse(std::string_view name) const;
  // A fresh name derived from `hint`, unused in the model (all graphs, node
  // names, functions) and never returned before. Deterministic.
  std::string FreshName(std::string_view hint);

  // --- Mutation (each keeps use lists and indexes consistent) ---

  // Creates a declared-only value with a fresh name derived from `hint`; it
  // becomes defined when named as an output of AddNode or passed to AddInput.
  // Given:   graph(%x) { %y = Relu(%x) }
  // Execute: CreateValue("t")
  // Result:  graph(%x) { %y = Relu(%x) }, %t declared (kUndefined)
  Value* CreateValue(std::string_view hint);

  // Adds a node at `where` (an anchor must be a node of this graph).
  // Given:   %y = Relu(%x)
  // Execute: AddNode({.op_type = "Neg", .inputs = {%y}, .outputs = {"z"}}, After(relu))
  // Result:  %y = Relu(%x)
  //          %z = Neg(%y)
  // Errors: InvalidArgument for an input not visible from this graph, an
  // output name in use, or a graph attribute; NotFound for a foreign anchor.
  absl::StatusOr<Node*> AddNode(NodeSpec spec, Position where = Position::End());

  // Removes `node`, which must belong to this graph and whose outputs must be
  // unused (no uses, not graph outputs). Its subgraphs go with it; value_info
  // entries naming its outputs are dropped.
  // Given:   %y = Relu(%x); %z = Neg(%x)          (%y unused)
  // Execute: RemoveNode(relu)
  // Result:  %z = Neg(%x)
  absl::Status RemoveNode(Node* node);

  // Moves `node` (of this graph) to `where` in the same list.
  // Given:   %a = A(); %b = B()
  // Execute: MoveNode(b, Before(a))
  // Result:  %b = B(); %a = A()
  absl::Status MoveNode(Node* node, Position where);

  // Replaces every use of `old_value` by `new_value`: node inputs (also in
  // subgraphs) and graph outputs (of old_value's graph and its subgraphs).
  // `new_value` must be visible, under its name, wherever old_value is used.
  // Given:   %3 = f(%1, %2); %4 = g(%3); graph outputs (%3)
  // Execute: ReplaceAllUsesWith(%3, %6)
  // Result:  %3 = f(%1, %2); %4 = g(%6); graph outputs (%6)
  absl::Status ReplaceAllUsesWith(Value* old_value, Value* new_value);

  // Sets input `index` of `node` (a node of this graph); null omits it.
  // Given:   %y = Add(%a, %b)
  // Execute: SetInput(add, 1, %c)
  // Result:  %y = Add(%a, %c)
  absl::Status SetInput(Node* node, int index, Value* value);
  // Appends an input to `node` (null: an omitted optional input).
  // Given:   %y = Clip(%x)
  // Execute: AppendInput(clip, %lo)
  // Result:  %y = Clip(%x, %lo)
  absl::Status AppendInput(Node* node, Value* value);
  // Removes input `index` of `node`, shifting later inputs down.
  // Given:   %y = Clip(%x, %lo, %hi)
  // Execute: RemoveInput(clip, 1)
  // Result:  %y = Clip(%x, %hi)
  absl::Status RemoveInput(Node* node, int index);

  // Adds a graph input named `name` (unused in the tree) with `type`.
  // Given:   graph(%x)
  // Execute: AddInput("y", type)
  // Result:  graph(%x, %y)
  absl::StatusOr<Value*> AddInput(std::string_view name, std::optional<pb::TypeProto> type = std::nullopt);
  // Lists an existing value of this graph as the last graph input: a
  // kUndefined value becomes a kGraphInput, an initializer becomes an
  // overridable one.
  absl::Status AddInput(Value* value);
  // Unlists graph input `value`. A kGraphInput must be unused and is deleted;
  // an initializer stays (as a constant).
  // Given:   graph(%x, %w = initializer)
  // Execute: RemoveInput(%w)
  // Result:  graph(%x), %w constant
  absl::Status RemoveInput(Value* value);

  // Appends `value` (visible from this graph, defined) to the graph outputs.
  // Given:   graph(%x) -> (%y)
  // Execute: AddOutput(%z)
  // Result:  graph(%x) -> (%y, %z)
  absl::Status AddOutput(Value* value);
  // Removes graph output `index` (the value itself stays).
  // Given:   graph(%x) -> (%y, %z)
  // Execute: RemoveOutput(0)
  // Result:  graph(%x) -> (%z)
  absl::Status RemoveOutput(int index);

  // Adds an initializer named `tensor.name` (a fresh name from "init" when
  // empty), appended to the initializer list.
  // Given:   graph(%x) { %y = Add(%x, %b) }
  // Execute: AddInitializer(tensor "w")
  // Result:  graph(%x) initializers(%w) { %y = Add(%x, %b) }
  absl::StatusOr<Value*> AddInitializer(pb::TensorProto tensor);
  absl::StatusOr<Value*> AddSparseInitializer(pb::SparseTensorProto tensor);
  // Removes the initializer data of `value` (of this graph). Unless it is also
  // a graph input, the value must be unused (no uses, no graph output) and is
  // deleted; a graph input stays as a plain input.
  // Given:   initializers(%w); %y = Add(%x, %b)
  // Execute: RemoveInitializer(%w)
  // Result:  %y = Add(%x, %b)
  absl::Status RemoveInitializer(Value* value);

  // Renames `value` (of this graph) to `new_name`, unused in the whole tree.
  // Every entry and use follows, since they refer to the Value.
  // Given:   %a = Relu(%x); %b = Neg(%a)
  // Execute: RenameValue(%a, "r")
  // Result:  %r = Relu(%x); %b = Neg(%r)
  absl::Status RenameValue(Value* value, std::string_view new_name);

  // Moves `node` from this graph into `subgraph` (a descendant of this
  // graph), appended at its end. Its inputs must stay visible under their
  // names; every use of its outputs must be inside `subgraph`; its outputs
  // must not be graph outputs here. value_info entries of its outputs move too.
  // Given:   %t = Neg(%x); %y = If(%c) then { %u = Abs(%t) }
  // Execute: MoveNodeToSubgraph(neg, then)
  // Result:  %y = If(%c) then { %t = Neg(%x); %u = Abs(%t) }
  absl::Status MoveNodeToSubgraph(Node* node, Graph* subgraph);

  // Counts mutations, through this API, of the whole graph tree (a change in
  // a subgraph can reorder its parent): a cache of an analysis of any graph
  // of the tree stays valid while the version is unchanged.
  uint64_t version() const;

 private:
  friend class Importer;
  friend class Model;
  friend class Node;
  friend class Value;
  friend class Verifier;

  // Records a mutation (in the root's counter).
  void Touch();
  // Storage helpers (graph.cc).
  Value* NewValue(std::string name, ValueKind kind);
  void DeleteValue(Value* value);
  Node* NewNode(Position where);
  void IndexValue(Value* value);
  void UnindexValue(Value* value);
  void ReserveName(std::string_view name);
  // Drops every use made by the nodes of `graph` and its subgraphs, before
  // they are destroyed (node inputs are left as they are).
  static void DropUsesIn(Graph* graph);
  // Drops value_info entries and entry overrides naming `value`, in this
  // graph and its subgraphs (overrides only when `overrides_only`).
  void DropEntries(const Value* value, bool overrides_only);
  absl::Status CheckVisible(const Value* value, std::string_view what) const;
  absl::Status CheckNewName(std::string_view name) const;
  absl::Status CheckOwnNode(const Node* node) const;
  std::string Label() const;

  std::string name_;
  std::string doc_string_;
  std::vector<pb::StringStringEntryProto> metadata_props_;
  std::vector<pb::TensorAnnotation> quantization_annotation_;
  pb::MessageBase extra_;

  Graph* parent_ = nullptr;
  // Root only: whether a subgraph was ever attached to the tree (until
  // then, a name is in use exactly when the root's index has it).
  bool has_subgraphs_ = false;
  Node* owner_node_ = nullptr;
  Model* model_ = nullptr;

  std::list<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_set<const Node*> node_set_;  // the nodes of nodes_, for HasNode
  std::list<std::unique_ptr<Value>> values_;
  absl::flat_hash_map<std::string, Value*> index_;  // name -> value of this graph

  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializers_;
  std::vector<Value*> sparse_initializers_;
  std::vector<Value*> value_info_;
  // Per-entry descriptions, parallel to inputs_/outputs_/value_info_; empty
  // when the entry is described by the value's info().
  std::vector<Box<pb::ValueInfoProto>> input_entries_;
  std::vector<Box<pb::ValueInfoProto>> output_entries_;
  std::vector<Box<pb::ValueInfoProto>> value_info_entries_;

  std::unique_ptr<NameGenerator> names_;  // root only, created on first use
  uint64_t version_ = 0;                  // meaningful in the root only
};

// Calls `fn` on `graph` and every subgraph below it, pre-order: a graph, then
// for each node in order, for each attribute in order, its g then its graphs.
void ForEachGraph(Graph& graph, const std::function<void(Graph&)>& fn);
void ForEachGraph(const Graph& graph, const std::function<void(const Graph&)>& fn);

// The users of `value` (nodes, possibly in subgraphs), each once, in use order.
std::vector<Node*> Consumers(const Value& value);
// The producing node of `value`, or null.
inline Node* Producer(const Value& value) { return value.producer(); }

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_GRAPH_H_
