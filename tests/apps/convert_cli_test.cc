// CLI tests of `onnxkit convert`: every exit code.
#include <filesystem>

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

// A Softmax on `axis` at opset 13; with an unknown input rank a non-last
// axis cannot go below 13 (the older Softmax flattens at the axis).
std::string WriteModel(const fs::path& dir, int axis, bool known_rank = true) {
  GraphBuilder g("main");
  if (known_rank) {
    g.Input("x", pb::kFloat, {{2, 3}});
  } else {
    g.Input("x", pb::kFloat);
  }
  g.Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", axis)}, "soft").Output("y", pb::kFloat, {{2, 3}});
  std::string path = (dir / "m.onnx").string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 13, 7), dir, path).ok());
  return path;
}

TEST(ConvertCliTest, ConvertsVerifiesAndWrites) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "9", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs match"));
  EXPECT_TRUE(fs::exists(out));
  CliResult j = RunCli({"convert", out, "--opset", "28", "-o", (dir / "p.onnx").string(), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_THAT(j.out, HasSubstr("\"target_opset\": 28"));
  EXPECT_THAT(j.out, HasSubstr("softmax-flatten"));
}

TEST(ConvertCliTest, DryRunOfAPossibleConversionExits0AndIsDeterministic) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  CliResult d = RunCli({"convert", in, "--opset", "7", "--dry-run", "--json"});
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_THAT(d.out, HasSubstr("\"written\": false"));
  EXPECT_THAT(d.out, HasSubstr("\"ir_version_after\": 3"));
  std::string a = (dir / "a.onnx").string(), b = (dir / "b.onnx").string();
  ASSERT_EQ(RunCli({"convert", in, "--opset", "21", "-o", a, "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"convert", in, "--opset", "21", "-o", b, "-q"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(a), ReadFileOrEmpty(b));
}

TEST(ConvertCliTest, BlockedConversionExits1AndWritesNothing) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, 0, /*known_rank=*/false);
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "11", "-o", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("'soft'"));
  EXPECT_FALSE(fs::exists(out));
  CliResult d = RunCli({"convert", in, "--opset", "11", "--dry-run"});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_THAT(d.out, HasSubstr("blocked"));
}

TEST(ConvertCliTest, UsageErrorsExit2) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, -1);
  EXPECT_EQ(RunCli({"convert", in, "--opset", "99", "-o", (dir / "o.onnx").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "-o", (dir / "o.onnx").string()}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "--opset", "12"}).exit_code, 2);
  // Verification flags that do not fit the model.
  EXPECT_EQ(RunCli({"convert", in, "--opset", "12", "-o", (dir / "o.onnx").string(), "--input", "nope=a.npy"})
                .exit_code,
            2);
}

TEST(ConvertCliTest, UnreadableModelExits3) {
  fs::path dir = MakeTempDir();
  CliResult r = RunCli({"convert", (dir / "missing.onnx").string(), "--opset", "12", "-o", (dir / "o").string()});
  EXPECT_EQ(r.exit_code, 3);
}

}  // namespace
}  // namespace onnxkit::testing

namespace onnxkit::testing {
namespace {

std::string WriteGraph(const fs::path& dir, pb::GraphProto g, int64_t opset, const std::string& name) {
  std::string path = (dir / name).string();
  pb::ModelProto m = ModelFromGraph(std::move(g), opset, 8);
  pb::OperatorSetIdProto custom;
  custom.domain = "com.example";
  custom.version = 1;
  m.opset_import.push_back(custom);
  EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
  return path;
}

TEST(ConvertCliTest, OriginalThatCannotRunExits3) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}}).Output("y", pb::kFloat, {{2}});
  g.graph().node.push_back(MakeNode("Mystery", {"x"}, {"y"}));
  g.graph().node.back().domain = "com.example";
  std::string in = WriteGraph(dir, g.Build(), 13, "custom.onnx");
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "14", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("com.example::Mystery"));
  EXPECT_FALSE(fs::exists(out));
  // Without verification the foreign op is kept, with a warning.
  CliResult nv = RunCli({"convert", in, "--opset", "14", "-o", out, "--no-verify"});
  EXPECT_EQ(nv.exit_code, 0) << nv.err;
  EXPECT_TRUE(fs::exists(out));
}

TEST(ConvertCliTest, OutputsThatDifferExit1) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{4}})
      .Node("RandomUniformLike", {"x"}, {"y"})
      .Output("y", pb::kFloat, {{4}});
  std::string in = WriteGraph(dir, g.Build(), 13, "random.onnx");
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--opset", "14", "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("nothing written"));
  EXPECT_FALSE(fs::exists(out));
}

// x[2,64] -> MatMul(w[64,64]) -> Relu -> y, w in [-1, 1).
std::string WriteMatMulModel(const fs::path& dir, bool external = false) {
  pb::TensorProto w = RawFloatTensor("w", {64, 64});
  std::string bytes;
  for (int i = 0; i < 64 * 64; ++i) bytes += FloatBytes(1, static_cast<float>((i * 37) % 4096 - 2048) / 2048.f);
  w.raw_data = Bytes::Own(bytes);
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 64}})
      .Initializer(w)
      .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
      .Node("Relu", {"m"}, {"y"}, {}, "relu")
      .Output("y", pb::kFloat, {{2, 64}});
  std::string path = (dir / "mm.onnx").string();
  io::SaveOptions save;
  if (external) save.external_data_threshold = 1024;
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, path, save).ok());
  return path;
}

TEST(ConvertCliTest, Float16HalvesTheFileAndReportsSqnr) {
  fs::path dir = MakeTempDir();
  std::string in = WriteMatMulModel(dir);
  std::string out = (dir / "h.onnx").string();
  CliResult r = RunCli({"convert", in, "--float16", "-o", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"target\": \"float16\""));
  EXPECT_THAT(r.out, HasSubstr("\"sqnr_db\": "));
  EXPECT_THAT(r.out, HasSubstr("\"casts_inserted\": 2"));
  double ratio = static_cast<double>(fs::file_size(out)) / static_cast<double>(fs::file_size(in));
  EXPECT_LT(ratio, 0.55);
  EXPECT_GT(ratio, 0.45);
  // Human output names the SQNR; a second conversion changes no byte.
  std::string again = (dir / "h2.onnx").string();
  CliResult h = RunCli({"convert", out, "--float16", "-o", again});
  ASSERT_EQ(h.exit_code, 0) << h.out << h.err;
  EXPECT_THAT(h.out, HasSubstr("SQNR"));
  EXPECT_EQ(ReadFileOrEmpty(out), ReadFileOrEmpty(again));
}

TEST(ConvertCliTest, ClampedWeightsAreNamedInAWarning) {
  fs::path dir = MakeTempDir();
  pb::TensorProto big = RawFloatTensor("huge", {2}, 1e6f);
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2}}).Initializer(big).Node("Min", {"x", "huge"}, {"y"}).Output("y", pb::kFloat, {{2}});
  std::string in = (dir / "c.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, in).ok());
  CliResult r = RunCli({"convert", in, "--float16", "-o", (dir / "o.onnx").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: tensor 'huge': 2 value(s)"));
}

TEST(ConvertCliTest, KeepFloat32AndNoKeepIoTypes) {
  fs::path dir = MakeTempDir();
  std::string in = WriteMatMulModel(dir);
  CliResult k = RunCli({"convert", in, "--float16", "--keep-float32", "relu", "--keep-float32", "MatMul", "-o",
                        (dir / "k.onnx").string(), "--json"});
  ASSERT_EQ(k.exit_code, 0) << k.out << k.err;
  EXPECT_THAT(k.out, HasSubstr("\"--keep-float32\": 2"));
  EXPECT_THAT(k.out, HasSubstr("\"nodes_converted\": 0"));
  CliResult n = RunCli({"convert", in, "--bfloat16", "--no-keep-io-types", "-o", (dir / "n.onnx").string(), "--json"});
  ASSERT_EQ(n.exit_code, 0) << n.out << n.err;
  EXPECT_THAT(n.out, HasSubstr("\"keep_io_types\": false"));
  EXPECT_THAT(n.out, HasSubstr("\"casts_inserted\": 0"));
}

TEST(ConvertCliTest, TooStrictSqnrFloorExits1AndWritesNothing) {
  fs::path dir = MakeTempDir();
  std::string in = WriteMatMulModel(dir);
  std::string out = (dir / "o.onnx").string();
  CliResult r = RunCli({"convert", in, "--bfloat16", "--min-sqnr", "200", "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("below 200"));
  EXPECT_FALSE(fs::exists(out));
}

TEST(ConvertCliTest, InlineAndExternalDataWithoutOpset) {
  fs::path dir = MakeTempDir();
  std::string in = WriteMatMulModel(dir, true);
  ASSERT_TRUE(fs::exists(dir / "mm.onnx.data"));
  std::string out = (dir / "inl.onnx").string();
  CliResult r = RunCli({"convert", in, "--inline", "-o", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"inlined\": {\n    \"tensors\": 1,\n    \"bytes\": 16384"));
  EXPECT_FALSE(fs::exists(out + ".data"));
  EXPECT_GT(fs::file_size(out), 16384u);
  std::string ext = (dir / "ext.onnx").string();
  ASSERT_EQ(RunCli({"convert", out, "--external-data", "1024", "--float16", "-o", ext, "-q"}).exit_code, 0);
  EXPECT_EQ(fs::file_size(ext + ".data"), 8192u);
  CliResult both = RunCli({"convert", in, "--inline", "--opset", "21", "-o", (dir / "b.onnx").string()});
  EXPECT_EQ(both.exit_code, 0) << both.out << both.err;
}

// x[2,4] -> MatMul(w: 60000..) -> Mul(1e-5): the MatMul's output passes
// float16's range, the model's output does not.
std::string WriteOverflowingModel(const fs::path& dir) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 4}})
      .Initializer(RawFloatTensor("w", {4, 4}, 60000.f))
      .Initializer(RawFloatTensor("s", {}, 1e-5f))
      .Node("MatMul", {"x", "w"}, {"big"}, {}, "mm")
      .Node("Mul", {"big", "s"}, {"y"}, {}, "scale")
      .Output("y", pb::kFloat, {{2, 4}});
  std::string path = (dir / "big.onnx").string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 17), dir, path).ok());
  return path;
}

TEST(ConvertCliTest, RangeGuardKeepsOverflowingNodesUnlessTurnedOff) {
  fs::path dir = MakeTempDir();
  std::string in = WriteOverflowingModel(dir);
  std::string out = (dir / "h.onnx").string();
  CliResult r = RunCli({"convert", in, "--float16", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: range guard: 2 node(s) kept float32"));
  EXPECT_THAT(r.err, HasSubstr("'mm' (MatMul), 'scale' (Mul)"));
  EXPECT_THAT(r.out, HasSubstr("kept float32: 2 node(s): range guard"));
  CliResult j = RunCli({"convert", in, "--float16", "-o", out, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  EXPECT_THAT(j.out, HasSubstr("\"applied\": true"));
  EXPECT_THAT(j.out, HasSubstr("\"'mm' (MatMul)\""));
  std::string off = (dir / "off.onnx").string();
  CliResult n = RunCli({"convert", in, "--float16", "--no-range-guard", "-o", off});
  EXPECT_EQ(n.exit_code, 1) << n.out << n.err;
  EXPECT_THAT(n.out, HasSubstr("NaN or Inf"));
  EXPECT_FALSE(fs::exists(off));
  EXPECT_EQ(RunCli({"convert", in, "--opset", "18", "--no-range-guard", "-o", off}).exit_code, 2);
}

TEST(ConvertCliTest, PrecisionUsageErrorsExit2) {
  fs::path dir = MakeTempDir();
  std::string in = WriteMatMulModel(dir);
  std::string out = (dir / "o.onnx").string();
  EXPECT_EQ(RunCli({"convert", in, "--float16", "--bfloat16", "-o", out}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "--inline", "--external-data", "10", "-o", out}).exit_code, 2);
  EXPECT_EQ(RunCli({"convert", in, "--keep-float32", "Relu", "--opset", "18", "-o", out}).exit_code, 2);
  CliResult none = RunCli({"convert", in, "-o", out});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("at least one of"));
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace onnxkit::testing
