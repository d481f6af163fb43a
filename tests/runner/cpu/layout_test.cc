// The cpu backend's Transpose and Concat against the reference kernels.
#include <algorithm>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

TEST(CpuTransposeTest, EveryPermutationMatchesReference) {
  uint32_t seed = 1;
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{5}, {3, 4}, {2, 3, 4}, {2, 3, 1, 4}}) {
    std::vector<int64_t> perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      GraphBuilder g("g");
      g.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}).Output("y");
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, seed++)}}, 18, 0, 0);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  GraphBuilder d("g");
  d.Input("x").Node("Transpose", {"x"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(d.Build(), {{"x", RandomFloats({2, 3, 4, 5, 2, 3}, 7)}}, 18, 0, 0);
  GraphBuilder b("g");
  b.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 2, 1, 3})}).Output("y");
  ExpectCpuMatchesReference(b.Build(), {{"x", RandomFloats({1, 128, 12, 64}, 8)}}, 18, 0, 0);
}

TEST(CpuTransposeTest, MovesInt64AndFallsBackOtherwise) {
  GraphBuilder g("g");
  g.Input("x", pb::kInt64)
      .Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {1, 0})})
      .Output("y", pb::kInt64);
  ExpectCpuMatchesReference(g.Build(), {{"x", Int64s({2, 3}, {1, -2, 3, 1LL << 40, 5, -(1LL << 50)})}});
  GraphBuilder e("g");
  e.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {1, 0})}).Output("y");
  ExpectCpuMatchesReference(e.Build(), {{"x", RandomFloats({0, 3}, 1)}});
  GraphBuilder bad("g");
  bad.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 0})}).Output("y");
  auto feeds = Feeds{{"x", RandomFloats({2, 3}, 1)}};
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, bad.Build(), feeds).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, bad.Build(), feeds).ok());
}

TEST(CpuConcatTest, MatchesReferenceOnEveryAxis) {
  uint32_t seed = 1;
  std::vector<int64_t> base = {2, 3, 4};
  for (int64_t axis = -3; axis < 3; ++axis) {
    size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    std::vector<int64_t> s0 = base, s1 = base, s2 = base;
    s1[a] = 1;
    s2[a] = 5;
    GraphBuilder g("g");
    g.Input("a")
        .Input("b")
        .Input("c")
        .Node("Concat", {"a", "b", "c"}, {"y"}, {AttrInt("axis", axis)})
        .Output("y");
    ExpectCpuMatchesReference(
        g.Build(),
        {{"a", RandomFloats(s0, seed)}, {"b", RandomFloats(s1, seed + 1)}, {"c", RandomFloats(s2, seed + 2)}},
        18, 0, 0);
    seed += 3;
  }
  GraphBuilder one("g");
  one.Input("a").Node("Concat", {"a"}, {"y"}, {AttrInt("axis", 0)}).Output("y");
  ExpectCpuMatchesReference(one.Build(), {{"a", RandomFloats({3}, 1)}}, 18, 0, 0);
}

TEST(CpuConcatTest, FallsBackForEmptyInputsMismatchesAndOtherTypes) {
  GraphBuilder g("g");
  g.Input("a").Input("b").Node("Concat", {"a", "b"}, {"y"}, {AttrInt("axis", 0)}).Output("y");
  ExpectCpuMatchesReference(g.Build(), {{"a", RandomFloats({0, 3}, 1)}, {"b", RandomFloats({2, 3}, 2)}}, 18,
                            0, 0);
  auto feeds = Feeds{{"a", RandomFloats({1, 3}, 1)}, {"b", RandomFloats({2, 4}, 2)}};
  EXPECT_FALSE(RunGraphOn(runner::Backend::kReference, g.Build(), feeds).ok());
  EXPECT_FALSE(RunGraphOn(runner::Backend::kCpu, g.Build(), feeds).ok());
  GraphBuilder i("g");
  i.Input("a", pb::kInt64).Input("b", pb::kInt64).Node("Concat", {"a", "b"}, {"y"}, {AttrInt("axis", 0)});
  i.Output("y", pb::kInt64);
  ExpectCpuMatchesReference(i.Build(), {{"a", Int64s({1}, {4})}, {"b", Int64s({2}, {5, 6})}});
}

}  // namespace
}  // namespace onnxkit::testing
