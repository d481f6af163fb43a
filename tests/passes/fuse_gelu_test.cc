// Tests of the fuse-gelu pass (passes/fuse_gelu.cc).
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

const Feeds kFeeds = {{"x", RandomFloats({3, 7}, 1, -4.f, 4.f)}};

enum class Product { kHalfFirst, kHalfLast, kHalfTimesSum };

struct GeluOptions {
  bool tanh = false;
  bool mul_by_inverse = false;  // erf: Mul(x, 0.70710678) instead of Div(x, 1.4142135)
  bool pow_cube = true;         // tanh: Pow(x, 3) instead of Mul(Mul(x, x), x)
  Product product = Product::kHalfFirst;
  float half = 0.5f;
};

GraphBuilder& Scalar(GraphBuilder& g, const std::string& name, float v) {
  return g.Initializer(InitializerFrom(name, fuse::FloatValues({}, {v})));
}

// x[3,7] -> GELU written out -> y -> Identity -> out
GraphBuilder Gelu(const GeluOptions& o) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{3, 7}});
  Scalar(g, "one", 1.f);
  Scalar(g, "half", o.half);
  if (!o.tanh) {
    if (o.mul_by_inverse) {
      Scalar(g, "inv_sqrt2", 0.70710678f).Node("Mul", {"inv_sqrt2", "x"}, {"a"});
    } else {
      Scalar(g, "sqrt2", 1.4142135f).Node("Div", {"x", "sqrt2"}, {"a"});
    }
    g.Node("Erf", {"a"}, {"e"}).Node("Add", {"e", "one"}, {"p"});
  } else {
    if (o.pow_cube) {
      Scalar(g, "three", 3.f).Node("Pow", {"x", "three"}, {"cube"});
    } else {
      g.Node("Mul", {"x", "x"}, {"sq"}).Node("Mul", {"sq", "x"}, {"cube"});
    }
    Scalar(g, "coef", 0.044715f).Node("Mul", {"coef", "cube"}, {"k"}).Node("Add", {"x", "k"}, {"s"});
    Scalar(g, "c", 0.7978845608f).Node("Mul", {"s", "c"}, {"u"}).Node("Tanh", {"u"}, {"t"});
    g.Node("Add", {"one", "t"}, {"p"});
  }
  switch (o.product) {
    case Product::kHalfFirst:
      g.Node("Mul", {"x", "half"}, {"h"}).Node("Mul", {"h", "p"}, {"y"});
      break;
    case Product::kHalfLast:
      g.Node("Mul", {"x", "p"}, {"q"}).Node("Mul", {"q", "half"}, {"y"});
      break;
    case Product::kHalfTimesSum:
      g.Node("Mul", {"half", "p"}, {"q"}).Node("Mul", {"q", "x"}, {"y"});
      break;
  }
  g.Node("Identity", {"y"}, {"out"}).Output("out", pb::kFloat, {{3, 7}});
  return g;
}

void ExpectFused(const GeluOptions& o) {
  pb::ModelProto m = ModelFromGraph(Gelu(o).Build(), 20);
  PassResult r = fuse::Run(m, "fuse-gelu");
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "Gelu"), 1);
  EXPECT_EQ(NodeCount(r.model), 2);  // Gelu, Identity
  EXPECT_EQ(r.model.graph->node[0].output[0], "y");
  bool tanh_attr = false;
  for (const pb::AttributeProto& a : r.model.graph->node[0].attribute) {
    tanh_attr |= a.name == "approximate" && std::string(a.s) == "tanh";
  }
  EXPECT_EQ(tanh_attr, o.tanh);
  ExpectSameOutputs(m, r.model, kFeeds, 1e-4, 1e-4);
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-gelu");
}

TEST(FuseGeluTest, FusesTheErfForms) {
  for (Product p : {Product::kHalfFirst, Product::kHalfLast, Product::kHalfTimesSum}) {
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(static_cast<int>(p) * 2 + inverse);
      ExpectFused({.mul_by_inverse = inverse, .product = p});
    }
  }
}

TEST(FuseGeluTest, FusesTheTanhForms) {
  for (Product p : {Product::kHalfFirst, Product::kHalfLast, Product::kHalfTimesSum}) {
    for (bool pow : {true, false}) {
      SCOPED_TRACE(static_cast<int>(p) * 2 + pow);
      ExpectFused({.tanh = true, .pow_cube = pow, .product = p});
    }
  }
}

TEST(FuseGeluTest, NearMissesDoNotFire) {
  ExpectNoChange(ModelFromGraph(Gelu({}).Build(), 19), "fuse-gelu");  // opset below 20
  ExpectNoChange(ModelFromGraph(Gelu({.tanh = true}).Build(), 19), "fuse-gelu");
  ExpectNoChange(ModelFromGraph(Gelu({.half = 0.6f}).Build(), 20), "fuse-gelu");  // wrong constant
  ExpectNoChange(
      ModelFromGraph(Gelu({.tanh = true, .product = Product::kHalfLast, .half = 0.5002f}).Build(), 20),
      "fuse-gelu");
  for (std::string inner : {"e", "p", "h"}) {
    SCOPED_TRACE(inner + " also a graph output");
    GraphBuilder g = Gelu({});
    g.Output(inner, pb::kFloat);
    ExpectNoChange(ModelFromGraph(g.Build(), 20), "fuse-gelu");
  }
  {
    SCOPED_TRACE("the cube also used elsewhere");
    GraphBuilder g = Gelu({.tanh = true});
    g.Output("cube", pb::kFloat);
    ExpectNoChange(ModelFromGraph(g.Build(), 20), "fuse-gelu");
  }
  {
    SCOPED_TRACE("Erf of another tensor than the product's x");
    pb::GraphProto g = Gelu({}).Build();
    g.input.push_back(MakeValueInfo("x2", pb::kFloat, std::vector<int64_t>{3, 7}));
    for (pb::NodeProto& n : g.node) {
      if (n.op_type == "Div") n.input[0] = "x2";
    }
    ExpectNoChange(ModelFromGraph(g, 20), "fuse-gelu");
  }
}

TEST(FuseGeluTest, MalformedModelsAreLeftAlone) {
  // Erf and Tanh without inputs or with extra ones, a Pow without exponent.
  pb::GraphProto g = Gelu({}).Build();
  for (pb::NodeProto& n : g.node) {
    if (n.op_type == "Erf") n.input.push_back("x");
  }
  ExpectNoChange(ModelFromGraph(g, 20), "fuse-gelu");
  g = Gelu({.tanh = true}).Build();
  for (pb::NodeProto& n : g.node) {
    if (n.op_type == "Pow") n.input.resize(1);
  }
  ExpectNoChange(ModelFromGraph(g, 20), "fuse-gelu");
}

TEST(FuseGeluTest, FusesInsideAnIfBody) {
  pb::ModelProto m = fuse::InIf(Gelu({.tanh = true}).Build(), "out", {3, 7}, {3, 7}, 20);
  PassResult r = fuse::Run(m, "fuse-gelu");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "Gelu"), 2);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model, {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, kFeeds[0]}, 1e-4,
                      1e-4);
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-gelu");
}

}  // namespace
}  // namespace onnxkit::testing
