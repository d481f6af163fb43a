// Normalization, loss and recurrent shape functions.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST(NormTest, BatchNormalization) {
  OneNode bn{.op = "BatchNormalization",
             .inputs = {In("x", {2, 3, 8, 8}), In("s", {3}), In("b", {3}), In("m", {3}), In("v", {3})},
             .outputs = {"y", "rm", "rv"},
             .attributes = {AttrInt("training_mode", 1)}};
  EXPECT_EQ(Infer(bn), "float[2, 3, 8, 8]");
  EXPECT_EQ(Infer(bn, "rm"), "float[3]");
  bn.inputs[1] = In("s", {4});
  EXPECT_THAT(IssuesOf(bn), ElementsAre("E0601 graph 'g' › node 'n' (BatchNormalization): BatchNormalization: "
                                        "input 'scale' has shape [4], expected [3] (the channels of X)"));
}

TEST(NormTest, LayerNormalizationStatistics) {
  OneNode ln{.op = "LayerNormalization",
             .inputs = {In("x", {2, 5, 8}), In("s", {8})},
             .outputs = {"y", "mean", "inv"},
             .attributes = {AttrInt("axis", -1)}};
  EXPECT_EQ(Infer(ln), "float[2, 5, 8]");
  EXPECT_EQ(Infer(ln, "mean"), "float[2, 5, 1]");
  ln.inputs[0] = In("x", {2, 5, 8}, pb::kFloat16);
  EXPECT_EQ(Infer(ln, "inv"), "float[2, 5, 1]");  // stash_type: float
  ln.inputs[0] = In("x", {});
  EXPECT_THAT(IssuesOf(ln), ElementsAre("E0601 graph 'g' › node 'n' (LayerNormalization): LayerNormalization: axis "
                                        "-1 is out of range for rank 0"));
}

TEST(NormTest, SameShapeNormalizations) {
  EXPECT_EQ(Infer({.op = "InstanceNormalization", .inputs = {In("x", {2, 3, 4}), In("s", {3}), In("b", {3})}}),
            "float[2, 3, 4]");
  EXPECT_EQ(Infer({.op = "LRN", .inputs = {In("x", {2, 3, 4, 4})}, .attributes = {AttrInt("size", 3)}}),
            "float[2, 3, 4, 4]");
}

TEST(NormTest, Losses) {
  OneNode nll{.op = "NegativeLogLikelihoodLoss", .inputs = {In("x", {4, 5, 6}), In("t", {4, 6}, pb::kInt64)}};
  EXPECT_EQ(Infer(nll), "float[]");
  nll.attributes = {AttrString("reduction", "none")};
  EXPECT_EQ(Infer(nll), "float[4, 6]");
  OneNode sce{.op = "SoftmaxCrossEntropyLoss",
              .inputs = {In("x", {4, 5}), In("t", {4}, pb::kInt64)},
              .outputs = {"y", "log_prob"}};
  EXPECT_EQ(Infer(sce, "log_prob"), "float[4, 5]");
}

TEST(RecurrentTest, LstmLayouts) {
  OneNode lstm{.op = "LSTM",
               .inputs = {In("x", {7, 2, 10}), In("w", {2, 64, 10}), In("r", {2, 64, 16})},
               .outputs = {"y", "y_h", "y_c"},
               .attributes = {AttrInt("hidden_size", 16), AttrString("direction", "bidirectional")}};
  EXPECT_EQ(Infer(lstm, "y"), "float[7, 2, 2, 16]");
  EXPECT_EQ(Infer(lstm, "y_h"), "float[2, 2, 16]");
  lstm.attributes.push_back(AttrInt("layout", 1));  // x is now [batch 7, seq 2, input 10]
  EXPECT_EQ(Infer(lstm, "y"), "float[7, 2, 2, 16]");
  EXPECT_EQ(Infer(lstm, "y_c"), "float[7, 2, 16]");
}

TEST(RecurrentTest, HiddenSizeFromRAndRankCheck) {
  OneNode gru{.op = "GRU", .inputs = {In("x", {5, 3, 4}), In("w", {1, 24, 4}), In("r", {1, 24, 8})}, .outputs = {"y", "y_h"}};
  EXPECT_EQ(Infer(gru, "y_h"), "float[1, 3, 8]");
  OneNode rnn{.op = "RNN", .inputs = {In("x", {5, 4}), In("w", {1, 8, 4}), In("r", {1, 8, 8})}};
  EXPECT_THAT(IssuesOf(rnn), ElementsAre("E0601 graph 'g' › node 'n' (RNN): RNN: input X must have rank 3 "
                                         "([seq_length, batch_size, input_size]), got rank 2"));
}

TEST(AttentionTest, FourAndThreeDims) {
  OneNode a{.op = "Attention",
            .inputs = {In("q", {2, 4, 8, 16}), In("k", {2, 2, 6, 16}), In("v", {2, 2, 6, 32})},
            .opset = 23};
  EXPECT_EQ(Infer(a), "float[2, 4, 8, 32]");
  OneNode b{.op = "Attention",
            .inputs = {In("q", {2, 4, 48}), In("k", {2, 6, 48}), In("v", {2, 6, 30})},
            .attributes = {AttrInt("q_num_heads", 3), AttrInt("kv_num_heads", 3)},
            .opset = 23};
  EXPECT_EQ(Infer(b), "float[2, 4, 30]");
  b.inputs[2] = In("v", {2, 6, 31});
  EXPECT_THAT(IssuesOf(b), SizeIs(1));
}

}  // namespace
}  // namespace onnxkit::infer::testing
