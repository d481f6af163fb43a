// Tests of the fuse-rms-norm pass (passes/fuse_rms_norm.cc).
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

const Feeds kFeeds = {{"x", RandomFloats({2, 3, 16}, 1, -2.f, 2.f)}};

struct RmsOptions {
  int64_t opset = 23;
  std::vector<int64_t> axes = {-1};
  bool mul_square = false;                 // Mul(x, x) instead of Pow(x, 2)
  bool reciprocal = false;                 // Mul(x, Reciprocal(s)) instead of Div(x, s)
  std::vector<int64_t> gamma_dims = {16};  // empty: no gamma
  float eps = 1e-6f;
};

// x[2,3,16] -> the decomposed RMS normalization -> y -> Identity -> out
GraphBuilder RmsNorm(const RmsOptions& o) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 3, 16}});
  if (o.mul_square) {
    g.Node("Mul", {"x", "x"}, {"p"});
  } else {
    g.Initializer(InitializerFrom("two", fuse::FloatValues({}, {2.f}))).Node("Pow", {"x", "two"}, {"p"});
  }
  g.Initializer(InitializerFrom("axes", fuse::Ints({static_cast<int64_t>(o.axes.size())}, o.axes)))
      .Node("ReduceMean", {"p", "axes"}, {"m"})
      .Initializer(InitializerFrom("eps", fuse::FloatValues({}, {o.eps})))
      .Node("Add", {"eps", "m"}, {"e"})
      .Node("Sqrt", {"e"}, {"s"});
  if (o.reciprocal) {
    g.Node("Reciprocal", {"s"}, {"r"}).Node("Mul", {"x", "r"}, {"n"});
  } else {
    g.Node("Div", {"x", "s"}, {"n"});
  }
  std::string out = "n";
  if (!o.gamma_dims.empty()) {
    g.Initializer(InitializerFrom("gamma", RandomFloats(o.gamma_dims, 2, 0.5f, 1.5f)))
        .Node("Mul", {"n", "gamma"}, {"y"});
    out = "y";
  }
  g.Node("Identity", {out}, {"out"}).Output("out", pb::kFloat, {{2, 3, 16}});
  return g;
}

void ExpectFused(const RmsOptions& o, int64_t axis) {
  pb::ModelProto m = ModelFromGraph(RmsNorm(o).Build(), o.opset);
  PassResult r = fuse::Run(m, "fuse-rms-norm");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "RMSNormalization"), 1);
  EXPECT_EQ(NodeCount(r.model), 2);  // RMSNormalization, Identity
  for (const pb::AttributeProto& a : r.model.graph->node[0].attribute) {
    if (a.name == "axis") {
      EXPECT_EQ(a.i, axis);
    }
    if (a.name == "epsilon") {
      EXPECT_FLOAT_EQ(a.f, o.eps);
    }
  }
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-rms-norm");
}

TEST(FuseRmsNormTest, FusesTheExportedPattern) {
  ExpectFused({}, -1);
  ExpectFused({.mul_square = true}, -1);
  ExpectFused({.reciprocal = true}, -1);
  ExpectFused({.gamma_dims = {}}, -1);  // ones created as the scale
  ExpectFused({.axes = {2}}, -1);
  ExpectFused({.axes = {1, 2}, .gamma_dims = {3, 16}}, -2);
  ExpectFused({.gamma_dims = {1}, .eps = 1e-5f}, -1);
}

TEST(FuseRmsNormTest, NearMissesDoNotFire) {
  ExpectNoChange(ModelFromGraph(RmsNorm({.opset = 22}).Build(), 22), "fuse-rms-norm");  // opset below 23
  ExpectNoChange(ModelFromGraph(RmsNorm({.axes = {1}}).Build(), 23), "fuse-rms-norm");  // not the last axis
  {
    SCOPED_TRACE("the mean of squares is also a graph output");
    GraphBuilder g = RmsNorm({});
    g.Output("m", pb::kFloat);
    ExpectNoChange(ModelFromGraph(g.Build(), 23), "fuse-rms-norm");
  }
  {
    SCOPED_TRACE("Div of another tensor");
    pb::GraphProto g = RmsNorm({}).Build();
    g.input.push_back(MakeValueInfo("x2", pb::kFloat, std::vector<int64_t>{2, 3, 16}));
    for (pb::NodeProto& n : g.node) {
      if (n.op_type == "Div") n.input[0] = "x2";
    }
    ExpectNoChange(ModelFromGraph(g, 23), "fuse-rms-norm");
  }
  {
    SCOPED_TRACE("epsilon fed at run time");
    pb::GraphProto g = RmsNorm({}).Build();
    std::erase_if(g.initializer, [](const pb::TensorProto& t) { return t.name == "eps"; });
    g.input.push_back(MakeValueInfo("eps", pb::kFloat, std::vector<int64_t>{}));
    ExpectNoChange(ModelFromGraph(g, 23), "fuse-rms-norm");
  }
}

TEST(FuseRmsNormTest, MalformedModelsAreLeftAlone) {
  ExpectNoChange(ModelFromGraph(RmsNorm({.axes = {3}}).Build(), 23), "fuse-rms-norm");  // axis out of range
  pb::GraphProto g = RmsNorm({}).Build();
  for (pb::NodeProto& n : g.node) {
    if (n.op_type == "ReduceMean") n.input.resize(1);  // no axes
  }
  ExpectNoChange(ModelFromGraph(g, 23), "fuse-rms-norm");
  // gamma of the wrong size stays a Mul after the fused op (ones as the scale).
  PassResult r = fuse::Run(ModelFromGraph(RmsNorm({.gamma_dims = {5}}).Build(), 23), "fuse-rms-norm");
  EXPECT_EQ(OpCount(r.model, "Mul"), 1);
}

TEST(FuseRmsNormTest, FusesInsideAnIfBody) {
  pb::ModelProto m = fuse::InIf(RmsNorm({.reciprocal = true}).Build(), "out", {2, 3, 16}, {2, 3, 16}, 23);
  PassResult r = fuse::Run(m, "fuse-rms-norm");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "RMSNormalization"), 2);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]}, 1e-4,
                      1e-4);
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-rms-norm");
}

}  // namespace
}  // namespace onnxkit::testing
