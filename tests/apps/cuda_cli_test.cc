// End-to-end tests of `--backend cuda` on a machine without a usable CUDA
// device (or a binary built without CUDA): run and compare exit 3 with
// "no CUDA device", print nothing on stdout and write nothing. With a
// device, `run --backend cuda --json` reports placement and copies.
#include <filesystem>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/cuda/cuda_backend.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string WriteReluModel(const fs::path& dir) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("Relu", {"x"}, {"r"})
                                        .Node("Sin", {"r"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  fs::path path = dir / "m.onnx";
  EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
  return path.string();
}

bool HaveDevice() { return runner::cuda::CheckDevice(0).ok(); }

TEST(CudaCliTest, RunWithoutDeviceExits3AndDoesNothingElse) {
  if (HaveDevice()) GTEST_SKIP() << "a CUDA device is present";
  auto dir = MakeTempDir();
  std::string model = WriteReluModel(dir);
  fs::path outputs = dir / "out";
  CliResult r = RunCli({"run", model, "--random", "--backend", "cuda", "--save-outputs", outputs.string()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no CUDA device"));
  if (!runner::cuda::CompiledIn()) {
    EXPECT_THAT(r.err, HasSubstr("built without the CUDA backend"));
  }
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(outputs));
  // The device is checked before the model is even read.
  CliResult missing = RunCli({"run", (dir / "absent.onnx").string(), "--backend", "cuda"});
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.err, HasSubstr("no CUDA device"));
}

TEST(CudaCliTest, CompareWithoutDeviceExits3) {
  if (HaveDevice()) GTEST_SKIP() << "a CUDA device is present";
  auto dir = MakeTempDir();
  std::string model = WriteReluModel(dir);
  CliResult r = RunCli({"compare", "--a", model, "--a-backend", "cuda", "--b", model, "--b-backend", "reference",
                        "--random"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no CUDA device"));
}

TEST(CudaCliTest, NegativeDeviceIsAUsageError) {
  auto dir = MakeTempDir();
  std::string model = WriteReluModel(dir);
  CliResult r = RunCli({"run", model, "--random", "--backend", "cuda", "--device", "-1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--device"));
}

TEST(CudaCliTest, OtherBackendsRunInACudaBuild) {
  auto dir = MakeTempDir();
  std::string model = WriteReluModel(dir);
  CliResult r = RunCli({"run", model, "--random", "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CudaCliTest, RunJsonReportsPlacementOnADevice) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  auto dir = MakeTempDir();
  std::string model = WriteReluModel(dir);
  CliResult r = RunCli({"run", model, "--random", "--backend", "cuda", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Each placement entry names the node's op, then where it ran.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"("op": "Relu",\s*"backend": "cuda")"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"("op": "Sin",\s*"backend": "cpu")"))) << r.out;
  EXPECT_THAT(r.out, HasSubstr(R"("copies": {)"));
}

}  // namespace
}  // namespace onnxkit::testing
