// CLI tests of `onnxkit quantize`: every exit code, the report, random
// calibration refused without its flag, saved calibration re-used.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

std::string WriteModel(const fs::path& dir, int64_t opset = 13) {
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 4}})
      .Initializer(RawFloatTensor("w", {4, 3}, -5))
      .Node("MatMul", {"x", "w"}, {"m"}, {}, "mm")
      .Node("Relu", {"m"}, {"y"}, {}, "relu")
      .Output("y", pb::kFloat, {{2, 3}});
  std::string path = (dir / "m.onnx").string();
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), opset), dir, path).ok());
  return path;
}

TEST(QuantizeCliTest, RandomCalibrationWritesModelAndReport) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "q.onnx").string(), rep = (dir / "r.json").string(), cal = (dir / "c.json").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "6", "--method",
                        "percentile", "--report", rep, "--save-calibration", cal});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("RANDOM"));
  EXPECT_THAT(r.out, HasSubstr("output y: sqnr"));
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(fs::exists(rep));
  CliResult c = RunCli({"check", "--full", out});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  CliResult l = RunCli({"quantize", in, "-o", (dir / "q2.onnx").string(), "--load-calibration", cal, "--json",
                        "--act-type", "int8"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_THAT(l.out, HasSubstr("\"weights\": 1"));
}

// The calibrated range of input x, read from a --save-calibration file.
std::pair<double, double> SavedRange(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  std::regex re("\"name\": \"" + name + "\",\\s*\"min\": ([-0-9.eE+]+),\\s*\"max\": ([-0-9.eE+]+)");
  if (!std::regex_search(text, m, re)) return {NAN, NAN};
  return {std::stod(m[1].str()), std::stod(m[2].str())};
}

TEST(QuantizeCliTest, RangeSetsTheRandomSamples) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "q.onnx").string(), cal = (dir / "c.json").string();
  CliResult plain = RunCli(
      {"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "4", "--save-calibration", cal});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto [low, high] = SavedRange(cal, "x");
  EXPECT_GE(low, 0.0);
  EXPECT_LE(high, 1.0);
  EXPECT_LT(low, high);
  CliResult shifted = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "4",
                              "--range=-3,-2", "--save-calibration", cal});
  ASSERT_EQ(shifted.exit_code, 0) << shifted.err;
  std::tie(low, high) = SavedRange(cal, "x");
  EXPECT_GE(low, -3.0);
  EXPECT_LE(high, -2.0);
  EXPECT_LT(low, high);
  // Only random samples have a range; LOW above HIGH is refused.
  fs::create_directories(dir / "cal");
  CliResult without =
      RunCli({"quantize", in, "-o", out, "--calibration", (dir / "cal").string(), "--range", "0,2"});
  EXPECT_EQ(without.exit_code, 2);
  EXPECT_THAT(without.err, HasSubstr("--range"));
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--range", "2,1"}).exit_code, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--range", "0,inf"}).exit_code,
            2);
}

TEST(QuantizeCliTest, DynamicModeNeedsNoCalibration) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "d.onnx").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--mode", "dynamic", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"weights\": 1"));
  EXPECT_EQ(RunCli({"check", "--full", out}).exit_code, 0);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--mode", "fast"}).exit_code, 2);
}

TEST(QuantizeCliTest, WeightsOnlyBlockedInt4) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);  // opset 13: converted to 21 first
  std::string out = (dir / "w.onnx").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--weights-only", "--block-size", "2", "--allow-random-calibration",
                        "--samples", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"weights\": 1"));
  EXPECT_THAT(r.out, HasSubstr("\"quantized_activations\": 0"));
  EXPECT_THAT(r.err, HasSubstr("opset 13 to 21"));
  EXPECT_EQ(RunCli({"check", "--full", out}).exit_code, 0);
  CliResult run = RunCli({"run", out, "--backend", "reference", "--random"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  auto model = io::LoadModel(out);
  ASSERT_TRUE(model.ok());
  bool int4 = false;
  for (const pb::TensorProto& t : model->proto.graph->initializer) int4 |= t.data_type == pb::kInt4;
  EXPECT_TRUE(int4);
  // Without data: written, no error measured.
  CliResult nodata = RunCli({"quantize", in, "-o", out, "--weights-only", "--bits", "8", "--json"});
  ASSERT_EQ(nodata.exit_code, 0) << nodata.err;
  EXPECT_THAT(nodata.out, HasSubstr("\"output_sqnr_db\": null"));
  for (std::vector<std::string> bad : {std::vector<std::string>{"--weights-only", "--bits", "3"},
                                      {"--weights-only", "--block-size", "-1"},
                                      {"--weights-only", "--mode", "dynamic"},
                                      {"--weights-only", "--per-tensor"},
                                      {"--weights-only", "--weight-type", "int8"},
                                      {"--bits", "4", "--allow-random-calibration"}}) {
    std::vector<std::string> args = {"quantize", in, "-o", (dir / "bad.onnx").string()};
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_EQ(RunCli(args).exit_code, 2) << bad[1];
  }
  EXPECT_FALSE(fs::exists(dir / "bad.onnx"));
}

TEST(QuantizeCliTest, Int16ActivationsAndInt4Weights) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "w.onnx").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--act-type", "int16", "--weight-type", "int4",
                        "--allow-random-calibration", "--samples", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("opset 13 to 21"));
  EXPECT_EQ(RunCli({"check", "--full", out}).exit_code, 0);
  EXPECT_EQ(RunCli({"run", out, "--backend", "reference", "--random"}).exit_code, 0);
  auto model = io::LoadModel(out);
  ASSERT_TRUE(model.ok());
  int int4 = 0, int16 = 0;
  for (const pb::TensorProto& t : model->proto.graph->initializer) {
    int4 += t.data_type == pb::kInt4;
    int16 += t.data_type == pb::kInt16;
  }
  EXPECT_EQ(int4, 2);  // weight and its zero points
  EXPECT_GE(int16, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--mode", "dynamic", "--weight-type", "int4"}).exit_code, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--weights-only", "--act-type", "uint16"}).exit_code, 2);
}

TEST(QuantizeCliTest, PresetsAndOverrides) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "p.onnx").string();
  auto zero_point_types = [&](const std::string& path) {
    std::set<int32_t> types;
    auto model = io::LoadModel(path);
    EXPECT_TRUE(model.ok());
    if (!model.ok()) return types;
    for (const pb::TensorProto& t : model->proto.graph->initializer) {
      if (t.dims.empty() && t.data_type != pb::kFloat) types.insert(t.data_type);
    }
    return types;
  };
  CliResult trt = RunCli({"quantize", in, "-o", out, "--preset", "trt", "--allow-random-calibration", "--json"});
  ASSERT_EQ(trt.exit_code, 0) << trt.err;
  EXPECT_THAT(trt.out, HasSubstr("\"quantized_activations\": 1"));  // only MatMul's input
  EXPECT_EQ(zero_point_types(out), std::set<int32_t>{pb::kInt8});
  EXPECT_EQ(RunCli({"run", out, "--backend", "reference", "--random"}).exit_code, 0);
  CliResult over = RunCli({"quantize", in, "-o", out, "--preset", "trt", "--act-type", "uint8",
                           "--allow-random-calibration", "--json"});
  ASSERT_EQ(over.exit_code, 0) << over.err;
  EXPECT_EQ(zero_point_types(out), std::set<int32_t>{pb::kUint8});
  CliResult ort = RunCli({"quantize", in, "-o", out, "--preset", "ort-cpu", "--allow-random-calibration", "--json"});
  ASSERT_EQ(ort.exit_code, 0) << ort.err;
  EXPECT_THAT(ort.out, HasSubstr("\"quantized_activations\": 2"));  // MatMul's input and output
  CliResult bad = RunCli({"quantize", in, "-o", out, "--preset", "tensorrt", "--allow-random-calibration"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("generic, ort-cpu, trt"));
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--preset", "trt", "--mode", "dynamic"}).exit_code, 2);
}

TEST(QuantizeCliTest, UsageErrorsExit2) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "q.onnx").string();
  CliResult none = RunCli({"quantize", in, "-o", out});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("--allow-random-calibration"));
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--method", "kl"}).exit_code, 2);
  CliResult op = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--op-types", "Conv,Softmax"});
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_THAT(op.err, HasSubstr("valid: Conv"));
  CliResult ex = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--exclude-ops", "Matmul"});
  EXPECT_EQ(ex.exit_code, 2);
  EXPECT_THAT(ex.err, HasSubstr("--exclude-ops: 'Matmul'"));
  // Flags that name no input of the model are usage errors too.
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--input", "nope=a.npy"}).exit_code, 2);
  EXPECT_EQ(
      RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--shape", "nope=2x4"}).exit_code, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--act-type", "int4"}).exit_code, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--exclude-nodes", "("}).exit_code, 2);
}

TEST(QuantizeCliTest, UnreadableInputsExit3) {
  fs::path dir = MakeTempDir();
  std::string out = (dir / "q.onnx").string();
  EXPECT_EQ(RunCli({"quantize", (dir / "missing.onnx").string(), "-o", out, "--allow-random-calibration"}).exit_code, 3);
  std::string in = WriteModel(dir);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--calibration", (dir / "nope").string()}).exit_code, 3);
  // One sample file where a folder of them is asked for: the way to give it.
  std::ofstream(dir / "one.npz") << "PK";
  CliResult one = RunCli({"quantize", in, "-o", out, "--calibration", (dir / "one.npz").string()});
  EXPECT_EQ(one.exit_code, 3);
  EXPECT_THAT(one.err, HasSubstr("one sample file is given with --input"));
  std::ofstream(dir / "bad.json") << "{\"tensors\": [";
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--load-calibration", (dir / "bad.json").string()}).exit_code, 3);
}

TEST(QuantizeCliTest, FilesAreNeverWrittenOverEachOther) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  const auto before = fs::file_size(in);
  std::string out = (dir / "q.onnx").string();
  // A report over the model or the output: refused, nothing written.
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--report", in}).exit_code, 2);
  EXPECT_EQ(fs::file_size(in), before);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--report", out}).exit_code, 2);
  EXPECT_EQ(
      RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--save-calibration", out}).exit_code,
      2);
  // A report whose folder is missing: refused before the model is written.
  CliResult missing = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--report",
                              (dir / "nope" / "r.json").string()});
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_FALSE(fs::exists(out));
  // --bits 0 and --block-size 0 are not the defaults in disguise.
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--weights-only", "--bits", "0"}).exit_code, 2);
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--weights-only", "--block-size", "0"}).exit_code, 2);
}

TEST(QuantizeCliTest, LoadedCalibrationMustFitTheMethodAndTheModel) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "q.onnx").string(), cal = (dir / "c.json").string();
  ASSERT_EQ(
      RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--save-calibration", cal}).exit_code,
      0);
  // Saved from minmax: ranges only, no histograms for percentile.
  CliResult method = RunCli({"quantize", in, "-o", out, "--load-calibration", cal, "--method", "percentile"});
  EXPECT_EQ(method.exit_code, 2);
  EXPECT_THAT(method.err, HasSubstr("needs histograms"));
  std::ofstream(dir / "empty.json") << "{}";
  EXPECT_EQ(
      RunCli({"quantize", in, "-o", out, "--load-calibration", (dir / "empty.json").string()}).exit_code, 3);
  // Another model's calibration: none of its tensors is here.
  std::string text;
  {
    std::ifstream f(cal);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (const char* name : {"\"m\"", "\"x\"", "\"y\""}) {
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
      text.replace(at, std::string(name).size(), "\"other\"");
    }
  }
  std::ofstream(dir / "other.json") << text;
  CliResult other = RunCli({"quantize", in, "-o", out, "--load-calibration", (dir / "other.json").string()});
  EXPECT_EQ(other.exit_code, 3) << other.err;
  EXPECT_THAT(other.err, HasSubstr("another model"));
}

// The ai.onnx opset a written model imports.
int64_t OpsetOf(const std::string& path) {
  auto m = io::LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return 0;
  for (const pb::OperatorSetIdProto& o : m->proto.opset_import) {
    if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
  }
  return 0;
}

// Static QDQ needs opset 10 and per-channel weights 13, dynamic
// quantization 11: older models are converted first (and say so).
TEST(QuantizeCliTest, OlderOpsetsAreConvertedFirst) {
  for (int64_t opset : {9, 11}) {
    fs::path dir = MakeTempDir();
    std::string in = WriteModel(dir, opset), out = (dir / "q.onnx").string();
    CliResult r =
        RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "4", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("converted from ai.onnx opset ", opset, " to 13 first")));
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("per tensor")));
    EXPECT_EQ(OpsetOf(out), 13);
    EXPECT_EQ(RunCli({"check", "--full", out}).exit_code, 0);
    // One scale per output column of the MatMul's weights.
    auto model = io::LoadModel(out);
    ASSERT_TRUE(model.ok());
    bool per_channel = false;
    for (const pb::TensorProto& t : model->proto.graph->initializer)
      per_channel |= t.data_type == pb::kFloat && t.dims == std::vector<int64_t>{3} &&
                     t.name.find("scale") != std::string::npos;
    EXPECT_TRUE(per_channel) << opset;
  }
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir, 11), out = (dir / "q.onnx").string();
  // Per tensor: opset 11 will do.
  CliResult t =
      RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "4", "--per-tensor"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.err, ::testing::Not(HasSubstr("converted")));
  EXPECT_EQ(OpsetOf(out), 11);
  std::string old = WriteModel(dir, 9);
  CliResult d = RunCli({"quantize", old, "-o", out, "--mode", "dynamic"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.err, HasSubstr("converted from ai.onnx opset 9 to 11 first"));
  EXPECT_EQ(OpsetOf(out), 11);
  CliResult run = RunCli({"run", out, "--backend", "reference", "--random"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

// A model written in NHWC around NCHW convolutions (as TensorFlow converters
// write them): by default the layout Transposes between the convolutions
// cancel before quantizing, so no tensor is quantized on both sides of one;
// `--preprocess` without push-transpose keeps them.
TEST(QuantizeCliTest, LayoutTransposesCancelBeforeQuantizing) {
  fs::path dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{1, 4, 4, 3}})
      .Initializer(RawFloatTensor("w1", {5, 3, 1, 1}, -7))
      .Initializer(RawFloatTensor("w2", {2, 5, 1, 1}, -4))
      .Initializer(RawFloatTensor("b", {5}, -2))
      .Node("Transpose", {"x"}, {"xc"}, {AttrInts("perm", {0, 3, 1, 2})})
      .Node("Conv", {"xc", "w1"}, {"c1"})
      .Node("Transpose", {"c1"}, {"h1"}, {AttrInts("perm", {0, 2, 3, 1})})
      .Node("Add", {"h1", "b"}, {"a1"})
      .Node("Relu", {"a1"}, {"r1"})
      .Node("Transpose", {"r1"}, {"rc"}, {AttrInts("perm", {0, 3, 1, 2})})
      .Node("Conv", {"rc", "w2"}, {"c2"})
      .Node("Transpose", {"c2"}, {"y"}, {AttrInts("perm", {0, 2, 3, 1})})
      .Output("y", pb::kFloat, {{1, 4, 4, 2}});
  std::string in = (dir / "nhwc.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 13), dir, in).ok());
  auto transposes = [](const std::string& path) {
    auto m = io::LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status();
    int n = 0;
    if (m.ok()) {
      for (const pb::NodeProto& node : m->proto.graph->node) n += node.op_type == "Transpose";
    }
    return n;
  };
  std::string out = (dir / "q.onnx").string(), kept = (dir / "k.onnx").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--samples", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(transposes(out), 2);
  EXPECT_THAT(r.out, HasSubstr("output y: sqnr"));
  CliResult k = RunCli({"quantize", in, "-o", kept, "--allow-random-calibration", "--samples", "6",
                        "--preprocess", "fold,eliminate-identity,dce"});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_EQ(transposes(kept), 4);
}

TEST(QuantizeCliTest, UnreachableTargetExits1AndStillWrites) {
  fs::path dir = MakeTempDir();
  std::string in = WriteModel(dir);
  std::string out = (dir / "q.onnx").string();
  CliResult r = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--target-sqnr", "500", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"target_met\": false"));
  EXPECT_TRUE(fs::exists(out));
  CliResult c = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--target-cosine", "0.5", "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;  // int8 reaches it without any fallback
  EXPECT_THAT(c.out, HasSubstr("\"target_cosine\": 0.5"));
  EXPECT_THAT(c.out, HasSubstr("\"target_met\": true"));
  EXPECT_THAT(c.out, HasSubstr("\"kept_float\": []"));
  CliResult both = RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--target-cosine", "0.5",
                           "--target-sqnr", "500", "--json"});
  EXPECT_EQ(both.exit_code, 1) << both.err;  // the SQNR target still fails
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--allow-random-calibration", "--target-cosine", "1.5"}).exit_code, 2);
  // A target needs samples to measure on, whatever the mode.
  CliResult none = RunCli({"quantize", in, "-o", out, "--weights-only", "--target-sqnr", "30"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_THAT(none.err, HasSubstr("--target-sqnr"));
  EXPECT_EQ(RunCli({"quantize", in, "-o", out, "--mode", "dynamic", "--target-cosine", "0.9"}).exit_code, 2);
}

}  // namespace
}  // namespace onnxkit::testing
