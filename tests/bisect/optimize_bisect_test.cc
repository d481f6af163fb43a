// Tests of BisectOptimize: with zero tolerance, folding a
// BatchNormalization into its Conv rounds differently, so the rewrite moves
// the outputs; the bisection names it, writes the models around it and
// shrinks the model to the rewrite's neighbourhood.
#include "bisect/optimize_bisect.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "passes/registry.h"
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

// x[1,2,4,4] -> Abs -> Sigmoid -> Neg -> Conv -> BatchNormalization -> Relu
// -> Abs -> Sigmoid -> Neg -> y: three nodes on each side to cut.
pb::ModelProto ConvBnChain() {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, 4, 4}})
      .Initializer(Floats("w", {2, 2, 1, 1}, {0.5f, -1.25f, 2.0f, 0.75f}))
      .Initializer(Floats("s", {2}, {1.5f, 0.25f}))
      .Initializer(Floats("o", {2}, {0.1f, -0.2f}))
      .Initializer(Floats("m", {2}, {0.3f, 0.05f}))
      .Initializer(Floats("v", {2}, {2.0f, 0.5f}))
      .Node("Abs", {"x"}, {"a0"}, {}, "pre0")
      .Node("Sigmoid", {"a0"}, {"a1"}, {}, "pre1")
      .Node("Neg", {"a1"}, {"a2"}, {}, "pre2")
      .Node("Conv", {"a2", "w"}, {"c"}, {}, "conv")
      .Node("BatchNormalization", {"c", "s", "o", "m", "v"}, {"bn"}, {}, "bn")
      .Node("Relu", {"bn"}, {"r"}, {}, "relu")
      .Node("Abs", {"r"}, {"p0"}, {}, "post0")
      .Node("Sigmoid", {"p0"}, {"p1"}, {}, "post1")
      .Node("Neg", {"p1"}, {"y"}, {}, "post2")
      .Output("y", pb::kFloat, {{1, 2, 4, 4}});
  return testing::ModelFromGraph(g.Build(), 17);
}

class OptimizeBisectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("optimize_bisect_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(io::SaveModel(ConvBnChain(), {}, dir_ / "m.onnx").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  passes::OptimizeOptions Options(double tol) {
    passes::OptimizeOptions o;
    auto pipeline = passes::ParsePipeline("default");
    EXPECT_TRUE(pipeline.ok());
    if (pipeline.ok()) o.pipeline = *pipeline;
    o.verify_options.atol = tol;
    o.verify_options.rtol = tol;
    return o;
  }

  fs::path dir_;
};

TEST_F(OptimizeBisectTest, ZeroToleranceNamesFuseConvBnAndShrinksAroundIt) {
  auto r =
      BisectOptimize((dir_ / "m.onnx").string(), Options(0), dir_ / "out", "onnxkit", "--atol 0 --rtol 0");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->culprit.has_value());
  EXPECT_EQ(r->culprit->pass, "fuse-conv-bn");
  EXPECT_GE(r->culprit->rewrite, 1);
  EXPECT_TRUE(r->culprit->record.node.find("'bn'") != std::string::npos ||
              r->culprit->record.node.find("'conv'") != std::string::npos)
      << r->culprit->record.node;
  for (const char* f : {"before.onnx", "after.onnx", "model.onnx", "repro.sh", "report.json"}) {
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
  }
  ASSERT_TRUE(r->shrunk);
  EXPECT_LT(r->nodes_after, r->nodes_before);
  EXPECT_EQ(r->nodes_after, 2);  // the Conv and the BatchNormalization
  EXPECT_TRUE(fs::exists(dir_ / "out" / "test_data_set_0" / "input_0.pb"));
  // The small model holds the Conv and the BatchNormalization, and the same
  // pipeline still moves its outputs on the written inputs.
  auto small = io::LoadModel(dir_ / "out" / "model.onnx");
  ASSERT_TRUE(small.ok()) << small.status();
  std::set<std::string> ops;
  for (const auto& n : small->proto.graph->node) ops.insert(n.op_type);
  EXPECT_TRUE(ops.count("Conv") && ops.count("BatchNormalization"));
  passes::OptimizeOptions again = Options(0);
  again.verify_options.inputs.dir = (dir_ / "out" / "test_data_set_0").string();
  auto moved = passes::Optimize(*small, again);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(moved->culprit.has_value());
  std::stringstream report;
  report << std::ifstream(dir_ / "out" / "report.json").rdbuf();
  EXPECT_NE(report.str().find("\"shrunk\": true"), std::string::npos) << report.str();
  std::stringstream script;
  script << std::ifstream(dir_ / "out" / "repro.sh").rdbuf();
  EXPECT_NE(script.str().find("optimize"), std::string::npos);
  EXPECT_NE(script.str().find("--atol 0 --rtol 0"), std::string::npos);
}

TEST_F(OptimizeBisectTest, DefaultToleranceFindsNoCulpritAndWritesNothing) {
  auto r = BisectOptimize((dir_ / "m.onnx").string(), Options(1e-4), dir_ / "out", "onnxkit");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->culprit.has_value());
  EXPECT_FALSE(fs::exists(dir_ / "out" / "model.onnx"));
}

TEST_F(OptimizeBisectTest, MissingModelIsAnError) {
  EXPECT_FALSE(BisectOptimize((dir_ / "missing.onnx").string(), Options(0), dir_ / "out", "onnxkit").ok());
}

}  // namespace
}  // namespace onnxkit::bisect
