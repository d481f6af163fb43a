// Tests for lib/ir/to_proto.cc: hand-built models, including odd but valid
// ones (entries describing one value differently, orphan value_info, unknown
// fields and presence bits everywhere), lower back byte for byte, by copy and
// by move, without copying tensor data.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::AttrGraph;
using ::onnxkit::testing::AttrGraphs;
using ::onnxkit::testing::AttrInts;
using ::onnxkit::testing::Entry;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::IfModelWithOuterRefs;
using ::onnxkit::testing::MakeValueInfo;
using ::onnxkit::testing::ModelFromGraph;
using ::onnxkit::testing::RawFloatTensor;
using ::onnxkit::testing::TensorType;

// Field 100 as a varint (tag 0xa0 0x06), value `v`: an unknown field.
std::string Unknown(char v) { return std::string("\xa0\x06", 2) + v; }

// Expects FromProto + ToProto (both flavours) to reproduce `proto` exactly.
void ExpectRoundTrip(const pb::ModelProto& proto) {
  std::string expected = io::Encode(proto);
  auto model = FromProto(proto);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(Verify(**model).ok()) << Verify(**model);
  EXPECT_EQ(io::Encode(ToProto(**model)), expected) << "ToProto(const Model&)";
  EXPECT_EQ(io::Encode(ToProto(**model)), expected) << "a second ToProto(const Model&)";
  EXPECT_EQ(io::Encode(ToProto(std::move(*model))), expected) << "ToProto(unique_ptr<Model>)";
}

TEST(IrToProtoTest, HandBuiltModelsRoundTrip) {
  ExpectRoundTrip(IfModelWithOuterRefs());
  ExpectRoundTrip(ModelFromGraph(GraphBuilder("main")
                                     .Input("x", pb::kFloat, std::vector<int64_t>{-1, 3})
                                     .Initializer(RawFloatTensor("w", {3}))
                                     .Node("Add", {"x", "w"}, {"s"}, {}, "add")
                                     .Node("Mul", {"s", "s"}, {"y"})
                                     .Node("Dropout", {"y", "", ""}, {"z", ""}, {AttrInts("axes", {1, 2})})
                                     .ValueInfo("s", pb::kFloat)
                                     .Output("z")
                                     .Output("x")
                                     .Output("w")
                                     .Output("z")
                                     .Build()));
}

TEST(IrToProtoTest, LoopAndScanBodiesRoundTrip) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, std::vector<int64_t>{})
                            .Input("cond", pb::kBool, std::vector<int64_t>{})
                            .Input("acc")
                            .Node("Add", {"acc", "w"}, {"acc_out"})
                            .Node("Identity", {"cond"}, {"cond_out"})
                            .ValueInfo("w", pb::kFloat, std::vector<int64_t>{4})  // describes an outer value
                            .Output("cond_out")
                            .Output("acc_out")
                            .Build();
  pb::GraphProto g0 = GraphBuilder("g0").Node("Neg", {"w"}, {"n0"}).Output("n0").Build();
  pb::GraphProto g1 = GraphBuilder("g1").Output("w").Build();  // outputs an outer value directly
  ExpectRoundTrip(ModelFromGraph(GraphBuilder("main")
                                     .Input("n", pb::kInt64)
                                     .Input("x")
                                     .Initializer(RawFloatTensor("w", {4}))
                                     .Node("Loop", {"n", "", "x"}, {"y"}, {AttrGraph("body", body)}, "loop")
                                     .Node("Custom", {"y"}, {"z"}, {AttrGraphs("branches", {g0, g1})})
                                     .Output("z")
                                     .Build()));
}

TEST(IrToProtoTest, EntriesDescribingOneValueDifferently) {
  pb::GraphProto gp = GraphBuilder("main")
                          .Input("x", pb::kFloat, std::vector<int64_t>{2})
                          .Node("Relu", {"x"}, {"y"})
                          .ValueInfo("x", pb::kFloat)                           // input again, no shape
                          .ValueInfo("y", pb::kFloat, std::vector<int64_t>{2})  // y described twice,
                          .ValueInfo("y", pb::kFloat16)                         // differently
                          .ValueInfo("orphan", pb::kInt8)
                          .ValueInfo("orphan", pb::kInt8)
                          .Output("y", pb::kDouble)
                          .Output("x", pb::kFloat, std::vector<int64_t>{2})
                          .Output("y")
                          .Build();
  gp.value_info[1].doc_string = "doc";
  gp.value_info[1].metadata_props.push_back(Entry("k", "v"));
  gp.output[2].unknown_fields = Unknown(7);
  ExpectRoundTrip(ModelFromGraph(gp));

  auto model = FromProto(ModelFromGraph(gp));
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  Value* y = g.FindValue("y");
  // The value's own description is its first entry's; others keep theirs.
  EXPECT_EQ(y->info().doc_string, "doc");
  EXPECT_EQ(g.ValueInfoEntry(2).type->tensor_type->elem_type, pb::kFloat16);
  EXPECT_EQ(g.OutputEntry(0).type->tensor_type->elem_type, pb::kDouble);
  // Editing the value's description applies to every entry from then on.
  y->set_type(TensorType(pb::kInt32));
  for (int i : {1, 2}) EXPECT_EQ(g.ValueInfoEntry(i).type->tensor_type->elem_type, pb::kInt32);
  EXPECT_EQ(g.OutputEntry(0).type->tensor_type->elem_type, pb::kInt32);
  EXPECT_EQ(g.OutputEntry(2).type->tensor_type->elem_type, pb::kInt32);
  EXPECT_EQ(g.InputEntry(0).type->tensor_type->elem_type, pb::kFloat);  // x untouched
}

TEST(IrToProtoTest, UnknownFieldsPresenceBitsAndKeptMessages) {
  pb::ModelProto m = IfModelWithOuterRefs();
  m.unknown_fields = Unknown(1);
  m.MarkPresent(5);  // model_version explicitly 0
  m.doc_string = "model doc";
  m.domain = "test.domain";
  m.producer_version = "1.0";
  m.metadata_props.push_back(Entry("author", "me"));
  pb::OperatorSetIdProto ms;
  ms.domain = "com.microsoft";
  ms.version = 1;
  m.opset_import.push_back(ms);
  pb::FunctionProto f;
  f.name = "F";
  f.domain = "local";
  f.unknown_fields = Unknown(2);
  m.functions.push_back(f);
  pb::TrainingInfoProto ti;
  ti.algorithm = GraphBuilder("algo").Build();
  m.training_info.push_back(ti);
  pb::GraphProto& g = *m.graph;
  g.unknown_fields = Unknown(3);
  g.doc_string = "graph doc";
  g.metadata_props.push_back(Entry("gk", "gv"));
  pb::TensorAnnotation qa;
  qa.tensor_name = "x";
  qa.quant_parameter_tensor_names.push_back(Entry("SCALE_TENSOR", "s"));
  g.quantization_annotation.push_back(qa);
  g.node[0].unknown_fields = Unknown(4);
  g.node[0].MarkPresent(7);  // domain explicitly ""
  g.node[0].attribute[0].unknown_fields = Unknown(5);
  g.node[0].attribute[0].g->unknown_fields = Unknown(6);
  g.input[0].unknown_fields = Unknown(8);
  g.initializer[0].unknown_fields = Unknown(9);
  g.initializer[0].doc_string = "w doc";
  pb::SparseTensorProto sp;
  sp.values = RawFloatTensor("sp", {2});
  sp.indices = RawFloatTensor("", {2});
  sp.dims = {10};
  g.sparse_initializer.push_back(sp);
  ExpectRoundTrip(m);
}

TEST(IrToProtoTest, TensorDataIsNeverCopied) {
  pb::ModelProto m = IfModelWithOuterRefs();
  const char* data = m.graph->initializer[0].raw_data.data();
  auto model = FromProto(std::move(m));
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->graph().FindValue("w")->initializer()->raw_data.data(), data);
  pb::ModelProto copied = ToProto(**model);
  EXPECT_EQ(copied.graph->initializer[0].raw_data.data(), data);
  pb::ModelProto moved = ToProto(std::move(*model));
  EXPECT_EQ(moved.graph->initializer[0].raw_data.data(), data);
}

TEST(IrToProtoTest, LoweringFollowsRenamesAndTypes) {
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  Graph& g = (*model)->graph();
  ASSERT_TRUE(g.RenameValue(g.FindValue("w"), "weight").ok());
  ASSERT_TRUE(g.RenameValue(g.FindValue("x"), "input").ok());
  pb::ModelProto out = ToProto(**model);
  EXPECT_EQ(out.graph->initializer[0].name, "weight");
  EXPECT_EQ(out.graph->input[1].name, "input");
  const pb::GraphProto& then_g = *out.graph->node[0].attribute[0].g;
  EXPECT_EQ(then_g.node[0].input, (std::vector<std::string>{"input", "weight"}));
  // And the renamed model still imports to the same structure.
  auto again = FromProto(out);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(io::Encode(ToProto(**again)), io::Encode(out));
}

TEST(IrToProtoTest, EmptyModelLowersToAnEmptyGraph) {
  Model m;
  pb::ModelProto out = ToProto(m);
  ASSERT_TRUE(out.graph.has_value());
  EXPECT_TRUE(out.graph->node.empty());
  auto back = FromProto(out);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(Verify(**back).ok());
}

TEST(IrToProtoTest, ValueInfoHelperTypes) {
  pb::ValueInfoProto vi = MakeValueInfo("a", pb::kFloat, std::vector<int64_t>{-1, 4});
  ASSERT_TRUE(vi.type.has_value());
  EXPECT_EQ(vi.type->tensor_type->shape->dim[0].dim_param, "d0");
  EXPECT_EQ(vi.type->tensor_type->shape->dim[1].dim_value, 4);
}

}  // namespace
}  // namespace onnxkit::ir
