// Tests of CheckFile / CheckModel (checker/checker.cc): loading failures as
// container diagnostics, options (max errors, werror, --full), gating of
// rule groups, determinism.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "tests/checker/check_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Varint(uint64_t v) {
  std::string out;
  do {
    out += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  return out;
}

std::filesystem::path Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(CheckFileTest, LightModelIsValid) {
  checker::CheckResult r = checker::CheckFile(TestdataPath("models/light/light_squeezenet.onnx"), {});
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
  EXPECT_EQ(r.status(), checker::FileStatus::kValid);
  EXPECT_EQ(r.path, TestdataPath("models/light/light_squeezenet.onnx").string());
}

TEST(CheckFileTest, UnreadableFilesAreRefused) {
  checker::CheckResult r = checker::CheckFile("/nonexistent/model.onnx", {});
  EXPECT_EQ(Only(r, "E0100"), "cannot open: No such file or directory");
  EXPECT_EQ(r.status(), checker::FileStatus::kRefused);
  r = checker::CheckFile(TestdataPath("models"), {});
  EXPECT_THAT(Only(r, "E0100"), HasSubstr("a directory"));
  auto dir = MakeTempDir();
  ASSERT_EQ(::mkfifo((dir / "pipe.onnx").c_str(), 0600), 0);
  r = checker::CheckFile(dir / "pipe.onnx", {});  // must not block waiting for a writer
  EXPECT_THAT(Only(r, "E0100"), HasSubstr("not a regular file"));
}

TEST(CheckFileTest, BytesThatAreNotAModelAreInvalid) {
  auto dir = MakeTempDir();
  checker::CheckResult r = checker::CheckFile(Write(dir / "empty.onnx", ""), {});
  EXPECT_EQ(Only(r, "E0102"), "is not an ONNX model (empty file)");
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
  r = checker::CheckFile(Write(dir / "garbage.onnx", "\x08\x09\x08\x96"), {});  // truncated varint at byte 2
  std::vector<checker::Diagnostic> found = Findings(r, "E0101");
  ASSERT_EQ(found.size(), 1u) << Dump(r);
  EXPECT_EQ(found[0].message,
            "not a valid ONNX model (malformed protobuf at byte offset 2: truncated or overlong varint)");
  EXPECT_EQ(found[0].byte_offset, 2);
  // A protobuf message, but no ModelProto field of substance.
  r = checker::CheckFile(Write(dir / "other.onnx",
                               "\x12\x03"
                               "abc"),
                         {});
  EXPECT_THAT(Only(r, "E0102"), HasSubstr("is not an ONNX model"));
}

TEST(CheckFileTest, MessageNestingIsRefused) {
  // Graphs nested through node attributes far past the message depth limit:
  // GraphProto.node (1) > NodeProto.attribute (5) > AttributeProto.g (6).
  std::string graph;
  for (int level = 0; level < 60; ++level) {
    std::string attribute = "\x32" + Varint(graph.size()) + graph;
    std::string node = "\x2a" + Varint(attribute.size()) + attribute;
    graph = "\x0a" + Varint(node.size()) + node;
  }
  auto dir = MakeTempDir();
  checker::CheckResult r =
      checker::CheckFile(Write(dir / "deep.onnx", "\x08\x09\x3a" + Varint(graph.size()) + graph), {});
  EXPECT_THAT(Only(r, "E0104"), HasSubstr("nested deeper than 100"));
  EXPECT_EQ(r.status(), checker::FileStatus::kRefused);
}

TEST(CheckFileTest, MemoryAmplificationIsRefused) {
  // 3 MB of empty NodeProtos: decoding them would need far more memory than
  // the budget of 128 MiB + 4 x the file size.
  std::string graph;
  for (int i = 0; i < 1500000; ++i) graph += std::string("\x0a\x00", 2);
  auto dir = MakeTempDir();
  checker::CheckResult r =
      checker::CheckFile(Write(dir / "bomb.onnx", "\x08\x09\x3a" + Varint(graph.size()) + graph), {});
  EXPECT_THAT(Only(r, "E0105"), HasSubstr("MiB of memory"));
  EXPECT_EQ(r.status(), checker::FileStatus::kRefused);
}

TEST(CheckFileTest, ExternalDataResolvesNextToTheModelFile) {
  auto dir = MakeTempDir();
  Write(dir / "w.bin", FloatBytes(4));
  pb::ModelProto m = MinimalModel({ExternalTensor("w", {4}, pb::kFloat, "w.bin", 0, 16)});
  m.graph->output[0].type = TensorType(pb::kFloat, std::vector<int64_t>{4});
  Write(dir / "m.onnx", io::Encode(m));
  checker::CheckResult r = checker::CheckFile(dir / "m.onnx", {});
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
  m.graph->initializer[0] = ExternalTensor("w", {4}, pb::kFloat, "../w.bin");
  Write(dir / "bad.onnx", io::Encode(m));
  EXPECT_EQ(checker::CheckFile(dir / "bad.onnx", {}).status(), checker::FileStatus::kRefused);
}

// Five broken nodes (unknown ops).
pb::ModelProto FiveErrors() {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}});
  std::string prev = "x";
  for (int i = 0; i < 5; ++i) {
    std::string out = "v" + std::to_string(i);
    g.Node("Bogus" + std::to_string(i), {prev}, {out});
    prev = out;
  }
  g.Output(prev);
  return ModelFromGraph(g.Build());
}

TEST(CheckModelTest, MaxErrorsStopsEarly) {
  EXPECT_EQ(Check(FiveErrors()).errors, 5);
  checker::CheckOptions options;
  options.max_errors = 2;
  checker::CheckResult r = Check(FiveErrors(), options);
  EXPECT_EQ(r.errors, 2);
  EXPECT_EQ(r.diagnostics.size(), 2u);
  EXPECT_TRUE(r.truncated);
  EXPECT_THAT(r.notes, Contains(HasSubstr("stopped after 2 errors (--max-errors 2)")));
  // Exactly N errors under --max-errors N: complete, not truncated.
  options.max_errors = 5;
  checker::CheckResult all = Check(FiveErrors(), options);
  EXPECT_EQ(all.errors, 5);
  EXPECT_FALSE(all.truncated);
  EXPECT_TRUE(all.notes.empty());
}

TEST(CheckModelTest, DiagnosticsAreCappedPerFile) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}});
  for (int i = 0; i < 12000; ++i) g.Node("Bogus", {"x"}, {"v" + std::to_string(i)});
  g.Output("v0");
  checker::CheckResult r = Check(ModelFromGraph(g.Build()));
  EXPECT_EQ(r.diagnostics.size(), static_cast<size_t>(checker::kMaxDiagnostics));
  EXPECT_TRUE(r.truncated);
  EXPECT_THAT(r.notes, Contains("stopped after 10000 diagnostics (the limit per file)"));
}

TEST(CheckModelTest, WerrorMakesWarningsErrors) {
  pb::ModelProto m = FiveErrors();
  m.graph->name = "";
  for (pb::NodeProto& n : m.graph->node) n.op_type = "Relu";
  checker::CheckResult r = Check(m);
  EXPECT_EQ(r.warnings, 1);
  EXPECT_EQ(r.status(), checker::FileStatus::kValid);
  checker::CheckOptions werror;
  werror.werror = true;
  r = Check(m, werror);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.warnings, 0);
  EXPECT_EQ(r.diagnostics[0].severity, checker::Severity::kError);
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
}

TEST(CheckModelTest, FullIsSkippedAfterStructuralErrors) {
  checker::CheckOptions full;
  full.full = true;
  checker::CheckResult r = Check(FiveErrors(), full);
  EXPECT_THAT(r.notes, Contains(HasSubstr("--full was skipped")));
  // Without errors, inference runs (or says it is not built in).
  pb::ModelProto valid = FiveErrors();
  for (pb::NodeProto& n : valid.graph->node) n.op_type = "Relu";
  r = Check(valid, full);
  EXPECT_THAT(r.notes, ::testing::Not(Contains(HasSubstr("--full was skipped"))));
  EXPECT_EQ(r.status(), checker::FileStatus::kValid) << Dump(r);
}

TEST(CheckModelTest, DeterministicOrder) {
  pb::ModelProto m = FiveErrors();
  m.metadata_props = {Entry("k", "1"), Entry("k", "2")};
  EXPECT_EQ(Dump(Check(m)), Dump(Check(m)));
  checker::CheckResult r = Check(m);
  // Model rules first, then the node rules (metadata does not gate them).
  ASSERT_EQ(r.diagnostics.size(), 6u) << Dump(r);
  EXPECT_EQ(r.diagnostics[0].rule->code, "E0205");
  for (int i = 1; i < 6; ++i)
    EXPECT_THAT(r.diagnostics[i].message, HasSubstr("Bogus" + std::to_string(i - 1)));
}

}  // namespace
}  // namespace onnxkit::testing
