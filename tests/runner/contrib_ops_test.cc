// ONNX Runtime contrib ops (com.microsoft, and ai.onnx LayerNormalization
// below 17) run as the standard ops they stand for: each op against values
// computed here from its definition, on both backends; the ops that cannot
// be written so fail with a message naming the op; a model ONNX Runtime
// optimized ('extended' level) computes what the model it came from does.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/inputs.h"
#include "runner/session.h"
#include "tests/runner/conformance.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;

constexpr runner::Backend kBackends[] = {runner::Backend::kReference, runner::Backend::kCpu};

// One node `op` of `domain` on inputs declared with their types and shapes;
// the outputs in `omitted` stay unnamed.
absl::StatusOr<std::vector<runner::RtValue>> RunNode(runner::Backend backend, const std::string& op,
                                                     const std::vector<runner::Tensor>& inputs,
                                                     std::vector<pb::AttributeProto> attributes, int64_t opset,
                                                     int num_outputs, const std::string& domain,
                                                     const std::vector<int>& omitted = {}) {
  return RunNodeOn(backend, op, inputs, std::move(attributes), opset, num_outputs, domain,
                   {.declare_shapes = true, .omitted = omitted});
}

// Runs com.microsoft `op` (or ai.onnx when `domain` is "") on `backend`;
// output `index` (counting the named outputs) as floats.
std::vector<float> RunOp(runner::Backend backend, const std::string& op, const std::vector<runner::Tensor>& inputs,
                         std::vector<pb::AttributeProto> attributes = {}, int64_t opset = 14, int num_outputs = 1,
                         int index = 0, const std::string& domain = "com.microsoft",
                         const std::vector<int>& omitted = {}) {
  auto out = RunNode(backend, op, inputs, std::move(attributes), opset, num_outputs, domain, omitted);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  if (!out.ok() || static_cast<int>(out->size()) <= index) return {};
  const runner::Tensor& t = (*out)[static_cast<size_t>(index)].tensor();
  EXPECT_EQ(t.dtype(), pb::kFloat);
  return Values<float>(t);
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 2e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol + tol * std::abs(want[i])) << "at " << i;
}

TEST(ContribOpsTest, GeluFamily) {
  const std::vector<float> x = {-3.f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 2.5f, 4.f};
  const std::vector<float> bias = {0.5f, -0.5f, 0.25f, 1.f, -1.f, 0.f, 0.1f, -2.f};
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  std::vector<double> erf_gelu, bias_gelu, fast, quick;
  for (size_t i = 0; i < x.size(); ++i) {
    erf_gelu.push_back(gelu(x[i]));
    bias_gelu.push_back(gelu(double{x[i]} + bias[i]));
    const double v = double{x[i]} + bias[i];
    fast.push_back(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    quick.push_back(x[i] / (1 + std::exp(-1.5 * x[i])));
  }
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    ExpectNear(RunOp(b, "Gelu", {Floats({8}, x)}), erf_gelu);
    ExpectNear(RunOp(b, "BiasGelu", {Floats({1, 8}, x), Floats({8}, bias)}), bias_gelu);
    ExpectNear(RunOp(b, "FastGelu", {Floats({8}, x), Floats({8}, bias)}), fast);
    ExpectNear(RunOp(b, "QuickGelu", {Floats({8}, x)}, {AttrFloat("alpha", 1.5f)}), quick);
  }
}

// Mean and 1/sqrt(var + eps) of each row of `rows` x `n` values.
struct RowStats {
  std::vector<double> mean, inv_std, rms_inv;
};
RowStats Stats(const std::vector<float>& x, int rows, int n, double eps) {
  RowStats s;
  for (int r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) sum += x[static_cast<size_t>(r * n + i)];
    const double mean = sum / n;
    double ms = 0;
    for (int i = 0; i < n; ++i) {
      const double d = x[static_cast<size_t>(r * n + i)] - mean;
      sq += d * d;
      ms += double{x[static_cast<size_t>(r * n + i)]} * x[static_cast<size_t>(r * n + i)];
    }
    s.mean.push_back(mean);
    s.inv_std.push_back(1 / std::sqrt(sq / n + eps));
    s.rms_inv.push_back(1 / std::sqrt(ms / n + eps));
  }
  return s;
}

TEST(ContribOpsTest, LayerNormalizationBelowOpset17AndSimplified) {
  const std::vector<float> x = {1, 2, 3, 4, -1, 0, 5, 2, 0.5f, 0.25f, -2, 8};
  const std::vector<float> scale = {1, 0.5f, 2, -1}, bias = {0, 1, -1, 0.5f};
  const RowStats s = Stats(x, 3, 4, 1e-3);
  std::vector<double> y, rms;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 4; ++i) {
      const size_t k = static_cast<size_t>(r * 4 + i);
      y.push_back((x[k] - s.mean[static_cast<size_t>(r)]) * s.inv_std[static_cast<size_t>(r)] * scale[i] + bias[i]);
      rms.push_back(x[k] * s.rms_inv[static_cast<size_t>(r)] * scale[i]);
    }
  }
  const std::vector<runner::Tensor> in = {Floats({3, 4}, x), Floats({4}, scale), Floats({4}, bias)};
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    // ai.onnx LayerNormalization at opset 14 (ONNX Runtime's own, before 17).
    const std::vector<pb::AttributeProto> eps = {AttrFloat("epsilon", 1e-3f)};
    ExpectNear(RunOp(b, "LayerNormalization", in, eps, 14, 3, 0, ""), y);
    ExpectNear(RunOp(b, "LayerNormalization", in, eps, 14, 3, 1, ""), s.mean);
    ExpectNear(RunOp(b, "LayerNormalization", in, eps, 14, 3, 2, ""), s.inv_std);
    // A positive axis needs the rank, which the input's type gives.
    ExpectNear(RunOp(b, "LayerNormalization", in, {AttrFloat("epsilon", 1e-3f), AttrInt("axis", 1)}, 14, 1, 0, ""), y);
    ExpectNear(RunOp(b, "SimplifiedLayerNormalization", {Floats({3, 4}, x), Floats({4}, scale)}, eps, 14, 1, 0, ""),
               rms);
  }
}

TEST(ContribOpsTest, SkipLayerNormalization) {
  const std::vector<float> in = {1, 2, 3, 4, -1, 0, 5, 2};
  const std::vector<float> skip = {0.5f, 0, -1, 2, 1, 1, 1, 1};
  const std::vector<float> gamma = {1, 2, 0.5f, 1}, beta = {0, 0.5f, 0, -1}, bias = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<float> sum;
  for (size_t i = 0; i < in.size(); ++i) sum.push_back(in[i] + skip[i] + bias[i % 4]);
  const RowStats s = Stats(sum, 2, 4, 1e-5);
  std::vector<double> y, rms, sum_d(sum.begin(), sum.end());
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 4; ++i) {
      const size_t k = static_cast<size_t>(r * 4 + i);
      y.push_back((sum[k] - s.mean[static_cast<size_t>(r)]) * s.inv_std[static_cast<size_t>(r)] * gamma[i] + beta[i]);
      rms.push_back(sum[k] * s.rms_inv[static_cast<size_t>(r)] * gamma[i]);
    }
  }
  const std::vector<pb::AttributeProto> eps = {AttrFloat("epsilon", 1e-5f)};
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    const std::vector<runner::Tensor> args = {Floats({1, 2, 4}, in), Floats({1, 2, 4}, skip), Floats({4}, gamma),
                                              Floats({4}, beta), Floats({4}, bias)};
    ExpectNear(RunOp(b, "SkipLayerNormalization", args, eps, 14, 4, 0), y);
    ExpectNear(RunOp(b, "SkipLayerNormalization", args, eps, 14, 4, 1), s.mean);
    ExpectNear(RunOp(b, "SkipLayerNormalization", args, eps, 14, 4, 2), s.inv_std);
    ExpectNear(RunOp(b, "SkipLayerNormalization", args, eps, 14, 4, 3), sum_d);
    const std::vector<runner::Tensor> simple = {Floats({1, 2, 4}, in), Floats({1, 2, 4}, skip), Floats({4}, gamma),
                                                Floats({4}, bias)};
    // Its mean output is never computed (ONNX Runtime leaves it unset).
    ExpectNear(RunOp(b, "SkipSimplifiedLayerNormalization", simple, eps, 14, 4, 0, "com.microsoft", {1}), rms);
    ExpectNear(RunOp(b, "SkipSimplifiedLayerNormalization", simple, eps, 14, 4, 2, "com.microsoft", {1}), sum_d);
    EXPECT_FALSE(RunNode(b, "SkipSimplifiedLayerNormalization", simple, eps, 14, 4, "com.microsoft").ok());
  }
}

// A [d0, d1, d2] tensor of distinct values.
std::vector<float> Counting(int n, float step = 0.25f) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>((i * 7) % 11) * step - 1.f);
  return v;
}

TEST(ContribOpsTest, FusedMatMulTransposesAndScales) {
  // A [2, 3, 4] with transBatchA: the matrices are A[:, b, :] (2 x 4), batch 3.
  const std::vector<float> a = Counting(24), b = Counting(60, 0.5f);
  const float alpha = 0.5f;
  std::vector<double> want;  // [3, 2, 5]
  for (int bt = 0; bt < 3; ++bt) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 5; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += double{a[static_cast<size_t>(i * 12 + bt * 4 + k)]} * b[static_cast<size_t>(bt * 20 + k * 5 + j)];
        want.push_back(alpha * acc);
      }
    }
  }
  // transA and transBatchA on A [4, 3, 2]: A'[bt] = (A[:, bt, :])^T, 2 x 4.
  std::vector<float> at(24);
  for (int k = 0; k < 4; ++k) {
    for (int bt = 0; bt < 3; ++bt) {
      for (int i = 0; i < 2; ++i) at[static_cast<size_t>(k * 6 + bt * 2 + i)] = a[static_cast<size_t>(i * 12 + bt * 4 + k)];
    }
  }
  // transB on B [3, 5, 4].
  std::vector<float> bt_(60);
  for (int bt = 0; bt < 3; ++bt) {
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 5; ++j) bt_[static_cast<size_t>(bt * 20 + j * 4 + k)] = b[static_cast<size_t>(bt * 20 + k * 5 + j)];
    }
  }
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    ExpectNear(RunOp(be, "FusedMatMul", {Floats({2, 3, 4}, a), Floats({3, 4, 5}, b)},
                     {AttrInt("transBatchA", 1), AttrFloat("alpha", alpha)}),
               want);
    ExpectNear(RunOp(be, "FusedMatMul", {Floats({4, 3, 2}, at), Floats({3, 5, 4}, bt_)},
                     {AttrInt("transBatchA", 1), AttrInt("transA", 1), AttrInt("transB", 1), AttrFloat("alpha", alpha)}),
               want);
  }
}

TEST(ContribOpsTest, FusedConvAndGemmMatchTheirStandardForm) {
  const runner::Tensor x = RandomFloats({1, 2, 5, 5}, 1), w = RandomFloats({3, 2, 3, 3}, 2), bias = RandomFloats({3}, 3);
  const runner::Tensor z = RandomFloats({1, 3, 5, 5}, 4);
  const std::vector<pb::AttributeProto> conv = {AttrInts("pads", {1, 1, 1, 1}), AttrInts("kernel_shape", {3, 3})};
  // Conv, then the sum input, then the activation.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{1, 2, 5, 5}}).Input("w", pb::kFloat, {{3, 2, 3, 3}}).Input("b", pb::kFloat, {{3}});
  g.Input("z", pb::kFloat, {{1, 3, 5, 5}});
  g.Node("Conv", {"x", "w", "b"}, {"c"}, conv).Node("Add", {"c", "z"}, {"s"});
  g.Node("Clip", {"s"}, {"y"}, {AttrFloat("min", -0.5f), AttrFloat("max", 0.75f)}).Output("y");
  auto want = RunGraphOn(runner::Backend::kReference, g.Build(), {{"x", x}, {"w", w}, {"b", bias}, {"z", z}}, 9);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<float> w0 = Values<float>((*want)[0].tensor());
  const std::vector<double> expected(w0.begin(), w0.end());
  std::vector<pb::AttributeProto> fused = conv;
  fused.push_back(AttrString("activation", "Clip"));
  fused.push_back(AttrFloats("activation_params", {-0.5f, 0.75f}));
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    ExpectNear(RunOp(b, "FusedConv", {x, w, bias, z}, fused, 14), expected, 1e-5);
    ExpectNear(RunOp(b, "FusedConv", {x, w, bias, z}, fused, 9), expected, 1e-5);  // Clip with attributes
  }

  const runner::Tensor ga = RandomFloats({3, 4}, 5), gb = RandomFloats({5, 4}, 6), gc = RandomFloats({5}, 7);
  std::vector<double> gemm;
  std::vector<float> va = Values<float>(ga), vb = Values<float>(gb), vc = Values<float>(gc);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double{va[static_cast<size_t>(i * 4 + k)]} * vb[static_cast<size_t>(j * 4 + k)];
      const double v = 2.0 * acc + 0.5 * vc[static_cast<size_t>(j)];
      gemm.push_back(v < 0 ? 0.1 * v : v);
    }
  }
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    ExpectNear(RunOp(b, "FusedGemm", {ga, gb, gc},
                     {AttrInt("transB", 1), AttrFloat("alpha", 2.f), AttrFloat("beta", 0.5f),
                      AttrString("activation", "LeakyRelu"), AttrFloat("activation_alpha", 0.1f)}),
               gemm);
  }
}

// saturate(round_half_even(v / scale) + zero_point) for uint8 or int8.
int Quantize(double v, double scale, int zp, bool is_signed) {
  const double q = std::nearbyint(v / scale) + zp;
  return static_cast<int>(std::clamp(q, is_signed ? -128.0 : 0.0, is_signed ? 127.0 : 255.0));
}

TEST(ContribOpsTest, QLinearOpsDequantizeComputeQuantize) {
  const std::vector<uint8_t> a = {0, 10, 128, 200, 255, 77};
  const std::vector<uint8_t> b = {255, 3, 128, 100, 0, 64};
  const float as = 0.05f, bs = 0.1f, cs = 0.08f;
  const uint8_t az = 128, bz = 120, cz = 100;
  std::vector<int> add, mul, sig;
  for (size_t i = 0; i < a.size(); ++i) {
    const double da = as * (a[i] - az), db = bs * (b[i] - bz);
    add.push_back(Quantize(da + db, cs, cz, false));
    mul.push_back(Quantize(da * db, cs, cz, false));
    sig.push_back(Quantize(1 / (1 + std::exp(-da)), 1.0 / 256, 0, false));
  }
  auto scalar = [](float v) { return Floats({}, {v}); };
  auto zp = [](uint8_t v) { return Uint8s({}, {v}); };
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    for (const char* op : {"QLinearAdd", "QLinearMul"}) {
      auto out = RunNode(be, op,
                               {Uint8s({6}, a), scalar(as), zp(az), Uint8s({6}, b), scalar(bs), zp(bz), scalar(cs),
                                zp(cz)},
                               {}, 14, 1, "com.microsoft");
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<uint8_t> got = Values<uint8_t>((*out)[0].tensor());
      const std::vector<int>& want = std::string(op) == "QLinearAdd" ? add : mul;
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << op << " at " << i;
    }
    auto out = RunNode(be, "QLinearSigmoid", {Uint8s({6}, a), scalar(as), zp(az), scalar(1.f / 256), zp(0)}, {},
                             14, 1, "com.microsoft");
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<uint8_t> got = Values<uint8_t>((*out)[0].tensor());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], sig[i]) << "QLinearSigmoid at " << i;
    // int8 without zero points: the output stays int8.
    auto s8 = RunNode(be, "QLinearLeakyRelu", {Int8s({3}, {-100, 0, 90}), scalar(0.1f), runner::Tensor(),
                                                 scalar(0.05f)},
                            {AttrFloat("alpha", 0.5f)}, 14, 1, "com.microsoft");
    ASSERT_TRUE(s8.ok()) << s8.status();
    ASSERT_EQ((*s8)[0].tensor().dtype(), pb::kInt8);
    EXPECT_THAT(Values<int8_t>((*s8)[0].tensor()), ::testing::ElementsAre(-100, 0, 127));
    auto cat = RunNode(be, "QLinearConcat",
                             {scalar(0.1f), zp(10), Uint8s({1, 2}, {20, 30}), scalar(0.1f), zp(10),
                              Uint8s({1, 1}, {5}), scalar(0.2f), zp(0)},
                             {AttrInt("axis", 1)}, 14, 1, "com.microsoft");
    ASSERT_TRUE(cat.ok()) << cat.status();
    EXPECT_THAT(Values<uint8_t>((*cat)[0].tensor()), ::testing::ElementsAre(20, 30, 20));
  }
}

// QGemm: Y = alpha * (A'B' + C), C an int32 bias at scale a_scale * b_scale,
// b_scale one per output column; float out without y_scale.
TEST(ContribOpsTest, QGemmScalesTheBiasWithAlphaAndTakesPerColumnScales) {
  const std::vector<uint8_t> a = {10, 200, 130, 0, 255, 128};  // [2, 3]
  const std::vector<int8_t> b = {1, -2, 3, 4, -5, 6};          // [3, 2]
  const std::vector<int32_t> c = {100, -300};
  const float as = 0.5f, alpha = 0.75f;
  const uint8_t az = 128;
  const std::vector<float> bs = {0.25f, 0.125f};
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) {
        acc += as * (a[static_cast<size_t>(i * 3 + k)] - az) * bs[static_cast<size_t>(j)] *
               b[static_cast<size_t>(k * 2 + j)];
      }
      want.push_back(alpha * (acc + c[static_cast<size_t>(j)] * as * bs[static_cast<size_t>(j)]));
    }
  }
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    ExpectNear(RunOp(be, "QGemm",
                     {Uint8s({2, 3}, a), Floats({}, {as}), Uint8s({}, {az}), Int8s({3, 2}, b),
                      Floats({2}, bs), Int8s({2}, {0, 0}), Int32s({2}, c)},
                     {AttrFloat("alpha", alpha)}, 13),
               want);
  }
}

// MatMulIntegerToFloat: Y = (A - a_zp)(B - b_zp) * a_scale * b_scale + bias,
// b_scale and b_zero_point one per column; without zero points and bias too.
// DynamicQuantizeMatMul quantizes a float A as DynamicQuantizeLinear does:
// A of range [-2, 253] is exact at scale 1, zero point 2.
TEST(ContribOpsTest, IntegerMatMulsToFloat) {
  const std::vector<uint8_t> a = {10, 200, 130, 0, 255, 128};  // [2, 3]
  const std::vector<int8_t> b = {1, -2, 3, 4, -5, 6};          // [3, 2]
  const std::vector<int8_t> bz = {1, -1};
  const std::vector<float> bs = {0.25f, 0.125f}, bias = {1.5f, -2.f};
  const float as = 0.5f;
  const uint8_t az = 128;
  auto want = [&](const std::vector<double>& av, double a_zero, double a_scale, bool zps, bool with_bias) {
    std::vector<double> y;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 3; ++k) {
          acc += (av[static_cast<size_t>(i * 3 + k)] - a_zero) *
                 (b[static_cast<size_t>(k * 2 + j)] - (zps ? bz[static_cast<size_t>(j)] : 0));
        }
        y.push_back(acc * a_scale * bs[static_cast<size_t>(j)] +
                    (with_bias ? bias[static_cast<size_t>(j)] : 0));
      }
    }
    return y;
  };
  const std::vector<double> a_double(a.begin(), a.end());
  const std::vector<float> af = {-2.f, 0.f, 253.f, 5.f, 7.f, -1.f};
  const std::vector<double> af_double(af.begin(), af.end());
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    ExpectNear(RunOp(be, "MatMulIntegerToFloat",
                     {Uint8s({2, 3}, a), Int8s({3, 2}, b), Floats({}, {as}), Floats({2}, bs),
                      Uint8s({}, {az}), Int8s({2}, bz), Floats({2}, bias)},
                     {}, 13),
               want(a_double, az, as, true, true));
    ExpectNear(RunOp(be, "MatMulIntegerToFloat",
                     {Uint8s({2, 3}, a), Int8s({3, 2}, b), Floats({}, {as}), Floats({2}, bs)}, {}, 13),
               want(a_double, 0, as, false, false));
    ExpectNear(
        RunOp(be, "DynamicQuantizeMatMul", {Floats({2, 3}, af), Int8s({3, 2}, b), Floats({2}, bs)}, {}, 13),
        want(af_double, 0, 1, false, false));
    ExpectNear(
        RunOp(be, "DynamicQuantizeMatMul",
              {Floats({2, 3}, af), Int8s({3, 2}, b), Floats({2}, bs), Int8s({2}, bz), Floats({2}, bias)}, {},
              13),
        want(af_double, 0, 1, true, true));
  }
  // DynamicQuantizeLinear arrived in opset 11.
  auto old = RunNode(runner::Backend::kReference, "DynamicQuantizeMatMul",
                     {Floats({2, 3}, af), Int8s({3, 2}, b), Floats({2}, bs)}, {}, 10, 1, "com.microsoft");
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.status().message(), HasSubstr("opset 11"));
}

// MatMulNBits: Y = A x dequantize(B)^T + bias, codes packed low first along
// K in blocks, (code - zero_point) * scale per block. 4-bit codes with
// packed zero points, K not a multiple of the block (the last block padded)
// and a bias; 4-bit without zero points (8) and scales [N, k_blocks];
// 8-bit codes with float zero points.
TEST(ContribOpsTest, MatMulNBitsDequantizesBlocks) {
  struct Case {
    int64_t k, n, bits, block;
    int zp_kind;  // 0 none, 1 packed uint8, 2 float
    bool bias, scales_2d;
  };
  const std::vector<Case> cases = {
      {40, 3, 4, 16, 1, true, false}, {32, 5, 4, 16, 0, false, true}, {32, 2, 8, 16, 2, false, false}};
  uint32_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "bits " << c.bits << " K " << c.k << " zp " << c.zp_kind);
    const int64_t blocks = (c.k + c.block - 1) / c.block, blob = c.block * c.bits / 8;
    runner::Tensor a = RandomFloats({2, c.k}, seed++);
    runner::Tensor b = RandomInts(pb::kUint8, {c.n, blocks, blob}, seed++, 0, 255);
    runner::Tensor scales =
        RandomFloats(c.scales_2d ? std::vector<int64_t>{c.n, blocks} : std::vector<int64_t>{c.n * blocks},
                     seed++, 0.01f, 0.1f);
    const int64_t zp_bytes = c.n * ((blocks * c.bits + 7) / 8);
    runner::Tensor zp = c.zp_kind == 2 ? RandomFloats({c.n * blocks}, seed++, 0.f, 200.f)
                                       : RandomInts(pb::kUint8, {zp_bytes}, seed++, 0, 255);
    runner::Tensor bias = RandomFloats({c.n}, seed++);
    const std::vector<uint8_t> b_bytes = Values<uint8_t>(b);
    auto code = [&](int64_t row, int64_t kk) -> double {
      const int64_t blk = kk / c.block, j = kk % c.block;
      const uint8_t* p = b_bytes.data() + (row * blocks + blk) * blob;
      if (c.bits == 8) return p[j];
      return (j % 2 == 0) ? (p[j / 2] & 15) : (p[j / 2] >> 4);
    };
    auto zero = [&](int64_t row, int64_t blk) -> double {
      if (c.zp_kind == 0) return c.bits == 4 ? 8 : 128;
      if (c.zp_kind == 2) return Values<float>(zp)[static_cast<size_t>(row * blocks + blk)];
      const int64_t per_row = (blocks * c.bits + 7) / 8;
      const uint8_t byte =
          Values<uint8_t>(zp)[static_cast<size_t>(row * per_row + (c.bits == 4 ? blk / 2 : blk))];
      if (c.bits == 8) return byte;
      return blk % 2 == 0 ? (byte & 15) : (byte >> 4);
    };
    std::vector<double> want;
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t col = 0; col < c.n; ++col) {
        double acc = c.bias ? Values<float>(bias)[static_cast<size_t>(col)] : 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const int64_t blk = kk / c.block;
          const double w = (code(col, kk) - zero(col, blk)) *
                           Values<float>(scales)[static_cast<size_t>(col * blocks + blk)];
          acc += Values<float>(a)[static_cast<size_t>(i * c.k + kk)] * w;
        }
        want.push_back(acc);
      }
    }
    // (An undefined tensor leaves the input out: no zero points, no g_idx.)
    std::vector<runner::Tensor> inputs = {a, b, scales, c.zp_kind != 0 ? zp : runner::Tensor()};
    if (c.bias) {
      inputs.push_back(runner::Tensor());
      inputs.push_back(bias);
    }
    std::vector<pb::AttributeProto> attrs = {AttrInt("K", c.k), AttrInt("N", c.n), AttrInt("bits", c.bits),
                                             AttrInt("block_size", c.block)};
    for (runner::Backend be : kBackends) {
      SCOPED_TRACE(runner::BackendName(be));
      ExpectNear(RunOp(be, "MatMulNBits", inputs, attrs, 21), want, 1e-4);
    }
  }
}

// MatMulNBits with constant weights: the cpu backend multiplies up to 4
// rows of A by the 4-bit codes themselves (16-byte groups on AVX2, any
// block length otherwise), more rows by panels of 192 columns dequantized
// per product (the packed AVX-512 product for K up to 4096, else oneDNN's
// sgemm; N of 200: a panel and a part); both against the products computed
// here, on 1 and 2 threads.
TEST(ContribOpsTest, MatMulNBitsWithConstantWeightsReadsTheCodes) {
  struct Case {
    int64_t bits, k, n, block;
    bool zero_points;
  };
  const std::vector<Case> cases = {{4, 64, 70, 32, false}, {4, 100, 33, 32, true}, {4, 40, 17, 16, true},
                                   {4, 256, 9, 128, true}, {8, 64, 70, 32, false}, {8, 100, 33, 32, true},
                                   {8, 40, 17, 16, true},  {8, 72, 5, 64, true},   {4, 64, 200, 32, true},
                                   {4, 4160, 7, 32, true}, {8, 4100, 5, 64, false}};
  uint32_t seed = 90;
  for (const Case& c : cases) {
    const int64_t blocks = (c.k + c.block - 1) / c.block, width = c.block * c.bits / 8;
    const int64_t zero_row = c.bits == 8 ? blocks : (blocks + 1) / 2;
    const runner::Tensor codes = RandomInts(pb::kUint8, {c.n, blocks, width}, seed++, 0, 255);
    const runner::Tensor scales = RandomFloats({c.n * blocks}, seed++, 0.01f, 0.1f);
    const runner::Tensor zeros = RandomInts(pb::kUint8, {c.n * zero_row}, seed++, 0, 255);
    const std::vector<uint8_t> cv = Values<uint8_t>(codes), zv = Values<uint8_t>(zeros);
    const std::vector<float> sv = Values<float>(scales);
    auto weight = [&](int64_t kk, int64_t col) {
      const int64_t b = kk / c.block, j = kk % c.block;
      double code = 0, zero = 0;
      if (c.bits == 8) {
        code = cv[static_cast<size_t>((col * blocks + b) * width + j)];
        zero = c.zero_points ? zv[static_cast<size_t>(col * zero_row + b)] : 128;
      } else {
        const uint8_t byte = cv[static_cast<size_t>((col * blocks + b) * width + j / 2)];
        code = j % 2 == 0 ? (byte & 15) : (byte >> 4);
        zero = 8;
        if (c.zero_points) {
          const uint8_t z = zv[static_cast<size_t>(col * zero_row + b / 2)];
          zero = b % 2 == 0 ? (z & 15) : (z >> 4);
        }
      }
      return (code - zero) * sv[static_cast<size_t>(col * blocks + b)];
    };
    for (const std::vector<int64_t>& a_shape :
         std::vector<std::vector<int64_t>>{{c.k}, {1, c.k}, {3, c.k}, {2, 2, c.k}, {5, c.k}, {17, c.k}}) {
      SCOPED_TRACE(::testing::Message() << c.bits << " bits, K " << c.k << " N " << c.n << " block "
                                        << c.block << " A rank " << a_shape.size());
      const runner::Tensor a = RandomFloats(a_shape, seed++);
      const std::vector<float> av = Values<float>(a);
      const int64_t rows = a.size() / c.k;
      std::vector<double> want;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t col = 0; col < c.n; ++col) {
          double acc = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) acc += av[static_cast<size_t>(r * c.k + kk)] * weight(kk, col);
          want.push_back(acc);
        }
      }
      GraphBuilder g("nbits");
      g.Input("a", pb::kFloat, a_shape)
          .Initializer(InitializerFrom("codes", codes))
          .Initializer(InitializerFrom("scales", scales));
      std::vector<std::string> inputs = {"a", "codes", "scales"};
      if (c.zero_points) {
        g.Initializer(InitializerFrom("zeros", zeros));
        inputs.push_back("zeros");
      }
      g.Node("MatMulNBits", inputs, {"y"},
             {AttrInt("K", c.k), AttrInt("N", c.n), AttrInt("bits", c.bits), AttrInt("block_size", c.block)})
          .Output("y");
      g.graph().node.back().domain = "com.microsoft";
      for (runner::Backend be : kBackends) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << runner::BackendName(be) << ", threads " << threads);
          auto out = RunGraphOn(be, g.Build(), {{"a", a}}, 21, threads);
          ASSERT_TRUE(out.ok()) << out.status();
          const runner::Tensor& y = (*out)[0].tensor();
          std::vector<int64_t> shape = a_shape;
          shape.back() = c.n;
          EXPECT_EQ(y.shape(), shape);
          ExpectNear(Values<float>(y), want, c.k > 1000 ? 1e-3 : 1e-5);  // long sums of float32
        }
      }
    }
  }
}

// A session of `graph` at opset 21 with com.microsoft 1 imported (with an
// observer that sees every value when `observed`).
absl::StatusOr<std::unique_ptr<runner::Session>> ContribSession(runner::Backend be, pb::GraphProto graph,
                                                                bool observed = false) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(std::move(graph), 21);
  pb::OperatorSetIdProto ms;
  ms.domain = "com.microsoft";
  ms.version = 1;
  loaded.proto.opset_import.push_back(ms);
  runner::SessionOptions options;
  options.backend = be;
  if (observed) options.observer = [](const ir::Value&, const runner::RtValue&) { return absl::OkStatus(); };
  return runner::Session::Create(std::move(loaded), options);
}

// MatMulNBits' float weights are never held: the cpu backend reads the
// codes for any number of rows, the reference backend computes the
// weights in each run (an observed session folds them once, to report
// them); all compute the same product.
TEST(ContribOpsTest, MatMulNBitsFloatWeightsAreNotHeld) {
  const int64_t k = 64, n = 24, block = 32, blocks = k / block;
  GraphBuilder g("nbits");
  g.Input("a", pb::kFloat, std::vector<int64_t>{9, k})
      .Initializer(InitializerFrom("codes", RandomInts(pb::kUint8, {n, blocks, block / 2}, 7, 0, 255)))
      .Initializer(InitializerFrom("scales", RandomFloats({n * blocks}, 8, 0.01f, 0.1f)))
      .Node("MatMulNBits", {"a", "codes", "scales"}, {"y"},
            {AttrInt("K", k), AttrInt("N", n), AttrInt("bits", 4), AttrInt("block_size", block)})
      .Output("y");
  g.graph().node.back().domain = "com.microsoft";
  const runner::Tensor a = RandomFloats({9, k}, 9);
  std::vector<std::vector<float>> outputs;
  for (int observed = 0; observed < 3; ++observed) {
    const runner::Backend be = observed == 1 ? runner::Backend::kCpu : runner::Backend::kReference;
    SCOPED_TRACE(::testing::Message() << runner::BackendName(be) << (observed == 2 ? ", observed" : ""));
    auto session = ContribSession(be, g.Build(), observed == 2);
    ASSERT_TRUE(session.ok()) << session.status();
    if (observed == 2) {
      EXPECT_GT((*session)->held_folded_values(), 0);
    } else {
      EXPECT_EQ((*session)->held_folded_values(), 0);
    }
    for (int run = 0; run < 2; ++run) {
      auto out = (*session)->Run({{"a", runner::RtValue::FromTensor(a)}});
      ASSERT_TRUE(out.ok()) << out.status();
      outputs.push_back(Values<float>((*out)[0].tensor()));
    }
  }
  ASSERT_EQ(outputs.size(), 6u);
  for (size_t i = 1; i < outputs.size(); ++i) {
    ExpectNear(outputs[i], std::vector<double>(outputs[0].begin(), outputs[0].end()), 1e-5);
  }
}

// Codes of another N than the node's (or of other blocks) fail the run on
// both backends, as the dequantization's Reshape does.
TEST(ContribOpsTest, MatMulNBitsCodesThatDoNotAgreeFailOnEveryBackend) {
  const int64_t k = 64, n = 8;
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{7, 2, 16}, {8, 3, 16}, {8, 2, 12}}) {
    GraphBuilder g("nbits");
    g.Input("a", pb::kFloat, std::vector<int64_t>{6, k})
        .Initializer(InitializerFrom("codes", RandomInts(pb::kUint8, dims, 7, 0, 255)))
        .Initializer(InitializerFrom("scales", RandomFloats({dims[0] * dims[1]}, 8, 0.01f, 0.1f)))
        .Node("MatMulNBits", {"a", "codes", "scales"}, {"y"},
              {AttrInt("K", k), AttrInt("N", n), AttrInt("bits", 4), AttrInt("block_size", 32)})
        .Output("y");
    g.graph().node.back().domain = "com.microsoft";
    for (runner::Backend be : kBackends) {
      SCOPED_TRACE(::testing::Message() << runner::BackendName(be) << " " << ::testing::PrintToString(dims));
      auto session = ContribSession(be, g.Build());
      ASSERT_TRUE(session.ok()) << session.status();
      auto out = (*session)->Run({{"a", runner::RtValue::FromTensor(RandomFloats({6, k}, 9))}});
      ASSERT_FALSE(out.ok());
      EXPECT_THAT(out.status().message(), ::testing::HasSubstr("cannot reshape"));
    }
  }
}

// A session of the graph y = GatherBlockQuantized(table, indices) with the
// table, scales and zero points (when given) as initializers.
absl::StatusOr<std::unique_ptr<runner::Session>> ConstantTableSession(runner::Backend be,
                                                                      const runner::Tensor& data,
                                                                      const runner::Tensor& scales,
                                                                      const runner::Tensor* zeros,
                                                                      int64_t bits, int64_t block) {
  GraphBuilder g("table");
  g.Input("indices", pb::kInt64, std::vector<int64_t>{2, 2})
      .Initializer(InitializerFrom("data", data))
      .Initializer(InitializerFrom("scales", scales));
  std::vector<std::string> inputs = {"data", "indices", "scales"};
  if (zeros != nullptr) {
    g.Initializer(InitializerFrom("zeros", *zeros));
    inputs.push_back("zeros");
  }
  g.Node("GatherBlockQuantized", inputs, {"y"}, {AttrInt("bits", bits), AttrInt("block_size", block)})
      .Output("y");
  g.graph().node.back().domain = "com.microsoft";
  return ContribSession(be, g.Build());
}

// GatherBlockQuantized (ONNX Runtime's quantized embedding tables): rows of
// a uint8 table of 4-bit (two a byte, low nibble first) or 8-bit codes,
// each block of the row (code - zero point) * scale. With a constant table
// no float table is held: the cpu backend dequantizes the gathered rows
// alone, the reference backend the table in each run.
TEST(ContribOpsTest, GatherBlockQuantizedDequantizesTheGatheredRows) {
  const int64_t rows = 6, k = 64;
  uint32_t seed = 120;
  for (int64_t bits : {4, 8}) {
    for (int64_t block : {16, 32, 64}) {
      for (bool zero_points : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << bits << " bits, block " << block << ", zero points " << zero_points);
        const int64_t width = bits == 4 ? k / 2 : k, blocks = k / block;
        const int64_t zwidth = bits == 4 ? (blocks + 1) / 2 : blocks;
        const runner::Tensor data = RandomInts(pb::kUint8, {rows, width}, seed++, 0, 255);
        const runner::Tensor scales = RandomFloats({rows, blocks}, seed++, 0.01f, 0.1f);
        const runner::Tensor zeros = RandomInts(pb::kUint8, {rows, zwidth}, seed++, 0, 255);
        const std::vector<int64_t> indices = {4, 0, -2, 5};
        const std::vector<uint8_t> dv = Values<uint8_t>(data), zv = Values<uint8_t>(zeros);
        const std::vector<float> sv = Values<float>(scales);
        std::vector<double> want;
        for (int64_t index : indices) {
          const int64_t r = index < 0 ? index + rows : index;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t b = j / block;
            double code = dv[static_cast<size_t>(r * width + (bits == 4 ? j / 2 : j))];
            if (bits == 4) code = j % 2 == 0 ? static_cast<int>(code) & 15 : static_cast<int>(code) >> 4;
            double zero = bits == 4 ? 8 : 128;
            if (zero_points) {
              const int z = zv[static_cast<size_t>(r * zwidth + (bits == 4 ? b / 2 : b))];
              zero = bits == 8 ? z : (b % 2 == 0 ? (z & 15) : (z >> 4));
            }
            want.push_back((code - zero) * sv[static_cast<size_t>(r * blocks + b)]);
          }
        }
        std::vector<runner::Tensor> inputs = {data, Int64s({2, 2}, indices), scales};
        if (zero_points) inputs.push_back(zeros);
        for (runner::Backend be : kBackends) {
          SCOPED_TRACE(runner::BackendName(be));
          ExpectNear(RunOp(be, "GatherBlockQuantized", inputs,
                           {AttrInt("bits", bits), AttrInt("block_size", block)}, 21),
                     want, 1e-6);
          auto session = ConstantTableSession(be, data, scales, zero_points ? &zeros : nullptr, bits, block);
          ASSERT_TRUE(session.ok()) << session.status();
          EXPECT_EQ((*session)->held_folded_values(), 0);
          auto out = (*session)->Run({{"indices", runner::RtValue::FromTensor(Int64s({2, 2}, indices))}});
          ASSERT_TRUE(out.ok()) << out.status();
          EXPECT_EQ((*out)[0].tensor().shape(), (std::vector<int64_t>{2, 2, k}));
          ExpectNear(Values<float>((*out)[0].tensor()), want, 1e-6);
          out = (*session)->Run({{"indices", runner::RtValue::FromTensor(Int64s({2, 2}, {0, 1, 6, 2}))}});
          ASSERT_FALSE(out.ok());
          EXPECT_THAT(out.status().message(), ::testing::HasSubstr("index 6 is out of range"));
        }
      }
    }
  }
}

TEST(ContribOpsTest, QLinearSoftmaxOverTheLastAxis) {
  const std::vector<uint8_t> x = {100, 120, 140, 90, 90, 90};
  std::vector<int> want;
  for (int r = 0; r < 2; ++r) {
    double total = 0;
    for (int i = 0; i < 3; ++i) total += std::exp(0.05 * (x[static_cast<size_t>(r * 3 + i)] - 100));
    for (int i = 0; i < 3; ++i) {
      want.push_back(
          Quantize(std::exp(0.05 * (x[static_cast<size_t>(r * 3 + i)] - 100)) / total, 1.0 / 256, 0, false));
    }
  }
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    auto out = RunNode(
        be, "QLinearSoftmax",
        {Uint8s({2, 3}, x), Floats({}, {0.05f}), Uint8s({}, {100}), Floats({}, {1.f / 256}), Uint8s({}, {0})},
        {AttrInt("axis", -1), AttrInt("opset", 13)}, 13, 1, "com.microsoft");
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<uint8_t> got = Values<uint8_t>((*out)[0].tensor());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "at " << i;
  }
}

// A chain of contrib ops longer than any round count (an LLM's layers):
// inference types each one's output, so the whole chain is written out.
TEST(ContribOpsTest, LongChainsOfContribOpsAreAllWrittenOut) {
  constexpr int kLength = 150;
  GraphBuilder g("chain");
  g.Input("x", pb::kFloat, {{2, 3}});
  std::string previous = "x";
  for (int i = 0; i < kLength; ++i) {
    const std::string out = absl::StrCat("g", i);
    g.Node("Gelu", {previous}, {out}, {}, absl::StrCat("gelu", i));
    g.graph().node.back().domain = "com.microsoft";
    previous = out;
  }
  g.Output(previous);
  const std::vector<float> x = {-2.f, -0.5f, 0.f, 0.3f, 1.f, 3.f};
  std::vector<double> want;
  for (float v : x) {
    double y = v;
    for (int i = 0; i < kLength; ++i) y = 0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0)));
    want.push_back(y);
  }
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    auto out = RunGraphOn(be, g.Build(), {{"x", Floats({2, 3}, x)}}, 17);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(Values<float>((*out)[0].tensor()), want, 1e-5);
  }
}

TEST(ContribOpsTest, OpsThatCannotRunSayWhich) {
  auto paged = RunNode(runner::Backend::kReference, "PagedAttention", {RandomFloats({1, 2, 4}, 1)}, {}, 14, 1,
                       "com.microsoft");
  ASSERT_FALSE(paged.ok());
  EXPECT_THAT(paged.status().message(),
              HasSubstr("does not run the ONNX Runtime contrib op com.microsoft::PagedAttention"));
  auto nchwc = RunNode(runner::Backend::kReference, "ReorderInput", {RandomFloats({1, 8, 2, 2}, 1)}, {}, 14,
                       1, "com.microsoft.nchwc");
  ASSERT_FALSE(nchwc.ok());
  EXPECT_THAT(nchwc.status().message(),
              HasSubstr("a blocked-layout op of ONNX Runtime's 'all' optimization level"));
  auto elu = RunNode(runner::Backend::kReference, "FusedConv", {RandomFloats({1, 1, 3, 3}, 1), RandomFloats({1, 1, 1, 1}, 2)},
                           {AttrString("activation", "Elu")}, 14, 1, "com.microsoft");
  ASSERT_FALSE(elu.ok());
  EXPECT_THAT(elu.status().message(), HasSubstr("activation 'Elu' is not supported"));
}

// testdata/models/attention_ort: one node each of MultiHeadAttention,
// Attention, RotaryEmbedding and GroupQueryAttention with seeded inputs and
// the outputs ONNX Runtime 1.30 computed for them
// (bench/make_attention_cases.py): masks of every form, attention bias,
// past state and present outputs, causal attention, rotary embedding
// (interleaved, partial, by position ids or a first position), grouped
// heads on prompts, padded prompts, ragged decoding batches, chunks and
// local windows; and a 2-layer decoder in the form of ONNX Runtime's LLM
// builder (MatMulNBits, GroupQueryAttention with rotary embedding,
// SkipSimplifiedLayerNormalization) on a prompt and on a decoding step
// (bench/make_genai_model.py).
TEST(ContribOpsTest, AttentionOpsComputeWhatOnnxRuntimeComputes) {
  std::vector<std::filesystem::path> folders;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataPath("models/attention_ort"))) {
    folders.push_back(entry.path());
  }
  std::sort(folders.begin(), folders.end());
  ASSERT_GE(folders.size(), 54u);
  for (const std::filesystem::path& folder : folders) {
    ConformanceCase c{folder.filename().string(), folder / "model.onnx", folder / "test_data_set_0", {}};
    // Whole decoders: logits of order 1 after a few layers of float32 sums,
    // compared with an absolute tolerance of that order's rounding.
    if (c.id.rfind("genai_", 0) == 0) c.atol = 1e-5;
    for (runner::Backend b : kBackends) {
      SCOPED_TRACE(c.id + " on " + std::string(runner::BackendName(b)));
      EXPECT_TRUE(RunConformanceCase(c, b).ok()) << RunConformanceCase(c, b);
    }
  }
}

// [B, S, N*H] tensors q, k, v packed as [B, S, N, parts, H].
runner::Tensor Packed(const std::vector<runner::Tensor>& parts, int64_t b, int64_t s, int64_t n, int64_t h) {
  std::vector<float> out;
  const int64_t p = static_cast<int64_t>(parts.size());
  std::vector<std::vector<float>> values;
  for (const runner::Tensor& t : parts) values.push_back(Values<float>(t));
  for (int64_t i = 0; i < b * s; ++i) {
    for (int64_t head = 0; head < n; ++head) {
      for (int64_t part = 0; part < p; ++part) {
        for (int64_t j = 0; j < h; ++j) {
          out.push_back(values[static_cast<size_t>(part)][static_cast<size_t>((i * n + head) * h + j)]);
        }
      }
    }
  }
  return Floats({b, s, n, p, h}, out);
}

// MultiHeadAttention's packed forms (which ONNX Runtime's cpu provider does
// not run) compute what the separate query, key and value do.
TEST(ContribOpsTest, PackedMultiHeadAttentionMatchesTheSeparateForm) {
  const int64_t b = 2, s = 3, n = 2, h = 4;
  const runner::Tensor q = RandomFloats({b, s, n * h}, 41), k = RandomFloats({b, s, n * h}, 42),
                       v = RandomFloats({b, s, n * h}, 43);
  const std::vector<pb::AttributeProto> attrs = {AttrInt("num_heads", n)};
  for (runner::Backend be : kBackends) {
    SCOPED_TRACE(runner::BackendName(be));
    const std::vector<float> separate = RunOp(be, "MultiHeadAttention", {q, k, v}, attrs);
    ASSERT_EQ(separate.size(), static_cast<size_t>(b * s * n * h));
    const std::vector<double> want(separate.begin(), separate.end());
    ExpectNear(RunOp(be, "MultiHeadAttention", {Packed({q, k, v}, b, s, n, h)}, attrs), want, 1e-6);
    ExpectNear(RunOp(be, "MultiHeadAttention", {q, Packed({k, v}, b, s, n, h)}, attrs), want, 1e-6);
  }
}

// Forms of the attention ops that are not written say what is missing.
TEST(ContribOpsTest, AttentionFormsThatAreNotWrittenSaySo) {
  const runner::Tensor q = RandomFloats({1, 2, 8}, 51), kv = RandomFloats({1, 2, 4}, 52);
  const runner::Tensor lens = Int32s({1}, {1}), total = Int32s({1}, {2});
  struct Case {
    std::string op;
    std::vector<runner::Tensor> inputs;
    std::vector<pb::AttributeProto> attributes;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total},
       {AttrInt("num_heads", 2), AttrInt("kv_num_heads", 1), AttrFloat("softcap", -30.f)},
       "softcap is not a finite value >= 0"},
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total, runner::Tensor(), runner::Tensor(),
        runner::Tensor(), runner::Tensor(), RandomFloats({3}, 56)},
       {AttrInt("num_heads", 2), AttrInt("kv_num_heads", 1)},
       "head_sink is not [num_heads] of the query's type"},
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total, runner::Tensor(), runner::Tensor(),
        runner::Tensor(), runner::Tensor(), runner::Tensor(), RandomFloats({1}, 57)},
       {AttrInt("num_heads", 2), AttrInt("kv_num_heads", 1)},
       "quantized caches' scales are not supported"},
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total},
       {AttrInt("num_heads", 2), AttrInt("kv_num_heads", 1), AttrInt("causal", 0)},
       "causal 0 is not supported"},
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total},
       {AttrInt("num_heads", 3), AttrInt("kv_num_heads", 2)},
       "not a positive multiple of kv_num_heads"},
      {"GroupQueryAttention",
       {q, kv, kv, runner::Tensor(), runner::Tensor(), lens, total},
       {AttrInt("num_heads", 2), AttrInt("kv_num_heads", 1), AttrInt("do_rotary", 1)},
       "do_rotary needs cos_cache and sin_cache"},
      {"MultiHeadAttention",
       {q, q, q, runner::Tensor(), runner::Tensor(), runner::Tensor(), runner::Tensor(), runner::Tensor(),
        runner::Tensor(), Int32s({1, 1, 4}, {0, 0, 0, 0})},
       {AttrInt("num_heads", 2)},
       "cache_indirection"},
      {"MultiHeadAttention", {q, kv}, {AttrInt("num_heads", 2)}, "none of the forms it takes"},
      {"MoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomFloats({2, 6, 4}, 60), runner::Tensor(),
        RandomFloats({2, 4, 6}, 61), runner::Tensor(), RandomFloats({2, 6, 4}, 62)},
       {AttrInt("k", 1)},
       "fc3_experts_weights"},
      {"MoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomFloats({2, 12, 4}, 60), runner::Tensor(),
        RandomFloats({2, 4, 6}, 61)},
       {AttrString("activation_type", "swiglu"), AttrInt("swiglu_fusion", 2)},
       "swiglu_fusion 1"},
      {"MoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomFloats({2, 6, 4}, 60), runner::Tensor(),
        RandomFloats({2, 4, 6}, 61)},
       {AttrString("activation_type", "softplus")},
       "activation_type 'softplus' is not supported"},
      {"MoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomFloats({2, 6, 4}, 60), runner::Tensor(),
        RandomFloats({2, 4, 6}, 61)},
       {AttrInt("k", 3)},
       "k is not between 1 and the expert count"},
      {"QMoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomInts(pb::kUint8, {2, 6, 2}, 63, 0, 255),
        RandomFloats({2, 6}, 64), runner::Tensor(), RandomInts(pb::kUint8, {2, 4, 3}, 65, 0, 255),
        RandomFloats({2, 4}, 66), runner::Tensor(), runner::Tensor(), runner::Tensor(), runner::Tensor(),
        RandomInts(pb::kUint8, {2, 6, 1}, 67, 0, 255)},
       {},
       "zero points are not supported"},
      {"QMoE",
       {RandomFloats({3, 4}, 58), RandomFloats({3, 2}, 59), RandomInts(pb::kUint8, {2, 6, 1}, 63, 0, 255),
        RandomFloats({2, 6}, 64), runner::Tensor(), RandomInts(pb::kUint8, {2, 4, 2}, 65, 0, 255),
        RandomFloats({2, 4}, 66)},
       {AttrInt("expert_weight_bits", 2)},
       "expert_weight_bits is neither 4 nor 8"},
      {"RotaryEmbedding",
       {RandomFloats({1, 1, 2, 4}, 53), Int64s({1}, {0}), RandomFloats({4, 2}, 54), RandomFloats({4, 2}, 55)},
       {AttrInt("is_packed_batching", 1)},
       "packed batching is not supported"},
      {"RotaryEmbedding",
       {RandomFloats({1, 2, 8}, 53), Int64s({1}, {0}), RandomFloats({4, 2}, 54), RandomFloats({4, 2}, 55)},
       {AttrInt("rotary_embedding_dim", 4)},
       "rotary_embedding_dim needs num_heads"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    auto out = RunNode(runner::Backend::kReference, c.op, c.inputs, c.attributes, 17, 1, "com.microsoft");
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr(c.why));
  }
}

// Attention computed from its definition: Q, K, V from x W + bias, per head
// softmax(Q K^T / sqrt(d) + mask) V; `lengths` (keys from a batch's length
// on masked) or `mask` ([B, S], 0 masks) add -10000.
std::vector<double> AttentionByHand(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& bias, int batch, int seq, int in, int hidden,
                                    int heads, const std::vector<int32_t>& lengths,
                                    const std::vector<int32_t>& mask) {
  const int d = hidden / heads;
  std::vector<double> qkv(static_cast<size_t>(batch * seq * 3 * hidden));
  for (int r = 0; r < batch * seq; ++r) {
    for (int c = 0; c < 3 * hidden; ++c) {
      double acc = bias[static_cast<size_t>(c)];
      for (int k = 0; k < in; ++k)
        acc += double{x[static_cast<size_t>(r * in + k)]} * w[static_cast<size_t>(k * 3 * hidden + c)];
      qkv[static_cast<size_t>(r * 3 * hidden + c)] = acc;
    }
  }
  auto at = [&](int b, int s, int part, int h, int j) {
    return qkv[static_cast<size_t>((b * seq + s) * 3 * hidden + part * hidden + h * d + j)];
  };
  std::vector<double> out(static_cast<size_t>(batch * seq * hidden));
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < seq; ++i) {
        std::vector<double> score(static_cast<size_t>(seq));
        double top = -1e300;
        for (int t = 0; t < seq; ++t) {
          double dot = 0;
          for (int j = 0; j < d; ++j) dot += at(b, i, 0, h, j) * at(b, t, 1, h, j);
          dot /= std::sqrt(static_cast<double>(d));
          const bool masked = (!lengths.empty() && t >= lengths[static_cast<size_t>(b)]) ||
                              (!mask.empty() && mask[static_cast<size_t>(b * seq + t)] == 0);
          if (masked) dot += -10000.0;
          score[static_cast<size_t>(t)] = dot;
          top = std::max(top, dot);
        }
        double total = 0;
        for (double& v : score) total += (v = std::exp(v - top));
        for (int j = 0; j < d; ++j) {
          double acc = 0;
          for (int t = 0; t < seq; ++t) acc += score[static_cast<size_t>(t)] / total * at(b, t, 2, h, j);
          out[static_cast<size_t>((b * seq + i) * hidden + h * d + j)] = acc;
        }
      }
    }
  }
  return out;
}

TEST(ContribOpsTest, AttentionWithoutMaskWithLengthsAndWithAMask) {
  const int batch = 2, seq = 3, in = 4, hidden = 4, heads = 2;
  const runner::Tensor x = RandomFloats({batch, seq, in}, 21), w = RandomFloats({in, 3 * hidden}, 22);
  const runner::Tensor bias = RandomFloats({3 * hidden}, 23);
  const std::vector<float> vx = Values<float>(x), vw = Values<float>(w), vb = Values<float>(bias);
  const std::vector<int32_t> lengths = {2, 3}, mask = {1, 0, 1, 1, 1, 0};
  const std::vector<pb::AttributeProto> attrs = {AttrInt("num_heads", heads)};
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    for (int64_t opset : {12, 17}) {
      ExpectNear(RunOp(b, "Attention", {x, w, bias}, attrs, opset),
                 AttentionByHand(vx, vw, vb, batch, seq, in, hidden, heads, {}, {}));
      ExpectNear(RunOp(b, "Attention", {x, w, bias, Int32s({batch}, lengths)}, attrs, opset),
                 AttentionByHand(vx, vw, vb, batch, seq, in, hidden, heads, lengths, {}));
      ExpectNear(RunOp(b, "Attention", {x, w, bias, Int32s({batch, seq}, mask)}, attrs, opset),
                 AttentionByHand(vx, vw, vb, batch, seq, in, hidden, heads, {}, mask));
    }
  }
  // A past buffer shared with present is not written: the run says so.
  auto shared = RunNode(runner::Backend::kReference, "Attention",
                        {x, w, bias, runner::Tensor(), RandomFloats({2, batch, heads, 4, hidden / heads}, 24),
                         runner::Tensor(), Int32s({}, {2})},
                        attrs, 17, 1, "com.microsoft");
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.status().message(), HasSubstr("a past buffer shared with present is not supported"));
}

TEST(ContribOpsTest, EmbedLayerNormalization) {
  const std::vector<int32_t> ids = {3, 0, 4, 1}, segments = {0, 1, 1, 0}, mask = {1, 1, 1, 0};
  const runner::Tensor word = RandomFloats({5, 3}, 31), pos = RandomFloats({4, 3}, 32),
                       seg = RandomFloats({2, 3}, 33);
  const std::vector<float> gamma = {1, 2, 0.5f}, beta = {0, -1, 0.25f};
  const std::vector<float> vw = Values<float>(word), vp = Values<float>(pos), vs = Values<float>(seg);
  std::vector<float> sum;
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 2; ++s) {
      const size_t k = static_cast<size_t>(b * 2 + s);
      for (int h = 0; h < 3; ++h) {
        sum.push_back(vw[static_cast<size_t>(ids[k] * 3 + h)] + vp[static_cast<size_t>(s * 3 + h)] +
                      vs[static_cast<size_t>(segments[k] * 3 + h)]);
      }
    }
  }
  const RowStats st = Stats(sum, 4, 3, 1e-5);
  std::vector<double> y;
  for (int r = 0; r < 4; ++r) {
    for (int h = 0; h < 3; ++h) {
      y.push_back((sum[static_cast<size_t>(r * 3 + h)] - st.mean[static_cast<size_t>(r)]) *
                      st.inv_std[static_cast<size_t>(r)] * gamma[static_cast<size_t>(h)] +
                  beta[static_cast<size_t>(h)]);
    }
  }
  const std::vector<runner::Tensor> args = {
      Int32s({2, 2}, ids), Int32s({2, 2}, segments), word, pos, seg, Floats({3}, gamma),
      Floats({3}, beta),   Int32s({2, 2}, mask)};
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    ExpectNear(RunOp(b, "EmbedLayerNormalization", args, {AttrFloat("epsilon", 1e-5f)}, 14, 3, 0), y);
    ExpectNear(RunOp(b, "EmbedLayerNormalization", args, {AttrFloat("epsilon", 1e-5f)}, 14, 3, 2),
               std::vector<double>(sum.begin(), sum.end()));
    auto out =
        RunNode(b, "EmbedLayerNormalization", args, {AttrFloat("epsilon", 1e-5f)}, 14, 2, "com.microsoft");
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(Values<int32_t>((*out)[1].tensor()), ::testing::ElementsAre(2, 1));
  }
}

// Malformed contrib nodes: an error (never an internal one), no crash.
TEST(ContribOpsTest, MalformedNodesFailCleanly) {
  const runner::Tensor x = RandomFloats({1, 2, 3}, 1);
  struct Case {
    std::string op;
    std::vector<runner::Tensor> inputs;
    std::vector<pb::AttributeProto> attributes;
    int outputs;
    std::string domain = "com.microsoft";
  };
  const std::vector<Case> cases = {
      {"FusedConv", {}, {}, 1},
      {"FusedConv", {x}, {AttrString("activation", "Clip"), AttrFloats("activation_params", {1.f})}, 1},
      {"FusedGemm", {x, x}, {AttrString("activation", "Relu")}, 1},
      {"FusedMatMul", {x}, {AttrInt("transA", 1)}, 1},
      {"FusedMatMul", {x, x}, {AttrInt("transBatchB", 1), AttrInt("transA", 1)}, 1},
      {"QLinearConcat", {x, x}, {}, 1},
      {"QLinearAdd", {x, x, x}, {}, 1},
      {"SkipLayerNormalization", {x, x}, {}, 4},
      {"LayerNormalization", {x, x}, {AttrInt("axis", 1000)}, 3, ""},
      {"LayerNormalization", {x, x}, {AttrInt("axis", -1000)}, 3, ""},
      {"Gelu", {Int64s({2}, {1, 2})}, {}, 1},
      {"Gelu", {x}, {}, 0},
      {"QuantizeLinear", {x}, {AttrInt("axis", 1)}, 1},
      {"Attention", {x, x}, {AttrInt("num_heads", 0)}, 1},
      {"Attention", {x, x}, {AttrInt("num_heads", 1000000)}, 1},
      {"Attention", {x, x, x}, {AttrInt("num_heads", 2), AttrInts("qkv_hidden_sizes", {4, 2, -6})}, 1},
      {"Attention", {x, RandomFloats({3, 6}, 2), RandomFloats({6}, 3), x}, {AttrInt("num_heads", 2)}, 1},
      {"Attention", {x, RandomFloats({3, 6}, 2)}, {AttrInt("num_heads", 2)}, 2},
      {"EmbedLayerNormalization", {x}, {}, 1},
      {"MultiHeadAttention", {x}, {AttrInt("num_heads", 0)}, 1},
      {"MultiHeadAttention", {x, x, x, RandomFloats({5}, 4)}, {AttrInt("num_heads", 3)}, 3},
      {"MultiHeadAttention", {x, x, x, runner::Tensor(), x}, {AttrInt("num_heads", 3)}, 1},
      {"MultiHeadAttention", {x, x, x, runner::Tensor(), runner::Tensor(), x}, {AttrInt("num_heads", 3)}, 1},
      {"GroupQueryAttention", {x}, {AttrInt("num_heads", 3), AttrInt("kv_num_heads", 1)}, 3},
      {"GroupQueryAttention",
       {x, x, x, x, x, Int32s({1}, {-9}), Int32s({1}, {2})},
       {AttrInt("num_heads", 3), AttrInt("kv_num_heads", 1)},
       3},
      {"GroupQueryAttention",
       {x, x, x, runner::Tensor(), runner::Tensor(), Int32s({1}, {99}), Int32s({1}, {-5})},
       {AttrInt("num_heads", 3), AttrInt("kv_num_heads", 3)},
       3},
      {"GatherBlockQuantized", {x, Int64s({1}, {0}), x}, {AttrInt("bits", 3)}, 1},
      {"GatherBlockQuantized",
       {RandomInts(pb::kUint8, {2, 8}, 7, 0, 255), Int64s({1}, {5}), RandomFloats({2, 1}, 8)},
       {AttrInt("block_size", 16)},
       1},
      {"GatherBlockQuantized",
       {RandomInts(pb::kUint8, {2, 8}, 7, 0, 255), Int64s({1}, {0}), RandomFloats({2, 1}, 8),
        RandomInts(pb::kUint8, {9}, 9, 0, 255)},
       {AttrInt("block_size", 16)},
       1},
      {"RotaryEmbedding", {x, Int64s({1}, {0}), x, x}, {}, 1},
      {"RotaryEmbedding",
       {x, Int64s({1, 2}, {0, 99}), RandomFloats({4, 1}, 5), RandomFloats({4, 1}, 6)},
       {},
       1},
      {"RotaryEmbedding", {x, Int64s({1}, {-100}), RandomFloats({4, 1}, 5), RandomFloats({4, 1}, 6)}, {}, 1},
      {"RotaryEmbedding",
       {x, Int64s({1}, {0}), RandomFloats({4, 1}, 5), RandomFloats({4, 1}, 6)},
       {AttrInt("rotary_embedding_dim", 3), AttrInt("num_heads", 1)},
       1},
      {"EmbedLayerNormalization",
       {Int32s({1, 2}, {0, 99}), runner::Tensor(), RandomFloats({3, 2}, 1), RandomFloats({1, 2}, 2),
        runner::Tensor(), RandomFloats({2}, 3), RandomFloats({2}, 4)},
       {},
       1},
  };
  for (const Case& c : cases) {
    for (runner::Backend b : kBackends) {
      SCOPED_TRACE(c.op + " on " + std::string(runner::BackendName(b)));
      auto out = RunNode(b, c.op, c.inputs, c.attributes, 14, c.outputs, c.domain);
      if (!out.ok()) {
        EXPECT_NE(out.status().code(), absl::StatusCode::kInternal) << out.status();
      }
    }
  }
}

std::vector<float> RunModel(const std::string& file, runner::Backend backend, const runner::Tensor& image) {
  auto loaded = io::LoadModel(TestdataPath("models/contrib/" + file).string());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return {};
  int microsoft = 0;
  for (const pb::NodeProto& n : loaded->proto.graph->node) microsoft += n.domain == "com.microsoft";
  if (file.rfind("ort", 0) == 0) {
    EXPECT_GE(microsoft, 4) << "the optimized model should hold com.microsoft ops";
  }
  runner::SessionOptions options;
  options.backend = backend;
  auto session = runner::Session::Create(*std::move(loaded), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto out = (*session)->Run({{"image", runner::RtValue::FromTensor(image)}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return Values<float>((*out)[0].tensor());
}

// ort_extended.onnx is ONNX Runtime 1.30's 'extended' offline optimization of
// original.onnx (bench/make_contrib_model.py): FusedConv (Relu, Clip),
// FusedMatMul, Gelu, SkipLayerNormalization.
TEST(ContribOpsTest, OnnxRuntimeOptimizedModelComputesWhatItsOriginalDoes) {
  const runner::Tensor image = RandomFloats({1, 3, 8, 8}, 11, -2.f, 2.f);
  const std::vector<float> want = RunModel("original.onnx", runner::Backend::kReference, image);
  ASSERT_EQ(want.size(), 5u);
  const std::vector<double> expected(want.begin(), want.end());
  for (runner::Backend b : kBackends) {
    SCOPED_TRACE(runner::BackendName(b));
    ExpectNear(RunModel("ort_extended.onnx", b, image), expected, 1e-5);
  }
}

}  // namespace
}  // namespace onnxkit::testing
