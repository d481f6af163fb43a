// GraphBuilder and the pb helpers declared in model_builder.h.
#include "tests/util/model_builder.h"

namespace onnxkit::testing {

pb::TypeProto TensorType(int32_t elem_type, std::optional<std::vector<int64_t>> dims) {
  pb::TypeProto t;
  pb::TypeProto::Tensor& tensor = t.tensor_type.mutable_value();
  tensor.elem_type = elem_type;
  if (dims.has_value()) {
    pb::TensorShapeProto& shape = tensor.shape.mutable_value();
    for (size_t i = 0; i < dims->size(); ++i) {
      pb::TensorShapeProto::Dimension d;
      if ((*dims)[i] >= 0) {
        d.kind = pb::TensorShapeProto::Dimension::kValue;
        d.dim_value = (*dims)[i];
      } else {
        d.kind = pb::TensorShapeProto::Dimension::kParam;
        d.dim_param = "d" + std::to_string(i);
      }
      shape.dim.push_back(std::move(d));
    }
  }
  return t;
}

pb::ValueInfoProto MakeValueInfo(std::string name, int32_t elem_type,
                                 std::optional<std::vector<int64_t>> dims) {
  pb::ValueInfoProto vi;
  vi.name = std::move(name);
  if (elem_type != 0) vi.type = TensorType(elem_type, std::move(dims));
  return vi;
}

namespace {

pb::AttributeProto Attr(std::string name, pb::AttributeType type) {
  pb::AttributeProto a;
  a.name = std::move(name);
  a.type = type;
  return a;
}

}  // namespace

pb::AttributeProto AttrInt(std::string name, int64_t v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrInt);
  a.i = v;
  return a;
}

pb::AttributeProto AttrFloat(std::string name, float v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrFloat);
  a.f = v;
  return a;
}

pb::AttributeProto AttrString(std::string name, std::string v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrString);
  a.s = std::move(v);
  return a;
}

pb::AttributeProto AttrInts(std::string name, std::vector<int64_t> v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrInts);
  a.ints = std::move(v);
  return a;
}

pb::AttributeProto AttrFloats(std::string name, std::vector<float> v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrFloats);
  a.floats = std::move(v);
  return a;
}

pb::AttributeProto AttrStrings(std::string name, std::vector<std::string> v) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrStrings);
  a.strings = std::move(v);
  return a;
}

pb::AttributeProto AttrTensor(std::string name, pb::TensorProto t) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrTensor);
  a.t = std::move(t);
  return a;
}

pb::AttributeProto AttrGraph(std::string name, pb::GraphProto g) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrGraph);
  a.g = std::move(g);
  return a;
}

pb::AttributeProto AttrGraphs(std::string name, std::vector<pb::GraphProto> graphs) {
  pb::AttributeProto a = Attr(std::move(name), pb::kAttrGraphs);
  a.graphs = std::move(graphs);
  return a;
}

pb::NodeProto MakeNode(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                       std::vector<pb::AttributeProto> attributes, std::string name) {
  pb::NodeProto n;
  n.op_type = std::move(op_type);
  n.input = std::move(inputs);
  n.output = std::move(outputs);
  n.attribute = std::move(attributes);
  n.name = std::move(name);
  return n;
}

GraphBuilder::GraphBuilder(std::string name) { graph_.name = std::move(name); }

GraphBuilder& GraphBuilder::Input(std::string name, int32_t elem_type,
                                  std::optional<std::vector<int64_t>> dims) {
  graph_.input.push_back(MakeValueInfo(std::move(name), elem_type, std::move(dims)));
  return *this;
}

GraphBuilder& GraphBuilder::Output(std::string name, int32_t elem_type,
                                   std::optional<std::vector<int64_t>> dims) {
  graph_.output.push_back(MakeValueInfo(std::move(name), elem_type, std::move(dims)));
  return *this;
}

GraphBuilder& GraphBuilder::ValueInfo(std::string name, int32_t elem_type,
                                      std::optional<std::vector<int64_t>> dims) {
  graph_.value_info.push_back(MakeValueInfo(std::move(name), elem_type, std::move(dims)));
  return *this;
}

GraphBuilder& GraphBuilder::Initializer(pb::TensorProto tensor) {
  graph_.initializer.push_back(std::move(tensor));
  return *this;
}

GraphBuilder& GraphBuilder::Node(std::string op_type, std::vector<std::string> inputs,
                                 std::vector<std::string> outputs, std::vector<pb::AttributeProto> attributes,
                                 std::string name) {
  graph_.node.push_back(MakeNode(std::move(op_type), std::move(inputs), std::move(outputs),
                                 std::move(attributes), std::move(name)));
  return *this;
}

pb::ModelProto ModelFromGraph(pb::GraphProto graph, int64_t opset, int64_t ir_version) {
  pb::ModelProto m;
  m.ir_version = ir_version;
  m.producer_name = "onnxkit-test";
  pb::OperatorSetIdProto op;
  op.version = opset;
  m.opset_import.push_back(op);
  m.graph = std::move(graph);
  return m;
}

pb::ModelProto IfModelWithOuterRefs() {
  pb::GraphProto then_branch =
      GraphBuilder("then").Node("Add", {"x", "w"}, {"t"}, {}, "add").Output("t", pb::kFloat, {{2}}).Build();
  pb::GraphProto else_branch =
      GraphBuilder("else").Node("Neg", {"x"}, {"e"}, {}, "neg").Output("e", pb::kFloat, {{2}}).Build();
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, {{}})
                            .Input("x", pb::kFloat, {{2}})
                            .Initializer(RawFloatTensor("w", {2}))
                            .Node("If", {"c"}, {"y"},
                                  {AttrGraph("then_branch", std::move(then_branch)),
                                   AttrGraph("else_branch", std::move(else_branch))},
                                  "if")
                            .Output("y", pb::kFloat, {{2}})
                            .Build();
  return ModelFromGraph(std::move(main));
}

pb::ModelProto EndlessLoopModel() {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("acc", pb::kFloat)
                            .Output("cond_in", pb::kBool)
                            .Output("acc", pb::kFloat)
                            .Build();
  pb::TensorProto yes;
  yes.name = "yes";
  yes.data_type = pb::kBool;
  yes.int32_data = {1};
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2}})
                            .Initializer(yes)
                            .Node("Loop", {"", "yes", "x"}, {"y"}, {AttrGraph("body", body)}, "forever")
                            .Output("y", pb::kFloat, {{2}})
                            .Build(),
                        17);
}

}  // namespace onnxkit::testing
