// Dynamic quantization: MatMul with a constant weight becomes
// DynamicQuantizeLinear + MatMulInteger; valid, close to float, names kept.
#include "gtest/gtest.h"
#include "quantization/dynamic.h"
#include "quantization/quantize.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

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

// A MatMul inside an If branch (its weight an outer-scope initializer) is
// not quantized; the result says so instead of a bare "0 quantized".
TEST(DynamicTest, ProductsInsideBodiesAreNamedAsLeftFloat) {
  pb::GraphProto branch = testing::GraphBuilder("then")
                              .Node("MatMul", {"x", "w"}, {"t"}, {}, "inner_mm")
                              .Output("t", pb::kFloat)
                              .Build();
  pb::GraphProto other =
      testing::GraphBuilder("else").Node("Identity", {"x"}, {"e"}).Output("e", pb::kFloat).Build();
  testing::GraphBuilder g("g");
  g.Input("c", pb::kBool, {{}})
      .Input("x", pb::kFloat, {{3, 16}})
      .Initializer(testing::InitializerFrom("w", testing::RandomFloats({16, 16}, 3)))
      .Node("If", {"c"}, {"y"},
            {testing::AttrGraph("then_branch", branch), testing::AttrGraph("else_branch", other)})
      .Output("y", pb::kFloat);
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 13);
  QuantizeOptions o;
  o.dynamic = true;
  o.backend = runner::Backend::kReference;
  auto r = Quantize(m, nullptr, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(testing::OpCount(r->qdq.model, "MatMulInteger"), 0);
  bool named = false;
  for (const std::string& w : r->warnings)
    named =
        named || w.find("1 Conv/ConvTranspose/MatMul/Gemm node(s) inside If/Loop/Scan bodies stay float") !=
                     std::string::npos;
  EXPECT_TRUE(named);
  // Without a body nothing is said.
  auto plain = Quantize(MatMulModel(13), nullptr, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const std::string& w : plain->warnings) EXPECT_EQ(w.find("bodies"), std::string::npos) << w;
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
