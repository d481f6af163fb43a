// ToProto: ir::Model -> pb::ModelProto, copying (const Model&) or moving
// (unique_ptr<Model>) the kept pb parts. Field order inside every repeated
// field is the IR's order; the encoder orders fields by number, so the bytes
// match the input's encoding after a FromProto/ToProto round trip.
#include <type_traits>
#include <utility>

#include "lib/ir/model.h"

namespace onnxkit::ir {
namespace {

template <bool kMove>
class Lowerer {
 public:
  using GraphT = std::conditional_t<kMove, Graph, const Graph>;
  using NodeT = std::conditional_t<kMove, Node, const Node>;
  using ModelT = std::conditional_t<kMove, Model, const Model>;

  // Copies `x`, or moves it when lowering destructively.
  template <typename T>
  static std::remove_const_t<T> Take(T& x) {
    if constexpr (kMove && !std::is_const_v<T>) {
      return std::move(x);
    } else {
      return x;
    }
  }

  static void TakeBase(std::conditional_t<kMove, pb::MessageBase, const pb::MessageBase>& from,
                       pb::MessageBase* to) {
    to->present = from.present;
    to->unknown_fields = Take(from.unknown_fields);
  }

  static pb::NodeProto LowerNode(NodeT& n) {
    pb::NodeProto np;
    np.input.reserve(n.inputs().size());
    for (const Value* v : n.inputs()) np.input.push_back(v == nullptr ? std::string() : v->name());
    np.output.reserve(n.outputs().size());
    for (const Value* v : n.outputs()) np.output.push_back(v->name());
    np.name = n.name();
    np.op_type = n.op_type();
    np.domain = n.domain();
    np.overload = n.overload();
    np.doc_string = n.doc_string();
    np.metadata_props = Take(n.metadata_props());
    TakeBase(n.extra(), &np);
    auto& attrs = Attributes(n);
    np.attribute.reserve(attrs.size());
    for (auto& a : attrs) {
      pb::AttributeProto ap = Take(a.proto);
      if (a.g) ap.g = LowerGraph(*a.g);
      ap.graphs.reserve(a.graphs.size());
      for (auto& g : a.graphs) ap.graphs.push_back(LowerGraph(*g));
      np.attribute.push_back(std::move(ap));
    }
    return np;
  }

  static pb::GraphProto LowerGraph(GraphT& g) {
    pb::GraphProto gp;
    gp.node.reserve(static_cast<size_t>(g.num_nodes()));
    for (NodeT* n : g.nodes()) gp.node.push_back(LowerNode(*n));
    gp.name = g.name();
    gp.initializer.reserve(g.initializers().size());
    for (Value* v : g.initializers()) {
      gp.initializer.push_back(Take(*Tensor(v)));
      gp.initializer.back().name = v->name();
    }
    gp.doc_string = g.doc_string();
    for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) gp.input.push_back(g.InputEntry(i));
    for (int i = 0; i < static_cast<int>(g.outputs().size()); ++i) gp.output.push_back(g.OutputEntry(i));
    gp.value_info.reserve(g.value_info().size());
    for (int i = 0; i < static_cast<int>(g.value_info().size()); ++i)
      gp.value_info.push_back(g.ValueInfoEntry(i));
    gp.quantization_annotation = Take(g.quantization_annotation());
    for (Value* v : g.sparse_initializers()) {
      gp.sparse_initializer.push_back(Take(*Sparse(v)));
      gp.sparse_initializer.back().values.mutable_value().name = v->name();
    }
    gp.metadata_props = Take(g.metadata_props());
    TakeBase(g.extra(), &gp);
    return gp;
  }

  static pb::ModelProto LowerModel(ModelT& m) {
    pb::ModelProto mp;
    mp.ir_version = m.ir_version();
    mp.producer_name = m.producer_name();
    mp.producer_version = m.producer_version();
    mp.domain = m.domain();
    mp.model_version = m.model_version();
    mp.doc_string = m.doc_string();
    mp.graph = LowerGraph(m.graph());
    mp.opset_import = Take(m.opset_import());
    mp.metadata_props = Take(m.metadata_props());
    mp.training_info = Take(m.training_info());
    mp.functions = Take(m.functions());
    TakeBase(m.extra(), &mp);
    return mp;
  }

 private:
  static auto& Attributes(NodeT& n) {
    if constexpr (kMove) {
      return n.mutable_attributes();
    } else {
      return n.attributes();
    }
  }
  static auto* Tensor(Value* v) {
    if constexpr (kMove) {
      return v->mutable_initializer();
    } else {
      return v->initializer();
    }
  }
  static auto* Sparse(Value* v) {
    if constexpr (kMove) {
      return v->mutable_sparse_initializer();
    } else {
      return v->sparse_initializer();
    }
  }
};

}  // namespace

pb::ModelProto ToProto(const Model& model) { return Lowerer<false>::LowerModel(model); }

pb::ModelProto ToProto(std::unique_ptr<Model> model) { return Lowerer<true>::LowerModel(*model); }

void FunctionBodyToProto(const Graph& body, pb::FunctionProto* function) {
  function->input.clear();
  for (const Value* v : body.inputs()) function->input.push_back(v->name());
  function->output.clear();
  for (const Value* v : body.outputs()) function->output.push_back(v->name());
  function->node.clear();
  for (const Node* n : body.nodes()) function->node.push_back(Lowerer<false>::LowerNode(*n));
  function->value_info.clear();
  for (int i = 0; i < static_cast<int>(body.value_info().size()); ++i) {
    function->value_info.push_back(body.ValueInfoEntry(i));
  }
}

}  // namespace onnxkit::ir
