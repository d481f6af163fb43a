// Shape computations kept across runs (Session::ShapeMemo): nodes whose
// values follow from the feeds' types and shapes run in the first run of a
// signature and are skipped in later ones; values whose shapes follow from
// contents (NonZero) are computed every run; a new signature computes them
// again; observers and fed initializers run every node.
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

absl::StatusOr<std::unique_ptr<runner::Session>> Open(pb::GraphProto graph, runner::Backend backend,
                                                      runner::SessionOptions options = {}) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(std::move(graph), 18);
  options.backend = backend;
  return runner::Session::Create(std::move(loaded), std::move(options));
}

// x: float [N, M]. flat = Reshape(x, [N * M]) + Cast(Range(0, N * M, 1))
// (the target shape and the range from Shape(x)); count = Shape(NonZero(x >
// 0)), whose value follows from x's contents; w is an initializer the
// caller may feed (also a graph input).
pb::GraphProto ShapeGraph() {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{-1, -1})
      .Input("w", pb::kFloat, std::vector<int64_t>{1})
      .Initializer(InitializerFrom("i0", Int64Scalar(0)))
      .Initializer(InitializerFrom("i1", Int64Scalar(1)))
      .Initializer(InitializerFrom("axes", Int64s({1}, {0})))
      .Initializer(InitializerFrom("zero", Floats({}, {0.0f})))
      .Initializer(InitializerFrom("w", Floats({1}, {0.5f})))
      .Node("Shape", {"x"}, {"s"}, {}, "shape")
      .Node("Gather", {"s", "i0"}, {"n"}, {}, "rows")
      .Node("Gather", {"s", "i1"}, {"m"}, {}, "cols")
      .Node("Mul", {"n", "m"}, {"nm"}, {}, "count_all")
      .Node("Unsqueeze", {"nm", "axes"}, {"target"}, {}, "target")
      .Node("Reshape", {"x", "target"}, {"flat"}, {}, "flatten")
      .Node("Range", {"i0", "nm", "i1"}, {"r"}, {}, "range")
      .Node("Cast", {"r"}, {"rf"}, {AttrInt("to", pb::kFloat)}, "cast")
      .Node("Add", {"flat", "rf"}, {"sum"}, {}, "add")
      .Node("Mul", {"sum", "w"}, {"y"}, {}, "scale")
      .Node("Greater", {"x", "zero"}, {"pos"}, {}, "positive")
      .Node("NonZero", {"pos"}, {"nz"}, {}, "nonzero")
      .Node("Shape", {"nz"}, {"count"}, {}, "count")
      .Output("y")
      .Output("count");
  return g.Build();
}

// Values of `shape` positive at every `period`-th element, negative elsewhere: the number of
// positive values depends on it.
runner::Tensor Pattern(const std::vector<int64_t>& shape, int period) {
  runner::Tensor t = RandomFloats(shape, 1, 0.5f, 1.0f);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (i % period != 0) t.mutable_data<float>()[i] *= -1;
  }
  return t;
}

void ExpectSame(const std::vector<runner::RtValue>& a, const std::vector<runner::RtValue>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ExpectTensorsClose(a[i].tensor(), b[i].tensor(), 0, 0, "output " + std::to_string(i));
  }
}

TEST(SessionShapeMemoTest, SkipsShapeComputationsOfARepeatedSignature) {
  auto cpu = Open(ShapeGraph(), runner::Backend::kCpu);
  auto ref = Open(ShapeGraph(), runner::Backend::kReference);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(ref.ok()) << ref.status();
  struct Step {
    std::vector<int64_t> shape;
    int period;
    bool memoized;
  };
  // Same shapes, other contents: the NonZero count changes, the memo holds.
  const Step steps[] = {{{2, 3}, 1, false}, {{2, 3}, 2, true}, {{2, 3}, 3, true},
                        {{4, 5}, 4, false}, {{4, 5}, 5, true}, {{2, 3}, 6, false}};
  std::vector<int64_t> counts;
  for (const Step& step : steps) {
    SCOPED_TRACE(::testing::Message() << step.shape[0] << "x" << step.shape[1] << " period " << step.period);
    runner::RtValue x = runner::RtValue::FromTensor(Pattern(step.shape, step.period));
    auto a = (*cpu)->Run({{"x", x}});
    auto b = (*ref)->Run({{"x", x}});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectSame(*a, *b);
    // Shape, two Gathers, Mul, Unsqueeze, Range and Cast.
    EXPECT_EQ((*cpu)->last_run_memoized_nodes(), step.memoized ? 7 : 0);
    counts.push_back(Values<int64_t>((*a)[1].tensor())[1]);  // [rank, count]
  }
  EXPECT_EQ(counts[0], 6);
  EXPECT_EQ(counts[1], 3);
  EXPECT_EQ(counts[2], 2);
  // The reference backend keeps nothing.
  EXPECT_EQ((*ref)->last_run_memoized_nodes(), 0);
}

TEST(SessionShapeMemoTest, ObserversAndFedInitializersRunEveryNode) {
  runner::SessionOptions watched;
  int64_t seen = 0;
  watched.observer = [&](const ir::Value&, const runner::RtValue&) {
    ++seen;
    return absl::OkStatus();
  };
  auto observed = Open(ShapeGraph(), runner::Backend::kCpu, watched);
  auto cpu = Open(ShapeGraph(), runner::Backend::kCpu);
  ASSERT_TRUE(observed.ok()) << observed.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  runner::RtValue x = runner::RtValue::FromTensor(RandomFloats({3, 3}, 7));
  for (int run = 0; run < 3; ++run) {
    seen = 0;
    auto out = (*observed)->Run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*observed)->last_run_memoized_nodes(), 0);
    EXPECT_EQ(seen, 13) << "every node's output is observed";
  }
  auto first = (*cpu)->Run({{"x", x}});
  ASSERT_TRUE(first.ok()) << first.status();
  auto fed = (*cpu)->Run({{"x", x}, {"w", runner::RtValue::FromTensor(Floats({1}, {2.0f}))}});
  ASSERT_TRUE(fed.ok()) << fed.status();
  EXPECT_EQ((*cpu)->last_run_memoized_nodes(), 0);
  auto again = (*cpu)->Run({{"x", x}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*cpu)->last_run_memoized_nodes(), 7);
  // The fed w scaled by 2, the initializer by 0.5.
  const std::vector<float> f = Values<float>((*fed)[0].tensor()), g = Values<float>((*again)[0].tensor());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_FLOAT_EQ(f[i], 4 * g[i]);
}

// A shape computation whose value other nodes read is larger than the
// session keeps (a ConstantOfShape of 68 MB read by an Add of a value of
// the input's contents): every run computes it.
TEST(SessionShapeMemoTest, LargeValuesAreNotKept) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{-1})
      .Initializer(InitializerFrom("scale", Int64s({1}, {1 << 20})))
      .Node("Shape", {"x"}, {"s"}, {}, "shape")
      .Node("Mul", {"s", "scale"}, {"big_shape"}, {}, "scale")
      .Node("ConstantOfShape", {"big_shape"}, {"big"}, {}, "fill")
      .Node("ReduceSum", {"x"}, {"xs"}, {AttrInt("keepdims", 0)}, "sum")
      .Node("Add", {"big", "xs"}, {"shifted"}, {}, "add")
      .Node("ReduceMax", {"shifted"}, {"y"}, {AttrInt("keepdims", 0)}, "max")
      .Output("y");
  auto cpu = Open(g.Build(), runner::Backend::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  runner::RtValue x = runner::RtValue::FromTensor(Floats({17}, std::vector<float>(17, 1.0f)));
  for (int run = 0; run < 3; ++run) {
    auto out = (*cpu)->Run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*cpu)->last_run_memoized_nodes(), 0);
    EXPECT_EQ(Values<float>((*out)[0].tensor()), std::vector<float>{17.0f});  // zeros + sum(x)
  }
}

// The shape of a fused chain's result (Conv + Relu) follows from its
// inputs' shapes: Reshape(c, [N, C, H * W]) takes its target from Shape(c).
TEST(SessionShapeMemoTest, ShapesOfFusedChainsFollowFromTheirInputs) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{-1, 3, -1, -1})
      .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 11)))
      .Initializer(InitializerFrom("b", RandomFloats({4}, 12)))
      .Initializer(InitializerFrom("first", Int64s({1}, {0})))
      .Initializer(InitializerFrom("mid", Int64s({1}, {2})))
      .Initializer(InitializerFrom("end", Int64s({1}, {4})))
      .Node("Conv", {"x", "w", "b"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("Relu", {"c"}, {"cr"}, {}, "relu")
      .Node("Shape", {"cr"}, {"s"}, {}, "shape")
      .Node("Slice", {"s", "first", "mid"}, {"nc"}, {}, "batch_channels")
      .Node("Slice", {"s", "mid", "end"}, {"hw"}, {}, "image")
      .Node("ReduceProd", {"hw"}, {"area"}, {AttrInt("keepdims", 1)}, "area")
      .Node("Concat", {"nc", "area"}, {"target"}, {AttrInt("axis", 0)}, "target")
      .Node("Reshape", {"cr", "target"}, {"y"}, {}, "reshape")
      .Output("y");
  pb::GraphProto graph = g.Build();
  auto cpu = Open(graph, runner::Backend::kCpu);
  auto ref = Open(graph, runner::Backend::kReference);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 3, 5, 6}, {1, 3, 5, 6}, {2, 3, 4, 4}}) {
    runner::RtValue x = runner::RtValue::FromTensor(RandomFloats(shape, 13));
    auto a = (*cpu)->Run({{"x", x}});
    auto b = (*ref)->Run({{"x", x}});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectTensorsClose((*b)[0].tensor(), (*a)[0].tensor(), 1e-5, 1e-5, "y");
  }
  // Second run: Shape, two Slices, ReduceProd, Concat skipped; third: a new shape.
  auto x = runner::RtValue::FromTensor(RandomFloats({2, 3, 4, 4}, 14));
  ASSERT_TRUE((*cpu)->Run({{"x", x}}).ok());
  EXPECT_EQ((*cpu)->last_run_memoized_nodes(), 5);
}

}  // namespace
}  // namespace onnxkit::testing
