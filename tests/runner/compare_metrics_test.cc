// The metrics compare reports for one pair of tensors.
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "runner/compare/compare.h"
#include "lib/io/proto.h"
#include "runner/value.h"

namespace onnxkit::runner {
namespace {

RtValue Floats(std::vector<float> v) {
  Tensor t = Tensor::Allocate(pb::kFloat, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.mutable_data<float>()[i] = v[i];
  return RtValue::FromTensor(std::move(t));
}

TEST(CompareMetricsTest, RelativeErrorIgnoresExpectedZeros) {
  // An expected 0 against 0.03 is out of tolerance and the largest absolute
  // difference, but has no relative error (it used to report ~1e300).
  Metrics m = CompareValues(Floats({0.03f, 2.2f, -4.0f}), Floats({0.f, 2.0f, -4.0f}));
  EXPECT_EQ(m.out_of_tolerance, 2);
  EXPECT_NEAR(m.max_abs, 0.2, 1e-6);
  EXPECT_NEAR(m.max_rel, 0.1, 1e-6);
  EXPECT_FALSE(m.within_tolerance);
  Metrics zeros = CompareValues(Floats({0.5f, 0.f}), Floats({0.f, 0.f}));
  EXPECT_EQ(zeros.max_rel, 0);
  EXPECT_NEAR(zeros.max_abs, 0.5, 1e-9);
  EXPECT_EQ(zeros.out_of_tolerance, 1);
  Metrics special = CompareValues(Floats({std::numeric_limits<float>::infinity(), 1.f}),
                                  Floats({std::numeric_limits<float>::infinity(), 1.f}));
  EXPECT_TRUE(special.within_tolerance);
  EXPECT_EQ(special.max_rel, 0);
}

TEST(CompareMetricsTest, WorstElementIsTheOneFarthestBeyondItsTolerance) {
  // 1000.0004 vs 1000 is the largest difference but within 1e-4 relative;
  // 2e-5 vs 0 fails the absolute tolerance: that is the element to show.
  Metrics m = CompareValues(Floats({1000.0004f, 2e-5f, 1.f}), Floats({1000.f, 0.f, 1.f}));
  EXPECT_EQ(m.out_of_tolerance, 1);
  EXPECT_EQ(m.worst_index, 1);
  EXPECT_NEAR(m.max_abs, 0.0004, 1e-4);
  // Among failing elements the larger excess wins; a NaN mismatch wins over both.
  Metrics two = CompareValues(Floats({2e-5f, 5e-5f, 3e-5f}), Floats({0.f, 0.f, 0.f}));
  EXPECT_EQ(two.worst_index, 1);
  Metrics nan = CompareValues(Floats({5e-5f, std::nanf("")}), Floats({0.f, 0.f}));
  EXPECT_EQ(nan.worst_index, 1);
  // All within tolerance: the largest absolute difference.
  Metrics within = CompareValues(Floats({1.f, 1000.0004f}), Floats({1.f, 1000.f}));
  EXPECT_TRUE(within.within_tolerance);
  EXPECT_EQ(within.worst_index, 1);
}

TEST(CompareMetricsTest, SequenceMetricsPoolEveryElement) {
  // Cosine and SQNR are those of all the elements together (not the worst
  // element's), and the worst index counts across the sequence.
  RtValue a = RtValue::FromSequence({Floats({1, 2}), Floats({3, 4.1f})}, pb::kFloat);
  RtValue e = RtValue::FromSequence({Floats({1, 2}), Floats({3, 4})}, pb::kFloat);
  Metrics m = CompareValues(a, e);
  EXPECT_EQ(m.elements, 4);
  EXPECT_EQ(m.out_of_tolerance, 1);
  EXPECT_EQ(m.worst_index, 3);
  const double noise = (4.1f - 4.0) * (4.1f - 4.0);
  EXPECT_NEAR(m.sqnr_db, 10 * std::log10(30 / noise), 1e-3);
  EXPECT_NEAR(m.mean_abs, (4.1f - 4.0) / 4, 1e-6);
  // A sequence of maps (ZipMap's output): the same pooling through the maps.
  auto map = [](std::vector<float> v) {
    Tensor keys = Tensor::Allocate(pb::kInt64, {static_cast<int64_t>(v.size())}).value();
    for (size_t i = 0; i < v.size(); ++i) keys.mutable_data<int64_t>()[i] = static_cast<int64_t>(i);
    return RtValue::FromMap(std::move(keys), Floats(std::move(v)));
  };
  Metrics maps = CompareValues(RtValue::FromSequence({map({1, 2}), map({3, 4.1f})}),
                               RtValue::FromSequence({map({1, 2}), map({3, 4})}));
  EXPECT_EQ(maps.elements, 4);
  EXPECT_NEAR(maps.sqnr_db, m.sqnr_db, 1e-9);
  EXPECT_EQ(maps.worst_index, 3);
  EXPECT_FALSE(CompareValues(RtValue::FromSequence({map({1, 2})}), RtValue::FromSequence({map({1, 2, 3})}))
                   .comparable);
  EXPECT_FALSE(CompareValues(RtValue::FromSequence({Floats({1})}), RtValue::FromSequence({})).comparable);
}

}  // namespace
}  // namespace onnxkit::runner
