// Tests of the fuse-layer-norm pass (passes/fuse_layer_norm.cc).
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

const Feeds kFeeds = {{"x", RandomFloats({2, 4, 8}, 1, -2.f, 3.f)}};

struct LnOptions {
  int64_t opset = 17;
  std::vector<int64_t> axes = {-1};
  std::vector<int64_t> var_axes = {-1};
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  float exponent = 2;
  std::vector<int64_t> gamma_dims = {8};  // empty: no Mul by gamma
  bool beta = true;
  bool declare_x = true;  // x's shape declared
};

// x[2,4,8] -> the decomposed layer normalization -> y
GraphBuilder LayerNorm(const LnOptions& o) {
  GraphBuilder g("main");
  if (o.declare_x) {
    g.Input("x", pb::kFloat, {{2, 4, 8}});
  } else {
    g.Input("x", pb::kFloat);
  }
  auto reduce = [&](const std::string& in, const std::string& out, const std::vector<int64_t>& axes) {
    if (o.opset < 18) {
      g.Node("ReduceMean", {in}, {out}, {AttrInts("axes", axes)});
    } else {
      g.Initializer(InitializerFrom(out + "_axes", fuse::Ints({static_cast<int64_t>(axes.size())}, axes)));
      g.Node("ReduceMean", {in, out + "_axes"}, {out});
    }
  };
  reduce("x", "m", o.axes);
  g.Node("Sub", {"x", "m"}, {"d"});
  if (o.mul_square) {
    g.Node("Mul", {"d", "d"}, {"p"});
  } else {
    g.Initializer(InitializerFrom("two", fuse::FloatValues({}, {o.exponent})))
        .Node("Pow", {"d", "two"}, {"p"});
  }
  reduce("p", "v", o.var_axes);
  g.Initializer(InitializerFrom("eps", fuse::FloatValues({}, {1e-5f})))
      .Node("Add", {"v", "eps"}, {"e"})
      .Node("Sqrt", {"e"}, {"s"})
      .Node("Div", {"d", "s"}, {"n"});
  std::string out = "n";
  if (!o.gamma_dims.empty()) {
    g.Initializer(InitializerFrom("gamma", RandomFloats(o.gamma_dims, 2, 0.5f, 1.5f)))
        .Node("Mul", {"gamma", out}, {"g"});
    out = "g";
    if (o.beta) {
      g.Initializer(InitializerFrom("beta", RandomFloats(o.gamma_dims, 3))).Node("Add", {out, "beta"}, {"y"});
      out = "y";
    }
  }
  g.Node("Identity", {out}, {"out"}).Output("out", pb::kFloat);
  return g;
}

void ExpectFused(const LnOptions& o, int64_t axis) {
  pb::ModelProto m = ModelFromGraph(LayerNorm(o).Build(), o.opset);
  PassResult r = fuse::Run(m, "fuse-layer-norm");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "LayerNormalization"), 1);
  EXPECT_EQ(NodeCount(r.model), 2);  // LayerNormalization, Identity
  for (const pb::NodeProto& n : r.model.graph->node) {
    if (n.op_type != "LayerNormalization") continue;
    for (const pb::AttributeProto& a : n.attribute) {
      if (a.name == "axis") {
        EXPECT_EQ(a.i, axis);
      }
      if (a.name == "epsilon") {
        EXPECT_FLOAT_EQ(a.f, 1e-5f);
      }
    }
  }
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-layer-norm");
}

TEST(FuseLayerNormTest, FusesTheExportedPattern) {
  ExpectFused({}, -1);
  ExpectFused({.opset = 18}, -1);
  ExpectFused({.opset = 18, .mul_square = true}, -1);
  ExpectFused({.axes = {2}, .var_axes = {-1}}, -1);
  ExpectFused({.beta = false}, -1);
  ExpectFused({.gamma_dims = {}}, -1);  // ones created as the scale
  ExpectFused({.axes = {-1, -2}, .var_axes = {1, 2}, .gamma_dims = {4, 8}}, -2);
  ExpectFused({.axes = {-1}, .var_axes = {-1}, .gamma_dims = {1}, .declare_x = false}, -1);
}

TEST(FuseLayerNormTest, NearMissesDoNotFire) {
  ExpectNoChange(ModelFromGraph(LayerNorm({}).Build(), 16), "fuse-layer-norm");  // opset below 17
  ExpectNoChange(ModelFromGraph(LayerNorm({.axes = {1}, .var_axes = {1}}).Build(), 17), "fuse-layer-norm");
  ExpectNoChange(ModelFromGraph(LayerNorm({.axes = {-1}, .var_axes = {-2}}).Build(), 17), "fuse-layer-norm");
  ExpectNoChange(ModelFromGraph(LayerNorm({.exponent = 3}).Build(), 17), "fuse-layer-norm");
  // Positive axes and an unknown rank; ones needed but the dims are unknown.
  ExpectNoChange(ModelFromGraph(LayerNorm({.axes = {2}, .var_axes = {2}, .declare_x = false}).Build(), 17),
                 "fuse-layer-norm");
  ExpectNoChange(ModelFromGraph(LayerNorm({.gamma_dims = {}, .declare_x = false}).Build(), 17),
                 "fuse-layer-norm");
  {
    SCOPED_TRACE("centered value used elsewhere");
    GraphBuilder g = LayerNorm({});
    g.Output("d", pb::kFloat);
    ExpectNoChange(ModelFromGraph(g.Build(), 17), "fuse-layer-norm");
  }
}

TEST(FuseLayerNormTest, GammaThatDoesNotFitIsLeftOutside) {
  // gamma [4, 8] over one normalized axis: the Mul stays after the fused op.
  pb::ModelProto m = ModelFromGraph(LayerNorm({.gamma_dims = {4, 8}}).Build(), 17);
  PassResult r = fuse::Run(m, "fuse-layer-norm");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "Mul"), 1);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
}

TEST(FuseLayerNormTest, MalformedModelsAreLeftAlone) {
  // gamma of the wrong size: the Mul is not folded (the original fails to run).
  PassResult r = fuse::Run(ModelFromGraph(LayerNorm({.gamma_dims = {5}}).Build(), 17), "fuse-layer-norm");
  EXPECT_EQ(OpCount(r.model, "Mul"), 1);
  ExpectNoChange(ModelFromGraph(LayerNorm({.axes = {5}, .var_axes = {5}}).Build(), 17), "fuse-layer-norm");
  pb::GraphProto g = LayerNorm({}).Build();
  for (pb::NodeProto& n : g.node) {
    if (n.op_type == "ReduceMean") n.attribute.clear();  // no axes at all
  }
  ExpectNoChange(ModelFromGraph(g, 17), "fuse-layer-norm");
  // No gamma, and declared dims too large for a ones scale.
  g = LayerNorm({.gamma_dims = {}}).Build();
  g.input[0] = MakeValueInfo("x", pb::kFloat, std::vector<int64_t>{2, int64_t{1} << 40, int64_t{1} << 40});
  ExpectNoChange(ModelFromGraph(g, 17), "fuse-layer-norm");
}

TEST(FuseLayerNormTest, FusesInsideAnIfBody) {
  pb::ModelProto m = fuse::InIf(LayerNorm({}).Build(), "out", {2, 4, 8}, {2, 4, 8}, 17);
  PassResult r = fuse::Run(m, "fuse-layer-norm");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "LayerNormalization"), 2);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]}, 1e-4,
                      1e-4);
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-layer-norm");
}

}  // namespace
}  // namespace onnxkit::testing
