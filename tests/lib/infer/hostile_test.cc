// Hostile values (reliability.md §(c).F): huge and negative dims, huge
// ranks, overflowing dim arithmetic, INT64_MIN / -1. Each gives an issue or
// an unknown shape, never a crash, UB or an allocation sized from the file.
// A sweep runs every op with a shape function over random hostile inputs
// and attributes (fixed seed).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>

#include "lib/infer/shape_fns.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2e62 = int64_t{1} << 62;

TEST(HostileTest, HugeShapeValuesOverflowTheByteSize) {  // F7
  EXPECT_THAT(IssuesOf({.op = "Expand", .inputs = {In("x", {1})}, .initializers = {Ints("s", {k2e62})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Expand): Expand: output 'y': shape [4611686018427387904] of "
                          "tensor(float) needs more bytes than int64 can count"));
  EXPECT_THAT(IssuesOf({.op = "ConstantOfShape", .initializers = {Ints("s", {k2e62, 4})}}),
              ElementsAre(HasSubstr("has more elements than int64 can count")));
  EXPECT_THAT(IssuesOf({.op = "ConstantOfShape", .initializers = {Ints("s", {-1})}}), SizeIs(1));
}

TEST(HostileTest, TileAndConcatOverflow) {  // F5
  EXPECT_THAT(IssuesOf({.op = "Tile", .inputs = {In("x", {k2e62})}, .initializers = {Ints("r", {4})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Tile): Tile: dim 4611686018427387904 * 4 overflows int64"));
  EXPECT_THAT(IssuesOf({.op = "Tile", .inputs = {In("x", {2})}, .initializers = {Ints("r", {kMin})}}), SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Concat",
                        .inputs = {In("a", {k2e62}), In("b", {k2e62})},
                        .attributes = {AttrInt("axis", 0)}}),
              ElementsAre(HasSubstr("overflows int64")));
}

TEST(HostileTest, ConvArithmeticOverflow) {  // F1, F5
  EXPECT_THAT(IssuesOf({.op = "Conv",
                        .inputs = {In("x", {1, 1, 8}), In("w", {1, 1, 3})},
                        .attributes = {AttrInts("dilations", {k2e62})}}),
              ElementsAre(HasSubstr("effective kernel size of spatial dim 0 overflows int64")));
  EXPECT_THAT(IssuesOf({.op = "Conv",
                        .inputs = {In("x", {1, 1, 8}), In("w", {1, 1, 3})},
                        .attributes = {AttrInts("pads", {kMax, kMax})}}),
              ElementsAre(HasSubstr("overflows int64")));
  EXPECT_THAT(IssuesOf({.op = "ConvTranspose",
                        .inputs = {In("x", {1, 1, k2e62}), In("w", {1, 1, 3})},
                        .attributes = {AttrInts("strides", {4})}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "MaxPool", .inputs = {In("x", {1, 1, 8})}, .attributes = {AttrInts("kernel_shape", {-3})}}),
              SizeIs(1));
}

TEST(HostileTest, HugeDeclaredRankIsCapped) {  // F6
  pb::ValueInfoProto x = In("x", {});
  x.type->tensor_type->shape->dim.resize(1000000);
  pb::ModelProto m = Build({.op = "Shape", .inputs = {x}});
  EXPECT_THAT(Issues(m), ElementsAre("E0601 graph 'g' › input 'x': 'x': declared rank 1000000 is above the limit of "
                                     "64 (limits::kMaxRank)"));
  EXPECT_EQ(TypeOf(m, "y"), "int64[?]");
  EXPECT_EQ(TypeOf(m, "x"), "float?");
}

TEST(HostileTest, RankFromAShapeLengthIsCapped) {  // F6: Reshape's shape declared [2^40]
  OneNode r{.op = "Reshape", .inputs = {In("x", {2}), In("shape", {int64_t{1} << 40}, pb::kInt64)}};
  EXPECT_THAT(IssuesOf(r), ElementsAre("E0601 graph 'g' › node 'n' (Reshape): Reshape: output would have rank "
                                       "1099511627776, above the limit of 64 (limits::kMaxRank)"));
  OneNode c{.op = "ConstantOfShape", .inputs = {In("shape", {int64_t{1} << 40}, pb::kInt64)}};
  EXPECT_THAT(IssuesOf(c), SizeIs(1));
  std::vector<int64_t> axes(100);
  for (int i = 0; i < 100; ++i) axes[static_cast<size_t>(i)] = i;
  EXPECT_THAT(IssuesOf({.op = "Unsqueeze", .inputs = {In("x", {2})}, .initializers = {Ints("a", axes)}}),
              ElementsAre(HasSubstr("output would have rank 101, above the limit of 64")));
}

TEST(HostileTest, NegativeDeclaredDimsAreUnknown) {
  pb::ValueInfoProto x = In("x", {2, 3});
  x.type->tensor_type->shape->dim[0].dim_value = -5;
  EXPECT_EQ(Infer({.op = "Relu", .inputs = {x}}), "float[?, 3]");
  EXPECT_THAT(IssuesOf({.op = "Relu", .inputs = {x}}), IsEmpty());
}

TEST(HostileTest, SignedDataArithmetic) {  // INT64_MIN / -1 and friends
  for (const char* op : {"Div", "Mul", "Add", "Sub"}) {
    OneNode n{.op = op, .initializers = {Ints("a", {kMin, kMax, 7}), Ints("b", {-1, 2, 0})}};
    EXPECT_THAT(IssuesOf(n), IsEmpty()) << op;
    EXPECT_EQ(Infer(n), "int64[3]") << op;
  }
  EXPECT_THAT(IssuesOf({.op = "Neg", .initializers = {Ints("a", {kMin})}}), IsEmpty());
}

TEST(HostileTest, RangeCountOverflow) {
  OneNode r{.op = "Range", .initializers = {Ints("s", {kMin}, true), Ints("l", {kMax}, true), Ints("d", {1}, true)}};
  EXPECT_THAT(IssuesOf(r), ElementsAre(HasSubstr("overflows int64")));
  r.initializers = {Ints("s", {kMin}, true), Ints("l", {kMax}, true), Ints("d", {kMin}, true)};
  EXPECT_EQ(Infer(r), "int64[0]");
}

TEST(HostileTest, PadsAndBlockSizes) {
  EXPECT_THAT(IssuesOf({.op = "Pad", .inputs = {In("x", {2})}, .initializers = {Ints("p", {kMax, kMax})}}),
              ElementsAre(HasSubstr("gives an overflow")));
  EXPECT_THAT(IssuesOf({.op = "Pad", .inputs = {In("x", {2})}, .initializers = {Ints("p", {kMin, kMin})}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "SpaceToDepth",
                        .inputs = {In("x", {1, 1, 4, 4})},
                        .attributes = {AttrInt("blocksize", int64_t{1} << 32)}}),
              SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "Gather", .inputs = {In("x", {3})}, .initializers = {Ints("i", {kMin})}}), SizeIs(1));
}

TEST(HostileTest, DeeplyNestedIfs) {
  // 30 levels: each then_branch holds the next If, each else_branch a leaf.
  pb::GraphProto inner = GraphBuilder("leaf").Node("Relu", {"x"}, {"r0"}).Output("r0").Build();
  for (int depth = 1; depth < 30; ++depth) {
    const std::string level = std::to_string(depth);
    pb::GraphProto leaf = GraphBuilder("else" + level).Node("Neg", {"x"}, {"n" + level}).Output("n" + level).Build();
    inner = GraphBuilder("level" + level)
                .Node("If", {"c"}, {"r" + level}, {AttrGraph("then_branch", inner), AttrGraph("else_branch", leaf)})
                .Output("r" + level)
                .Build();
  }
  pb::GraphProto main = GraphBuilder("main")
                            .Input("c", pb::kBool, std::vector<int64_t>{})
                            .Input("x", pb::kFloat, std::vector<int64_t>{2})
                            .Build();
  main.node = inner.node;
  main.output = inner.output;
  pb::ModelProto m = ModelFromGraph(main, 17);
  EXPECT_THAT(InferModel(m), IsEmpty());
  EXPECT_EQ(TypeOf(m, "r29"), "float[2]");
}

// Every op of the shape function table over random hostile shapes, data
// and attributes: nothing may crash (run under ASan/UBSan in the fuzz build).
TEST(HostileTest, SweepEveryShapeFunction) {
  struct Op {
    std::string_view domain, name;
  };
  std::vector<Op> ops;
#define ONNXKIT_SHAPE_FN(domain, op, function) ops.push_back({domain, op});
#include "lib/infer/shape_fns.def"
#undef ONNXKIT_SHAPE_FN
  std::mt19937_64 rng(12345);
  const int64_t values[] = {0, 1, 2, 3, -1, -2, 7, 64, 65, k2e62, kMax, kMin, int64_t{1} << 31};
  auto pick = [&]() { return values[rng() % std::size(values)]; };
  auto ints = [&](size_t n) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = pick();
    return v;
  };
  // ONNXKIT_INFER_SWEEP_TRIALS raises the trials per op (e.g. under sanitizers).
  const char* env = std::getenv("ONNXKIT_INFER_SWEEP_TRIALS");
  const int trials = env != nullptr ? std::max(1, std::atoi(env)) : 40;
  int runs = 0;
  for (const Op& op : ops) {
    for (int trial = 0; trial < trials; ++trial) {
      OneNode n{.op = std::string(op.name), .opset = trial % 2 == 0 ? 21 : 11};
      if (op.domain != "ai.onnx") n.domain = std::string(op.domain);
      const int inputs = static_cast<int>(rng() % 5);
      for (int i = 0; i < inputs; ++i) {
        std::string name = "i" + std::to_string(i);
        if (rng() % 3 == 0) {
          n.initializers.push_back(Ints(name, ints(rng() % 5), rng() % 4 == 0));
        } else {
          std::vector<int64_t> dims = ints(rng() % 6);
          for (int64_t& d : dims) d = d == kMin ? -1 : d;  // In() turns negatives into symbols
          n.inputs.push_back(In(name, dims, rng() % 2 == 0 ? pb::kFloat : pb::kInt64));
        }
      }
      n.outputs = {"y", "z", "w"};
      for (const char* attr : {"axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group",
                               "blocksize", "split", "num_outputs", "keepdims", "batch_dims", "k", "to", "shape",
                               "output_shape", "start", "end", "hidden_size", "new_axis", "num_scan_inputs"}) {
        if (rng() % 4 != 0) continue;
        if (rng() % 2 == 0) {
          n.attributes.push_back(AttrInt(attr, pick()));
        } else {
          n.attributes.push_back(AttrInts(attr, ints(rng() % 5)));
        }
      }
      InferModel(Build(n));
      ++runs;
    }
  }
  EXPECT_EQ(runs, trials * static_cast<int>(ops.size()));
}

}  // namespace
}  // namespace onnxkit::infer::testing
