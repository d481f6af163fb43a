// Tests of the sequence-model reference kernels
// (runner/reference/nn_sequence_models.cc): SwiGLU, CausalConvWithState and
// LinearAttention on small hand-computed cases, and error paths on
// malformed shapes and attributes (an error, never a crash).
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runner/reference/float_types.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::Tensor;

constexpr int64_t kOpset = 28;

absl::StatusOr<std::vector<Tensor>> RunNode(const std::string& op, const std::vector<Tensor>& inputs,
                                            std::vector<pb::AttributeProto> attrs, int num_outputs) {
  return RunSingleNodeTensors(op, inputs, std::move(attrs), kOpset, num_outputs);
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.size());
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

void ExpectInvalid(const absl::StatusOr<std::vector<Tensor>>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(fragment), std::string::npos) << r.status();
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// --- SwiGLU ---

TEST(SwiGluTest, GatesBWithSwishOfA) {
  auto y = RunNode("SwiGLU", {Floats({4}, {0, 1, -1, 2}), Floats({4}, {1, 2, 3, 4})}, {}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(Values((*y)[0]), {0, static_cast<float>(2 * Sigmoid(1)), static_cast<float>(-3 * Sigmoid(-1)),
                               static_cast<float>(8 * Sigmoid(2))});
}

TEST(SwiGluTest, AlphaAndBroadcasting) {
  // A [2, 1] against B [1, 3]: Y[i, j] = A[i] * sigmoid(2 * A[i]) * B[j].
  auto y =
      RunNode("SwiGLU", {Floats({2, 1}, {1, -2}), Floats({1, 3}, {1, 2, 3})}, {AttrFloat("alpha", 2)}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].shape(), (std::vector<int64_t>{2, 3}));
  float s1 = static_cast<float>(Sigmoid(2)), s2 = static_cast<float>(-2 * Sigmoid(-4));
  ExpectNear(Values((*y)[0]), {s1, 2 * s1, 3 * s1, s2, 2 * s2, 3 * s2});
}

TEST(SwiGluTest, Float16) {
  using runner::Float16;
  Tensor a = MakeTensor<Float16>(pb::kFloat16, {2}, {Float16(1.0f), Float16(-1.0f)});
  Tensor b = MakeTensor<Float16>(pb::kFloat16, {2}, {Float16(2.0f), Float16(2.0f)});
  auto y = RunNode("SwiGLU", {a, b}, {}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ((*y)[0].dtype(), pb::kFloat16);
  const Float16* p = (*y)[0].data<Float16>();
  EXPECT_NEAR(static_cast<float>(p[0]), 2 * Sigmoid(1), 2e-3);
  EXPECT_NEAR(static_cast<float>(p[1]), -2 * Sigmoid(-1), 2e-3);
}

TEST(SwiGluTest, RejectsMismatchedInputs) {
  ExpectInvalid(RunNode("SwiGLU", {Floats({2}, {1, 2}), Floats({3}, {1, 2, 3})}, {}, 1), "[2]");
  ExpectInvalid(RunNode("SwiGLU", {Floats({2}, {1, 2}), Int64s({2}, {1, 2})}, {}, 1), "");
}

// --- CausalConvWithState ---

TEST(CausalConvWithStateTest, PastStateBiasAndSilu) {
  // Padded row [4, 1, 2, 3] against taps [0.5, 2]: 4, 4.5, 7; plus bias 1.
  Tensor x = Floats({1, 1, 3}, {1, 2, 3}), w = Floats({1, 1, 2}, {0.5f, 2}), past = Floats({1, 1, 1}, {4});
  auto r = RunNode("CausalConvWithState", {x, w, Tensor(), past}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {4, 4.5f, 7});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{1, 1, 1}));
  ExpectNear(Values((*r)[1]), {3});

  r = RunNode("CausalConvWithState", {x, w, Floats({1}, {1}), past}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {5, 5.5f, 8});

  r = RunNode("CausalConvWithState", {x, w, Tensor(), past}, {AttrString("activation", "silu")}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {static_cast<float>(4 * Sigmoid(4)), static_cast<float>(4.5 * Sigmoid(4.5)),
                               static_cast<float>(7 * Sigmoid(7))});
  auto swish = RunNode("CausalConvWithState", {x, w, Tensor(), past}, {AttrString("activation", "swish")}, 2);
  ASSERT_TRUE(swish.ok()) << swish.status();
  ExpectNear(Values((*swish)[0]), Values((*r)[0]));
}

TEST(CausalConvWithStateTest, ZeroPastStatePerChannel) {
  // Channel 0: [0, 1, 2] * [1, 1] -> 1, 3. Channel 1: [0, 3, 4] * [1, -1] -> -3, -1.
  Tensor x = Floats({1, 2, 2}, {1, 2, 3, 4}), w = Floats({2, 1, 2}, {1, 1, 1, -1});
  auto r = RunNode("CausalConvWithState", {x, w}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {1, 3, -3, -1});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{1, 2, 1}));
  ExpectNear(Values((*r)[1]), {2, 4});
}

TEST(CausalConvWithStateTest, KernelSizeOneHasEmptyState) {
  auto r = RunNode("CausalConvWithState", {Floats({1, 1, 2}, {1, 2}), Floats({1, 1, 1}, {3})}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {3, 6});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{1, 1, 0}));
}

TEST(CausalConvWithStateTest, RejectsBadShapesAndAttributes) {
  Tensor x = Floats({1, 1, 3}, {1, 2, 3}), w = Floats({1, 1, 2}, {1, 1});
  ExpectInvalid(RunNode("CausalConvWithState", {Floats({3}, {1, 2, 3}), w}, {}, 2), "3-D");
  ExpectInvalid(RunNode("CausalConvWithState", {x, Floats({1, 2, 2}, {1, 1, 1, 1})}, {}, 2), "weight");
  ExpectInvalid(RunNode("CausalConvWithState", {x, Floats({2, 1, 2}, {1, 1, 1, 1})}, {}, 2), "weight");
  ExpectInvalid(RunNode("CausalConvWithState", {x, Floats({1, 1, 0}, {})}, {}, 2), "kernel_size");
  ExpectInvalid(RunNode("CausalConvWithState", {x, w, Floats({2}, {1, 1})}, {}, 2), "bias");
  ExpectInvalid(RunNode("CausalConvWithState", {x, w, Tensor(), Floats({1, 1, 2}, {1, 1})}, {}, 2),
                "past_state");
  ExpectInvalid(RunNode("CausalConvWithState", {x, w}, {AttrString("activation", "relu")}, 2), "activation");
}

// --- LinearAttention ---

std::vector<pb::AttributeProto> Heads(int64_t q, int64_t kv, std::string rule, float scale = 0) {
  std::vector<pb::AttributeProto> attrs = {AttrInt("q_num_heads", q), AttrInt("kv_num_heads", kv),
                                           AttrString("update_rule", std::move(rule))};
  if (scale != 0) attrs.push_back(AttrFloat("scale", scale));
  return attrs;
}

TEST(LinearAttentionTest, UpdateRules) {
  // One head, dk = dv = 1 (scale 1), two steps: q = [1, 2], k = [1, 1], v = [2, 3].
  Tensor q = Floats({1, 2, 1}, {1, 2}), k = Floats({1, 2, 1}, {1, 1}), v = Floats({1, 2, 1}, {2, 3});
  Tensor decay = Floats({1, 2, 1}, {std::log(0.5f), std::log(0.5f)}), beta = Floats({1, 2, 1}, {0.5f, 0.5f});
  // linear: S = 2, 5; o = 1 * 2, 2 * 5.
  auto r = RunNode("LinearAttention", {q, k, v}, Heads(1, 1, "linear"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {2, 10});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{1, 1, 1, 1}));
  ExpectNear(Values((*r)[1]), {5});
  // gated: S = 0 * 0.5 + 2 = 2, 2 * 0.5 + 3 = 4.
  r = RunNode("LinearAttention", {q, k, v, Tensor(), decay}, Heads(1, 1, "gated"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {2, 8});
  ExpectNear(Values((*r)[1]), {4});
  // delta: S = 0 + 0.5 * (2 - 0) = 1, 1 + 0.5 * (3 - 1) = 2.
  r = RunNode("LinearAttention", {q, k, v, Tensor(), Tensor(), beta}, Heads(1, 1, "delta"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {1, 4});
  ExpectNear(Values((*r)[1]), {2});
  // gated_delta from past state 2 with beta 1: S = 1 + (2 - 1) = 2, 1 + (3 - 1) = 3.
  r = RunNode("LinearAttention", {q, k, v, Floats({1, 1, 1, 1}, {2}), decay, Floats({1, 2, 1}, {1, 1})},
              Heads(1, 1, "gated_delta"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {2, 6});
  ExpectNear(Values((*r)[1]), {3});
}

TEST(LinearAttentionTest, PerKeyDecayAndDefaultScale) {
  // dk = 2, dv = 1: past rows [4, 4] decay by [0.5, 1] to [2, 4]; k = 0 writes
  // nothing; o = (1 * 2 + 1 * 4) / sqrt(2).
  Tensor q = Floats({1, 1, 2}, {1, 1}), k = Floats({1, 1, 2}, {0, 0}), v = Floats({1, 1, 1}, {5});
  Tensor past = Floats({1, 1, 2, 1}, {4, 4}), decay = Floats({1, 1, 2}, {std::log(0.5f), 0});
  auto r = RunNode("LinearAttention", {q, k, v, past, decay}, Heads(1, 1, "gated"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {static_cast<float>(6 / std::sqrt(2.0))});
  ExpectNear(Values((*r)[1]), {2, 4});
  r = RunNode("LinearAttention", {q, k, v, past, decay}, Heads(1, 1, "gated", 0.25f), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {1.5f});
}

TEST(LinearAttentionTest, GroupedQueryHeadsShareTheState) {
  // Two query heads read the one kv head's state S = k v = 2.
  auto r =
      RunNode("LinearAttention", {Floats({1, 1, 2}, {1, -1}), Floats({1, 1, 1}, {1}), Floats({1, 1, 1}, {2})},
              Heads(2, 1, "linear"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Values((*r)[0]), {2, -2});
  EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(LinearAttentionTest, RejectsBadShapesAndAttributes) {
  Tensor q = Floats({1, 1, 2}, {1, 1}), k = Floats({1, 1, 2}, {1, 1}), v = Floats({1, 1, 2}, {1, 1});
  ExpectInvalid(RunNode("LinearAttention", {q, k, v},
                        {AttrInt("q_num_heads", 1), AttrString("update_rule", "linear")}, 2),
                "kv_num_heads");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v}, Heads(3, 2, "linear"), 2), "multiple");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v}, Heads(1, 1, "softmax"), 2), "update_rule");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v},
                        {AttrInt("q_num_heads", 1), AttrInt("kv_num_heads", 1), AttrInt("chunk_size", 0)}, 2),
                "chunk_size");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v}, Heads(1, 1, "gated"), 2), "decay");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v}, Heads(1, 1, "delta"), 2), "beta");
  ExpectInvalid(RunNode("LinearAttention", {q, Floats({1, 1, 3}, {1, 1, 1}), v}, Heads(1, 1, "linear"), 2),
                "shapes");
  ExpectInvalid(RunNode("LinearAttention", {q, k, Floats({1, 2, 2}, {1, 1, 1, 1})}, Heads(1, 1, "linear"), 2),
                "shapes");
  ExpectInvalid(RunNode("LinearAttention", {Floats({2}, {1, 1}), k, v}, Heads(1, 1, "linear"), 2), "3-D");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v, Floats({1, 1, 2, 1}, {0, 0})}, Heads(1, 1, "linear"), 2),
                "past_state");
  ExpectInvalid(
      RunNode("LinearAttention", {q, k, v, Tensor(), Floats({1, 1, 3}, {0, 0, 0})}, Heads(1, 1, "gated"), 2),
      "decay");
  ExpectInvalid(RunNode("LinearAttention", {q, k, v, Tensor(), Tensor(), Floats({1, 1, 2}, {1, 1})},
                        Heads(1, 1, "delta"), 2),
                "beta");
}

}  // namespace
}  // namespace onnxkit::testing
