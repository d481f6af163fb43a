// int4 weights and 16-bit activations in static QDQ: the parameters by
// hand, the zero-point types in the model, the reference backend running
// it, and the opset 21 requirement (older models converted first).
#include <cmath>

#include "gtest/gtest.h"
#include "quantization/quantize.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::quant {
namespace {

TEST(WideTypesTest, Params) {
  QParams s16 = ActivationParams(Range{-2, 1}, QType::kInt16);
  EXPECT_FLOAT_EQ(s16.scale, 2.f / 32767);
  EXPECT_EQ(s16.zero_point, 0);
  QParams u16 = ActivationParams(Range{-1, 3}, QType::kUint16);
  EXPECT_FLOAT_EQ(u16.scale, 4.f / 65535);
  EXPECT_EQ(u16.zero_point, 16384);  // round(1 / (4 / 65535)) = round(16383.75)
  runner::Tensor w = *runner::Tensor::Allocate(pb::kFloat, {2, 3});
  float v[] = {7, -3.5f, 0.5f, 0.3f, -2, 0.25f};  // per channel along axis 0: scales 1 and 2/7
  for (int i = 0; i < 6; ++i) w.mutable_data<float>()[i] = v[i];
  auto q = QuantizeWeight(w, 0, QType::kInt4);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->data.dtype(), pb::kInt4);
  ASSERT_EQ(q->scales.size(), 2u);
  EXPECT_FLOAT_EQ(q->scales[0], 1.f);
  EXPECT_FLOAT_EQ(q->scales[1], 2.f / 7);
  auto* b = static_cast<const uint8_t*>(q->data.raw());
  auto at = [&](int i) {
    int x = (i & 1) ? b[i / 2] >> 4 : b[i / 2] & 0xF;
    return x > 7 ? x - 16 : x;
  };
  int expect[] = {7, -4, 0, 1, -7, 1};  // -3.5 -> -4 and 0.5 -> 0 (ties to even)
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at(i), expect[i]) << i;
  auto zp = ZeroPointTensor(QType::kInt4, {0, 0}, true);
  ASSERT_TRUE(zp.ok());
  EXPECT_EQ(zp->dtype(), pb::kInt4);
  EXPECT_EQ(zp->shape(), std::vector<int64_t>{2});
  EXPECT_FALSE(QuantizeWeight(w, 0, QType::kInt16).ok());
}

io::LoadedModel Model(int64_t opset) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{4, 16}})
      .Initializer(testing::InitializerFrom("w", testing::RandomFloats({16, 8}, 3)))
      .Initializer(testing::InitializerFrom("w2", testing::RandomFloats({8, 4}, 4)))
      .Initializer(testing::InitializerFrom("b2", testing::RandomFloats({4}, 5)))
      .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
      .Node("Relu", {"m"}, {"r"}, {}, "relu")
      .Node("Gemm", {"r", "w2", "b2"}, {"y"}, {}, "gemm")
      .Output("y", pb::kFloat, {{4, 4}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), opset, opset >= 21 ? 10 : 8);
  return m;
}

// The output SQNR; with `act_sqnr`, that of ElementwiseModel instead. The error
// is measured on the calibration samples (holdout = all), so no value is
// clipped and the activations' rounding is what is left.
// No weights: only the activations' rounding.
io::LoadedModel ElementwiseModel() {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{4, 16}})
      .Input("z", pb::kFloat, {{4, 16}})
      .Node("Add", {"x", "z"}, {"a"}, {}, "add")
      .Node("Mul", {"a", "x"}, {"y"}, {}, "mul")
      .Output("y", pb::kFloat, {{4, 16}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 21, 10);
  return m;
}

double Sqnr(QType act, QType weight, int64_t opset, pb::ModelProto* out = nullptr, double* act_sqnr = nullptr) {
  QuantizeOptions o;
  o.holdout = 6;
  o.backend = runner::Backend::kReference;
  o.qdq.act_type = act;
  o.qdq.weight_type = weight;
  o.min_opset = (act == QType::kInt16 || act == QType::kUint16 || weight == QType::kInt4) ? 21 : 0;
  auto samples = RandomSamples(6, 1, -1, 1, {});
  auto r = Quantize(act_sqnr != nullptr ? ElementwiseModel() : Model(opset), samples.get(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return 0;
  testing::ExpectValid(r->qdq.model);
  EXPECT_EQ(r->qdq.weights, act_sqnr != nullptr ? 0 : 2);
  if (out != nullptr) *out = r->qdq.model;
  if (act_sqnr != nullptr) *act_sqnr = r->report.min_output_sqnr();
  return r->report.min_output_sqnr();
}

int CountType(const pb::ModelProto& m, int32_t dtype) {
  int n = 0;
  for (const pb::TensorProto& t : m.graph->initializer) n += t.data_type == dtype;
  return n;
}

TEST(WideTypesTest, SixteenBitActivationsAndInt4WeightsRun) {
  double a8 = 0, a16 = 0, au16 = 0;
  Sqnr(QType::kUint8, QType::kInt8, 21, nullptr, &a8);
  Sqnr(QType::kInt16, QType::kInt8, 21, nullptr, &a16);
  Sqnr(QType::kUint16, QType::kInt8, 21, nullptr, &au16);
  double base = Sqnr(QType::kUint8, QType::kInt8, 21);
  pb::ModelProto m16, mu16, m4;
  double s16 = Sqnr(QType::kInt16, QType::kInt8, 21, &m16);
  double su16 = Sqnr(QType::kUint16, QType::kInt8, 21, &mu16);
  double s4 = Sqnr(QType::kUint8, QType::kInt4, 21, &m4);
  EXPECT_GT(base, 25);
  // Activations alone: 8 more bits are about 48 dB; with weights the
  // output keeps the weights' int8 error.
  EXPECT_GT(a16, a8 + 30) << a8;
  EXPECT_GT(au16, a8 + 30) << a8;
  EXPECT_GT(s16, base - 1);
  EXPECT_GT(su16, base - 1);
  EXPECT_GT(s4, 10);
  EXPECT_LT(s4, base);
  EXPECT_GT(CountType(m16, pb::kInt16), 0);
  EXPECT_EQ(CountType(m16, pb::kUint8), 0);
  EXPECT_GT(CountType(mu16, pb::kUint16), 0);
  EXPECT_EQ(CountType(m4, pb::kInt4), 4);  // two weights, two per-channel zero points
}

TEST(WideTypesTest, OlderOpsetConvertedOrRefused) {
  pb::ModelProto m;
  EXPECT_GT(Sqnr(QType::kInt16, QType::kInt4, 13, &m), 10);
  int64_t opset = 0;
  for (const pb::OperatorSetIdProto& o : m.opset_import) opset = o.domain.empty() ? o.version : opset;
  EXPECT_EQ(opset, 21);
  QdqOptions o;
  o.act_type = QType::kInt16;
  Calibration cal;
  EXPECT_EQ(InsertQdq(Model(13), cal, o).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace onnxkit::quant
