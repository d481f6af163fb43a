// End-to-end tests of RunBisect: each oracle on a chain model with one
// planted fault; the reproducer is small, holds the planted node, and still
// fails when re-tested; hostile input gives an error, not a crash.
#include <filesystem>
#include <fstream>

#include "bisect/bisect.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/convert.h"
#include "tests/util/model_builder.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;
using testing::GraphBuilder;

// A 30-node float chain x[2,4] -> ... -> y with `fault` planted as node
// "planted" at position 17: "attr" (an attribute Relu does not have),
// "reshape" (Reshape to 5x5), "nan" (Sqrt of a negative tensor).
pb::ModelProto Planted(const std::string& fault) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}});
  std::string prev = "x";
  for (int i = 0; i < 30; ++i) {
    std::string out = i == 29 ? "y" : "t" + std::to_string(i);
    std::string name = i == 17 ? "planted" : "n" + std::to_string(i);
    if (i == 17 && fault == "attr") {
      b.Node("Relu", {prev}, {out}, {testing::AttrInt("bogus", 1)}, name);
    } else if (i == 17 && fault == "reshape") {
      pb::TensorProto shape;
      shape.name = "bad_shape";
      shape.data_type = pb::kInt64;
      shape.dims = {2};
      shape.int64_data = {5, 5};
      b.Initializer(shape);
      b.Node("Reshape", {prev, "bad_shape"}, {out}, {}, name);
    } else if (i == 17 && fault == "nan") {
      b.Node("Sqrt", {prev}, {out}, {}, name);
    } else if (i == 16) {
      b.Node("Neg", {prev}, {out}, {}, name);  // negative values before the fault
    } else {
      b.Node(i % 2 ? "Sigmoid" : "Abs", {prev}, {out}, {}, name);
    }
    prev = out;
  }
  b.Output("y", pb::kFloat, std::nullopt);
  return testing::ModelFromGraph(b.Build());
}

class BisectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bisect_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  BisectOutcome Bisect(const pb::ModelProto& model, OracleOptions oracle) {
    EXPECT_TRUE(io::SaveModel(model, {}, dir_ / "m.onnx").ok());
    BisectOptions o;
    o.model_path = (dir_ / "m.onnx").string();
    o.oracle = std::move(oracle);
    o.output_dir = dir_ / "out";
    auto r = RunBisect(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : BisectOutcome{};
  }

  static bool HasNode(const BisectOutcome& o, const std::string& name) {
    for (const auto& n : o.result.model.graph->node) {
      if (n.name == name) return true;
    }
    return false;
  }

  void ExpectSmallRepro(const BisectOutcome& o) {
    ASSERT_TRUE(o.interesting) << o.why;
    EXPECT_TRUE(o.reproduces);
    EXPECT_LE(o.result.nodes_after, 3);
    EXPECT_TRUE(HasNode(o, "planted"));
    EXPECT_LE(o.result.calls, 300);
    EXPECT_TRUE(fs::exists(dir_ / "out" / "model.onnx"));
    EXPECT_TRUE(fs::exists(dir_ / "out" / "repro.sh"));
    EXPECT_TRUE(fs::exists(dir_ / "out" / "report.json"));
  }

  fs::path dir_;
};

TEST_F(BisectTest, CheckFailsKeepsTheBadAttribute) {
  BisectOutcome o = Bisect(Planted("attr"), {OracleKind::kCheckFails, "E0404"});
  ExpectSmallRepro(o);
  EXPECT_EQ(o.result.nodes_after, 1);
}

TEST_F(BisectTest, RunFailsKeepsTheImpossibleReshape) {
  BisectOutcome o = Bisect(Planted("reshape"), {OracleKind::kRunFails, "reshape|Reshape"});
  ExpectSmallRepro(o);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "test_data_set_0" / "input_0.pb"));
}

TEST_F(BisectTest, NanKeepsTheNodeThatMakesNan) {
  BisectOutcome o = Bisect(Planted("nan"), {OracleKind::kNan});
  ExpectSmallRepro(o);
  EXPECT_EQ(o.result.nodes_after, 1);
  EXPECT_TRUE(o.result.one_minimal);
}

// x -> Abs -> If(c) { then: Neg, Sqrt (NaN), Mul; else: Identity } -> Neg
// -> y. The NaN is made inside the then branch: the oracle pins the body's
// tensor, the branch is inlined, and the reproducer is the Sqrt alone, fed
// with the body value the golden run recorded.
TEST_F(BisectTest, NanInsideAnIfBranchShrinksToTheBodyNode) {
  GraphBuilder then_b("then");
  then_b.Node("Neg", {"a"}, {"tn"}, {}, "neg")
      .Node("Sqrt", {"tn"}, {"tsq"}, {}, "planted")
      .Node("Mul", {"tsq", "a"}, {"tm"}, {}, "mul")
      .Output("tm", pb::kFloat, {{2, 4}});
  GraphBuilder else_b("else");
  else_b.Node("Identity", {"a"}, {"e"}, {}, "id").Output("e", pb::kFloat, {{2, 4}});
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}}).Input("c", pb::kBool, {{}});
  b.Node("Abs", {"x"}, {"a"}, {}, "pre")
      .Node("If", {"c"}, {"i"},
            {testing::AttrGraph("then_branch", then_b.Build()),
             testing::AttrGraph("else_branch", else_b.Build())},
            "if")
      .Node("Neg", {"i"}, {"y"}, {}, "post")
      .Output("y", pb::kFloat, {{2, 4}});
  fs::create_directories(dir_ / "in");
  auto x = runner::Tensor::Allocate(pb::kFloat, {2, 4});
  auto c = runner::Tensor::Allocate(pb::kBool, {});
  ASSERT_TRUE(x.ok() && c.ok());
  for (int i = 0; i < 8; ++i) x->mutable_data<float>()[i] = 1.0f + static_cast<float>(i);
  c->mutable_data<bool>()[0] = true;
  std::ofstream(dir_ / "in" / "input_0.pb", std::ios::binary)
      << runner::ValueToPbBytes(runner::RtValue::FromTensor(*x), "x");
  std::ofstream(dir_ / "in" / "input_1.pb", std::ios::binary)
      << runner::ValueToPbBytes(runner::RtValue::FromTensor(*c), "c");
  ASSERT_TRUE(io::SaveModel(testing::ModelFromGraph(b.Build()), {}, dir_ / "m.onnx").ok());
  BisectOptions o;
  o.model_path = (dir_ / "m.onnx").string();
  o.oracle = {OracleKind::kNan};
  o.inputs.dir = (dir_ / "in").string();
  o.output_dir = dir_ / "out";
  auto r = RunBisect(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->interesting) << r->why;
  EXPECT_TRUE(r->reproduces);
  ASSERT_EQ(r->result.nodes_after, 1);
  EXPECT_EQ(r->result.model.graph->node[0].op_type, "Sqrt");
  EXPECT_TRUE(fs::exists(dir_ / "out" / "test_data_set_0" / "input_0.pb"));
}

// An initializer that is also a graph input (IR >= 4) may be fed instead
// (--input w=FILE): the golden run and every candidate take the fed value.
// Here only the fed w (negative) makes Sqrt's NaN.
TEST_F(BisectTest, AFedInitializerOverridesItsDefault) {
  GraphBuilder b("main");
  auto ones = runner::Tensor::Allocate(pb::kFloat, {4});
  auto minus = runner::Tensor::Allocate(pb::kFloat, {4});
  ASSERT_TRUE(ones.ok() && minus.ok());
  for (int i = 0; i < 4; ++i) {
    ones->mutable_data<float>()[i] = 1;
    minus->mutable_data<float>()[i] = -10;
  }
  b.Input("x", pb::kFloat, {{4}})
      .Input("w", pb::kFloat, {{4}})
      .Initializer(runner::TensorToProto(*ones, "w"));
  b.Node("Abs", {"x"}, {"ax"}, {}, "abs").Node("Add", {"ax", "w"}, {"a"}, {}, "add");
  b.Node("Sqrt", {"a"}, {"y"}, {}, "planted").Output("y", pb::kFloat, {{4}});
  ASSERT_TRUE(io::SaveModel(testing::ModelFromGraph(b.Build()), {}, dir_ / "m.onnx").ok());
  std::ofstream(dir_ / "w.pb", std::ios::binary)
      << runner::ValueToPbBytes(runner::RtValue::FromTensor(*minus), "w");
  BisectOptions o;
  o.model_path = (dir_ / "m.onnx").string();
  o.oracle = {OracleKind::kNan};
  o.inputs.random = true;
  o.output_dir = dir_ / "out";
  auto plain = RunBisect(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->interesting);  // w = 1: no NaN
  o.inputs.files = {"w=" + (dir_ / "w.pb").string()};
  auto fed = RunBisect(o);
  ASSERT_TRUE(fed.ok()) << fed.status();
  ASSERT_TRUE(fed->interesting) << fed->why;
  EXPECT_TRUE(fed->reproduces);
  EXPECT_TRUE(HasNode(*fed, "planted"));
}

TEST_F(BisectTest, CommandOracleInParallel) {
  OracleOptions oracle{OracleKind::kCommand};
  oracle.command = "grep -q planted {model} && exit 1; exit 0";
  oracle.jobs = 2;
  BisectOutcome o = Bisect(Planted("none"), oracle);
  ExpectSmallRepro(o);
}

TEST_F(BisectTest, MismatchAgainstReferenceOutputs) {
  pb::ModelProto m = Planted("none");
  fs::create_directories(dir_ / "ref");
  auto t = runner::Tensor::Allocate(pb::kFloat, {2, 4});
  ASSERT_TRUE(t.ok());
  std::ofstream(dir_ / "ref" / "output_0.pb", std::ios::binary)
      << runner::ValueToPbBytes(runner::RtValue::FromTensor(*t), "y");
  OracleOptions oracle{OracleKind::kMismatch};
  oracle.reference_dir = (dir_ / "ref").string();
  BisectOutcome o = Bisect(m, oracle);
  ASSERT_TRUE(o.interesting) << o.why;
  EXPECT_EQ(o.result.nodes_after, 1);  // the node computing y, its input fed golden values
}

// x[2] -> Abs -> Loop(3 times) { x_out = Abs(x_in); dead: Neg, Sin, and a
// Relu with an attribute it does not have } -> Neg -> y.
pb::ModelProto LoopWithBadDeadBodyNode() {
  GraphBuilder body("body");
  body.Input("i", pb::kInt64, {{}}).Input("c", pb::kBool, {{}}).Input("x_in", pb::kFloat, {{2}});
  body.Node("Identity", {"c"}, {"c_out"}, {}, "keep_cond")
      .Node("Abs", {"x_in"}, {"x_out"}, {}, "abs")
      .Node("Neg", {"x_in"}, {"d0"}, {}, "dead0")
      .Node("Sin", {"d0"}, {"d1"}, {}, "dead1")
      .Node("Relu", {"x_in"}, {"k"}, {testing::AttrInt("bogus", 1)}, "planted")
      .Output("c_out", pb::kBool, {{}})
      .Output("x_out", pb::kFloat, {{2}});
  GraphBuilder b("main");
  pb::TensorProto trip;
  trip.name = "trip";
  trip.data_type = pb::kInt64;
  trip.int64_data = {3};
  pb::TensorProto cond;
  cond.name = "cond";
  cond.data_type = pb::kBool;
  cond.int32_data = {1};
  b.Input("x", pb::kFloat, {{2}}).Initializer(trip).Initializer(cond);
  b.Node("Abs", {"x"}, {"a"}, {}, "pre");
  b.Node("Loop", {"trip", "cond", "a"}, {"l"}, {testing::AttrGraph("body", body.Build())}, "loop");
  b.Node("Neg", {"l"}, {"y"}, {}, "post");
  b.Output("y", pb::kFloat, {{2}});
  return testing::ModelFromGraph(b.Build());
}

TEST_F(BisectTest, CheckFailsShrinksInsideALoopBody) {
  BisectOutcome o = Bisect(LoopWithBadDeadBodyNode(), {OracleKind::kCheckFails, "E0404"});
  ASSERT_TRUE(o.interesting) << o.why;
  EXPECT_TRUE(o.reproduces);
  // Counted with the body's nodes, and not called 1-minimal: ddmin does not
  // remove nodes inside bodies (keep_cond and abs stay).
  EXPECT_EQ(o.result.nodes_before, 3 + 5);
  ASSERT_EQ(o.result.nodes_after, 1 + 3);
  EXPECT_FALSE(o.result.one_minimal);
  const pb::NodeProto& loop = o.result.model.graph->node[0];
  ASSERT_EQ(loop.op_type, "Loop");
  std::vector<std::string> body;
  for (const auto& n : loop.attribute[0].g->node) body.push_back(n.name);
  EXPECT_EQ(body, (std::vector<std::string>{"keep_cond", "abs", "planted"}));
}

// y = Abs(Neg(Sqrt(x))) (the Sqrt named "planted"), y2 = Sigmoid(Abs(x)):
// NaN only on a sample where x has a negative element.
pb::ModelProto SqrtOfInput() {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}});
  b.Node("Abs", {"x"}, {"a"}, {}, "side0").Node("Sigmoid", {"a"}, {"y2"}, {}, "side1");
  b.Node("Sqrt", {"x"}, {"q"}, {}, "planted").Node("Neg", {"q"}, {"n"}, {}, "post0");
  b.Node("Abs", {"n"}, {"y"}, {}, "post1");
  b.Output("y", pb::kFloat, std::nullopt).Output("y2", pb::kFloat, std::nullopt);
  return testing::ModelFromGraph(b.Build());
}

void WriteSample(const fs::path& dir, float first) {
  fs::create_directories(dir);
  auto t = runner::Tensor::Allocate(pb::kFloat, {2, 4});
  ASSERT_TRUE(t.ok());
  float* data = t->mutable_data<float>();
  for (int i = 0; i < 8; ++i) data[i] = i == 0 ? first : 0.5f;
  std::ofstream(dir / "input_0.pb", std::ios::binary) << runner::ValueToPbBytes(runner::RtValue::FromTensor(*t), "x");
}

TEST_F(BisectTest, SeveralSamplesUseTheFirstOnWhichTheOriginalFails) {
  WriteSample(dir_ / "samples" / "test_data_set_0", 1.0f);
  WriteSample(dir_ / "samples" / "test_data_set_1", 2.0f);
  WriteSample(dir_ / "samples" / "test_data_set_2", -4.0f);  // Sqrt(-4): NaN
  ASSERT_TRUE(io::SaveModel(SqrtOfInput(), {}, dir_ / "m.onnx").ok());
  BisectOptions o;
  o.model_path = (dir_ / "m.onnx").string();
  o.oracle.kind = OracleKind::kNan;
  o.input_dirs = {(dir_ / "samples").string()};
  o.output_dir = dir_ / "out";
  auto r = RunBisect(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->interesting) << r->why;
  EXPECT_EQ(r->samples_tried, 3);
  EXPECT_NE(r->sample.find("test_data_set_2"), std::string::npos) << r->sample;
  EXPECT_TRUE(r->reproduces);
  EXPECT_EQ(r->result.nodes_after, 1);
  EXPECT_TRUE(HasNode(*r, "planted"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "test_data_set_0" / "input_0.pb"));
  // Only the passing samples: not interesting on any; a folder without
  // inputs is an error.
  o.input_dirs = {(dir_ / "samples" / "test_data_set_0").string(), (dir_ / "samples" / "test_data_set_1").string()};
  o.output_dir = dir_ / "out2";
  auto none = RunBisect(o);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->interesting);
  EXPECT_EQ(none->samples_tried, 2);
  o.input_dirs = {(dir_ / "missing").string()};
  EXPECT_FALSE(RunBisect(o).ok());
}

TEST_F(BisectTest, OriginalNotInterestingIsReported) {
  BisectOutcome o = Bisect(Planted("none"), {OracleKind::kNan});
  EXPECT_FALSE(o.interesting);
  EXPECT_FALSE(o.why.empty());
  EXPECT_FALSE(fs::exists(dir_ / "out" / "model.onnx"));
}

TEST_F(BisectTest, MalformedModelIsAnError) {
  std::ofstream(dir_ / "bad.onnx") << "this is not a model";
  BisectOptions o;
  o.model_path = (dir_ / "bad.onnx").string();
  o.oracle.kind = OracleKind::kCheckFails;
  o.output_dir = dir_ / "out";
  EXPECT_FALSE(RunBisect(o).ok());
  o.model_path = (dir_ / "missing.onnx").string();
  EXPECT_FALSE(RunBisect(o).ok());
}

TEST_F(BisectTest, BadRegexIsInvalidArgument) {
  EXPECT_FALSE(MakeOracle({OracleKind::kRunFails, "("}, nullptr).ok());
  EXPECT_FALSE(MakeOracle({OracleKind::kCheckFails, "E9999"}, nullptr).ok());
}

}  // namespace
}  // namespace onnxkit::bisect
