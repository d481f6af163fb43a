// Tests of ai.onnx.preview.training Gradient (runner/reference/gradient.cc):
// every derivative checked against central finite differences of the same
// graph's y (double precision), on the reference and the cpu backends, and
// the errors it gives for what it cannot differentiate.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::Backend;
using runner::RtValue;
using runner::Tensor;
using ::testing::HasSubstr;

struct Case {
  GraphBuilder graph{"g"};
  std::vector<std::string> xs, zs;
  std::string y = "y";
  int64_t opset = 17;
};

Tensor RandomDoubles(std::vector<int64_t> shape, uint32_t seed, double lo, double hi) {
  Tensor f = RandomFloats(shape, seed, static_cast<float>(lo), static_cast<float>(hi));
  std::vector<double> v;
  for (float x : Values<float>(f)) v.push_back(x);
  return MakeTensor<double>(pb::kDouble, std::move(shape), v);
}

// A session of `graph` importing ai.onnx at `opset` and ai.onnx.preview.training 1.
absl::StatusOr<std::unique_ptr<runner::Session>> TrainingSession(pb::GraphProto graph, int64_t opset,
                                                                 Backend backend = Backend::kReference) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(std::move(graph), opset);
  pb::OperatorSetIdProto training;
  training.domain = "ai.onnx.preview.training";
  training.version = 1;
  loaded.proto.opset_import.push_back(training);
  runner::SessionOptions options;
  options.backend = backend;
  return runner::Session::Create(std::move(loaded), options);
}

// The model: the case's graph, then Gradient(xs, zs) with outputs g_<x>;
// graph outputs y and every g_<x>.
absl::StatusOr<std::unique_ptr<runner::Session>> MakeSession(const Case& c, Backend backend) {
  GraphBuilder g = c.graph;
  std::vector<std::string> inputs = c.xs, outputs;
  inputs.insert(inputs.end(), c.zs.begin(), c.zs.end());
  for (const std::string& x : c.xs) outputs.push_back("g_" + x);
  std::vector<pb::AttributeProto> attrs{AttrStrings("xs", c.xs), AttrString("y", c.y)};
  if (!c.zs.empty()) attrs.push_back(AttrStrings("zs", c.zs));
  g.Node("Gradient", inputs, outputs, std::move(attrs), "grad");
  g.graph().node.back().domain = "ai.onnx.preview.training";
  g.Output(c.y, 0);
  for (const std::string& o : outputs) g.Output(o, 0);
  return TrainingSession(g.Build(), c.opset, backend);
}

absl::StatusOr<std::vector<RtValue>> RunFeeds(runner::Session& s, const Feeds& feeds) {
  std::vector<std::pair<std::string, RtValue>> values;
  for (const auto& [name, t] : feeds) values.emplace_back(name, RtValue::FromTensor(t));
  return s.Run(std::move(values));
}

double SumOf(const Tensor& t) {
  double s = 0;
  for (double v : Values<double>(t)) s += v;
  return s;
}

// Runs the case on both backends and checks every gradient element against
// (sum y(x + h) - sum y(x - h)) / 2h.
void ExpectGradientsMatchFiniteDifferences(const Case& c, const Feeds& feeds) {
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(backend == Backend::kCpu ? "cpu" : "reference");
    auto session = MakeSession(c, backend);
    ASSERT_TRUE(session.ok()) << session.status();
    auto out = RunFeeds(**session, feeds);
    ASSERT_TRUE(out.ok()) << out.status();
    for (size_t i = 0; i < c.xs.size(); ++i) {
      size_t f = 0;
      while (feeds[f].first != c.xs[i]) ++f;
      const Tensor& grad = (*out)[1 + i].tensor();
      ASSERT_EQ(grad.shape(), feeds[f].second.shape()) << c.xs[i];
      std::vector<double> analytic = Values<double>(grad);
      for (int64_t e = 0; e < grad.size(); ++e) {
        const double h = 1e-6;
        double sums[2];
        for (int side = 0; side < 2; ++side) {
          Feeds moved = feeds;
          moved[f].second = feeds[f].second.Clone();
          moved[f].second.mutable_data<double>()[e] += side == 0 ? h : -h;
          auto o = RunFeeds(**session, moved);
          ASSERT_TRUE(o.ok()) << o.status();
          sums[side] = SumOf((*o)[0].tensor());
        }
        const double numeric = (sums[0] - sums[1]) / (2 * h);
        EXPECT_NEAR(analytic[static_cast<size_t>(e)], numeric, 1e-5 * std::max(1.0, std::abs(numeric)))
            << "d y / d " << c.xs[i] << "[" << e << "]";
      }
    }
  }
}

TEST(GradientTest, BroadcastArithmetic) {
  // y = ((a + b) * a - b / c) ^ 2 + a ^ b + b + a / (a + b): a [2, 3], b [3], c [2, 1] (held constant by zs).
  Case c;
  c.graph.Input("a", pb::kDouble).Input("b", pb::kDouble).Input("c", pb::kDouble);
  c.graph.Initializer(InitializerFrom("two", MakeTensor<double>(pb::kDouble, {}, {2.0})))
      .Node("Add", {"a", "b"}, {"s"})
      .Node("Mul", {"s", "a"}, {"m"})
      .Node("Div", {"b", "c"}, {"d"})
      .Node("Sub", {"m", "d"}, {"t"})
      .Node("Pow", {"t", "two"}, {"p"})
      .Node("Pow", {"a", "b"}, {"q"})
      .Node("Div", {"a", "s"}, {"r"})
      .Node("Sum", {"p", "q", "b", "r"}, {"y"});
  c.xs = {"a", "b"};
  c.zs = {"c"};
  ExpectGradientsMatchFiniteDifferences(c, {{"a", RandomDoubles({2, 3}, 1, 0.5, 2)},
                                            {"b", RandomDoubles({3}, 2, 0.5, 2)},
                                            {"c", RandomDoubles({2, 1}, 3, 1, 2)}});
}

TEST(GradientTest, UnaryChain) {
  Case c;
  c.graph.Input("x", pb::kDouble)
      .Node("Sigmoid", {"x"}, {"a"})
      .Node("Tanh", {"a"}, {"b"})
      .Node("Exp", {"b"}, {"e"})
      .Node("Log", {"e"}, {"l"})
      .Node("Sqrt", {"e"}, {"r"})
      .Node("Reciprocal", {"r"}, {"rr"})
      .Node("Neg", {"x"}, {"n"})
      .Node("Abs", {"n"}, {"ab"})
      .Node("Relu", {"n"}, {"re"})
      .Node("Identity", {"rr"}, {"i"})
      .Node("Sum", {"l", "i", "ab", "re"}, {"y"});
  c.xs = {"x"};
  // Away from Abs' and Relu's kink at 0.
  ExpectGradientsMatchFiniteDifferences(
      c, {{"x", MakeTensor<double>(pb::kDouble, {2, 3}, {-1.5, -0.3, 0.2, 0.7, 1.1, 2.4})}});
}

TEST(GradientTest, BatchedAndOneDimensionalMatMul) {
  // A [2, 1, 3, 4] x B [3, 4, 5] (batch broadcast both ways), then v [4] x W [4, 5] added on.
  Case c;
  c.graph.Input("A", pb::kDouble)
      .Input("B", pb::kDouble)
      .Input("v", pb::kDouble)
      .Input("W", pb::kDouble)
      .Node("MatMul", {"A", "B"}, {"p"})
      .Node("MatMul", {"v", "W"}, {"q"})
      .Node("Add", {"p", "q"}, {"s"})
      .Node("Mul", {"s", "s"}, {"y"});
  c.xs = {"A", "B", "v", "W"};
  ExpectGradientsMatchFiniteDifferences(c, {{"A", RandomDoubles({2, 1, 3, 4}, 4, -1, 1)},
                                            {"B", RandomDoubles({3, 4, 5}, 5, -1, 1)},
                                            {"v", RandomDoubles({4}, 6, -1, 1)},
                                            {"W", RandomDoubles({4, 5}, 7, -1, 1)}});
}

TEST(GradientTest, GemmWithTransposesAndABroadcastBias) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(::testing::Message() << "transA " << ta << " transB " << tb);
      Case c;
      c.graph.Input("A", pb::kDouble)
          .Input("B", pb::kDouble)
          .Input("C", pb::kDouble)
          .Node("Gemm", {"A", "B", "C"}, {"g"},
                {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.5f),
                 AttrFloat("beta", 2.0f)})
          .Node("Mul", {"g", "g"}, {"y"});
      c.xs = {"A", "B", "C"};
      ExpectGradientsMatchFiniteDifferences(
          c, {{"A", RandomDoubles(ta ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4}, 8, -1, 1)},
              {"B", RandomDoubles(tb ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{4, 2}, 9, -1, 1)},
              {"C", RandomDoubles({1, 2}, 10, -1, 1)}});
    }
  }
}

TEST(GradientTest, ShapeOpsAndReductions) {
  // Opset 13: ReduceSum takes axes as an input, ReduceMean as an attribute.
  Case c;
  c.opset = 13;
  c.graph.Input("x", pb::kDouble)
      .Initializer(InitializerFrom("shape", Int64s({2}, {4, 6})))
      .Initializer(InitializerFrom("axes", Int64s({1}, {-1})))
      .Initializer(InitializerFrom("ax0", Int64s({1}, {0})))
      .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {2, 0, 1})})
      .Node("Reshape", {"t", "shape"}, {"r"})
      .Node("Mul", {"r", "r"}, {"rr"})
      .Node("ReduceSum", {"rr", "axes"}, {"s"}, {AttrInt("keepdims", 0)})
      .Node("Unsqueeze", {"s", "ax0"}, {"u"})
      .Node("Flatten", {"x"}, {"f"}, {AttrInt("axis", 2)})
      .Node("Exp", {"f"}, {"fe"})
      .Node("ReduceMean", {"fe"}, {"m"}, {AttrInts("axes", {0})})
      .Node("Squeeze", {"m"}, {"sq"})
      .Node("ReduceSum", {"u"}, {"all"})
      .Node("Add", {"sq", "all"}, {"y"});
  c.xs = {"x"};
  ExpectGradientsMatchFiniteDifferences(c, {{"x", RandomDoubles({2, 3, 4}, 11, -1, 1)}});
}

TEST(GradientTest, UnrelatedInputsGetZerosAndOutputsMayBeOmitted) {
  Case c;
  c.graph.Input("a", pb::kFloat)
      .Input("b", pb::kFloat)
      .Input("z", pb::kFloat)
      .Node("Softmax", {"z"}, {"sz"})  // off the differentiated path: any op
      .Node("Mul", {"a", "sz"}, {"y"});
  c.xs = {"a", "b"};
  c.zs = {"z"};
  Feeds feeds{{"a", Floats({3}, {1, 2, 3})}, {"b", Floats({2}, {5, 6})}, {"z", Floats({3}, {0, 0, 0})}};
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    auto session = MakeSession(c, backend);
    ASSERT_TRUE(session.ok()) << session.status();
    auto out = RunFeeds(**session, feeds);
    ASSERT_TRUE(out.ok()) << out.status();
    for (float v : Values<float>((*out)[1].tensor())) EXPECT_NEAR(v, 1.0f / 3, 1e-6);
    EXPECT_EQ(Values<float>((*out)[2].tensor()), std::vector<float>({0, 0}));
  }
  // The first output left unnamed: only dy/db is computed.
  GraphBuilder g = c.graph;
  g.Node("Gradient", {"a", "b", "z"}, {"", "g_b"},
         {AttrStrings("xs", {"a", "b"}), AttrString("y", "y"), AttrStrings("zs", {"z"})}, "grad");
  g.graph().node.back().domain = "ai.onnx.preview.training";
  g.Output("g_b", 0);
  auto session = TrainingSession(g.Build(), 17);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = RunFeeds(**session, feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, 0}));
}

// What cannot be differentiated fails, naming it.
TEST(GradientTest, WhatCannotBeDifferentiatedIsNamed) {
  auto error = [](const Case& c, Feeds feeds = {{"x", Floats({2}, {1, 2})}}) {
    auto session = MakeSession(c, Backend::kReference);
    if (!session.ok()) return std::string(session.status().message());
    auto out = RunFeeds(**session, feeds);
    return out.ok() ? std::string("(ran)") : std::string(out.status().message());
  };
  Case softmax;
  softmax.graph.Input("x", pb::kFloat).Node("Softmax", {"x"}, {"y"}, {}, "sm");
  softmax.xs = {"x"};
  EXPECT_THAT(error(softmax), HasSubstr("no derivative of Softmax (node 'sm')"));
  Case free_input;
  free_input.graph.Input("x", pb::kFloat).Input("w", pb::kFloat).Node("Mul", {"x", "w"}, {"y"});
  free_input.xs = {"x"};
  EXPECT_THAT(error(free_input, {{"x", Floats({2}, {1, 2})}, {"w", Floats({2}, {1, 2})}}),
              HasSubstr("graph input 'w', which is named by neither xs nor zs"));
  Case no_y;
  no_y.graph.Input("x", pb::kFloat).Node("Neg", {"x"}, {"n"});
  no_y.xs = {"x"};
  no_y.y = "missing";
  EXPECT_THAT(error(no_y), HasSubstr("'missing'"));
  Case twice;
  twice.graph.Input("x", pb::kFloat).Node("Neg", {"x"}, {"y"});
  twice.xs = {"x"};
  twice.zs = {"x"};
  EXPECT_THAT(error(twice), HasSubstr("distinct"));
  Case looped;
  GraphBuilder body("body");
  body.Node("Neg", {"x"}, {"b_y"}).Output("b_y", pb::kFloat);
  looped.graph.Input("x", pb::kFloat)
      .Input("c", pb::kBool)
      .Node("If", {"c"}, {"y"},
            {AttrGraph("then_branch", body.Build()), AttrGraph("else_branch", body.Build())}, "branch");
  looped.xs = {"x"};
  looped.zs = {"c"};
  EXPECT_THAT(error(looped, {{"x", Floats({2}, {1, 2})}, {"c", Bools({}, {true})}}),
              HasSubstr("holds a graph"));
  // Two Gradients whose ys read each other's results.
  {
    GraphBuilder g("g");
    // Differentiated by constants, neither Gradient is on the other's path.
    pb::TensorProto one = InitializerFrom("", Floats({2}, {1, 2}));
    g.Node("Constant", {}, {"x"}, {AttrTensor("value", one)})
        .Node("Constant", {}, {"w"}, {AttrTensor("value", one)})
        .Node("Gradient", {"x"}, {"g1"}, {AttrStrings("xs", {"x"}), AttrString("y", "y1")}, "first")
        .Node("Gradient", {"w"}, {"g2"}, {AttrStrings("xs", {"w"}), AttrString("y", "y2")}, "second")
        .Node("Mul", {"x", "g2"}, {"y1"})
        .Node("Mul", {"w", "g1"}, {"y2"})
        .Output("y1", 0)
        .Output("y2", 0);
    g.graph().node[2].domain = "ai.onnx.preview.training";
    g.graph().node[3].domain = "ai.onnx.preview.training";
    auto session = TrainingSession(g.Build(), 17);
    ASSERT_TRUE(session.ok()) << session.status();
    auto out = RunFeeds(**session, {});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr("the result of another Gradient"));
  }
  // An integer x has no gradient.
  Case ints;
  ints.graph.Input("x", pb::kInt64).Node("Neg", {"x"}, {"y"});
  ints.xs = {"x"};
  EXPECT_THAT(error(ints, {{"x", Int64s({2}, {1, 2})}}), HasSubstr("only float values have gradients"));
}

}  // namespace
}  // namespace onnxkit::testing
