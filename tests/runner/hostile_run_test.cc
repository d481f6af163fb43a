// Every model of the hostile catalogue (testdata/hostile) that loads is run
// on both backends with random inputs: whatever the model does (functions
// that call themselves, nodes naming outputs their op lacks, huge shapes),
// the run ends with an error naming the problem or succeeds, never with a
// crash or an internal error.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "runner/inputs.h"
#include "runner/session.h"
#include "runner/tensor.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

TEST(HostileRunTest, EveryLoadableModelRunsOrFailsCleanly) {
  std::vector<fs::path> models;
  for (const auto& entry : fs::directory_iterator(TestdataPath("hostile"))) {
    if (entry.path().extension() == ".onnx") models.push_back(entry.path());
  }
  std::sort(models.begin(), models.end());
  ASSERT_GT(models.size(), 100u);
  runner::SetMemoryLimit(int64_t{1} << 30);
  int ran = 0;
  for (const fs::path& path : models) {
    for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
      SCOPED_TRACE(path.filename().string() + " on " + std::string(runner::BackendName(backend)));
      auto loaded = io::LoadModel(path.string());
      if (!loaded.ok()) continue;
      runner::SessionOptions options;
      options.backend = backend;
      options.timeout_seconds = 5;
      auto session = runner::Session::Create(*std::move(loaded), options);
      if (!session.ok()) {
        EXPECT_NE(session.status().code(), absl::StatusCode::kInternal) << session.status();
        continue;
      }
      runner::InputSpec spec;
      spec.random = true;
      auto feeds = runner::PrepareInputs((*session)->FeedInputs(), spec);
      if (!feeds.ok()) continue;  // symbolic dims need --shape
      auto outputs = (*session)->Run(*std::move(feeds));
      if (!outputs.ok()) {
        EXPECT_NE(outputs.status().code(), absl::StatusCode::kInternal) << outputs.status();
      }
      ++ran;
    }
  }
  runner::SetMemoryLimit(0);
  EXPECT_GT(ran, 50);
}

TEST(HostileRunTest, ExternalWeightsShorterThanTheirDimsFailBeforeAnythingIsAllocated) {
  // w claims 2^36 floats (256 GiB) and its external file holds 16 bytes:
  // the session refuses it from the sizes alone (the external data's reader
  // checks them, and TensorFromProto again before allocating), allocating
  // nothing.
  const fs::path dir = MakeTempDir();
  {
    std::ofstream out(dir / "w.bin", std::ios::binary);
    out << std::string(16, '\x01');
  }
  pb::TensorProto w;
  w.name = "w";
  w.data_type = pb::kFloat;
  w.dims = {int64_t{1} << 36};
  w.data_location = 1;
  w.external_data.push_back(Entry("location", "w.bin"));
  pb::ModelProto model = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kFloat, std::vector<int64_t>{1})
                                            .Initializer(w)
                                            .Node("Add", {"x", "w"}, {"y"})
                                            .Output("y", pb::kFloat)
                                            .Build());
  {
    std::ofstream out(dir / "m.onnx", std::ios::binary);
    out << io::Encode(model);
  }
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    auto loaded = io::LoadModel(dir / "m.onnx");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const int64_t peak = runner::PeakTensorBytes();
    runner::SessionOptions options;
    options.backend = backend;
    auto session = runner::Session::Create(*std::move(loaded), options);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument) << session.status();
    EXPECT_NE(std::string(session.status().message()).find("length 16 does not match dims"),
              std::string::npos)
        << session.status();
    EXPECT_EQ(runner::PeakTensorBytes(), peak);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxkit::testing
