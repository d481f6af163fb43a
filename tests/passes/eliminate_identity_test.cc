// Tests of the eliminate-identity pass (passes/eliminate_identity.cc): one
// table of single-node graphs, each either removed (it changes nothing) or a
// near miss that must stay.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runner/convert.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

pb::TensorProto I64(const std::string& name, std::vector<int64_t> v) {
  return InitializerFrom(name, Int64s({static_cast<int64_t>(v.size())}, v));
}
pb::TensorProto F32(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  return InitializerFrom(name, Floats(std::move(dims), v));
}
pb::TensorProto Bool(const std::string& name, bool v) { return InitializerFrom(name, BoolScalar(v)); }

struct Case {
  std::string label;
  std::string op;
  std::vector<std::string> inputs;  // "x" is the float [2, 3] input (after a Neg)
  std::vector<pb::TensorProto> constants;
  std::vector<pb::AttributeProto> attributes;
  bool removed;
  std::vector<int64_t> out_dims = {2, 3};
  int32_t out_type = pb::kFloat;
  int64_t opset = 17;
  bool deterministic = true;
};

// main(x_in: float[2, 3]) { x = Neg(x_in); y = op(inputs...); z = Abs(y) } -> (y, z)
pb::ModelProto SingleNode(const Case& c) {
  GraphBuilder g("main");
  g.Input("x_in", pb::kFloat, {{2, 3}});
  for (const pb::TensorProto& t : c.constants) g.Initializer(t);
  g.Node("Neg", {"x_in"}, {"x"});
  g.Node(c.op, c.inputs, {"y"}, c.attributes, "candidate");
  g.Node("Abs", {"y"}, {"z"});
  g.Output("y", c.out_type, c.out_dims).Output("z", c.out_type, c.out_dims);
  return ModelFromGraph(g.Build(), c.opset);
}

std::vector<Case> Cases() {
  return {
      {"identity", "Identity", {"x"}, {}, {}, true},
      {"dropout_inference", "Dropout", {"x"}, {}, {}, true},
      {"dropout_training_false", "Dropout", {"x", "", "tm"}, {Bool("tm", false)}, {}, true},
      {"dropout_training_true",
       "Dropout",
       {"x", "", "tm"},
       {Bool("tm", true)},
       {},
       false,
       {2, 3},
       pb::kFloat,
       17,
       false},
      {"dropout_training_ratio_zero",
       "Dropout",
       {"x", "r", "tm"},
       {F32("r", {}, {0.f}), Bool("tm", true)},
       {},
       true},
      {"dropout_training_ratio_half",
       "Dropout",
       {"x", "r", "tm"},
       {F32("r", {}, {0.5f}), Bool("tm", true)},
       {},
       false,
       {2, 3},
       pb::kFloat,
       17,
       false},
      {"cast_same", "Cast", {"x"}, {}, {AttrInt("to", pb::kFloat)}, true},
      {"cast_other", "Cast", {"x"}, {}, {AttrInt("to", pb::kDouble)}, false, {2, 3}, pb::kDouble},
      {"concat_one", "Concat", {"x"}, {}, {AttrInt("axis", 0)}, true},
      {"sum_one", "Sum", {"x"}, {}, {}, true},
      {"max_two", "Max", {"x", "x"}, {}, {}, false},
      {"reshape_same", "Reshape", {"x", "s"}, {I64("s", {2, 3})}, {}, true},
      {"reshape_zero_minus_one", "Reshape", {"x", "s"}, {I64("s", {0, -1})}, {}, true},
      {"reshape_other", "Reshape", {"x", "s"}, {I64("s", {3, 2})}, {}, false, {3, 2}},
      {"expand_same", "Expand", {"x", "s"}, {I64("s", {1, 3})}, {}, true},
      {"expand_grows", "Expand", {"x", "s"}, {I64("s", {2, 2, 3})}, {}, false, {2, 2, 3}},
      {"transpose_identity", "Transpose", {"x"}, {}, {AttrInts("perm", {0, 1})}, true},
      {"transpose_swap", "Transpose", {"x"}, {}, {AttrInts("perm", {1, 0})}, false, {3, 2}},
      {"pad_zero", "Pad", {"x", "p"}, {I64("p", {0, 0, 0, 0})}, {}, true},
      {"pad_one", "Pad", {"x", "p"}, {I64("p", {0, 1, 0, 0})}, {}, false, {2, 4}},
      {"slice_all",
       "Slice",
       {"x", "b", "e", "a"},
       {I64("b", {0, -5}), I64("e", {kMax, 3}), I64("a", {1, 0})},
       {},
       true},
      {"slice_part",
       "Slice",
       {"x", "b", "e", "a"},
       {I64("b", {0}), I64("e", {2}), I64("a", {1})},
       {},
       false,
       {2, 2}},
      {"slice_step2",
       "Slice",
       {"x", "b", "e", "a", "st"},
       {I64("b", {0}), I64("e", {kMax}), I64("a", {1}), I64("st", {2})},
       {},
       false,
       {2, 2}},
      {"squeeze_no_ones", "Squeeze", {"x"}, {}, {}, true},
      {"add_zero_row", "Add", {"x", "k"}, {F32("k", {3}, {0, -0.f, 0})}, {}, true},
      {"add_zero_left", "Add", {"k", "x"}, {F32("k", {}, {0})}, {}, true},
      {"add_zero_grows", "Add", {"x", "k"}, {F32("k", {2, 2, 3}, {})}, {}, false, {2, 2, 3}},
      {"add_half", "Add", {"x", "k"}, {F32("k", {}, {0.5f})}, {}, false},
      {"sub_zero", "Sub", {"x", "k"}, {F32("k", {1, 1}, {0})}, {}, true},
      {"zero_sub", "Sub", {"k", "x"}, {F32("k", {}, {0})}, {}, false},
      {"mul_one_left", "Mul", {"k", "x"}, {F32("k", {}, {1})}, {}, true},
      {"div_one", "Div", {"x", "k"}, {F32("k", {2, 1}, {1, 1})}, {}, true},
      {"one_div", "Div", {"k", "x"}, {F32("k", {}, {1})}, {}, false},
      {"pow_one", "Pow", {"x", "k"}, {F32("k", {}, {1})}, {}, true},
  };
}

class EliminateIdentityTest : public ::testing::TestWithParam<Case> {};

TEST_P(EliminateIdentityTest, RemovesExactlyTheNoOps) {
  const Case& c = GetParam();
  pb::ModelProto m = SingleNode(c);
  PassResult r = RunOrFail(m, "eliminate-identity");
  EXPECT_EQ(OpCount(r.model, c.op), c.removed ? 0 : 1);
  EXPECT_EQ(r.rewrites, c.removed ? 1 : 0);
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  if (c.deterministic) ExpectSameOutputs(m, r.model, {{"x_in", RandomFloats({2, 3}, 7)}}, 0, 0);
  ExpectFixedPoint(r.model, "eliminate-identity");
}

INSTANTIATE_TEST_SUITE_P(Rules, EliminateIdentityTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

TEST(EliminateIdentityChainTest, ChainGoesInOneRunAndKeepsTheOutputName) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x_in", pb::kFloat, {{2, 3}})
                                        .Node("Relu", {"x_in"}, {"x"})
                                        .Node("Identity", {"x"}, {"a"})
                                        .Node("Transpose", {"a"}, {"b"}, {AttrInts("perm", {0, 1})})
                                        .Node("Identity", {"b"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build());
  PassResult r = RunOrFail(m, "eliminate-identity");
  EXPECT_EQ(NodeCount(r.model), 1);
  EXPECT_EQ(r.model.graph->node[0].output[0], "y");
  ExpectSameOutputs(m, r.model, {{"x_in", RandomFloats({2, 3}, 3)}}, 0, 0);
}

TEST(EliminateIdentityChainTest, GraphInputToGraphOutputStays) {
  // y = Identity(x) with x a graph input: y cannot be renamed onto x.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("Identity", {"x"}, {"y"})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Build());
  PassResult r = RunOrFail(m, "eliminate-identity");
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(OpCount(r.model, "Identity"), 1);
}

TEST(EliminateIdentityChainTest, MalformedNodesAreLeftAlone) {
  // A perm that is no permutation, a Slice with starts and ends of different
  // lengths, a Reshape without its shape: no change, no crash.
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 3}})
                         .Initializer(I64("b", {0, 0}))
                         .Initializer(I64("e", {kMax}))
                         .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {0, 0})})
                         .Node("Slice", {"t", "b", "e"}, {"s"})
                         .Node("Reshape", {"s"}, {"y"})
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build();
  absl::StatusOr<PassResult> r = RunPasses(ModelFromGraph(g), "eliminate-identity");
  EXPECT_TRUE(!r.ok() || r->rewrites == 0);  // an error or no change
}

TEST(EliminateIdentityChainTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Node("Identity", {"x"}, {"i"})
                            .Node("Relu", {"i"}, {"r"})
                            .Node("Identity", {"r"}, {"out"})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2}}}, {2});
  PassResult r = RunOrFail(m, "eliminate-identity");
  EXPECT_EQ(OpCount(r.model, "Identity"), 0);
  EXPECT_EQ(OpCount(r.model, "Relu"), 2);
  EXPECT_EQ(r.model.graph->node[0].attribute[0].g->output[0].name, "out");
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(false)}, {"x", RandomFloats({2}, 5)}}, 0, 0);
  ExpectFixedPoint(r.model, "eliminate-identity");
}

}  // namespace
}  // namespace onnxkit::testing
