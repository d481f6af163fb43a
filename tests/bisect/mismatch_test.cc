// Tests of --mismatch between two backends and of the divergence strategy,
// on a real cpu-vs-reference difference at zero tolerance: a Conv sums its
// products in another order on the cpu backend (oneDNN, in float) than on
// the reference backend (in double), so its output differs in the last
// bits, while the element-wise ops around it are exact on both.
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

// Weights of `count` values spread over [-1, 1) with many significant bits.
std::vector<float> Weights(int count) {
  std::vector<float> w;
  for (int i = 0; i < count; ++i) w.push_back(static_cast<float>((i * 7919 % 1000) / 500.0 - 1.0) * 1.0137f);
  return w;
}

// x[1,4,5,5] -> Abs -> Neg -> Conv 3x3 -> Relu -> Abs -> Neg -> Abs -> y,
// and an unrelated side output z = Neg(Abs(x)). Only the Conv rounds
// differently between the backends.
pb::ModelProto ConvAmongExactOps() {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 4, 5, 5}})
      .Initializer(Floats("w", {4, 4, 3, 3}, Weights(144)))
      .Initializer(Floats("b", {4}, {0.1f, -0.2f, 0.3f, -0.4f}))
      .Node("Abs", {"x"}, {"a0"}, {}, "pre0")
      .Node("Abs", {"x"}, {"e0"}, {}, "side0")
      .Node("Neg", {"a0"}, {"a1"}, {}, "pre1")
      .Node("Neg", {"e0"}, {"z"}, {}, "side1")
      .Node("Conv", {"a1", "w", "b"}, {"c"}, {testing::AttrInts("pads", {1, 1, 1, 1})}, "conv")
      .Node("Relu", {"c"}, {"r"}, {}, "relu")
      .Node("Abs", {"r"}, {"p0"}, {}, "post0")
      .Node("Neg", {"p0"}, {"p1"}, {}, "post1")
      .Node("Abs", {"p1"}, {"y"}, {}, "post2")
      .Output("y", pb::kFloat, {{1, 4, 5, 5}})
      .Output("z", pb::kFloat, {{1, 4, 5, 5}});
  return testing::ModelFromGraph(g.Build(), 17);
}

class MismatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bisect_mismatch_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(io::SaveModel(ConvAmongExactOps(), {}, dir_ / "m.onnx").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  BisectOutcome Bisect(std::vector<std::string> strategies) {
    BisectOptions o;
    o.model_path = (dir_ / "m.onnx").string();
    o.oracle.kind = OracleKind::kMismatch;
    o.oracle.a_backend = runner::Backend::kCpu;
    o.oracle.b_backend = runner::Backend::kReference;
    o.oracle.atol = tolerance_;
    o.oracle.rtol = tolerance_;
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
  double tolerance_ = 0;
};

TEST_F(MismatchTest, CpuAgainstReferenceAtZeroToleranceShrinksToTheConv) {
  BisectOutcome o = Bisect({});
  ASSERT_TRUE(o.interesting) << o.why;
  EXPECT_TRUE(o.reproduces);
  EXPECT_EQ(o.result.nodes_before, 9);
  EXPECT_LE(o.result.nodes_after, 3);
  std::set<std::string> names = Names(o);
  EXPECT_TRUE(names.count("conv")) << o.result.nodes_after;
  EXPECT_FALSE(names.count("side0") || names.count("side1") || names.count("pre0") || names.count("post2"));
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
  // The first diverging tensor is the Conv's output: cut there.
  EXPECT_LE(o.result.effects[0].calls, 25);
  EXPECT_LE(o.result.nodes_after, 3);
  std::set<std::string> names = Names(o);
  EXPECT_TRUE(names.count("conv"));
  EXPECT_FALSE(names.count("post0") || names.count("post1") || names.count("post2") || names.count("side1"));
}

TEST_F(MismatchTest, WithinTheDefaultToleranceIsNotInteresting) {
  tolerance_ = 1e-4;
  BisectOutcome o = Bisect({});
  EXPECT_FALSE(o.interesting);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "model.onnx"));
}

TEST_F(MismatchTest, NanThroughAFusedConvIsNoMismatch) {
  // Sqrt of a negative value becomes NaN before a Conv whose Relu the cpu
  // backend fuses: both backends keep it NaN.
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, 4, 4}})
      .Initializer(Floats("ten", {}, {10.0f}))
      .Initializer(Floats("w", {2, 2, 1, 1}, {0.5f, -1.25f, 2.0f, 0.75f}))
      .Initializer(Floats("b", {2}, {0.1f, -0.2f}))
      .Node("Sub", {"x", "ten"}, {"a"}, {}, "sub")
      .Node("Sqrt", {"a"}, {"s"}, {}, "sqrt")
      .Node("Conv", {"s", "w", "b"}, {"c"}, {}, "conv")
      .Node("Relu", {"c"}, {"y"}, {}, "relu")
      .Output("y", pb::kFloat, {{1, 2, 4, 4}});
  ASSERT_TRUE(io::SaveModel(testing::ModelFromGraph(g.Build(), 17), {}, dir_ / "m.onnx").ok());
  tolerance_ = 1e-4;
  BisectOutcome o = Bisect({});
  EXPECT_FALSE(o.interesting) << o.why;
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
