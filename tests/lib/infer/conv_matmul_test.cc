// Convolution and pooling shape functions (pads, strides, dilations,
// auto_pad, ceil_mode, groups, ConvTranspose, global pools) and matrix
// products (MatMul, MatMulInteger, QLinearMatMul, Gemm, Einsum), and the
// scales of Resize/Upsample.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::onnxkit::testing::AttrFloats;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
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

TEST(MatMulTest, Shapes) {
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {4, 5})}}), "float[3, 5]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {2, 1, 3, 4}), In("b", {5, 4, 6})}}), "float[2, 5, 3, 6]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {4}), In("b", {4, 5})}}), "float[5]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {4})}}), "float[3]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {4}), In("b", {4})}}), "float[]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {-1, 8, 4}), In("b", {4, -1})}}), "float[d0, 8, d1]");
}

TEST(MatMulTest, InnerDimsDifferIsE0601) {
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {5, 6})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (MatMul): MatMul: inner dimensions differ: A [3, 4] and "
                          "B [5, 6] (4 vs 5)"));
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {}), In("b", {5, 6})}}), SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {2, 3, 4}), In("b", {3, 4, 5})}}), SizeIs(1));
}

TEST(MatMulTest, IntegerAndQuantized) {
  EXPECT_EQ(Infer({.op = "MatMulInteger", .inputs = {In("a", {3, 4}, pb::kUint8), In("b", {4, 2}, pb::kInt8)}}),
            "int32[3, 2]");
  OneNode q{.op = "QLinearMatMul",
            .inputs = {In("a", {3, 4}, pb::kUint8), In("as", {}), In("az", {}, pb::kUint8), In("b", {4, 2}, pb::kUint8),
                       In("bs", {}), In("bz", {}, pb::kUint8), In("ys", {}), In("yz", {}, pb::kInt8)}};
  EXPECT_EQ(Infer(q), "int8[3, 2]");
}

TEST(GemmTest, Transposes) {
  EXPECT_EQ(Infer({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {4, 5})}}), "float[3, 5]");
  EXPECT_EQ(Infer({.op = "Gemm",
                   .inputs = {In("a", {4, 3}), In("b", {5, 4}), In("c", {5})},
                   .attributes = {AttrInt("transA", 1), AttrInt("transB", 1)}}),
            "float[3, 5]");
}

TEST(GemmTest, Errors) {
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {5, 4})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Gemm): Gemm: inner dimensions differ: A [3, 4] and B [5, 4] "
                          "(4 vs 5)"));
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {2, 3, 4}), In("b", {4, 5})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Gemm): Gemm: input A must have rank 2, got rank 3"));
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {4, 5}), In("c", {4})}}), SizeIs(1));
}

TEST(EinsumTest, ExplicitAndImplicit) {
  auto einsum = [](std::string eq, std::vector<pb::ValueInfoProto> inputs) {
    return Infer({.op = "Einsum", .inputs = std::move(inputs), .attributes = {AttrString("equation", eq)}});
  };
  EXPECT_EQ(einsum("bij,bjk->bik", {In("a", {2, 3, 4}), In("b", {2, 4, 5})}), "float[2, 3, 5]");
  EXPECT_EQ(einsum("ij,jk", {In("a", {3, 4}), In("b", {4, 5})}), "float[3, 5]");
  EXPECT_EQ(einsum("ii->i", {In("a", {3, 3})}), "float[3]");
  EXPECT_EQ(einsum("ij->", {In("a", {3, 3})}), "float[]");
  EXPECT_EQ(einsum("...ij,...jk->...ik", {In("a", {7, 2, 3, 4}), In("b", {2, 4, 5})}), "float[7, 2, 3, 5]");
  EXPECT_EQ(einsum("ba", {In("a", {3, 4})}), "float[4, 3]");  // implicit output: letters sorted
}

TEST(EinsumTest, MalformedEquationsAreE0601) {
  auto issues = [](std::string eq, std::vector<pb::ValueInfoProto> inputs) {
    return IssuesOf({.op = "Einsum", .inputs = std::move(inputs), .attributes = {AttrString("equation", eq)}});
  };
  EXPECT_THAT(issues("ij,jk->ik", {In("a", {3, 4})}), SizeIs(1));        // 2 terms, 1 input
  EXPECT_THAT(issues("ij->ik", {In("a", {3, 4})}), SizeIs(1));           // k appears in no input
  EXPECT_THAT(issues("i1->i", {In("a", {3, 4})}), SizeIs(1));            // not a letter
  EXPECT_THAT(issues("ijk->i", {In("a", {3, 4})}), SizeIs(1));           // 3 labels for rank 2
  EXPECT_THAT(issues("i..j->ij", {In("a", {3, 4})}), SizeIs(1));         // broken ellipsis
  EXPECT_THAT(issues("i->i", {In("a", {})}), SizeIs(1));                 // scalar for a labelled term
}

// Upsample's scales are at least 1 (a shrinking Upsample is an error in
// ONNX Runtime too), Resize's above 0; the attribute (opset 7) and the
// input (opset 9) alike.
TEST(ResizeTest, UpsampleDoesNotShrinkAndResizeScalesArePositive) {
  OneNode up9{"Upsample",
              {In("x", {1, 1, 4, 4})},
              {"y"},
              {AttrString("mode", "nearest")},
              {Floats("s", {1, 1, 0.5f, 2})}};
  up9.opset = 9;
  EXPECT_THAT(IssuesOf(up9),
              ElementsAre("E0601 graph 'g' › node 'n' (Upsample): Upsample: scale 0.5 of axis 2 is "
                          "not at least 1 (Upsample only enlarges; Resize shrinks)"));
  OneNode up7{"Upsample", {In("x", {1, 1, 4, 4})}, {"y"}, {AttrFloats("scales", {1, 1, 0.5f, 2})}};
  up7.opset = 7;
  EXPECT_THAT(IssuesOf(up7), SizeIs(1));
  // Near miss: 1 and up.
  up9.initializers = {Floats("s", {1, 1, 1, 2})};
  EXPECT_THAT(IssuesOf(up9), IsEmpty());
  EXPECT_EQ(Infer(up9), "float[1, 1, 4, 8]");
  // Resize shrinks, but not by 0.
  OneNode rs{"Resize", {In("x", {1, 1, 4, 4})}, {"y"}, {}, {Floats("roi", {}), Floats("s", {1, 1, 0.5f, 2})}};
  rs.opset = 13;
  EXPECT_EQ(Infer(rs), "float[1, 1, 2, 8]");
  rs.initializers = {Floats("roi", {}), Floats("s", {1, 1, 0, 2})};
  EXPECT_THAT(IssuesOf(rs), ElementsAre(HasSubstr("scale 0 of axis 2 is not positive")));
}

}  // namespace
}  // namespace onnxkit::infer::testing
