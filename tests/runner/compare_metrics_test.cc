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

}  // namespace
}  // namespace onnxkit::runner
