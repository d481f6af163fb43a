// Tests of the nn reference kernels (runner/reference/nn_*): the im2col
// convolution and the blocked matrix product against naive loops on random
// shapes (fixed seed), opset-dependent semantics, and error paths on
// malformed shapes and attributes (an error, never a crash).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
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



std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs one node `op` on the inputs (x0, x1...; an undefined tensor leaves
// that input out) at `opset`; returns all `num_outputs` outputs.
absl::StatusOr<std::vector<Tensor>> RunOpN(const std::string& op, const std::vector<Tensor>& inputs,
                                           std::vector<pb::AttributeProto> attrs, int64_t opset, int num_outputs) {
  return RunSingleNodeTensors(op, inputs, std::move(attrs), opset, num_outputs);
}

absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 22) {
  auto r = RunOpN(op, inputs, std::move(attrs), opset, 1);
  if (!r.ok()) return r.status();
  return (*r)[0];
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.size()); }

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

void ExpectInvalid(const absl::StatusOr<Tensor>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(fragment), std::string::npos) << r.status();
}

// --- Conv against direct loops ---

struct ConvCase {
  std::vector<int64_t> x_shape;  // [N, C, spatial...]
  int64_t m, group;
  std::vector<int64_t> kernel, strides, dilations, pads;
};

// Direct N-d convolution (zero padding), the obvious way.
std::vector<float> NaiveConv(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, std::vector<int64_t>* out_shape) {
  size_t r = c.kernel.size();
  int64_t n = c.x_shape[0], ch = c.x_shape[1], cg = ch / c.group, mg = c.m / c.group;
  std::vector<int64_t> in(c.x_shape.begin() + 2, c.x_shape.end()), out(r);
  for (size_t d = 0; d < r; ++d) {
    out[d] = (in[d] + c.pads[d] + c.pads[d + r] - c.dilations[d] * (c.kernel[d] - 1) - 1) / c.strides[d] + 1;
  }
  *out_shape = {n, c.m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  int64_t in_size = 1, out_size = 1, k_size = 1;
  for (size_t d = 0; d < r; ++d) in_size *= in[d], out_size *= out[d], k_size *= c.kernel[d];
  std::vector<float> y(static_cast<size_t>(n * c.m * out_size));
  std::vector<int64_t> opos(r), kpos(r);
  for (int64_t bi = 0; bi < n; ++bi) {
    for (int64_t m = 0; m < c.m; ++m) {
      int64_t g = m / mg;
      for (int64_t o = 0; o < out_size; ++o) {
        for (int64_t t = o, d = static_cast<int64_t>(r) - 1; d >= 0; --d) opos[static_cast<size_t>(d)] = t % out[static_cast<size_t>(d)], t /= out[static_cast<size_t>(d)];
        double acc = b.empty() ? 0 : b[static_cast<size_t>(m)];
        for (int64_t ci = 0; ci < cg; ++ci) {
          for (int64_t k = 0; k < k_size; ++k) {
            for (int64_t t = k, d = static_cast<int64_t>(r) - 1; d >= 0; --d) kpos[static_cast<size_t>(d)] = t % c.kernel[static_cast<size_t>(d)], t /= c.kernel[static_cast<size_t>(d)];
            int64_t idx = 0;
            bool inside = true;
            for (size_t d = 0; d < r; ++d) {
              int64_t p = opos[d] * c.strides[d] - c.pads[d] + kpos[d] * c.dilations[d];
              inside = inside && p >= 0 && p < in[d];
              idx = idx * in[d] + p;
            }
            if (!inside) continue;
            float xv = x[static_cast<size_t>((bi * ch + g * cg + ci) * in_size + idx)];
            float wv = w[static_cast<size_t>((m * cg + ci) * k_size + k)];
            acc += static_cast<double>(xv) * wv;
          }
        }
        y[static_cast<size_t>((bi * c.m + m) * out_size + o)] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

TEST(NnConvTest, MatchesDirectLoopsOnRandomShapes) {
  std::mt19937 rng(1234);
  std::vector<ConvCase> cases = {
      {{1, 3, 9}, 4, 1, {3}, {2}, {1}, {1, 0}},
      {{2, 4, 7, 6}, 6, 2, {3, 2}, {1, 2}, {2, 1}, {1, 0, 2, 1}},
      {{1, 6, 5, 5}, 6, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},  // depthwise
      {{1, 8, 4, 4}, 16, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // pointwise fast path
      {{1, 2, 4, 5, 3}, 3, 1, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {0, 1, 1, 1, 0, 1}},
  };
  for (const ConvCase& c : cases) {
    std::vector<int64_t> w_shape = {c.m, c.x_shape[1] / c.group};
    w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
    int64_t xn = 1, wn = 1;
    for (int64_t d : c.x_shape) xn *= d;
    for (int64_t d : w_shape) wn *= d;
    std::vector<float> x = Random(xn, rng), w = Random(wn, rng), b = Random(c.m, rng);
    std::vector<int64_t> want_shape;
    std::vector<float> want = NaiveConv(c, x, w, b, &want_shape);
    absl::StatusOr<Tensor> y = RunOp("Conv", {Floats(c.x_shape, x), Floats(w_shape, w), Floats({c.m}, b)},
                                     {AttrInt("group", c.group), AttrInts("strides", c.strides),
                                      AttrInts("dilations", c.dilations), AttrInts("pads", c.pads)});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->shape(), want_shape);
    ExpectNear(Values(*y), want);
  }
}

TEST(NnConvTest, AutoPadSameSplitsPaddingByMode) {
  // 1x1x4 input, kernel 2: one pad; SAME_UPPER puts it at the end.
  Tensor x = Floats({1, 1, 4}, {1, 2, 3, 4}), w = Floats({1, 1, 2}, {1, 10});
  absl::StatusOr<Tensor> upper = RunOp("Conv", {x, w}, {AttrString("auto_pad", "SAME_UPPER")});
  absl::StatusOr<Tensor> lower = RunOp("Conv", {x, w}, {AttrString("auto_pad", "SAME_LOWER")});
  ASSERT_TRUE(upper.ok() && lower.ok());
  ExpectNear(Values(*upper), {21, 32, 43, 4});
  ExpectNear(Values(*lower), {10, 21, 32, 43});
}

TEST(NnConvTest, MalformedShapesAndAttributesAreErrors) {
  Tensor x = Floats({1, 4, 5, 5}, std::vector<float>(100, 1.0f));
  ExpectInvalid(RunOp("Conv", {x, Floats({2, 3, 3, 3}, std::vector<float>(54, 1.0f))}), "group");
  ExpectInvalid(RunOp("Conv", {x, Floats({2, 4, 3}, std::vector<float>(24, 1.0f))}), "rank");
  Tensor w = Floats({2, 4, 3, 3}, std::vector<float>(72, 1.0f));
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInts("strides", {1, 1, 1})}), "strides");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInts("pads", {-1, 0, 0, 0})}), "pads");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInts("kernel_shape", {2, 2})}), "kernel_shape");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInts("dilations", {4, 4})}), "does not fit");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInts("dilations", {int64_t{1} << 62, 1})}), "overflow");
  ExpectInvalid(RunOp("Conv", {x, w, Floats({3}, {1, 2, 3})}), "B");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrInt("group", 0)}), "group");
  ExpectInvalid(RunOp("Conv", {x, w}, {AttrString("auto_pad", "SAME")}), "auto_pad");
}

TEST(NnConvTest, ConvTransposeOutputPaddingAndOutputShape) {
  // x [1,1,2], w [1,1,2], stride 2: y = [x0*w0, x0*w1, x1*w0, x1*w1] (+ output_padding zeros).
  Tensor x = Floats({1, 1, 2}, {1, 2}), w = Floats({1, 1, 2}, {3, 5});
  absl::StatusOr<Tensor> y = RunOp("ConvTranspose", {x, w}, {AttrInts("strides", {2}), AttrInts("output_padding", {1})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 1, 5}));
  ExpectNear(Values(*y), {3, 5, 6, 10, 0});
  absl::StatusOr<Tensor> shaped = RunOp("ConvTranspose", {x, w}, {AttrInts("strides", {2}), AttrInts("output_shape", {3})});
  ASSERT_TRUE(shaped.ok()) << shaped.status();
  EXPECT_EQ(shaped->shape(), (std::vector<int64_t>{1, 1, 3}));
  ExpectInvalid(RunOp("ConvTranspose", {x, w}, {AttrInts("pads", {3, 3})}), "negative");
  ExpectInvalid(RunOp("ConvTranspose", {x, Floats({2, 1, 2}, {1, 2, 3, 4})}), "group");
}

// --- Matrix products ---

TEST(NnMatMulTest, BatchBroadcastingMatchesLoops) {
  std::mt19937 rng(7);
  std::vector<float> a = Random(2 * 1 * 3 * 4, rng), b = Random(5 * 4 * 6, rng);
  absl::StatusOr<Tensor> y = RunOp("MatMul", {Floats({2, 1, 3, 4}, a), Floats({5, 4, 6}, b)}, {}, 13);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{2, 5, 3, 6}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 5; ++j) {
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 6; ++c) {
          double s = 0;
          for (int k = 0; k < 4; ++k) s += static_cast<double>(a[static_cast<size_t>((i * 3 + r) * 4 + k)]) * b[static_cast<size_t>((j * 4 + k) * 6 + c)];
          want.push_back(static_cast<float>(s));
        }
      }
    }
  }
  ExpectNear(Values(*y), want);
}

TEST(NnMatMulTest, OneDimensionalOperandsDropTheirPromotedDims) {
  absl::StatusOr<Tensor> dot = RunOp("MatMul", {Floats({3}, {1, 2, 3}), Floats({3}, {4, 5, 6})});
  ASSERT_TRUE(dot.ok()) << dot.status();
  EXPECT_EQ(dot->rank(), 0);
  ExpectNear(Values(*dot), {32});
  absl::StatusOr<Tensor> mv = RunOp("MatMul", {Floats({2, 3}, {1, 0, 0, 0, 1, 0}), Floats({3}, {4, 5, 6})});
  ASSERT_TRUE(mv.ok()) << mv.status();
  EXPECT_EQ(mv->shape(), (std::vector<int64_t>{2}));
  ExpectInvalid(RunOp("MatMul", {Floats({2, 3}, std::vector<float>(6)), Floats({2, 3}, std::vector<float>(6))}),
                "inner dims");
}

TEST(NnMatMulTest, LargeProductMatchesLoops) {
  // Sizes that exercise the 4-row blocks, their remainder, and several column blocks.
  std::mt19937 rng(99);
  int64_t m = 7, k = 33, n = 1030;
  std::vector<float> a = Random(m * k, rng), b = Random(k * n, rng);
  absl::StatusOr<Tensor> y = RunOp("MatMul", {Floats({m, k}, a), Floats({k, n}, b)});
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> want(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += static_cast<double>(a[static_cast<size_t>(i * k + t)]) * b[static_cast<size_t>(t * n + j)];
      want[static_cast<size_t>(i * n + j)] = static_cast<float>(s);
    }
  }
  ExpectNear(Values(*y), want);
}

TEST(NnGemmTest, TransposesScalesAndBroadcastsC) {
  // A^T [2x3]^T = [3x2]; B^T [2x2]; C broadcast row.
  Tensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6}), b = Floats({2, 2}, {1, 0, 0, 1}), c = Floats({2}, {10, 20});
  absl::StatusOr<Tensor> y = RunOp("Gemm", {a, b, c},
                                   {AttrInt("transA", 1), AttrInt("transB", 1), AttrFloat("alpha", 2), AttrFloat("beta", 0.5f)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{3, 2}));
  ExpectNear(Values(*y), {2 + 5, 8 + 10, 4 + 5, 10 + 10, 6 + 5, 12 + 10});
  ExpectInvalid(RunOp("Gemm", {a, b}), "inner dims");
  ExpectInvalid(RunOp("Gemm", {a, Floats({3, 2}, std::vector<float>(6)), Floats({3}, {1, 2, 3})}), "broadcast");
}

TEST(NnGemmTest, IntegerMatMulWrapsLikeTheNarrowType) {
  Tensor a = MakeTensor<int32_t>(pb::kInt32, {1, 2}, {0x40000000, 0x40000000});
  Tensor b = MakeTensor<int32_t>(pb::kInt32, {2, 1}, {2, 2});
  absl::StatusOr<Tensor> y = RunOp("MatMul", {a, b});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->data<int32_t>()[0], 0);  // 2^32 wraps to 0
}

TEST(NnGemmTest, MatMulIntegerSubtractsPerRowZeroPoints) {
  Tensor a = MakeTensor<uint8_t>(pb::kUint8, {2, 2}, {11, 12, 23, 24});
  Tensor b = MakeTensor<uint8_t>(pb::kUint8, {2, 1}, {1, 1});
  Tensor azp = MakeTensor<uint8_t>(pb::kUint8, {2}, {10, 20});
  absl::StatusOr<Tensor> y = RunOp("MatMulInteger", {a, b, azp}, {}, 10);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), pb::kInt32);
  EXPECT_EQ(y->data<int32_t>()[0], 3);
  EXPECT_EQ(y->data<int32_t>()[1], 7);
  ExpectInvalid(RunOp("MatMulInteger", {a, b, MakeTensor<uint8_t>(pb::kUint8, {3}, {1, 2, 3})}, {}, 10), "zero point");
}

TEST(NnGemmTest, DetOfBatchedMatrices) {
  absl::StatusOr<Tensor> y = RunOp("Det", {Floats({2, 2, 2}, {1, 2, 3, 4, 2, 4, 1, 2})}, {}, 11);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values(*y), {-2, 0});
  ExpectInvalid(RunOp("Det", {Floats({2, 3}, std::vector<float>(6))}, {}, 11), "square");
}

// --- Pooling ---

TEST(NnPoolTest, MaxPoolIndicesInBothStorageOrders) {
  Tensor x = Floats({1, 1, 2, 3}, {1, 9, 2, 3, 4, 8});
  for (int order : {0, 1}) {
    auto r = RunOpN("MaxPool", {x}, {AttrInts("kernel_shape", {2, 2}), AttrInt("storage_order", order)}, 12, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Values((*r)[0]), {9, 9});
    const int64_t* idx = (*r)[1].data<int64_t>();
    // 9 sits at (0, 1): row-major 1, column-major 0 + 1 * 2 = 2.
    EXPECT_EQ(idx[0], order == 0 ? 1 : 2);
    EXPECT_EQ(idx[1], order == 0 ? 1 : 2);
  }
}

TEST(NnPoolTest, CeilModeAndCountIncludePad) {
  Tensor x = Floats({1, 1, 5}, {1, 2, 3, 4, 5});
  absl::StatusOr<Tensor> ceil = RunOp("MaxPool", {x}, {AttrInts("kernel_shape", {2}), AttrInts("strides", {2}), AttrInt("ceil_mode", 1)});
  ASSERT_TRUE(ceil.ok()) << ceil.status();
  ExpectNear(Values(*ceil), {2, 4, 5});
  absl::StatusOr<Tensor> avg = RunOp("AveragePool", {x}, {AttrInts("kernel_shape", {3}), AttrInts("pads", {1, 1})});
  absl::StatusOr<Tensor> avg_pad = RunOp("AveragePool", {x}, {AttrInts("kernel_shape", {3}), AttrInts("pads", {1, 1}),
                                                              AttrInt("count_include_pad", 1)});
  ASSERT_TRUE(avg.ok() && avg_pad.ok());
  ExpectNear(Values(*avg), {1.5f, 2, 3, 4, 4.5f});
  ExpectNear(Values(*avg_pad), {1, 2, 3, 4, 3});
  ExpectInvalid(RunOp("MaxPool", {x}), "kernel_shape");
  ExpectInvalid(RunOp("MaxPool", {x}, {AttrInts("kernel_shape", {2, 2})}), "kernel_shape");
  ExpectInvalid(RunOp("LpPool", {x}, {AttrInts("kernel_shape", {2}), AttrInt("p", 0)}), "p must be positive");
}

TEST(NnPoolTest, GlobalPoolsReduceEverySpatialDim) {
  Tensor x = Floats({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4});
  absl::StatusOr<Tensor> avg = RunOp("GlobalAveragePool", {x});
  absl::StatusOr<Tensor> mx = RunOp("GlobalMaxPool", {x});
  absl::StatusOr<Tensor> lp = RunOp("GlobalLpPool", {x}, {AttrInt("p", 1)});
  ASSERT_TRUE(avg.ok() && mx.ok() && lp.ok());
  EXPECT_EQ(avg->shape(), (std::vector<int64_t>{1, 2, 1, 1}));
  ExpectNear(Values(*avg), {2.5f, -2.5f});
  ExpectNear(Values(*mx), {4, -1});
  ExpectNear(Values(*lp), {10, 10});
}

TEST(NnPoolTest, MaxUnpoolRejectsIndicesOutsideTheOutput) {
  Tensor x = Floats({1, 1, 1, 1}, {5});
  absl::StatusOr<Tensor> y = RunOp("MaxUnpool", {x, Int64s({1, 1, 1, 1}, {3})}, {AttrInts("kernel_shape", {2, 2})});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values(*y), {0, 0, 0, 5});
  ExpectInvalid(RunOp("MaxUnpool", {x, Int64s({1, 1, 1, 1}, {4})}, {AttrInts("kernel_shape", {2, 2})}), "outside");
}

// --- Softmax family and normalization ---

TEST(NnSoftmaxTest, AxisSemanticsChangeAtOpset13) {
  // [1, 2, 2]: opset 11 with axis 1 normalizes over the 4 flattened values;
  // opset 13 over the 2 values of axis 1 only.
  Tensor x = Floats({1, 2, 2}, {0, 0, 0, 0});
  absl::StatusOr<Tensor> old = RunOp("Softmax", {x}, {AttrInt("axis", 1)}, 11);
  absl::StatusOr<Tensor> now = RunOp("Softmax", {x}, {AttrInt("axis", 1)}, 13);
  ASSERT_TRUE(old.ok() && now.ok());
  ExpectNear(Values(*old), {0.25f, 0.25f, 0.25f, 0.25f});
  ExpectNear(Values(*now), {0.5f, 0.5f, 0.5f, 0.5f});
  ASSERT_FALSE(RunOp("Softmax", {x}, {AttrInt("axis", 3)}, 13).ok());
  absl::StatusOr<Tensor> hard = RunOp("Hardmax", {Floats({3}, {1, 3, 3})}, {}, 13);
  ASSERT_TRUE(hard.ok());
  ExpectNear(Values(*hard), {0, 1, 0});  // first maximum wins
}

// Hardmax along the first, middle and last axis of [3, 4, 5] (rows spaced
// apart advance together): the first largest element wins, ties and a NaN
// (never larger; chosen only in first place) included.
TEST(NnSoftmaxTest, HardmaxPicksTheFirstLargestAlongAnyAxis) {
  const std::vector<int64_t> dims = {3, 4, 5};
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 5);  // many ties
  x[0] = NAN;
  x[17] = NAN;
  for (int64_t axis = 0; axis < 3; ++axis) {
    absl::StatusOr<Tensor> y = RunOp("Hardmax", {Floats(dims, x)}, {AttrInt("axis", axis)}, 13);
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<float> got = Values(*y);
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < 3; ++d) inner *= dims[static_cast<size_t>(d)];
    const int64_t n = dims[static_cast<size_t>(axis)];
    for (int64_t e = 0; e < 60; ++e) {
      const int64_t k = (e / inner) % n;
      const int64_t first = e - k * inner;  // the row's element at k = 0
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        if (x[static_cast<size_t>(first + j * inner)] > x[static_cast<size_t>(first + best * inner)])
          best = j;
      }
      EXPECT_EQ(got[static_cast<size_t>(e)], k == best ? 1.f : 0.f) << "axis " << axis << " element " << e;
    }
  }
}

TEST(NnNormTest, BatchNormTrainingModeOutputsRunningStatistics) {
  Tensor x = Floats({2, 1, 1}, {1, 3});
  Tensor one = Floats({1}, {1}), zero = Floats({1}, {0});
  auto r = RunOpN("BatchNormalization", {x, one, zero, zero, one},
                  {AttrInt("training_mode", 1), AttrFloat("momentum", 0.5f), AttrFloat("epsilon", 0)}, 15, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {-1, 1});
  ExpectNear(Values((*r)[1]), {1});  // 0 * 0.5 + 2 * 0.5
  ExpectNear(Values((*r)[2]), {1});  // 1 * 0.5 + 1 * 0.5
  ExpectInvalid(RunOp("BatchNormalization", {x, Floats({2}, {1, 1}), zero, zero, one}, {}, 15), "BatchNormalization");
}

TEST(NnNormTest, LayerNormalizationStatisticsOutputs) {
  auto r = RunOpN("LayerNormalization", {Floats({2, 2}, {1, 3, 2, 4}), Floats({2}, {1, 1})}, {AttrFloat("epsilon", 0)},
                  17, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {-1, 1, -1, 1});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{2, 1}));
  ExpectNear(Values((*r)[1]), {2, 3});
  ExpectNear(Values((*r)[2]), {1, 1});
  ExpectInvalid(RunOp("LayerNormalization", {Floats({2, 2}, {1, 2, 3, 4}), Floats({3}, {1, 1, 1})}, {}, 17), "scale");
  ASSERT_FALSE(RunOp("LayerNormalization", {Floats({2, 2}, {1, 2, 3, 4}), Floats({2}, {1, 1})}, {AttrInt("axis", 2)}, 17).ok());
}

TEST(NnNormTest, GroupNormalizationChecksGroups) {
  Tensor x = Floats({1, 4, 1}, {1, 2, 3, 4});
  absl::StatusOr<Tensor> y = RunOp("GroupNormalization", {x, Floats({4}, {1, 1, 1, 1}), Floats({4}, {0, 0, 0, 0})},
                                   {AttrInt("num_groups", 2), AttrFloat("epsilon", 0)}, 21);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values(*y), {-1, 1, -1, 1});
  ExpectInvalid(RunOp("GroupNormalization", {x, Floats({4}, {1, 1, 1, 1}), Floats({4}, {0, 0, 0, 0})},
                      {AttrInt("num_groups", 3)}, 21),
                "num_groups");
}

// --- Losses, recurrent, attention, misc ---

TEST(NnLossTest, NllLossIgnoresTheIgnoreIndexAndChecksTargets) {
  Tensor logp = Floats({2, 2}, {-1, -2, -3, -4});
  absl::StatusOr<Tensor> y = RunOp("NegativeLogLikelihoodLoss", {logp, Int64s({2}, {1, 0})}, {AttrInt("ignore_index", 0)}, 13);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values(*y), {2});
  ExpectInvalid(RunOp("NegativeLogLikelihoodLoss", {logp, Int64s({2}, {1, 2})}, {}, 13), "outside");
  ExpectInvalid(RunOp("NegativeLogLikelihoodLoss", {logp, Int64s({3}, {1, 0, 0})}, {}, 13), "target");
}

TEST(NnRnnTest, GruWithZeroWeightsKeepsHalfTheState) {
  // All weights zero: z = r = 0.5, candidate = tanh(0) = 0, so h' = h / 2.
  Tensor x = Floats({1, 1, 1}, {7}), w = Floats({1, 3, 1}, {0, 0, 0}), r = Floats({1, 3, 1}, {0, 0, 0});
  absl::StatusOr<Tensor> y = RunOp("GRU", {x, w, r, Tensor(), Tensor(), Floats({1, 1, 1}, {4})}, {AttrInt("hidden_size", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 1, 1, 1}));
  ExpectNear(Values(*y), {2});
  ExpectInvalid(RunOp("GRU", {x, Floats({1, 2, 1}, {0, 0}), r}, {AttrInt("hidden_size", 1)}), "W");
  ExpectInvalid(RunOp("LSTM", {x, w, r}, {AttrInt("hidden_size", 1), AttrString("direction", "sideways")}), "direction");
}

TEST(NnAttentionTest, FullyMaskedRowsAttendToNothing) {
  // One head, 2 queries, 2 keys; the bool mask hides every key from query 0.
  Tensor q = Floats({1, 1, 2, 1}, {1, 1}), k = Floats({1, 1, 2, 1}, {1, 1}), v = Floats({1, 1, 2, 1}, {2, 4});
  Tensor mask = MakeTensor<bool>(pb::kBool, {2, 2}, {false, false, true, true});
  absl::StatusOr<Tensor> y = RunOp("Attention", {q, k, v, mask}, {}, 23);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values(*y), {0, 3});
  ExpectInvalid(RunOp("Attention", {Floats({1, 2, 4}, std::vector<float>(8)), Floats({1, 2, 4}, std::vector<float>(8)),
                                    Floats({1, 2, 4}, std::vector<float>(8))},
                      {}, 23),
                "num_heads");
}

// FlexAttention: four query heads over two kv heads (head h reads kv head
// h / 2), score_mod doubling the scores and prob_mod halving the
// probabilities, against loops in double.
TEST(NnAttentionTest, FlexAttentionAppliesItsGraphsPerQueryHead) {
  const int64_t hq = 4, hkv = 2, l = 3, s = 5, e = 2, ev = 3;
  std::mt19937 rng(7);
  std::vector<float> q = Random(hq * l * e, rng), k = Random(hkv * s * e, rng), v = Random(hkv * s * ev, rng);
  auto scaling = [](const std::string& name, const std::string& in, float factor) {
    return GraphBuilder(name)
        .Input(in, pb::kFloat)
        .Initializer(InitializerFrom("f", Floats({}, {factor})))
        .Node("Mul", {in, "f"}, {"out"})
        .Output("out", pb::kFloat)
        .Build();
  };
  std::vector<pb::AttributeProto> attrs = {AttrGraph("score_mod", scaling("sm", "scores", 2.0f)),
                                           AttrGraph("prob_mod", scaling("pm", "probs", 0.5f))};
  auto out = RunSingleNode("FlexAttention",
                           {Floats({1, hq, l, e}, q), Floats({1, hkv, s, e}, k), Floats({1, hkv, s, ev}, v)},
                           attrs, 26, 1, "ai.onnx.preview");
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, hq, l, ev}));
  std::vector<float> want;
  for (int64_t h = 0; h < hq; ++h) {
    const int64_t g = h / (hq / hkv);
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> p(static_cast<size_t>(s));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < e; ++c) dot += q[(h * l + i) * e + c] * k[(g * s + j) * e + c];
        p[j] = 2.0 * dot / std::sqrt(static_cast<double>(e));
        mx = std::max(mx, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) acc += 0.5 * p[j] / sum * v[(g * s + j) * ev + c];
        want.push_back(static_cast<float>(acc));
      }
    }
  }
  ExpectNear(Values(y), want, 1e-5f);

  // A mod graph must keep the scores' shape; heads must group evenly.
  pb::GraphProto reducing = GraphBuilder("r")
                                .Input("scores", pb::kFloat)
                                .Node("ReduceSum", {"scores"}, {"out"})
                                .Output("out", pb::kFloat)
                                .Build();
  auto bad = RunSingleNode("FlexAttention",
                           {Floats({1, hq, l, e}, q), Floats({1, hkv, s, e}, k), Floats({1, hkv, s, ev}, v)},
                           {AttrGraph("score_mod", reducing)}, 26, 1, "ai.onnx.preview");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("score_mod must give"), absl::string_view::npos) << bad.status();
  auto uneven = RunSingleNode("FlexAttention",
                              {Floats({1, 3, l, e}, std::vector<float>(3 * l * e)), Floats({1, hkv, s, e}, k),
                               Floats({1, hkv, s, ev}, v)},
                              {}, 26, 1, "ai.onnx.preview");
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("multiple of kv heads"), absl::string_view::npos)
      << uneven.status();
}

TEST(NnEinsumTest, ExplicitImplicitDiagonalAndEllipsis) {
  Tensor a = Floats({2, 2}, {1, 2, 3, 4});
  absl::StatusOr<Tensor> t = RunOp("Einsum", {a}, {AttrString("equation", "ij->ji")}, 12);
  absl::StatusOr<Tensor> trace = RunOp("Einsum", {a}, {AttrString("equation", "ii")}, 12);
  absl::StatusOr<Tensor> mm = RunOp("Einsum", {a, a}, {AttrString("equation", "...ij,jk")}, 12);
  ASSERT_TRUE(t.ok() && trace.ok() && mm.ok()) << t.status() << trace.status() << mm.status();
  ExpectNear(Values(*t), {1, 3, 2, 4});
  ExpectNear(Values(*trace), {5});
  ExpectNear(Values(*mm), {7, 10, 15, 22});
  ASSERT_FALSE(RunOp("Einsum", {a}, {AttrString("equation", "i.j")}, 12).ok());
  ExpectInvalid(RunOp("Einsum", {a, Floats({3}, {1, 2, 3})}, {AttrString("equation", "ij,j->i")}, 12), "disagree");
}

TEST(NnNmsTest, SuppressesOverlapsPerClass) {
  Tensor boxes = Floats({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = Floats({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  absl::StatusOr<Tensor> y = RunOp("NonMaxSuppression", {boxes, scores, Int64s({1}, {3}), Floats({1}, {0.5f})}, {}, 11);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{2, 3}));
  std::vector<int64_t> got(y->data<int64_t>(), y->data<int64_t>() + y->size());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

// RoiAlign as the operator defines it, one output element at a time:
// bilinear samples on a grid per bin (zero beyond one pixel outside, clamped
// to the border), averaged, or in max mode the largest weighted corner.
std::vector<double> NaiveRoiAlign(const std::vector<float>& x, int64_t c, int64_t h, int64_t w,
                                  const std::vector<float>& rois, const std::vector<int64_t>& batch,
                                  int64_t oh, int64_t ow, int64_t ratio, double scale, bool half_pixel,
                                  bool max_mode) {
  const int64_t r = static_cast<int64_t>(batch.size());
  std::vector<double> y;
  for (int64_t ri = 0; ri < r; ++ri) {
    const double off = half_pixel ? 0.5 : 0.0;
    const float* roi = rois.data() + ri * 4;
    const double x0 = roi[0] * scale - off, y0 = roi[1] * scale - off;
    double rw = roi[2] * scale - off - x0, rh = roi[3] * scale - off - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bh));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bw));
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* p = x.data() + (batch[static_cast<size_t>(ri)] * c + ch) * h * w;
      for (int64_t i = 0; i < oh * ow; ++i) {
        double acc = 0;
        bool first = true;
        for (int64_t s = 0; s < gh * gw; ++s) {
          double yy = y0 + static_cast<double>(i / ow) * bh +
                      (static_cast<double>(s / gw) + 0.5) * bh / static_cast<double>(gh);
          double xx = x0 + static_cast<double>(i % ow) * bw +
                      (static_cast<double>(s % gw) + 0.5) * bw / static_cast<double>(gw);
          double v = 0;
          if (!(yy < -1.0 || yy > static_cast<double>(h) || xx < -1.0 || xx > static_cast<double>(w))) {
            yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
            int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh = yl + 1, xh = xl + 1;
            if (yl >= h - 1) yh = yl = h - 1, yy = static_cast<double>(yl);
            if (xl >= w - 1) xh = xl = w - 1, xx = static_cast<double>(xl);
            const double ly = yy - static_cast<double>(yl), lx = xx - static_cast<double>(xl);
            const double t[4] = {(1 - ly) * (1 - lx) * p[yl * w + xl], (1 - ly) * lx * p[yl * w + xh],
                                 ly * (1 - lx) * p[yh * w + xl], ly * lx * p[yh * w + xh]};
            v = max_mode ? std::max(std::max(t[0], t[1]), std::max(t[2], t[3])) : t[0] + t[1] + t[2] + t[3];
          }
          acc = max_mode ? (first ? v : std::max(acc, v)) : acc + v;
          first = false;
        }
        y.push_back(max_mode ? acc : acc / static_cast<double>(std::max<int64_t>(gh * gw, 1)));
      }
    }
  }
  return y;
}

TEST(NnRoiAlignTest, MatchesTheDefinitionAtAnyThreadCount) {
  // Many rois (split over the threads), some beyond the image, tiny and
  // inverted ones, two images, both modes, both coordinate transforms,
  // fixed and adaptive grids.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const int64_t n = 2, c = 24, h = 13, w = 17, r = 90;
  std::vector<float> x = Random(n * c * h * w, rng), rois;
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < r; ++i) {
    const float x0 = u(rng) * 80 - 10, y0 = u(rng) * 60 - 10, bw = u(rng) * 50, bh = u(rng) * 40;
    rois.insert(rois.end(), {x0, y0, i % 11 == 3 ? x0 - bw : x0 + bw, y0 + bh});
    batch.push_back(i % n);
  }
  for (int mode = 0; mode < 8; ++mode) {
    const bool max_mode = mode & 1, half_pixel = mode & 2;
    const int64_t ratio = mode & 4 ? 2 : 0;
    SCOPED_TRACE("max " + std::to_string(max_mode) + ", half_pixel " + std::to_string(half_pixel) +
                 ", ratio " + std::to_string(ratio));
    GraphBuilder g("g");
    g.Input("x").Input("rois").Input("b", pb::kInt64);
    g.Node("RoiAlign", {"x", "rois", "b"}, {"y"},
           {AttrString("mode", max_mode ? "max" : "avg"),
            AttrString("coordinate_transformation_mode", half_pixel ? "half_pixel" : "output_half_pixel"),
            AttrInt("output_height", 5), AttrInt("output_width", 4), AttrInt("sampling_ratio", ratio),
            AttrFloat("spatial_scale", 0.25f)})
        .Output("y");
    Feeds feeds = {{"x", Floats({n, c, h, w}, x)}, {"rois", Floats({r, 4}, rois)}, {"b", Int64s({r}, batch)}};
    const std::vector<double> want =
        NaiveRoiAlign(x, c, h, w, rois, batch, 5, 4, ratio, 0.25, half_pixel, max_mode);
    for (int threads : {1, 2}) {
      auto out = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 16, threads);
      ASSERT_TRUE(out.ok()) << out.status();
      const Tensor& y = (*out)[0].tensor();
      ASSERT_EQ(y.shape(), (std::vector<int64_t>{r, c, 5, 4}));
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(y.data<float>()[i], static_cast<float>(want[i]))
            << "element " << i << ", " << threads << " threads";
      }
    }
  }
  // The first unusable roi (in roi order) names the error.
  batch[40] = 2;
  batch[70] = -1;
  GraphBuilder g("g");
  g.Input("x").Input("rois").Input("b", pb::kInt64);
  g.Node("RoiAlign", {"x", "rois", "b"}, {"y"}, {AttrInt("output_height", 2), AttrInt("output_width", 2)})
      .Output("y");
  auto out = RunGraphOn(
      runner::Backend::kReference, g.Build(),
      {{"x", Floats({n, c, h, w}, x)}, {"rois", Floats({r, 4}, rois)}, {"b", Int64s({r}, batch)}}, 16, 2);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("batch index 2 is outside [0, 2)"), std::string::npos)
      << out.status();
}

TEST(NnNmsTest, SearchOfKeptBoxesMatchesTheGreedyScan) {
  // Random boxes (clusters, spread classes as batched detectors offset them,
  // degenerate and inverted boxes, NaN and infinite coordinates), both box
  // formats, several thresholds: the kernel's selection is the greedy scan's.
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + trial * 7 % 300, classes = 1 + trial % 3;
    const bool center = trial % 4 == 3;
    std::vector<float> boxes(static_cast<size_t>(n * 4)), scores(static_cast<size_t>(classes * n));
    for (int64_t i = 0; i < n; ++i) {
      float offset = static_cast<float>(i % 5) * 10.f;  // five far-apart groups
      float x = offset + u(rng) * 3, y = offset + u(rng) * 3, w = u(rng) * 2, h = u(rng) * 2;
      float* b = boxes.data() + i * 4;
      if (center) {
        b[0] = x, b[1] = y, b[2] = i % 17 == 0 ? -w : w, b[3] = h;
      } else {
        b[0] = y, b[1] = x, b[2] = y + h, b[3] = x + w;
      }
      if (i % 37 == 5) b[1] = std::numeric_limits<float>::quiet_NaN();
      if (i % 41 == 7) b[3] = std::numeric_limits<float>::infinity();
    }
    for (float& s : scores) s = static_cast<float>(static_cast<int>(u(rng) * 20)) / 20;  // ties
    const float iou = trial % 3 == 0 ? 0.f : trial % 3 == 1 ? 0.3f : 0.7f;
    const int64_t max_out = trial % 5 == 0 ? 5 : 1000;
    GraphBuilder g("g");
    g.Input("b").Input("s").Input("m", pb::kInt64).Input("t");
    g.Node("NonMaxSuppression", {"b", "s", "m", "t"}, {"y"}, {AttrInt("center_point_box", center)})
        .Output("y", pb::kInt64);
    Feeds feeds = {{"b", Floats({1, n, 4}, boxes)},
                   {"s", Floats({1, classes, n}, scores)},
                   {"m", Int64s({1}, {max_out})},
                   {"t", Floats({1}, {iou})}};
    auto out = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 11);
    ASSERT_TRUE(out.ok()) << out.status();
    // The greedy scan, as the ONNX reference implementation defines it.
    struct B {
      double x0, y0, x1, y1;
    };
    std::vector<B> bx;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = boxes.data() + i * 4;
      double a0 = p[0], a1 = p[1], a2 = p[2], a3 = p[3];
      bx.push_back(center ? B{a0 - a2 / 2, a1 - a3 / 2, a0 + a2 / 2, a1 + a3 / 2}
                          : B{std::min(a1, a3), std::min(a0, a2), std::max(a1, a3), std::max(a0, a2)});
    }
    auto suppresses = [&](const B& a, const B& b) {
      double ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
      double iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
      if (ix1 <= ix0 || iy1 <= iy0) return false;
      double inter = (ix1 - ix0) * (iy1 - iy0);
      double aa = (a.x1 - a.x0) * (a.y1 - a.y0), ab = (b.x1 - b.x0) * (b.y1 - b.y0), uni = aa + ab - inter;
      if (inter <= 0 || aa <= 0 || ab <= 0 || uni <= 0) return false;
      return inter / uni > static_cast<double>(iou);
    };
    std::vector<int64_t> expected;
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const float* s = scores.data() + c * n;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t z) { return s[a] > s[z]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = std::none_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(k)]);
        });
        if (!keep) continue;
        kept.push_back(i);
        expected.insert(expected.end(), {0, c, i});
      }
    }
    const runner::Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.size(), static_cast<int64_t>(expected.size())) << "trial " << trial;
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(y.data<int64_t>()[i], expected[i]) << "trial " << trial << " at " << i;
    }
  }
}

// RMSNormalization's Y has the scale's type (V), not X's (T).
TEST(NnNormTest, RmsNormalizationOutputHasTheScaleType) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 4}})
                         .Input("s", pb::kFloat, {{4}})
                         .Node("Cast", {"s"}, {"sh"}, {AttrInt("to", pb::kFloat16)})
                         .Node("RMSNormalization", {"x", "sh"}, {"y"})
                         .Output("y", pb::kFloat16)
                         .Build();
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    auto out = RunGraphOn(backend, g, {{"x", RandomFloats({2, 4}, 1)}, {"s", RandomFloats({4}, 2)}}, 23);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*out)[0].is_tensor());
    EXPECT_EQ((*out)[0].tensor().dtype(), pb::kFloat16);
  }
}

}  // namespace
}  // namespace onnxkit::testing
