// Tests of `onnxkit convert --float16 / --bfloat16` (passes/convert/
// precision.h) and --inline: each case builds a small model, converts it,
// checks the structure (types, Casts, tensors) and proves the result by
// running both models on the reference backend (Convert's verification).
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "passes/convert/convert.h"
#include "runner/convert.h"
#include "runner/reference/float_types.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using passes::convert::ConvertResult;
using ::testing::HasSubstr;

struct Run {
  int32_t target = pb::kFloat16;
  bool keep_io = true;
  std::vector<std::string> keep;
  bool verify = true;
  int64_t opset = 0;
};

ConvertResult Precision(const pb::ModelProto& m, Run run = {}) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  o.target_opset = run.opset;
  passes::convert::PrecisionOptions p;
  p.target = run.target;
  p.keep_io_types = run.keep_io;
  p.keep_float32 = run.keep;
  o.precision = p;
  o.verify = run.verify;
  o.verify_options.atol = 5e-2;
  o.verify_options.rtol = 5e-2;
  o.verify_options.min_sqnr_db = 30;
  auto r = passes::convert::Convert(loaded, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return ConvertResult{};
  if (run.verify) {
    EXPECT_TRUE(r->verified) << (r->verification ? r->verification->summary : "not verified");
  }
  return *r;
}

const pb::TensorProto* Init(const pb::ModelProto& m, const std::string& name) {
  for (const pb::TensorProto& t : m.graph->initializer) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int32_t ElemOf(const pb::ValueInfoProto& v) { return v.type && v.type->tensor_type ? v.type->tensor_type->elem_type : 0; }

// x[2,4] -> MatMul(w[4,3]) -> Relu -> y
pb::ModelProto MatMulRelu(float w0 = 0.f) {
  pb::TensorProto w = RawFloatTensor("w", {4, 3}, w0);
  return ModelFromGraph(GraphBuilder("g")
                            .Input("x", pb::kFloat, {{2, 4}})
                            .Initializer(w)
                            .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
                            .Node("Relu", {"m"}, {"y"}, {}, "relu")
                            .Output("y", pb::kFloat, {{2, 3}})
                            .Build(),
                        17);
}

TEST(ConvertPrecisionTest, KeepsIoFloat32WithOneCastAtEachEdge) {
  ConvertResult r = Precision(MatMulRelu(-5.f));
  EXPECT_EQ(OpCount(r.model, "Cast"), 2);
  EXPECT_EQ(ElemOf(r.model.graph->input[0]), pb::kFloat);
  EXPECT_EQ(r.model.graph->output[0].name, "y");
  EXPECT_EQ(ElemOf(r.model.graph->output[0]), pb::kFloat);
  ASSERT_NE(Init(r.model, "w"), nullptr);
  EXPECT_EQ(Init(r.model, "w")->data_type, pb::kFloat16);
  EXPECT_EQ(Init(r.model, "w")->raw_data.size(), 12u * 2);
  EXPECT_EQ(r.precision->nodes_converted, 2);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, NoKeepIoTypesRetypesInputsAndOutputs) {
  ConvertResult r = Precision(MatMulRelu(), {.keep_io = false});
  EXPECT_EQ(OpCount(r.model, "Cast"), 0);
  EXPECT_EQ(ElemOf(r.model.graph->input[0]), pb::kFloat16);
  EXPECT_EQ(ElemOf(r.model.graph->output[0]), pb::kFloat16);
  ExpectValid(r.model);
}

// RMSNormalization types X (T) apart from scale and Y (V), yet computes on
// X: X takes the target type with the node (a Cast from the float32 graph
// input), the form runtimes implement, and the model runs: the reference
// gives Y the scale's type.
TEST(ConvertPrecisionTest, RmsNormalizationInputTakesTheTargetType) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 8}})
                                        .Initializer(RawFloatTensor("g", {8}, 1))
                                        .Initializer(RawFloatTensor("w", {8, 4}, -3))
                                        .Node("RMSNormalization", {"x", "g"}, {"n"})
                                        .Node("MatMul", {"n", "w"}, {"y"})
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    23, 11);
  ConvertResult r = Precision(m);
  ASSERT_EQ(r.model.graph->node.size(), 4u);
  EXPECT_EQ(r.model.graph->node[0].op_type, "Cast");
  EXPECT_EQ(r.model.graph->node[1].op_type, "RMSNormalization");
  EXPECT_EQ(r.model.graph->node[1].input[0], r.model.graph->node[0].output[0]);
  ExpectValid(r.model);
}

// Attention's additive mask has a type of its own (U), yet it is added to
// the scores: it takes the target type with Q, K and V.
TEST(ConvertPrecisionTest, AttentionMaskTakesTheTargetType) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 4, 8}})
                                        .Input("mask", pb::kFloat, {{4, 4}})
                                        .Initializer(RawFloatTensor("w", {8, 8}, -30))
                                        .Node("MatMul", {"x", "w"}, {"q"})
                                        .Node("Attention", {"q", "q", "q", "mask"}, {"a"},
                                              {AttrInt("q_num_heads", 2), AttrInt("kv_num_heads", 2)})
                                        .Output("a", pb::kFloat, {{1, 4, 8}})
                                        .Build(),
                                    23, 11);
  ConvertResult r = Precision(m);
  const pb::NodeProto* attention = nullptr;
  for (const pb::NodeProto& n : r.model.graph->node) {
    if (n.op_type == "Attention") attention = &n;
  }
  ASSERT_NE(attention, nullptr);
  EXPECT_NE(attention->input[3], "mask");  // a Cast of the float32 graph input
  ExpectValid(r.model);
}

// A float16 island of the original cast back to float32: once its reader
// is float16 too, the Cast back has nothing to do and becomes an Identity
// (a float16 -> float16 Cast is refused by some runtimes).
TEST(ConvertPrecisionTest, ACastBackFromAFloat16IslandBecomesIdentity) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Input("x2", pb::kFloat, {{2, 4}})
                                        .Node("Cast", {"x"}, {"xh"}, {AttrInt("to", pb::kFloat16)}, "to_half")
                                        .Node("Mul", {"xh", "xh"}, {"mh"}, {}, "mul")
                                        .Node("Cast", {"mh"}, {"m"}, {AttrInt("to", pb::kFloat)}, "back")
                                        .Node("Add", {"m", "x2"}, {"y"}, {}, "add")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  EXPECT_EQ(OpCount(r.model, "Identity"), 1);
  for (const pb::NodeProto& n : r.model.graph->node) {
    if (n.name == "back") {
      EXPECT_EQ(n.op_type, "Identity");
    }
  }
  ExpectValid(r.model);
}

// Outputs float16 cannot hold (here all below its smallest subnormal):
// the verification says the output's own type is the problem.
TEST(ConvertPrecisionTest, AnOutputOutsideFloat16IsNamedAsTheCause) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 4}})
                                        .Initializer(RawFloatTensor("s", {1}, 1e-10f))
                                        .Node("Mul", {"x", "s"}, {"y"}, {}, "mul")
                                        .Output("y", pb::kFloat, {{2, 4}})
                                        .Build(),
                                    17);
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  passes::convert::PrecisionOptions p;
  p.target = pb::kFloat16;
  p.keep_io_types = false;
  o.precision = p;
  o.verify_options.min_sqnr_db = 30;
  auto r = passes::convert::Convert(loaded, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->verification.has_value());
  EXPECT_FALSE(r->verified);
  EXPECT_THAT(r->verification->summary, HasSubstr("the float32 output itself is outside float16's range"));
  EXPECT_THAT(r->verification->summary, HasSubstr("8 of 8 nonzero values below 5.96e-08"));
  // Kept float32 at the edges, the same model converts.
  p.keep_io_types = true;
  o.precision = p;
  auto kept = passes::convert::Convert(loaded, o);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->verified) << kept->verification->summary;
}

TEST(ConvertPrecisionTest, Bfloat16NeedsOpsetsWhoseSchemasAllowIt) {
  // Relu and MatMul allow bfloat16 from opset 13/14 on: at 12 both stay.
  pb::ModelProto m = MatMulRelu();
  m.opset_import[0].version = 12;
  ConvertResult old = Precision(m, {.target = pb::kBfloat16});
  EXPECT_EQ(old.precision->nodes_converted, 0);
  EXPECT_EQ(OpCount(old.model, "Cast"), 0);
  EXPECT_EQ(Init(old.model, "w")->data_type, pb::kFloat);
  bool schema_reason = false;
  for (const auto& [reason, n] : old.precision->kept) schema_reason |= reason.find("schema") != std::string::npos;
  EXPECT_TRUE(schema_reason);
  ConvertResult now = Precision(MatMulRelu(), {.target = pb::kBfloat16});
  EXPECT_EQ(now.precision->nodes_converted, 2);
  EXPECT_EQ(Init(now.model, "w")->data_type, pb::kBfloat16);
}

TEST(ConvertPrecisionTest, KeptOpsAndKeepFloat32StayFloat32) {
  auto model = [] {
    return ModelFromGraph(GraphBuilder("g")
                              .Input("x", pb::kFloat, {{2, 3}})
                              .Node("Relu", {"x"}, {"a"}, {}, "r1")
                              .Node("Exp", {"a"}, {"b"}, {}, "exp")
                              .Node("Neg", {"b"}, {"c"}, {}, "neg")
                              .Node("Sigmoid", {"c"}, {"y"}, {}, "sig")
                              .Output("y", pb::kFloat, {{2, 3}})
                              .Build(),
                          17);
  };
  // Exp stays float32 in float16: Relu | Exp | Neg, Sigmoid.
  ConvertResult r = Precision(model());
  EXPECT_EQ(r.precision->kept.at("kept list: Exp"), 1);
  EXPECT_EQ(OpCount(r.model, "Cast"), 4);
  // bfloat16 has float32's range: Exp converts.
  ConvertResult b = Precision(model(), {.target = pb::kBfloat16});
  EXPECT_EQ(b.precision->kept.count("kept list: Exp"), 0u);
  EXPECT_EQ(OpCount(b.model, "Cast"), 2);
  // By node name and by op type.
  ConvertResult k = Precision(model(), {.keep = {"neg", "Sigmoid"}});
  EXPECT_EQ(k.precision->kept.at("--keep-float32"), 2);
  EXPECT_EQ(OpCount(k.model, "Cast"), 2);  // only around Relu
  ConvertResult none = Precision(model(), {.keep = {"NoSuchOp"}});
  EXPECT_THAT(none.warnings, ::testing::Contains(HasSubstr("NoSuchOp")));
}

// A value made by an ONNX Runtime contrib op has no known type: the
// MatMul reading it stays float32 (it would get no Cast to float16), and
// the converted model runs.
TEST(ConvertPrecisionTest, AnInputOfUnknownTypeKeepsItsReaderFloat32) {
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 4}})
                         .Initializer(RawFloatTensor("w", {4, 3}, 0.5f))
                         .Node("Gelu", {"x"}, {"g"}, {}, "gelu")
                         .Node("MatMul", {"g", "w"}, {"y"}, {}, "mm")
                         .Output("y", pb::kFloat, {{2, 3}})
                         .Build();
  g.node[0].domain = "com.microsoft";
  pb::ModelProto m = ModelFromGraph(std::move(g), 17);
  pb::OperatorSetIdProto microsoft;
  microsoft.domain = "com.microsoft";
  microsoft.version = 1;
  m.opset_import.push_back(microsoft);
  ConvertResult r = Precision(m);
  EXPECT_EQ(r.precision->kept.at("input type unknown"), 1);
  EXPECT_EQ(OpCount(r.model, "Cast"), 0);
}

TEST(ConvertPrecisionTest, ClampsOutOfRangeConstantsAndNamesThem) {
  pb::TensorProto big = RawFloatTensor("big", {3}, 70000.f);  // 70000, 70001, 70002
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3}})
                                        .Initializer(big)
                                        .Node("Min", {"x", "big"}, {"y"})
                                        .Output("y", pb::kFloat, {{3}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  ASSERT_EQ(r.precision->clamped.size(), 1u);
  EXPECT_EQ(r.precision->clamped[0].first, "big");
  EXPECT_EQ(r.precision->clamped[0].second, 3);
  EXPECT_THAT(r.warnings, ::testing::Contains(HasSubstr("'big'")));
  auto t = runner::TensorFromProto(*Init(r.model, "big"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(static_cast<float>(t->data<runner::Float16>()[2]), 65504.f);
  // bfloat16 holds 70000: nothing clamped.
  EXPECT_TRUE(Precision(m, {.target = pb::kBfloat16}).precision->clamped.empty());
}

TEST(ConvertPrecisionTest, CastToFloatIsRetargetedInsideTheConvertedRegion) {
  // ids (int64, 100 values) -> Cast(FLOAT) -> Mul(w) -> y; a second
  // Cast(FLOAT) feeds only a graph output and stays.
  pb::TensorProto w = RawFloatTensor("w", {100}, 0.5f);
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("ids", pb::kInt64, {{100}})
                                        .Initializer(w)
                                        .Node("Cast", {"ids"}, {"f"}, {AttrInt("to", pb::kFloat)}, "c1")
                                        .Node("Mul", {"f", "w"}, {"y"})
                                        .Node("Cast", {"ids"}, {"z"}, {AttrInt("to", pb::kFloat)}, "c2")
                                        .Output("y", pb::kFloat, {{100}})
                                        .Output("z", pb::kFloat, {{100}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m, {.verify = false});
  EXPECT_EQ(r.precision->casts_retargeted, 1);
  for (const pb::NodeProto& n : r.model.graph->node) {
    if (n.name == "c1") {
      EXPECT_EQ(n.attribute[0].i, pb::kFloat16);
    }
    if (n.name == "c2") {
      EXPECT_EQ(n.attribute[0].i, pb::kFloat);
    }
  }
  EXPECT_EQ(OpCount(r.model, "Cast"), 3);  // c1, c2, and y back to float32
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, ACastReadingAConvertedValueNeedsNoCastBeforeIt) {
  // x -> Relu -> Cast(to=FLOAT) -> y: the Cast stays (y is float32) and reads
  // the float16 Relu output directly.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3}})
                                        .Node("Relu", {"x"}, {"r"})
                                        .Node("Cast", {"r"}, {"y"}, {AttrInt("to", pb::kFloat)}, "keep")
                                        .Output("y", pb::kFloat, {{3}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  EXPECT_EQ(OpCount(r.model, "Cast"), 2);
  EXPECT_EQ(r.precision->casts_inserted, 1);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, InputsSharingATypeParameterKeepOneType) {
  // Less(A: T, B: T) -> bool: T binds two inputs, so both take the target
  // type even though no output carries T.
  pb::TensorProto zero = RawFloatTensor("zero", {}, 0.f);
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3, 4}})
                                        .Initializer(zero)
                                        .Node("CastLike", {"zero", "x"}, {"z"})
                                        .Node("Less", {"x", "z"}, {"lt"})
                                        .Node("Neg", {"x"}, {"n"})
                                        .Node("Where", {"lt", "n", "x"}, {"y"})
                                        .Output("y", pb::kFloat, {{3, 4}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  EXPECT_EQ(r.precision->nodes_converted, 4);
  EXPECT_EQ(OpCount(r.model, "Cast"), 2);  // x in, y out
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, IntegerDerivedShapeArithmeticStaysFloat32) {
  // Shape -> Cast(FLOAT) -> Mul([2, 0.5]) -> Cast(INT64) -> Reshape target.
  pb::TensorProto half = RawFloatTensor("half", {2}, 0.f);
  half.raw_data = Bytes::Own(FloatBytes(1, 2.f) + FloatBytes(1, 0.5f));
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{4, 6}})
                                        .Initializer(half)
                                        .Node("Relu", {"x"}, {"r"})
                                        .Node("Shape", {"r"}, {"s"})
                                        .Node("Cast", {"s"}, {"sf"}, {AttrInt("to", pb::kFloat)})
                                        .Node("Mul", {"sf", "half"}, {"h"})
                                        .Node("Cast", {"h"}, {"hi"}, {AttrInt("to", pb::kInt64)})
                                        .Node("Reshape", {"r", "hi"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  // Cast(FLOAT), Mul and Cast(INT64), which reads the float32 product.
  EXPECT_EQ(r.precision->kept.at("integer-derived float arithmetic (shapes, indices)"), 3);
  EXPECT_EQ(Init(r.model, "half")->data_type, pb::kFloat);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, ResizeScalesAndRoiStayFloat32) {
  pb::TensorProto scales = RawFloatTensor("scales", {4}, 1.f);
  scales.raw_data = Bytes::Own(FloatBytes(1, 1.f) + FloatBytes(1, 1.f) + FloatBytes(1, 2.f) + FloatBytes(1, 2.f));
  pb::TensorProto roi = RawFloatTensor("roi", {0});
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 1, 2, 2}})
                                        .Initializer(roi)
                                        .Initializer(scales)
                                        .Node("Resize", {"x", "roi", "scales"}, {"y"}, {AttrString("mode", "linear")})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    13);
  ConvertResult r = Precision(m);
  EXPECT_EQ(Init(r.model, "scales")->data_type, pb::kFloat);
  EXPECT_EQ(Init(r.model, "roi")->data_type, pb::kFloat);
  EXPECT_EQ(r.precision->nodes_converted, 1);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, IfBodiesConvertInsideWithFloat32Boundaries) {
  pb::ModelProto m = IfModelWithOuterRefs();
  ConvertResult r = Precision(m);
  EXPECT_EQ(r.precision->kept.at("control flow: inputs and outputs stay float32"), 1);
  EXPECT_GE(r.precision->nodes_converted, 2);  // Add and Neg in the branches
  EXPECT_EQ(Init(r.model, "w")->data_type, pb::kFloat16);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, LoopBodiesConvertWithCarriedValuesFloat32) {
  // v = v * w + w, three times; w (a weight: over 64 elements) is an outer
  // initializer read in the body. With a smaller w the body would stay
  // float32 (WeightlessIslandsBetweenKeptNodesStayFloat32).
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, {{}})
                            .Input("cond_in", pb::kBool, {{}})
                            .Input("v_in", pb::kFloat, {{100}})
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("Mul", {"v_in", "w"}, {"m"})
                            .Node("Add", {"m", "w"}, {"v_out"})
                            .Output("cond_out", pb::kBool, {{}})
                            .Output("v_out", pb::kFloat, {{100}})
                            .Build();
  pb::TensorProto w = RawFloatTensor("w", {100});
  std::string bytes;
  for (int k = 0; k < 100; ++k) bytes += FloatBytes(1, static_cast<float>(k - 50) / 50.f);
  w.raw_data = Bytes::Own(bytes);
  pb::TensorProto trip = RawFloatTensor("trip", {}, 0.f);
  trip.data_type = pb::kInt64;
  trip.raw_data = Bytes::Own(std::string("\x03\0\0\0\0\0\0\0", 8));
  pb::TensorProto yes = RawFloatTensor("yes", {}, 0.f);
  yes.data_type = pb::kBool;
  yes.raw_data = Bytes::Own(std::string("\x01", 1));
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{100}})
                                        .Initializer(w)
                                        .Initializer(trip)
                                        .Initializer(yes)
                                        .Node("Loop", {"trip", "yes", "x"}, {"y"}, {AttrGraph("body", body)}, "loop")
                                        .Output("y", pb::kFloat, {{100}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  EXPECT_EQ(r.precision->kept.at("control flow: inputs and outputs stay float32"), 1);
  EXPECT_EQ(r.precision->nodes_converted, 2);
  EXPECT_EQ(Init(r.model, "w")->data_type, pb::kFloat16);
  EXPECT_EQ(OpCount(r.model, "Cast"), 2);  // v_in in, v_out out, inside the body
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, ConstantNodesAndMixedReadersGetOneCopy) {
  // c (Constant value_float) read by Add; w read by Add (converted) and Exp (kept).
  pb::TensorProto w = RawFloatTensor("w", {3}, 0.25f);
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{3}})
                                        .Initializer(w)
                                        .Node("Constant", {}, {"c"}, {AttrFloat("value_float", 1.5f)})
                                        .Node("Add", {"x", "c"}, {"a"})
                                        .Node("Add", {"a", "w"}, {"b"})
                                        .Node("Exp", {"w"}, {"e"})
                                        .Node("Mul", {"b", "e"}, {"y"})
                                        .Output("y", pb::kFloat, {{3}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m);
  EXPECT_EQ(Init(r.model, "w")->data_type, pb::kFloat);
  int half_copies = 0;
  for (const pb::TensorProto& t : r.model.graph->initializer) half_copies += t.data_type == pb::kFloat16;
  EXPECT_EQ(half_copies, 1);
  ExpectValid(r.model);
}

TEST(ConvertPrecisionTest, ConvertingTwiceChangesNothing) {
  ConvertResult once = Precision(MatMulRelu());
  io::LoadedModel loaded;
  loaded.proto = once.model;
  ConvertResult twice = Precision(once.model);
  EXPECT_EQ(twice.precision->casts_inserted, 0);
  EXPECT_EQ(twice.precision->tensors_converted, 0);
  EXPECT_EQ(io::EncodedSize(twice.model), io::EncodedSize(once.model));
}

TEST(ConvertPrecisionTest, ModelsWithoutFloat32AreLeftAlone) {
  pb::ModelProto ints = ModelFromGraph(GraphBuilder("g")
                                           .Input("a", pb::kInt64, {{3}})
                                           .Input("b", pb::kInt64, {{3}})
                                           .Node("Add", {"a", "b"}, {"y"})
                                           .Output("y", pb::kInt64, {{3}})
                                           .Build(),
                                       17);
  ConvertResult r = Precision(ints);
  EXPECT_EQ(r.precision->nodes_converted, 0);
  EXPECT_EQ(io::EncodedSize(r.model), io::EncodedSize(ints));
  pb::ModelProto halves = ModelFromGraph(GraphBuilder("g")
                                             .Input("x", pb::kFloat16, {{3}})
                                             .Node("Relu", {"x"}, {"y"})
                                             .Output("y", pb::kFloat16, {{3}})
                                             .Build(),
                                         17);
  ConvertResult h = Precision(halves);
  EXPECT_EQ(OpCount(h.model, "Cast"), 0);
  EXPECT_EQ(io::EncodedSize(h.model), io::EncodedSize(halves));
  pb::ModelProto empty = ModelFromGraph(GraphBuilder("g").Build(), 17);
  ConvertResult e = Precision(empty);
  EXPECT_EQ(e.precision->nodes_converted, 0);
}

TEST(ConvertPrecisionTest, WeightlessIslandsBetweenKeptNodesStayFloat32) {
  // bfloat16 at opset 17: Conv has no bfloat16, Relu does. Converting the
  // Relu between two Convs, or the Identity of a weight, would only add Casts.
  pb::TensorProto w = RawFloatTensor("w", {1, 1, 1, 1}, 0.5f);
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, 1, 2, 2}})
                                        .Initializer(w)
                                        .Node("Identity", {"w"}, {"w2"})
                                        .Node("Conv", {"x", "w"}, {"a"})
                                        .Node("Relu", {"a"}, {"b"})
                                        .Node("Conv", {"b", "w2"}, {"y"})
                                        .Output("y", pb::kFloat, {{1, 1, 2, 2}})
                                        .Build(),
                                    17);
  ConvertResult r = Precision(m, {.target = pb::kBfloat16});
  EXPECT_EQ(OpCount(r.model, "Cast"), 0);
  EXPECT_EQ(r.precision->kept.at("no weights, between float32 nodes: converting would only add Casts"), 2);
  // At opset 22 Conv takes bfloat16 and everything converts.
  ConvertResult now = Precision(m, {.target = pb::kBfloat16, .opset = 22});
  EXPECT_EQ(now.precision->nodes_converted, 4);
  EXPECT_EQ(OpCount(now.model, "Cast"), 2);
}

TEST(ConvertPrecisionTest, OpsetAndPrecisionTogether) {
  ConvertResult r = Precision(MatMulRelu(), {.opset = 21});
  EXPECT_EQ(r.target_opset, 21);
  EXPECT_EQ(Init(r.model, "w")->data_type, pb::kFloat16);
}

TEST(ConvertInlineTest, BringsExternalDataInlineAndRefusesPastTheLimit) {
  std::filesystem::path dir = MakeTempDir();
  pb::ModelProto m = MatMulRelu();
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "ext.onnx", io::SaveOptions{.external_data_threshold = 16}).ok());
  auto loaded = io::LoadModel(dir / "ext.onnx");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->proto.graph->initializer[0].data_location, 1);
  passes::convert::ConvertOptions o;
  o.inline_external_data = true;
  auto r = passes::convert::Convert(*loaded, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->verified);
  EXPECT_EQ(r->inlined->tensors, 1);
  EXPECT_EQ(r->inlined->bytes, 48);
  EXPECT_EQ(r->model.graph->initializer[0].data_location, 0);
  EXPECT_EQ(r->model.graph->initializer[0].raw_data.size(), 48u);
  o.max_inline_bytes = 64;
  auto refused = passes::convert::Convert(*loaded, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("48 bytes of external data"));
}

}  // namespace
}  // namespace onnxkit::testing
