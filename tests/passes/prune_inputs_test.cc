// Tests of the prune-inputs pass (passes/prune_inputs.cc).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

std::vector<std::string> InputNames(const pb::GraphProto& g) {
  std::vector<std::string> names;
  for (const pb::ValueInfoProto& v : g.input) names.push_back(v.name);
  return names;
}

TEST(PruneInputsTest, RemovesUnusedInputsOnly) {
  // IR 3: "w" (initializer listed as input) and "z" are unused; "p" is
  // passed straight through to an output; "x" is used.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Input("z", pb::kFloat, {{2}})
                                        .Input("p", pb::kFloat, {{2}})
                                        .Input("w", pb::kFloat, {{2}})
                                        .Initializer(RawFloatTensor("w", {2}))
                                        .Node("Neg", {"x"}, {"y"})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Output("p", pb::kFloat, {{2}})
                                        .Build(),
                                    17, 3);
  PassResult r = RunOrFail(m, "prune-inputs");
  EXPECT_EQ(InputNames(*r.model.graph), (std::vector<std::string>{"x", "p"}));
  EXPECT_TRUE(r.model.graph->initializer.empty());
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2}, 1)}, {"z", RandomFloats({2}, 3)}, {"p", RandomFloats({2}, 2)}}, 0, 0);
  ExpectFixedPoint(r.model, "prune-inputs");
}

TEST(PruneInputsTest, InputsUsedInSubgraphsStayAndBodiesAreUntouched) {
  pb::ModelProto m = IfModelWithOuterRefs();
  PassResult r = RunOrFail(m, "prune-inputs");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(InputNames(*r.model.graph), (std::vector<std::string>{"c", "x"}));
}

TEST(PruneInputsTest, BodyInputsAreNeverRemoved) {
  // A Loop body's inputs are positional: an unused one stays.
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond", pb::kBool, {{}})
                            .Input("acc", pb::kFloat, {{2}})
                            .Node("Identity", {"cond"}, {"cond_out"})
                            .Node("Neg", {"acc"}, {"acc_out"})
                            .Output("cond_out", pb::kBool, {{}})
                            .Output("acc_out", pb::kFloat, {{2}})
                            .Build();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("n", pb::kInt64, {{}})
                                        .Input("c", pb::kBool, {{}})
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Loop", {"n", "c", "x"}, {"y"}, {AttrGraph("body", body)})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Build());
  PassResult r = RunOrFail(m, "prune-inputs");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(r.model.graph->node[0].attribute[0].g->input.size(), 3u);
}

TEST(PruneInputsTest, GraphWithoutNodesIsLeftAlone) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("main").Input("x", pb::kFloat, {{2}}).Input("z").Output("x", pb::kFloat, {{2}}).Build());
  absl::StatusOr<PassResult> r = RunPasses(m, "prune-inputs");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model.graph->input.size(), 2u);
}

}  // namespace
}  // namespace onnxkit::testing
