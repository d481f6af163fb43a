// Weight-only blocked quantization: the per-block scales and int4 packing
// by hand, and models whose MatMul/Gemm weights become blocked
// DequantizeLinear, run on the reference backend against a dequantization
// computed here.
#include <cmath>

#include "gtest/gtest.h"
#include "quantization/blocked.h"
#include "quantization/quantize.h"
#include "runner/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::quant {
namespace {

runner::Tensor Floats(std::vector<int64_t> shape, std::vector<float> v) {
  runner::Tensor t = *runner::Tensor::Allocate(pb::kFloat, shape);
  for (size_t i = 0; i < v.size(); ++i) t.mutable_data<float>()[i] = v[i];
  return t;
}

// Element i of a packed int4 tensor.
int Int4At(const runner::Tensor& t, int64_t i) {
  auto b = static_cast<const uint8_t*>(t.raw())[i / 2];
  int v = (i & 1) ? b >> 4 : b & 0xF;
  return v > 7 ? v - 16 : v;
}

TEST(BlockedTest, ScalesPerBlockAndRoundHalfToEven) {
  // [5, 2] blocked along axis 0 by 2: blocks rows {0,1}, {2,3}, {4}.
  runner::Tensor w = Floats({5, 2}, {7, 0.5f, 1.5f, -14, 2.5f, 0, -3.5f, 0, 0.25f, NAN});
  auto q = QuantizeBlocked(w, 0, 2, 4);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->data.dtype(), pb::kInt4);
  ASSERT_EQ(q->scale.shape(), (std::vector<int64_t>{3, 2}));
  const float* s = q->scale.data<float>();
  EXPECT_FLOAT_EQ(s[0], 1.f);               // max(7, 1.5) / 7
  EXPECT_FLOAT_EQ(s[1], 2.f);               // 14 / 7
  EXPECT_FLOAT_EQ(s[2], 3.5f / 7);          // max(2.5, 3.5) / 7
  EXPECT_FLOAT_EQ(s[3], 1.f);               // all zero
  EXPECT_FLOAT_EQ(s[4], 0.25f / 7);
  EXPECT_FLOAT_EQ(s[5], 1.f);               // NaN only: counted as 0
  std::vector<int> expect = {7, 0, 2, -7, 5, 0, -7, 0, 7, 0};  // 0.5/2=0.25->0, 1.5->2 (tie to even), 2.5/0.5=5
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Int4At(q->data, i), expect[static_cast<size_t>(i)]) << i;

  runner::Tensor ties = Floats({4, 1}, {0.5f, 1.5f, 2.5f, 127});
  auto q8 = QuantizeBlocked(ties, 0, 4, 8);
  ASSERT_TRUE(q8.ok());
  EXPECT_EQ(q8->data.dtype(), pb::kInt8);
  EXPECT_FLOAT_EQ(q8->scale.data<float>()[0], 1.f);
  const int8_t* d = q8->data.data<int8_t>();
  EXPECT_EQ(d[0], 0);
  EXPECT_EQ(d[1], 2);
  EXPECT_EQ(d[2], 2);
  EXPECT_EQ(d[3], 127);
}

TEST(BlockedTest, RejectsBadArguments) {
  runner::Tensor w = Floats({2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(QuantizeBlocked(w, 0, 2, 3).ok());
  EXPECT_FALSE(QuantizeBlocked(w, 0, 0, 4).ok());
  EXPECT_FALSE(QuantizeBlocked(w, 2, 2, 4).ok());
  EXPECT_FALSE(QuantizeBlocked(*runner::Tensor::Allocate(pb::kInt32, {2, 2}), 0, 2, 4).ok());
}

io::LoadedModel Model(int64_t opset, bool gemm_trans_b) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{3, 40}});
  if (gemm_trans_b) {
    g.Initializer(testing::InitializerFrom("w", testing::RandomFloats({8, 40}, 5)))
        .Node("Gemm", {"x", "w"}, {"y"}, {testing::AttrInt("transB", 1)}, "gemm");
  } else {
    g.Initializer(testing::InitializerFrom("w", testing::RandomFloats({40, 8}, 5)))
        .Node("MatMul", {"x", "w"}, {"y"}, {}, "mm");
  }
  g.Output("y", pb::kFloat, {{3, 8}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), opset, opset >= 21 ? 10 : 8);
  return m;
}

// y = x @ dequantized(w) computed here from QuantizeBlocked's result.
runner::Tensor Expected(const runner::Tensor& x, const runner::Tensor& w, bool trans_b, int64_t block, int bits) {
  auto q = QuantizeBlocked(w, trans_b ? 1 : 0, block, bits);
  EXPECT_TRUE(q.ok());
  const int64_t k = 40, n = 8;
  runner::Tensor y = *runner::Tensor::Allocate(pb::kFloat, {3, n});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) {
        int64_t at = trans_b ? c * k + i : i * n + c;
        int64_t sat = trans_b ? c * ((k + block - 1) / block) + i / block : (i / block) * n + c;
        double qv = bits == 4 ? Int4At(q->data, at) : q->data.data<int8_t>()[at];
        acc += x.data<float>()[r * k + i] * qv * q->scale.data<float>()[sat];
      }
      y.mutable_data<float>()[r * n + c] = static_cast<float>(acc);
    }
  }
  return y;
}

TEST(BlockedTest, WeightsBecomeBlockedDequantizeLinearAndRun) {
  runner::Tensor x = testing::RandomFloats({3, 40}, 9);
  for (bool trans_b : {false, true}) {
    for (int bits : {4, 8}) {
      io::LoadedModel m = Model(21, trans_b);
      QuantizeOptions o;
      o.weights_only = true;
      o.weights_only_options = {bits, 16};
      o.min_opset = kWeightsOnlyOpset;
      o.backend = runner::Backend::kReference;
      auto samples = RandomSamples(2, 1, -1, 1, {});
      auto r = Quantize(m, samples.get(), o);
      ASSERT_TRUE(r.ok()) << r.status();
      testing::ExpectValid(r->qdq.model);
      EXPECT_EQ(r->qdq.weights, 1);
      EXPECT_EQ(testing::OpCount(r->qdq.model, "DequantizeLinear"), 1);
      EXPECT_EQ(testing::OpCount(r->qdq.model, "QuantizeLinear"), 0);
      bool found = false;
      for (const pb::TensorProto& t : r->qdq.model.graph->initializer) {
        if (t.dims == std::vector<int64_t>{trans_b ? 8 : 40, trans_b ? 40 : 8}) {
          EXPECT_EQ(t.data_type, bits == 4 ? pb::kInt4 : pb::kInt8);
          found = true;
        }
        if (t.name == "w") ADD_FAILURE() << "float weight kept";
      }
      EXPECT_TRUE(found);
      // 16-wide blocks of 40: the last one is partial.
      runner::Tensor w = *runner::TensorFromProto(m.proto.graph->initializer[0]);
      auto run = testing::RunModel(r->qdq.model, {{"x", x}});
      ASSERT_TRUE(run.ok()) << run.status();
      testing::ExpectTensorsClose(Expected(x, w, trans_b, 16, bits), (*run)[0].tensor(), 1e-5, 1e-5, "y");
      EXPECT_GT(r->report.min_output_sqnr(), bits == 4 ? 12 : 35) << bits;
    }
  }
}

// --target-sqnr with --weights-only: the greedy fallback keeps the weights
// in float until the target is met, and the report is the written model's.
TEST(BlockedTest, TargetKeepsWeightsInFloat) {
  io::LoadedModel m = Model(21, false);
  QuantizeOptions o;
  o.weights_only = true;
  o.weights_only_options = {4, 16};
  o.min_opset = kWeightsOnlyOpset;
  o.backend = runner::Backend::kReference;
  o.target_sqnr_db = 150;  // only float reaches it
  auto samples = RandomSamples(2, 1, -1, 1, {});
  auto r = Quantize(m, samples.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->target_met);
  EXPECT_EQ(r->kept_float.size(), 1u);
  EXPECT_EQ(r->qdq.weights, 0);
  EXPECT_GE(r->report.min_output_sqnr(), 150);
  testing::ExpectValid(r->qdq.model);
  o.target_sqnr_db = 5;  // int4 reaches it: nothing kept
  auto easy = Quantize(m, samples.get(), o);
  ASSERT_TRUE(easy.ok()) << easy.status();
  EXPECT_TRUE(easy->target_met);
  EXPECT_TRUE(easy->kept_float.empty());
  EXPECT_EQ(easy->qdq.weights, 1);
}

TEST(BlockedTest, OlderOpsetIsConvertedOrRefused) {
  QuantizeOptions o;
  o.weights_only = true;
  o.min_opset = kWeightsOnlyOpset;
  o.backend = runner::Backend::kReference;
  auto r = Quantize(Model(13, false), nullptr, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("opset 13 to 21"), std::string::npos) << r->warnings[0];
  EXPECT_EQ(r->qdq.weights, 1);
  testing::ExpectValid(r->qdq.model);
  // Without the conversion the opset is refused.
  EXPECT_EQ(QuantizeWeightsOnly(Model(13, false), {}, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  QdqOptions excluded;
  excluded.exclude_ops = {"MatMul"};
  auto none = QuantizeWeightsOnly(Model(21, false), excluded, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->weights, 0);
}

}  // namespace
}  // namespace onnxkit::quant
