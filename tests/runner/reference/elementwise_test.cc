// Tests of the elementwise reference kernels (runner/reference/elementwise_*):
// error paths on malformed inputs and attributes, and numerics the ONNX
// backend suites do not cover (wrapping integers, legacy broadcasting,
// float8/int4 conversions, string formatting).
#include "runner/reference/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/reference/float_types.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;



// Runs one node `op` on the given inputs (named x0, x1...; an undefined
// tensor leaves that input out) at `opset`; returns output 0.
absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 21) {
  absl::StatusOr<std::vector<Tensor>> out = RunSingleNodeTensors(op, inputs, std::move(attrs), opset);
  if (!out.ok()) return out.status();
  return (*out)[0];
}


std::vector<uint8_t> Bytes(const Tensor& t) {
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

// --- Binary arithmetic ---

TEST(ElementwiseArithTest, IncompatibleShapesAreAnError) {
  absl::StatusOr<Tensor> y = RunOp("Add", {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Floats({4}, {1, 2, 3, 4})});
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("[2, 3]"), absl::string_view::npos) << y.status();
}

TEST(ElementwiseArithTest, MismatchedTypesAreAnError) {
  absl::StatusOr<Tensor> y = RunOp("Mul", {Floats({1}, {1}), Int32s({1}, {1})});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseArithTest, IntegerArithmeticWraps) {
  const int32_t max = std::numeric_limits<int32_t>::max(), min = std::numeric_limits<int32_t>::min();
  absl::StatusOr<Tensor> sum = RunOp("Add", {Int32s({2}, {max, min}), Int32s({2}, {1, -1})});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<int32_t>(*sum), (std::vector<int32_t>{min, max}));
  absl::StatusOr<Tensor> quotient = RunOp("Div", {Int32s({3}, {min, 7, -7}), Int32s({3}, {-1, 2, 2})});
  ASSERT_TRUE(quotient.ok()) << quotient.status();
  EXPECT_EQ(Values<int32_t>(*quotient), (std::vector<int32_t>{min, 3, -3}));  // truncation
}

TEST(ElementwiseArithTest, IntegerDivisionByZeroIsAnError) {
  absl::StatusOr<Tensor> y = RunOp("Div", {Int64s({2}, {1, 2}), Int64s({2}, {1, 0})});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Mod", {Int64s({1}, {1}), Int64s({1}, {0})}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseArithTest, LegacyBroadcastAlignsAtAxis) {
  // Opset 6: B [2] aligned with A [2, 3] at axis 0.
  absl::StatusOr<Tensor> y = RunOp("Add", {Floats({2, 3}, {0, 0, 0, 0, 0, 0}), Floats({2}, {1, 2})},
                                   {AttrInt("broadcast", 1), AttrInt("axis", 0)}, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  // Suffix matching without axis.
  y = RunOp("Sub", {Floats({2, 2}, {5, 5, 5, 5}), Floats({2}, {1, 2})}, {AttrInt("broadcast", 1)}, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{4, 3, 4, 3}));
}

TEST(ElementwiseArithTest, LegacyBroadcastErrors) {
  // broadcast=0 needs equal shapes, even where numpy would broadcast.
  EXPECT_EQ(RunOp("Add", {Floats({2, 2}, {1, 2, 3, 4}), Floats({2}, {1, 2})}, {}, 6).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Add", {Floats({2, 2}, {1, 2, 3, 4}), Floats({2}, {1, 2})},
                  {AttrInt("broadcast", 1), AttrInt("axis", 5)}, 6)
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(RunOp("Add", {Floats({2, 2}, {1, 2, 3, 4}), Floats({3}, {1, 2, 3})}, {AttrInt("broadcast", 1)}, 6)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseArithTest, ModFollowsTheDivisorOrTheDividend) {
  absl::StatusOr<Tensor> y = RunOp("Mod", {Int32s({4}, {-7, 7, -7, 7}), Int32s({4}, {3, -3, -3, 3})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{2, -2, -1, 1}));
  y = RunOp("Mod", {Int32s({2}, {-7, 7}), Int32s({2}, {3, -3})}, {AttrInt("fmod", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{-1, 1}));
  EXPECT_EQ(RunOp("Mod", {Floats({1}, {1}), Floats({1}, {1})}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Mod", {Floats({1}, {1}), Floats({1}, {1})}, {AttrInt("fmod", 2)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseArithTest, BroadcastRunsAreAsLongAsTheInputsAllow) {
  // Each run as (out_offset, length, offset0, step0, offset1, step1).
  auto runs = [](const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins) {
    std::vector<std::vector<int64_t>> all;
    runner::reference::BroadcastRuns r(out, ins);
    while (r.Next())
      all.push_back({r.out_offset(), r.length(), r.offset(0), r.step(0), r.offset(1), r.step(1)});
    return all;
  };
  using Runs = std::vector<std::vector<int64_t>>;
  // Against a scalar, and two equal shapes: one run.
  EXPECT_EQ(runs({2, 3, 4}, {{2, 3, 4}, {}}), (Runs{{0, 24, 0, 1, 0, 0}}));
  EXPECT_EQ(runs({2, 3, 4}, {{2, 3, 4}, {2, 3, 4}}), (Runs{{0, 24, 0, 1, 0, 1}}));
  // A per-channel operand [3, 1] against [2, 3, 4]: runs of 4, the
  // channel's value repeated; dims of one value do not split runs.
  EXPECT_EQ(runs({2, 3, 1, 4}, {{2, 3, 1, 4}, {3, 1, 1}}), (Runs{{0, 4, 0, 1, 0, 0},
                                                                 {4, 4, 4, 1, 1, 0},
                                                                 {8, 4, 8, 1, 2, 0},
                                                                 {12, 4, 12, 1, 0, 0},
                                                                 {16, 4, 16, 1, 1, 0},
                                                                 {20, 4, 20, 1, 2, 0}}));
  // A row [4] repeated over [2, 3]: one run per row, the row read again.
  EXPECT_EQ(runs({2, 3, 4}, {{2, 3, 4}, {4}}).size(), 6u);
  // Empty output: no run; scalar output: one.
  EXPECT_TRUE(runs({2, 0, 4}, {{2, 0, 4}, {}}).empty());
  EXPECT_EQ(runs({}, {{}, {}}), (Runs{{0, 1, 0, 0, 0, 0}}));
}

TEST(ElementwiseArithTest, FloatFmodIsBitExactWithLibm) {
  // The float path computes fmod in double (quotient, one correction);
  // every result must be std::fmod's bit for bit: quotients just below an
  // integer, huge quotients, signed zeros, infinities, NaN, zero divisors,
  // subnormals, in all three broadcast forms.
  std::vector<float> x, z;
  const float specials[] = {0.f,
                            -0.f,
                            1.f,
                            -1.f,
                            0.1f,
                            -0.1f,
                            3.f,
                            7.5f,
                            1e-40f,
                            -1e-40f,
                            1e30f,
                            -1e30f,
                            16777216.f,
                            0x1p29f,
                            0x1p30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min()};
  for (float a : specials) {
    for (float b : specials) {
      x.push_back(a);
      z.push_back(b);
    }
  }
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  for (int i = 0; i < 20000; ++i) {
    // Random magnitudes over the whole range, and quotients near integers.
    float a, b;
    uint32_t ua = next(), ub = next();
    std::memcpy(&a, &ua, 4);
    std::memcpy(&b, &ub, 4);
    if (i % 2 == 1) {
      b = static_cast<float>(static_cast<int32_t>(next() % 2000) - 1000) / 7.f;
      a = b * static_cast<float>(next() % 100000) + (static_cast<float>(next() % 3) - 1.f) * 1e-3f;
    }
    x.push_back(a);
    z.push_back(b);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  absl::StatusOr<Tensor> y = RunOp("Mod", {Floats({n}, x), Floats({n}, z)}, {AttrInt("fmod", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = std::fmod(x[i], z[i]);
    const float got = y->data<float>()[i];
    if (std::memcmp(&want, &got, 4) != 0 && !(std::isnan(want) && std::isnan(got)) && ++wrong <= 5) {
      ADD_FAILURE() << "fmod(" << x[i] << ", " << z[i] << ") = " << got << ", libm " << want;
    }
  }
  EXPECT_EQ(wrong, 0);
  // A scalar divisor and a scalar dividend broadcast.
  y = RunOp("Mod", {Floats({4}, {5.5f, -5.5f, 1e20f, -0.f}), Floats({}, {2.f})}, {AttrInt("fmod", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{1.5f, -1.5f, std::fmod(1e20f, 2.f), -0.f}));
  EXPECT_TRUE(std::signbit(y->data<float>()[3]));
  y = RunOp("Mod", {Floats({}, {7.f}), Floats({3}, {2.f, -3.f, 0.f})}, {AttrInt("fmod", 1)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->data<float>()[0], 1.f);
  EXPECT_EQ(y->data<float>()[1], 1.f);
  EXPECT_TRUE(std::isnan(y->data<float>()[2]));
}

TEST(ElementwiseArithTest, PowWithMixedTypes) {
  absl::StatusOr<Tensor> y = RunOp("Pow", {Int64s({3}, {2, -3, 5}), Int32s({3}, {10, 3, 0})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{1024, -27, 1}));
  y = RunOp("Pow", {Floats({2}, {2, 9}), Int64s({2}, {-1, 2})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{0.5f, 81}));
  EXPECT_FALSE(RunOp("Pow", {Int32s({1}, {0}), Int32s({1}, {-1})}).ok());
}

TEST(ElementwiseArithTest, VariadicOps) {
  absl::StatusOr<Tensor> y = RunOp("Max", {Floats({2}, {1, NAN}), Floats({1}, {3}), Floats({2, 1}, {0, 5})});
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> v = Values<float>(*y);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], 3);
  EXPECT_TRUE(std::isnan(v[1]));  // NaN propagates
  EXPECT_EQ(v[2], 5);
  y = RunOp("Mean", {Floats({2}, {1, 2}), Floats({2}, {3, 6})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{2, 4}));
  // Before opset 8 the inputs must have one shape.
  EXPECT_EQ(RunOp("Sum", {Floats({2}, {1, 2}), Floats({1}, {3})}, {}, 6).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Sum", {Floats({2}, {1, 2}), Int32s({2}, {3, 4})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Max, Min, Sum and Mean over four inputs broadcast four ways (whole rows,
// a repeated row, a scalar per row, a broadcast first operand), float with
// NaN and int32 wrapping, against one broadcast index per element.
TEST(ElementwiseArithTest, VariadicOpsBroadcastEveryInputByRows) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 1}, {2, 3, 4}, {4}, {2, 1, 1}};
  const std::vector<int64_t> out = {2, 3, 4};
  auto index = [&](const std::vector<int64_t>& shape, int64_t flat) {
    int64_t idx = 0, stride = 1;
    for (size_t d = out.size(); d-- > 0;) {
      const int64_t coord = flat % out[d];
      flat /= out[d];
      const int64_t k = static_cast<int64_t>(d) - static_cast<int64_t>(out.size() - shape.size());
      if (k < 0) continue;
      if (shape[static_cast<size_t>(k)] != 1) idx += coord * stride;
      stride *= shape[static_cast<size_t>(k)];
    }
    return idx;
  };
  std::vector<std::vector<float>> fv;
  std::vector<std::vector<int32_t>> iv;
  std::vector<Tensor> floats, ints;
  for (size_t k = 0; k < shapes.size(); ++k) {
    int64_t n = 1;
    for (int64_t d : shapes[k]) n *= d;
    std::vector<float> f;
    std::vector<int32_t> i;
    for (int64_t j = 0; j < n; ++j) {
      f.push_back(static_cast<float>((j * 7 + static_cast<int64_t>(k) * 5) % 11) - 5.f);
      i.push_back(j == 0 && k == 1 ? std::numeric_limits<int32_t>::max() : static_cast<int32_t>(j * 3 - 4));
    }
    if (k == 2) f[1] = NAN;
    fv.push_back(f);
    iv.push_back(i);
    floats.push_back(Floats(shapes[k], f));
    ints.push_back(Int32s(shapes[k], i));
  }
  for (std::string op : {"Max", "Min", "Sum", "Mean"}) {
    absl::StatusOr<Tensor> y = RunOp(op, floats);
    ASSERT_TRUE(y.ok()) << op << ": " << y.status();
    ASSERT_EQ(y->shape(), out);
    std::vector<float> got = Values<float>(*y);
    for (int64_t e = 0; e < 24; ++e) {
      float want = fv[0][static_cast<size_t>(index(shapes[0], e))];
      for (size_t k = 1; k < shapes.size(); ++k) {
        const float z = fv[k][static_cast<size_t>(index(shapes[k], e))];
        if (op == "Max" || op == "Min") {
          want = std::isnan(want) ? want
                 : std::isnan(z)  ? z
                                  : (op == "Max" ? std::max(want, z) : std::min(want, z));
        } else {
          want += z;
        }
      }
      if (op == "Mean") want /= 4;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[static_cast<size_t>(e)])) << op << " element " << e;
      } else {
        EXPECT_EQ(got[static_cast<size_t>(e)], want) << op << " element " << e;
      }
    }
    if (op == "Mean") continue;
    y = RunOp(op, ints);
    ASSERT_TRUE(y.ok()) << op << ": " << y.status();
    std::vector<int32_t> got_i = Values<int32_t>(*y);
    for (int64_t e = 0; e < 24; ++e) {
      uint32_t acc = static_cast<uint32_t>(iv[0][static_cast<size_t>(index(shapes[0], e))]);
      int32_t best = iv[0][static_cast<size_t>(index(shapes[0], e))];
      for (size_t k = 1; k < shapes.size(); ++k) {
        const int32_t z = iv[k][static_cast<size_t>(index(shapes[k], e))];
        acc += static_cast<uint32_t>(z);  // wraps
        best = op == "Max" ? std::max(best, z) : std::min(best, z);
      }
      EXPECT_EQ(got_i[static_cast<size_t>(e)], op == "Sum" ? static_cast<int32_t>(acc) : best)
          << op << " element " << e;
    }
  }
}

// --- Unary ops ---

TEST(ElementwiseUnaryTest, IntegerAbsAndNegWrap) {
  const int32_t min = std::numeric_limits<int32_t>::min();
  absl::StatusOr<Tensor> y = RunOp("Abs", {Int32s({3}, {min, -3, 4})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{min, 3, 4}));
  y = RunOp("Neg", {Int32s({2}, {min, 5})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{min, -5}));
}

TEST(ElementwiseUnaryTest, FloatOnlyOpsRejectIntegers) {
  absl::StatusOr<Tensor> y = RunOp("Exp", {Int32s({1}, {1})});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("int32"), absl::string_view::npos) << y.status();
  EXPECT_EQ(RunOp("Not", {Floats({1}, {1})}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseUnaryTest, RoundHalvesToEven) {
  absl::StatusOr<Tensor> y = RunOp("Round", {Floats({5}, {0.5f, 1.5f, 2.5f, -2.5f, 2.6f})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{0, 2, 2, -2, 3}));
}

TEST(ElementwiseUnaryTest, AttributesAndDefaultsByOpset) {
  absl::StatusOr<Tensor> y = RunOp("Selu", {Floats({1}, {1})}, {}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_FLOAT_EQ(Values<float>(*y)[0], 1.0507f);  // opset 1 default gamma
  y = RunOp("Selu", {Floats({1}, {1})}, {}, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_FLOAT_EQ(Values<float>(*y)[0], 1.05070102214813232421875f);
  y = RunOp("LeakyRelu", {Floats({2}, {-2, 2})}, {AttrFloat("alpha", 0.5f)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{-1, 2}));
  EXPECT_EQ(RunOp("Gelu", {Floats({1}, {1})}, {AttrString("approximate", "fast")}, 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Celu", {Floats({1}, {1})}, {AttrFloat("alpha", 0)}, 12).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseUnaryTest, ClipBounds) {
  // min > max: everything becomes max.
  absl::StatusOr<Tensor> y =
      RunOp("Clip", {Floats({3}, {-5, 0, 5}), Floats({}, {2}), Floats({}, {1})}, {}, 13);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{1, 1, 1}));
  // Only max given.
  y = RunOp("Clip", {Int32s({3}, {-5, 0, 5}), Tensor(), Int32s({}, {1})}, {}, 13);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{-5, 0, 1}));
  EXPECT_EQ(RunOp("Clip", {Floats({2}, {1, 2}), Floats({2}, {0, 1})}, {}, 13).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Clip", {Floats({2}, {1, 2}), Int32s({}, {0})}, {}, 13).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Opset 6: attributes.
  y = RunOp("Clip", {Floats({3}, {-5, 0, 5})}, {AttrFloat("min", -1), AttrFloat("max", 1)}, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{-1, 0, 1}));
}

TEST(ElementwiseUnaryTest, PReluSlopes) {
  // Opset 6: one slope per channel (dim 1).
  absl::StatusOr<Tensor> y = RunOp("PRelu", {Floats({1, 2, 2}, {-1, -1, -1, 1}), Floats({2}, {2, 3})}, {}, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{-2, -2, -3, 1}));
  // Opset 7+: the slope must broadcast to X, not the other way round.
  EXPECT_EQ(RunOp("PRelu", {Floats({2}, {1, 2}), Floats({2, 2}, {1, 2, 3, 4})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseUnaryTest, IsInfDirections) {
  absl::StatusOr<Tensor> y =
      RunOp("IsInf", {Floats({3}, {INFINITY, -INFINITY, NAN})}, {AttrInt("detect_negative", 0)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<bool>(*y), (std::vector<bool>{true, false, false}));
}

// --- Logic ---

TEST(ElementwiseLogicTest, ComparisonsAndStrings) {
  absl::StatusOr<Tensor> y = RunOp("Equal", {Strings({2}, {"a", "b"}), Strings({}, {"b"})}, {}, 19);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<bool>(*y), (std::vector<bool>{false, true}));
  y = RunOp("LessOrEqual", {Floats({3}, {1, 2, NAN}), Floats({1}, {2})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<bool>(*y), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(RunOp("And", {Floats({1}, {1}), Floats({1}, {1})}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Greater", {Strings({1}, {"a"}), Strings({1}, {"b"})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseLogicTest, BoolBytesOtherThanOneAreTrue) {
  // Raw data may hold any byte in a bool tensor; every nonzero byte is true.
  Tensor odd = MakeTensor<uint8_t>(pb::kBool, {2}, {2, 0});
  absl::StatusOr<Tensor> y = RunOp("And", {odd, MakeTensor<uint8_t>(pb::kBool, {2}, {1, 1})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{1, 0}));
  y = RunOp("Not", {odd});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0, 1}));
  y = RunOp("Where", {odd, Floats({1}, {1}), Floats({1}, {2})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{1, 2}));
}

TEST(ElementwiseLogicTest, BitShiftBeyondTheWidthGivesZero) {
  absl::StatusOr<Tensor> y = RunOp("BitShift", {MakeTensor<uint8_t>(pb::kUint8, {3}, {1, 255, 16}),
                                                MakeTensor<uint8_t>(pb::kUint8, {3}, {7, 8, 200})},
                                   {AttrString("direction", "LEFT")});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<uint8_t>(*y), (std::vector<uint8_t>{128, 0, 0}));
  EXPECT_EQ(RunOp("BitShift", {MakeTensor<uint8_t>(pb::kUint8, {1}, {1}), MakeTensor<uint8_t>(pb::kUint8, {1}, {1})},
                  {AttrString("direction", "UP")})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseLogicTest, WhereBroadcastsAnyType) {
  Tensor cond = MakeTensor<bool>(pb::kBool, {2, 1}, {true, false});
  absl::StatusOr<Tensor> y = RunOp("Where", {cond, Strings({2}, {"a", "b"}), Strings({}, {"z"})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"a", "b", "z", "z"}));
  EXPECT_EQ(RunOp("Where", {cond, Floats({1}, {1}), Int32s({1}, {1})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Where", {Floats({1}, {1}), Floats({1}, {1}), Floats({1}, {1})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Cast ---

TEST(ElementwiseCastTest, FloatToIntegerTruncatesThenWraps) {
  absl::StatusOr<Tensor> y = RunOp("Cast", {Floats({5}, {200.7f, -1.9f, NAN, 1e30f, -3})}, {AttrInt("to", pb::kInt8)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int8_t>(*y), (std::vector<int8_t>{-56, -1, 0, -1, -3}));
  y = RunOp("Cast", {Floats({3}, {0, -0.0f, NAN})}, {AttrInt("to", pb::kBool)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<bool>(*y), (std::vector<bool>{false, false, true}));
}

TEST(ElementwiseCastTest, NumbersToStringsAsNumpyPrintsThem) {
  absl::StatusOr<Tensor> y = RunOp(
      "Cast", {Floats({8}, {0.1f, 100, 1e-5f, 1.5e16f, -0.0f, NAN, -INFINITY, 0.0001f})}, {AttrInt("to", pb::kString)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(),
            (std::vector<std::string>{"0.1", "100.0", "1e-05", "1.5e+16", "-0.0", "nan", "-inf", "1e-04"}));
  y = RunOp("Cast", {MakeTensor<runner::Float16>(pb::kFloat16, {1}, {runner::Float16(0.1f)})}, {AttrInt("to", pb::kString)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"0.1"}));
  y = RunOp("Cast", {Int64s({2}, {-5, 1234567890123})}, {AttrInt("to", pb::kString)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->strings(), (std::vector<std::string>{"-5", "1234567890123"}));
}

TEST(ElementwiseCastTest, StringsToNumbers) {
  absl::StatusOr<Tensor> y =
      RunOp("Cast", {Strings({5}, {" 1.5 ", "+INF", "-inf", "1e2", "NaN"})}, {AttrInt("to", pb::kFloat)});
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> v = Values<float>(*y);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], INFINITY);
  EXPECT_EQ(v[2], -INFINITY);
  EXPECT_EQ(v[3], 100);
  EXPECT_TRUE(std::isnan(v[4]));
  y = RunOp("Cast", {Strings({3}, {"100.5", "-7", "18446744073709551615"})}, {AttrInt("to", pb::kInt64)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{100, -7, -1}));
  y = RunOp("Cast", {Strings({2}, {"hello", "1"})}, {AttrInt("to", pb::kFloat)});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("hello"), absl::string_view::npos) << y.status();
}

TEST(ElementwiseCastTest, Float8SaturationAndRounding) {
  Tensor x = Floats({4}, {500, -1e9f, 0.3f, NAN});
  absl::StatusOr<Tensor> y = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E4M3FN)}, 19);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0x7e, 0xfe, 0x2a, 0x7f}));  // 448, -448, 0.3125, NaN
  y = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E4M3FN), AttrInt("saturate", 0)}, 19);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0x7f, 0xff, 0x2a, 0x7f}));
  y = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E5M2FNUZ), AttrInt("saturate", 0)}, 19);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y)[1], 0x80);  // the one NaN of the fnuz types
  EXPECT_EQ(RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E5M2), AttrInt("saturate", 3)}, 19).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseCastTest, Float8TypesRoundTripThroughFloat) {
  const runner::MiniFloatFormat* formats[] = {&runner::kFloat8E4M3FN, &runner::kFloat8E4M3FNUZ,
                                              &runner::kFloat8E5M2, &runner::kFloat8E5M2FNUZ};
  for (const runner::MiniFloatFormat* f : formats) {
    for (uint32_t bits = 0; bits < 256; ++bits) {
      double v = runner::MiniFloatToDouble(*f, bits);
      if (std::isnan(v)) continue;
      if (v == 0 && f->special == runner::MiniFloatFormat::kFnuz) continue;
      EXPECT_EQ(runner::DoubleToMiniFloat(*f, v, false), bits) << "value " << v;
    }
  }
}

TEST(ElementwiseCastTest, SubByteIntegersPackAndWrap) {
  // Three int4 values (odd count): 9 wraps to -7, -9 to 7.
  absl::StatusOr<Tensor> y = RunOp("Cast", {Floats({3}, {9, -9, -1})}, {AttrInt("to", pb::kInt4)}, 21);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0x79, 0x0f}));
  absl::StatusOr<Tensor> back = RunOp("Cast", {*y}, {AttrInt("to", pb::kInt32)}, 21);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<int32_t>(*back), (std::vector<int32_t>{-7, 7, -1}));
  back = RunOp("Cast", {*y}, {AttrInt("to", pb::kUint2)}, 25);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Bytes(*back), (std::vector<uint8_t>{0x3d}));  // 1, 3, 3
}

TEST(ElementwiseCastTest, E8M0RoundingModes) {
  Tensor x = Floats({3}, {3, 5, 0});
  absl::StatusOr<Tensor> up = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E8M0)}, 24);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(Bytes(*up), (std::vector<uint8_t>{129, 130, 0}));  // 4, 8, saturated minimum
  absl::StatusOr<Tensor> down =
      RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E8M0), AttrString("round_mode", "down")}, 24);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(Bytes(*down), (std::vector<uint8_t>{128, 129, 0}));
  absl::StatusOr<Tensor> nearest = RunOp(
      "Cast", {x}, {AttrInt("to", pb::kFloat8E8M0), AttrString("round_mode", "nearest"), AttrInt("saturate", 0)}, 24);
  ASSERT_TRUE(nearest.ok()) << nearest.status();
  EXPECT_EQ(Bytes(*nearest), (std::vector<uint8_t>{129, 129, 0xff}));  // 3 ties up to 4; 0 is NaN unsaturated
  EXPECT_EQ(RunOp("Cast", {x}, {AttrInt("to", pb::kFloat8E8M0), AttrString("round_mode", "odd")}, 24).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseCastTest, DoubleToFloat16RoundsOnce) {
  // Just above the halfway point between two float16 values, but rounding to
  // float first lands exactly on it and then ties to even (down).
  double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  absl::StatusOr<Tensor> y = RunOp("Cast", {MakeTensor<double>(pb::kDouble, {1}, {x})}, {AttrInt("to", pb::kFloat16)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->data<runner::Float16>()[0].bits, 0x3c01);
}

TEST(ElementwiseCastTest, OutOfRangeFloatsBecomeInfinities) {
  Tensor x = MakeTensor<double>(pb::kDouble, {3}, {1e300, -1e300, 70000});
  absl::StatusOr<Tensor> y = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<float>(*y), (std::vector<float>{INFINITY, -INFINITY, 70000}));
  y = RunOp("Cast", {x}, {AttrInt("to", pb::kFloat16)});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0x00, 0x7c, 0x00, 0xfc, 0x00, 0x7c}));
}

TEST(ElementwiseCastTest, AttributeErrorsAndOpset1Names) {
  EXPECT_EQ(RunOp("Cast", {Floats({1}, {1})}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Cast", {Floats({1}, {1})}, {AttrInt("to", 99)}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Cast", {Floats({1}, {1})}, {AttrInt("to", pb::kComplex64)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Tensor> y = RunOp("Cast", {Floats({1}, {2.5f})}, {AttrString("to", "DOUBLE")}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), pb::kDouble);
  EXPECT_EQ(Values<double>(*y)[0], 2.5);
}

TEST(ElementwiseCastTest, CastLikeTakesTheTargetType) {
  absl::StatusOr<Tensor> y = RunOp("CastLike", {Floats({2}, {1.5f, -2}), Int64s({}, {0})}, {}, 15);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int64_t>(*y), (std::vector<int64_t>{1, -2}));
}

TEST(ElementwiseCastTest, BitCastKeepsTheBits) {
  absl::StatusOr<Tensor> y = RunOp("BitCast", {Floats({2}, {1, -2})}, {AttrInt("to", pb::kInt32)}, 26);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values<int32_t>(*y), (std::vector<int32_t>{0x3f800000, static_cast<int32_t>(0xc0000000)}));
  y = RunOp("BitCast", {MakeTensor<uint8_t>(pb::kUint8, {3}, {0, 1, 7})}, {AttrInt("to", pb::kBool)}, 26);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Bytes(*y), (std::vector<uint8_t>{0, 1, 1}));  // normalized to valid bools
  EXPECT_EQ(RunOp("BitCast", {Floats({1}, {1})}, {AttrInt("to", pb::kInt64)}, 26).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("BitCast", {Floats({1}, {1})}, {AttrInt("to", pb::kString)}, 26).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onnxkit::testing
