// Tests of the signal reference kernels (runner/reference/signal_*): windows,
// DFT (forward, onesided, inverse, inverse onesided, both axis forms), STFT
// and MelWeightMatrix, on small hand-computed cases and error paths.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;

Tensor Int64(int64_t v) { return MakeTensor<int64_t>(pb::kInt64, {}, {v}); }
Tensor Int32(int32_t v) { return MakeTensor<int32_t>(pb::kInt32, {}, {v}); }

// Runs one node on `inputs` (an undefined tensor is an omitted input).
absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 17) {
  absl::StatusOr<std::vector<Tensor>> out = RunSingleNodeTensors(op, inputs, std::move(attrs), opset);
  if (!out.ok()) return out.status();
  return (*out)[0];
}

void ExpectNear(const Tensor& t, const std::vector<double>& want) {
  ASSERT_EQ(t.size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.dtype() == pb::kDouble ? t.data<double>()[i] : t.data<float>()[i];
    EXPECT_NEAR(got, want[i], 1e-5) << "element " << i;
  }
}

TEST(WindowTest, PeriodicAndSymmetricHann) {
  auto y = RunOp("HannWindow", {Int64(4)});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(*y, {0, 0.5, 1, 0.5});
  y = RunOp("HannWindow", {Int32(3)}, {AttrInt("periodic", 0), AttrInt("output_datatype", pb::kDouble)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), pb::kDouble);
  ExpectNear(*y, {0, 1, 0});
}

TEST(WindowTest, HammingAndBlackmanEndpoints) {
  auto y = RunOp("HammingWindow", {Int64(2)}, {AttrInt("periodic", 0)});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(*y, {4.0 / 46, 4.0 / 46});
  y = RunOp("BlackmanWindow", {Int64(2)});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(*y, {0, 1});
}

TEST(WindowTest, NegativeSizeIsAnError) {
  auto y = RunOp("HannWindow", {Int64(-1)});
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DftTest, ForwardRealSignal) {
  auto y = RunOp("DFT", {Floats({1, 4, 1}, {1, 2, 3, 4})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 4, 2}));
  ExpectNear(*y, {10, 0, -2, 2, -2, 0, -2, -2});
}

TEST(DftTest, OnesidedKeepsHalfThePlusOneBins) {
  auto y = RunOp("DFT", {Floats({1, 4, 1}, {1, 2, 3, 4})}, {AttrInt("onesided", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 3, 2}));
}

TEST(DftTest, DftLengthPadsWithZeros) {
  auto y = RunOp("DFT", {Floats({1, 2, 1}, {1, 1}), Int64(4)});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(*y, {2, 0, 1, -1, 0, 0, 1, 1});
}

TEST(DftTest, InverseUndoesForward) {
  auto y = RunOp("DFT", {Floats({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2})}, {AttrInt("inverse", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(*y, {1, 0, 2, 0, 3, 0, 4, 0});
}

TEST(DftTest, InverseOnesidedRebuildsARealSignal) {
  // Opset 20: axis as an input (-2 is the signal axis here).
  auto y = RunOp("DFT", {Floats({1, 3, 2}, {10, 0, -2, 2, -2, 0}), Tensor(), Int64(-2)},
                 {AttrInt("inverse", 1), AttrInt("onesided", 1)}, 20);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 4, 1}));
  ExpectNear(*y, {1, 2, 3, 4});
}

TEST(DftTest, TheComplexAxisIsNotASignalAxis) {
  auto y = RunOp("DFT", {Floats({1, 4, 1}, {1, 2, 3, 4}), Tensor(), Int64(-1)}, {}, 20);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kOutOfRange);
  y = RunOp("DFT", {Floats({1, 4, 3}, {})});
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StftTest, FramesMatchTheirDft) {
  auto y = RunOp("STFT", {Floats({1, 8, 1}, {1, 2, 3, 4, 1, 1, 1, 1}), Int64(4), Tensor(), Int64(4)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 2, 3, 2}));
  ExpectNear(*y, {10, 0, -2, 2, -2, 0, 4, 0, 0, 0, 0, 0});
}

TEST(StftTest, WindowScalesEachFrame) {
  auto y = RunOp("STFT", {Floats({1, 4, 1}, {1, 2, 3, 4}), Int64(2), Floats({2}, {0, 1})}, {AttrInt("onesided", 0)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 2, 2, 2}));
  ExpectNear(*y, {2, 0, -2, 0, 4, 0, -4, 0});
}

TEST(StftTest, FrameLongerThanTheSignalIsAnError) {
  auto y = RunOp("STFT", {Floats({1, 4, 1}, {1, 2, 3, 4}), Int64(1), Tensor(), Int64(5)});
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MelWeightMatrixTest, TrianglesPeakAtOne) {
  auto y = RunOp("MelWeightMatrix", {Int64(4), Int64(32), Int64(16000), Floats({}, {0}), Floats({}, {8000})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({17, 4}));
  for (int64_t col = 0; col < 4; ++col) {
    float peak = 0;
    for (int64_t row = 0; row < 17; ++row) peak = std::max(peak, y->data<float>()[row * 4 + col]);
    EXPECT_FLOAT_EQ(peak, 1) << "column " << col;
  }
}

TEST(MelWeightMatrixTest, EdgesBeyondTheSpectrumAreAnError) {
  auto y = RunOp("MelWeightMatrix", {Int64(4), Int64(32), Int64(1000), Floats({}, {0}), Floats({}, {8000})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("mel edge"), absl::string_view::npos) << y.status();
}

}  // namespace
}  // namespace onnxkit::testing
