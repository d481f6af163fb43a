// The cpu kernels of ops of opset 23 and later, Attention, RotaryEmbedding,
// RMSNormalization and SwiGLU (28),
// against the reference kernels: grouped-query heads, 3-D and 4-D inputs,
// a KV cache with its present outputs, boolean and additive masks shorter
// than the keys, causal and window masks aligned to the cache,
// nonpad_kv_seqlen, softcap, rows with no visible key; and what they hand
// back to the reference (NaN inputs, the qk output).
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(CpuRecentOpsTest, GroupedQueryHeadsWithCacheCausalAndAShortBooleanMask) {
  pb::GraphProto g =
      GraphBuilder("g")
          .Input("q", pb::kFloat, {{2, 4, 11, 8}})
          .Input("k", pb::kFloat, {{2, 2, 11, 8}})
          .Input("v", pb::kFloat, {{2, 2, 11, 6}})
          .Input("mask", pb::kBool, {{11, 16}})
          .Input("pk", pb::kFloat, {{2, 2, 7, 8}})
          .Input("pv", pb::kFloat, {{2, 2, 7, 6}})
          .Node("Attention", {"q", "k", "v", "mask", "pk", "pv"}, {"y", "present_k", "present_v"},
                {AttrInt("is_causal", 1), AttrFloat("softcap", 3.0f)})
          .Output("y", pb::kFloat)
          .Output("present_k", pb::kFloat)
          .Output("present_v", pb::kFloat)
          .Build();
  std::vector<bool> mask(11 * 16, true);
  for (int j = 0; j < 16; ++j) mask[3 * 16 + j] = false;  // row 3 sees nothing: zeros
  mask[5 * 16 + 2] = false;
  ExpectCpuMatchesReference(g,
                            {{"q", RandomFloats({2, 4, 11, 8}, 1)},
                             {"k", RandomFloats({2, 2, 11, 8}, 2)},
                             {"v", RandomFloats({2, 2, 11, 6}, 3)},
                             {"mask", Bools({11, 16}, mask)},
                             {"pk", RandomFloats({2, 2, 7, 8}, 4)},
                             {"pv", RandomFloats({2, 2, 7, 6}, 5)}},
                            23);
}

TEST(CpuRecentOpsTest, ThreeDimensionalInputsWithWindowsPaddingAndAnAdditiveMask) {
  pb::GraphProto g =
      GraphBuilder("g")
          .Input("q", pb::kFloat, {{2, -1, 24}})
          .Input("k", pb::kFloat, {{2, -1, 12}})
          .Input("v", pb::kFloat, {{2, -1, 10}})
          .Input("bias", pb::kFloat, {{2, 1, -1, -1}})
          .Input("lens", pb::kInt64, {{2}})
          .Node("Attention", {"q", "k", "v", "bias", "", "", "lens"}, {"y"},
                {AttrInt("q_num_heads", 4), AttrInt("kv_num_heads", 2), AttrInt("is_causal", 1),
                 AttrInt("left_window_size", 3), AttrInt("right_window_size", 1), AttrFloat("scale", 0.3f)})
          .Output("y", pb::kFloat)
          .Build();
  std::vector<Feeds> runs;
  for (int64_t s : {1, 9, 20}) {
    runs.push_back({{"q", RandomFloats({2, s, 24}, 6)},
                    {"k", RandomFloats({2, s, 12}, 7)},
                    {"v", RandomFloats({2, s, 10}, 8)},
                    {"bias", RandomFloats({2, 1, s, s}, 9, -2, 2)},
                    {"lens", Int64s({2}, {s, s > 1 ? s - 1 : 1})}});
  }
  ExpectRepeatedRunsMatch(g, runs, 1e-4, 25, 10);
}

TEST(CpuRecentOpsTest, InputsTheKernelDoesNotTakeRunOnTheReference) {
  // NaN in Q, and the qk output asked for: the reference's results.
  pb::GraphProto nan =
      GraphBuilder("g")
          .Input("q", pb::kFloat, {{1, 2, 3, 4}})
          .Input("k", pb::kFloat, {{1, 2, 3, 4}})
          .Input("v", pb::kFloat, {{1, 2, 3, 4}})
          .Node("Attention", {"q", "k", "v"}, {"y", "", "", "qk"}, {AttrInt("qk_matmul_output_mode", 1)})
          .Output("y", pb::kFloat)
          .Output("qk", pb::kFloat)
          .Build();
  runner::Tensor q = RandomFloats({1, 2, 3, 4}, 10);
  q.mutable_data<float>()[5] = kNaN;
  ExpectCpuMatchesReference(
      nan, {{"q", q}, {"k", RandomFloats({1, 2, 3, 4}, 11)}, {"v", RandomFloats({1, 2, 3, 4}, 12)}}, 23);
}

TEST(CpuRecentOpsTest, RmsNormalizationMatchesTheReference) {
  pb::GraphProto g =
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{4, 3, 40}})
          .Input("s", pb::kFloat, {{3, 40}})
          .Node("RMSNormalization", {"x", "s"}, {"y"}, {AttrInt("axis", 1), AttrFloat("epsilon", 0.01f)})
          .Node("RMSNormalization", {"x", "t"}, {"z"})
          .Input("t", pb::kFloat, {{40}})
          .Output("y", pb::kFloat)
          .Output("z", pb::kFloat)
          .Build();
  runner::Tensor x = RandomFloats({4, 3, 40}, 13, -3, 3);
  ExpectCpuMatchesReference(g, {{"x", x}, {"s", RandomFloats({3, 40}, 14)}, {"t", RandomFloats({40}, 15)}},
                            23);
  // A row holding NaN runs on the reference (NaN row, the others as usual).
  x.mutable_data<float>()[7] = kNaN;
  ExpectCpuMatchesReference(g, {{"x", x}, {"s", RandomFloats({3, 40}, 14)}, {"t", RandomFloats({40}, 15)}},
                            23);
}

TEST(CpuRecentOpsTest, RotaryEmbeddingMatchesTheReference) {
  // 3-D with position ids, interleaved, rotating 6 of each head's 10 values.
  pb::GraphProto g3 =
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, 5, 30}})
          .Input("pos", pb::kInt64, {{2, 5}})
          .Input("cos", pb::kFloat, {{16, 3}})
          .Input("sin", pb::kFloat, {{16, 3}})
          .Node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"},
                {AttrInt("num_heads", 3), AttrInt("interleaved", 1), AttrInt("rotary_embedding_dim", 6)})
          .Output("y", pb::kFloat)
          .Build();
  ExpectCpuMatchesReference(g3,
                            {{"x", RandomFloats({2, 5, 30}, 16)},
                             {"pos", Int64s({2, 5}, {0, 1, 2, 3, 4, 15, 14, 9, 8, 7})},
                             {"cos", RandomFloats({16, 3}, 17)},
                             {"sin", RandomFloats({16, 3}, 18)}},
                            23);
  // 4-D, caches per position, halves.
  pb::GraphProto g4 = GraphBuilder("g")
                          .Input("x", pb::kFloat, {{1, 2, 4, 8}})
                          .Input("cos", pb::kFloat, {{1, 4, 4}})
                          .Input("sin", pb::kFloat, {{1, 4, 4}})
                          .Node("RotaryEmbedding", {"x", "cos", "sin"}, {"y"})
                          .Output("y", pb::kFloat)
                          .Build();
  ExpectCpuMatchesReference(g4,
                            {{"x", RandomFloats({1, 2, 4, 8}, 19)},
                             {"cos", RandomFloats({1, 4, 4}, 20)},
                             {"sin", RandomFloats({1, 4, 4}, 21)}},
                            23);
}

TEST(CpuRecentOpsTest, SwiGluMatchesTheReference) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("a", pb::kFloat, {{3, 5000}})
                         .Input("b", pb::kFloat, {{3, 5000}})
                         .Input("row", pb::kFloat, {{5000}})
                         .Node("SwiGLU", {"a", "b"}, {"y"})
                         .Node("SwiGLU", {"a", "row"}, {"broadcast"})
                         .Node("SwiGLU", {"a", "b"}, {"scaled"}, {AttrFloat("alpha", 1.702f)})
                         .Output("y", pb::kFloat)
                         .Output("broadcast", pb::kFloat)
                         .Output("scaled", pb::kFloat)
                         .Build();
  runner::Tensor a = RandomFloats({3, 5000}, 22, -20, 20);
  a.mutable_data<float>()[11] = kNaN;
  a.mutable_data<float>()[12] = -std::numeric_limits<float>::infinity();
  ExpectCpuMatchesReference(
      g, {{"a", a}, {"b", RandomFloats({3, 5000}, 23)}, {"row", RandomFloats({5000}, 24)}}, 28);
}

}  // namespace
}  // namespace onnxkit::testing
