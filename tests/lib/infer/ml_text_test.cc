// ai.onnx.ml, text and training-optimizer shape functions; ImageDecoder.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {
using onnxkit::testing::AttrStrings;

TEST(MlTest, LabelEncoderAndCategoryMapper) {
  EXPECT_EQ(Infer({.op = "LabelEncoder",
                   .inputs = {In("x", {3}, pb::kString)},
                   .attributes = {AttrStrings("keys_strings", {"a"}), AttrInts("values_int64s", {1})},
                   .domain = "ai.onnx.ml"}),
            "int64[3]");
  EXPECT_EQ(Infer({.op = "CategoryMapper", .inputs = {In("x", {2, 2}, pb::kInt64)}, .domain = "ai.onnx.ml"}),
            "string[2, 2]");
}

TEST(MlTest, ClassifiersAndTrees) {
  OneNode c{.op = "LinearClassifier",
            .inputs = {In("x", {5, 3})},
            .outputs = {"y", "z"},
            .attributes = {AttrInts("classlabels_ints", {0, 1})},
            .domain = "ai.onnx.ml"};
  EXPECT_EQ(Infer(c), "int64[5]");
  c.attributes = {AttrStrings("classlabels_strings", {"a", "b"})};
  EXPECT_EQ(Infer(c), "string[5]");
  EXPECT_EQ(Infer(c, "z"), "float?");
  EXPECT_EQ(Infer({.op = "TreeEnsemble",
                   .inputs = {In("x", {6, 4})},
                   .attributes = {AttrInt("n_targets", 2)},
                   .domain = "ai.onnx.ml"}),
            "float[6, 2]");
  EXPECT_EQ(Infer({.op = "ArrayFeatureExtractor",
                   .inputs = {In("x", {3, 4}), In("i", {2}, pb::kInt64)},
                   .domain = "ai.onnx.ml"}),
            "float[3, 2]");
}

TEST(TextTest, TfIdfStringOps) {
  EXPECT_EQ(Infer({.op = "TfIdfVectorizer",
                   .inputs = {In("x", {2, 6}, pb::kInt32)},
                   .attributes = {AttrInts("ngram_indexes", {0, 1, 2, 3}), AttrString("mode", "TF")}}),
            "float[2, 4]");
  EXPECT_EQ(Infer({.op = "StringNormalizer", .inputs = {In("x", {3}, pb::kString)}}), "string[3]");
  EXPECT_EQ(Infer({.op = "StringNormalizer",
                   .inputs = {In("x", {1, 3}, pb::kString)},
                   .attributes = {AttrStrings("stopwords", {"a"})}}),
            "string[1, ?]");
  OneNode split{.op = "StringSplit", .inputs = {In("x", {2}, pb::kString)}, .outputs = {"y", "n"}};
  EXPECT_EQ(Infer(split), "string[2, ?]");
  EXPECT_EQ(Infer(split, "n"), "int64[2]");
}

TEST(ImageDecoderInferTest, ChannelsFollowThePixelFormat) {
  OneNode rgb{.op = "ImageDecoder", .inputs = {In("x", {100}, pb::kUint8)}, .opset = 20};
  EXPECT_EQ(Infer(rgb), "uint8[?, ?, 3]");
  OneNode gray{.op = "ImageDecoder",
               .inputs = {In("x", {100}, pb::kUint8)},
               .attributes = {AttrString("pixel_format", "Grayscale")},
               .opset = 20};
  EXPECT_EQ(Infer(gray), "uint8[?, ?, 1]");
}

TEST(TrainingTest, OptimizerOutputsFollowTheirInputs) {
  OneNode adam{.op = "Adam",
               .inputs = {In("r", {}), In("t", {}, pb::kInt64), In("x1", {3}), In("x2", {2, 2}, pb::kDouble),
                          In("g1", {3}), In("g2", {2, 2}, pb::kDouble), In("v1", {3}), In("v2", {2, 2}, pb::kDouble),
                          In("h1", {3}), In("h2", {2, 2}, pb::kDouble)},
               .outputs = {"x1n", "x2n", "v1n", "v2n", "h1n", "h2n"},
               .domain = "ai.onnx.preview.training"};
  EXPECT_EQ(Infer(adam, "x1n"), "float[3]");
  EXPECT_EQ(Infer(adam, "v2n"), "double[2, 2]");
  EXPECT_EQ(Infer(adam, "h2n"), "double[2, 2]");
}

}  // namespace
}  // namespace onnxkit::infer::testing
