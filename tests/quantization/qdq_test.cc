// QDQ insertion per op family: the result is valid (check --full), its
// outputs stay close to float, weights are int8 per channel, the int32 bias
// overflow guard falls back to float, and exclusion flags are honoured.
#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quantization/calibration.h"
#include "quantization/quantize.h"
#include "runner/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::quant {
namespace {

using testing::GraphBuilder;
using testing::InitializerFrom;
using testing::RandomFloats;

io::LoadedModel Loaded(pb::GraphProto g, int64_t opset = 13) {
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(std::move(g), opset);
  return m;
}

pb::GraphProto ConvNet(float bias_value = 0.1f) {
  runner::Tensor b = RandomFloats({8}, 7, -0.5f, 0.5f);
  b.mutable_data<float>()[0] = bias_value;
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{1, 3, 8, 8}})
      .Initializer(InitializerFrom("w", RandomFloats({8, 3, 3, 3}, 5)))
      .Initializer(InitializerFrom("b", b))
      .Initializer(InitializerFrom("w2", RandomFloats({8, 4}, 6)))
      .Node("Conv", {"x", "w", "b"}, {"c"}, {testing::AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("Relu", {"c"}, {"r"}, {}, "relu")
      .Node("MaxPool", {"r"}, {"p"}, {testing::AttrInts("kernel_shape", {2, 2}), testing::AttrInts("strides", {2, 2})}, "pool")
      .Node("GlobalAveragePool", {"p"}, {"gap"}, {}, "gap")
      .Node("Flatten", {"gap"}, {"f"}, {}, "flat")
      .Node("Concat", {"f", "f"}, {"cat"}, {testing::AttrInt("axis", 1)}, "cat")
      .Node("Reshape", {"cat", "shape"}, {"rs"}, {}, "reshape")
      .Node("MatMul", {"rs", "w2"}, {"mm"}, {}, "matmul")
      .Node("Add", {"mm", "mm"}, {"y"}, {}, "add")
      .Output("y", pb::kFloat, {{2, 4}});
  runner::Tensor shape = runner::Tensor::Allocate(pb::kInt64, {2}).value();
  shape.mutable_data<int64_t>()[0] = 2;
  shape.mutable_data<int64_t>()[1] = 8;
  g.Initializer(InitializerFrom("shape", shape));
  return g.Build();
}

QuantizeOptions Options() {
  QuantizeOptions o;
  o.backend = runner::Backend::kReference;
  o.holdout = 2;
  return o;
}

int CountOp(const pb::ModelProto& m, const std::string& op) { return testing::OpCount(m, op); }

TEST(QdqTest, EveryFamilyGivesAValidModelCloseToFloat) {
  io::LoadedModel m = Loaded(ConvNet());
  auto samples = RandomSamples(10, 1, -1, 1, {});
  for (Method method : {Method::kMinMax, Method::kPercentile, Method::kEntropy, Method::kMse}) {
    for (QType act : {QType::kUint8, QType::kInt8}) {
      QuantizeOptions o = Options();
      o.qdq.calibrator.method = method;
      o.qdq.act_type = act;
      auto r = Quantize(m, samples.get(), o);
      ASSERT_TRUE(r.ok()) << r.status();
      testing::ExpectValid(r->qdq.model);
      EXPECT_GE(CountOp(r->qdq.model, "QuantizeLinear"), 6);
      EXPECT_EQ(r->qdq.weights, 2);
      EXPECT_EQ(r->qdq.per_channel_weights, 2);
      EXPECT_EQ(r->qdq.int32_biases, 1);
      EXPECT_GT(r->report.min_output_sqnr(), 20) << MethodName(method);
      ASSERT_EQ(r->report.outputs.size(), 1u);
      EXPECT_GT(r->report.outputs[0].stats.cosine(), 0.99);
      EXPECT_FALSE(r->report.tensors.empty());
      for (const TensorError& t : r->report.tensors) EXPECT_GT(t.stats.sqnr_db(), 15) << t.record->tensor;
    }
  }
}

TEST(QdqTest, WeightsAreStoredInt8AndTheFloatCopyIsGone) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto r = Quantize(Loaded(ConvNet()), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  bool float_w = false, int8_w = false;
  for (const pb::TensorProto& t : r->qdq.model.graph->initializer) {
    if (t.name == "w") float_w = true;
    if (t.data_type == pb::kInt8 && t.dims.size() == 4) int8_w = true;
  }
  EXPECT_FALSE(float_w);
  EXPECT_TRUE(int8_w);
}

// Quantizing a QDQ model again leaves its quantized nodes as they are (no
// second pair; an int8 weight is not quantized again as an activation).
TEST(QdqTest, AnAlreadyQuantizedModelIsLeftAsItIs) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto first = Quantize(Loaded(ConvNet()), samples.get(), Options());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->qdq.quantized_nodes.size(), 0u);
  io::LoadedModel again;
  again.proto = first->qdq.model;
  auto second = Quantize(again, samples.get(), Options());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->qdq.quantized_nodes.empty());
  EXPECT_EQ(CountOp(second->qdq.model, "QuantizeLinear"), CountOp(first->qdq.model, "QuantizeLinear"));
  EXPECT_EQ(CountOp(second->qdq.model, "DequantizeLinear"), CountOp(first->qdq.model, "DequantizeLinear"));
  bool warned = false;
  for (const std::string& w : second->warnings) warned |= w.find("already quantized") != std::string::npos;
  for (const std::string& w : second->qdq.warnings)
    warned |= w.find("already quantized") != std::string::npos;
  EXPECT_TRUE(warned);
}

// Nodes computing in float16 are left as they are, and the warning says why.
TEST(QdqTest, Float16NodesAreNamedAsLeftAlone) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{2, 4}})
      .Initializer(InitializerFrom("w", RandomFloats({4, 3}, 9)))
      .Node("Cast", {"x"}, {"xh"}, {testing::AttrInt("to", pb::kFloat16)}, "xh")
      .Node("Cast", {"w"}, {"wh"}, {testing::AttrInt("to", pb::kFloat16)}, "wh")
      .Node("MatMul", {"xh", "wh"}, {"mh"}, {}, "mm")
      .Node("Cast", {"mh"}, {"y"}, {testing::AttrInt("to", pb::kFloat)}, "back")
      .Output("y", pb::kFloat, {{2, 3}});
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto r = Quantize(Loaded(g.Build()), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->qdq.quantized_nodes.empty());
  bool warned = false;
  for (const std::string& w : r->warnings)
    warned |= w.find("1 node(s) compute in float16") != std::string::npos;
  for (const std::string& w : r->qdq.warnings)
    warned |= w.find("1 node(s) compute in float16") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(QdqTest, BiasTooLargeForItsScaleRaisesTheWeightScale) {
  // |b| / (s_x * s_w) past 2^30: the weight's scale grows until the bias
  // fits int32 (the weights' part is negligible beside such a bias).
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto r = Quantize(Loaded(ConvNet(3e30f)), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->qdq.int32_biases, 1);
  EXPECT_TRUE(r->qdq.float_biases.empty());
  EXPECT_EQ(r->qdq.raised_weight_scales, std::vector<std::string>{"w"});
  EXPECT_THAT(r->warnings, ::testing::Contains(::testing::HasSubstr("so that the int32 bias fits")));
  EXPECT_GT(r->report.min_output_sqnr(), 40);
  testing::ExpectValid(r->qdq.model);
  // An ordinary bias leaves the weight's scale as its values need.
  auto plain = Quantize(Loaded(ConvNet()), samples.get(), Options());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->qdq.raised_weight_scales.empty());
  EXPECT_EQ(plain->qdq.int32_biases, 1);
}

TEST(QdqTest, NonFiniteBiasStaysFloat) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto r = Quantize(Loaded(ConvNet(std::numeric_limits<float>::infinity())), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->qdq.int32_biases, 0);
  EXPECT_TRUE(r->qdq.raised_weight_scales.empty());
  testing::ExpectValid(r->qdq.model);
}

TEST(QdqTest, ExclusionFlags) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  QuantizeOptions o = Options();
  o.qdq.exclude_ops = {"Conv"};
  o.qdq.exclude_nodes = "^mat";
  auto r = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->qdq.weights, 0);
  for (const std::string& n : r->qdq.quantized_nodes) {
    EXPECT_NE(n, "conv");
    EXPECT_NE(n, "matmul");
  }
  o = Options();
  o.qdq.op_types = {"Add"};
  r = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->qdq.quantized_nodes.size(), 1u);
  EXPECT_EQ(r->qdq.quantized_nodes[0], "add");
  o.qdq.exclude_nodes = "(";
  EXPECT_EQ(Quantize(Loaded(ConvNet()), samples.get(), o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QdqTest, OpsetRules) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  auto old = Quantize(Loaded(ConvNet(), 9), samples.get(), Options());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  auto r = Quantize(Loaded(ConvNet(), 11), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->qdq.per_channel_weights, 0);
  EXPECT_EQ(r->qdq.weights, 2);
  EXPECT_FALSE(r->warnings.empty());
  testing::ExpectValid(r->qdq.model);
}

TEST(QdqTest, TargetSqnrKeepsLayersInFloat) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  QuantizeOptions o = Options();
  o.target_sqnr_db = 150;  // only float layers reach it
  auto r = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->target_met);
  EXPECT_GE(r->report.min_output_sqnr(), 150);
  EXPECT_FALSE(r->kept_float.empty());
  EXPECT_FALSE(r->sensitivity.empty());
  testing::ExpectValid(r->qdq.model);
}

TEST(QdqTest, TargetCosineKeepsLayersInFloat) {
  auto samples = RandomSamples(4, 1, -1, 1, {});
  QuantizeOptions o = Options();
  auto plain = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  double c0 = plain->report.min_output_cosine();
  ASSERT_LT(c0, 1);
  // Halve the distance to 1: some layers go back to float, not all.
  o.target_cosine = 1 - (1 - c0) / 2;
  auto r = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->target_met);
  EXPECT_GE(r->report.min_output_cosine(), *o.target_cosine);
  EXPECT_FALSE(r->kept_float.empty());
  EXPECT_LT(r->kept_float.size(), r->sensitivity.size());
  for (const Sensitivity& s : r->sensitivity) EXPECT_GT(s.cosine, 0.9) << s.node;
  testing::ExpectValid(r->qdq.model);
  // With an SQNR target only float meets, both must hold.
  o.target_sqnr_db = 150;
  auto both = Quantize(Loaded(ConvNet()), samples.get(), o);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE(both->target_met);
  EXPECT_GE(both->report.min_output_sqnr(), 150);
  EXPECT_GT(both->kept_float.size(), r->kept_float.size());
}

// Attention probabilities (Softmax, then Dropout) quantized for the
// MatMul that reads them, the Softmax's input quantized too (the scores'
// MatMul): whatever range calibration saw (here at most about 0.6), uint8
// gets the fixed parameters ONNX Runtime's uint8 QLinearSoftmax fusion
// assumes (1/256 and 0); int8 and 16-bit types stay calibrated, and so
// does uint8 when the Softmax reads a float value (a Tanh between).
TEST(QdqTest, SoftmaxOutputsGetFixedUint8Parameters) {
  struct Case {
    QType type;
    int64_t opset;
    bool tanh;    // a Tanh (not quantized) between the scores and the Softmax
    float scale;  // 0: calibrated
  };
  for (const Case& c : {Case{QType::kUint8, 13, false, 1.0f / 256}, Case{QType::kUint8, 13, true, 0},
                        Case{QType::kInt8, 13, false, 0}, Case{QType::kUint16, 21, false, 0}}) {
    SCOPED_TRACE(::testing::Message() << static_cast<int>(c.type) << (c.tanh ? " tanh" : ""));
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{4, 16}})
        .Initializer(InitializerFrom("w", RandomFloats({16, 16}, 11, -1.0f, 1.0f)))
        .Initializer(InitializerFrom("v", RandomFloats({16, 4}, 12)))
        .Node("MatMul", {"x", "w"}, {"s"}, {}, "scores");
    if (c.tanh) g.Node("Tanh", {"s"}, {"t"}, {}, "tanh");
    g.Node("Softmax", {c.tanh ? "t" : "s"}, {"p"}, {testing::AttrInt("axis", -1)}, "softmax")
        .Node("Dropout", {"p"}, {"d"}, {}, "dropout")
        .Node("MatMul", {"d", "v"}, {"y"}, {}, "context")
        .Output("y", pb::kFloat, {{4, 4}});
    auto samples = RandomSamples(8, 1, -1, 1, {});
    QuantizeOptions o = Options();
    o.qdq.act_type = c.type;
    auto r = Quantize(Loaded(g.Build(), c.opset), samples.get(), o);
    ASSERT_TRUE(r.ok()) << r.status();
    testing::ExpectValid(r->qdq.model);
    const ActivationRecord* probs = nullptr;
    for (const ActivationRecord& a : r->qdq.activations) {
      if (a.tensor == "d" || a.tensor == "p") probs = &a;  // (preprocessing may drop the Dropout)
    }
    ASSERT_NE(probs, nullptr);
    EXPECT_EQ(probs->softmax, c.scale != 0);
    EXPECT_EQ(probs->params.zero_point, 0);
    if (c.scale != 0) {
      EXPECT_EQ(probs->params.scale, c.scale);
    } else {
      // Calibrated: the largest probability seen over 255, 127 or 65535 steps.
      EXPECT_NE(probs->params.scale, 1.0f / 256);
      EXPECT_NE(probs->params.scale, 1.0f / 128);
    }
    // The parameters in the model are those of the record.
    std::string scale_name;
    for (const pb::NodeProto& n : r->qdq.model.graph->node) {
      if (n.op_type == "QuantizeLinear" && n.input[0] == probs->tensor) scale_name = n.input[1];
    }
    ASSERT_FALSE(scale_name.empty());
    bool found = false;
    for (const pb::TensorProto& t : r->qdq.model.graph->initializer) {
      if (t.name != scale_name) continue;
      auto st = runner::TensorFromProto(t);
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(st->data<float>()[0], probs->params.scale);
      found = true;
    }
    EXPECT_TRUE(found);
    EXPECT_GT(r->report.min_output_sqnr(), 20);
  }
}

// An attention mask of -inf added to the scores: quantized, the -inf would
// come back as the range's low end (or 0) and mask nothing. Tensors that
// held NaN or infinity in calibration stay float, with a warning, and the
// count survives a calibration file.
TEST(QdqTest, TensorsHoldingInfinityStayFloat) {
  runner::Tensor inf = runner::Tensor::Allocate(pb::kFloat, {}).value();
  inf.mutable_data<float>()[0] = -std::numeric_limits<float>::infinity();
  runner::Tensor zero = runner::Tensor::Allocate(pb::kFloat, {}).value();
  zero.mutable_data<float>()[0] = 0;
  runner::Tensor thr = runner::Tensor::Allocate(pb::kFloat, {8}).value();
  for (int i = 0; i < 8; ++i) thr.mutable_data<float>()[i] = i == 0 ? -2.f : 0.f;  // column 0 never masked
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{4, 8}})
      .Initializer(InitializerFrom("w", RandomFloats({8, 8}, 3)))
      .Initializer(InitializerFrom("v", RandomFloats({8, 4}, 4)))
      .Initializer(InitializerFrom("ninf", inf))
      .Initializer(InitializerFrom("zero", zero))
      .Initializer(InitializerFrom("thr", thr))
      .Node("MatMul", {"x", "w"}, {"s"}, {}, "scores")
      .Node("Less", {"x", "thr"}, {"m"}, {}, "less")
      .Node("Where", {"m", "ninf", "zero"}, {"mask"}, {}, "where")
      .Node("Add", {"s", "mask"}, {"a"}, {}, "add")
      .Node("Softmax", {"a"}, {"p"}, {testing::AttrInt("axis", -1)}, "softmax")
      .Node("MatMul", {"p", "v"}, {"y"}, {}, "context")
      .Output("y", pb::kFloat, {{4, 4}});
  auto samples = RandomSamples(8, 1, -1, 1, {});
  auto r = Quantize(Loaded(g.Build()), samples.get(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  testing::ExpectValid(r->qdq.model);
  for (const pb::NodeProto& n : r->qdq.model.graph->node) {
    if (n.op_type != "QuantizeLinear") continue;
    EXPECT_NE(n.input[0], "mask");
    EXPECT_NE(n.input[0], "a");
  }
  EXPECT_GE(CountOp(r->qdq.model, "QuantizeLinear"), 3);  // x, p and the outputs of the products
  bool warned = false;
  for (const std::string& w : r->warnings)
    warned |= w.find("2 tensor(s) held NaN or infinity") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_GT(r->report.min_output_sqnr(), 25);
  auto back = CalibrationFromJson(CalibrationToJson(r->calibration));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_GT(back->tensors.at("mask").nonfinite, 0);
  EXPECT_EQ(back->tensors.at("mask").nonfinite, r->calibration.tensors.at("mask").nonfinite);
  EXPECT_EQ(back->tensors.at("s").nonfinite, 0);
  EXPECT_FALSE(
      CalibrationFromJson(R"({"tensors": [{"name": "t", "min": 0, "max": 1, "count": 1e300}]})").ok());
  EXPECT_FALSE(CalibrationFromJson(R"({"bins": -3, "tensors": []})").ok());
}

}  // namespace
}  // namespace onnxkit::quant
