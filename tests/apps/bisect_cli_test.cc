// CLI tests of `onnxkit bisect`: exit codes, the bundle, error paths.
#include <filesystem>
#include <fstream>

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

TEST_F(BisectCliTest, UsageErrors) {
  EXPECT_EQ(RunCli({"bisect", model_, "-o", (dir_ / "o").string()}).exit_code, 2);  // no oracle
  EXPECT_EQ(RunCli({"bisect", model_, "--nan", "--check-fails", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--nan", "--strategies", "nope", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--run-fails", "(", "-o", (dir_ / "o").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"bisect", model_, "--nan"}).exit_code, 2);  // no -o
}

TEST_F(BisectCliTest, UnreadableModelExits3) {
  std::ofstream(dir_ / "bad.onnx") << "garbage";
  EXPECT_EQ(RunCli({"bisect", (dir_ / "bad.onnx").string(), "--nan", "-o", (dir_ / "o").string()}).exit_code, 3);
  EXPECT_EQ(RunCli({"bisect", (dir_ / "missing.onnx").string(), "--nan", "-o", (dir_ / "o").string()}).exit_code, 3);
}

TEST_F(BisectCliTest, ListStrategies) {
  CliResult r = RunCli({"bisect", "--list-strategies"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("ddmin"), std::string::npos);
  EXPECT_NE(r.out.find("prefix-suffix"), std::string::npos);
}

}  // namespace
}  // namespace onnxkit::testing
