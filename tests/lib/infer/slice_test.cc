// Concat, Split, Slice, Pad, Shape, Size, Gather and the other indexing ops.
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(ConcatTest, SumsTheAxis) {
  EXPECT_EQ(Infer({.op = "Concat", .inputs = {In("a", {2, 3}), In("b", {2, 5})}, .attributes = {AttrInt("axis", 1)}}),
            "float[2, 8]");
  EXPECT_EQ(Infer({.op = "Concat", .inputs = {In("a", {-1, 3}), In("b", {2, 3})}, .attributes = {AttrInt("axis", -1)}}),
            "float[2, 6]");
  EXPECT_EQ(Infer({.op = "Concat", .inputs = {In("a", {-1, 3}), In("b", {2, 3})}, .attributes = {AttrInt("axis", 0)}}),
            "float[?, 3]");
}

TEST(ConcatTest, MismatchesAreE0601) {
  EXPECT_THAT(
      IssuesOf({.op = "Concat", .inputs = {In("a", {2, 3}), In("b", {4, 5})}, .attributes = {AttrInt("axis", 1)}}),
      ElementsAre("E0601 graph 'g' › node 'n' (Concat): Concat: input 1 [4, 5] has dim 0 = 4, expected 2 (only the "
                  "axis 1 dims may differ)"));
  EXPECT_THAT(IssuesOf({.op = "Concat", .inputs = {In("a", {2, 3}), In("b", {2})}, .attributes = {AttrInt("axis", 0)}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Concat", .inputs = {In("a", {2}), In("b", {2})}, .attributes = {AttrInt("axis", 1)}}),
              SizeIs(1));
}

TEST(SplitTest, SizesFromInputAttributeOrEvenly) {
  OneNode split{.op = "Split", .inputs = {In("x", {6, 4})}, .outputs = {"a", "b"}, .initializers = {Ints("s", {2, 4})}};
  EXPECT_EQ(Infer(split, "a"), "float[2, 4]");
  EXPECT_EQ(Infer(split, "b"), "float[4, 4]");
  split.initializers.clear();
  split.attributes = {AttrInt("num_outputs", 2)};
  EXPECT_EQ(Infer(split, "b"), "float[3, 4]");
  split.attributes = {AttrInts("split", {1, 5})};
  split.opset = 11;
  EXPECT_EQ(Infer(split, "b"), "float[5, 4]");
  OneNode uneven{.op = "Split",
                 .inputs = {In("x", {7})},
                 .outputs = {"a", "b", "c"},
                 .attributes = {AttrInt("num_outputs", 3)},
                 .opset = 18};
  EXPECT_EQ(Infer(uneven, "a"), "float[3]");
  EXPECT_EQ(Infer(uneven, "c"), "float[1]");
}

TEST(SplitTest, ImpossibleSplitsAreE0601) {
  OneNode split{.op = "Split", .inputs = {In("x", {6})}, .outputs = {"a", "b"}, .initializers = {Ints("s", {2, 3})}};
  EXPECT_THAT(IssuesOf(split), ElementsAre("E0601 graph 'g' › node 'n' (Split): Split: split [2, 3] sums to 5, but "
                                           "dim 0 of [6] is 6"));
  split.initializers = {Ints("s", {-1, 7})};
  EXPECT_THAT(IssuesOf(split), SizeIs(1));
  split.initializers.clear();
  split.inputs = {In("x", {7})};
  EXPECT_THAT(IssuesOf(split), SizeIs(1));  // 7 does not split evenly in two
  split.attributes = {AttrInt("num_outputs", 3)};
  EXPECT_THAT(IssuesOf(split), ElementsAre("E0601 graph 'g' › node 'n' (Split): Split: attribute 'num_outputs' is 3 "
                                           "but the node has 2 outputs"));
  // From 18: the split input or num_outputs, exactly one of them.
  split.attributes.clear();
  EXPECT_THAT(IssuesOf(split),
              ElementsAre("E0601 graph 'g' › node 'n' (Split): Split: Split-18 needs the split "
                          "input or the num_outputs attribute"));
  split.attributes = {AttrInt("num_outputs", 2)};
  split.initializers = {Ints("s", {3, 4})};
  EXPECT_THAT(IssuesOf(split),
              ElementsAre("E0601 graph 'g' › node 'n' (Split): Split: Split-18 takes the split "
                          "input or the num_outputs attribute, not both"));
}

OneNode Slice(std::vector<int64_t> in, std::vector<int64_t> starts, std::vector<int64_t> ends,
              std::vector<int64_t> axes, std::vector<int64_t> steps) {
  return {.op = "Slice",
          .inputs = {In("x", std::move(in))},
          .initializers = {Ints("starts", std::move(starts)), Ints("ends", std::move(ends)),
                           Ints("axes", std::move(axes)), Ints("steps", std::move(steps))}};
}

TEST(SliceTest, ClampsPerSpec) {
  EXPECT_EQ(Infer(Slice({10}, {-3}, {kMax}, {0}, {1})), "float[3]");
  EXPECT_EQ(Infer(Slice({20, 10, 5}, {0, 1}, {3, 10}, {0, 1}, {1, 1})), "float[3, 9, 5]");
  EXPECT_EQ(Infer(Slice({20, 10, 5}, {20, 10, 4}, {0, 0, 1}, {0, 1, 2}, {-1, -3, -2})), "float[19, 3, 2]");
  EXPECT_EQ(Infer(Slice({10}, {kMin}, {kMax}, {0}, {kMax})), "float[1]");
  EXPECT_EQ(Infer(Slice({10}, {kMax}, {kMin}, {0}, {kMin})), "float[1]");
  EXPECT_EQ(Infer(Slice({10}, {100}, {200}, {0}, {1})), "float[0]");
  EXPECT_EQ(Infer(Slice({0, 4}, {0}, {-1}, {0}, {-1})), "float[0, 4]");
  EXPECT_EQ(Infer(Slice({-1, 4}, {0}, {kMax}, {0}, {1})), "float[d0, 4]");
  EXPECT_EQ(Infer(Slice({-1, 4}, {1}, {kMax}, {0}, {1})), "float[?, 4]");
}

TEST(SliceTest, BadArgumentsAreE0601) {
  EXPECT_THAT(IssuesOf(Slice({10}, {0}, {5}, {0}, {0})),
              ElementsAre("E0601 graph 'g' › node 'n' (Slice): Slice: steps [0] has a 0 step"));
  EXPECT_THAT(IssuesOf(Slice({10}, {0}, {5}, {1}, {1})), SizeIs(1));
  EXPECT_THAT(IssuesOf(Slice({10, 2}, {0, 0}, {5, 1}, {0, -2}, {1, 1})), SizeIs(1));  // axis 0 twice
  EXPECT_THAT(IssuesOf(Slice({10}, {0, 1}, {5}, {0}, {1})), SizeIs(1));
}

TEST(PadTest, PadsInputAndAttribute) {
  EXPECT_EQ(Infer({.op = "Pad", .inputs = {In("x", {1, 3, 4})}, .initializers = {Ints("p", {0, 1, 2, 0, 1, -1})}}),
            "float[1, 5, 5]");
  EXPECT_EQ(Infer({.op = "Pad", .inputs = {In("x", {2, 3})}, .attributes = {AttrInts("pads", {1, 1, 1, 1})}, .opset = 2}),
            "float[4, 5]");
  OneNode axes{.op = "Pad",
               .inputs = {In("x", {1, 3, 4})},
               .initializers = {Ints("p", {2, 3})},
               .node_inputs = {"x", "p", "", "a"}};
  axes.initializers.push_back(Ints("a", {-1}));
  EXPECT_EQ(Infer(axes), "float[1, 3, 9]");
  EXPECT_THAT(IssuesOf({.op = "Pad", .inputs = {In("x", {2, 3})}, .initializers = {Ints("p", {0, -2, 0, -2})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Pad): Pad: padding dim 1 of [2, 3] by -2 and -2 gives a "
                          "negative size -1"));
  EXPECT_THAT(IssuesOf({.op = "Pad", .inputs = {In("x", {2, 3})}, .initializers = {Ints("p", {1, 1})}}), SizeIs(1));
}

TEST(ShapeTest, ShapeAndSize) {
  EXPECT_EQ(Infer({.op = "Shape", .inputs = {In("x", {2, -1, 4})}}), "int64[3]");
  EXPECT_EQ(Infer({.op = "Shape", .inputs = {In("x", {2, -1, 4})}, .attributes = {AttrInt("start", -2)}}), "int64[2]");
  EXPECT_EQ(Infer({.op = "Shape", .inputs = {In("x", {2, 3})}, .attributes = {AttrInt("start", 5)}}), "int64[0]");
  EXPECT_EQ(Infer({.op = "Size", .inputs = {In("x", {2, 3})}}), "int64[]");
}

TEST(GatherTest, Shapes) {
  EXPECT_EQ(Infer({.op = "Gather", .inputs = {In("x", {5, 4, 3}), In("i", {2, 7}, pb::kInt64)}, .attributes = {AttrInt("axis", 1)}}),
            "float[5, 2, 7, 3]");
  EXPECT_EQ(Infer({.op = "Gather", .inputs = {In("x", {5, 4}), In("i", {}, pb::kInt64)}}), "float[4]");
  EXPECT_THAT(
      IssuesOf({.op = "Gather", .inputs = {In("x", {5, 4}), In("i", {1}, pb::kInt64)}, .attributes = {AttrInt("axis", 2)}}),
      ElementsAre("E0601 graph 'g' › node 'n' (Gather): Gather: axis 2 is out of range for rank 2 (expected -2 to 1)"));
  EXPECT_THAT(IssuesOf({.op = "Gather", .inputs = {In("x", {5, 4})}, .initializers = {Ints("i", {5})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Gather): Gather: index 5 is out of range for axis 0 of size 5 "
                          "(input [5, 4])"));
  EXPECT_THAT(IssuesOf({.op = "Gather", .inputs = {In("x", {})}, .initializers = {Ints("i", {0})}}), SizeIs(1));
}

TEST(GatherTest, ElementsAndND) {
  EXPECT_EQ(Infer({.op = "GatherElements", .inputs = {In("x", {3, 4}), In("i", {2, 4}, pb::kInt64)}}), "float[2, 4]");
  EXPECT_THAT(IssuesOf({.op = "GatherElements", .inputs = {In("x", {3, 4}), In("i", {2}, pb::kInt64)}}), SizeIs(1));
  EXPECT_EQ(Infer({.op = "GatherND", .inputs = {In("x", {2, 3, 4}), In("i", {5, 2}, pb::kInt64)}}), "float[5, 4]");
  EXPECT_EQ(Infer({.op = "GatherND",
                   .inputs = {In("x", {2, 3, 4}), In("i", {2, 1}, pb::kInt64)},
                   .attributes = {AttrInt("batch_dims", 1)}}),
            "float[2, 4]");
  EXPECT_THAT(IssuesOf({.op = "GatherND", .inputs = {In("x", {2, 3}), In("i", {5, 3}, pb::kInt64)}}), SizeIs(1));
}

TEST(IndexingTest, OneHotNonZeroCompress) {
  OneNode onehot{.op = "OneHot",
                 .inputs = {In("i", {2, 3}, pb::kInt64), In("v", {2})},
                 .initializers = {Ints("depth", {10}, /*scalar=*/true)},
                 .node_inputs = {"i", "depth", "v"}};
  EXPECT_EQ(Infer(onehot), "float[2, 3, 10]");
  onehot.attributes = {AttrInt("axis", 0)};
  EXPECT_EQ(Infer(onehot), "float[10, 2, 3]");
  onehot.attributes = {AttrInt("axis", 3)};
  EXPECT_THAT(IssuesOf(onehot), SizeIs(1));
  EXPECT_EQ(Infer({.op = "NonZero", .inputs = {In("x", {3, 4})}}), "int64[2, ?]");
  EXPECT_EQ(Infer({.op = "Compress", .inputs = {In("x", {3, 4}), In("c", {2}, pb::kBool)}, .attributes = {AttrInt("axis", 1)}}),
            "float[3, ?]");
}

}  // namespace
}  // namespace onnxkit::infer::testing
