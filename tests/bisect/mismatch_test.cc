// Tests of --mismatch between two backends and of the divergence strategy,
// on a real cpu-vs-reference difference: a NaN entering a Conv whose Relu
// the cpu backend fuses comes out of the fused kernel as a number, while the
// reference backend keeps it NaN.
#include <filesystem>
#include <set>

#include "bisect/bisect.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/util/model_builder.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;
using testing::GraphBuilder;

pb::TensorProto Floats(std::string name, std::vector<int64_t> dims, std::vector<float> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  t.dims = std::move(dims);
  t.float_data = std::move(values);
  return t;
}

// x[1,2,4,4] in [0,1) -> Abs -> Sigmoid -> Sub(10) -> Sqrt (NaN) -> Conv ->
// Relu -> Abs -> Neg -> Sigmoid -> y, and an unrelated side output
// z = Tanh(Exp(x)).
pb::ModelProto NanIntoFusedConv() {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, 4, 4}})
      .Initializer(Floats("ten", {}, {10.0f}))
      .Initializer(Floats("w", {2, 2, 1, 1}, {0.5f, -1.25f, 2.0f, 0.75f}))
      .Initializer(Floats("b", {2}, {0.1f, -0.2f}))
      .Node("Abs", {"x"}, {"a0"}, {}, "pre0")
      .Node("Exp", {"x"}, {"e0"}, {}, "side0")
      .Node("Sigmoid", {"a0"}, {"a1"}, {}, "pre1")
      .Node("Sub", {"a1", "ten"}, {"a2"}, {}, "sub")
      .Node("Tanh", {"e0"}, {"z"}, {}, "side1")
      .Node("Sqrt", {"a2"}, {"a3"}, {}, "sqrt")
      .Node("Conv", {"a3", "w", "b"}, {"c"}, {}, "conv")
      .Node("Relu", {"c"}, {"r"}, {}, "relu")
      .Node("Abs", {"r"}, {"p0"}, {}, "post0")
      .Node("Neg", {"p0"}, {"p1"}, {}, "post1")
      .Node("Sigmoid", {"p1"}, {"y"}, {}, "post2")
      .Output("y", pb::kFloat, {{1, 2, 4, 4}})
      .Output("z", pb::kFloat, {{1, 2, 4, 4}});
  return testing::ModelFromGraph(g.Build(), 17);
}

class MismatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bisect_mismatch_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(io::SaveModel(NanIntoFusedConv(), {}, dir_ / "m.onnx").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  BisectOutcome Bisect(std::vector<std::string> strategies) {
    BisectOptions o;
    o.model_path = (dir_ / "m.onnx").string();
    o.oracle.kind = OracleKind::kMismatch;
    o.oracle.a_backend = runner::Backend::kCpu;
    o.oracle.b_backend = runner::Backend::kReference;
    o.reduce.strategies = std::move(strategies);
    o.output_dir = dir_ / "out";
    auto r = RunBisect(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : BisectOutcome{};
  }

  static std::set<std::string> Names(const BisectOutcome& o) {
    std::set<std::string> names;
    if (o.result.model.graph) {
      for (const auto& n : o.result.model.graph->node) names.insert(n.name);
    }
    return names;
  }

  fs::path dir_;
};

TEST_F(MismatchTest, CpuAgainstReferenceShrinksToTheFusedConv) {
  BisectOutcome o = Bisect({});
  ASSERT_TRUE(o.interesting) << o.why;
  EXPECT_TRUE(o.reproduces);
  EXPECT_EQ(o.result.nodes_before, 11);
  EXPECT_LE(o.result.nodes_after, 3);
  std::set<std::string> names = Names(o);
  EXPECT_TRUE(names.count("conv")) << o.result.nodes_after;
  EXPECT_TRUE(names.count("relu"));
  EXPECT_FALSE(names.count("side0") || names.count("side1") || names.count("pre0"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "model.onnx"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "test_data_set_0" / "input_0.pb"));
  // No expected outputs for a mismatch: which backend is right is the question.
  EXPECT_FALSE(fs::exists(dir_ / "out" / "test_data_set_0" / "output_0.pb"));
}

TEST_F(MismatchTest, DivergenceAloneCutsAtTheFirstDivergingTensor) {
  BisectOutcome o = Bisect({"divergence"});
  ASSERT_TRUE(o.interesting) << o.why;
  EXPECT_TRUE(o.reproduces);
  ASSERT_EQ(o.result.effects.size(), 1u);
  EXPECT_EQ(o.result.effects[0].name, "divergence");
  EXPECT_GE(o.result.effects[0].accepted, 1);
  // A binary search over prefixes (the observed, unfused run agrees tensor
  // by tensor), then the node with its producers; again each round.
  EXPECT_LE(o.result.effects[0].calls, 25);
  EXPECT_LE(o.result.nodes_after, 3);
  std::set<std::string> names = Names(o);
  EXPECT_TRUE(names.count("relu"));
  EXPECT_FALSE(names.count("post0") || names.count("post1") || names.count("post2") || names.count("side1"));
}

TEST_F(MismatchTest, SameBackendTwiceIsNotInteresting) {
  BisectOptions o;
  o.model_path = (dir_ / "m.onnx").string();
  o.oracle.kind = OracleKind::kMismatch;
  o.oracle.a_backend = runner::Backend::kReference;
  o.oracle.b_backend = runner::Backend::kReference;
  o.output_dir = dir_ / "out";
  auto r = RunBisect(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->interesting);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "model.onnx"));
}

}  // namespace
}  // namespace onnxkit::bisect
