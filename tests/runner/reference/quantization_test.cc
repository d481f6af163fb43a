// Tests of the quantization reference kernels (runner/reference/quantization_*):
// rounding and saturation, per-axis and blocked scales, packed 4-bit output,
// DynamicQuantizeLinear's degenerate range, QLinearMatMul/QLinearConv
// against hand-computed values, and error paths.
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



// Runs one node on `inputs` (an undefined tensor is an omitted input);
// returns all its outputs.
absl::StatusOr<std::vector<RtValue>> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                                           std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 21,
                                           int outputs = 1) {
  return RunSingleNode(op, inputs, std::move(attrs), opset, outputs);
}

TEST(QuantizeLinearTest, RoundsHalfToEvenAndSaturates) {
  auto out = RunOp("QuantizeLinear", {Floats({6}, {0.5f, 1.5f, 2.5f, -2.5f, 300, -300}), Floats({}, {1}), Int8s({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int8_t>((*out)[0].tensor()), std::vector<int8_t>({0, 2, 2, -2, 127, -128}));
}

TEST(QuantizeLinearTest, DefaultsToUint8WithoutZeroPoint) {
  auto out = RunOp("QuantizeLinear", {Floats({3}, {-1, 3, 1000}), Floats({}, {2})}, {}, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().dtype(), pb::kUint8);
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({0, 2, 255}));
}

TEST(QuantizeLinearTest, PerAxisScalesAndZeroPoints) {
  auto out = RunOp("QuantizeLinear", {Floats({2, 2}, {1, 1, 1, 1}), Floats({2}, {1, 0.5f}), Uint8s({2}, {10, 20})},
                   {AttrInt("axis", 0)}, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({11, 11, 22, 22}));
}

TEST(QuantizeLinearTest, BlockedScalesCoverPartialLastBlock) {
  // x [1, 5], block 2 along axis 1: scales [1, 3] for columns {0,1}, {2,3}, {4}.
  auto out = RunOp("QuantizeLinear", {Floats({1, 5}, {2, 2, 2, 2, 2}), Floats({1, 3}, {1, 2, 0.5f}), Uint8s({1, 3}, {0, 0, 0})},
                   {AttrInt("axis", 1), AttrInt("block_size", 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({2, 2, 1, 1, 4}));
}

TEST(QuantizeLinearTest, BlockedScaleOfTheWrongShapeIsAnError) {
  auto out = RunOp("QuantizeLinear", {Floats({1, 5}, {0, 0, 0, 0, 0}), Floats({1, 2}, {1, 1})},
                   {AttrInt("axis", 1), AttrInt("block_size", 2)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("blocked scale"), absl::string_view::npos) << out.status();
}

TEST(QuantizeLinearTest, PerAxisScaleNeedsOpset13) {
  auto out = RunOp("QuantizeLinear", {Floats({2, 2}, {1, 1, 1, 1}), Floats({2}, {1, 1})}, {}, 10);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("opset 13"), absl::string_view::npos) << out.status();
}

TEST(QuantizeLinearTest, Int4OutputIsPackedLowNibbleFirst) {
  auto out = RunOp("QuantizeLinear", {Floats({3}, {1, -2, 9}), Floats({}, {1})}, {AttrInt("output_dtype", pb::kInt4)});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.nbytes(), 2u);
  const uint8_t* b = static_cast<const uint8_t*>(y.raw());
  EXPECT_EQ(b[0], 0xE1);  // 1 | (-2 & 0xF) << 4
  EXPECT_EQ(b[1] & 0x0F, 0x7);  // 9 saturates to 7
}

TEST(QuantizeLinearTest, ZeroPointTypeMustMatchOutputDtype) {
  auto out = RunOp("QuantizeLinear", {Floats({1}, {1}), Floats({}, {1}), Uint8s({}, {0})}, {AttrInt("output_dtype", pb::kInt8)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DequantizeLinearTest, PackedInt4Input) {
  Tensor x = *Tensor::Allocate(pb::kInt4, {3});
  static_cast<uint8_t*>(x.mutable_raw())[0] = 0xE1;  // 1, -2
  static_cast<uint8_t*>(x.mutable_raw())[1] = 0x07;  // 7
  Tensor zp = *Tensor::Allocate(pb::kInt4, {});
  static_cast<uint8_t*>(zp.mutable_raw())[0] = 0x01;
  auto out = RunOp("DequantizeLinear", {x, Floats({}, {0.5f}), zp});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({0, -1.5f, 3}));
}

TEST(DequantizeLinearTest, ZeroPointMustMatchXType) {
  auto out = RunOp("DequantizeLinear", {Uint8s({1}, {1}), Floats({}, {1}), Int8s({}, {0})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DynamicQuantizeLinearTest, AllZerosGiveScaleOne) {
  auto out = RunOp("DynamicQuantizeLinear", {Floats({3}, {0, 0, 0})}, {}, 11, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({0, 0, 0}));
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({1}));
  EXPECT_EQ(Values<uint8_t>((*out)[2].tensor()), std::vector<uint8_t>({0}));
}

TEST(DynamicQuantizeLinearTest, ZeroPointShiftsANegativeMinimum) {
  // range [-51, 204]: scale 1, zero point 51.
  auto out = RunOp("DynamicQuantizeLinear", {Floats({3}, {-51, 0, 204})}, {}, 11, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({1}));
  EXPECT_EQ(Values<uint8_t>((*out)[2].tensor()), std::vector<uint8_t>({51}));
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({0, 51, 255}));
}

TEST(QLinearMatMulTest, MatchesHandComputedRequantization) {
  // (a - 1) = [1, 3], (b - 1) = [0, 2]: 6 * (0.5 * 1 / 2) + 5 = 6.5, rounded half to even: 6.
  auto out = RunOp("QLinearMatMul", {Uint8s({1, 2}, {2, 4}), Floats({}, {0.5f}), Uint8s({}, {1}), Uint8s({2, 1}, {1, 3}),
                                     Floats({}, {1}), Uint8s({}, {1}), Floats({}, {2}), Uint8s({}, {5})},
                   {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 1}));
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({6}));
}

TEST(QLinearMatMulTest, InnerDimsMustAgree) {
  auto out = RunOp("QLinearMatMul", {Uint8s({1, 2}, {2, 4}), Floats({}, {1}), Uint8s({}, {0}), Uint8s({3, 1}, {1, 3, 3}),
                                     Floats({}, {1}), Uint8s({}, {0}), Floats({}, {1}), Uint8s({}, {0})},
                   {}, 10);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot multiply"), absl::string_view::npos) << out.status();
}

TEST(QLinearConvTest, PaddedConvolutionWithPerChannelWeights) {
  // x [1,1,3] = [1,2,3] (zp 0), w [2,1,2] = [[1,1],[2,0]] with per-channel scales 1, 0.5, pad 1 each side.
  auto out = RunOp("QLinearConv",
                   {Uint8s({1, 1, 3}, {1, 2, 3}), Floats({}, {1}), Uint8s({}, {0}), Int8s({2, 1, 2}, {1, 1, 2, 0}),
                    Floats({2}, {1, 0.5f}), Int8s({2}, {0, 0}), Floats({}, {1}), Uint8s({}, {0})},
                   {AttrInts("pads", {1, 1})}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({1, 2, 4}));
  // channel 0: sums of neighbours [1, 3, 5, 3]; channel 1: 2 * left * 0.5 = [0, 1, 2, 3].
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor()), std::vector<uint8_t>({1, 3, 5, 3, 0, 1, 2, 3}));
}

TEST(QLinearConvTest, GroupsMustDivideChannels) {
  auto out = RunOp("QLinearConv",
                   {Uint8s({1, 3, 2}, {1, 2, 3, 4, 5, 6}), Floats({}, {1}), Uint8s({}, {0}), Uint8s({2, 1, 1}, {1, 1}),
                    Floats({}, {1}), Uint8s({}, {0}), Floats({}, {1}), Uint8s({}, {0})},
                   {AttrInt("group", 2)}, 10);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onnxkit::testing
