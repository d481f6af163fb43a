// Elementwise shape functions: unary ops, broadcasting (binary, variadic,
// Where, legacy opset < 7), attribute-typed ops (Cast, quantization,
// random *Like), and the types the schema gives.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

TEST(ElementwiseTest, UnaryKeepsShapeAndSymbols) {
  EXPECT_EQ(Infer({.op = "Relu", .inputs = {In("x", {-1, 3})}}), "float[d0, 3]");
  EXPECT_EQ(Infer({.op = "Sqrt", .inputs = {In("x", {2, 3}, pb::kDouble)}}), "double[2, 3]");
  EXPECT_EQ(Infer({.op = "IsNaN", .inputs = {In("x", {4})}}), "bool[4]");
}

TEST(ElementwiseTest, BroadcastsNumpyStyle) {
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {2, 3, 4}), In("b", {4})}}), "float[2, 3, 4]");
  EXPECT_EQ(Infer({.op = "Mul", .inputs = {In("a", {2, 1, 4}), In("b", {3, 1})}}), "float[2, 3, 4]");
  EXPECT_EQ(Infer({.op = "Sub", .inputs = {In("a", {-1, 1}), In("b", {1, 5})}}), "float[d0, 5]");
  EXPECT_EQ(Infer({.op = "Equal", .inputs = {In("a", {3}, pb::kInt64), In("b", {}, pb::kInt64)}}), "bool[3]");
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {0, 3}), In("b", {1, 3})}}), "float[0, 3]");
}

TEST(ElementwiseTest, SymbolicDimsBroadcast) {
  // Two different symbols: unknown; a symbol against 1: the symbol; a known
  // dim other than 1 wins over a symbol.
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {-1}), In("b", {1})}}), "float[d0]");
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {-1}), In("b", {7})}}), "float[7]");
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {2, -1}), In("b", {-1, 2})}}), "float[2, 2]");
  // a [d0] against b [1, d1]: d0 and d1 may differ.
  EXPECT_EQ(Infer({.op = "Add", .inputs = {In("a", {-1}), In("b", {1, -1})}}), "float[1, ?]");
}

TEST(ElementwiseTest, IncompatibleBroadcastIsE0601) {
  OneNode add{.op = "Add", .inputs = {In("a", {2, 3}), In("b", {4})}};
  EXPECT_THAT(IssuesOf(add), ElementsAre("E0601 graph 'g' › node 'n' (Add): Add: incompatible dims 3 and 4 at "
                                         "axis 1 of the broadcast shapes [2, 3] and [4]"));
  EXPECT_EQ(Infer(add), "float?");
  EXPECT_THAT(IssuesOf({.op = "Add", .inputs = {In("a", {0, 3}), In("b", {2, 3})}}), SizeIs(1));
}

TEST(ElementwiseTest, VariadicAndWhere) {
  EXPECT_EQ(Infer({.op = "Sum", .inputs = {In("a", {3, 1}), In("b", {4}), In("c", {1, 1})}}), "float[3, 4]");
  EXPECT_EQ(Infer({.op = "Max", .inputs = {In("a", {5})}}), "float[5]");
  EXPECT_EQ(Infer({.op = "Where", .inputs = {In("c", {2, 1}, pb::kBool), In("x", {3}, pb::kInt32), In("z", {}, pb::kInt32)}}),
            "int32[2, 3]");
  EXPECT_THAT(IssuesOf({.op = "Mean", .inputs = {In("a", {3}), In("b", {2})}}), SizeIs(1));
}

TEST(ElementwiseTest, LegacyBroadcastFollowsA) {
  // Add-6 with broadcast=1, axis=1: B [3] is broadcast onto A.
  EXPECT_EQ(Infer({.op = "Add",
                   .inputs = {In("a", {2, 3, 4}), In("b", {3})},
                   .attributes = {AttrInt("broadcast", 1), AttrInt("axis", 1)},
                   .opset = 6}),
            "float[2, 3, 4]");
}

TEST(ElementwiseTest, CastTypesFromAttribute) {
  EXPECT_EQ(Infer({.op = "Cast", .inputs = {In("x", {2, -1})}, .attributes = {AttrInt("to", pb::kInt64)}}),
            "int64[2, d1]");
  EXPECT_EQ(Infer({.op = "Cast", .inputs = {In("x", {2})}, .attributes = {AttrString("to", "DOUBLE")}, .opset = 5}),
            "double[2]");
  EXPECT_EQ(Infer({.op = "CastLike", .inputs = {In("x", {2}), In("t", {}, pb::kFloat16)}}), "float16[2]");
}

TEST(ElementwiseTest, QuantizationTypes) {
  EXPECT_EQ(Infer({.op = "QuantizeLinear", .inputs = {In("x", {2, 3}), In("s", {})}}), "uint8[2, 3]");
  EXPECT_EQ(Infer({.op = "QuantizeLinear", .inputs = {In("x", {2, 3}), In("s", {}), In("z", {}, pb::kInt8)}}),
            "int8[2, 3]");
  EXPECT_EQ(Infer({.op = "QuantizeLinear",
                   .inputs = {In("x", {2}), In("s", {})},
                   .attributes = {AttrInt("output_dtype", pb::kInt4)}}),
            "int4[2]");
  EXPECT_EQ(Infer({.op = "DequantizeLinear", .inputs = {In("x", {4}, pb::kUint8), In("s", {})}, .opset = 13}),
            "float[4]");
  EXPECT_EQ(Infer({.op = "DequantizeLinear", .inputs = {In("x", {4}, pb::kInt8), In("s", {}, pb::kFloat16)}}),
            "float16[4]");
  OneNode dynamic{.op = "DynamicQuantizeLinear", .inputs = {In("x", {3, 2})}, .outputs = {"y", "s", "z"}};
  EXPECT_EQ(Infer(dynamic, "y"), "uint8[3, 2]");
  EXPECT_EQ(Infer(dynamic, "s"), "float[]");
  EXPECT_EQ(Infer(dynamic, "z"), "uint8[]");
}

TEST(ElementwiseTest, DtypeAttributeOps) {
  EXPECT_EQ(Infer({.op = "RandomUniformLike", .inputs = {In("x", {2, 3})}}), "float[2, 3]");
  EXPECT_EQ(Infer({.op = "RandomNormalLike", .inputs = {In("x", {2})}, .attributes = {AttrInt("dtype", pb::kDouble)}}),
            "double[2]");
  EXPECT_EQ(Infer({.op = "EyeLike", .inputs = {In("x", {3, 3}, pb::kInt32)}}), "int32[3, 3]");
  EXPECT_THAT(IssuesOf({.op = "EyeLike", .inputs = {In("x", {3})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (EyeLike): EyeLike: input must have rank 2, got rank 1"));
  EXPECT_EQ(Infer({.op = "Bernoulli", .inputs = {In("x", {4})}}), "float[4]");
}

TEST(ElementwiseTest, DropoutMask) {
  OneNode dropout{.op = "Dropout", .inputs = {In("x", {2, 5})}, .outputs = {"y", "mask"}};
  EXPECT_EQ(Infer(dropout, "y"), "float[2, 5]");
  EXPECT_EQ(Infer(dropout, "mask"), "bool[2, 5]");
}

TEST(ElementwiseTest, ClipAndPRelu) {
  EXPECT_EQ(Infer({.op = "Clip", .inputs = {In("x", {2, 3}), In("lo", {}), In("hi", {})}}), "float[2, 3]");
  EXPECT_EQ(Infer({.op = "PRelu", .inputs = {In("x", {1, 3, 8}), In("slope", {3, 1})}}), "float[1, 3, 8]");
}

TEST(ElementwiseTest, UnknownInputsGiveNoIssue) {
  OneNode add{.op = "Add", .inputs = {::onnxkit::testing::MakeValueInfo("a"), In("b", {4})}};
  EXPECT_THAT(IssuesOf(add), IsEmpty());
  EXPECT_EQ(Infer(add), "float?");  // the element type still comes from b
}

}  // namespace
}  // namespace onnxkit::infer::testing
