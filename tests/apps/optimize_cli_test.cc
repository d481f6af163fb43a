// End-to-end tests of `onnxkit optimize`: a model optimized, verified and
// written; JSON; the pass list; a verification failure that names the
// rewrite and writes nothing; --bisect-limit; every error path.
#include <filesystem>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

pb::TensorProto Floats(std::string name, std::vector<int64_t> dims, std::vector<float> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  t.dims = std::move(dims);
  t.float_data = std::move(values);
  return t;
}

// x[1,2,4,4] -> Conv(2->2, 1x1) -> BatchNormalization -> Identity -> y; a
// dead Neg on the side.
std::string WriteConvBnModel(const fs::path& dir) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, 4, 4}})
      .Initializer(Floats("w", {2, 2, 1, 1}, {0.5f, -1.25f, 2.0f, 0.75f}))
      .Initializer(Floats("s", {2}, {1.5f, 0.25f}))
      .Initializer(Floats("o", {2}, {0.1f, -0.2f}))
      .Initializer(Floats("m", {2}, {0.3f, 0.05f}))
      .Initializer(Floats("v", {2}, {2.0f, 0.5f}))
      .Node("Conv", {"x", "w"}, {"c"}, {}, "conv")
      .Node("BatchNormalization", {"c", "s", "o", "m", "v"}, {"bn"}, {}, "bn")
      .Node("Identity", {"bn"}, {"y"}, {}, "id")
      .Node("Neg", {"x"}, {"dead"}, {}, "dead")
      .Output("y", pb::kFloat, {{1, 2, 4, 4}});
  std::string path = (dir / "convbn.onnx").string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, path).ok());
  return path;
}

// A model ONNX Runtime optimized: lower-contrib leaves no com.microsoft
// op, and the result still computes what the model did (verified).
TEST(OptimizeCliTest, LowerContribWritesOnnxRuntimeOpsAsStandardOps) {
  fs::path dir = MakeTempDir();
  const std::string in = TestdataPath("models/contrib/ort_extended.onnx").string();
  const std::string out = (dir / "std.onnx").string();
  auto count_microsoft = [](const std::string& path) {
    auto loaded = io::LoadModel(path);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    int n = 0;
    if (loaded.ok()) {
      for (const pb::NodeProto& node : loaded->proto.graph->node) n += node.domain == "com.microsoft";
    }
    return n;
  };
  ASSERT_GE(count_microsoft(in), 4);
  CliResult r = RunCli({"optimize", in, "--passes", "lower-contrib,default", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err + r.out, HasSubstr("outputs match"));
  EXPECT_EQ(count_microsoft(out), 0);
  CliResult check = RunCli({"check", "--full", "--strict-custom", out});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  // Not in the default pipeline: the contrib ops stay.
  ASSERT_EQ(RunCli({"optimize", in, "-o", out, "-q"}).exit_code, 0);
  EXPECT_GE(count_microsoft(out), 4);
}

TEST(OptimizeCliTest, OptimizesVerifiesAndWrites) {
  fs::path dir = MakeTempDir();
  std::string in = WriteConvBnModel(dir);
  std::string out = (dir / "out.onnx").string();
  CliResult r = RunCli({"optimize", in, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs match"));
  EXPECT_THAT(r.out, HasSubstr("4 -> 1 nodes"));
  EXPECT_TRUE(fs::exists(out));
  CliResult check = RunCli({"check", "--full", out});
  EXPECT_EQ(check.exit_code, 0) << check.out;
  // Deterministic: the same input and flags give the same bytes.
  std::string out2 = (dir / "out2.onnx").string();
  ASSERT_EQ(RunCli({"optimize", in, "-o", out2, "-q"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(out), ReadFileOrEmpty(out2));
  // Optimizing the result again changes nothing.
  CliResult again = RunCli({"optimize", out, "-o", out2, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"rewrites\": 0"));
}

TEST(OptimizeCliTest, JsonReportsPassesHistogramsAndVerification) {
  fs::path dir = MakeTempDir();
  std::string in = WriteConvBnModel(dir);
  CliResult r = RunCli({"optimize", in, "-o", (dir / "o.onnx").string(), "--json", "--print-rewrites"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"\"passes\"", "\"nodes_before\": 4", "\"nodes_after\": 1", "\"ops_before\"",
                          "\"BatchNormalization\": 1", "\"file_bytes_after\"", "\"verification\"", "\"ok\": true",
                          "\"rewrite_list\"", "\"fuse-conv-bn\""}) {
    EXPECT_THAT(r.out, HasSubstr(key));
  }
}

TEST(OptimizeCliTest, OutputsThatMoveExitOneNameTheRewriteAndWriteNothing) {
  fs::path dir = MakeTempDir();
  std::string in = WriteConvBnModel(dir);
  std::string out = (dir / "o.onnx").string();
  // Folding the BatchNormalization into the weights rounds differently: with
  // zero tolerance the verification must catch it.
  CliResult r = RunCli({"optimize", in, "-o", out, "--atol", "0", "--rtol", "0", "--passes", "fuse-conv-bn"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("first rewrite that moves the outputs: #1 fuse-conv-bn"));
  EXPECT_THAT(r.out, HasSubstr("nothing written"));
  EXPECT_FALSE(fs::exists(out));
  CliResult each = RunCli({"optimize", in, "-o", out, "--atol", "0", "--rtol", "0", "--verify-each", "--json"});
  EXPECT_EQ(each.exit_code, 1);
  EXPECT_THAT(each.out, HasSubstr("\"pass\": \"fuse-conv-bn\""));
}

TEST(OptimizeCliTest, BisectLimitAndSkip) {
  fs::path dir = MakeTempDir();
  std::string in = WriteConvBnModel(dir);
  CliResult r = RunCli({"optimize", in, "-o", (dir / "o.onnx").string(), "--bisect-limit", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"rewrites\": 0"));
  EXPECT_THAT(r.out, HasSubstr("\"bisect_limit_reached\": true"));
  CliResult s = RunCli({"optimize", in, "-o", (dir / "o.onnx").string(), "--skip", "fuse-conv-bn", "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("\"BatchNormalization\": 1"));
}

TEST(OptimizeCliTest, IrThreeWeightsListedAsInputsCountAsConstants) {
  fs::path dir = MakeTempDir();
  std::string in = TestdataPath("models/light/light_squeezenet.onnx").string();
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"optimize", in, "-o", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"nodes_before\": 105"));
  EXPECT_THAT(r.out, HasSubstr("\"ok\": true"));
  // Still IR 3: every initializer, new ones included, is a typed input.
  CliResult check = RunCli({"check", "--full", out});
  EXPECT_EQ(check.exit_code, 0) << check.out;
  CliResult info = RunCli({"inspect", out});
  EXPECT_THAT(info.out, HasSubstr("ir version:   3"));
  // Treated as feedable inputs, nothing that reads them folds.
  CliResult keep = RunCli({"optimize", in, "-o", out, "--json", "--keep-initializer-inputs"});
  ASSERT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_THAT(keep.out, HasSubstr("\"ConstantOfShape\": 39"));
}

TEST(OptimizeCliTest, ListPasses) {
  CliResult r = RunCli({"optimize", "--list-passes"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("fuse-conv-bn"));
  EXPECT_THAT(r.out, HasSubstr("prune-inputs"));
}

TEST(OptimizeCliTest, ErrorPaths) {
  fs::path dir = MakeTempDir();
  std::string in = WriteConvBnModel(dir);
  std::string out = (dir / "o.onnx").string();
  EXPECT_EQ(RunCli({"optimize", (dir / "missing.onnx").string(), "-o", out}).exit_code, 3);
  EXPECT_EQ(RunCli({"optimize", in}).exit_code, 2);
  CliResult bad_pass = RunCli({"optimize", in, "-o", out, "--passes", "fold,nope"});
  EXPECT_EQ(bad_pass.exit_code, 2);
  EXPECT_THAT(bad_pass.err, HasSubstr("valid passes"));
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--input-shape", "x"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--input-shape", "nope=1x2"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--input-shape", "x=1x2"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--input", "nope=a.npy"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--shape", "nope=1x2"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", dir.string(), "-o", out}).exit_code, 3);
  std::string garbage = (dir / "garbage.onnx").string();
  ASSERT_TRUE(io::WriteFileAtomically(garbage, "not a model at all").ok());
  EXPECT_EQ(RunCli({"optimize", garbage, "-o", out}).exit_code, 3);
  EXPECT_FALSE(fs::exists(out));
}

// Random verification inputs a model cannot take (indices past a table of
// one): exit 3, and the error says how to give others or skip the check.
TEST(OptimizeCliTest, RandomInputsTheOriginalRejectsSayWhatToDo) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("idx", pb::kInt64, {{64}})
      .Initializer(Floats("table", {1}, {2.5f}))
      .Node("Gather", {"table", "idx"}, {"g"}, {}, "gather")
      .Node("Identity", {"g"}, {"y"}, {}, "id")
      .Output("y", pb::kFloat, {{64}});
  std::string in = (dir / "gather.onnx").string(), out = (dir / "o.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, in).ok());
  CliResult r = RunCli({"optimize", in, "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("seeded random verification inputs"));
  EXPECT_THAT(r.err, HasSubstr("--no-verify"));
  EXPECT_FALSE(fs::exists(out));
  CliResult c = RunCli({"convert", in, "--opset", "13", "-o", out});
  EXPECT_EQ(c.exit_code, 3) << c.err;
  EXPECT_THAT(c.err, HasSubstr("--no-verify"));
  CliResult skipped = RunCli({"optimize", in, "-o", out, "--no-verify"});
  EXPECT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_TRUE(fs::exists(out));
}

// Symbolic dims run at 1 by default; a model that cannot take that (a
// window of 2 over a length of 1) says so and runs with --shape.
TEST(OptimizeCliTest, ShapeGivesTheDimsOfRandomVerificationInputs) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, -1}})
      .Node("MaxPool", {"x"}, {"p"}, {AttrInts("kernel_shape", {2})}, "pool")
      .Node("Relu", {"p"}, {"y"})
      .Output("y", pb::kFloat, {{1, 2, -1}});
  std::string in = (dir / "pool.onnx").string(), out = (dir / "o.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, in).ok());
  CliResult r = RunCli({"optimize", in, "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("x=1x2x1 (symbolic dims at their default) with --shape"));
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"optimize", in, "-o", out, "--shape", "x=1x2x9"},
           {"convert", in, "--opset", "13", "-o", out, "--shape", "x=1x2x9"},
           {"convert", in, "--opset", "12", "-o", out, "--input-shape", "x=1x2x5"}}) {
    fs::remove(out);
    CliResult ok = RunCli(args);
    EXPECT_EQ(ok.exit_code, 0) << args[0] << ": " << ok.err;
    EXPECT_TRUE(fs::exists(out)) << args[0];
  }
}

// A Loop whose condition stays true: every command that runs the model
// stops at --timeout (exit 3) instead of hanging a pipeline.
TEST(OptimizeCliTest, CommandsThatRunTheModelStopAtTimeout) {
  fs::path dir = MakeTempDir();
  std::string in = (dir / "forever.onnx").string(), out = (dir / "o.onnx").string();
  ASSERT_TRUE(io::SaveModel(EndlessLoopModel(), dir, in).ok());
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"optimize", in, "-o", out, "--timeout", "0.3"},
           {"convert", in, "--opset", "18", "-o", out, "--timeout", "0.3"},
           {"compare", "--a", in, "--b", in, "--b-backend", "cpu", "--random", "--timeout", "0.3"},
           {"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "3", "--timeout", "0.3"},
           {"run", in, "--random", "--timeout", "0.3"}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("took longer than 0.3 s")) << args[0];
    EXPECT_FALSE(fs::exists(out)) << args[0];
  }
  EXPECT_EQ(RunCli({"optimize", in, "-o", out, "--timeout", "-1"}).exit_code, 2);
}

// A NaN or infinite tolerance, limit or target compares false with everything
// and would silently turn off what it sets: every command refuses it as a
// usage error before reading the model.
TEST(OptimizeCliTest, NonFiniteNumbersAreUsageErrors) {
  fs::path dir = MakeTempDir();
  std::string in = (dir / "absent.onnx").string(), out = (dir / "o.onnx").string();
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"optimize", in, "-o", out, "--atol", "nan"},
                                             {"optimize", in, "-o", out, "--rtol", "inf"},
                                             {"optimize", in, "-o", out, "--timeout", "nan"},
                                             {"optimize", in, "-o", out, "--range", "0,nan"},
                                             {"optimize", in, "-o", out, "--bisect-limit", "-2"},
                                             {"convert", in, "--opset", "13", "-o", out, "--atol", "nan"},
                                             {"convert", in, "--float16", "-o", out, "--min-sqnr", "nan"},
                                             {"compare", "--a", in, "--b", in, "--atol", "nan"},
                                             {"compare", "--a", in, "--b", in, "--tol", "y=nan,1"},
                                             {"compare", "--a", in, "--b", in, "--tol", "y=1,inf"},
                                             {"quantize", in, "-o", out, "--target-sqnr", "nan"},
                                             {"quantize", in, "-o", out, "--target-cosine", "nan"},
                                             {"quantize", in, "-o", out, "--timeout", "inf"},
                                             {"run", in, "--random", "--timeout", "nan"},
                                             {"run", in, "--random", "--memory-limit", "nan"},
                                             {"bisect", in, "--nan", "-o", out, "--timeout", "nan"},
                                             {"bisect", in, "--nan", "-o", out, "--time-limit", "nan"},
                                             {"bisect", in, "--mismatch", "-o", out, "--atol", "nan"}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
  }
}

TEST(OptimizeCliTest, PinsSymbolicInputDims) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{-1, 3}})
      .Node("Shape", {"x"}, {"s"})
      .Node("Reshape", {"x", "s"}, {"y"})
      .Node("Relu", {"x"}, {"z"})
      .Output("y", pb::kFloat)
      .Output("z", pb::kFloat, {{-1, 3}});
  std::string in = (dir / "dyn.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, in).ok());
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"optimize", in, "-o", out, "--input-shape", "x=2x3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("pinned input x: [2, 3]"));
  CliResult info = RunCli({"inspect", out, "--json"});
  EXPECT_THAT(info.out, HasSubstr("\"shape\": [\n        2,\n        3\n      ]"));
  // Shape folded: the Reshape reads a constant.
  EXPECT_THAT(info.out, HasSubstr("\"node_count\": 2,"));
  // The outputs declare the pinned dims too.
  CliResult text = RunCli({"inspect", out});
  EXPECT_THAT(text.out, HasSubstr("y: tensor(float) [2, 3]"));
  EXPECT_THAT(text.out, HasSubstr("z: tensor(float) [2, 3]"));
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

// A Gradient reads the nodes computing its y by name: optimize and quantize
// leave its graph as it is (dce would remove the Identity computing y, which
// no node takes as an input), and the result still runs.
TEST(OptimizeCliTest, AGraphAGradientDifferentiatesIsLeftAsItIs) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("a", pb::kFloat, {{3}})
      .Input("b", pb::kFloat, {{3}})
      .Node("Add", {"a", "b"}, {"c"})
      .Node("Mul", {"c", "a"}, {"d"})
      .Node("Identity", {"d"}, {"e"})
      .Node("Gradient", {"a", "b"}, {"ga", "gb"}, {AttrStrings("xs", {"a", "b"}), AttrString("y", "e")},
            "grad")
      .Output("ga", pb::kFloat, {{3}})
      .Output("gb", pb::kFloat, {{3}});
  g.graph().node.back().domain = "ai.onnx.preview.training";
  pb::ModelProto model = ModelFromGraph(g.Build(), 13);
  pb::OperatorSetIdProto training;
  training.domain = "ai.onnx.preview.training";
  training.version = 1;
  model.opset_import.push_back(training);
  std::string in = (dir / "grad.onnx").string(), out = (dir / "o.onnx").string();
  ASSERT_TRUE(io::SaveModel(model, dir, in).ok());
  CliResult r = RunCli({"optimize", in, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 -> 4 nodes"));
  // d(a + b) a / da = 2a + b, / db = a.
  CliResult run = RunCli({"run", out, "--random", "--range", "2,2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("ga: float[3] min 6 max 6"));
  EXPECT_THAT(run.out, HasSubstr("gb: float[3] min 2 max 2"));
  for (std::vector<std::string> mode :
       {std::vector<std::string>{}, {"--mode", "dynamic"}, {"--weights-only"}}) {
    std::vector<std::string> args{"quantize", in, "-o", (dir / "q.onnx").string(),
                                  "--allow-random-calibration"};
    args.insert(args.end(), mode.begin(), mode.end());
    CliResult q = RunCli(args);
    EXPECT_EQ(q.exit_code, 0) << q.out << q.err;
    EXPECT_THAT(q.out, HasSubstr("0 nodes quantized"));
  }
}

}  // namespace
}  // namespace onnxkit::testing
