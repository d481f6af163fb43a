// Dynamic quantization: MatMul with a constant weight becomes
// DynamicQuantizeLinear + MatMulInteger; valid, close to float, names kept.
#include "gtest/gtest.h"
#include "quantization/dynamic.h"
#include "quantization/quantize.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::quant {
namespace {

io::LoadedModel MatMulModel(int64_t opset) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{3, 16}})
      .Initializer(testing::InitializerFrom("w", testing::RandomFloats({16, 8}, 3)))
      .Node("MatMul", {"x", "w"}, {"y"}, {}, "mm")
      .Node("Relu", {"y"}, {"r"}, {}, "relu")
      .Output("y", pb::kFloat, {{3, 8}})
      .Output("r", pb::kFloat, {{3, 8}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), opset);
  return m;
}

TEST(DynamicTest, MatMulBecomesMatMulInteger) {
  io::LoadedModel m = MatMulModel(13);
  auto samples = RandomSamples(3, 1, -1, 1, {});
  for (bool per_channel : {true, false}) {
    QuantizeOptions o;
    o.dynamic = true;
    o.backend = runner::Backend::kReference;
    o.qdq.per_channel = per_channel;
    auto r = Quantize(m, samples.get(), o);
    ASSERT_TRUE(r.ok()) << r.status();
    testing::ExpectValid(r->qdq.model);
    EXPECT_EQ(testing::OpCount(r->qdq.model, "MatMulInteger"), 1);
    EXPECT_EQ(testing::OpCount(r->qdq.model, "DynamicQuantizeLinear"), 1);
    EXPECT_EQ(testing::OpCount(r->qdq.model, "MatMul"), 0);
    EXPECT_EQ(r->qdq.model.graph->output[0].name, "y");
    EXPECT_GT(r->report.min_output_sqnr(), 25);
  }
}

// MatMuls reading one activation (attention's query, key and value
// projections) share one DynamicQuantizeLinear of it, written before the
// first of them; another activation gets its own.
TEST(DynamicTest, ProductsOfOneActivationShareItsQuantization) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{3, 16}})
      .Initializer(testing::InitializerFrom("wq", testing::RandomFloats({16, 8}, 3)))
      .Initializer(testing::InitializerFrom("wk", testing::RandomFloats({16, 8}, 4)))
      .Initializer(testing::InitializerFrom("wv", testing::RandomFloats({8, 8}, 5)))
      .Node("MatMul", {"x", "wq"}, {"q"}, {}, "q")
      .Node("MatMul", {"x", "wk"}, {"k"}, {}, "k")
      .Node("Add", {"q", "k"}, {"s"}, {}, "add")
      .Node("MatMul", {"s", "wv"}, {"v"}, {}, "v")
      .Output("v", pb::kFloat, {{3, 8}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 13);
  auto samples = RandomSamples(3, 1, -1, 1, {});
  QuantizeOptions o;
  o.dynamic = true;
  o.backend = runner::Backend::kReference;
  auto r = Quantize(m, samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  testing::ExpectValid(r->qdq.model);
  EXPECT_EQ(testing::OpCount(r->qdq.model, "MatMulInteger"), 3);
  EXPECT_EQ(testing::OpCount(r->qdq.model, "DynamicQuantizeLinear"), 2);
  EXPECT_GT(r->report.min_output_sqnr(), 25);
}

// A MatMul inside a Loop body (its weight an initializer of the main
// graph) is quantized in every mode: static QDQ calibrated on the body's
// values over the iterations, dynamic, weights-only.
io::LoadedModel LoopModel() {
  pb::GraphProto body = testing::GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("h", pb::kFloat, {{3, 16}})
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("MatMul", {"h", "w"}, {"p"}, {}, "inner_mm")
                            .Node("Tanh", {"p"}, {"h_out"})
                            .Output("cond_out", pb::kBool)
                            .Output("h_out", pb::kFloat, {{3, 16}})
                            .Build();
  testing::GraphBuilder g("g");
  runner::Tensor trips = testing::MakeTensor<int64_t>(pb::kInt64, {}, {3});
  g.Input("x", pb::kFloat, {{3, 16}})
      .Initializer(testing::InitializerFrom("w", testing::RandomFloats({16, 16}, 3)))
      .Initializer(testing::InitializerFrom("trips", trips))
      .Node("Loop", {"trips", "", "x"}, {"y"}, {testing::AttrGraph("body", body)}, "loop")
      .Output("y", pb::kFloat, {{3, 16}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 21);
  return m;
}

TEST(DynamicTest, ProductsInsideLoopBodiesAreQuantizedInEveryMode) {
  io::LoadedModel m = LoopModel();
  auto samples = RandomSamples(4, 1, -1, 1, {});
  for (int mode = 0; mode < 3; ++mode) {
    QuantizeOptions o;
    o.backend = runner::Backend::kReference;
    o.dynamic = mode == 1;
    o.weights_only = mode == 2;
    o.weights_only_options.bits = 8;
    auto r = Quantize(m, samples.get(), o);
    ASSERT_TRUE(r.ok()) << "mode " << mode << ": " << r.status();
    testing::ExpectValid(r->qdq.model);
    ASSERT_EQ(r->qdq.quantized_nodes.size(), 1u) << "mode " << mode;
    EXPECT_EQ(r->qdq.quantized_nodes[0], "inner_mm");
    EXPECT_EQ(r->qdq.weights, 1);
    EXPECT_GT(r->report.min_output_sqnr(), 20) << "mode " << mode;
    // The weight is gone from the main graph (only its quantized form is kept).
    for (const pb::TensorProto& t : r->qdq.model.graph->initializer) EXPECT_NE(t.name, "w");
    if (mode == 0) {
      // The body's activations were calibrated and measured.
      ASSERT_FALSE(r->qdq.activations.empty());
      bool h_seen = false;
      for (const TensorError& t : r->report.tensors) {
        if (t.record->tensor == "h") h_seen = t.stats.signal > 0;  // measured over the iterations
      }
      EXPECT_TRUE(h_seen);
    }
  }
}

// A body value named like a main-graph value (shadowing: invalid ONNX that
// exporters do write) gets a fresh name first, so each has its own
// calibration range and report row: here the main graph's "p" spans about
// 0.1, the body's about 10.
TEST(DynamicTest, ShadowingBodyValuesAreRenamedBeforeCalibration) {
  runner::Tensor small = testing::RandomFloats({16, 16}, 5, -0.01f, 0.01f);
  runner::Tensor big = testing::RandomFloats({16, 16}, 6, -2.f, 2.f);
  pb::GraphProto body = testing::GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("h", pb::kFloat, {{3, 16}})
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("MatMul", {"h", "big"}, {"p"}, {}, "inner_mm")
                            .Node("Tanh", {"p"}, {"h_out"})
                            .Output("cond_out", pb::kBool)
                            .Output("h_out", pb::kFloat, {{3, 16}})
                            .Build();
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{3, 16}})
      .Initializer(testing::InitializerFrom("small", small))
      .Initializer(testing::InitializerFrom("big", big))
      .Initializer(testing::InitializerFrom("trips", testing::MakeTensor<int64_t>(pb::kInt64, {}, {2})))
      .Node("MatMul", {"x", "small"}, {"p"}, {}, "outer_mm")
      .Node("Loop", {"trips", "", "p"}, {"y"}, {testing::AttrGraph("body", body)}, "loop")
      .Output("y", pb::kFloat, {{3, 16}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 21);
  auto samples = RandomSamples(4, 1, -1, 1, {});
  QuantizeOptions o;
  o.backend = runner::Backend::kReference;
  auto r = Quantize(m, samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  testing::ExpectValid(r->qdq.model);  // no E0301 left
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("shadowing"), std::string::npos) << r->warnings[0];
  int main_p = 0, body_p = 0;
  for (const TensorError& t : r->report.tensors) {
    if (t.record->tensor == "p") {
      ++main_p;
      EXPECT_GT(t.stats.sqnr_db(), 30);  // its own range, not the body's
    } else if (t.record->tensor.rfind("p_", 0) == 0) {
      ++body_p;
      EXPECT_GT(t.stats.sqnr_db(), 20);  // compared with the body's own float values
    }
  }
  EXPECT_EQ(main_p, 1);
  EXPECT_EQ(body_p, 1);
}

TEST(DynamicTest, ExcludedOrOldOpset) {
  QdqOptions o;
  o.exclude_nodes = "^mm$";
  auto r = QuantizeDynamic(MatMulModel(13), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->weights, 0);
  EXPECT_EQ(QuantizeDynamic(MatMulModel(10), {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace onnxkit::quant
