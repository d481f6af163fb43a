// Tests of the control flow reference kernels (runner/reference/control_flow_*):
// If, Loop and Scan (both forms) on graphs built in code, their error paths
// on malformed bodies and inputs, and the timeout bound on runaway loops.
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;

Tensor Int64(int64_t v) { return MakeTensor<int64_t>(pb::kInt64, {}, {v}); }
Tensor Bool(bool v) { return MakeTensor<uint8_t>(pb::kBool, {}, {static_cast<uint8_t>(v)}); }


absl::StatusOr<std::vector<RtValue>> RunModel(pb::GraphProto graph, std::vector<std::pair<std::string, RtValue>> feeds,
                                              int64_t opset = 17, double timeout = 0) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(std::move(graph), opset);
  runner::SessionOptions options;
  options.timeout_seconds = timeout;
  absl::StatusOr<std::unique_ptr<runner::Session>> session = runner::Session::Create(std::move(loaded), options);
  if (!session.ok()) return session.status();
  return (*session)->Run(std::move(feeds));
}

// --- If ---

pb::GraphProto IfGraph() {
  pb::GraphProto then_branch = GraphBuilder("then").Node("Add", {"x", "x"}, {"t"}).Output("t", pb::kFloat).Build();
  pb::GraphProto else_branch = GraphBuilder("else").Node("Identity", {"x"}, {"e"}).Output("e", pb::kFloat).Build();
  return GraphBuilder("main")
      .Input("c", pb::kBool)
      .Input("x", pb::kFloat)
      .Node("If", {"c"}, {"y"}, {AttrGraph("then_branch", then_branch), AttrGraph("else_branch", else_branch)})
      .Output("y", pb::kFloat)
      .Build();
}

TEST(IfTest, RunsTheChosenBranchWithOuterValues) {
  for (bool c : {true, false}) {
    auto out = RunModel(IfGraph(), {{"c", RtValue::FromTensor(Bool(c))}, {"x", RtValue::FromTensor(Floats({2}, {1, 2}))}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0].tensor()), c ? std::vector<float>({2, 4}) : std::vector<float>({1, 2}));
  }
}

TEST(IfTest, ConditionMustBeOneBool) {
  auto out = RunModel(IfGraph(), {{"c", RtValue::FromTensor(MakeTensor<uint8_t>(pb::kBool, {2}, {1, 0}))},
                                  {"x", RtValue::FromTensor(Floats({1}, {1}))}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("one element"), absl::string_view::npos) << out.status();
}

TEST(IfTest, BranchWithWrongOutputCountIsRejected) {
  pb::GraphProto branch = GraphBuilder("b").Node("Identity", {"x"}, {"e"}).Output("e", pb::kFloat).Build();
  pb::GraphProto g = GraphBuilder("main")
                         .Input("c", pb::kBool)
                         .Input("x", pb::kFloat)
                         .Node("If", {"c"}, {"y", "z"}, {AttrGraph("then_branch", branch), AttrGraph("else_branch", branch)})
                         .Output("y", pb::kFloat)
                         .Build();
  auto out = RunModel(g, {{"c", RtValue::FromTensor(Bool(true))}, {"x", RtValue::FromTensor(Floats({1}, {1}))}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

// --- Loop ---

// acc_out = acc + x each iteration, acc_out also a scan output; cond passes through.
pb::GraphProto SumBody() {
  return GraphBuilder("body")
      .Input("i", pb::kInt64, {{}})
      .Input("cond_in", pb::kBool, {{}})
      .Input("acc", pb::kFloat)
      .Node("Identity", {"cond_in"}, {"cond_out"})
      .Node("Add", {"acc", "x"}, {"acc_out"})
      .Node("Identity", {"acc_out"}, {"scan"})
      .Output("cond_out", pb::kBool)
      .Output("acc_out", pb::kFloat)
      .Output("scan", pb::kFloat, {{2}})
      .Build();
}

pb::GraphProto LoopGraph(pb::GraphProto body, std::vector<std::string> inputs) {
  return GraphBuilder("main")
      .Input("m", pb::kInt64, {{}})
      .Input("c", pb::kBool, {{}})
      .Input("x", pb::kFloat)
      .Input("init", pb::kFloat)
      .Node("Loop", std::move(inputs), {"final", "stacked"}, {AttrGraph("body", std::move(body))})
      .Output("final", pb::kFloat)
      .Output("stacked", pb::kFloat)
      .Build();
}

std::vector<std::pair<std::string, RtValue>> LoopFeeds(int64_t m, bool c) {
  return {{"m", RtValue::FromTensor(Int64(m))},
          {"c", RtValue::FromTensor(Bool(c))},
          {"x", RtValue::FromTensor(Floats({2}, {1, 10}))},
          {"init", RtValue::FromTensor(Floats({2}, {0, 0}))}};
}

TEST(LoopTest, TripCountAccumulatesAndStacksScanOutputs) {
  auto out = RunModel(LoopGraph(SumBody(), {"m", "c", "init"}), LoopFeeds(3, true));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({3, 30}));
  EXPECT_EQ((*out)[1].tensor().shape(), std::vector<int64_t>({3, 2}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({1, 10, 2, 20, 3, 30}));
}

TEST(LoopTest, FalseConditionRunsNoIterationAndGivesEmptyScanOutputs) {
  auto out = RunModel(LoopGraph(SumBody(), {"m", "c", "init"}), LoopFeeds(5, false));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 0}));
  EXPECT_EQ((*out)[1].tensor().shape(), std::vector<int64_t>({0, 2}));  // declared item shape [2]
}

TEST(LoopTest, ConditionComputedByTheBodyStopsAWhileLoop) {
  // M omitted: the body's condition output (a constant false) ends the loop
  // after one iteration.
  pb::TensorProto f;
  f.data_type = pb::kBool;
  f.int32_data = {0};
  pb::GraphProto body = SumBody();
  body.node[0] = MakeNode("Constant", {}, {"cond_out"}, {AttrTensor("value", f)});
  auto out = RunModel(LoopGraph(body, {"", "c", "init"}), LoopFeeds(0, true));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 10}));
  EXPECT_EQ((*out)[1].tensor().shape(), std::vector<int64_t>({1, 2}));
}

TEST(LoopTest, NonPositiveTripCountRunsNothing) {
  auto out = RunModel(LoopGraph(SumBody(), {"m", "", "init"}), LoopFeeds(-7, true));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 0}));
}

TEST(LoopTest, BodyWithWrongInputCountIsRejected) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64)
                            .Input("cond_in", pb::kBool)
                            .Output("cond_in", pb::kBool)
                            .Build();
  auto out = RunModel(LoopGraph(body, {"m", "c", "init"}), LoopFeeds(1, true));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("the body takes 2 inputs"), absl::string_view::npos) << out.status();
}

TEST(LoopTest, TripCountMustBeInt64) {
  pb::GraphProto g = LoopGraph(SumBody(), {"x", "c", "init"});  // float as M
  auto out = RunModel(g, LoopFeeds(1, true));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("trip count"), absl::string_view::npos) << out.status();
}

TEST(LoopTest, ScanOutputsThatChangeShapeAreAnError) {
  // scan item = acc_out, whose shape is fixed; feed init of another shape than x
  // so Add broadcasts: [1] + [2] -> [2] on the first step, then [2] + [2].
  auto feeds = LoopFeeds(2, true);
  feeds[3].second = RtValue::FromTensor(Floats({1}, {0}));
  pb::GraphProto body = SumBody();
  // Make the scan output the loop-carried input instead: shapes [1] then [2].
  body.node[2].input[0] = "acc";
  auto out = RunModel(LoopGraph(body, {"m", "c", "init"}), feeds);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("scan output 0 item"), absl::string_view::npos) << out.status();
}

TEST(LoopTest, HugeTripCountIsBoundedByTheTimeout) {
  auto out = RunModel(LoopGraph(SumBody(), {"m", "c", "init"}), LoopFeeds(std::numeric_limits<int64_t>::max(), true),
                      17, /*timeout=*/0.2);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
}

TEST(LoopTest, EmptyBodyWithoutTripCountIsBoundedByTheTimeout) {
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("acc", pb::kFloat)
                            .Output("cond_in", pb::kBool)
                            .Output("acc", pb::kFloat)
                            .Build();
  pb::GraphProto g = GraphBuilder("main")
                         .Input("c", pb::kBool, {{}})
                         .Input("init", pb::kFloat)
                         .Node("Loop", {"", "c", "init"}, {"final"}, {AttrGraph("body", body)})
                         .Output("final", pb::kFloat)
                         .Build();
  auto out = RunModel(g, {{"c", RtValue::FromTensor(Bool(true))}, {"init", RtValue::FromTensor(Floats({1}, {0}))}}, 17,
                      /*timeout=*/0.2);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
}

// --- Scan ---

// state_out = state + x; y = state_out.
pb::GraphProto ScanBody() {
  return GraphBuilder("body")
      .Input("state", pb::kFloat)
      .Input("x", pb::kFloat)
      .Node("Add", {"state", "x"}, {"state_out"})
      .Node("Identity", {"state_out"}, {"y"})
      .Output("state_out", pb::kFloat)
      .Output("y", pb::kFloat)
      .Build();
}

absl::StatusOr<std::vector<RtValue>> RunScan9(Tensor init, Tensor xs, std::vector<pb::AttributeProto> attrs) {
  attrs.push_back(AttrGraph("body", ScanBody()));
  attrs.push_back(AttrInt("num_scan_inputs", 1));
  pb::GraphProto g = GraphBuilder("main")
                         .Input("init", pb::kFloat)
                         .Input("xs", pb::kFloat)
                         .Node("Scan", {"init", "xs"}, {"final", "ys"}, std::move(attrs))
                         .Output("final", pb::kFloat)
                         .Output("ys", pb::kFloat)
                         .Build();
  return RunModel(g, {{"init", RtValue::FromTensor(std::move(init))}, {"xs", RtValue::FromTensor(std::move(xs))}}, 11);
}

TEST(ScanTest, CumulativeSumAlongAxis0) {
  auto out = RunScan9(Floats({2}, {0, 0}), Floats({3, 2}, {1, 2, 3, 4, 5, 6}), {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({9, 12}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({1, 2, 4, 6, 9, 12}));
}

TEST(ScanTest, ReverseInputAxis1AndOutputAxis1) {
  auto out = RunScan9(Floats({2}, {0, 0}), Floats({2, 3}, {1, 2, 3, 10, 20, 30}),
                      {AttrInts("scan_input_axes", {1}), AttrInts("scan_input_directions", {1}),
                       AttrInts("scan_output_axes", {-1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({6, 60}));
  EXPECT_EQ((*out)[1].tensor().shape(), std::vector<int64_t>({2, 3}));
  // steps see columns 2, 1, 0: running sums 3, 5, 6 and 30, 50, 60.
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({3, 5, 6, 30, 50, 60}));
}

TEST(ScanTest, ReversedOutputDirection) {
  auto out = RunScan9(Floats({1}, {0}), Floats({3, 1}, {1, 2, 3}), {AttrInts("scan_output_directions", {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({6, 3, 1}));
}

TEST(ScanTest, BadAttributesAreRejected) {
  auto out = RunScan9(Floats({1}, {0}), Floats({3, 1}, {1, 2, 3}), {AttrInts("scan_input_directions", {2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("0 or 1"), absl::string_view::npos) << out.status();
  out = RunScan9(Floats({1}, {0}), Floats({3, 1}, {1, 2, 3}), {AttrInts("scan_input_axes", {5})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange) << out.status();
}

TEST(ScanTest, Opset8BatchesWithSequenceLengthsAndZeroPadding) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("lens", pb::kInt64)
                         .Input("init", pb::kFloat)
                         .Input("xs", pb::kFloat)
                         .Node("Scan", {"lens", "init", "xs"}, {"final", "ys"},
                               {AttrGraph("body", ScanBody()), AttrInt("num_scan_inputs", 1),
                                AttrInts("directions", {1})})
                         .Output("final", pb::kFloat)
                         .Output("ys", pb::kFloat)
                         .Build();
  // batch 2, 3 steps of [1]; row 0 uses 2 steps (reversed: x[1], x[0]), row 1 all 3.
  auto out = RunModel(g,
                      {{"lens", RtValue::FromTensor(MakeTensor<int64_t>(pb::kInt64, {2}, {2, 3}))},
                       {"init", RtValue::FromTensor(Floats({2, 1}, {0, 100}))},
                       {"xs", RtValue::FromTensor(Floats({2, 3, 1}, {1, 2, 3, 10, 20, 30}))}},
                      8);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({3, 160}));
  EXPECT_EQ((*out)[1].tensor().shape(), std::vector<int64_t>({2, 3, 1}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({2, 3, 0, 130, 150, 160}));
}

TEST(ScanTest, Opset8SequenceLengthOutOfRange) {
  pb::GraphProto g = GraphBuilder("main")
                         .Input("lens", pb::kInt64)
                         .Input("init", pb::kFloat)
                         .Input("xs", pb::kFloat)
                         .Node("Scan", {"lens", "init", "xs"}, {"final", "ys"},
                               {AttrGraph("body", ScanBody()), AttrInt("num_scan_inputs", 1)})
                         .Output("final", pb::kFloat)
                         .Output("ys", pb::kFloat)
                         .Build();
  auto out = RunModel(g,
                      {{"lens", RtValue::FromTensor(MakeTensor<int64_t>(pb::kInt64, {1}, {4}))},
                       {"init", RtValue::FromTensor(Floats({1, 1}, {0}))},
                       {"xs", RtValue::FromTensor(Floats({1, 3, 1}, {1, 2, 3}))}},
                      8);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange) << out.status();
}

}  // namespace
}  // namespace onnxkit::testing
