// CLI tests of `onnxkit bisect`: exit codes, the bundle, error paths.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

class BisectCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bisect_cli_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    GraphBuilder b("main");
    b.Input("x", pb::kFloat, {{2, 4}});
    std::string prev = "x";
    for (int i = 0; i < 12; ++i) {
      std::string out = i == 11 ? "y" : "t" + std::to_string(i);
      if (i == 7) {
        b.Node("Relu", {prev}, {out}, {AttrInt("bogus", 1)}, "planted");
      } else {
        b.Node("Abs", {prev}, {out}, {}, "n" + std::to_string(i));
      }
      prev = out;
    }
    b.Output("y", pb::kFloat, {{2, 4}});
    model_ = (dir_ / "m.onnx").string();
    ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build()), {}, model_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string model_;
};

TEST_F(BisectCliTest, CheckFailsWritesBundle) {
  std::string out = (dir_ / "out").string();
  CliResult r = RunCli({"bisect", model_, "--check-fails", "E0404", "-o", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("12 -> 1 nodes"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "model.onnx"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "report.json"));
  EXPECT_TRUE(r.err.empty()) << "progress only on a terminal: " << r.err;
  // repro.sh reproduces: the checker rejects the reduced model (exit 1).
  CliResult check = RunCli({"check", "--full", (dir_ / "out" / "model.onnx").string()});
  EXPECT_EQ(check.exit_code, 1);
}

TEST_F(BisectCliTest, JsonPrintsReport) {
  CliResult r = RunCli({"bisect", model_, "--check-fails", "-o", (dir_ / "out").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"oracle_calls\""), std::string::npos);
}

TEST_F(BisectCliTest, NotInterestingExits2) {
  CliResult r = RunCli({"bisect", model_, "--nan", "-o", (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not interesting"), std::string::npos);
}

// --range sets the random inputs' values: Sqrt(Neg(x)) makes NaN from
// positive inputs (the default range 0,1), none from negative ones.
TEST_F(BisectCliTest, RangeSetsTheRandomInputs) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}})
      .Node("Abs", {"x"}, {"a"}, {}, "abs")
      .Node("Neg", {"x"}, {"n"}, {}, "neg")
      .Node("Sqrt", {"n"}, {"s"}, {}, "sqrt")
      .Node("Add", {"a", "s"}, {"y"}, {}, "add")
      .Output("y", pb::kFloat, {{2, 4}});
  std::string model = (dir_ / "sqrt.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build()), {}, model).ok());
  CliResult plain = RunCli({"bisect", model, "--nan", "-o", (dir_ / "p").string()});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("4 -> "), std::string::npos) << plain.out;
  CliResult positive = RunCli({"bisect", model, "--nan", "--range", "0.5,1", "-o", (dir_ / "q").string()});
  EXPECT_EQ(positive.exit_code, 0) << positive.err;
  CliResult negative = RunCli({"bisect", model, "--nan", "--range=-1,-0.5", "-o", (dir_ / "r").string()});
  EXPECT_EQ(negative.exit_code, 2) << negative.err;
  EXPECT_NE(negative.err.find("not interesting"), std::string::npos) << negative.err;
  EXPECT_EQ(RunCli({"bisect", model, "--nan", "--range", "1,0", "-o", (dir_ / "s").string()}).exit_code, 2);
}

TEST_F(BisectCliTest, TheBundleNeverReplacesTheModelBeingReduced) {
  fs::create_directories(dir_ / "b");
  fs::copy_file(model_, dir_ / "b" / "model.onnx");
  const auto size = fs::file_size(dir_ / "b" / "model.onnx");
  CliResult r =
      RunCli({"bisect", (dir_ / "b" / "model.onnx").string(), "--check-fails", "-o", (dir_ / "b").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("would overwrite the model"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(dir_ / "b" / "model.onnx"), size);
}

TEST_F(BisectCliTest, UsageErrors) {
  EXPECT_EQ(RunCli({"bisect", model_, "-o", (dir_ / "o").string()}).exit_code, 2);  // no oracle
  EXPECT_EQ(RunCli({"bisect", model_, "--nan", "--check-fails", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--nan", "--strategies", "nope", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--run-fails", "(", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--nan"}).exit_code, 2);  // no -o
  // --inputs: not a folder; --optimize takes one.
  EXPECT_EQ(RunCli({"bisect", model_, "--nan", "--inputs", (dir_ / "missing").string(), "-o", (dir_ / "o").string()})
                .exit_code,
            2);
  fs::create_directories(dir_ / "s1");
  fs::create_directories(dir_ / "s2");
  EXPECT_EQ(RunCli({"bisect", model_, "--optimize", "--inputs", (dir_ / "s1").string(), "--inputs",
                    (dir_ / "s2").string(), "-o", (dir_ / "o").string()})
                .exit_code,
            2);
}

TEST_F(BisectCliTest, UnreadableModelExits3) {
  std::ofstream(dir_ / "bad.onnx") << "garbage";
  EXPECT_EQ(RunCli({"bisect", (dir_ / "bad.onnx").string(), "--nan", "-o", (dir_ / "o").string()}).exit_code, 3);
  EXPECT_EQ(RunCli({"bisect", (dir_ / "missing.onnx").string(), "--nan", "-o", (dir_ / "o").string()}).exit_code, 3);
}

pb::TensorProto Floats(std::string name, std::vector<int64_t> dims, std::vector<float> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  t.dims = std::move(dims);
  t.float_data = std::move(values);
  return t;
}

// x -> Abs -> Conv -> BatchNormalization -> Relu -> Neg -> y; with `nan`,
// x -> Abs -> Sub(10) -> Sqrt -> Conv -> Relu -> Neg -> y: the NaNs that
// Sqrt makes stay NaN through the cpu backend's fused Conv+Relu as on the
// reference backend. Only the Conv rounds differently between backends.
std::string WriteConvModel(const fs::path& dir, bool nan) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 2, 4, 4}})
      .Initializer(Floats("ten", {}, {10.0f}))
      .Initializer(Floats("w", {2, 2, 1, 1}, {0.5f, -1.25f, 2.0f, 0.75f}))
      .Initializer(Floats("s", {2}, {1.5f, 0.25f}))
      .Initializer(Floats("o", {2}, {0.1f, -0.2f}))
      .Initializer(Floats("m", {2}, {0.3f, 0.05f}))
      .Initializer(Floats("v", {2}, {2.0f, 0.5f}))
      .Node("Abs", {"x"}, {"a"}, {}, "pre");
  std::string conv_in = "a";
  if (nan) {
    g.Node("Sub", {"a", "ten"}, {"d"}, {}, "sub").Node("Sqrt", {"d"}, {"q"}, {}, "sqrt");
    conv_in = "q";
  }
  g.Node("Conv", {conv_in, "w"}, {"c"}, {}, "conv");
  if (!nan) g.Node("BatchNormalization", {"c", "s", "o", "m", "v"}, {"bn"}, {}, "bn");
  g.Node("Relu", {nan ? "c" : "bn"}, {"r"}, {}, "relu")
      .Node("Neg", {"r"}, {"y"}, {}, "post")
      .Output("y", pb::kFloat, {{1, 2, 4, 4}});
  std::string path = (dir / (nan ? "nanconv.onnx" : "convbn.onnx")).string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, path).ok());
  return path;
}

TEST_F(BisectCliTest, OptimizeNamesTheRewriteAndShrinksAroundIt) {
  std::string in = WriteConvModel(dir_, false);
  fs::path out = dir_ / "opt";
  CliResult r = RunCli({"bisect", in, "--optimize", "--passes", "fuse-conv-bn", "--atol", "0", "--rtol", "0", "-o",
                        out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("first rewrite that moves the outputs: #1 fuse-conv-bn"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes around the rewrite"), std::string::npos) << r.out;
  for (const char* f : {"before.onnx", "after.onnx", "model.onnx", "repro.sh", "report.json"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
  // The small model with its inputs still moves under the same flags.
  CliResult again = RunCli({"optimize", (out / "model.onnx").string(), "-o", (dir_ / "o.onnx").string(), "--inputs",
                            (out / "test_data_set_0").string(), "--passes", "fuse-conv-bn", "--atol", "0", "--rtol",
                            "0"});
  EXPECT_EQ(again.exit_code, 1) << again.out << again.err;
  CliResult json = RunCli({"bisect", in, "--optimize", "--atol", "0", "--rtol", "0", "-o", out.string(), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"pass\": \"fuse-conv-bn\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"shrunk\": true"), std::string::npos) << json.out;
  std::ifstream report(out / "report.json");
  EXPECT_EQ(json.out,
            std::string((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>()));
  // Default tolerance: nothing moves, so the original is not interesting.
  EXPECT_EQ(RunCli({"bisect", in, "--optimize", "-o", (dir_ / "none").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", in, "--optimize", "--passes", "nope", "-o", (dir_ / "none").string()}).exit_code, 2);
}

TEST_F(BisectCliTest, MismatchBetweenCpuAndReference) {
  // At zero tolerance the cpu backend's Conv (BatchNormalization folded into
  // its weights, float sums) differs from the reference's in the last bits.
  std::string in = WriteConvModel(dir_, false);
  fs::path out = dir_ / "mm";
  CliResult r = RunCli({"bisect", in, "--mismatch", "--a-backend", "cpu", "--b-backend", "reference", "--atol",
                        "0", "--rtol", "0", "-o", out.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"reproduces\": true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"name\": \"conv\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"name\": \"post\""), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out / "test_data_set_0" / "input_0.pb"));
  // repro.sh runs as it is (the binary that wrote it, from any folder) and
  // reproduces: compare exits 1, beyond tolerance.
  const std::string repro = absl::StrCat("sh '", (out / "repro.sh").string(), "' >/dev/null 2>&1");
  const int status = std::system(repro.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  // The same backend on both sides agrees: not interesting.
  EXPECT_EQ(RunCli({"bisect", in, "--mismatch", "--a-backend", "cpu", "--b-backend", "cpu", "--atol", "0",
                    "--rtol", "0", "-o", (dir_ / "none").string()}).exit_code, 2);
  // A NaN through the fused Conv and Relu stays NaN on both backends.
  EXPECT_EQ(RunCli({"bisect", WriteConvModel(dir_, true), "--mismatch", "--a-backend", "cpu", "--b-backend",
                    "reference", "-o", (dir_ / "nan").string()}).exit_code, 2);
}

// Against reference files (here the cpu backend's outputs, judged on the
// reference backend at zero tolerance): the bundle holds those files' values
// as its expected outputs, and repro.sh compares one execution with them.
TEST_F(BisectCliTest, MismatchAgainstReferenceFilesBundlesThem) {
  std::string in = WriteConvModel(dir_, false);
  fs::path ref = dir_ / "ref", out = dir_ / "mr";
  ASSERT_EQ(
      RunCli({"run", in, "--random", "--backend", "cpu", "-q", "--save-outputs", ref.string()}).exit_code, 0);
  CliResult r = RunCli({"bisect", in, "--mismatch", "--reference", ref.string(), "--atol", "0", "--rtol", "0",
                        "-o", out.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"reproduces\": true"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out / "test_data_set_0" / "input_0.pb"));
  ASSERT_TRUE(fs::exists(out / "test_data_set_0" / "output_0.pb"));
  std::ifstream script(out / "repro.sh");
  std::string text((std::istreambuf_iterator<char>(script)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--reference"), std::string::npos) << text;
  EXPECT_EQ(text.find("--b "), std::string::npos) << text;
  const std::string repro = absl::StrCat("sh '", (out / "repro.sh").string(), "' >/dev/null 2>&1");
  const int status = std::system(repro.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  // Within the default tolerance, the same model agrees with the files.
  EXPECT_EQ(RunCli({"compare", "--a", (out / "model.onnx").string(), "--reference",
                    (out / "test_data_set_0").string()})
                .exit_code,
            0);
}

// Whether process `pid` still runs (a zombie no one reaped does not).
bool Running(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Ended by SIGTERM or SIGINT mid-run (a command oracle sleeping in its own
// process group), bisect leaves no scratch folder and no running command
// behind, and ends by the signal.
TEST_F(BisectCliTest, InterruptedBisectLeavesNothingBehind) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    fs::path tmp = dir_ / ("tmp" + std::to_string(sig));
    fs::create_directories(tmp);
    const fs::path pid_file = dir_ / ("pid" + std::to_string(sig));
    CliOptions options;
    options.timeout_seconds = 3;
    options.timeout_signal = sig;
    options.env = {"TMPDIR=" + tmp.string()};
    CliResult r = RunCli(
        {"bisect", model_, "--command", "echo $$ > '" + pid_file.string() + "'; exec sleep 60 # {model}",
         "-o", (dir_ / "out").string()},
        options);
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.signal, sig) << r.err;
    EXPECT_TRUE(fs::is_empty(tmp)) << "scratch left in " << tmp;
    std::string pid;
    std::ifstream(pid_file) >> pid;
    ASSERT_FALSE(pid.empty());  // the command was running
    for (int i = 0; i < 100 && Running(pid); ++i) usleep(10000);
    EXPECT_FALSE(Running(pid)) << "the command's sleep " << pid << " outlived bisect";
  }
}

// A run of the original past --timeout judges nothing: the error says so
// (not that its outputs match).
TEST_F(BisectCliTest, AnOriginalThatTimesOutSaysSo) {
  std::string in = (dir_ / "forever.onnx").string();
  ASSERT_TRUE(io::SaveModel(EndlessLoopModel(), dir_, in).ok());
  CliResult r = RunCli({"bisect", in, "--mismatch", "--timeout", "0.5", "-o", (dir_ / "t").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("timed out after 0.5 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise --timeout"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("outputs match"), std::string::npos) << r.err;
}

TEST_F(BisectCliTest, ACommandPastTimeoutOnTheOriginalSaysSo) {
  CliResult r = RunCli(
      {"bisect", model_, "--command", "sleep 5; exit 1", "--timeout", "0.3", "-o", (dir_ / "t").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("ran past --timeout"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("exits 0"), std::string::npos) << r.err;
}

// --max-calls counts every oracle call: the original's, the reduction's and
// the final test's, with any -j.
TEST_F(BisectCliTest, MaxCallsIsNeverExceeded) {
  for (int jobs : {1, 2}) {
    for (int max : {1, 3, 7}) {
      SCOPED_TRACE(absl::StrCat("-j ", jobs, " --max-calls ", max));
      fs::path out = dir_ / absl::StrCat("o", jobs, "_", max);
      CliResult r = RunCli({"bisect", model_, "--command", "! grep -q planted {model}", "--max-calls",
                            std::to_string(max), "-j", std::to_string(jobs), "-o", out.string()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      std::ifstream in(out / "report.json");
      std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t at = json.find("\"oracle_calls\": ");
      ASSERT_NE(at, std::string::npos) << json;
      EXPECT_LE(std::atoi(json.c_str() + at + 16), max) << json;
    }
  }
}

// Candidates keep reading the original's external data (the planted node's
// weights live there): the model still shrinks to that node.
TEST_F(BisectCliTest, ModelsWithExternalDataShrink) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 256}});
  b.Initializer(RawFloatTensor("w", {256}, 1));
  std::string prev = "x";
  for (int i = 0; i < 8; ++i) {
    std::string out = i == 7 ? "y" : "t" + std::to_string(i);
    if (i == 4) {
      b.Node("Add", {prev, "w"}, {out}, {AttrInt("bogus", 1)}, "planted");
    } else {
      b.Node("Abs", {prev}, {out}, {}, "n" + std::to_string(i));
    }
    prev = out;
  }
  b.Output("y", pb::kFloat, {{2, 256}});
  fs::path in = dir_ / "ext" / "m.onnx";
  fs::create_directories(in.parent_path());
  io::SaveOptions save;
  save.external_data_threshold = 64;
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build()), {}, in, save).ok());
  ASSERT_TRUE(fs::exists(in.string() + ".data"));
  CliResult r = RunCli({"bisect", in.string(), "--check-fails", "E0404", "-o", (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 -> 1 nodes"), std::string::npos) << r.out;
  EXPECT_EQ(RunCli({"check", "--full", (dir_ / "out" / "model.onnx").string()}).exit_code, 1);
}

// Zeroed weights change what the reduced model computes: the bundle then
// carries no expected outputs (the original's would not match).
TEST_F(BisectCliTest, NoStaleExpectedOutputsAfterWeightsAreZeroed) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}});
  b.Initializer(RawFloatTensor("w", {4, 4}, 1));
  b.Node("MatMul", {"x", "w"}, {"m"}, {}, "mm");
  b.Node("Relu", {"m"}, {"y"}, {}, "relu");
  b.Output("y", pb::kFloat, {{2, 4}});
  fs::path in = dir_ / "mm.onnx";
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build()), {}, in).ok());
  fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "before.onnx") << "stale";
  CliResult r = RunCli(
      {"bisect", in.string(), "--command", "! grep -q MatMul {model}", "--random", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream report(out / "report.json");
  std::string json((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  ASSERT_NE(json.find("\"name\": \"initializers\",\n      \"calls\": "), std::string::npos) << json;
  EXPECT_TRUE(fs::exists(out / "test_data_set_0" / "input_0.pb"));
  EXPECT_FALSE(fs::exists(out / "test_data_set_0" / "output_0.pb")) << json;
  EXPECT_FALSE(fs::exists(out / "before.onnx"));
}

TEST_F(BisectCliTest, ListStrategies) {
  CliResult r = RunCli({"bisect", "--list-strategies"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("ddmin"), std::string::npos);
  EXPECT_NE(r.out.find("prefix-suffix"), std::string::npos);
}

}  // namespace
}  // namespace onnxkit::testing
