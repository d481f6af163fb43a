// Convolution and pooling shape functions: pads, strides, dilations,
// auto_pad, ceil_mode, groups, ConvTranspose, global pools.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checker/infer/infer_test_util.h"

namespace onnxkit::checker::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

OneNode Conv(std::vector<int64_t> x, std::vector<int64_t> w, std::vector<pb::AttributeProto> attrs = {}) {
  return {.op = "Conv", .inputs = {In("x", std::move(x)), In("w", std::move(w))}, .attributes = std::move(attrs)};
}

TEST(ConvTest, OutputDims) {
  EXPECT_EQ(Infer(Conv({1, 3, 32, 32}, {16, 3, 3, 3})), "float[1, 16, 30, 30]");
  EXPECT_EQ(Infer(Conv({1, 3, 32, 32}, {16, 3, 3, 3}, {AttrInts("pads", {1, 1, 1, 1}), AttrInts("strides", {2, 2})})),
            "float[1, 16, 16, 16]");
  EXPECT_EQ(Infer(Conv({1, 3, 10}, {4, 3, 3}, {AttrInts("dilations", {2})})), "float[1, 4, 6]");
  EXPECT_EQ(Infer(Conv({-1, 3, 7, -1}, {8, 1, 3, 3}, {AttrInt("group", 3)})), "float[d0, 8, 5, ?]");
}

TEST(ConvTest, AutoPad) {
  EXPECT_EQ(Infer(Conv({1, 3, 7, 8}, {4, 3, 3, 3}, {AttrString("auto_pad", "SAME_UPPER"), AttrInts("strides", {2, 2})})),
            "float[1, 4, 4, 4]");
  EXPECT_EQ(Infer(Conv({1, 3, 7, 8}, {4, 3, 3, 3}, {AttrString("auto_pad", "VALID"), AttrInts("pads", {5, 5, 5, 5})})),
            "float[1, 4, 5, 6]");
}

TEST(ConvTest, ChannelsMustMatchWeightTimesGroup) {
  EXPECT_THAT(IssuesOf(Conv({1, 4, 8, 8}, {16, 3, 3, 3})),
              ElementsAre("E0601 graph 'g' › node 'n' (Conv): Conv: input channels 4 do not match weight channels 3 "
                          "* group 1"));
  EXPECT_THAT(IssuesOf(Conv({1, 6, 8, 8}, {16, 3, 3, 3}, {AttrInt("group", 2)})), IsEmpty());
}

TEST(ConvTest, RanksAndAttributeLengths) {
  EXPECT_THAT(IssuesOf(Conv({1, 3, 8, 8}, {16, 3, 3})),
              ElementsAre("E0601 graph 'g' › node 'n' (Conv): Conv: weight rank 3 differs from input rank 4"));
  EXPECT_THAT(IssuesOf(Conv({1, 3, 8, 8}, {16, 3, 3, 3}, {AttrInts("kernel_shape", {3})})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Conv({1, 3, 8, 8}, {16, 3, 3, 3}, {AttrInts("pads", {1, 1})})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Conv({1, 3, 8, 8}, {16, 3, 3, 3}, {AttrInts("strides", {0, 1})})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Conv({1, 3, 2, 2}, {16, 3, 3, 3})),
              ElementsAre("E0601 graph 'g' › node 'n' (Conv): Conv: kernel extent 3 is larger than the padded input "
                          "size 2 of spatial dim 0"));
}

TEST(ConvTest, ConvTranspose) {
  OneNode ct{.op = "ConvTranspose", .inputs = {In("x", {1, 3, 5, 5}), In("w", {3, 2, 3, 3})}};
  EXPECT_EQ(Infer(ct), "float[1, 2, 7, 7]");
  ct.attributes = {AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1}), AttrInts("output_padding", {1, 1})};
  EXPECT_EQ(Infer(ct), "float[1, 2, 10, 10]");
  ct.attributes = {AttrInts("strides", {2, 2}), AttrString("auto_pad", "SAME_UPPER")};
  EXPECT_EQ(Infer(ct), "float[1, 2, 10, 10]");
  ct.attributes = {AttrInts("output_shape", {9, 9})};
  EXPECT_EQ(Infer(ct), "float[1, 2, 9, 9]");
  ct.attributes = {AttrInt("group", 3)};
  ct.inputs[1] = In("w", {3, 1, 3, 3});
  EXPECT_EQ(Infer(ct), "float[1, 3, 7, 7]");
  ct.inputs[1] = In("w", {4, 1, 3, 3});
  EXPECT_THAT(IssuesOf(ct), SizeIs(1));
}

TEST(PoolTest, MaxPoolAndIndices) {
  OneNode pool{.op = "MaxPool",
               .inputs = {In("x", {1, 3, 32, 32})},
               .outputs = {"y", "i"},
               .attributes = {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})}};
  EXPECT_EQ(Infer(pool), "float[1, 3, 15, 15]");
  EXPECT_EQ(Infer(pool, "i"), "int64[1, 3, 15, 15]");
  pool.attributes.push_back(AttrInt("ceil_mode", 1));
  EXPECT_EQ(Infer(pool), "float[1, 3, 16, 16]");
}

TEST(PoolTest, CeilModeDropsWindowStartingInPadding) {
  // in 3, kernel 1, stride 2, pads 0/1: ceil((3 + 1 - 1) / 2) + 1 = 3
  // windows would start at 0, 2 and 4; the last starts in the padding and
  // is dropped.
  OneNode pool{.op = "AveragePool",
               .inputs = {In("x", {1, 1, 3})},
               .attributes = {AttrInts("kernel_shape", {1}), AttrInts("strides", {2}), AttrInts("pads", {0, 1}),
                              AttrInt("ceil_mode", 1)}};
  EXPECT_EQ(Infer(pool), "float[1, 1, 2]");
}

TEST(PoolTest, KernelShapeRequiredAndGlobalPools) {
  EXPECT_THAT(IssuesOf({.op = "AveragePool", .inputs = {In("x", {1, 3, 8, 8})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (AveragePool): AveragePool: attribute 'kernel_shape' is "
                          "required"));
  EXPECT_EQ(Infer({.op = "GlobalAveragePool", .inputs = {In("x", {2, 3, 8, 8})}}), "float[2, 3, 1, 1]");
  EXPECT_EQ(Infer({.op = "GlobalMaxPool", .inputs = {In("x", {-1, 3, 8})}}), "float[d0, 3, 1]");
  EXPECT_THAT(IssuesOf({.op = "GlobalMaxPool", .inputs = {In("x", {3})}}), SizeIs(1));
}

}  // namespace
}  // namespace onnxkit::checker::infer::testing
