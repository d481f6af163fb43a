// The cpu backend's Transpose, Concat and Pad against the reference kernels.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

// A tensor of a fixed-size `dtype` with random bytes (bool: 0 or 1).
runner::Tensor RandomBytes(int32_t dtype, std::vector<int64_t> shape, uint32_t seed) {
  absl::StatusOr<runner::Tensor> t = runner::Tensor::Allocate(dtype, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return runner::Tensor();
  std::mt19937 rng(seed);
  auto* p = static_cast<unsigned char*>(t->mutable_raw());
  for (size_t i = 0; i < t->nbytes(); ++i) {
    p[i] = static_cast<unsigned char>(dtype == pb::kBool ? rng() & 1 : rng() & 0xff);
  }
  return *std::move(t);
}

// Runs `graph` on the reference and on the cpu backend with `threads`
// threads and expects byte-identical outputs.
void ExpectCpuBytesMatchReference(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset = 18,
                                  int threads = 1) {
  absl::StatusOr<std::vector<runner::RtValue>> ref =
      RunGraphOn(runner::Backend::kReference, graph, feeds, opset);
  ASSERT_TRUE(ref.ok()) << "reference: " << ref.status();
  absl::StatusOr<std::vector<runner::RtValue>> cpu =
      RunGraphOn(runner::Backend::kCpu, graph, feeds, opset, threads);
  ASSERT_TRUE(cpu.ok()) << "cpu: " << cpu.status();
  ASSERT_EQ(ref->size(), cpu->size());
  for (size_t i = 0; i < ref->size(); ++i) {
    const runner::Tensor& r = (*ref)[i].tensor();
    const runner::Tensor& c = (*cpu)[i].tensor();
    ASSERT_EQ(r.dtype(), c.dtype()) << "output " << i;
    ASSERT_EQ(r.shape(), c.shape()) << "output " << i;
    if (r.is_string()) {
      ASSERT_TRUE(c.is_string());
      EXPECT_EQ(r.strings(), c.strings()) << "output " << i;
      continue;
    }
    ASSERT_EQ(r.nbytes(), c.nbytes()) << "output " << i;
    EXPECT_EQ(0, std::memcmp(r.raw(), c.raw(), r.nbytes())) << "output " << i << ": bytes differ";
  }
}

// A Concat graph of inputs x0, x1... of `dtype` along `axis`.
pb::GraphProto ConcatGraph(int inputs, int32_t dtype, int64_t axis) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  for (int i = 0; i < inputs; ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back(), dtype);
  }
  g.Node("Concat", names, {"y"}, {AttrInt("axis", axis)}).Output("y", dtype);
  return g.Build();
}

// Transposes a random float tensor of `shape` by every permutation on both
// backends; the results must be identical.
void ExpectEveryPermutationMatches(const std::vector<int64_t>& shape, uint32_t& seed) {
  std::vector<int64_t> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  do {
    GraphBuilder g("g");
    g.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}).Output("y");
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, seed++)}}, 18, 0, 0);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(CpuTransposeTest, EveryPermutationMatchesReference) {
  uint32_t seed = 1;
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{5}, {3, 4}, {2, 3, 4}, {2, 3, 1, 4}}) {
    ExpectEveryPermutationMatches(shape, seed);
  }
  GraphBuilder d("g");
  d.Input("x").Node("Transpose", {"x"}, {"y"}).Output("y");
  ExpectCpuMatchesReference(d.Build(), {{"x", RandomFloats({2, 3, 4, 5, 2, 3}, 7)}}, 18, 0, 0);
  GraphBuilder b("g");
  b.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 2, 1, 3})}).Output("y");
  ExpectCpuMatchesReference(b.Build(), {{"x", RandomFloats({1, 128, 12, 64}, 8)}}, 18, 0, 0);
}

TEST(CpuTransposeTest, PermutationsKeepingTrailingAxesMoveBlocks) {
  // Trailing axes of 64 bytes and more that stay in place are copied as
  // blocks: every permutation of rank 5 (with and without kept axes), the
  // channel shuffle of grouped convolutions, and 1- and 8-byte types.
  uint32_t seed = 20;
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{2, 3, 2, 4, 16}, {3, 2, 2, 8, 8}}) {
    ExpectEveryPermutationMatches(shape, seed);
  }
  GraphBuilder shuffle("g");
  shuffle.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 2, 1, 3, 4})}).Output("y");
  ExpectCpuMatchesReference(shuffle.Build(), {{"x", RandomFloats({1, 3, 80, 28, 28}, 3)}}, 18, 0, 0);
  for (int32_t dtype : {pb::kUint8, pb::kInt64}) {
    GraphBuilder g("g");
    g.Input("x", dtype).Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {1, 0, 2})}).Output("y", dtype);
    ExpectCpuMatchesReference(g.Build(), {{"x", RandomInts(dtype, {3, 5, 64}, 4, 0, 100)}});
  }
}

TEST(CpuTransposeTest, PermutationsMovingOnlyUnitAxesMatchReference) {
  // The elements stay in order, so the output is the input under a new
  // shape: a sequence-first transformer's [1, S, D] -> [S, 1, D] and back.
  GraphBuilder g("g");
  g.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {1, 0, 2})}).Output("y");
  ExpectCpuBytesMatchReference(g.Build(), {{"x", RandomFloats({1, 65, 128}, 5)}});
  GraphBuilder u("g");
  u.Input("x").Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {2, 1, 0, 3})}).Output("y");
  ExpectCpuBytesMatchReference(u.Build(), {{"x", RandomFloats({1, 4, 1, 8}, 6)}});
  // The view's consumers may compute in place only where nothing else
  // reads the shared bytes: x is read again after the Transpose's user.
  GraphBuilder shared("g");
  shared.Input("x")
      .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {1, 0, 2})})
      .Node("Relu", {"t"}, {"r"})
      .Node("Neg", {"x"}, {"n"})
      .Node("Transpose", {"r"}, {"back"}, {AttrInts("perm", {1, 0, 2})})
      .Node("Add", {"back", "n"}, {"y"})
      .Node("Identity", {"x"}, {"x_out"})
      .Output("y")
      .Output("x_out");
  ExpectCpuBytesMatchReference(shared.Build(), {{"x", RandomFloats({1, 33, 16}, 7)}});
}

TEST(CpuTransposeTest, TwoByteElementsMoveAsWordsUnchanged) {
  // float16 (NaN payloads included: random bytes), bfloat16 and int16: every
  // permutation of a rank-4 tensor, and a large one that runs on threads.
  uint32_t seed = 60;
  for (int32_t dtype : {pb::kFloat16, pb::kBfloat16, pb::kInt16}) {
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      SCOPED_TRACE(::testing::Message()
                   << "dtype " << dtype << " perm " << perm[0] << perm[1] << perm[2] << perm[3]);
      GraphBuilder g("g");
      g.Input("x", dtype).Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}).Output("y", dtype);
      ExpectCpuBytesMatchReference(g.Build(), {{"x", RandomBytes(dtype, {2, 3, 4, 5}, seed++)}});
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  GraphBuilder big("g");
  big.Input("x", pb::kFloat16)
      .Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 2, 3, 1})})
      .Output("y", pb::kFloat16);
  ExpectCpuBytesMatchReference(big.Build(), {{"x", RandomBytes(pb::kFloat16, {1, 96, 40, 40}, seed++)}});
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

TEST(CpuConcatTest, EveryRankAxisAndTypeMatchesReferenceBytes) {
  uint32_t seed = 100;
  const std::vector<int64_t> base = {3, 2, 4, 1, 5};
  for (int32_t dtype : {pb::kFloat, pb::kInt64, pb::kBool, pb::kFloat16, pb::kUint8, pb::kInt8, pb::kInt16,
                        pb::kInt32, pb::kDouble, pb::kBfloat16, pb::kComplex128}) {
    for (int64_t rank = 1; rank <= 5; ++rank) {
      for (int64_t axis = -rank; axis < rank; ++axis) {
        SCOPED_TRACE(::testing::Message() << "dtype " << dtype << " rank " << rank << " axis " << axis);
        size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
        std::vector<int64_t> shape(base.begin(), base.begin() + rank);
        Feeds feeds;
        for (int64_t extent : {2, 1, 3}) {
          shape[a] = extent;
          feeds.emplace_back("x" + std::to_string(feeds.size()), RandomBytes(dtype, shape, seed++));
        }
        ExpectCpuBytesMatchReference(ConcatGraph(3, dtype, axis), feeds, 21);
      }
    }
  }
}

TEST(CpuConcatTest, ZeroExtentInputsMatchReference) {
  uint32_t seed = 200;
  // An empty input between others, first and last, and all inputs empty.
  for (std::vector<int64_t> extents :
       std::vector<std::vector<int64_t>>{{2, 0, 3}, {0, 2, 3}, {2, 3, 0}, {0, 0, 0}}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(::testing::Message() << "axis " << axis << " first extent " << extents[0]);
      size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
      std::vector<int64_t> shape = {2, 3, 4};
      Feeds feeds;
      for (int64_t extent : extents) {
        shape[a] = extent;
        feeds.emplace_back("x" + std::to_string(feeds.size()), RandomBytes(pb::kInt32, shape, seed++));
      }
      ExpectCpuBytesMatchReference(ConcatGraph(3, pb::kInt32, axis), feeds);
    }
  }
  // A zero dim off the axis: an empty output.
  ExpectCpuBytesMatchReference(ConcatGraph(2, pb::kFloat, 1),
                               {{"x0", RandomFloats({0, 2}, 1)}, {"x1", RandomFloats({0, 3}, 2)}});
}

TEST(CpuConcatTest, ManyInputsMatchReference) {
  constexpr int kInputs = 40;
  for (int64_t axis : {0, 1, 2}) {
    Feeds feeds;
    for (int i = 0; i < kInputs; ++i) {
      std::vector<int64_t> shape = {3, 4, 5};
      shape[static_cast<size_t>(axis)] = 1 + i % 3;
      feeds.emplace_back("x" + std::to_string(i), RandomFloats(shape, 300 + static_cast<uint32_t>(i)));
    }
    ExpectCpuBytesMatchReference(ConcatGraph(kInputs, pb::kFloat, axis), feeds);
  }
}

TEST(CpuConcatTest, LargeOutputsMatchReferenceOnTwoThreads) {
  uint32_t seed = 400;
  // Outputs of megabytes: split across threads, the ranges cutting through
  // rows and blocks (odd element counts, 1- and 8-byte types).
  for (int32_t dtype : {pb::kFloat, pb::kUint8, pb::kInt64}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "dtype " << dtype << " axis " << axis << " threads " << threads);
        size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
        Feeds feeds;
        for (int64_t extent : {37, 1, 0, 50}) {
          std::vector<int64_t> shape = {71, 103, 97};
          shape[a] = extent;
          feeds.emplace_back("x" + std::to_string(feeds.size()), RandomBytes(dtype, shape, seed++));
        }
        ExpectCpuBytesMatchReference(ConcatGraph(4, dtype, axis), feeds, 18, threads);
      }
    }
  }
}

TEST(CpuConcatTest, StringsSubByteTypesAndOldOpsetsFallBack) {
  ExpectCpuBytesMatchReference(
      ConcatGraph(2, pb::kString, 1),
      {{"x0", Strings({2, 1}, {"a", "bc"})}, {"x1", Strings({2, 2}, {"d", "", "e", "f"})}});
  // int4: two elements a byte; 3 + 2 elements along the last axis.
  ExpectCpuBytesMatchReference(
      ConcatGraph(2, pb::kInt4, -1),
      {{"x0", RandomBytes(pb::kInt4, {2, 3}, 1)}, {"x1", RandomBytes(pb::kInt4, {2, 2}, 2)}}, 21);
  // Opset 1..3: the axis attribute is optional (default 1).
  GraphBuilder g("g");
  g.Input("a").Input("b").Node("Concat", {"a", "b"}, {"y"}).Output("y");
  ExpectCpuBytesMatchReference(g.Build(), {{"a", RandomFloats({2, 3}, 1)}, {"b", RandomFloats({2, 1}, 2)}},
                               3);
}

TEST(CpuConcatTest, EmptyInputsMismatchesAndInt64) {
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

// A Pad graph (opset 11 on) of x (`dtype`) with constant pads, a constant
// value when given, and `mode`.
pb::GraphProto PadGraph(int32_t dtype, const std::vector<int64_t>& pads, const runner::Tensor* value,
                        const std::string& mode = "constant", const std::vector<int64_t>* axes = nullptr) {
  GraphBuilder g("g");
  g.Input("x", dtype).Initializer(InitializerFrom("pads", Int64s({static_cast<int64_t>(pads.size())}, pads)));
  std::vector<std::string> inputs = {"x", "pads"};
  if (value != nullptr || axes != nullptr) {
    inputs.push_back(value != nullptr ? "value" : "");
    if (value != nullptr) g.Initializer(InitializerFrom("value", *value));
  }
  if (axes != nullptr) {
    g.Initializer(InitializerFrom("axes", Int64s({static_cast<int64_t>(axes->size())}, *axes)));
    inputs.push_back("axes");
  }
  g.Node("Pad", inputs, {"y"}, {AttrString("mode", mode)}).Output("y", dtype);
  return g.Build();
}

TEST(CpuPadTest, ConstantPadsMatchReferenceBytes) {
  std::mt19937 rng(31);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  uint32_t seed = 40;
  for (int32_t dtype : {pb::kFloat, pb::kUint8, pb::kInt64, pb::kFloat16}) {
    for (size_t rank = 1; rank <= 5; ++rank) {
      for (int with_value = 0; with_value < 2; ++with_value) {
        std::vector<int64_t> shape, pads(2 * rank);
        for (size_t d = 0; d < rank; ++d) shape.push_back(pick(1, 5));
        for (int64_t& p : pads) p = pick(0, 3) == 0 ? 0 : pick(1, 3);
        SCOPED_TRACE(::testing::Message()
                     << "dtype " << dtype << " rank " << rank << " value " << with_value);
        runner::Tensor value = RandomBytes(dtype, {}, seed++);
        for (int64_t opset : {11, 13, 18}) {
          ExpectCpuBytesMatchReference(PadGraph(dtype, pads, with_value ? &value : nullptr),
                                       {{"x", RandomBytes(dtype, shape, seed++)}}, opset);
        }
      }
    }
  }
  // Before opset 11: pads and value attributes.
  for (float value : {0.f, 2.5f}) {
    GraphBuilder g("g");
    g.Input("x")
        .Node("Pad", {"x"}, {"y"}, {AttrInts("pads", {0, 1, 2, 0, 3, 1}), AttrFloat("value", value)})
        .Output("y");
    ExpectCpuBytesMatchReference(g.Build(), {{"x", RandomFloats({2, 3, 4}, seed++)}}, 2);
  }
}

TEST(CpuPadTest, LargeOutputsMatchReferenceOnTwoThreads) {
  ExpectCpuBytesMatchReference(PadGraph(pb::kFloat, {0, 0, 1, 2, 0, 0, 3, 1}, nullptr),
                               {{"x", RandomFloats({1, 64, 60, 70}, 44)}}, 18, 2);
}

TEST(CpuPadTest, ZeroPadsGiveTheInputItself) {
  runner::Tensor x = RandomFloats({1, 8, 5, 5}, 45);
  auto cpu = RunGraphOn(runner::Backend::kCpu, PadGraph(pb::kFloat, std::vector<int64_t>(8, 0), nullptr),
                        {{"x", x}}, 18);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)[0].tensor().raw(), x.raw());  // no copy
  ExpectCpuBytesMatchReference(PadGraph(pb::kFloat, std::vector<int64_t>(8, 0), nullptr), {{"x", x}}, 18);
}

TEST(CpuPadTest, OtherModesNegativePadsAndAxesRunOnTheReference) {
  runner::Tensor x = RandomFloats({2, 3, 4}, 46);
  for (const char* mode : {"reflect", "edge"}) {
    ExpectCpuBytesMatchReference(PadGraph(pb::kFloat, {0, 1, 2, 1, 1, 0}, nullptr, mode), {{"x", x}}, 18);
  }
  ExpectCpuBytesMatchReference(PadGraph(pb::kFloat, {0, -1, 2, 1, 1, -2}, nullptr), {{"x", x}}, 18);
  const std::vector<int64_t> axes = {2, 0};
  ExpectCpuBytesMatchReference(PadGraph(pb::kFloat, {1, 2, 0, 1}, nullptr, "constant", &axes), {{"x", x}},
                               18);
  // A value of another type: an error on both backends.
  runner::Tensor wrong = Int64Scalar(3);
  auto ref = RunGraphOn(runner::Backend::kReference, PadGraph(pb::kFloat, {0, 1, 0, 0, 1, 0}, &wrong),
                        {{"x", x}}, 18);
  auto cpu =
      RunGraphOn(runner::Backend::kCpu, PadGraph(pb::kFloat, {0, 1, 0, 0, 1, 0}, &wrong), {{"x", x}}, 18);
  EXPECT_FALSE(ref.ok());
  EXPECT_FALSE(cpu.ok());
}

}  // namespace
}  // namespace onnxkit::testing
