// Tests of the sequence and optional reference kernels
// (runner/reference/sequence_*): positions, type checks, splitting and
// concatenation edge cases, SequenceMap, and the optional ops' error paths.
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



// Runs `g` (inputs named in `feeds`, declared untyped) at `opset`.
absl::StatusOr<std::vector<RtValue>> RunGraph(GraphBuilder& g, std::vector<std::pair<std::string, Tensor>> feeds,
                                         int64_t opset = 18) {
  return RunGraphOn(runner::Backend::kReference, g.Build(), feeds, opset);
}

// A graph with inputs a [2], b [2] (float) and `nodes` added by the caller.
GraphBuilder TwoInputs() {
  GraphBuilder g("g");
  g.Input("a", 0).Input("b", 0);
  return g;
}
std::vector<std::pair<std::string, Tensor>> AB() { return {{"a", Floats({2}, {1, 2})}, {"b", Floats({2}, {3, 4})}}; }

TEST(SequenceTest, ConstructAtLengthWithNegativePosition) {
  GraphBuilder g = TwoInputs();
  g.Input("p", 0)
      .Node("SequenceConstruct", {"a", "b"}, {"s"})
      .Node("SequenceAt", {"s", "p"}, {"y"})
      .Node("SequenceLength", {"s"}, {"n"})
      .Output("y", 0)
      .Output("n", 0);
  auto feeds = AB();
  feeds.emplace_back("p", Int64s({}, {-1}));
  auto out = RunGraph(g, feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({3, 4}));
  EXPECT_EQ(Values<int64_t>((*out)[1].tensor()), std::vector<int64_t>({2}));
}

TEST(SequenceTest, PositionOutOfRangeIsAnError) {
  GraphBuilder g = TwoInputs();
  g.Input("p", 0).Node("SequenceConstruct", {"a", "b"}, {"s"}).Node("SequenceAt", {"s", "p"}, {"y"}).Output("y", 0);
  auto feeds = AB();
  feeds.emplace_back("p", Int64s({}, {2}));
  auto out = RunGraph(g, feeds);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange) << out.status();
}

TEST(SequenceTest, InsertChecksTheElementType) {
  GraphBuilder g = TwoInputs();
  g.Input("i", 0).Node("SequenceConstruct", {"a", "b"}, {"s"}).Node("SequenceInsert", {"s", "i"}, {"t"}).Output("t", 0);
  auto feeds = AB();
  feeds.emplace_back("i", Int64s({1}, {7}));
  auto out = RunGraph(g, feeds);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot insert"), absl::string_view::npos) << out.status();
}

TEST(SequenceTest, InsertAtFrontAndEraseLast) {
  GraphBuilder g = TwoInputs();
  g.Input("p", 0)
      .Node("SequenceEmpty", {}, {"e"})
      .Node("SequenceInsert", {"e", "a"}, {"s1"})
      .Node("SequenceInsert", {"s1", "b", "p"}, {"s2"})
      .Node("SequenceErase", {"s2"}, {"s3"})
      .Output("s2", 0)
      .Output("s3", 0);
  auto feeds = AB();
  feeds.emplace_back("p", Int64s({}, {0}));
  auto out = RunGraph(g, feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].elements().size(), 2u);
  EXPECT_EQ(Values<float>((*out)[0].elements()[0].tensor()), std::vector<float>({3, 4}));
  ASSERT_EQ((*out)[1].elements().size(), 1u);
  EXPECT_EQ(Values<float>((*out)[1].elements()[0].tensor()), std::vector<float>({3, 4}));
}

TEST(SequenceTest, EraseFromEmptyIsAnError) {
  GraphBuilder g("g");
  g.Node("SequenceEmpty", {}, {"e"}).Node("SequenceErase", {"e"}, {"s"}).Output("s", 0);
  auto out = RunGraph(g, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange) << out.status();
}

TEST(SequenceTest, SplitToSequenceScalarSplitLeavesAShortLastPart) {
  GraphBuilder g("g");
  g.Input("x", 0).Input("split", 0).Node("SplitToSequence", {"x", "split"}, {"s"}, {AttrInt("axis", 1)}).Output("s", 0);
  auto out = RunGraph(g, {{"x", Floats({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}, {"split", Int64s({}, {2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& parts = (*out)[0].elements();
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].tensor().shape(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(Values<float>(parts[2].tensor()), std::vector<float>({4, 9}));
}

TEST(SequenceTest, SplitToSequenceWithoutSplitDropsTheAxis) {
  GraphBuilder g("g");
  g.Input("x", 0).Node("SplitToSequence", {"x"}, {"s"}, {AttrInt("keepdims", 0)}).Output("s", 0);
  auto out = RunGraph(g, {{"x", Floats({3, 2}, {0, 1, 2, 3, 4, 5})}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].elements().size(), 3u);
  EXPECT_EQ((*out)[0].elements()[1].tensor().shape(), std::vector<int64_t>({2}));
  EXPECT_EQ(Values<float>((*out)[0].elements()[1].tensor()), std::vector<float>({2, 3}));
}

TEST(SequenceTest, SplitSizesMustSumToTheDim) {
  GraphBuilder g("g");
  g.Input("x", 0).Input("split", 0).Node("SplitToSequence", {"x", "split"}, {"s"}).Output("s", 0);
  auto out = RunGraph(g, {{"x", Floats({3}, {0, 1, 2})}, {"split", Int64s({2}, {1, 1})}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("sum to 2, expected 3"), absl::string_view::npos) << out.status();
}

TEST(SequenceTest, ConcatFromSequenceStacksOnANewLastAxis) {
  GraphBuilder g = TwoInputs();
  g.Node("SequenceConstruct", {"a", "b"}, {"s"})
      .Node("ConcatFromSequence", {"s"}, {"y"}, {AttrInt("axis", -1), AttrInt("new_axis", 1)})
      .Output("y", 0);
  auto out = RunGraph(g, AB());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().shape(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>({1, 3, 2, 4}));
}

TEST(SequenceTest, ConcatFromSequenceRejectsMismatchedShapes) {
  GraphBuilder g = TwoInputs();
  g.Node("SequenceConstruct", {"a", "b"}, {"s"}).Node("ConcatFromSequence", {"s"}, {"y"}, {AttrInt("axis", 0), AttrInt("new_axis", 1)}).Output("y", 0);
  auto out = RunGraph(g, {{"a", Floats({2}, {1, 2})}, {"b", Floats({3}, {3, 4, 5})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

TEST(SequenceTest, SequenceMapPassesTensorsWholeAndIndexesSequences) {
  pb::GraphProto body = GraphBuilder("body").Input("e", 0).Input("k", 0).Node("Add", {"e", "k"}, {"r"}).Output("r", 0).Build();
  GraphBuilder g = TwoInputs();
  g.Input("k", 0)
      .Node("SequenceConstruct", {"a", "b"}, {"s"})
      .Node("SequenceMap", {"s", "k"}, {"m"}, {AttrGraph("body", body)})
      .Output("m", 0);
  auto feeds = AB();
  feeds.emplace_back("k", Floats({1}, {10}));
  auto out = RunGraph(g, feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].elements().size(), 2u);
  EXPECT_EQ(Values<float>((*out)[0].elements()[1].tensor()), std::vector<float>({13, 14}));
}

TEST(OptionalTest, WrapsTestsAndUnwraps) {
  GraphBuilder g("g");
  g.Input("x", 0)
      .Node("Optional", {"x"}, {"o"})
      .Node("OptionalHasElement", {"o"}, {"h"})
      .Node("OptionalGetElement", {"o"}, {"y"})
      .Output("h", 0)
      .Output("y", 0);
  auto out = RunGraph(g, {{"x", Floats({1}, {5})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().data<uint8_t>()[0], 1);
  EXPECT_EQ(Values<float>((*out)[1].tensor()), std::vector<float>({5}));
}

TEST(OptionalTest, EmptyOptionalHasNoElementAndCannotBeUnwrapped) {
  pb::AttributeProto type;
  type.name = "type";
  type.type = pb::kAttrTypeProto;
  type.tp = TensorType(pb::kFloat);
  GraphBuilder g("g");
  g.Node("Optional", {}, {"o"}, {type}).Node("OptionalHasElement", {"o"}, {"h"}).Output("h", 0);
  auto out = RunGraph(g, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().data<uint8_t>()[0], 0);

  GraphBuilder g2("g");
  g2.Node("Optional", {}, {"o"}, {type}).Node("OptionalGetElement", {"o"}, {"y"}).Output("y", 0);
  out = RunGraph(g2, {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("empty"), absl::string_view::npos) << out.status();
}

TEST(OptionalTest, OptionalWithoutInputNeedsAType) {
  GraphBuilder g("g");
  g.Node("Optional", {}, {"o"}).Output("o", 0);
  auto out = RunGraph(g, {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'type'"), absl::string_view::npos) << out.status();
}

TEST(OptionalTest, HasElementOfAnOmittedInputIsFalseFromOpset18) {
  GraphBuilder g("g");
  g.Node("OptionalHasElement", {""}, {"h"}).Output("h", 0);
  auto out = RunGraph(g, {}, 18);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().data<uint8_t>()[0], 0);
  GraphBuilder g15("g");
  g15.Node("OptionalHasElement", {""}, {"h"}).Output("h", 0);
  out = RunGraph(g15, {}, 15);
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace onnxkit::testing
