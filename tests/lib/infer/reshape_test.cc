// Shape functions that rearrange dims: Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Expand, Tile, DepthToSpace, SpaceToDepth.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

OneNode Reshape(std::vector<int64_t> in, std::vector<int64_t> shape, std::vector<pb::AttributeProto> attrs = {}) {
  return {.op = "Reshape",
          .inputs = {In("x", std::move(in))},
          .attributes = std::move(attrs),
          .initializers = {Ints("shape", std::move(shape))}};
}

TEST(ReshapeTest, ZeroAndMinusOne) {
  EXPECT_EQ(Infer(Reshape({2, 3, 4}, {0, -1})), "float[2, 12]");
  EXPECT_EQ(Infer(Reshape({2, 3, 4}, {4, 0, -1})), "float[4, 3, 2]");
  EXPECT_EQ(Infer(Reshape({2, 3, 4}, {24})), "float[24]");
  EXPECT_EQ(Infer(Reshape({-1, 3, 4}, {0, -1})), "float[d0, 12]");
  EXPECT_EQ(Infer(Reshape({-1, 3, 4}, {-1, 12})), "float[d0, 12]");  // the symbol cancels
  EXPECT_EQ(Infer(Reshape({-1, 3, 4}, {-1, 5})), "float[?, 5]");
  EXPECT_EQ(Infer(Reshape({0, 3}, {3, 0}, {AttrInt("allowzero", 1)})), "float[3, 0]");
}

TEST(ReshapeTest, ImpossibleShapesAreE0601) {
  EXPECT_THAT(IssuesOf(Reshape({2, 3, 4}, {5, 5})),
              ElementsAre("E0601 graph 'g' › node 'n' (Reshape): Reshape: cannot reshape 24 elements into shape "
                          "[5, 5]"));
  EXPECT_THAT(IssuesOf(Reshape({2, 3, 4}, {5, -1})),
              ElementsAre("E0601 graph 'g' › node 'n' (Reshape): Reshape: cannot reshape 24 elements into shape "
                          "[5, -1]"));
  EXPECT_THAT(IssuesOf(Reshape({2, 3, 4}, {-1, -1})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Reshape({2, 3, 4}, {-2, 12})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Reshape({24}, {0, 0})), SizeIs(1));  // copies dim 1 of a rank-1 input
  EXPECT_THAT(IssuesOf(Reshape({0, 3}, {0, -1}, {AttrInt("allowzero", 1)})), SizeIs(1));
}

TEST(ReshapeTest, UnknownShapeInputKeepsRankFromItsLength) {
  OneNode r{.op = "Reshape", .inputs = {In("x", {2, 3, 4}), In("shape", {3}, pb::kInt64)}};
  EXPECT_EQ(Infer(r), "float[?, ?, ?]");
  EXPECT_THAT(IssuesOf(r), IsEmpty());
}

TEST(ReshapeTest, OldAttributeForm) {
  EXPECT_EQ(Infer({.op = "Reshape", .inputs = {In("x", {2, 3})}, .attributes = {AttrInts("shape", {3, 2})}, .opset = 4}),
            "float[3, 2]");
}

TEST(FlattenTest, Axis) {
  EXPECT_EQ(Infer({.op = "Flatten", .inputs = {In("x", {2, 3, 4, 5})}}), "float[2, 60]");
  EXPECT_EQ(Infer({.op = "Flatten", .inputs = {In("x", {2, 3, 4})}, .attributes = {AttrInt("axis", 0)}}),
            "float[1, 24]");
  EXPECT_EQ(Infer({.op = "Flatten", .inputs = {In("x", {2, 3, 4})}, .attributes = {AttrInt("axis", -1)}}),
            "float[6, 4]");
  EXPECT_EQ(Infer({.op = "Flatten", .inputs = {In("x", {-1, 3, 4})}}), "float[d0, 12]");
  EXPECT_THAT(IssuesOf({.op = "Flatten", .inputs = {In("x", {2, 3})}, .attributes = {AttrInt("axis", 3)}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Flatten): Flatten: axis 3 is out of range for rank 2 "
                          "(expected -2 to 2)"));
}

TEST(SqueezeTest, AttributeAndInputForms) {
  EXPECT_EQ(Infer({.op = "Squeeze", .inputs = {In("x", {1, 3, 1, 4})}, .opset = 11}), "float[3, 4]");
  EXPECT_EQ(Infer({.op = "Squeeze", .inputs = {In("x", {1, 3, 1})}, .attributes = {AttrInts("axes", {-1})}, .opset = 11}),
            "float[1, 3]");
  EXPECT_EQ(Infer({.op = "Squeeze", .inputs = {In("x", {1, 3, 1})}, .initializers = {Ints("axes", {0})}, .opset = 13}),
            "float[3, 1]");
  EXPECT_THAT(IssuesOf({.op = "Squeeze", .inputs = {In("x", {1, 3})}, .initializers = {Ints("axes", {1})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Squeeze): Squeeze: cannot squeeze axis 1 of size 3 (input "
                          "shape [1, 3])"));
  EXPECT_EQ(Infer({.op = "Squeeze", .inputs = {In("x", {1, -1})}}), "float?");  // d1 may be 1
}

TEST(UnsqueezeTest, AttributeAndInputForms) {
  EXPECT_EQ(Infer({.op = "Unsqueeze", .inputs = {In("x", {3, 4})}, .attributes = {AttrInts("axes", {0, 3})}, .opset = 12}),
            "float[1, 3, 4, 1]");
  EXPECT_EQ(Infer({.op = "Unsqueeze", .inputs = {In("x", {3})}, .initializers = {Ints("axes", {-1, 0})}}),
            "float[1, 3, 1]");
  EXPECT_THAT(IssuesOf({.op = "Unsqueeze", .inputs = {In("x", {3})}, .initializers = {Ints("axes", {0, 0})}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Unsqueeze", .inputs = {In("x", {3})}, .initializers = {Ints("axes", {2})}}), SizeIs(1));
}

TEST(TransposeTest, Perm) {
  EXPECT_EQ(Infer({.op = "Transpose", .inputs = {In("x", {2, 3, 4})}}), "float[4, 3, 2]");
  EXPECT_EQ(Infer({.op = "Transpose", .inputs = {In("x", {2, 3, 4})}, .attributes = {AttrInts("perm", {1, 0, 2})}}),
            "float[3, 2, 4]");
  EXPECT_THAT(IssuesOf({.op = "Transpose", .inputs = {In("x", {2, 3})}, .attributes = {AttrInts("perm", {0, 0})}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Transpose", .inputs = {In("x", {2, 3})}, .attributes = {AttrInts("perm", {0})}}),
              SizeIs(1));
  // Present but empty is not the default reversal.
  EXPECT_THAT(
      IssuesOf({.op = "Transpose", .inputs = {In("x", {2, 3})}, .attributes = {AttrInts("perm", {})}}),
      SizeIs(1));
  EXPECT_EQ(Infer({.op = "Transpose", .inputs = {In("x", {})}, .attributes = {AttrInts("perm", {})}}),
            "float[]");
}

TEST(ExpandTileTest, Shapes) {
  EXPECT_EQ(Infer({.op = "Expand", .inputs = {In("x", {3, 1})}, .initializers = {Ints("s", {2, 1, 6})}}),
            "float[2, 3, 6]");
  EXPECT_THAT(IssuesOf({.op = "Expand", .inputs = {In("x", {3, 2})}, .initializers = {Ints("s", {4, 4})}}), SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Expand", .inputs = {In("x", {3})}, .initializers = {Ints("s", {-2})}}), SizeIs(1));
  EXPECT_EQ(Infer({.op = "Tile", .inputs = {In("x", {2, 3})}, .initializers = {Ints("r", {2, 2})}}), "float[4, 6]");
  EXPECT_THAT(IssuesOf({.op = "Tile", .inputs = {In("x", {2, 3})}, .initializers = {Ints("r", {2})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Tile): Tile: repeats [2] has 1 values for an input of rank 2"));
}

TEST(DepthToSpaceTest, Shapes) {
  EXPECT_EQ(Infer({.op = "DepthToSpace", .inputs = {In("x", {1, 8, 2, 3})}, .attributes = {AttrInt("blocksize", 2)}}),
            "float[1, 2, 4, 6]");
  EXPECT_EQ(Infer({.op = "SpaceToDepth", .inputs = {In("x", {1, 2, 4, 6})}, .attributes = {AttrInt("blocksize", 2)}}),
            "float[1, 8, 2, 3]");
  EXPECT_THAT(
      IssuesOf({.op = "SpaceToDepth", .inputs = {In("x", {1, 2, 5, 6})}, .attributes = {AttrInt("blocksize", 2)}}),
      ElementsAre("E0601 graph 'g' › node 'n' (SpaceToDepth): SpaceToDepth: dim 2 of input [1, 2, 5, 6] is not "
                  "divisible by 2"));
}

}  // namespace
}  // namespace onnxkit::infer::testing
