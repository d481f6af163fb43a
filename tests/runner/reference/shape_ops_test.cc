// Tests of the shape and data-movement reference kernels
// (runner/reference/shape_ops_*): error paths on hostile shapes, indices and
// attributes (an error, never a crash or a huge allocation), element types
// the ONNX backend suites leave out (strings, packed int4/uint4, bool), and
// edge cases of the specs (negative pads, periodic reflection, uneven splits,
// ties and NaN in TopK, seeded dropout).
#include <cmath>
#include <cstring>
#include <limits>
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "runner/tensor.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();


// A packed 4-bit tensor (int4 = 22, uint4 = 21) holding the low nibbles.
Tensor Nibbles(int32_t dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
  absl::StatusOr<Tensor> t = Tensor::Allocate(dtype, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  auto* p = static_cast<uint8_t*>(t->mutable_raw());
  for (size_t i = 0; i < v.size(); ++i) p[i / 2] |= static_cast<uint8_t>((v[i] & 0xF) << (4 * (i % 2)));
  return *t;
}
std::vector<uint8_t> NibbleValues(const Tensor& t) {
  std::vector<uint8_t> out;
  const auto* p = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.size(); ++i) out.push_back((p[i / 2] >> (4 * (i % 2))) & 0xF);
  return out;
}

// Runs one node `op` on the inputs (named x0, x1...; an undefined tensor
// leaves that input out) at `opset`; returns its `num_outputs` outputs.
absl::StatusOr<std::vector<Tensor>> RunNode(const std::string& op, const std::vector<Tensor>& inputs,
                                            std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 21,
                                            int num_outputs = 1) {
  return RunSingleNodeTensors(op, inputs, std::move(attrs), opset, num_outputs);
}

absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 21) {
  absl::StatusOr<std::vector<Tensor>> out = RunNode(op, inputs, std::move(attrs), opset);
  if (!out.ok()) return out.status();
  return (*out)[0];
}


// Caps tensor memory for the test's duration, so a wrong size check fails
// with ResourceExhausted instead of touching terabytes.
class MemoryCap {
 public:
  MemoryCap() { runner::SetMemoryLimit(int64_t{1} << 30); }
  ~MemoryCap() { runner::SetMemoryLimit(0); }
};

void ExpectError(const absl::StatusOr<Tensor>& t, std::string_view fragment = "") {
  ASSERT_FALSE(t.ok()) << "expected an error, got " << runner::DescribeTensor(*t);
  EXPECT_NE(std::string(t.status().message()).find(fragment), std::string::npos) << t.status();
}

// --- Views: Reshape, Flatten, Squeeze, Unsqueeze ---

TEST(ShapeOpsTest, ReshapeInfersAndCopiesDims) {
  absl::StatusOr<Tensor> y =
      RunOp("Reshape", {Floats({2, 3, 4}, std::vector<float>(24)), Int64s({3}, {0, -1, 2})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{2, 6, 2}));
}

TEST(ShapeOpsTest, ReshapeRejectsMalformedShapes) {
  Tensor x = Floats({2, 3}, std::vector<float>(6));
  ExpectError(RunOp("Reshape", {x, Int64s({2}, {-1, -1})}), "more than one -1");
  ExpectError(RunOp("Reshape", {x, Int64s({2}, {4, 2})}), "cannot reshape");
  ExpectError(RunOp("Reshape", {x, Int64s({3}, {1, 1, 0})}), "copies dim 2");
  ExpectError(RunOp("Reshape", {x, Int64s({2}, {-2, 3})}), "negative");
  ExpectError(RunOp("Reshape", {x, Int64s({2}, {kI64Max, kI64Max})}));
  ExpectError(RunOp("Reshape", {x, Int64s({2}, {0, -1})}, {AttrInt("allowzero", 1)}), "both 0 and -1");
}

TEST(ShapeOpsTest, ReshapeAllowzeroKeepsZeroDims) {
  absl::StatusOr<Tensor> y =
      RunOp("Reshape", {Floats({0, 3}, {}), Int64s({3}, {3, 0, 1})}, {AttrInt("allowzero", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{3, 0, 1}));
}

TEST(ShapeOpsTest, ReshapeOpset1ReadsTheAttribute) {
  absl::StatusOr<Tensor> y =
      RunOp("Reshape", {Floats({2, 3}, std::vector<float>(6))}, {AttrInts("shape", {3, 2})}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{3, 2}));
}

TEST(ShapeOpsTest, FlattenAndSqueezeCheckAxes) {
  Tensor x = Floats({2, 1, 3}, std::vector<float>(6));
  ExpectError(RunOp("Flatten", {x}, {AttrInt("axis", 4)}), "out of range");
  ExpectError(RunOp("Squeeze", {x, Int64s({1}, {0})}), "not 1");
  ExpectError(RunOp("Unsqueeze", {x, Int64s({2}, {1, -4})}), "more than once");
  absl::StatusOr<Tensor> y = RunOp("Unsqueeze", {x}, {AttrInts("axes", {0, 4})}, 11);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 2, 1, 3, 1}));
  y = RunOp("Squeeze", {x}, {}, 11);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{2, 3}));
}

TEST(ShapeOpsTest, ShapeClampsStartAndEnd) {
  absl::StatusOr<Tensor> y = RunOp("Shape", {Floats({2, 3, 4}, std::vector<float>(24))},
                                   {AttrInt("start", -100), AttrInt("end", -1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{2, 3}));
}

// --- Tensors built from shapes ---

TEST(ShapeOpsTest, HugeOutputsFailCleanly) {
  MemoryCap cap;
  Tensor one = Floats({1}, {1});
  ExpectError(RunOp("Expand", {one, Int64s({2}, {int64_t{1} << 40, int64_t{1} << 40})}));
  ExpectError(RunOp("Expand", {one, Int64s({2}, {1 << 20, 1 << 20})}));
  ExpectError(RunOp("Expand", {one, Int64s({1}, {-3})}), "negative");
  ExpectError(RunOp("Tile", {one, Int64s({1}, {kI64Max})}));
  ExpectError(RunOp("Tile", {Floats({2}, {1, 2}), Int64s({1}, {kI64Max})}), "overflows");
  ExpectError(RunOp("ConstantOfShape", {Int64s({3}, {1 << 30, 1 << 30, 1 << 30})}));
  ExpectError(RunOp("ConstantOfShape", {Int64s({2}, {4, -1})}), "negative");
  ExpectError(RunOp("Range", {Floats({}, {0}), Floats({}, {1e30f}), Floats({}, {1e-30f})}));
  ExpectError(RunOp("Range", {Int64s({}, {kI64Min}), Int64s({}, {kI64Max}), Int64s({}, {1})}));
  ExpectError(RunOp("Range", {Int64s({}, {0}), Int64s({}, {5}), Int64s({}, {0})}), "zero");
  ExpectError(RunOp("Resize", {Floats({1, 1}, {1}), Tensor(), Floats({2}, {1e30f, 1e30f})}, {}, 19));
  ExpectError(
      RunOp("Resize", {Floats({1, 1}, {1}), Tensor(), Tensor(), Int64s({2}, {1 << 30, 1 << 30})}, {}, 19));
  ExpectError(RunOp("OneHot", {Int64s({1}, {0}), Floats({}, {1e30f}), Floats({2}, {0, 1})}));
}

TEST(ShapeOpsTest, RangeCountsLikeNumpy) {
  absl::StatusOr<Tensor> y = RunOp("Range", {Int32s({}, {10}), Int32s({}, {1}), Int32s({}, {-3})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{10, 7, 4}));
  y = RunOp("Range", {Int64s({}, {kI64Max - 2}), Int64s({}, {kI64Max}), Int64s({}, {1})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{kI64Max - 2, kI64Max - 1}));
}

TEST(ShapeOpsTest, ConstantOfShapeFillsAnyType) {
  pb::TensorProto value;
  value.data_type = pb::kInt32;
  value.dims = {1};
  value.int32_data = {7};
  absl::StatusOr<Tensor> y = RunOp("ConstantOfShape", {Int64s({2}, {2, 2})}, {AttrTensor("value", value)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{7, 7, 7, 7}));
}

TEST(ShapeOpsTest, EyeLikeAndTriluTolerateExtremeOffsets) {
  Tensor x = Floats({2, 3}, std::vector<float>(6, 1));
  absl::StatusOr<Tensor> y = RunOp("EyeLike", {x}, {AttrInt("k", kI64Min)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), std::vector<float>(6, 0));
  y = RunOp("Trilu", {x, Int64s({}, {kI64Min})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), std::vector<float>(6, 1));
  y = RunOp("Trilu", {x, Int64s({}, {kI64Max})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), std::vector<float>(6, 0));
}

TEST(ShapeOpsTest, OneHotLeavesOutOfRangeIndicesOff) {
  absl::StatusOr<Tensor> y =
      RunOp("OneHot", {Int64s({3}, {1, -1, 7}), Int64s({}, {3}), Strings({2}, {"off", "on"})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(),
            (std::vector<std::string>{"off", "on", "off", "off", "off", "on", "off", "off", "off"}));
  ExpectError(RunOp("OneHot", {Int64s({1}, {0}), Int64s({}, {-2}), Floats({2}, {0, 1})}), "depth");
  // Every element written (the output starts uninitialized): off 7, on -3,
  // along axis 0.
  y = RunOp("OneHot", {Int64s({2}, {2, 0}), Int64s({}, {3}), Int32s({2}, {7, -3})}, {AttrInt("axis", 0)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{7, -3, 7, 7, -3, 7}));
}

TEST(ShapeOpsTest, CumSumWrapsIntegersAndRunsBackwards) {
  absl::StatusOr<Tensor> y =
      RunOp("CumSum", {Int32s({3}, {std::numeric_limits<int32_t>::max(), 1, 5}), Int32s({}, {0})},
            {AttrInt("reverse", 1), AttrInt("exclusive", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{6, 5, 0}));
  ExpectError(RunOp("CumSum", {Int32s({2}, {1, 2}), Int32s({}, {3})}), "out of range");
  // Along a middle axis (rows of running totals), every direction.
  const std::vector<int32_t> x = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60};  // [2, 3, 2]
  struct Case {
    int64_t reverse, exclusive;
    std::vector<int32_t> want;
  };
  for (const Case& c : std::vector<Case>{{0, 0, {1, 2, 4, 6, 9, 12, 10, 20, 40, 60, 90, 120}},
                                         {0, 1, {0, 0, 1, 2, 4, 6, 0, 0, 10, 20, 40, 60}},
                                         {1, 0, {9, 12, 8, 10, 5, 6, 90, 120, 80, 100, 50, 60}},
                                         {1, 1, {8, 10, 5, 6, 0, 0, 80, 100, 50, 60, 0, 0}}}) {
    y = RunOp("CumSum", {Int32s({2, 3, 2}, x), Int32s({}, {1})},
              {AttrInt("reverse", c.reverse), AttrInt("exclusive", c.exclusive)});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(Values<int32_t>(*y), c.want) << "reverse " << c.reverse << " exclusive " << c.exclusive;
  }
}

// --- Layout: Transpose, Concat, Split, Slice, Pad... ---

TEST(ShapeOpsTest, TransposeMovesStringsAndPackedInt4) {
  absl::StatusOr<Tensor> y = RunOp("Transpose", {Strings({2, 2}, {"a", "b", "c", "d"})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"a", "c", "b", "d"}));
  y = RunOp("Transpose", {Nibbles(22, {2, 3}, {1, 2, 3, 4, 5, 15})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), 22);
  EXPECT_EQ(NibbleValues(*y), (std::vector<uint8_t>{1, 4, 2, 5, 3, 15}));
  ExpectError(RunOp("Transpose", {Floats({2, 2}, {1, 2, 3, 4})}, {AttrInts("perm", {0, 0})}), "permutation");
}

TEST(ShapeOpsTest, ConcatPackedUint4AcrossByteBoundaries) {
  absl::StatusOr<Tensor> y =
      RunOp("Concat", {Nibbles(21, {3}, {1, 2, 3}), Nibbles(21, {1}, {9})}, {AttrInt("axis", 0)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(NibbleValues(*y), (std::vector<uint8_t>{1, 2, 3, 9}));
  ExpectError(RunOp("Concat", {Floats({2, 2}, {1, 2, 3, 4}), Floats({2, 3}, std::vector<float>(6))},
                    {AttrInt("axis", 0)}),
              "cannot concatenate");
  ExpectError(RunOp("Concat", {Floats({2}, {1, 2}), Int64s({2}, {1, 2})}, {AttrInt("axis", 0)}),
              "cannot concatenate");
}

TEST(ShapeOpsTest, SplitNumOutputsMakesTheLastChunkSmaller) {
  absl::StatusOr<std::vector<Tensor>> y =
      RunNode("Split", {Floats({5}, {1, 2, 3, 4, 5})}, {AttrInt("num_outputs", 2)}, 18, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>((*y)[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Values<float>((*y)[1]), (std::vector<float>{4, 5}));
  y = RunNode("Split", {Floats({5}, {1, 2, 3, 4, 5}), Int64s({2}, {4, 2})}, {}, 18, 2);
  ASSERT_FALSE(y.ok());
  y = RunNode("Split", {Floats({5}, {1, 2, 3, 4, 5})}, {}, 13, 2);
  ASSERT_FALSE(y.ok());
  y = RunNode("Split", {Floats({5}, {1, 2, 3, 4, 5})}, {AttrInts("split", {-1, 6})}, 11, 2);
  ASSERT_FALSE(y.ok());
}

TEST(ShapeOpsTest, SliceClampsExtremeBoundsAndNegativeSteps) {
  Tensor x = Floats({5}, {0, 1, 2, 3, 4});
  absl::StatusOr<Tensor> y = RunOp(
      "Slice", {x, Int64s({1}, {kI64Max}), Int64s({1}, {kI64Min}), Int64s({1}, {0}), Int64s({1}, {-2})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{4, 2, 0}));
  y = RunOp("Slice",
            {x, Int64s({1}, {kI64Min}), Int64s({1}, {kI64Max}), Int64s({1}, {0}), Int64s({1}, {kI64Max})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{0}));
  y = RunOp("Slice", {x, Int64s({1}, {0}), Int64s({1}, {5}), Int64s({1}, {0}), Int64s({1}, {kI64Min})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->size(), 0);
  ExpectError(RunOp("Slice", {x, Int64s({1}, {0}), Int64s({1}, {5}), Int64s({1}, {0}), Int64s({1}, {0})}),
              "step");
  ExpectError(RunOp("Slice", {x, Int64s({1}, {0}), Int64s({1}, {5}), Int64s({1}, {1})}), "out of range");
  ExpectError(RunOp("Slice", {x, Int64s({2}, {0, 0}), Int64s({1}, {5})}), "different lengths");
}

TEST(ShapeOpsTest, PadModesWithLargeAndNegativePads) {
  Tensor x = Floats({3}, {1, 2, 3});
  absl::StatusOr<Tensor> y = RunOp("Pad", {x, Int64s({2}, {5, 0})}, {AttrString("mode", "reflect")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3}));  // periodic, like numpy
  y = RunOp("Pad", {x, Int64s({2}, {4, 1})}, {AttrString("mode", "wrap")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{3, 1, 2, 3, 1, 2, 3, 1}));
  y = RunOp("Pad", {x, Int64s({2}, {-1, 2})}, {AttrString("mode", "edge")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{2, 3, 3, 3}));
  y = RunOp("Pad", {x, Int64s({2}, {1, -2}), Floats({}, {9})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{9, 1}));
  ExpectError(RunOp("Pad", {x, Int64s({2}, {-4, 0})}), "do not fit");
  ExpectError(RunOp("Pad", {x, Int64s({3}, {1, 1, 1})}), "must have 2 values");
  ExpectError(RunOp("Pad", {Floats({0}, {}), Int64s({2}, {1, 1})}, {AttrString("mode", "edge")}),
              "empty axis");
  ExpectError(RunOp("Pad", {x, Int64s({2}, {kI64Max, 0})}));
}

TEST(ShapeOpsTest, PadStringsAndAxes) {
  absl::StatusOr<Tensor> y =
      RunOp("Pad", {Strings({1, 2}, {"a", "b"}), Int64s({2}, {1, 0}), Strings({}, {"-"}), Int64s({1}, {-1})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"-", "a", "b"}));
}

// DepthToSpace in both modes and SpaceToDepth against the index formulas of
// the spec, for 1-, 2-, 4- and 8-byte elements (row loops) and strings (the
// element-wise path), blocks of 2 and 3; SpaceToDepth undoes DCR.
TEST(ShapeOpsTest, DepthToSpaceAndSpaceToDepthFollowTheSpec) {
  for (int64_t b : {2, 3}) {
    const int64_t n = 2, oc = 3, h = 2, w = 5, c = oc * b * b;
    std::vector<float> values(static_cast<size_t>(n * c * h * w));
    std::iota(values.begin(), values.end(), 0.f);
    for (const char* mode : {"DCR", "CRD"}) {
      const bool crd = std::string(mode) == "CRD";
      std::vector<float> expected;
      for (int64_t in = 0; in < n; ++in) {
        for (int64_t o = 0; o < oc; ++o) {
          for (int64_t y = 0; y < h * b; ++y) {
            for (int64_t x = 0; x < w * b; ++x) {
              const int64_t i = y % b, j = x % b;
              const int64_t ch = crd ? o * b * b + i * b + j : (i * b + j) * oc + o;
              expected.push_back(values[static_cast<size_t>(((in * c + ch) * h + y / b) * w + x / b)]);
            }
          }
        }
      }
      SCOPED_TRACE(std::string(mode) + " blocksize " + std::to_string(b));
      std::vector<pb::AttributeProto> attrs = {AttrInt("blocksize", b), AttrString("mode", mode)};
      absl::StatusOr<Tensor> f = RunOp("DepthToSpace", {Floats({n, c, h, w}, values)}, attrs);
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(f->shape(), (std::vector<int64_t>{n, oc, h * b, w * b}));
      EXPECT_EQ(Values<float>(*f), expected);
      std::vector<int64_t> ints(values.begin(), values.end());
      absl::StatusOr<Tensor> l = RunOp("DepthToSpace", {Int64s({n, c, h, w}, ints)}, attrs);
      ASSERT_TRUE(l.ok()) << l.status();
      EXPECT_EQ(Values<int64_t>(*l), std::vector<int64_t>(expected.begin(), expected.end()));
      std::vector<uint8_t> bytes(values.begin(), values.end());
      absl::StatusOr<Tensor> u = RunOp("DepthToSpace", {Uint8s({n, c, h, w}, bytes)}, attrs);
      ASSERT_TRUE(u.ok()) << u.status();
      EXPECT_EQ(Values<uint8_t>(*u), std::vector<uint8_t>(expected.begin(), expected.end()));
      std::vector<std::string> words;
      for (float v : values) words.push_back(std::to_string(static_cast<int>(v)));
      absl::StatusOr<Tensor> t = RunOp("DepthToSpace", {Strings({n, c, h, w}, words)}, attrs);
      ASSERT_TRUE(t.ok()) << t.status();
      for (size_t k = 0; k < expected.size(); ++k)
        ASSERT_EQ(t->strings()[k], std::to_string(static_cast<int>(expected[k]))) << k;
      if (!crd) {
        absl::StatusOr<Tensor> back = RunOp("SpaceToDepth", {*f}, {AttrInt("blocksize", b)});
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(back->shape(), (std::vector<int64_t>{n, c, h, w}));
        EXPECT_EQ(Values<float>(*back), values);
        absl::StatusOr<Tensor> back_t = RunOp("SpaceToDepth", {*t}, {AttrInt("blocksize", b)});
        ASSERT_TRUE(back_t.ok()) << back_t.status();
        EXPECT_EQ(back_t->strings(), words);
      }
    }
  }
}

TEST(ShapeOpsTest, LayoutOpsRejectBadArguments) {
  Tensor x = Floats({1, 4, 2, 2}, std::vector<float>(16));
  ExpectError(RunOp("DepthToSpace", {x}, {AttrInt("blocksize", 3)}), "multiple");
  ExpectError(RunOp("SpaceToDepth", {x}, {AttrInt("blocksize", 3)}), "multiples");
  ExpectError(
      RunOp("Compress", {Floats({2}, {1, 2}), Bools({3}, {false, false, true})}, {AttrInt("axis", 0)}),
      "selects index 2");
  ExpectError(RunOp("ReverseSequence", {Floats({2, 2}, {1, 2, 3, 4}), Int64s({2}, {3, 1})}), "outside");
  ExpectError(RunOp("CenterCropPad", {Floats({2}, {1, 2}), Int64s({2}, {1, 1})}), "one value per axis");
  ExpectError(
      RunOp("Col2Im", {Floats({1, 4, 3}, std::vector<float>(12)), Int64s({2}, {3, 3}), Int64s({2}, {2, 2})}),
      "must be");
}

// --- Indexing ---

TEST(ShapeOpsTest, GatherChecksIndices) {
  Tensor data = Strings({3}, {"a", "b", "c"});
  absl::StatusOr<Tensor> y = RunOp("Gather", {data, Int64s({2, 2}, {-1, 0, 2, 1})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"c", "a", "c", "b"}));
  ExpectError(RunOp("Gather", {data, Int64s({1}, {3})}), "out of range");
  ExpectError(RunOp("Gather", {data, Int64s({1}, {kI64Min})}), "out of range");
  ExpectError(RunOp("Gather", {data, Floats({1}, {0})}), "int64 or int32");
  ExpectError(
      RunOp("GatherElements", {Floats({2, 2}, {1, 2, 3, 4}), Int64s({2, 1}, {0, 2})}, {AttrInt("axis", 1)}),
      "out of range");
  ExpectError(RunOp("GatherND", {Floats({2, 2}, {1, 2, 3, 4}), Int64s({1, 3}, {0, 0, 0})}), "last dim");
  ExpectError(
      RunOp("GatherND", {Floats({2, 2}, {1, 2, 3, 4}), Int64s({1, 1}, {0})}, {AttrInt("batch_dims", 1)}),
      "batch");
}

TEST(ShapeOpsTest, GatherPackedInt4) {
  absl::StatusOr<Tensor> y = RunOp("Gather", {Nibbles(22, {5}, {1, 2, 3, 4, 5}), Int64s({3}, {4, 0, 3})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(NibbleValues(*y), (std::vector<uint8_t>{5, 1, 4}));
}

TEST(ShapeOpsTest, ScatterReductionsAccumulateDuplicates) {
  Tensor data = Floats({3}, {1, 2, 3});
  absl::StatusOr<Tensor> y =
      RunOp("ScatterElements", {data, Int64s({3}, {0, 0, -1}), Floats({3}, {10, 20, 30})},
            {AttrString("reduction", "add")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{31, 2, 33}));
  y = RunOp("ScatterND", {data, Int64s({2, 1}, {2, 2}), Floats({2}, {5, 4})},
            {AttrString("reduction", "min")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{1, 2, 3}));
  ExpectError(RunOp("ScatterElements", {data, Int64s({1}, {3}), Floats({1}, {1})}), "out of range");
  ExpectError(RunOp("ScatterND", {data, Int64s({1, 1}, {-4}), Floats({1}, {1})}), "out of range");
  ExpectError(RunOp("ScatterND", {data, Int64s({1, 1}, {0}), Floats({2}, {1, 2})}), "must have shape");
  ExpectError(RunOp("ScatterElements", {data, Int64s({1}, {0}), Floats({1}, {1})},
                    {AttrString("reduction", "max")}, 16),
              "not supported");
}

TEST(ShapeOpsTest, TensorScatterWritesCircularly) {
  Tensor cache = Floats({1, 3, 1}, {0, 0, 0});
  absl::StatusOr<Tensor> y = RunOp("TensorScatter", {cache, Floats({1, 2, 1}, {7, 8}), Int64s({1}, {2})},
                                   {AttrString("mode", "circular")}, 24);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{8, 0, 7}));
  ExpectError(RunOp("TensorScatter", {cache, Floats({1, 2, 1}, {7, 8}), Int64s({1}, {2})}, {}, 24),
              "outside");
}

TEST(ShapeOpsTest, NonZeroOfAScalar) {
  absl::StatusOr<Tensor> y = RunOp("NonZero", {Floats({}, {3})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{0}));
}

// Random shapes (empty dims included) and densities: the coordinates of
// every nonzero element in row-major order, as the definition lists them.
TEST(ShapeOpsTest, NonZeroListsCoordinatesInOrder) {
  std::mt19937 rng(13);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    int64_t rank = pick(1, 4);
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(pick(trial % 10 == 0 ? 0 : 1, 6));
    int64_t size = 1;
    for (int64_t d : shape) size *= d;
    std::vector<int64_t> v(static_cast<size_t>(size));
    const int64_t density = pick(0, 4);
    for (int64_t& e : v) e = pick(0, 3) < density ? pick(-5, 5) : 0;
    absl::StatusOr<Tensor> y = RunOp("NonZero", {Int64s(shape, v)});
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<std::vector<int64_t>> expected(static_cast<size_t>(rank));
    for (int64_t i = 0; i < size; ++i) {
      if (v[static_cast<size_t>(i)] == 0) continue;
      int64_t rem = i;
      for (int64_t d = rank - 1; d >= 0; --d) {
        expected[static_cast<size_t>(d)].push_back(rem % shape[static_cast<size_t>(d)]);
        rem /= shape[static_cast<size_t>(d)];
      }
    }
    const int64_t n = static_cast<int64_t>(expected[0].size());
    ASSERT_EQ(y->shape(), (std::vector<int64_t>{rank, n})) << "trial " << trial;
    for (int64_t d = 0; d < rank; ++d) {
      for (int64_t k = 0; k < n; ++k) {
        ASSERT_EQ(y->data<int64_t>()[d * n + k], expected[static_cast<size_t>(d)][static_cast<size_t>(k)])
            << "trial " << trial << " dim " << d << " hit " << k;
      }
    }
  }
}

// --- Ordering ---

TEST(ShapeOpsTest, TopKPrefersLowerIndicesAndRanksNanHighest) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<std::vector<Tensor>> y =
      RunNode("TopK", {Floats({5}, {1, nan, 3, 3, -1}), Int64s({1}, {3})}, {}, 11, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>((*y)[1]), (std::vector<int64_t>{1, 2, 3}));
  y = RunNode("TopK", {Floats({5}, {1, nan, 3, 3, -1}), Int64s({1}, {2})}, {AttrInt("largest", 0)}, 11, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>((*y)[1]), (std::vector<int64_t>{4, 0}));
  y = RunNode("TopK", {Floats({2}, {1, 2}), Int64s({1}, {3})}, {}, 11, 2);
  ASSERT_FALSE(y.ok());
}

// Integers along a leading axis (rows strided by the kept dims), k both
// below and above where the insertion path ends.
TEST(ShapeOpsTest, TopKOfIntegersAlongALeadingAxis) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < 40; ++i) v.push_back((i * 7) % 10);  // column 0
  std::vector<int64_t> x;
  for (int64_t i = 0; i < 40; ++i) x.insert(x.end(), {v[static_cast<size_t>(i)], -v[static_cast<size_t>(i)]});
  for (int64_t k : {3, 20}) {
    absl::StatusOr<std::vector<Tensor>> y =
        RunNode("TopK", {Int64s({40, 2}, x), Int64s({1}, {k})}, {AttrInt("axis", 0)}, 11, 2);
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<int64_t> order(40);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)];
    });
    std::vector<int64_t> low(40);
    std::iota(low.begin(), low.end(), 0);
    std::stable_sort(low.begin(), low.end(), [&](int64_t a, int64_t b) {
      return -v[static_cast<size_t>(a)] > -v[static_cast<size_t>(b)];
    });
    for (int64_t r = 0; r < k; ++r) {
      EXPECT_EQ((*y)[1].data<int64_t>()[2 * r], order[static_cast<size_t>(r)]) << "k " << k << " rank " << r;
      EXPECT_EQ((*y)[1].data<int64_t>()[2 * r + 1], low[static_cast<size_t>(r)])
          << "k " << k << " rank " << r;
      EXPECT_EQ((*y)[0].data<int64_t>()[2 * r], v[static_cast<size_t>(order[static_cast<size_t>(r)])]);
    }
  }
}

TEST(ShapeOpsTest, UniqueOfStringsInFirstOccurrenceOrder) {
  absl::StatusOr<std::vector<Tensor>> y =
      RunNode("Unique", {Strings({5}, {"b", "a", "b", "c", "a"})}, {AttrInt("sorted", 0)}, 11, 4);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].strings(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(Values<int64_t>((*y)[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(Values<int64_t>((*y)[2]), (std::vector<int64_t>{0, 1, 0, 2, 1}));
  EXPECT_EQ(Values<int64_t>((*y)[3]), (std::vector<int64_t>{2, 2, 1}));
}

// --- Resize and sampling ---

TEST(ShapeOpsTest, ResizeNearestCopiesIntegersExactly) {
  int64_t big = (int64_t{1} << 60) + 1;  // not representable as a double
  absl::StatusOr<Tensor> y =
      RunOp("Resize", {Int64s({1, 2}, {big, 3}), Tensor(), Floats({2}, {1, 2})}, {}, 19);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{big, big, 3, 3}));
}

TEST(ShapeOpsTest, ResizeRejectsInconsistentInputs) {
  Tensor x = Floats({1, 2}, {1, 2});
  ExpectError(RunOp("Resize", {x, Tensor(), Floats({2}, {1, 2}), Int64s({2}, {1, 4})}, {}, 19),
              "exactly one");
  ExpectError(RunOp("Resize", {x, Tensor(), Floats({1}, {2})}, {}, 19), "must have 2 values");
  ExpectError(RunOp("Resize", {x, Tensor(), Floats({2}, {1, -2})}, {}, 19), "positive");
  ExpectError(RunOp("Resize", {x, Tensor(), Floats({2}, {1, 2})}, {AttrString("mode", "bogus")}, 19), "mode");
  ExpectError(RunOp("Resize", {Floats({1, 0}, {}), Tensor(), Tensor(), Int64s({2}, {1, 3})}, {}, 19),
              "empty axis");
}

// Output lengths from scales are floor(in * scale) in float, as ONNX's
// shape inference and ONNX Runtime compute them; align_corners and
// pytorch_half_pixel take length_resized as that whole output length (as
// ONNX Runtime and PyTorch do), not as the fractional in * scale.
TEST(ShapeOpsTest, ResizeGeometryUsesTheWholeOutputLength) {
  std::vector<float> row(7);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(i * i);
  const Tensor x = Floats({1, 7}, row);
  // 7 x 1.8571428f: 13.0 in float, 12.9999996 in double.
  absl::StatusOr<Tensor> up = RunOp("Resize", {x, Tensor(), Floats({2}, {1, 13.f / 7.f})}, {}, 13);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->shape(), (std::vector<int64_t>{1, 13}));
  for (float scale : {2.5f, 0.5f}) {  // 17.5 -> 17 and 3.5 -> 3 elements
    const int64_t out = static_cast<int64_t>(std::floor(7 * scale));
    absl::StatusOr<Tensor> y = RunOp(
        "Resize", {x, Tensor(), Floats({2}, {1, scale})},
        {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")}, 13);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->shape(), (std::vector<int64_t>{1, out}));
    for (int64_t j = 0; j < out; ++j) {
      const double pos = static_cast<double>(j) * 6.0 / static_cast<double>(out - 1);
      const size_t lo = static_cast<size_t>(std::floor(pos));
      const double frac = pos - static_cast<double>(lo);
      const double want = lo + 1 < row.size() ? row[lo] * (1 - frac) + row[lo + 1] * frac : row[lo];
      EXPECT_NEAR(Values<float>(*y)[static_cast<size_t>(j)], want, 1e-4) << "scale " << scale << " at " << j;
    }
    EXPECT_FLOAT_EQ(Values<float>(*y).back(), 36.f);  // the corners meet
  }
  // pytorch_half_pixel onto one element reads coordinate 0 (cubic too).
  for (const char* mode : {"linear", "cubic"}) {
    absl::StatusOr<Tensor> one = RunOp(
        "Resize", {Floats({7, 1}, row), Tensor(), Floats({2}, {0.2f, 1})},
        {AttrString("mode", mode), AttrString("coordinate_transformation_mode", "pytorch_half_pixel")}, 13);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_EQ(one->shape(), (std::vector<int64_t>{1, 1}));
    EXPECT_FLOAT_EQ(Values<float>(*one)[0], 0.f) << mode;
  }
}

TEST(ShapeOpsTest, GridSampleChecksTheGridShape) {
  Tensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  ExpectError(RunOp("GridSample", {x, Floats({1, 1, 1, 3}, {0, 0, 0})}), "does not fit");
  absl::StatusOr<Tensor> y =
      RunOp("GridSample", {x, Floats({1, 1, 1, 2}, {0, 0})}, {AttrInt("align_corners", 1)}, 20);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_FLOAT_EQ(Values<float>(*y)[0], 2.5f);
}

// --- Dropout and random generators ---

TEST(ShapeOpsTest, DropoutIsIdentityInInference) {
  absl::StatusOr<std::vector<Tensor>> y = RunNode("Dropout", {Floats({2}, {1, 2})}, {}, 13, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>((*y)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ((*y)[1].dtype(), pb::kBool);
  ExpectError(RunOp("Dropout", {Floats({2}, {1, 2}), Floats({}, {1.5f}), Bools({}, {true})}), "ratio");
}

TEST(ShapeOpsTest, SeededRandomNodesRepeatTheirDraws) {
  std::vector<pb::AttributeProto> attrs = {AttrInts("shape", {4}), AttrFloat("seed", 3)};
  absl::StatusOr<Tensor> a = RunOp("RandomUniform", {}, attrs);
  absl::StatusOr<Tensor> b = RunOp("RandomUniform", {}, attrs);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Values<float>(*a), Values<float>(*b));
  for (float v : Values<float>(*a)) EXPECT_TRUE(v >= 0 && v < 1) << v;
  absl::StatusOr<Tensor> m =
      RunOp("Multinomial", {Floats({1, 2}, {-1e30f, 0})}, {AttrInt("sample_size", 3), AttrFloat("seed", 1)});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Values<int32_t>(*m), (std::vector<int32_t>{1, 1, 1}));
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

// x[i] = i as floats, `shape` dims.
runner::Tensor Iota(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return Floats(shape, v);
}

// Row-major strides of `shape`.
std::vector<int64_t> StridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// A step on the last axis copies strided elements of every width: 1, 2
// (float16 bits), 4 and 8 bytes, bools, strings and packed int4.
TEST(ShapeOpsTest, SliceWithAStepOnTheLastAxisCopiesEveryType) {
  auto slice = [](const runner::Tensor& x, int64_t start, int64_t end, int64_t step) {
    return RunSingleNodeTensors(
        "Slice", {x, Int64s({1}, {start}), Int64s({1}, {end}), Int64s({1}, {-1}), Int64s({1}, {step})});
  };
  // Rows [0..4] and [5..9]: step 2 from 0, step -2 from the end.
  auto i8 = slice(Int8s({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), 0, 5, 2);
  ASSERT_TRUE(i8.ok()) << i8.status();
  EXPECT_EQ((*i8)[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<int8_t>((*i8)[0].data<int8_t>(), (*i8)[0].data<int8_t>() + 6),
            (std::vector<int8_t>{0, 2, 4, 5, 7, 9}));
  auto i64 = slice(Int64s({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), -1, -6, -2);
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_EQ(std::vector<int64_t>((*i64)[0].data<int64_t>(), (*i64)[0].data<int64_t>() + 6),
            (std::vector<int64_t>{4, 2, 0, 9, 7, 5}));
  runner::Tensor half = MakeTensor<uint16_t>(pb::kFloat16, {1, 4}, {0x3c00, 0x4000, 0x4200, 0x4400});
  auto h = slice(half, 1, 4, 2);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].data<uint16_t>()[0], 0x4000);
  EXPECT_EQ((*h)[0].data<uint16_t>()[1], 0x4400);
  auto b = slice(Bools({1, 3}, {true, false, true}), 2, -4, -1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE((*b)[0].data<bool>()[0] && !(*b)[0].data<bool>()[1] && (*b)[0].data<bool>()[2]);
  auto str = slice(Strings({1, 3}, {"a", "b", "c"}), 0, 3, 2);
  ASSERT_TRUE(str.ok()) << str.status();
  EXPECT_EQ((*str)[0].strings()[1], "c");
  absl::StatusOr<runner::Tensor> packed = runner::Tensor::Allocate(pb::kInt4, {1, 4});
  ASSERT_TRUE(packed.ok()) << packed.status();
  static_cast<uint8_t*>(packed->mutable_raw())[0] = 0x21;  // 1, 2
  static_cast<uint8_t*>(packed->mutable_raw())[1] = 0x43;  // 3, 4
  auto i4 = slice(*packed, 0, 4, 3);
  ASSERT_TRUE(i4.ok()) << i4.status();
  EXPECT_EQ((*i4)[0].shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ((*i4)[0].data<uint8_t>()[0], 0x41);
}

TEST(ShapeOpsTest, SliceAndPadRunsMatchIndexByIndexCopies) {
  // Random shapes, bounds, steps and pads against the element-by-element
  // definition: the kernels copy whole runs where they can.
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    int64_t rank = pick(1, 4);
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(pick(1, 5));
    runner::Tensor x = Iota(shape);
    std::vector<int64_t> strides = StridesOf(shape);
    // Slice: every axis, step in {-2, -1, 1, 2, 3}, bounds anywhere.
    std::vector<int64_t> starts, ends, steps, axes;
    std::vector<int64_t> first(static_cast<size_t>(rank)), step(static_cast<size_t>(rank)),
        count(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) {
      int64_t dim = shape[static_cast<size_t>(a)];
      int64_t st = std::vector<int64_t>{-2, -1, 1, 1, 2, 3}[static_cast<size_t>(pick(0, 5))];
      int64_t s = pick(0, dim - 1), e = st > 0 ? pick(s, dim) : pick(0, s);
      if (trial % 3 == 0) s = st > 0 ? 0 : dim - 1, e = st > 0 ? dim : -dim - 1, st = st > 0 ? 1 : st;
      starts.push_back(s);
      ends.push_back(e);
      steps.push_back(st);
      axes.push_back(a);
      int64_t real_e = e < 0 ? e + dim : e;  // -dim - 1 (through index 0) becomes -1
      first[static_cast<size_t>(a)] = s;
      step[static_cast<size_t>(a)] = st;
      count[static_cast<size_t>(a)] = st > 0 ? (real_e - s + st - 1) / st : (s - real_e + (-st) - 1) / (-st);
    }
    auto sliced = RunSingleNodeTensors("Slice", {x, Int64s({rank}, starts), Int64s({rank}, ends),
                                                 Int64s({rank}, axes), Int64s({rank}, steps)});
    ASSERT_TRUE(sliced.ok()) << sliced.status();
    const runner::Tensor& y = (*sliced)[0];
    ASSERT_EQ(y.shape(), count) << "trial " << trial;
    std::vector<int64_t> c(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < y.size(); ++i) {
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d) src += (first[d] + c[d] * step[d]) * strides[d];
      ASSERT_EQ(y.data<float>()[i], static_cast<float>(src)) << "slice trial " << trial << " element " << i;
      for (size_t d = c.size(); d-- > 0;) {
        if (++c[d] < count[d]) break;
        c[d] = 0;
      }
    }
    // Pad: pads in [-dim + 1, 4] per side, one of the four modes.
    const char* modes[] = {"constant", "reflect", "edge", "wrap"};
    std::string mode = modes[pick(0, 3)];
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank));
    std::vector<int64_t> out_shape(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) {
      int64_t dim = shape[static_cast<size_t>(a)];
      int64_t b = pick(-(dim - 1) / 2, 3), e = pick(-(dim - 1) / 2, 3);
      if (mode == "reflect") b = std::min(b, dim - 1), e = std::min(e, dim - 1);
      pads[static_cast<size_t>(a)] = b;
      pads[static_cast<size_t>(a + rank)] = e;
      out_shape[static_cast<size_t>(a)] = dim + b + e;
    }
    auto padded = RunSingleNodeTensors("Pad", {x, Int64s({2 * rank}, pads), Floats({}, {-1.f})},
                                       {AttrString("mode", mode)});
    ASSERT_TRUE(padded.ok()) << padded.status() << " " << mode;
    const runner::Tensor& p = (*padded)[0];
    ASSERT_EQ(p.shape(), out_shape);
    std::fill(c.begin(), c.end(), 0);
    for (int64_t i = 0; i < p.size(); ++i) {
      float expected = 0;
      int64_t src = 0;
      bool inside = true;
      for (size_t d = 0; d < c.size(); ++d) {
        int64_t dim = shape[d], lo = pads[d] < 0 ? -pads[d] : 0;
        int64_t len = dim - lo - (pads[d + c.size()] < 0 ? -pads[d + c.size()] : 0);
        int64_t r = c[d] - std::max<int64_t>(pads[d], 0);
        if (r < 0 || r >= len) {
          if (mode == "constant") inside = false;
          if (mode == "edge") r = r < 0 ? 0 : len - 1;
          if (mode == "wrap") r = ((r % len) + len) % len;
          if (mode == "reflect") {
            int64_t period = 2 * (len - 1);
            r = period == 0 ? 0 : ((r % period) + period) % period;
            if (r >= len) r = period - r;
          }
        }
        src += (lo + r) * strides[d];
      }
      expected = inside ? static_cast<float>(src) : -1.f;
      ASSERT_EQ(p.data<float>()[i], expected) << mode << " pad trial " << trial << " element " << i;
      for (size_t d = c.size(); d-- > 0;) {
        if (++c[d] < out_shape[d]) break;
        c[d] = 0;
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

TEST(ShapeOpsTest, ResizeNearestRowsMatchTheElementPath) {
  // Fixed-size elements take the row path (a table for the last axis);
  // strings take the element-by-element path. The same geometry on the
  // same values, as floats and as their text, must agree everywhere,
  // including tf_crop_and_resize's outside values.
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* coords[] = {"half_pixel",         "asymmetric",           "align_corners",
                          "pytorch_half_pixel", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const float scale_choices[] = {0.5f, 0.75f, 1.f, 1.5f, 2.f, 3.f};
  for (int trial = 0; trial < 120; ++trial) {
    int64_t rank = pick(1, 4);
    std::vector<int64_t> shape;
    std::vector<float> scales;
    for (int64_t i = 0; i < rank; ++i) {
      shape.push_back(pick(1, 6));
      scales.push_back(scale_choices[pick(0, 5)]);
    }
    std::string coord = coords[pick(0, 5)], mode = nearest[pick(0, 3)];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    std::vector<std::string> text(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      values[static_cast<size_t>(i)] = static_cast<float>(i);
      text[static_cast<size_t>(i)] = std::to_string(i);
    }
    std::vector<float> roi;
    for (int64_t i = 0; i < rank; ++i) roi.push_back(-0.2f);
    for (int64_t i = 0; i < rank; ++i) roi.push_back(1.1f);
    std::vector<pb::AttributeProto> attrs = {
        AttrString("mode", "nearest"), AttrString("coordinate_transformation_mode", coord),
        AttrString("nearest_mode", mode), AttrFloat("extrapolation_value", -7.f)};
    auto as_float = RunSingleNodeTensors(
        "Resize", {Floats(shape, values), Floats({2 * rank}, roi), Floats({rank}, scales)}, attrs, 13);
    ASSERT_TRUE(as_float.ok()) << as_float.status();
    if (coord == "tf_crop_and_resize") continue;  // strings have no extrapolation value
    auto as_text = RunSingleNodeTensors(
        "Resize", {Strings(shape, text), Floats({2 * rank}, roi), Floats({rank}, scales)}, attrs, 13);
    ASSERT_TRUE(as_text.ok()) << as_text.status();
    const runner::Tensor& f = (*as_float)[0];
    const runner::Tensor& t = (*as_text)[0];
    ASSERT_EQ(f.shape(), t.shape()) << coord << " " << mode;
    for (int64_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(std::to_string(static_cast<int64_t>(f.data<float>()[i])), t.strings()[static_cast<size_t>(i)])
          << coord << " " << mode << " trial " << trial << " element " << i;
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

// The indices 0..dim-1 stably sorted by key(i) in TopK's order: larger (or
// smaller) first, NaN above every number.
template <typename Key>
std::vector<int64_t> StableTopKOrder(int64_t dim, bool largest, Key key) {
  std::vector<int64_t> order(static_cast<size_t>(dim));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    float x = key(a), y = key(b);
    if (std::isnan(x) || std::isnan(y))
      return largest ? (std::isnan(x) && !std::isnan(y)) : (!std::isnan(x) && std::isnan(y));
    return largest ? x > y : x < y;
  });
  return order;
}

TEST(ShapeOpsTest, TopKIsTheStartOfAStableSort) {
  // Values from a small set (many ties) with NaN among them, random k,
  // largest and smallest: the first k of a stable sort of the indices.
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    int64_t dim = pick(1, 40), k = pick(0, dim);
    bool largest = trial % 2 == 0;
    std::vector<float> v(static_cast<size_t>(dim));
    for (float& x : v)
      x = pick(0, 9) == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(pick(-3, 3));
    auto out = RunSingleNodeTensors("TopK", {Floats({dim}, v), Int64s({1}, {k})},
                                    {AttrInt("largest", largest)}, 11, 2);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<int64_t> order =
        StableTopKOrder(dim, largest, [&](int64_t i) { return v[static_cast<size_t>(i)]; });
    for (int64_t r = 0; r < k; ++r) {
      ASSERT_EQ((*out)[1].data<int64_t>()[r], order[static_cast<size_t>(r)])
          << "trial " << trial << " rank " << r;
    }
  }
}

// Long rows (the candidate scan, the buffer cut back to k, both sides of
// the insertion limit), rows along a middle axis (gathered first), ties and
// NaN: the first k of a stable sort of every row.
TEST(ShapeOpsTest, TopKOfLongAndStridedRowsIsTheStartOfAStableSort) {
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 120; ++trial) {
    const int64_t outer = pick(1, 3), dim = pick(1, 700), inner = pick(1, 4);
    const int64_t ks[] = {pick(0, std::min<int64_t>(dim, 20)), pick(0, dim), std::min<int64_t>(dim, 17)};
    const int64_t k = ks[trial % 3];
    const bool largest = trial % 2 == 0, ties = trial % 4 < 2;
    std::vector<float> v(static_cast<size_t>(outer * dim * inner));
    std::uniform_real_distribution<float> real(-5.f, 5.f);
    for (float& x : v) {
      if (pick(0, 40) == 0) {
        x = std::numeric_limits<float>::quiet_NaN();
      } else {
        x = ties ? static_cast<float>(pick(-4, 4)) : real(rng);
      }
    }
    // Increasing values make every element a new candidate.
    if (trial % 10 == 9) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    }
    auto out = RunSingleNodeTensors("TopK", {Floats({outer, dim, inner}, v), Int64s({1}, {k})},
                                    {AttrInt("largest", largest), AttrInt("axis", 1)}, 11, 2);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        auto key = [&](int64_t i) { return v[static_cast<size_t>((o * dim + i) * inner + in)]; };
        std::vector<int64_t> order = StableTopKOrder(dim, largest, key);
        for (int64_t r = 0; r < k; ++r) {
          const int64_t at = (o * k + r) * inner + in;
          ASSERT_EQ((*out)[1].data<int64_t>()[at], order[static_cast<size_t>(r)])
              << "trial " << trial << " row " << o << "," << in << " rank " << r;
          const float got = (*out)[0].data<float>()[at], want = key(order[static_cast<size_t>(r)]);
          ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

TEST(ShapeOpsTest, TileRowsMatchTheModuloDefinition) {
  std::mt19937 rng(9);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 100; ++trial) {
    int64_t rank = pick(1, 4);
    std::vector<int64_t> shape, repeats, out_shape;
    for (int64_t i = 0; i < rank; ++i) {
      shape.push_back(pick(1, 4));
      repeats.push_back(pick(0, 3));
      out_shape.push_back(shape.back() * repeats.back());
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
    auto out = RunSingleNodeTensors("Tile", {Floats(shape, v), Int64s({rank}, repeats)}, {}, 13);
    ASSERT_TRUE(out.ok()) << out.status();
    const runner::Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), out_shape);
    std::vector<int64_t> c(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < y.size(); ++i) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src = src * shape[static_cast<size_t>(d)] + c[static_cast<size_t>(d)] % shape[static_cast<size_t>(d)];
      ASSERT_EQ(y.data<float>()[i], static_cast<float>(src)) << "trial " << trial << " element " << i;
      for (size_t d = c.size(); d-- > 0;) {
        if (++c[d] < out_shape[d]) break;
        c[d] = 0;
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

TEST(ShapeOpsTest, GatherAndScatterElementsRowsMatchTheElementPath) {
  // Fixed-size elements take the typed row path, strings the element path:
  // the same indices (negative ones, repeats) on the same values must agree.
  std::mt19937 rng(13);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 150; ++trial) {
    int64_t rank = pick(1, 4), axis = pick(0, rank - 1);
    std::vector<int64_t> shape, ishape;
    for (int64_t i = 0; i < rank; ++i) {
      shape.push_back(pick(1, 5));
      ishape.push_back(i == axis ? pick(1, 6) : pick(1, shape.back()));
    }
    int64_t n = 1, m = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t d : ishape) m *= d;
    std::vector<float> values(static_cast<size_t>(n)), updates(static_cast<size_t>(m));
    std::vector<std::string> text(static_cast<size_t>(n)), utext(static_cast<size_t>(m));
    std::vector<int64_t> idx(static_cast<size_t>(m));
    for (int64_t i = 0; i < n; ++i)
      values[static_cast<size_t>(i)] = static_cast<float>(i),
      text[static_cast<size_t>(i)] = std::to_string(i);
    for (int64_t i = 0; i < m; ++i) {
      updates[static_cast<size_t>(i)] = static_cast<float>(1000 + i),
      utext[static_cast<size_t>(i)] = std::to_string(1000 + i);
      int64_t dim = shape[static_cast<size_t>(axis)];
      idx[static_cast<size_t>(i)] = pick(-dim, dim - 1);
    }
    std::vector<pb::AttributeProto> attrs = {AttrInt("axis", axis)};
    auto gf = RunSingleNodeTensors("GatherElements", {Floats(shape, values), Int64s(ishape, idx)}, attrs, 13);
    auto gs = RunSingleNodeTensors("GatherElements", {Strings(shape, text), Int64s(ishape, idx)}, attrs, 13);
    ASSERT_TRUE(gf.ok() && gs.ok()) << gf.status() << gs.status();
    for (int64_t i = 0; i < m; ++i) {
      ASSERT_EQ(std::to_string(static_cast<int64_t>((*gf)[0].data<float>()[i])),
                (*gs)[0].strings()[static_cast<size_t>(i)])
          << "gather trial " << trial;
    }
    auto sf = RunSingleNodeTensors(
        "ScatterElements", {Floats(shape, values), Int64s(ishape, idx), Floats(ishape, updates)}, attrs, 13);
    auto ss = RunSingleNodeTensors(
        "ScatterElements", {Strings(shape, text), Int64s(ishape, idx), Strings(ishape, utext)}, attrs, 13);
    ASSERT_TRUE(sf.ok() && ss.ok()) << sf.status() << ss.status();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::to_string(static_cast<int64_t>((*sf)[0].data<float>()[i])),
                (*ss)[0].strings()[static_cast<size_t>(i)])
          << "scatter trial " << trial;
    }
  }
  // An index out of range is the same error on both paths.
  auto bad = RunSingleNodeTensors("ScatterElements",
                                  {Floats({3}, {1, 2, 3}), Int64s({2}, {0, 3}), Floats({2}, {5, 6})}, {}, 13);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

TEST(ShapeOpsTest, TriluRunsMatchTheDefinition) {
  std::mt19937 rng(17);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t extremes[] = {kI64Min, kI64Max, kI64Min + 1, kI64Max - 1};
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<int64_t> shape = {pick(1, 3), pick(1, 6), pick(1, 6)};
    int64_t n = shape[0] * shape[1] * shape[2];
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
    int64_t k = trial % 10 == 0 ? extremes[trial / 10 % 4] : pick(-7, 7);
    bool upper = trial % 2 == 0;
    auto out =
        RunSingleNodeTensors("Trilu", {Floats(shape, v), Int64s({}, {k})}, {AttrInt("upper", upper)}, 14);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t e = 0; e < n; ++e) {
      int64_t i = (e / shape[2]) % shape[1], j = e % shape[2];
      __int128 diff = static_cast<__int128>(j) - i;
      bool keep = upper ? diff >= k : diff <= k;
      ASSERT_EQ((*out)[0].data<float>()[e], keep ? v[static_cast<size_t>(e)] : 0.f)
          << "trial " << trial << " k " << k << " element " << e;
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
