// Tests of the push-transpose pass (passes/push_transpose.cc): every push
// is proved by running the model before and after on the reference backend.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/eliminate_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};

// An NHWC export of two convolutions: each is Transpose -> Conv ->
// Transpose, with the bias Add, a Relu and a Clip in NHWC between them, and
// a global mean over H and W at the end.
pb::ModelProto NhwcConvNet() {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2, 6, 5, 3}})
                            .Initializer(InitializerFrom("w1", RandomFloats({4, 3, 3, 3}, 11)))
                            .Initializer(InitializerFrom("w2", RandomFloats({4, 4, 1, 1}, 12)))
                            .Initializer(InitializerFrom("b1", RandomFloats({4}, 13)))
                            .Initializer(InitializerFrom("lo", Floats({}, {0.f})))
                            .Initializer(InitializerFrom("hi", Floats({}, {6.f})))
                            .Node("Transpose", {"x"}, {"t0"}, {AttrInts("perm", kToNchw)})
                            .Node("Conv", {"t0", "w1"}, {"c1"}, {AttrInts("pads", {1, 1, 1, 1})})
                            .Node("Transpose", {"c1"}, {"t1"}, {AttrInts("perm", kToNhwc)})
                            .Node("Add", {"t1", "b1"}, {"a1"})
                            .Node("Relu", {"a1"}, {"r1"})
                            .Node("Clip", {"r1", "lo", "hi"}, {"k1"})
                            .Node("Transpose", {"k1"}, {"t2"}, {AttrInts("perm", kToNchw)})
                            .Node("Conv", {"t2", "w2"}, {"c2"})
                            .Node("Transpose", {"c2"}, {"t3"}, {AttrInts("perm", kToNhwc)})
                            .Node("ReduceMean", {"t3"}, {"y"}, {AttrInts("axes", {1, 2}), AttrInt("keepdims", 0)})
                            .Output("y", pb::kFloat, {{2, 4}})
                            .Build(),
                        13);
}

TEST(PushTransposeTest, NhwcConvolutionsKeepOnlyTheInputTranspose) {
  pb::ModelProto m = NhwcConvNet();
  PassResult r = RunOrFail(m, "push-transpose,merge-transpose");
  // The input's NHWC -> NCHW stays; the bias Add and Relu now read the
  // Conv's output directly, and the mean over H and W needs no Transpose.
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  EXPECT_EQ(OutputNames(r.model), OutputNames(m));
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 6, 5, 3}, 14)}});
  ExpectFixedPoint(r.model, "push-transpose,merge-transpose");
  ExpectValid(r.model);
}

TEST(PushTransposeTest, TheDefaultPipelineThenFoldsTheBiasIntoTheConv) {
  pb::ModelProto m = NhwcConvNet();
  PassResult r = RunOrFail(m, "default");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  EXPECT_EQ(OpCount(r.model, "Add"), 0);  // the bias, now per channel of the NCHW Conv output
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 6, 5, 3}, 15)}});
}

// x[2, 3, 4, 5] -> Transpose(perm) -> `op` -> y
pb::ModelProto OneOp(const std::string& op, std::vector<int64_t> perm, std::vector<pb::AttributeProto> attrs,
                     int64_t opset, std::vector<std::string> extra_inputs = {},
                     std::vector<pb::TensorProto> inits = {}, int32_t out_type = pb::kFloat) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 3, 4, 5}});
  for (pb::TensorProto& t : inits) b.Initializer(std::move(t));
  std::vector<std::string> inputs = {"t"};
  inputs.insert(inputs.end(), extra_inputs.begin(), extra_inputs.end());
  b.Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", std::move(perm))})
      .Node(op, inputs, {"y"}, std::move(attrs))
      .Output("y", op == "ArgMax" ? pb::kInt64 : out_type);
  return ModelFromGraph(b.Build(), opset);
}

void ExpectPushed(const pb::ModelProto& m, int transposes_after, double tol = 1e-5) {
  PassResult r = RunOrFail(m, "push-transpose");
  EXPECT_GE(r.rewrites, 1);
  EXPECT_EQ(OpCount(r.model, "Transpose"), transposes_after);
  // The op reads the Transpose's input now.
  bool reads_x = false;
  for (const pb::NodeProto& n : r.model.graph->node) {
    if (n.op_type != "Transpose" && !n.input.empty() && n.input[0] == "x") reads_x = true;
  }
  EXPECT_TRUE(reads_x);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4, 5}, 21)}}, tol, tol);
  ExpectValid(r.model);
}

TEST(PushTransposeTest, ReductionsMoveTheirAxes) {
  const std::vector<int64_t> perm = {0, 2, 3, 1};
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceL2"}) {
    SCOPED_TRACE(op);
    // keepdims 1: the Transpose follows; keepdims 0 over dims 1 and 2 of
    // the NHWC view (H, W): the kept N, C need none.
    ExpectPushed(OneOp(op, perm, {AttrInts("axes", {1, 3}), AttrInt("keepdims", 1)}, 13), 1);
    ExpectPushed(OneOp(op, perm, {AttrInts("axes", {1, 2}), AttrInt("keepdims", 0)}, 13), 0);
    ExpectPushed(OneOp(op, perm, {AttrInts("axes", {2}), AttrInt("keepdims", 0)}, 13), 1);
    // Every axis: no Transpose at all.
    ExpectPushed(OneOp(op, perm, {AttrInt("keepdims", 0)}, 13), 0);
  }
  // Axes as an input (ReduceSum from 13, the others from 18).
  ExpectPushed(OneOp("ReduceSum", perm, {AttrInt("keepdims", 0)}, 13, {"axes"},
                     {InitializerFrom("axes", Int64s({2}, {-3, 2}))}),
               0);
  ExpectPushed(OneOp("ReduceMean", perm, {}, 18, {"axes"}, {InitializerFrom("axes", Int64s({1}, {3}))}), 1);
  // Over C without keeping it: N, H, W in both layouts.
  ExpectPushed(OneOp("ArgMax", perm, {AttrInt("axis", 3), AttrInt("keepdims", 0)}, 13), 0);
  ExpectPushed(OneOp("ArgMax", perm, {AttrInt("axis", 1), AttrInt("keepdims", 0)}, 13), 1);
  ExpectPushed(OneOp("ArgMax", perm, {AttrInt("axis", -1), AttrInt("keepdims", 1)}, 13), 1);
}

TEST(PushTransposeTest, ElementwiseSoftmaxAndQuantization) {
  const std::vector<int64_t> perm = {0, 2, 3, 1};
  ExpectPushed(OneOp("Sigmoid", perm, {}, 13), 1);
  ExpectPushed(OneOp("Cast", perm, {AttrInt("to", pb::kFloat16)}, 13, {}, {}, pb::kFloat16), 1, 1e-3);
  ExpectPushed(OneOp("Softmax", perm, {AttrInt("axis", 2)}, 13), 1);
  // A per-channel constant of the NHWC view (rank 1) and a full-rank one.
  ExpectPushed(OneOp("Mul", perm, {}, 13, {"c"}, {InitializerFrom("c", RandomFloats({3}, 22))}), 1);
  ExpectPushed(OneOp("Sub", perm, {}, 13, {"c"}, {InitializerFrom("c", RandomFloats({1, 4, 1, 3}, 23))}), 1);
  pb::ModelProto where = ModelFromGraph(GraphBuilder("main")
                                            .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                                            .Initializer(InitializerFrom("c", Bools({5, 1}, {1, 0, 0, 1, 1})))
                                            .Initializer(InitializerFrom("k", RandomFloats({3}, 24)))
                                            .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                                            .Node("Where", {"c", "t", "k"}, {"y"})
                                            .Output("y", pb::kFloat)
                                            .Build(),
                                        13);
  PassResult w = RunOrFail(where, "push-transpose");
  EXPECT_EQ(OpCount(w.model, "Transpose"), 1);
  ExpectSameOutputs(where, w.model, {{"x", RandomFloats({2, 3, 4, 5}, 25)}});
  // QuantizeLinear per axis on C (axis 3 of the NHWC view, 1 after).
  pb::ModelProto q = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                                        .Initializer(InitializerFrom("s", Floats({3}, {0.01f, 0.02f, 0.05f})))
                                        .Initializer(InitializerFrom("z", Uint8s({3}, {100, 128, 3})))
                                        .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                                        .Node("QuantizeLinear", {"t", "s", "z"}, {"y"}, {AttrInt("axis", 3)})
                                        .Output("y", pb::kUint8)
                                        .Build(),
                                    13);
  ExpectPushed(q, 1, 0);
}

TEST(PushTransposeTest, PadSliceAndResizeMoveTheirPerDimLists) {
  const std::vector<int64_t> perm = {0, 2, 3, 1};
  // Pad: pads as an attribute (before 11), as an input, and per axis (18).
  ExpectPushed(OneOp("Pad", perm, {AttrInts("pads", {0, 1, 2, 0, 0, 0, 1, 3})}, 9), 1);
  ExpectPushed(OneOp("Pad", perm, {AttrString("mode", "reflect")}, 13, {"pads"},
                     {InitializerFrom("pads", Int64s({8}, {0, 1, 2, 1, 0, 2, 1, 0}))}),
               1);
  ExpectPushed(
      OneOp("Pad", perm, {}, 18, {"pads", "cv", "axes"},
            {InitializerFrom("pads", Int64s({4}, {1, 2, 3, 0})), InitializerFrom("cv", Floats({}, {-1.f})),
             InitializerFrom("axes", Int64s({2}, {3, -3}))}),
      1);
  // Slice: axes given, axes implied by starts, attributes (before 10).
  ExpectPushed(
      OneOp("Slice", perm, {}, 13, {"st", "en", "ax", "sp"},
            {InitializerFrom("st", Int64s({2}, {1, -1})), InitializerFrom("en", Int64s({2}, {4, -5})),
             InitializerFrom("ax", Int64s({2}, {2, 3})), InitializerFrom("sp", Int64s({2}, {2, -1}))}),
      1);
  ExpectPushed(
      OneOp("Slice", perm, {}, 13, {"st", "en"},
            {InitializerFrom("st", Int64s({2}, {0, 1})), InitializerFrom("en", Int64s({2}, {1, 3}))}),
      1);
  ExpectPushed(
      OneOp("Slice", perm, {AttrInts("starts", {1}), AttrInts("ends", {3}), AttrInts("axes", {3})}, 9), 1);
  // Resize by scales and by sizes.
  ExpectPushed(OneOp("Resize", perm, {AttrString("mode", "linear")}, 13, {"", "sc"},
                     {InitializerFrom("sc", Floats({4}, {1, 2, 1.5f, 1}))}),
               1);
  ExpectPushed(OneOp("Resize", perm, {AttrString("mode", "nearest")}, 13, {"", "", "sz"},
                     {InitializerFrom("sz", Int64s({4}, {2, 3, 7, 3}))}),
               1);
  // An operand of ones in every dim computed at run time stays as it is.
  pb::ModelProto ones = ModelFromGraph(GraphBuilder("main")
                                           .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                                           .Input("s", pb::kFloat, {{1, 1}})
                                           .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                                           .Node("Mul", {"t", "s"}, {"y"})
                                           .Output("y", pb::kFloat)
                                           .Build(),
                                       13);
  PassResult r = RunOrFail(ones, "push-transpose");
  EXPECT_EQ(r.rewrites, 1);
  ExpectSameOutputs(ones, r.model, {{"x", RandomFloats({2, 3, 4, 5}, 26)}, {"s", RandomFloats({1, 1}, 27)}});
}

TEST(PushTransposeTest, OperandsTransposedAlikeShareOneTranspose) {
  // Add(T(a), T(b)) -> T(Add(a, b)); Concat of two alike and a constant.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2, 3, 4}})
                                        .Input("b", pb::kFloat, {{2, 3, 4}})
                                        .Initializer(InitializerFrom("k", RandomFloats({4, 2, 1}, 31)))
                                        .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {2, 0, 1})})
                                        .Node("Transpose", {"b"}, {"u"}, {AttrInts("perm", {2, 0, 1})})
                                        .Node("Add", {"t", "u"}, {"s"})
                                        .Node("Transpose", {"b"}, {"v"}, {AttrInts("perm", {2, 0, 1})})
                                        .Node("Concat", {"s", "v", "k"}, {"y"}, {AttrInt("axis", 2)})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13);
  PassResult r = RunOrFail(m, "push-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({2, 3, 4}, 32)}, {"b", RandomFloats({2, 3, 4}, 33)}});
  ExpectValid(r.model);
}

TEST(PushTransposeTest, ABlockInputReadTwiceIsCopiedForEachReader) {
  // NHWC residual block: the block input r (a Transpose back to NHWC) feeds
  // the next convolution's Transpose and the residual Add, whose other
  // operand is NHWC too. Copied per reader, every Transpose but the input's
  // goes.
  pb::ModelProto m =
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kFloat, {{1, 5, 6, 4}})
                         .Initializer(InitializerFrom("w1", RandomFloats({4, 4, 3, 3}, 41)))
                         .Initializer(InitializerFrom("w2", RandomFloats({4, 4, 3, 3}, 42)))
                         .Node("Transpose", {"x"}, {"t0"}, {AttrInts("perm", kToNchw)})
                         .Node("Conv", {"t0", "w1"}, {"c1"}, {AttrInts("pads", {1, 1, 1, 1})})
                         .Node("Relu", {"c1"}, {"r1"})
                         .Node("Transpose", {"r1"}, {"r"}, {AttrInts("perm", kToNhwc)})  // read twice
                         .Node("Transpose", {"r"}, {"t2"}, {AttrInts("perm", kToNchw)})
                         .Node("Conv", {"t2", "w2"}, {"c2"}, {AttrInts("pads", {1, 1, 1, 1})})
                         .Node("Transpose", {"c2"}, {"t3"}, {AttrInts("perm", kToNhwc)})
                         .Node("Add", {"t3", "r"}, {"s"})
                         .Node("Relu", {"s"}, {"y"})
                         .Output("y", pb::kFloat, {{1, 5, 6, 4}})
                         .Build(),
                     13);
  PassResult r = RunOrFail(m, "push-transpose,merge-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 2);  // the input's and the output's
  ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 5, 6, 4}, 43)}});
  ExpectValid(r.model);
  // Two readers that both need the Transpose (no undoing one): left alone.
  pb::ModelProto two = ModelFromGraph(GraphBuilder("main")
                                          .Input("x", pb::kFloat, {{2, 3, 4}})
                                          .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", {1, 2, 0})})
                                          .Node("Relu", {"t"}, {"a"})
                                          .Node("Neg", {"t"}, {"b"})
                                          .Node("Transpose", {"t"}, {"c"}, {AttrInts("perm", {2, 0, 1})})
                                          .Output("a", pb::kFloat)
                                          .Output("b", pb::kFloat)
                                          .Output("c", pb::kFloat)
                                          .Build(),
                                      13);
  EXPECT_EQ(RunOrFail(two, "push-transpose").rewrites, 0);
}

TEST(PushTransposeTest, APadBeforeTheLayoutChangeFoldsIntoTheConv) {
  // NHWC 'SAME' padding: Pad (NHWC pads) -> Transpose -> Conv. The
  // Transpose goes above the Pad, which fuse-pad then folds into the Conv;
  // pads as an attribute (before 11), as an input, and per axis (18).
  struct Case {
    int64_t opset;
    std::vector<int64_t> pads, axes;
  };
  for (const Case& c : {Case{9, {0, 0, 1, 0, 0, 1, 2, 0}, {}}, Case{13, {0, 0, 1, 0, 0, 1, 2, 0}, {}},
                        Case{18, {0, 1, 1, 2}, {1, -2}}}) {
    SCOPED_TRACE(c.opset);
    GraphBuilder b("main");
    b.Input("x", pb::kFloat, {{1, 6, 7, 3}})
        .Initializer(InitializerFrom("w", RandomFloats({4, 3, 3, 3}, 51)));
    std::vector<std::string> pad_inputs = {"x"};
    std::vector<pb::AttributeProto> pad_attrs;
    if (c.opset < 11) {
      pad_attrs.push_back(AttrInts("pads", c.pads));
    } else {
      b.Initializer(InitializerFrom("pads", Int64s({static_cast<int64_t>(c.pads.size())}, c.pads)));
      pad_inputs.push_back("pads");
      if (!c.axes.empty()) {
        b.Initializer(InitializerFrom("axes", Int64s({static_cast<int64_t>(c.axes.size())}, c.axes)));
        pad_inputs.push_back("");
        pad_inputs.push_back("axes");
      }
    }
    pb::ModelProto m = ModelFromGraph(b.Node("Pad", pad_inputs, {"p"}, pad_attrs)
                                          .Node("Transpose", {"p"}, {"t"}, {AttrInts("perm", kToNchw)})
                                          .Node("Conv", {"t", "w"}, {"y"})
                                          .Output("y", pb::kFloat)
                                          .Build(),
                                      c.opset);
    PassResult r = RunOrFail(m, "push-transpose,fuse-pad");
    EXPECT_EQ(OpCount(r.model, "Pad"), 0);
    EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
    ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 6, 7, 3}, 52)}});
    ExpectValid(r.model);
    ExpectFixedPoint(r.model, "push-transpose");
  }
}

TEST(PushTransposeTest, NearMissesAreLeftAlone) {
  const std::vector<int64_t> perm = {0, 2, 3, 1};
  std::vector<pb::ModelProto> misses = {
      // Softmax before opset 13 flattens from its axis on.
      OneOp("Softmax", perm, {AttrInt("axis", 3)}, 11),
      // The other operand is a graph input: it would need a Transpose too.
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                         .Input("b", pb::kFloat, {{2, 4, 5, 3}})
                         .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                         .Node("Add", {"t", "b"}, {"y"})
                         .Output("y", pb::kFloat)
                         .Build(),
                     13),
      // The Transpose has a second reader.
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                         .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                         .Node("Relu", {"t"}, {"y"})
                         .Node("Neg", {"t"}, {"z"})
                         .Output("y", pb::kFloat)
                         .Output("z", pb::kFloat)
                         .Build(),
                     13),
      // An op that cares about the layout.
      OneOp("Flatten", perm, {AttrInt("axis", 2)}, 13),
      // A legacy broadcast (opset < 7): b lines up with the dims from `axis`
      // on ([2, 4, 5, 4]'s second), not with the last.
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kFloat, {{2, 4, 4, 5}})
                         .Initializer(InitializerFrom("b", RandomFloats({4}, 3)))
                         .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                         .Node("Add", {"t", "b"}, {"y"}, {AttrInt("broadcast", 1), AttrInt("axis", 1)})
                         .Output("y", pb::kFloat)
                         .Build(),
                     6),
      // DequantizeLinear: QDQ runtimes want it right before the op it
      // quantizes (and its float side is the larger one).
      ModelFromGraph(GraphBuilder("main")
                         .Input("x", pb::kUint8, {{2, 3, 4, 5}})
                         .Initializer(InitializerFrom("s", Floats({}, {0.1f})))
                         .Node("Transpose", {"x"}, {"t"}, {AttrInts("perm", perm)})
                         .Node("DequantizeLinear", {"t", "s"}, {"y"})
                         .Output("y", pb::kFloat)
                         .Build(),
                     13),
  };
  for (const pb::ModelProto& m : misses) {
    PassResult r = RunOrFail(m, "push-transpose");
    EXPECT_EQ(r.rewrites, 0);
  }
}

TEST(PushTransposeTest, WorksInsideAnIfBody) {
  pb::GraphProto body = GraphBuilder("body")
                            .Node("Transpose", {"x"}, {"t1"}, {AttrInts("perm", {1, 0})})
                            .Node("Relu", {"t1"}, {"r"})
                            .Node("Transpose", {"r"}, {"out"}, {AttrInts("perm", {1, 0})})
                            .Build();
  pb::ModelProto m = InIf(body, "out", {{"x", {2, 3}}}, {2, 3});
  PassResult r = RunOrFail(m, "push-transpose,merge-transpose");
  EXPECT_EQ(OpCount(r.model, "Transpose"), 0);
  ExpectSameOutputs(m, r.model, {{"c", BoolScalar(true)}, {"x", RandomFloats({2, 3}, 34)}}, 0, 0);
}

}  // namespace
}  // namespace onnxkit::testing
