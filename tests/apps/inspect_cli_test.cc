// End-to-end tests of `onnxkit inspect`: output on real models and every
// error path with its exit code.
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

std::string LightModel(const std::string& name) {
  return TestdataPath("models/light/light_" + name + ".onnx").string();
}

TEST(InspectCliTest, SummarizesAModel) {
  CliResult r = RunCli({"inspect", LightModel("resnet50")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ir version:"));
  EXPECT_THAT(r.out, HasSubstr("ai.onnx 9"));
  EXPECT_THAT(r.out, HasSubstr("Conv"));
  EXPECT_THAT(r.out, HasSubstr("tensor(float) [1, 3, 224, 224]"));
  EXPECT_EQ(r.err, "");
}

TEST(InspectCliTest, JsonIsCompleteAndDeterministic) {
  CliResult a = RunCli({"inspect", "--json", LightModel("squeezenet")});
  CliResult b = RunCli({"inspect", "--format", "json", LightModel("squeezenet")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  for (const char* key : {"\"ir_version\"", "\"opset_import\"", "\"inputs\"", "\"outputs\"",
                          "\"op_histogram\"", "\"initializers\"", "\"parameter_count\"", "\"functions\"",
                          "\"metadata\"", "\"subgraphs\""}) {
    EXPECT_THAT(a.out, HasSubstr(key));
  }
  EXPECT_THAT(a.out, StartsWith("{"));
}

TEST(InspectCliTest, BodyInitializersCountWithTheMainGraphs) {
  // An If whose then branch holds a 2x3 weight of its own.
  GraphBuilder then_b("then");
  then_b.Initializer(RawFloatTensor("w", {2, 3}, 1))
      .Node("Add", {"x", "w"}, {"t"})
      .Output("t", pb::kFloat, {{2, 3}});
  GraphBuilder else_b("else");
  else_b.Node("Identity", {"x"}, {"e"}).Output("e", pb::kFloat, {{2, 3}});
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("c", pb::kBool, {{}})
          .Input("x", pb::kFloat, {{2, 3}})
          .Initializer(RawFloatTensor("b", {3}, 0))
          .Node("If", {"c"}, {"i"},
                {AttrGraph("then_branch", then_b.Build()), AttrGraph("else_branch", else_b.Build())})
          .Node("Add", {"i", "b"}, {"y"})
          .Output("y", pb::kFloat, {{2, 3}})
          .Build());
  fs::path dir = MakeTempDir();
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "m.onnx").ok());
  CliResult r = RunCli({"inspect", "--json", (dir / "m.onnx").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"count\": 2,"));
  EXPECT_THAT(r.out, HasSubstr("\"parameter_count\": 9,"));
}

// A sparse initializer of dense shape [4, 5] with 2 non-zeros: 20
// parameters (the tensor the model computes with), 2 values and 2 indices
// stored.
TEST(InspectCliTest, SparseInitializersCountTheirDenseShape) {
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, {{4, 5}}).Node("Add", {"x", "w"}, {"y"}).Output("y", pb::kFloat, {{4, 5}});
  pb::GraphProto g = b.Build();
  pb::SparseTensorProto sp;
  sp.dims = {4, 5};
  pb::TensorProto values, indices;
  values.name = "w";
  values.data_type = pb::kFloat;
  values.dims = {2};
  values.float_data = {1.5f, -2};
  indices.data_type = pb::kInt64;
  indices.dims = {2};
  indices.int64_data = {3, 17};
  sp.values = std::move(values);
  sp.indices = std::move(indices);
  g.sparse_initializer.push_back(std::move(sp));
  fs::path dir = MakeTempDir();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(std::move(g)), dir, dir / "m.onnx").ok());
  CliResult r = RunCli({"inspect", "--json", (dir / "m.onnx").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"parameter_count\": 20,"));
  EXPECT_THAT(r.out, HasSubstr("\"sparse_count\": 1,"));
  EXPECT_THAT(r.out, HasSubstr("\"inline_bytes\": 24,"));  // 2 floats, 2 int64s
}

TEST(InspectCliTest, NodesListsEveryNode) {
  CliResult r = RunCli({"inspect", "--nodes", LightModel("vgg19")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] "));
  EXPECT_THAT(r.out, HasSubstr(" -> ("));
}

TEST(InspectCliTest, DotIsAGraphvizDigraph) {
  CliResult r = RunCli({"inspect", "--format", "dot", LightModel("bvlc_alexnet")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("digraph onnx {"));
  EXPECT_THAT(r.out, HasSubstr("->"));
}

TEST(InspectCliTest, MissingFileExits3) {
  CliResult r = RunCli({"inspect", "/nonexistent/model.onnx"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("onnxkit: error: /nonexistent/model.onnx"));
}

TEST(InspectCliTest, DirectoryExits3) {
  CliResult r = RunCli({"inspect", TestdataPath("models").string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("directory"));
}

TEST(InspectCliTest, NotAModelExits3) {
  auto dir = MakeTempDir();
  std::ofstream(dir / "notes.onnx") << "this is not a model at all\n";
  CliResult r = RunCli({"inspect", (dir / "notes.onnx").string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("not"));
  EXPECT_EQ(r.signal, 0);
}

TEST(InspectCliTest, BadFlagExits2) {
  CliResult r = RunCli({"inspect", "--frobnicate", LightModel("bvlc_alexnet")});
  EXPECT_EQ(r.exit_code, 2);
  CliResult f = RunCli({"inspect", "--format", "yaml", LightModel("bvlc_alexnet")});
  EXPECT_EQ(f.exit_code, 2);
  CliResult none = RunCli({});
  EXPECT_EQ(none.exit_code, 2);
}

TEST(InspectCliTest, HelpExits0) {
  CliResult r = RunCli({"inspect", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--format"));
}

}  // namespace
}  // namespace onnxkit::testing
