// `onnxkit convert` going below the opsets that introduced Attention,
// RotaryEmbedding, RMSNormalization (23), Swish, TensorScatter (24) and
// SwiGLU (28): each expands into older ops, and the result reproduces the
// original's outputs on the reference backend (present key/value and the
// qk output included), for static and run-time dims.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using passes::convert::ConvertResult;
using ::testing::HasSubstr;

void ExpectConverts(const pb::ModelProto& m, int64_t opset, const Feeds& feeds, double tol = 1e-5) {
  SCOPED_TRACE(opset);
  ConvertResult down = ConvertTo(m, opset);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  // Each op is gone below the opset that introduced it.
  const std::pair<const char*, int64_t> kNew[] = {
      {"Attention", 23}, {"RotaryEmbedding", 23}, {"RMSNormalization", 23}, {"Swish", 24}, {"SwiGLU", 28}};
  for (const auto& [op, since] : kNew) {
    if (opset < since) {
      EXPECT_EQ(OpCount(down.model, op), 0) << op;
    }
  }
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, tol, tol);
}

TEST(ConvertAttentionTest, RmsNormSwishAndSwiGluExpand) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, 3, 4}})
          .Input("b", pb::kFloat, {{2, 3, 4}})
          .Initializer(RawFloatTensor("s", {3, 4}, 1))
          .Node("RMSNormalization", {"x", "s"}, {"n"}, {AttrInt("axis", 1), AttrFloat("epsilon", 0.1f)})
          .Node("Swish", {"n"}, {"w"}, {AttrFloat("alpha", 1.5f)})
          .Node("SwiGLU", {"w", "b"}, {"y"}, {AttrFloat("alpha", 0.5f)})
          .Output("y", pb::kFloat, {{2, 3, 4}})
          .Build(),
      28, 10);
  Feeds feeds = {{"x", RandomFloats({2, 3, 4}, 1, -2, 2)}, {"b", RandomFloats({2, 3, 4}, 2)}};
  for (int64_t opset : {27, 23, 17, 13}) ExpectConverts(m, opset, feeds);
  ConvertResult down = ConvertTo(m, 17);
  EXPECT_EQ(down.steps["RMSNormalization 23->22 expand-rms-norm"], 1);
  EXPECT_EQ(down.steps["SwiGLU 28->27 expand-swiglu"], 1);
  // SwiGLU's Swish and the model's own both expand.
  EXPECT_EQ(down.steps["Swish 24->23 expand-swish"], 2);
}

TEST(ConvertAttentionTest, HalfRmsNormIsNormalizedInItsStashType) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 8}})
                                        .Initializer(RawFloatTensor("s", {8}, 1))
                                        .Node("Cast", {"x"}, {"xh"}, {AttrInt("to", pb::kFloat16)})
                                        .Node("Cast", {"s"}, {"sh"}, {AttrInt("to", pb::kFloat16)})
                                        .Node("RMSNormalization", {"xh", "sh"}, {"yh"})
                                        .Node("Cast", {"yh"}, {"y"}, {AttrInt("to", pb::kFloat)})
                                        .Output("y", pb::kFloat, {{3, 8}})
                                        .Build(),
                                    23, 11);
  ExpectConverts(m, 17, {{"x", RandomFloats({3, 8}, 3, -4, 4)}}, 2e-3);
}

// Grouped-query heads, a KV cache with its present outputs, causal masking
// aligned to the cache, a boolean mask shorter than the keys (the rest is
// masked; its second row masks every key, which then attends to nothing),
// softcap and the qk output after Softmax.
TEST(ConvertAttentionTest, GroupedQueryCausalAttentionWithCacheExpands) {
  pb::ModelProto m = ModelFromGraph(
      GraphBuilder("g")
          .Input("q", pb::kFloat, {{2, 4, 3, 8}})
          .Input("k", pb::kFloat, {{2, 2, 3, 8}})
          .Input("v", pb::kFloat, {{2, 2, 3, 6}})
          .Input("mask", pb::kBool, {{3, 4}})
          .Input("pk", pb::kFloat, {{2, 2, 2, 8}})
          .Input("pv", pb::kFloat, {{2, 2, 2, 6}})
          .Node("Attention", {"q", "k", "v", "mask", "pk", "pv"}, {"y", "present_k", "present_v", "qk"},
                {AttrInt("is_causal", 1), AttrFloat("softcap", 2.0f), AttrInt("qk_matmul_output_mode", 3)})
          .Output("y", pb::kFloat, {{2, 4, 3, 6}})
          .Output("present_k", pb::kFloat, {{2, 2, 5, 8}})
          .Output("present_v", pb::kFloat, {{2, 2, 5, 6}})
          .Output("qk", pb::kFloat, {{2, 4, 3, 5}})
          .Build(),
      23, 11);
  Feeds feeds = {
      {"q", RandomFloats({2, 4, 3, 8}, 4)},
      {"k", RandomFloats({2, 2, 3, 8}, 5)},
      {"v", RandomFloats({2, 2, 3, 6}, 6)},
      {"mask", Bools({3, 4}, {true, true, false, true, false, false, false, false, true, true, true, true})},
      {"pk", RandomFloats({2, 2, 2, 8}, 7)},
      {"pv", RandomFloats({2, 2, 2, 6}, 8)}};
  for (int64_t opset : {22, 17, 13, 11}) ExpectConverts(m, opset, feeds);
  // Range (the causal positions) has no older form.
  ConvertResult old = ConvertTo(m, 10);
  ASSERT_FALSE(old.blockers.empty());
  EXPECT_THAT(old.blockers[0].reason, HasSubstr("Range"));
}

// 3-D inputs with head counts as attributes, sequence lengths known only at
// run time (the scale from the head size computed in the graph), an
// additive mask, and nonpad_kv_seqlen (24) with a local window (25).
TEST(ConvertAttentionTest, ThreeDimensionalAttentionWithRunTimeDimsExpands) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("q", pb::kFloat, {{2, -1, 12}})
                                        .Input("k", pb::kFloat, {{2, -1, 6}})
                                        .Input("v", pb::kFloat, {{2, -1, 4}})
                                        .Input("bias", pb::kFloat, {{-1, -1}})
                                        .Input("lens", pb::kInt64, {{2}})
                                        .Node("Attention", {"q", "k", "v", "bias", "", "", "lens"}, {"y"},
                                              {AttrInt("q_num_heads", 4), AttrInt("kv_num_heads", 2),
                                               AttrInt("is_causal", 1), AttrInt("left_window_size", 2)})
                                        .Output("y", pb::kFloat, {{2, -1, 8}})
                                        .Build(),
                                    25, 12);
  for (int64_t opset : {24, 23, 18}) {
    SCOPED_TRACE(opset);
    ConvertResult down = ConvertTo(m, opset);
    ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
    EXPECT_EQ(OpCount(down.model, "Attention"), 0);
    EXPECT_EQ(down.steps["Attention 25->24 window-attrs"], 1);
    for (int64_t s : {3, 5}) {
      SCOPED_TRACE(s);
      ExpectSameOutputs(m, down.model,
                        {{"q", RandomFloats({2, s, 12}, 9)},
                         {"k", RandomFloats({2, s, 6}, 10)},
                         {"v", RandomFloats({2, s, 4}, 11)},
                         {"bias", RandomFloats({s, s}, 12)},
                         {"lens", Int64s({2}, {s, s - 1})}});
    }
  }
  // Without the window, the 25 -> 24 step keeps the node and 24 -> 23
  // expands it for its nonpad_kv_seqlen.
  pb::GraphProto g = *m.graph;
  g.node[0].attribute.erase(g.node[0].attribute.begin() + 3);
  pb::ModelProto plain = ModelFromGraph(g, 25, 12);
  ConvertResult down = ConvertTo(plain, 23);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(down.steps["Attention 24->23 nonpad-kv-seqlen-input"], 1);
  EXPECT_EQ(OpCount(down.model, "Attention"), 0);
  ExpectSameOutputs(plain, down.model,
                    {{"q", RandomFloats({2, 4, 12}, 13)},
                     {"k", RandomFloats({2, 4, 6}, 14)},
                     {"v", RandomFloats({2, 4, 4}, 15)},
                     {"bias", RandomFloats({4, 4}, 16)},
                     {"lens", Int64s({2}, {4, 2})}});
  // Without nonpad_kv_seqlen either, the node stays an Attention at 23.
  pb::GraphProto g23 = g;
  g23.node[0].input.resize(4);
  ConvertResult kept = ConvertTo(ModelFromGraph(g23, 25, 12), 23);
  ASSERT_TRUE(kept.blockers.empty()) << kept.blockers[0].reason;
  EXPECT_EQ(OpCount(kept.model, "Attention"), 1);
}

TEST(ConvertAttentionTest, RotaryEmbeddingExpands) {
  // 3-D input with position_ids into caches of run-time dims,
  // interleaved, rotating 4 of each head's 8 values.
  pb::ModelProto m3 = ModelFromGraph(
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, 3, 16}})
          .Input("pos", pb::kInt64, {{2, 3}})
          .Input("cos", pb::kFloat, {{-1, -1}})
          .Input("sin", pb::kFloat, {{-1, -1}})
          .Node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"},
                {AttrInt("num_heads", 2), AttrInt("interleaved", 1), AttrInt("rotary_embedding_dim", 4)})
          .Output("y", pb::kFloat, {{2, 3, 16}})
          .Build(),
      23, 11);
  Feeds feeds3 = {{"x", RandomFloats({2, 3, 16}, 17)},
                  {"pos", Int64s({2, 3}, {0, 1, 2, 7, 8, 9})},
                  {"cos", RandomFloats({10, 2}, 1)},
                  {"sin", RandomFloats({10, 2}, 2)}};
  for (int64_t opset : {22, 17, 13, 11}) ExpectConverts(m3, opset, feeds3);
  // 4-D input, caches given per position, halves rotated over every dim.
  pb::ModelProto m4 = ModelFromGraph(GraphBuilder("g")
                                         .Input("x", pb::kFloat, {{1, 2, 3, 6}})
                                         .Input("cos", pb::kFloat, {{1, 3, 3}})
                                         .Input("sin", pb::kFloat, {{1, 3, 3}})
                                         .Node("RotaryEmbedding", {"x", "cos", "sin"}, {"y"})
                                         .Output("y", pb::kFloat, {{1, 2, 3, 6}})
                                         .Build(),
                                     23, 11);
  Feeds feeds4 = {{"x", RandomFloats({1, 2, 3, 6}, 18)},
                  {"cos", RandomFloats({1, 3, 3}, 19)},
                  {"sin", RandomFloats({1, 3, 3}, 20)}};
  for (int64_t opset : {22, 13}) ExpectConverts(m4, opset, feeds4);
  // A head size known only at run time blocks, named.
  pb::ModelProto dynamic = m4;
  dynamic.graph->input[0] = GraphBuilder().Input("x", pb::kFloat, {{1, 2, 3, -1}}).Build().input[0];
  ConvertResult blocked = ConvertTo(dynamic, 22);
  ASSERT_EQ(blocked.blockers.size(), 1u);
  EXPECT_THAT(blocked.blockers[0].reason, HasSubstr("head size"));
}

// TensorScatter (24), a KV cache update: ScatterElements at write_indices
// along the axis, wrapping when circular; without write_indices from 0.
TEST(ConvertAttentionTest, TensorScatterExpands) {
  for (const char* mode : {"linear", "circular"}) {
    SCOPED_TRACE(mode);
    pb::ModelProto m = ModelFromGraph(
        GraphBuilder("g")
            .Input("cache", pb::kFloat, {{2, 3, 6, 4}})
            .Input("update", pb::kFloat, {{2, 3, -1, 4}})
            .Input("at", pb::kInt64, {{2}})
            .Node("TensorScatter", {"cache", "update", "at"}, {"y"}, {AttrString("mode", mode)})
            .Node("TensorScatter", {"cache", "update"}, {"z"})
            .Output("y", pb::kFloat, {{2, 3, 6, 4}})
            .Output("z", pb::kFloat, {{2, 3, 6, 4}})
            .Build(),
        24, 12);
    for (int64_t opset : {23, 17, 11}) {
      SCOPED_TRACE(opset);
      ConvertResult down = ConvertTo(m, opset);
      ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
      EXPECT_EQ(OpCount(down.model, "TensorScatter"), 0);
      ExpectValid(down.model);
      for (int64_t s : {1, 2}) {
        // Circular wraps past the end (start 5 of 6); linear stays inside.
        const int64_t last = std::string(mode) == "circular" ? 5 : 6 - s;
        ExpectSameOutputs(m, down.model,
                          {{"cache", RandomFloats({2, 3, 6, 4}, 30)},
                           {"update", RandomFloats({2, 3, s, 4}, 31)},
                           {"at", Int64s({2}, {0, last})}});
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
