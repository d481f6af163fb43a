// The lossless round trip over the ONNX backend suites: for every model,
// Encode(ToProto(*FromProto(DecodeModel(bytes)))) == Encode(DecodeModel(bytes))
// byte for byte, and the IR verifies. Also prints FromProto + ToProto times
// for a large synthetic model (printed, never asserted: benchmarks are not
// tests).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::ir {
namespace {

namespace fs = std::filesystem;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::ModelFromGraph;

// Models FromProto is expected to reject, by path relative to the suite
// folder, with the reason. (None so far: every suite model is sound.)
const std::map<std::string, std::string>& ExpectedRejections() {
  static const auto* kRejections = new std::map<std::string, std::string>{};
  return *kRejections;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `dir`/*/model.onnx (or `dir`/*.onnx when `flat`), sorted.
std::vector<fs::path> ModelsIn(const fs::path& dir, bool flat) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (flat) {
      if (entry.path().extension() == ".onnx") out.push_back(entry.path());
    } else if (fs::is_regular_file(entry.path() / "model.onnx", ec)) {
      out.push_back(entry.path() / "model.onnx");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Tally {
  int models = 0;
  int identical = 0;
  int rejected_as_expected = 0;
};

void CheckModel(const fs::path& root, const fs::path& path, Tally* tally) {
  ++tally->models;
  std::string rel = fs::relative(path, root).string();
  std::string bytes = ReadFile(path);
  auto decoded = io::DecodeModel(bytes);
  ASSERT_TRUE(decoded.ok()) << rel << ": " << decoded.status();
  std::string expected = io::Encode(*decoded);
  auto model = FromProto(std::move(*decoded));
  auto rejection = ExpectedRejections().find(rel);
  if (!model.ok()) {
    EXPECT_NE(rejection, ExpectedRejections().end()) << rel << ": " << model.status();
    if (rejection != ExpectedRejections().end()) ++tally->rejected_as_expected;
    return;
  }
  EXPECT_EQ(rejection, ExpectedRejections().end()) << rel << " is now accepted: update ExpectedRejections()";
  absl::Status verified = Verify(**model);
  EXPECT_TRUE(verified.ok()) << rel << ": " << verified;
  bool same = io::Encode(ToProto(**model)) == expected;
  same = same && io::Encode(ToProto(std::move(*model))) == expected;
  EXPECT_TRUE(same) << rel << ": round trip differs";
  if (same) ++tally->identical;
}

TEST(IrRoundTripTest, BackendSuitesAreByteIdentical) {
  struct Folder {
    fs::path root;
    std::string sub;
    bool flat;
  };
  std::vector<Folder> folders;
  if (fs::path b = testing::BackendDataDir(); !b.empty()) {
    for (const char* sub : {"node", "simple"}) folders.push_back({b, sub, false});
    folders.push_back({b, "light", true});
  }
  if (fs::path d = testing::DebianBackendDataDir(); !d.empty()) {
    for (const char* sub : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
      folders.push_back({d, sub, false});
    }
  }
  if (folders.empty()) GTEST_SKIP() << "no backend suite data";
  Tally tally;
  int found = 0;
  for (const Folder& f : folders) {
    std::vector<fs::path> models = ModelsIn(f.root / f.sub, f.flat);
    EXPECT_FALSE(models.empty()) << (f.root / f.sub) << " holds no model";
    found += static_cast<int>(models.size());
    for (const fs::path& p : models) CheckModel(f.root, p, &tally);
  }
  std::cout << "round trip: " << tally.models << " models, " << tally.identical << " byte-identical, "
            << tally.rejected_as_expected << " rejected as listed\n";
  EXPECT_EQ(tally.models, found);
  EXPECT_EQ(tally.identical + tally.rejected_as_expected, found);
  EXPECT_EQ(tally.rejected_as_expected, static_cast<int>(ExpectedRejections().size()));
}

// A BERT-sized synthetic model: `nodes` nodes in a chain, 200 weights views
// into one buffer of `mb` MiB, value_info for every intermediate.
std::string LargeModelBytes(int mb, int nodes) {
  auto buffer = std::make_shared<std::string>(static_cast<size_t>(mb) << 20, '\x01');
  GraphBuilder b("bert_like");
  b.Input("x", pb::kFloat, std::vector<int64_t>{1, 128, 768});
  const int kWeights = 200;
  size_t slice = buffer->size() / kWeights;
  for (int i = 0; i < kWeights; ++i) {
    pb::TensorProto t;
    t.name = "w" + std::to_string(i);
    t.data_type = pb::kFloat;
    t.dims = {static_cast<int64_t>(slice / 4)};
    t.raw_data = Bytes::View(buffer, buffer->data() + static_cast<size_t>(i) * slice, slice);
    b.Initializer(std::move(t));
  }
  std::string prev = "x";
  for (int i = 0; i < nodes; ++i) {
    std::string out = "h" + std::to_string(i);
    if (i % 5 == 0) {
      b.Node("MatMul", {prev, "w" + std::to_string((i / 5) % kWeights)}, {out}, {}, "n" + std::to_string(i));
    } else {
      b.Node(i % 2 ? "Add" : "Relu",
             i % 2 ? std::vector<std::string>{prev, prev} : std::vector<std::string>{prev}, {out}, {},
             "n" + std::to_string(i));
    }
    b.ValueInfo(out, pb::kFloat, std::vector<int64_t>{1, 128, 768});
    prev = out;
  }
  b.Output(prev, pb::kFloat);
  return io::Encode(ModelFromGraph(b.Build()));
}

TEST(IrRoundTripTest, LargeModelTiming) {
  int mb = 64;
  if (const char* env = std::getenv("ONNXKIT_IR_TIMING_MB")) mb = std::max(1, std::atoi(env));
  auto bytes = std::make_shared<std::string>(LargeModelBytes(mb, 1000));
  io::DecodeOptions options;
  options.keepalive = bytes;
  auto decoded = io::DecodeModel(*bytes, options);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto model = FromProto(std::move(*decoded));
  auto t1 = Clock::now();
  ASSERT_TRUE(model.ok()) << model.status();
  pb::ModelProto copied = ToProto(**model);
  auto t2 = Clock::now();
  pb::ModelProto moved = ToProto(std::move(*model));
  auto t3 = Clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::cout << "large model (" << (bytes->size() >> 20) << " MiB, 1000 nodes): FromProto " << ms(t1 - t0)
            << " ms, ToProto(copy) " << ms(t2 - t1) << " ms, ToProto(move) " << ms(t3 - t2) << " ms\n";
  // Weights stay views into the file bytes.
  const char* first = moved.graph->initializer[0].raw_data.data();
  EXPECT_TRUE(first >= bytes->data() && first < bytes->data() + bytes->size());
  EXPECT_TRUE(io::Encode(moved) == *bytes);  // not EXPECT_EQ: no diff of MiBs
  EXPECT_EQ(io::EncodedSize(copied), bytes->size());
}

}  // namespace
}  // namespace onnxkit::ir
