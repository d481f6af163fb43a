// Calibrators on known distributions, and calibration independent of the
// order of the samples.
#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "quantization/calibration.h"
#include "quantization/calibrators.h"
#include "tests/util/model_builder.h"

namespace onnxkit::quant {
namespace {

// What calibration records for `values` (exact range, then 2048 bins).
TensorRange Record(const std::vector<float>& values) {
  TensorRange t;
  t.min = *std::min_element(values.begin(), values.end());
  t.max = *std::max_element(values.begin(), values.end());
  t.count = static_cast<int64_t>(values.size());
  t.hist.assign(2048, 0);
  double width = (t.max - t.min) / 2048;
  for (float v : values) t.hist[static_cast<size_t>(std::clamp<int64_t>(static_cast<int64_t>((v - t.min) / width), 0, 2047))] += 1;
  return t;
}

std::vector<float> Gaussian(int n, uint32_t seed, int outliers) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  for (int i = 0; i < outliers; ++i) v.push_back(i % 2 ? 40.f : -40.f);
  return v;
}

TEST(CalibratorsTest, MinMaxIsTheExactRange) {
  TensorRange t = Record({-2.f, 0.5f, 3.f});
  Range r = ComputeRange(t, {.method = Method::kMinMax});
  EXPECT_EQ(r.lo, -2);
  EXPECT_EQ(r.hi, 3);
}

TEST(CalibratorsTest, PercentileCutsTails) {
  std::vector<float> v;
  for (int i = 0; i <= 20000; ++i) v.push_back(-1.f + 2.f * static_cast<float>(i) / 20000.f);
  TensorRange t = Record(v);
  Range sym = PercentileRange(t, 99, true);
  EXPECT_NEAR(sym.hi, 0.99, 0.01);
  EXPECT_NEAR(sym.lo, -0.99, 0.01);
  Range asym = PercentileRange(t, 98, false);
  EXPECT_NEAR(asym.lo, -0.98, 0.01);
  EXPECT_NEAR(asym.hi, 0.98, 0.01);
  Range all = PercentileRange(t, 100, false);
  EXPECT_NEAR(all.hi, 1, 1e-3);
}

TEST(CalibratorsTest, EntropyClipsOutliersOfAGaussian) {
  TensorRange t = Record(Gaussian(200000, 1, 4));
  Range r = EntropyRange(t, true);
  EXPECT_GT(r.hi, 2.0);   // keeps the bulk
  EXPECT_LT(r.hi, 20.0);  // drops the +-40 outliers
  EXPECT_NEAR(r.lo, -r.hi, 1e-9);
}

TEST(CalibratorsTest, MseClipsOutliersOfAGaussian) {
  TensorRange t = Record(Gaussian(200000, 2, 4));
  for (bool sym : {true, false}) {
    Range r = MseRange(t, sym);
    EXPECT_GT(r.hi, 2.0) << sym;
    EXPECT_LT(r.hi, 40.0) << sym;
  }
}

TEST(CalibratorsTest, ParseMethodListsValidNames) {
  EXPECT_TRUE(ParseMethod("entropy").ok());
  auto bad = ParseMethod("kl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("minmax"), std::string::npos);
}

// Samples of `base` in reverse order.
class Reversed : public SampleSource {
 public:
  explicit Reversed(const SampleSource* base) : base_(base) {}
  int count() const override { return base_->count(); }
  absl::StatusOr<Feeds> Get(int i, const std::vector<const ir::Value*>& in) const override {
    return base_->Get(count() - 1 - i, in);
  }
  std::string Describe() const override { return "reversed"; }

 private:
  const SampleSource* base_;
};

TEST(CalibrationTest, IndependentOfSampleOrderAndRoundTripsThroughJson) {
  testing::GraphBuilder g("g");
  g.Input("x", pb::kFloat, {{1, 64}}).Node("Sigmoid", {"x"}, {"s"}).Node("Mul", {"s", "x"}, {"y"}).Output("y", pb::kFloat, {{1, 64}});
  io::LoadedModel m;
  m.proto = testing::ModelFromGraph(g.Build(), 13);
  auto samples = RandomSamples(6, 3, -2, 5, {});
  Reversed rev(samples.get());
  CalibrateOptions o;
  o.backend = runner::Backend::kReference;
  auto a = Calibrate(m, *samples, o);
  auto b = Calibrate(m, rev, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->tensors.size(), 3u);
  for (const auto& [name, t] : a->tensors) {
    EXPECT_EQ(t.min, b->tensors.at(name).min) << name;
    EXPECT_EQ(t.max, b->tensors.at(name).max) << name;
    EXPECT_EQ(t.hist, b->tensors.at(name).hist) << name;
  }
  auto back = CalibrationFromJson(CalibrationToJson(*a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors.at("y").hist, a->tensors.at("y").hist);
  EXPECT_DOUBLE_EQ(back->tensors.at("y").max, a->tensors.at("y").max);
  EXPECT_FALSE(CalibrationFromJson("{\"tensors\": [{\"name\": \"x\", \"min\": 2, \"max\": 1}]}").ok());
  EXPECT_FALSE(CalibrationFromJson("{\"tensors\": [").ok());
}

}  // namespace
}  // namespace onnxkit::quant
