// ir::Node and ir::Attribute: one operator application in a graph.
//
// A Node is owned by its Graph. Its inputs are Values of the graph or of an
// enclosing graph (null for an omitted optional input, written ""); its
// outputs are Values it defines (one with an empty name stands for an omitted
// optional output). Everything of the NodeProto that the IR does not model is
// kept, so lowering is lossless. Inputs and outputs change only through the
// Graph mutation API, which keeps use lists consistent.
#ifndef ONNXKIT_LIB_IR_NODE_H_
#define ONNXKIT_LIB_IR_NODE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::ir {

class Graph;
class Value;

// An attribute: the AttributeProto without its graphs (`proto.g` is empty and
// `proto.graphs` is empty), which are owned as ir::Graphs instead.
struct Attribute {
  pb::AttributeProto proto;
  std::unique_ptr<Graph> g;                    // AttributeProto.g, when present
  std::vector<std::unique_ptr<Graph>> graphs;  // AttributeProto.graphs, in order

  Attribute();
  explicit Attribute(pb::AttributeProto p);
  Attribute(Attribute&&) noexcept;
  Attribute& operator=(Attribute&&) noexcept;
  ~Attribute();

  const std::string& name() const { return proto.name; }
  pb::AttributeType type() const { return static_cast<pb::AttributeType>(proto.type); }
};

class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  const std::string& op_type() const { return op_type_; }
  void set_op_type(std::string op_type) { op_type_ = std::move(op_type); }
  const std::string& domain() const { return domain_; }
  void set_domain(std::string domain) { domain_ = std::move(domain); }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& overload() const { return overload_; }
  void set_overload(std::string overload) { overload_ = std::move(overload); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string doc) { doc_string_ = std::move(doc); }
  std::vector<pb::StringStringEntryProto>& metadata_props() { return metadata_props_; }
  const std::vector<pb::StringStringEntryProto>& metadata_props() const { return metadata_props_; }
  // Presence bits and unknown fields of the NodeProto.
  pb::MessageBase& extra() { return extra_; }
  const pb::MessageBase& extra() const { return extra_; }

  // The owning graph.
  Graph* graph() const { return graph_; }
  // A number no other node created in this process has (counting up from
  // 1): tells a node that survived a rewrite from a new one at a reused
  // address. Not part of the model.
  uint64_t serial() const { return serial_; }

  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(int i) const { return outputs_[static_cast<size_t>(i)]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // Attributes in file order. Adding or removing attributes with graphs goes
  // through AddSubgraph / RemoveAttribute, which maintain subgraph links.
  const std::vector<Attribute>& attributes() const { return attributes_; }
  std::vector<Attribute>& mutable_attributes() { return attributes_; }
  const Attribute* FindAttribute(std::string_view name) const;
  Attribute* FindAttribute(std::string_view name);
  // Typed getters; nullopt when absent or of another type.
  std::optional<int64_t> GetInt(std::string_view name) const;
  std::optional<float> GetFloat(std::string_view name) const;
  std::optional<std::string> GetString(std::string_view name) const;
  std::optional<std::vector<int64_t>> GetInts(std::string_view name) const;
  // Sets (replacing any attribute of that name, keeping its position, or
  // appending) a scalar or list attribute.
  void SetAttribute(pb::AttributeProto attr);
  // Removes the attribute (and its subgraphs, dropping their uses of outer
  // values); false when absent.
  bool RemoveAttribute(std::string_view name);

  // Creates an empty subgraph held by a GRAPH attribute `attr_name` (replacing
  // one of that name in place, or appended) and returns it; fill it with the
  // Graph mutation API.
  // Given:   %y = If(%c)
  // Execute: AddSubgraph("then_branch")
  // Result:  %y = If[then_branch = graph()](%c)
  Graph* AddSubgraph(std::string attr_name);

  // Subgraphs of all attributes, in attribute order (g before graphs).
  std::vector<Graph*> Subgraphs() const;
  // Calls fn(Graph*) on each of Subgraphs(), without building a vector.
  template <typename F>
  void ForEachSubgraph(F&& fn) const {
    for (const Attribute& a : attributes_) {
      if (a.g) fn(a.g.get());
      for (const auto& g : a.graphs) fn(g.get());
    }
  }

 private:
  friend class Graph;
  friend class Importer;
  explicit Node(Graph* graph);
  // Drops the uses made by the nodes of `a`'s subgraphs (about to go).
  static void DropAttributeUses(Attribute& a);

  std::string op_type_;
  std::string domain_;
  std::string name_;
  std::string overload_;
  std::string doc_string_;
  std::vector<pb::StringStringEntryProto> metadata_props_;
  pb::MessageBase extra_;
  Graph* graph_;
  uint64_t serial_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attributes_;
  std::list<std::unique_ptr<Node>>::iterator pos_;  // in graph_->nodes_
};

// "'name' (OpType)", or "#index (OpType)" for an unnamed node (index in its
// graph's node list): how error messages name a node.
std::string NodeLabel(const Node& node);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_NODE_H_
