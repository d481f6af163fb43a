// Every model of the hostile catalogue (testdata/hostile) that loads is run
// on both backends with random inputs: whatever the model does (functions
// that call themselves, nodes naming outputs their op lacks, huge shapes),
// the run ends with an error naming the problem or succeeds, never with a
// crash or an internal error. Also external data where kernels read it.
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
#include "tests/util/tensors.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

TEST(HostileRunTest, EveryLoadableModelRunsOrFailsCleanly) {
  const std::vector<fs::path> models = HostileModels();
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

// A Constant node whose value is external data (in the main graph and in a
// model-local function) runs like one holding it inline; a location leaving
// the model's folder is refused.
TEST(HostileRunTest, ConstantValuesStoredAsExternalData) {
  const fs::path dir = MakeTempDir();
  {
    std::ofstream out(dir / "k.bin", std::ios::binary);
    const float k[2] = {1.5f, -2.f};
    out.write(reinterpret_cast<const char*>(k), sizeof(k));
  }
  auto external = [](const std::string& location) {
    pb::TensorProto t;
    t.name = "k";
    t.data_type = pb::kFloat;
    t.dims = {2};
    t.data_location = 1;
    t.external_data.push_back(Entry("location", location));
    pb::AttributeProto a;
    a.name = "value";
    a.type = pb::kAttrTensor;
    a.t = t;
    return a;
  };
  pb::FunctionProto f;
  f.domain = "local";
  f.name = "AddK";
  f.input = {"a"};
  f.output = {"b"};
  f.node = {MakeNode("Constant", {}, {"fk"}, {external("k.bin")}), MakeNode("Add", {"a", "fk"}, {"b"})};
  f.opset_import = ModelFromGraph({}).opset_import;
  pb::NodeProto call = MakeNode("AddK", {"y"}, {"z"});
  call.domain = "local";
  pb::ModelProto model = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kFloat, std::vector<int64_t>{2})
                                            .Node("Constant", {}, {"k"}, {external("k.bin")})
                                            .Node("Mul", {"x", "k"}, {"y"})
                                            .Output("z", pb::kFloat)
                                            .Build());
  model.graph->node.push_back(call);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  model.opset_import.push_back(local);
  model.functions.push_back(f);
  {
    std::ofstream out(dir / "m.onnx", std::ios::binary);
    out << io::Encode(model);
  }
  model.graph->node[0].attribute[0].t->external_data[0].value = "../k.bin";
  {
    std::ofstream out(dir / "escape.onnx", std::ios::binary);
    out << io::Encode(model);
  }
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    SCOPED_TRACE(runner::BackendName(backend));
    runner::SessionOptions options;
    options.backend = backend;
    auto loaded = io::LoadModel(dir / "m.onnx");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto session = runner::Session::Create(*std::move(loaded), options);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<std::pair<std::string, runner::RtValue>> feeds;
    feeds.emplace_back("x", runner::RtValue::FromTensor(Floats({2}, {2.f, 3.f})));
    auto out = (*session)->Run(std::move(feeds));
    ASSERT_TRUE(out.ok()) << out.status();
    const runner::Tensor& z = (*out)[0].tensor();
    ASSERT_EQ(z.size(), 2);
    EXPECT_EQ(z.data<float>()[0], 2.f * 1.5f + 1.5f);
    EXPECT_EQ(z.data<float>()[1], 3.f * -2.f - 2.f);
    auto escape = io::LoadModel(dir / "escape.onnx");
    ASSERT_TRUE(escape.ok()) << escape.status();
    auto refused = runner::Session::Create(*std::move(escape), options);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(std::string(refused.status().message()).find("refused"), std::string::npos) << refused.status();
  }
  fs::remove_all(dir);
}

// A node with more inputs than its op takes is refused with the count,
// not run with the extra inputs ignored.
TEST(HostileRunTest, ExtraInputsAreRefused) {
  pb::ModelProto model = ModelFromGraph(GraphBuilder("g")
                                            .Input("x", pb::kFloat, std::vector<int64_t>{2})
                                            .Node("Relu", {"x", "x"}, {"y"}, {}, "relu")
                                            .Output("y", pb::kFloat)
                                            .Build());
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    io::LoadedModel loaded;
    loaded.proto = model;
    runner::SessionOptions options;
    options.backend = backend;
    auto session = runner::Session::Create(std::move(loaded), options);
    absl::Status status = session.status();
    if (session.ok()) {
      std::vector<std::pair<std::string, runner::RtValue>> feeds;
      feeds.emplace_back("x", runner::RtValue::FromTensor(Floats({2}, {-1.f, 1.f})));
      status = (*session)->Run(std::move(feeds)).status();
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(std::string(status.message()).find("the node has 2 inputs, but Relu-14 takes at most 1"),
              std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace onnxkit::testing
