// Presets: the table is consistent with the rules, and inputs-only QDQ
// (the trt placement) leaves every quantized op's output in float.
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "quantization/presets.h"
#include "quantization/quantize.h"
#include "quantization/rules.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::quant {
namespace {

TEST(PresetsTest, TableNamesOnlyRuleOps) {
  ASSERT_NE(FindPreset("generic"), nullptr);
  ASSERT_NE(FindPreset("ort-cpu"), nullptr);
  ASSERT_NE(FindPreset("trt"), nullptr);
  EXPECT_EQ(FindPreset("tensorrt"), nullptr);
  for (const Preset& p : AllPresets()) {
    for (std::string_view op : p.op_types) EXPECT_NE(FindRule(op), nullptr) << p.name << " " << op;
  }
  EXPECT_EQ(FindPreset("trt")->act_type, QType::kInt8);
  EXPECT_FALSE(FindPreset("trt")->quantize_outputs);
}

TEST(PresetsTest, InputsOnlyLeavesOutputsFloat) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{4, 16}})
      .Initializer(testing::InitializerFrom("w", testing::RandomFloats({16, 8}, 3)))
      .Initializer(testing::InitializerFrom("w2", testing::RandomFloats({8, 4}, 4)))
      .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
      .Node("Relu", {"m"}, {"r"}, {}, "relu")
      .Node("MatMul", {"r", "w2"}, {"y"}, {}, "mm2")
      .Output("y", pb::kFloat, {{4, 4}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 13);
  auto samples = RandomSamples(4, 1, -1, 1, {});
  for (bool outputs : {true, false}) {
    QuantizeOptions o;
    o.backend = runner::Backend::kReference;
    o.qdq.act_type = QType::kInt8;
    o.qdq.quantize_outputs = outputs;
    auto r = Quantize(m, samples.get(), o);
    ASSERT_TRUE(r.ok()) << r.status();
    testing::ExpectValid(r->qdq.model);
    std::set<std::string> quantized;
    for (const ActivationRecord& a : r->qdq.activations) quantized.insert(a.tensor);
    // Inputs of both MatMuls always; their outputs only with outputs, and
    // not y: a graph output no node reads would get a pair nothing reads.
    EXPECT_TRUE(quantized.count("x"));
    EXPECT_TRUE(quantized.count("r")) << absl::StrJoin(quantized, ",");
    EXPECT_EQ(quantized.count("m"), outputs ? 1u : 0u) << absl::StrJoin(quantized, ",");
    EXPECT_EQ(quantized.count("y"), 0u);
    EXPECT_EQ(testing::OpCount(r->qdq.model, "QuantizeLinear"), outputs ? 3 : 2);
    EXPECT_EQ(testing::OpCount(r->qdq.model, "DequantizeLinear"), outputs ? 5 : 4);  // and two weights'
    for (const pb::ValueInfoProto& out : r->qdq.model.graph->output) EXPECT_EQ(out.name, "y");
    EXPECT_EQ(r->qdq.weights, 2);
    EXPECT_GT(r->report.min_output_sqnr(), 20);
  }
}

}  // namespace
}  // namespace onnxkit::quant
