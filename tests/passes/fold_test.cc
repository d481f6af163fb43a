// Tests of the fold pass (passes/fold.cc): constant nodes computed once on
// the reference kernels, within the size budget, proven by execution.
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

PassResult MustRun(const pb::ModelProto& m, std::string_view passes = "fold", passes::ManagerOptions o = {}) {
  absl::StatusOr<PassResult> r = RunPasses(m, passes, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return PassResult{};
  EXPECT_TRUE(r->report.failures.empty()) << r->report.failures[0].message;
  return *std::move(r);
}

bool HasInitializer(const pb::ModelProto& m, std::string_view name) {
  for (const pb::TensorProto& t : m.graph->initializer) {
    if (t.name == name) return true;
  }
  return false;
}

// y = x + (a + b) * a, with a, b initializers.
pb::ModelProto ArithmeticModel() {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2, 3}})
                            .Initializer(RawFloatTensor("a", {2, 3}, 1))
                            .Initializer(RawFloatTensor("b", {2, 3}, -2))
                            .Node("Add", {"a", "b"}, {"ab"})
                            .Node("Mul", {"ab", "a"}, {"m"})
                            .Node("Add", {"x", "m"}, {"y"})
                            .Output("y", pb::kFloat, {{2, 3}})
                            .Build());
}

TEST(FoldTest, FoldsAChainOfConstantNodes) {
  pb::ModelProto m = ArithmeticModel();
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Mul"), 0);
  EXPECT_EQ(OpCount(r.model, "Add"), 1);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_TRUE(HasInitializer(r.model, "m"));
  EXPECT_FALSE(HasInitializer(r.model, "ab"));  // the intermediate constant goes again
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3}, 1)}});
  ExpectValid(r.model);
}

TEST(FoldTest, SecondRunChangesNothing) {
  PassResult first = MustRun(ArithmeticModel());
  PassResult second = MustRun(first.model);
  EXPECT_EQ(second.rewrites, 0);
  EXPECT_EQ(NodeCount(second.model), NodeCount(first.model));
}

TEST(FoldTest, ConstantNodesBecomeInitializersAndGraphOutputsKeepTheirNames) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("main")
          .Input("x", pb::kFloat, {{2}})
          .Node("Constant", {}, {"c"}, {AttrTensor("value", InitializerFrom("", Floats({2}, {1, 2})))})
          .Node("Split", {"c"}, {"s0", "s1"}, {AttrInt("axis", 0)})
          .Node("Concat", {"s1", "s0"}, {"z"}, {AttrInt("axis", 0)})
          .Node("Add", {"x", "c"}, {"y"})
          .Output("y", pb::kFloat, {{2}})
          .Output("z", pb::kFloat, {{2}})
          .Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Constant"), 0);
  EXPECT_EQ(OpCount(r.model, "Split"), 0);
  EXPECT_EQ(OpCount(r.model, "Concat"), 0);
  EXPECT_TRUE(HasInitializer(r.model, "z"));
  ASSERT_EQ(r.model.graph->output.size(), 2u);
  EXPECT_EQ(r.model.graph->output[1].name, "z");
  EXPECT_TRUE(r.model.graph->output[1].type.has_value());
  ExpectValid(r.model);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2}, 2)}});
}

TEST(FoldTest, NodeReadingAGraphInputStays) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Initializer(RawFloatTensor("a", {2, 3}))
                                        .Node("Add", {"x", "a"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(OpCount(r.model, "Add"), 1);
}

// y = x + ConstantOfShape([n, n]) (one float each).
pb::ModelProto GeneratorModel(int64_t n) {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{n, n}})
                            .Initializer(InitializerFrom("shape", Int64s({2}, {n, n})))
                            .Node("ConstantOfShape", {"shape"}, {"c"},
                                  {AttrTensor("value", InitializerFrom("", Floats({1}, {0.5f})))})
                            .Node("Add", {"x", "c"}, {"y"})
                            .Output("y", pb::kFloat, {{n, n}})
                            .Build());
}

TEST(FoldTest, GeneratorOverTheLimitStaysAndFoldsUnderALargerOne) {
  pb::ModelProto m = GeneratorModel(200);  // 160000 bytes > 64 KiB
  EXPECT_EQ(OpCount(MustRun(m).model, "ConstantOfShape"), 1);
  passes::ManagerOptions larger;
  larger.pass.fold_limit_bytes = 1 << 20;
  PassResult r = MustRun(m, "fold", larger);
  EXPECT_EQ(OpCount(r.model, "ConstantOfShape"), 0);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({200, 200}, 3)}});
}

TEST(FoldTest, HugeGeneratorIsRefusedBeforeItRuns) {
  // 10^12 elements: the shape function's prediction keeps it from allocating.
  pb::ModelProto m = GeneratorModel(1000000);
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "ConstantOfShape"), 1);
}

TEST(FoldTest, GrowthWithinTwiceTheInputsFoldsPastTheLimit) {
  passes::ManagerOptions small;
  small.pass.fold_limit_bytes = 16;
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 64}})
                         .Initializer(RawFloatTensor("a", {1, 64}))
                         .Node("Concat", {"a", "a"}, {"c"}, {AttrInt("axis", 0)})  // 2x one input
                         .Node("Add", {"x", "c"}, {"y"})
                         .Output("y", pb::kFloat, {{2, 64}})
                         .Build();
  PassResult r = MustRun(ModelFromGraph(g), "fold", small);
  EXPECT_EQ(OpCount(r.model, "Concat"), 0);
  // Tile is a generator: past the limit even at 2x.
  g = GraphBuilder("main")
          .Input("x", pb::kFloat, {{2, 64}})
          .Initializer(RawFloatTensor("a", {1, 64}))
          .Initializer(InitializerFrom("reps", Int64s({2}, {2, 1})))
          .Node("Tile", {"a", "reps"}, {"c"})
          .Node("Add", {"x", "c"}, {"y"})
          .Output("y", pb::kFloat, {{2, 64}})
          .Build();
  EXPECT_EQ(OpCount(MustRun(ModelFromGraph(g), "fold", small).model, "Tile"), 1);
}

TEST(FoldTest, RandomOpsAndTrainingDropoutStay) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{4}})
                                        .Initializer(RawFloatTensor("a", {4}))
                                        .Initializer(InitializerFrom("ratio", Floats({}, {0.5f})))
                                        .Initializer(InitializerFrom("train", Bools({}, {true})))
                                        .Initializer(InitializerFrom("infer", Bools({}, {false})))
                                        .Node("RandomUniformLike", {"a"}, {"r"})
                                        .Node("RandomNormal", {}, {"n"}, {AttrInts("shape", {4})})
                                        .Node("Dropout", {"a", "ratio", "train"}, {"d"})
                                        .Node("Dropout", {"a", "ratio", "infer"}, {"e"})
                                        .Node("Sum", {"x", "r", "n", "d", "e"}, {"y"})
                                        .Output("y", pb::kFloat, {{4}})
                                        .Build());
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "RandomUniformLike"), 1);
  EXPECT_EQ(OpCount(r.model, "RandomNormal"), 1);
  EXPECT_EQ(OpCount(r.model, "Dropout"), 1);  // only the inference one folds
  EXPECT_EQ(r.rewrites, 1);
}

TEST(FoldTest, KernelErrorsAndForeignDomainsLeaveTheNode) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{6}})
                         .Initializer(RawFloatTensor("a", {2, 3}))
                         .Initializer(InitializerFrom("bad", Int64s({1}, {7})))
                         .Node("Reshape", {"a", "bad"}, {"r"})  // 6 elements into [7]
                         .Node("Relu", {"a"}, {"q"}, {}, "custom")
                         .Node("Add", {"x", "x"}, {"y"})
                         .Output("y", pb::kFloat, {{6}})
                         .Output("r", pb::kFloat)
                         .Output("q", pb::kFloat)
                         .Build();
  g.node[1].domain = "com.example";
  pb::ModelProto m = ModelFromGraph(g);
  pb::OperatorSetIdProto example;
  example.domain = "com.example";
  example.version = 1;
  m.opset_import.push_back(example);
  PassResult r = MustRun(m);
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(OpCount(r.model, "Reshape"), 1);
}

TEST(FoldTest, MalformedModelIsAnErrorOrNoChange) {
  // A node reading a name nothing defines: the IR refuses the model.
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("main").Node("Neg", {"ghost"}, {"y"}).Output("y", pb::kFloat).Build());
  EXPECT_FALSE(RunPasses(m, "fold").ok());
  // A constant the kernel cannot read (raw data too short): no change.
  pb::TensorProto broken = RawFloatTensor("a", {4});
  broken.raw_data = Bytes::Own(std::string(3, '\0'));
  m = ModelFromGraph(
      GraphBuilder("main").Initializer(broken).Node("Neg", {"a"}, {"y"}).Output("y", pb::kFloat).Build());
  absl::StatusOr<PassResult> r = RunPasses(m, "fold");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(OpCount(r->model, "Neg"), 1);
}

// main(c, x) -> y = If(c) then { t = Add(w, w); u = Add(x, t) -> u } else { e = Neg(x) -> e }.
pb::ModelProto IfModel() {
  pb::GraphProto then_branch = GraphBuilder("then")
                                   .Node("Add", {"w", "w"}, {"t"})
                                   .Node("Add", {"x", "t"}, {"u"})
                                   .Output("u", pb::kFloat, {{2}})
                                   .Build();
  pb::GraphProto else_branch =
      GraphBuilder("else").Node("Neg", {"x"}, {"e"}).Output("e", pb::kFloat, {{2}}).Build();
  return ModelFromGraph(
      GraphBuilder("main")
          .Input("c", pb::kBool, {{}})
          .Input("x", pb::kFloat, {{2}})
          .Initializer(RawFloatTensor("w", {2}, 3))
          .Node("If", {"c"}, {"y"},
                {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)})
          .Output("y", pb::kFloat, {{2}})
          .Build());
}

TEST(FoldTest, FoldsInsideIfBodiesWithOuterInitializers) {
  pb::ModelProto m = IfModel();
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Add"), 1);
  EXPECT_EQ(r.rewrites, 1);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", BoolScalar(c)}, {"x", RandomFloats({2}, 4)}});
  }
}

TEST(FoldTest, InitializersThatAreGraphInputsAreNotConstant) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2}})
                         .Input("a", pb::kFloat, {{2}})
                         .Initializer(RawFloatTensor("a", {2}, 1))
                         .Node("Neg", {"a"}, {"n"})
                         .Node("Add", {"x", "n"}, {"y"})
                         .Output("y", pb::kFloat, {{2}})
                         .Build();
  PassResult r = MustRun(ModelFromGraph(g, 17, /*ir_version=*/3));
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(OpCount(r.model, "Neg"), 1);
}

TEST(FoldTest, IrVersion3FoldsIntoConstantNodes) {
  // Before IR 4 every initializer is a graph input: folded values become
  // Constant nodes instead, and Constant nodes stay.
  pb::GraphProto g =
      GraphBuilder("main")
          .Input("x", pb::kFloat, {{2}})
          .Node("Constant", {}, {"c"}, {AttrTensor("value", InitializerFrom("", Floats({2}, {1, 2})))})
          .Node("Neg", {"c"}, {"n"})
          .Node("Exp", {"n"}, {"e"})
          .Node("Add", {"x", "e"}, {"y"})
          .Output("y", pb::kFloat, {{2}})
          .Build();
  pb::ModelProto m = ModelFromGraph(g, 17, /*ir_version=*/3);
  PassResult r = MustRun(m);
  EXPECT_EQ(OpCount(r.model, "Neg"), 0);
  EXPECT_EQ(OpCount(r.model, "Exp"), 0);
  EXPECT_EQ(r.model.graph->initializer.size(), 0u);
  EXPECT_EQ(OpCount(r.model, "Constant"), 2);  // the original (dead: dce's) and e
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2}, 5)}});
  EXPECT_EQ(MustRun(r.model).rewrites, 0);
}

TEST(FoldTest, FunctionBodiesFoldIntoConstantNodes) {
  // local.AddTwo(x) = x + Neg(Neg(2)): a function body holds no initializers.
  pb::FunctionProto f;
  f.name = "AddTwo";
  f.domain = "local";
  f.input = {"fx"};
  f.output = {"fy"};
  f.node = {MakeNode("Constant", {}, {"two"}, {AttrTensor("value", InitializerFrom("", Floats({}, {2})))}),
            MakeNode("Neg", {"two"}, {"n"}), MakeNode("Neg", {"n"}, {"nn"}),
            MakeNode("Add", {"fx", "nn"}, {"fy"})};
  pb::OperatorSetIdProto onnx;
  onnx.version = 17;
  f.opset_import = {onnx};
  pb::GraphProto g = GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2}})
                         .Node("AddTwo", {"x"}, {"y"})
                         .Output("y", pb::kFloat, {{2}})
                         .Build();
  g.node[0].domain = "local";
  pb::ModelProto m = ModelFromGraph(g);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  m.functions.push_back(f);
  PassResult r = MustRun(m);
  ASSERT_EQ(r.model.functions.size(), 1u);
  int negs = 0;
  for (const pb::NodeProto& n : r.model.functions[0].node) negs += n.op_type == "Neg" ? 1 : 0;
  EXPECT_EQ(negs, 0);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2}, 6)}});
}

TEST(FoldTest, QuantizedWeightsStayQuantized) {
  // DequantizeLinear of an int8 weight feeding a Conv: not folded to float.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 1, 4, 4}})
                                        .Initializer(InitializerFrom("wq", Int8s({1, 1, 1, 1}, {3})))
                                        .Initializer(InitializerFrom("ws", Floats({}, {0.5f})))
                                        .Node("DequantizeLinear", {"wq", "ws"}, {"w"}, {}, "dq")
                                        .Node("Conv", {"x", "w"}, {"y"}, {}, "conv")
                                        .Output("y", pb::kFloat, {{1, 1, 4, 4}})
                                        .Build());
  PassResult out = MustRun(m);
  EXPECT_EQ(OpCount(out.model, "DequantizeLinear"), 1);
}

}  // namespace
}  // namespace onnxkit::testing
