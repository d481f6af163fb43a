// Tests of the dedupe-initializers pass (passes/dedupe_initializers.cc).
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

// The same values as RawFloatTensor(name, dims, first), in float_data.
pb::TensorProto TypedFloatTensor(std::string name, std::vector<int64_t> dims, float first = 0) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  t.dims = std::move(dims);
  for (int64_t i = 0; i < count; ++i) t.float_data.push_back(first + static_cast<float>(i));
  return t;
}

std::vector<std::string> InitializerNames(const pb::GraphProto& g) {
  std::vector<std::string> names;
  for (const pb::TensorProto& t : g.initializer) names.push_back(t.name);
  return names;
}

TEST(DedupeInitializersTest, MergesEqualTypeShapeAndBytes) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Input("v", pb::kFloat, {{6}})
                                        .Initializer(RawFloatTensor("w1", {2, 3}))
                                        .Initializer(RawFloatTensor("w2", {2, 3}))
                                        .Initializer(TypedFloatTensor("w3", {2, 3}))
                                        .Initializer(RawFloatTensor("w4", {2, 3}, 1))  // other values
                                        .Initializer(RawFloatTensor("w5", {6}))        // other dims
                                        .Node("Add", {"x", "w1"}, {"a"})
                                        .Node("Mul", {"a", "w2"}, {"b"})
                                        .Node("Sub", {"b", "w3"}, {"c"})
                                        .Node("Add", {"c", "w4"}, {"y"})
                                        .Node("Add", {"v", "w5"}, {"z"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Output("z", pb::kFloat, {{6}})
                                        .Build());
  PassResult r = RunOrFail(m, "dedupe-initializers");
  EXPECT_EQ(InitializerNames(*r.model.graph), (std::vector<std::string>{"w1", "w4", "w5"}));
  EXPECT_EQ(r.model.graph->node[1].input[1], "w1");
  EXPECT_EQ(r.model.graph->node[2].input[1], "w1");
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 1)}, {"v", RandomFloats({6}, 2)}}, 0, 0);
  ExpectFixedPoint(r.model, "dedupe-initializers");
}

TEST(DedupeInitializersTest, FeedableAndOutputInitializersStay) {
  // IR 3: "w2" is also a graph input, so it can be fed: not a constant.
  // "w3" is a graph output: its name must stay.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Input("w2", pb::kFloat, {{2}})
                                        .Initializer(RawFloatTensor("w1", {2}))
                                        .Initializer(RawFloatTensor("w2", {2}))
                                        .Initializer(RawFloatTensor("w3", {2}))
                                        .Node("Add", {"x", "w1"}, {"a"})
                                        .Node("Add", {"a", "w2"}, {"b"})
                                        .Node("Add", {"b", "w3"}, {"y"})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Output("w3", pb::kFloat, {{2}})
                                        .Build(),
                                    17, 3);
  PassResult r = RunOrFail(m, "dedupe-initializers");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(r.model.graph->initializer.size(), 3u);
}

TEST(DedupeInitializersTest, ComparesExternalDataBytes) {
  std::filesystem::path dir = MakeTempDir();
  std::string bytes = FloatBytes(4, 1) + FloatBytes(4, 1) + FloatBytes(4, 2);
  std::ofstream(dir / "weights.bin", std::ios::binary) << bytes;
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{4}})
                                        .Initializer(ExternalTensor("e1", {4}, pb::kFloat, "weights.bin", 0, 16))
                                        .Initializer(ExternalTensor("e2", {4}, pb::kFloat, "weights.bin", 16, 16))
                                        .Initializer(ExternalTensor("e3", {4}, pb::kFloat, "weights.bin", 32, 16))
                                        .Initializer(RawFloatTensor("r", {4}, 1))
                                        .Node("Add", {"x", "e1"}, {"a"})
                                        .Node("Add", {"a", "e2"}, {"b"})
                                        .Node("Add", {"b", "e3"}, {"c"})
                                        .Node("Add", {"c", "r"}, {"y"})
                                        .Output("y", pb::kFloat, {{4}})
                                        .Build());
  passes::ManagerOptions options;
  options.base_dir = dir;
  absl::StatusOr<PassResult> r = RunPasses(m, "dedupe-initializers", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(InitializerNames(*r->model.graph), (std::vector<std::string>{"e1", "e3"}));
  // Without a folder the external tensors cannot be read: they stay, and
  // nothing fails.
  absl::StatusOr<PassResult> blind = RunPasses(m, "dedupe-initializers");
  ASSERT_TRUE(blind.ok()) << blind.status();
  EXPECT_EQ(blind->rewrites, 0);
  std::filesystem::remove_all(dir);
}

TEST(DedupeInitializersTest, MalformedDataNeverCrashes) {
  // Raw data of the wrong size for the dims (both tensors): no crash.
  pb::TensorProto bad1 = RawFloatTensor("b1", {2});
  bad1.dims = {3};
  pb::TensorProto bad2 = RawFloatTensor("b2", {3});
  bad2.raw_data = Bytes::Copy("abc");
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{3}})
                                        .Initializer(bad1)
                                        .Initializer(bad2)
                                        .Node("Add", {"x", "b1"}, {"a"})
                                        .Node("Add", {"a", "b2"}, {"y"})
                                        .Output("y", pb::kFloat, {{3}})
                                        .Build());
  absl::StatusOr<PassResult> r = RunPasses(m, "dedupe-initializers");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
}

TEST(DedupeInitializersTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Initializer(RawFloatTensor("k1", {2}, 3))
                            .Initializer(RawFloatTensor("k2", {2}, 3))
                            .Node("Add", {"x", "k1"}, {"t"})
                            .Node("Mul", {"t", "k2"}, {"out"})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2}}}, {2});
  PassResult r = RunOrFail(m, "dedupe-initializers");
  EXPECT_EQ(r.rewrites, 2);  // one per branch
  EXPECT_EQ(r.model.graph->node[0].attribute[0].g->initializer.size(), 1u);
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({2}, 3)}}, 0, 0);
  ExpectFixedPoint(r.model, "dedupe-initializers");
}

}  // namespace
}  // namespace onnxkit::testing
