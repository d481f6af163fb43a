// Reductions, ArgMax, Softmax, TopK, generators (Constant, ConstantOfShape,
// Range, random ops, windows) and shape-data propagation.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/infer/infer_test_util.h"

namespace onnxkit::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

TEST(ReduceTest, AxesAttributeAndInput) {
  EXPECT_EQ(Infer({.op = "ReduceMean", .inputs = {In("x", {2, 3, 4})}, .attributes = {AttrInts("axes", {1})}, .opset = 13}),
            "float[2, 1, 4]");
  EXPECT_EQ(Infer({.op = "ReduceMax",
                   .inputs = {In("x", {2, 3, 4})},
                   .attributes = {AttrInts("axes", {-1, 0}), AttrInt("keepdims", 0)},
                   .opset = 13}),
            "float[3]");
  EXPECT_EQ(Infer({.op = "ReduceSum", .inputs = {In("x", {2, 3, 4})}, .initializers = {Ints("a", {1})}, .opset = 13}),
            "float[2, 1, 4]");
  EXPECT_EQ(Infer({.op = "ReduceMean", .inputs = {In("x", {2, 3, 4})}, .opset = 18}), "float[1, 1, 1]");
  EXPECT_EQ(Infer({.op = "ReduceL2",
                   .inputs = {In("x", {2, 3})},
                   .attributes = {AttrInt("noop_with_empty_axes", 1)},
                   .opset = 18}),
            "float[2, 3]");
  EXPECT_EQ(Infer({.op = "ReduceSum", .inputs = {In("x", {2, 3}), In("a", {1}, pb::kInt64)}, .opset = 13}),
            "float[?, ?]");
  EXPECT_THAT(IssuesOf({.op = "ReduceMean", .inputs = {In("x", {2, 3, 4})}, .attributes = {AttrInts("axes", {3})}, .opset = 13}),
              ElementsAre("E0601 graph 'g' › node 'n' (ReduceMean): ReduceMean: axis 3 is out of range for rank 3 "
                          "(expected -3 to 2)"));
}

TEST(ReduceTest, ArgMaxSoftmaxTopK) {
  EXPECT_EQ(Infer({.op = "ArgMax", .inputs = {In("x", {2, 3})}, .attributes = {AttrInt("axis", 1)}}), "int64[2, 1]");
  EXPECT_EQ(Infer({.op = "ArgMin", .inputs = {In("x", {2, 3})}, .attributes = {AttrInt("keepdims", 0)}}), "int64[3]");
  EXPECT_EQ(Infer({.op = "Softmax", .inputs = {In("x", {2, 3})}}), "float[2, 3]");
  EXPECT_THAT(IssuesOf({.op = "Softmax", .inputs = {In("x", {2, 3})}, .attributes = {AttrInt("axis", 2)}}), SizeIs(1));
  OneNode topk{.op = "TopK", .inputs = {In("x", {5, 10})}, .outputs = {"v", "i"}, .initializers = {Ints("k", {3})}};
  EXPECT_EQ(Infer(topk, "v"), "float[5, 3]");
  EXPECT_EQ(Infer(topk, "i"), "int64[5, 3]");
  topk.initializers = {Ints("k", {11})};
  EXPECT_THAT(IssuesOf(topk), ElementsAre("E0601 graph 'g' › node 'n' (TopK): TopK: K 11 is out of range for axis 1 "
                                          "of [5, 10]"));
}

TEST(GeneratorTest, Constant) {
  OneNode c{.op = "Constant", .attributes = {AttrInts("value_ints", {2, 3, 4})}};
  EXPECT_EQ(Infer(c), "int64[3]");
  c.attributes = {AttrFloat("value_float", 1.5f)};
  EXPECT_EQ(Infer(c), "float[]");
  c.attributes = {AttrTensor("value", ::onnxkit::testing::RawFloatTensor("t", {2, 2}))};
  EXPECT_EQ(Infer(c), "float[2, 2]");
}

TEST(GeneratorTest, ConstantOfShape) {
  pb::TensorProto value = Ints("v", {1});
  value.data_type = pb::kInt32;
  value.int64_data.clear();
  value.int32_data = {1};
  EXPECT_EQ(Infer({.op = "ConstantOfShape", .attributes = {AttrTensor("value", value)}, .initializers = {Ints("s", {2, 3})}}),
            "int32[2, 3]");
  EXPECT_EQ(Infer({.op = "ConstantOfShape", .initializers = {Ints("s", {0})}}), "float[0]");
  EXPECT_EQ(Infer({.op = "ConstantOfShape", .inputs = {In("s", {3}, pb::kInt64)}}), "float[?, ?, ?]");
  EXPECT_THAT(IssuesOf({.op = "ConstantOfShape", .initializers = {Ints("s", {2, -2})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (ConstantOfShape): ConstantOfShape: input shape [2, -2] has the "
                          "negative dim -2"));
}

TEST(GeneratorTest, Range) {
  auto range = [](int64_t start, int64_t limit, int64_t delta) {
    return OneNode{.op = "Range",
                   .initializers = {Ints("s", {start}, true), Ints("l", {limit}, true), Ints("d", {delta}, true)}};
  };
  EXPECT_EQ(Infer(range(0, 10, 3)), "int64[4]");
  EXPECT_EQ(Infer(range(10, 4, -2)), "int64[3]");
  EXPECT_EQ(Infer(range(10, 4, 2)), "int64[0]");
  EXPECT_THAT(IssuesOf(range(0, 10, 0)), ElementsAre("E0601 graph 'g' › node 'n' (Range): Range: delta is 0"));
  EXPECT_EQ(Infer({.op = "Range", .inputs = {In("s", {}, pb::kInt64), In("l", {}, pb::kInt64), In("d", {}, pb::kInt64)}}),
            "int64[?]");
}

TEST(GeneratorTest, RandomAndWindows) {
  EXPECT_EQ(Infer({.op = "RandomNormal", .attributes = {AttrInts("shape", {2, 3})}}), "float[2, 3]");
  EXPECT_EQ(Infer({.op = "RandomUniform", .attributes = {AttrInts("shape", {4}), AttrInt("dtype", pb::kDouble)}}),
            "double[4]");
  EXPECT_EQ(Infer({.op = "HannWindow", .initializers = {Ints("n", {10}, true)}}), "float[10]");
  EXPECT_EQ(Infer({.op = "Multinomial", .inputs = {In("x", {3, 5})}, .attributes = {AttrInt("sample_size", 7)}}),
            "int32[3, 7]");
}

// x [N, 3, 4] -> Shape -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape: [N, 12].
TEST(DataPropagationTest, ShapeGatherUnsqueezeConcatReshape) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, std::vector<int64_t>{-1, 3, 4})
                         .Initializer(Ints("zero", {0}, true))
                         .Initializer(Ints("axes", {0}))
                         .Initializer(Ints("minus_one", {-1}))
                         .Node("Shape", {"x"}, {"s"})
                         .Node("Gather", {"s", "zero"}, {"n"})
                         .Node("Unsqueeze", {"n", "axes"}, {"n1"})
                         .Node("Concat", {"n1", "minus_one"}, {"target"}, {AttrInt("axis", 0)})
                         .Node("Reshape", {"x", "target"}, {"y"})
                         .Output("y")
                         .Build();
  pb::ModelProto m = ModelFromGraph(std::move(g), 17);
  EXPECT_EQ(TypeOf(m, "y"), "float[d0, 12]");
  EXPECT_THAT(Issues(m), IsEmpty());
}

// Shape arithmetic: Shape -> Slice -> Mul -> Expand, and Size -> Range.
TEST(DataPropagationTest, ArithmeticOnShapes) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, std::vector<int64_t>{2, 3, 4})
                         .Initializer(Ints("start", {1}))
                         .Initializer(Ints("end", {3}))
                         .Initializer(Ints("two", {2}))
                         .Initializer(Ints("zero", {0}, true))
                         .Initializer(Ints("one", {1}, true))
                         .Node("Shape", {"x"}, {"s"})
                         .Node("Slice", {"s", "start", "end"}, {"tail"})
                         .Node("Mul", {"tail", "two"}, {"doubled"})
                         .Node("Expand", {"x", "doubled"}, {"e"})
                         .Node("Size", {"x"}, {"count"})
                         .Node("Range", {"zero", "count", "one"}, {"r"})
                         .Build();
  pb::ModelProto m = ModelFromGraph(std::move(g), 17);
  EXPECT_THAT(Issues(m), ElementsAre("E0601 graph 'g' › node #3 (Expand): Expand: incompatible dims 4 and 8 at axis 2 "
                                     "of the broadcast shapes [2, 3, 4] and [6, 8]"));
  EXPECT_EQ(TypeOf(m, "r"), "int64[24]");
}

}  // namespace
}  // namespace onnxkit::infer::testing
