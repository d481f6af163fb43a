// Tests of the fuse-pad pass (passes/fuse_pad.cc).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/fuse_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

using fuse::ExpectFixedPoint;
using fuse::ExpectNoChange;

const Feeds kFeeds = {{"x", RandomFloats({1, 3, 8, 8}, 1)}};

struct PadOptions {
  int64_t opset = 18;
  std::vector<int64_t> pads = {0, 0, 1, 2, 0, 0, 2, 1};
  std::vector<int64_t> axes;  // opset 18+: the axes input when not empty
  float value = 0;
  std::string mode = "constant";
  std::string consumer = "Conv";
  std::vector<pb::AttributeProto> consumer_attrs = {AttrInts("pads", {1, 0, 0, 1})};
};

// x[1,3,8,8] -> Pad -> Conv(w[4,3,3,3]) / pooling -> z
pb::ModelProto PadModel(const PadOptions& o) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 3, 8, 8}});
  if (o.opset < 11) {
    g.Node("Pad", {"x"}, {"p"},
           {AttrInts("pads", o.pads), AttrFloat("value", o.value), AttrString("mode", o.mode)}, "pad");
  } else {
    std::vector<std::string> inputs = {"x", "pads", "cv"};
    g.Initializer(InitializerFrom("pads", fuse::Ints({static_cast<int64_t>(o.pads.size())}, o.pads)))
        .Initializer(InitializerFrom("cv", fuse::FloatValues({}, {o.value})));
    if (!o.axes.empty()) {
      g.Initializer(InitializerFrom("axes", fuse::Ints({static_cast<int64_t>(o.axes.size())}, o.axes)));
      inputs.push_back("axes");
    }
    g.Node("Pad", inputs, {"p"}, {AttrString("mode", o.mode)}, "pad");
  }
  if (o.consumer == "Conv") {
    g.Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 2)))
        .Node("Conv", {"p", "w"}, {"z"}, o.consumer_attrs);
  } else {
    std::vector<pb::AttributeProto> attrs = o.consumer_attrs;
    attrs.push_back(AttrInts("kernel_shape", {3, 3}));
    g.Node(o.consumer, {"p"}, {"z"}, attrs);
  }
  g.Output("z", pb::kFloat);
  return ModelFromGraph(g.Build(), o.opset);
}

std::vector<int64_t> ConsumerPads(const pb::ModelProto& m) {
  for (const pb::NodeProto& n : m.graph->node) {
    for (const pb::AttributeProto& a : n.attribute) {
      if (a.name == "pads" && n.op_type != "Pad") return a.ints;
    }
  }
  return {};
}

TEST(FusePadTest, FoldsZeroPadIntoConvPads) {
  for (int64_t opset : {10, 13, 18}) {
    SCOPED_TRACE(opset);
    pb::ModelProto m = PadModel({.opset = opset});
    PassResult r = fuse::Run(m, "fuse-pad");
    EXPECT_EQ(r.rewrites, 1);
    EXPECT_EQ(OpCount(r.model, "Pad"), 0);
    EXPECT_EQ(ConsumerPads(r.model), (std::vector<int64_t>{2, 2, 2, 2}));
    EXPECT_EQ(r.model.graph->initializer.size(), 1u);  // pads and value constants dropped
    ExpectSameOutputs(m, r.model, kFeeds);
    ExpectValid(r.model);
    ExpectFixedPoint(r.model, "fuse-pad");
  }
}

TEST(FusePadTest, FoldsPadWithAxesAndIntoAveragePool) {
  pb::ModelProto axes = PadModel({.pads = {1, 2, 2, 1}, .axes = {-2, 3}});
  PassResult r = fuse::Run(axes, "fuse-pad");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(ConsumerPads(r.model), (std::vector<int64_t>{2, 2, 2, 2}));
  ExpectSameOutputs(axes, r.model, kFeeds);

  pb::ModelProto pool =
      PadModel({.consumer = "AveragePool", .consumer_attrs = {AttrInt("count_include_pad", 1)}});
  r = fuse::Run(pool, "fuse-pad");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(ConsumerPads(r.model), (std::vector<int64_t>{1, 2, 2, 1}));
  ExpectSameOutputs(pool, r.model, kFeeds);
  ExpectValid(r.model);

  // A pool without pads that excludes pads (the exporters' Pad +
  // AveragePool): it takes the pads and counts them, as it counted the
  // padded zeros.
  for (int64_t opset : {10, 18}) {
    pb::ModelProto plain = PadModel({.opset = opset, .consumer = "AveragePool", .consumer_attrs = {}});
    r = fuse::Run(plain, "fuse-pad");
    EXPECT_EQ(r.rewrites, 1);
    EXPECT_EQ(OpCount(r.model, "Pad"), 0);
    EXPECT_EQ(ConsumerPads(r.model), (std::vector<int64_t>{1, 2, 2, 1}));
    ExpectSameOutputs(plain, r.model, kFeeds);
    ExpectValid(r.model);
  }
}

TEST(FusePadTest, NearMissesDoNotFire) {
  ExpectNoChange(PadModel({.value = 1.5f}), "fuse-pad");
  ExpectNoChange(PadModel({.mode = "reflect"}), "fuse-pad");
  ExpectNoChange(PadModel({.pads = {0, 1, 1, 1, 0, 0, 1, 1}}), "fuse-pad");   // pads the channels
  ExpectNoChange(PadModel({.pads = {0, 0, -1, 1, 0, 0, 1, 1}}), "fuse-pad");  // crops
  ExpectNoChange(PadModel({.consumer = "MaxPool", .consumer_attrs = {}}), "fuse-pad");
  // Excludes its own pads, which the Pad's zeros would join.
  ExpectNoChange(PadModel({.consumer = "AveragePool", .consumer_attrs = {AttrInts("pads", {1, 0, 0, 1})}}),
                 "fuse-pad");
  ExpectNoChange(PadModel({.consumer = "AveragePool",
                           .consumer_attrs = {AttrInt("count_include_pad", 1), AttrInt("ceil_mode", 1)}}),
                 "fuse-pad");
  ExpectNoChange(PadModel({.consumer_attrs = {AttrString("auto_pad", "SAME_UPPER")}}), "fuse-pad");
  // The padded tensor is also a graph output.
  pb::ModelProto m = PadModel({});
  m.graph->output.push_back(MakeValueInfo("p", pb::kFloat));
  ExpectNoChange(m, "fuse-pad");
}

TEST(FusePadTest, MalformedModelsAreLeftAlone) {
  ExpectNoChange(PadModel({.pads = {1, 1, 1}}), "fuse-pad");                             // odd pads length
  ExpectNoChange(PadModel({.pads = {1, 1, 1, 1}, .axes = {2, 2}}), "fuse-pad");          // repeated axis
  ExpectNoChange(PadModel({.pads = {1, 1}, .axes = {7}}), "fuse-pad");                   // axis out of range
  ExpectNoChange(PadModel({.consumer_attrs = {AttrInts("pads", {1, 1})}}), "fuse-pad");  // short Conv pads
}

TEST(FusePadTest, FoldsInsideAnIfBody) {
  pb::GraphProto body = *PadModel({}).graph;
  pb::ModelProto m = fuse::InIf(body, "z", {1, 3, 8, 8}, {1, 4, 10, 10}, 18);
  PassResult r = fuse::Run(m, "fuse-pad");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "Pad"), 0);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]});
  }
  ExpectFixedPoint(r.model, "fuse-pad");
}

}  // namespace
}  // namespace onnxkit::testing
