// End-to-end tests of `onnxkit run` and `onnxkit compare` on small models
// built in code: inputs from every source, outputs saved and compared back,
// dumps, benchmarks, per-layer divergence, and every error path.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/npy.h"
#include "lib/tensor/tensor_data.h"
#include "tests/apps/cli_runner.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// y = Relu(x) + w ; x: float[2, 3]; `w_value` fills w.
std::string WriteModel(const fs::path& dir, const std::string& name, float w_value, bool symbolic = false) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, symbolic ? std::vector<int64_t>{-1, 3}
                                                                         : std::vector<int64_t>{2, 3})
                                        .Initializer(RawFloatTensor("w", {3}, w_value))
                                        .Node("Relu", {"x"}, {"r"})
                                        .Node("Add", {"r", "w"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  fs::path path = dir / name;
  EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
  return path.string();
}

TEST(RunCliTest, RandomInputsSummaryAndJson) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  CliResult r = RunCli({"run", model, "--random", "--seed", "7"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("y: float[2, 3] min "));
  CliResult again = RunCli({"run", model, "--random", "--seed", "7"});
  EXPECT_EQ(r.out, again.out);  // seeded: deterministic
  CliResult j = RunCli({"run", model, "--random", "--json", "--bench", "3", "--profile"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  for (const char* key : {"\"latency_ms\"", "\"median\"", "\"p90\"", "\"peak_rss_mb\"", "\"profile_ms\"", "\"Relu\""}) {
    EXPECT_THAT(j.out, HasSubstr(key));
  }
}

TEST(RunCliTest, ReportsTheShapeComputationsLaterRunsSkip) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): Shape, Gather and
  // Concat follow from x's shape alone.
  pb::TensorProto zero, minus_one;
  zero.name = "zero";
  zero.data_type = pb::kInt64;
  zero.int64_data = {0};
  minus_one.name = "minus_one";
  minus_one.data_type = pb::kInt64;
  minus_one.dims = {1};
  minus_one.int64_data = {-1};
  zero.dims = {1};
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, std::vector<int64_t>{2, 3, 4})
                                        .Initializer(zero)
                                        .Initializer(minus_one)
                                        .Node("Shape", {"x"}, {"s"})
                                        .Node("Gather", {"s", "zero"}, {"n"})
                                        .Node("Concat", {"n", "minus_one"}, {"t"}, {AttrInt("axis", 0)})
                                        .Node("Reshape", {"x", "t"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  auto dir = MakeTempDir();
  fs::path model = dir / "shape.onnx";
  ASSERT_TRUE(io::SaveModel(m, dir, model).ok());
  CliResult j = RunCli({"run", model.string(), "--backend", "cpu", "--random", "--json", "--bench", "3"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_THAT(j.out, HasSubstr("\"memoized_nodes\": 3"));
  EXPECT_THAT(j.out, HasSubstr("\"shape\": [\n        2,\n        12\n      ]"));
  CliResult p = RunCli({"run", model.string(), "--backend", "cpu", "--random", "--bench", "3", "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("(3 shape-computation nodes of the main graph kept from the first run"));
  // The reference backend runs every node.
  CliResult r =
      RunCli({"run", model.string(), "--backend", "reference", "--random", "--json", "--bench", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"memoized_nodes\": 0"));
}

TEST(RunCliTest, ProfileListsTheOpsInsideSubgraphs) {
  auto dir = MakeTempDir();
  fs::path model = dir / "if.onnx";
  ASSERT_TRUE(io::SaveModel(IfModelWithOuterRefs(), dir, model).ok());
  for (const char* seed : {"1", "2", "3", "4"}) {  // random conditions: both branches
    CliResult r = RunCli({"run", model.string(), "--random", "--seed", seed, "--json", "--profile"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("\"If\""));
    bool body_op = r.out.find("\"Add\"") != std::string::npos || r.out.find("\"Neg\"") != std::string::npos;
    EXPECT_TRUE(body_op) << r.out;
  }
}

TEST(RunCliTest, CpuBackendByDefaultReferenceOnRequest) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  CliResult by_default = RunCli({"run", model, "--random", "--json"});
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_THAT(by_default.out, HasSubstr("\"backend\": \"cpu\""));
  CliResult reference = RunCli({"run", model, "--random", "--json", "--backend", "reference"});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  EXPECT_THAT(reference.out, HasSubstr("\"backend\": \"reference\""));
  CliResult help = RunCli({"run", "--help"});
  EXPECT_THAT(help.out, HasSubstr("rest; default)"));
}

TEST(RunCliTest, LayoutChangesThatUndoEachOtherAreNotExecuted) {
  // An NHWC export: Transpose -> Conv -> Transpose around each convolution.
  // The cpu backend runs only the input's Transpose (the model is rewritten
  // with push-transpose and merge-transpose when the session is made); the
  // reference backend runs the model as written, and the outputs agree.
  auto dir = MakeTempDir();
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, std::vector<int64_t>{1, 5, 6, 3})
      .Initializer(RawFloatTensor("w1", {4, 3, 3, 3}, 0.1f))
      .Initializer(RawFloatTensor("w2", {4, 4, 1, 1}, -0.2f))
      .Initializer(RawFloatTensor("bias", {4}, 0.3f));
  std::string x = "x";
  for (const char* w : {"w1", "w2"}) {
    const std::string n = w;
    b.Node("Transpose", {x}, {n + "_in"}, {AttrInts("perm", {0, 3, 1, 2})})
        .Node("Conv", {n + "_in", w}, {n + "_c"},
              {AttrInts("pads",
                        n == "w1" ? std::vector<int64_t>{1, 1, 1, 1} : std::vector<int64_t>{0, 0, 0, 0})})
        .Node("Transpose", {n + "_c"}, {n + "_out"}, {AttrInts("perm", {0, 2, 3, 1})})
        .Node("Add", {n + "_out", "bias"}, {n + "_b"})
        .Node("Relu", {n + "_b"}, {n + "_r"});
    x = n + "_r";
  }
  b.Node("ReduceMean", {x}, {"y"}, {AttrInts("axes", {1, 2}), AttrInt("keepdims", 0)})
      .Output("y", pb::kFloat);
  fs::path model = dir / "nhwc.onnx";
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build(), 13), dir, model).ok());
  CliResult profile = RunCli({"run", model.string(), "--random", "--profile"});
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  const size_t at = profile.out.find("Transpose");
  ASSERT_NE(at, std::string::npos) << profile.out;
  EXPECT_THAT(profile.out.substr(at, profile.out.find('\n', at) - at), HasSubstr("(1 nodes)")) << profile.out;
  // The rewritten run's outputs against the model run as written, on the
  // reference backend and on the cpu backend (compare runs models as written).
  fs::path data = dir / "cpu";
  ASSERT_EQ(RunCli({"run", model.string(), "--random", "--save-outputs", data.string(), "-q"}).exit_code, 0);
  for (const char* backend : {"reference", "cpu"}) {
    CliResult same = RunCli(
        {"compare", "--a", model.string(), "--a-backend", backend, "--reference", data.string(), "--random"});
    EXPECT_EQ(same.exit_code, 0) << backend << same.out << same.err;
  }
}

// A tensor of 8-bit or float values in raw data.
pb::TensorProto RawBytes(int32_t type, std::vector<int64_t> dims, const std::string& bytes) {
  pb::TensorProto t;
  t.data_type = type;
  t.dims = std::move(dims);
  t.raw_data = Bytes::Own(bytes);
  return t;
}

std::string FloatBytes1(float v) { return std::string(reinterpret_cast<const char*>(&v), sizeof(v)); }

TEST(RunCliTest, QdqExportsNoOpCastsAreDropped) {
  // PyTorch's quantized export: QuantizeLinear -> Cast (to the same type) ->
  // DequantizeLinear, scales, zero points and weights in Constant nodes of
  // one element or more. The cpu backend runs it without the Casts; the
  // outputs agree with the model run as written.
  auto dir = MakeTempDir();
  GraphBuilder b("g");
  b.Input("x", pb::kFloat, std::vector<int64_t>{1, 3, 6, 6});
  auto constant = [&](const std::string& name, pb::TensorProto t) {
    b.Node("Constant", {}, {name}, {AttrTensor("value", std::move(t))});
  };
  constant("s_x", RawBytes(pb::kFloat, {1}, FloatBytes1(0.02f)));
  constant("z_x", RawBytes(pb::kUint8, {1}, std::string(1, static_cast<char>(128))));
  std::string weights;
  for (int i = 0; i < 4 * 3 * 3 * 3; ++i) weights.push_back(static_cast<char>((i * 37) % 255 - 127));
  constant("w_q", RawBytes(pb::kInt8, {4, 3, 3, 3}, weights));
  constant("s_w", RawBytes(pb::kFloat, {1}, FloatBytes1(0.004f)));
  constant("z_w", RawBytes(pb::kInt8, {1}, std::string(1, 0)));
  constant("s_y", RawBytes(pb::kFloat, {1}, FloatBytes1(0.05f)));
  constant("z_y", RawBytes(pb::kUint8, {1}, std::string(1, 0)));
  b.Node("QuantizeLinear", {"x", "s_x", "z_x"}, {"xq"})
      .Node("Cast", {"xq"}, {"xq_c"}, {AttrInt("to", pb::kUint8)})
      .Node("DequantizeLinear", {"xq_c", "s_x", "z_x"}, {"xd"})
      .Node("DequantizeLinear", {"w_q", "s_w", "z_w"}, {"wd"})
      .Node("Conv", {"xd", "wd"}, {"c"}, {AttrInts("pads", {1, 1, 1, 1})})
      .Node("Relu", {"c"}, {"r"})
      .Node("QuantizeLinear", {"r", "s_y", "z_y"}, {"yq"})
      .Node("Cast", {"yq"}, {"yq_c"}, {AttrInt("to", pb::kUint8)})
      .Node("DequantizeLinear", {"yq_c", "s_y", "z_y"}, {"y"})
      .Output("y", pb::kFloat);
  fs::path model = dir / "qdq_casts.onnx";
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(b.Build(), 13), dir, model).ok());
  CliResult profile = RunCli({"run", model.string(), "--random", "--profile"});
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_THAT(profile.out, Not(HasSubstr("Cast "))) << profile.out;
  fs::path data = dir / "cpu";
  ASSERT_EQ(RunCli({"run", model.string(), "--random", "--save-outputs", data.string(), "-q"}).exit_code, 0);
  // One quantization step (0.05) at most, where a value lies at a rounding tie.
  CliResult same = RunCli({"compare", "--a", model.string(), "--a-backend", "reference", "--reference",
                           data.string(), "--random", "--atol", "0.0501"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
}

TEST(RunCliTest, SaveOutputsThenCompareAgainstThem) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  fs::path data = dir / "test_data_set_0";
  ASSERT_EQ(RunCli({"run", model, "--random", "--save-outputs", data.string(), "-q"}).exit_code, 0);
  ASSERT_TRUE(fs::exists(data / "output_0.pb"));
  // The same random inputs, written as input_0.pb by hand from the seed, are
  // not needed: compare --reference runs with --random and the same seed.
  CliResult same = RunCli({"compare", "--a", model, "--reference", data.string(), "--random"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, HasSubstr("within tolerance"));
  CliResult other_seed = RunCli({"compare", "--a", model, "--reference", data.string(), "--random", "--seed", "3"});
  EXPECT_EQ(other_seed.exit_code, 1) << other_seed.err;
}

TEST(RunCliTest, InputFromNpyAndPb) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 0);
  pb::TensorProto x = tensor::FromRawBytes("x", pb::kFloat, {2, 3}, std::string(24, '\0'));
  auto npy = tensor::WriteNpy(x);
  ASSERT_TRUE(npy.ok());
  std::ofstream(dir / "x.npy", std::ios::binary) << *npy;
  std::ofstream(dir / "x.pb", std::ios::binary) << io::Encode(x);
  CliResult a = RunCli({"run", model, "--input", "x=" + (dir / "x.npy").string()});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("first [0, 1, 2, 0, 1, 2]"));  // Relu(0) + w, w = 0, 1, 2
  CliResult b = RunCli({"run", model, "--input", "x=" + (dir / "x.pb").string()});
  EXPECT_EQ(b.exit_code, 0) << b.err;
}

TEST(RunCliTest, AnInitializerListedAsAnInputMayBeFed) {
  // IR 7: w is an initializer and a graph input, so a run may feed it by
  // name (--input, or a named input_<i>.pb past the required inputs).
  auto dir = MakeTempDir();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                                        .Input("w", pb::kFloat, std::vector<int64_t>{3})
                                        .Initializer(RawFloatTensor("w", {3}, 0))
                                        .Node("Relu", {"x"}, {"r"})
                                        .Node("Add", {"r", "w"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  std::string model = (dir / "m.onnx").string();
  ASSERT_TRUE(io::SaveModel(m, dir, model).ok());
  pb::TensorProto w = tensor::FromRawBytes("w", pb::kFloat, {3}, std::string(12, '\0'));
  auto npy = tensor::WriteNpy(w);
  ASSERT_TRUE(npy.ok());
  std::ofstream(dir / "w.npy", std::ios::binary) << *npy;
  CliResult plain = RunCli({"run", model, "--random", "--range", "0,0"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("first [0, 1, 2, 0, 1, 2]"));
  CliResult fed =
      RunCli({"run", model, "--random", "--range", "0,0", "--input", "w=" + (dir / "w.npy").string()});
  ASSERT_EQ(fed.exit_code, 0) << fed.err;
  EXPECT_THAT(fed.out, HasSubstr("first [0, 0, 0, 0, 0, 0]"));
  fs::create_directories(dir / "data");
  std::ofstream(dir / "data" / "input_1.pb", std::ios::binary) << io::Encode(w);
  CliResult named = RunCli({"run", model, "--random", "--range", "0,0", "--inputs", (dir / "data").string()});
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_THAT(named.out, HasSubstr("first [0, 0, 0, 0, 0, 0]"));
}

TEST(RunCliTest, AnAttributeTheOpDoesNotHaveIsRefused) {
  // A misspelled attribute ('pad') or one of another version (ReduceSum-13's
  // axes moved to an input) would be ignored by the kernel, computing
  // something else without a word: the model is refused, as check says.
  auto dir = MakeTempDir();
  auto write = [&](const std::string& name, pb::AttributeProto attr, const std::string& op) {
    pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                          .Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
                                          .Node(op, {"x"}, {"y"}, {std::move(attr)}, "n")
                                          .Output("y", pb::kFloat)
                                          .Build(),
                                      13);
    std::string path = (dir / name).string();
    EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
    return path;
  };
  CliResult unknown = RunCli({"run", write("a.onnx", AttrInts("pad", {1, 1}), "Relu"), "--random"});
  EXPECT_EQ(unknown.exit_code, 3);
  EXPECT_THAT(unknown.err, HasSubstr("'pad' is not an attribute of Relu-13"));
  CliResult moved = RunCli({"run", write("b.onnx", AttrInts("axes", {1}), "ReduceSum"), "--random"});
  EXPECT_EQ(moved.exit_code, 3);
  EXPECT_THAT(moved.err, HasSubstr("'axes' is not an attribute of ReduceSum-13"));
  CliResult typed = RunCli({"run", write("c.onnx", AttrFloat("axis", 1.5f), "Softmax"), "--random"});
  EXPECT_EQ(typed.exit_code, 3);
  EXPECT_THAT(typed.err, HasSubstr("attribute 'axis' has the wrong type"));
  EXPECT_EQ(RunCli({"run", write("d.onnx", AttrInt("axis", 1), "Softmax"), "--random"}).exit_code, 0);
}

TEST(RunCliTest, DumpAllWritesEveryIntermediate) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  fs::path dump = dir / "dump";
  ASSERT_EQ(RunCli({"run", model, "--random", "--dump-all", dump.string(), "-q"}).exit_code, 0);
  std::string index = ReadFileOrEmpty(dump / "index.tsv");
  EXPECT_THAT(index, HasSubstr("\tr\t1\n"));
  EXPECT_THAT(index, HasSubstr("\ty\t1\n"));
  // A name with a tab or a newline stays one field of one line.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, std::vector<int64_t>{2})
                                        .Node("Relu", {"x"}, {"a\tb\nc"})
                                        .Node("Neg", {"a\tb\nc"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "odd.onnx").ok());
  fs::path odd = dir / "odd_dump";
  ASSERT_EQ(
      RunCli({"run", (dir / "odd.onnx").string(), "--random", "--dump-all", odd.string(), "-q"}).exit_code,
      0);
  EXPECT_THAT(ReadFileOrEmpty(odd / "index.tsv"), HasSubstr("\ta\\tb\\nc\t1\n"));
}

// y = Loop 3 times: h += w * i (h starts at x; w an outer initializer
// filled with `w_value`): models of two w agree on the first iteration
// (i = 0) and part from the second on. With `shadow`, the main graph
// feeds the loop with d = Neg(x), a name the body redefines (invalid ONNX,
// but such models exist).
std::string WriteLoopModel(const fs::path& dir, const std::string& name, float w_value, bool shadow = false) {
  pb::TensorProto trips;
  trips.name = "trips";
  trips.data_type = pb::kInt64;
  trips.int64_data = {3};
  pb::GraphProto body = GraphBuilder("body")
                            .Input("i", pb::kInt64, std::vector<int64_t>{})
                            .Input("cond_in", pb::kBool, std::vector<int64_t>{})
                            .Input("h", pb::kFloat, std::vector<int64_t>{2, 3})
                            .Node("Identity", {"cond_in"}, {"cond_out"})
                            .Node("Cast", {"i"}, {"fi"}, {AttrInt("to", pb::kFloat)})
                            .Node("Mul", {"fi", "w"}, {"d"}, {}, "step")
                            .Node("Add", {"h", "d"}, {"h_out"})
                            .Output("cond_out", pb::kBool)
                            .Output("h_out", pb::kFloat)
                            .Build();
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3})
      .Initializer(RawFloatTensor("w", {3}, w_value))
      .Initializer(trips);
  if (shadow) g.Node("Neg", {"x"}, {"d"}, {}, "outer_neg");
  g.Node("Loop", {"trips", "", shadow ? "d" : "x"}, {"y"}, {AttrGraph("body", body)}, "loop")
      .Output("y", pb::kFloat);
  pb::ModelProto m = ModelFromGraph(g.Build());
  fs::path path = dir / name;
  EXPECT_TRUE(io::SaveModel(m, dir, path).ok());
  return path.string();
}

// --dump-all and compare --per-layer see inside a Loop body, run by run.
TEST(RunCliTest, DumpAllAndPerLayerSeeEveryIterationOfABody) {
  auto dir = MakeTempDir();
  std::string a = WriteLoopModel(dir, "a.onnx", 1);
  std::string b = WriteLoopModel(dir, "b.onnx", 2);
  fs::path dump = dir / "dump";
  ASSERT_EQ(RunCli({"run", a, "--random", "--dump-all", dump.string(), "-q"}).exit_code, 0);
  std::string index = ReadFileOrEmpty(dump / "index.tsv");
  for (const char* run : {"\td\t1\n", "\td\t2\n", "\td\t3\n", "\ty\t1\n"}) EXPECT_THAT(index, HasSubstr(run));
  CliResult diff = RunCli({"compare", "--a", a, "--b", b, "--random", "--per-layer"});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("first divergence: tensor 'd (run 2)' made by node 'step' (Mul)"));
}

// A body value named like an enclosing graph's value is keyed with its
// body, so its runs are not counted as further runs of the outer value.
// Outputs named `names` (each x + i): models to pair outputs of.
std::string WriteOutputsModel(const fs::path& dir, const std::string& file, std::vector<std::string> names,
                              float offset = 0) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2});
  for (size_t i = 0; i < names.size(); ++i) {
    std::string c = "c" + std::to_string(i);
    g.Initializer(RawFloatTensor(c, {1}, static_cast<float>(i) + offset));
    g.Node("Add", {"x", c}, {names[i]});
    g.Output(names[i], pb::kFloat);
  }
  fs::path path = dir / file;
  EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build()), dir, path).ok());
  return path.string();
}

// Two models whose inputs differ: an input of A that B lacks (pruned as
// unused) is not fed to B; one of B that A lacks gets its own random values
// under --random, and an error without; an initializer of B listed as an
// input is not overridden by A's random value of a same-named input.
TEST(CompareCliTest, ModelsWithDifferentInputs) {
  auto dir = MakeTempDir();
  auto write = [&](const std::string& file, bool extra_input, bool w_is_input) {
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3});
    if (extra_input) g.Input("unused", pb::kFloat, std::vector<int64_t>{4});
    if (w_is_input) g.Input("w", pb::kFloat, std::vector<int64_t>{3});
    g.Initializer(RawFloatTensor("w", {3}, 1)).Node("Relu", {"x"}, {"r"}).Node("Add", {"r", "w"}, {"y"});
    g.Output("y", pb::kFloat);
    const std::string path = (dir / file).string();
    EXPECT_TRUE(io::SaveModel(ModelFromGraph(g.Build()), dir, path).ok());
    return path;
  };
  const std::string with_extra = write("extra.onnx", true, false);
  const std::string plain = write("plain.onnx", false, false);
  const std::string w_input = write("w_input.onnx", false, true);
  CliResult a_extra = RunCli({"compare", "--a", with_extra, "--b", plain, "--random"});
  EXPECT_EQ(a_extra.exit_code, 0) << a_extra.err;
  EXPECT_THAT(a_extra.err, HasSubstr("--b has no input unused: not fed to it"));
  CliResult b_extra = RunCli({"compare", "--a", plain, "--b", with_extra, "--random"});
  EXPECT_EQ(b_extra.exit_code, 0) << b_extra.err;
  EXPECT_THAT(b_extra.err, HasSubstr("--b input unused is not an input of --a: fed its own random values"));
  auto x = tensor::WriteNpy(tensor::FromRawBytes("x", pb::kFloat, {2, 3}, std::string(24, '\0')));
  ASSERT_TRUE(x.ok());
  std::ofstream(dir / "x.npy", std::ios::binary) << *x;
  CliResult no_random =
      RunCli({"compare", "--a", plain, "--b", with_extra, "--input", "x=" + (dir / "x.npy").string()});
  EXPECT_EQ(no_random.exit_code, 2) << no_random.err;
  EXPECT_THAT(no_random.err, HasSubstr("--b input unused is not an input of --a"));
  // A has w as a plain input (random values, all 1); B's w is an
  // initializer listed as an input ([1, 2, 3]): B keeps its own, so the
  // outputs differ (overridden, they would be equal).
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2, 3}).Input("w", pb::kFloat, std::vector<int64_t>{3});
  g.Node("Relu", {"x"}, {"r"}).Node("Add", {"r", "w"}, {"y"}).Output("y", pb::kFloat);
  const std::string w_fed = (dir / "w_fed.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build()), dir, w_fed).ok());
  CliResult kept = RunCli({"compare", "--a", w_fed, "--b", w_input, "--random", "--range", "1,1"});
  EXPECT_EQ(kept.exit_code, 1) << kept.out << kept.err;
  EXPECT_THAT(kept.out, HasSubstr("2 vs 4"));
}

TEST(CompareCliTest, OutputsPairByNameOrSayHowTheyPair) {
  auto dir = MakeTempDir();
  std::string rn = WriteOutputsModel(dir, "rn.onnx", {"r", "n"});
  std::string nr = WriteOutputsModel(dir, "nr.onnx", {"n", "r"}, -1);  // n = x - 1 + 0, r = x - 1 + 1
  std::string n = WriteOutputsModel(dir, "n.onnx", {"n"}, 1);          // n = x + 1, as rn's n
  std::string pq = WriteOutputsModel(dir, "pq.onnx", {"p", "q"});
  std::string p = WriteOutputsModel(dir, "p.onnx", {"p"});
  // By name whatever the order: rn's r (x) is nr's r (x), n (x + 1) is not n (x - 1).
  CliResult swapped = RunCli({"compare", "--a", rn, "--b", nr, "--random", "--json"});
  EXPECT_EQ(swapped.exit_code, 1) << swapped.err;
  EXPECT_THAT(swapped.out, HasSubstr("\"name\": \"r\",\n      \"within_tolerance\": true"));
  // A's r has no partner in B: named, and B's n is compared with A's n.
  CliResult fewer = RunCli({"compare", "--a", rn, "--b", n, "--random"});
  EXPECT_EQ(fewer.exit_code, 0) << fewer.err;
  EXPECT_THAT(fewer.err, HasSubstr("not compared (no output of that name on the other side): --a 'r'"));
  // No name in common, as many outputs: by position, said.
  CliResult position = RunCli({"compare", "--a", rn, "--b", pq, "--random"});
  EXPECT_EQ(position.exit_code, 0) << position.err;
  EXPECT_THAT(position.err, HasSubstr("paired by position"));
  EXPECT_THAT(position.out, HasSubstr("r (--b 'p')"));
  // Nothing to pair.
  CliResult none = RunCli({"compare", "--a", rn, "--b", p, "--random"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_THAT(none.err, HasSubstr("no output name in common"));
}

// --per-layer's scratch folder goes however compare ends.
TEST(CompareCliTest, PerLayerLeavesNoScratchFolder) {
  auto dir = MakeTempDir();
  std::string a = WriteModel(dir, "a.onnx", 1);
  auto leftovers = [] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
      n += e.path().filename().string().rfind("onnxkit-compare-", 0) == 0 ? 1 : 0;
    }
    return n;
  };
  const int before = leftovers();
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", a, "--random", "--per-layer"}).exit_code, 0);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", a, "--random", "--per-layer", "--tol", "nope=1,1"}).exit_code,
            2);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", (dir / "missing.onnx").string(), "--random", "--per-layer"})
                .exit_code,
            3);
  EXPECT_EQ(leftovers(), before);
}

TEST(RunCliTest, ShadowingBodyValuesAreKeyedWithTheirBody) {
  auto dir = MakeTempDir();
  std::string a = WriteLoopModel(dir, "a.onnx", 1, /*shadow=*/true);
  std::string b = WriteLoopModel(dir, "b.onnx", 2, /*shadow=*/true);
  fs::path dump = dir / "dump";
  ASSERT_EQ(RunCli({"run", a, "--random", "--dump-all", dump.string(), "-q"}).exit_code, 0);
  std::string index = ReadFileOrEmpty(dump / "index.tsv");
  EXPECT_THAT(index, HasSubstr("\td\t1\n"));
  EXPECT_THAT(index, Not(HasSubstr("\td\t2\n")));
  for (const char* run : {"\td (in 'loop' (Loop).body)\t1\n", "\td (in 'loop' (Loop).body)\t3\n"}) {
    EXPECT_THAT(index, HasSubstr(run));
  }
  CliResult diff = RunCli({"compare", "--a", a, "--b", b, "--random", "--per-layer"});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("ok   d ('outer_neg' (Neg))"));
  EXPECT_THAT(
      diff.out,
      HasSubstr("first divergence: tensor 'd (in 'loop' (Loop).body) (run 2)' made by node 'step' (Mul)"));
}

TEST(RunCliTest, SymbolicDimsNeedAShape) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1, /*symbolic=*/true);
  CliResult no_shape = RunCli({"run", model, "--random"});
  EXPECT_EQ(no_shape.exit_code, 2);
  EXPECT_THAT(no_shape.err, HasSubstr("--shape x="));
  CliResult with_shape = RunCli({"run", model, "--random", "--shape", "x=5x3"});
  EXPECT_EQ(with_shape.exit_code, 0) << with_shape.err;
  EXPECT_THAT(with_shape.out, HasSubstr("float[5, 3]"));
}

TEST(RunCliTest, ErrorsHaveTheirExitCodes) {
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  EXPECT_EQ(RunCli({"run", model}).exit_code, 2);                                    // no input values
  EXPECT_EQ(RunCli({"run", model, "--input", "nope=a.npy"}).exit_code, 2);           // unknown input
  EXPECT_EQ(RunCli({"run", model, "--random", "--shape", "x=2xq"}).exit_code, 2);    // bad shape
  EXPECT_EQ(RunCli({"run", model, "--backend", "gpu"}).exit_code, 2);                // bad backend
  EXPECT_EQ(RunCli({"run", "/nonexistent.onnx", "--random"}).exit_code, 3);          // missing model
  EXPECT_EQ(RunCli({"run", model, "--random", "--threads", "100000"}).exit_code,
            2);  // more threads than allowed
  EXPECT_EQ(RunCli({"run", model, "--random", "--timeout", "-1"}).exit_code, 2);
  CliResult unknown_flag = RunCli({"run", model, "--no-such-flag"});
  EXPECT_EQ(unknown_flag.exit_code, 2);
  EXPECT_THAT(unknown_flag.err, HasSubstr("onnxkit: error: "));
  // Input files that cannot be read are unreadable input (3), not usage.
  std::ofstream(dir / "cut.npy", std::ios::binary) << "\x93NUMPY\x01\x00";
  CliResult cut = RunCli({"run", model, "--input", "x=" + (dir / "cut.npy").string()});
  EXPECT_EQ(cut.exit_code, 3) << cut.err;
  EXPECT_THAT(cut.err, HasSubstr("cut.npy"));
  EXPECT_EQ(RunCli({"run", model, "--input", "x=" + (dir / "absent.npy").string()}).exit_code, 3);
  EXPECT_EQ(RunCli({"run", model, "--inputs", (dir / "absent").string()}).exit_code, 3);
  EXPECT_EQ(
      RunCli({"compare", "--a", model, "--b", model, "--input", "x=" + (dir / "cut.npy").string()}).exit_code,
      3);
  pb::TensorProto wrong = tensor::FromRawBytes("x", pb::kInt64, {2, 3}, std::string(48, '\0'));
  std::ofstream(dir / "wrong.pb", std::ios::binary) << io::Encode(wrong);
  CliResult type = RunCli({"run", model, "--input", "x=" + (dir / "wrong.pb").string()});
  EXPECT_EQ(type.exit_code, 3);
  EXPECT_THAT(type.err, HasSubstr("must be tensor(float)"));
  EXPECT_EQ(RunCli({"run", model, "--input", "x=" + (dir / "wrong.pb").string(), "--input",
                    "x=" + (dir / "wrong.pb").string()})
                .exit_code,
            2);  // the same input twice
  // An op no backend implements names the node and the op.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("NoSuchOp", {"x"}, {"y"}, {}, "mystery")
                                        .Output("y")
                                        .Build());
  m.opset_import.push_back({});
  m.opset_import.back().domain = "custom.domain";
  m.opset_import.back().version = 1;
  m.graph->node[0].domain = "custom.domain";
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "custom.onnx").ok());
  CliResult unsupported = RunCli({"run", (dir / "custom.onnx").string(), "--random"});
  EXPECT_EQ(unsupported.exit_code, 3);
  EXPECT_THAT(unsupported.err, HasSubstr("'mystery'"));
}

TEST(RunCliTest, MemoryLimitStopsAHugeRun) {
  auto dir = MakeTempDir();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2048, 2048}})
                                        .Node("Relu", {"x"}, {"y"})
                                        .Output("y")
                                        .Build());
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "big.onnx").ok());
  CliResult r = RunCli({"run", (dir / "big.onnx").string(), "--random", "--memory-limit", "20"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("memory limit"));
}

TEST(CompareCliTest, TwoModelsPerLayerNamesTheFirstDivergence) {
  auto dir = MakeTempDir();
  std::string a = WriteModel(dir, "a.onnx", 1);
  std::string b = WriteModel(dir, "b.onnx", 1.5);
  CliResult same = RunCli({"compare", "--a", a, "--b", a, "--random", "--per-layer"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, HasSubstr("no intermediate tensor diverges"));
  // Unnamed producers by their position in the graph.
  EXPECT_THAT(same.out, HasSubstr("ok   r (#0 (Relu)): max_abs 0"));
  EXPECT_THAT(same.out, HasSubstr("ok   y (#1 (Add)): max_abs 0"));
  CliResult diff = RunCli({"compare", "--a", a, "--b", b, "--random", "--per-layer", "--json"});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("\"first_divergence\": {"));
  EXPECT_THAT(diff.out, HasSubstr("\"tensor\": \"y\""));
  EXPECT_THAT(diff.out, HasSubstr("\"sqnr_db\""));
  // A loose enough tolerance accepts the difference.
  CliResult loose = RunCli({"compare", "--a", a, "--b", b, "--random", "--atol", "0.6"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out;
  CliResult per_output = RunCli({"compare", "--a", a, "--b", b, "--random", "--tol", "y=0.6,0"});
  EXPECT_EQ(per_output.exit_code, 0) << per_output.out;
  // The models as arguments: A then B, or A with --b.
  EXPECT_EQ(RunCli({"compare", a, b, "--random"}).exit_code, 1);
  EXPECT_EQ(RunCli({"compare", a, a, "--random"}).exit_code, 0);
  EXPECT_EQ(RunCli({"compare", b, "--b", a, "--random"}).exit_code, 1);
  EXPECT_EQ(RunCli({"compare", a, "--b", a, "--b-backend", "cpu", "--random"}).exit_code, 0);
}

TEST(CompareCliTest, PerLayerReadsBackUndeclaredSequences) {
  // s is a sequence no value_info declares: its dump is a SequenceProto,
  // read back as one (it used to be read as a TensorProto and fail).
  auto dir = MakeTempDir();
  GraphBuilder g("main");
  g.Input("x", pb::kFloat, {{2, 2}})
      .Node("SequenceConstruct", {"x", "x"}, {"s"}, {}, "make")
      .Node("ConcatFromSequence", {"s"}, {"y"}, {AttrInt("axis", 0)}, "cat")
      .Output("y", pb::kFloat, {{4, 2}});
  std::string model = (dir / "seq.onnx").string();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build(), 13), dir, model).ok());
  CliResult r =
      RunCli({"compare", "--a", model, "--a-backend", "cpu", "--b", model, "--random", "--per-layer"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok   s ('make' (SequenceConstruct))"));
}

// run --precision bf16 and compare --b-precision bf16 on a MatMul with
// constant weights: the JSON says which precision ran; in bfloat16 the
// rounded inputs move the result, in float32 (a CPU without bfloat16
// instructions) it is the float32 one.
TEST(RunCliTest, Bfloat16PrecisionOfTheCpuBackend) {
  auto dir = MakeTempDir();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, std::vector<int64_t>{2, 32})
                                        .Initializer(RawFloatTensor("w", {32, 8}, 0.5f))
                                        .Node("MatMul", {"x", "w"}, {"y"})
                                        .Output("y", pb::kFloat)
                                        .Build());
  fs::path model = dir / "mm.onnx";
  ASSERT_TRUE(io::SaveModel(m, dir, model).ok());
  CliResult r = RunCli({"run", model.string(), "--random", "--precision", "bf16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const bool bf16 = r.out.find("\"precision\": \"bf16\"") != std::string::npos;
  EXPECT_TRUE(bf16 || r.out.find("\"precision\": \"fp32\"") != std::string::npos) << r.out;
  if (!bf16) {
    EXPECT_THAT(r.err, HasSubstr("no bfloat16 instructions"));
  }
  CliResult plain = RunCli({"run", model.string(), "--random", "--json"});
  EXPECT_THAT(plain.out, HasSubstr("\"precision\": \"fp32\""));
  CliResult c =
      RunCli({"compare", "--a", model.string(), "--a-backend", "cpu", "--b", model.string(), "--b-backend",
              "cpu", "--b-precision", "bf16", "--random", "--atol", "0", "--rtol", "0"});
  EXPECT_EQ(c.exit_code, bf16 ? 1 : 0) << c.out;
  CliResult loose = RunCli({"compare", "--a", model.string(), "--a-backend", "cpu", "--b", model.string(),
                            "--b-backend", "cpu", "--b-precision", "bf16", "--random", "--rtol", "1e-2"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out;
  // bfloat16 is the cpu backend's.
  EXPECT_EQ(
      RunCli({"run", model.string(), "--random", "--backend", "reference", "--precision", "bf16"}).exit_code,
      2);
  EXPECT_EQ(RunCli({"run", model.string(), "--random", "--precision", "fp16"}).exit_code, 2);
  EXPECT_EQ(
      RunCli({"compare", "--a", model.string(), "--a-precision", "bf16", "--b", model.string(), "--random"})
          .exit_code,
      2);
}

// Offsets in `file` of the first 16 raw bytes of each tensor of `tensors`
// (-1 where not found).
std::vector<int64_t> RawDataOffsets(const std::string& file, const std::vector<pb::TensorProto>& tensors) {
  std::vector<int64_t> offsets;
  for (const pb::TensorProto& t : tensors) {
    size_t at = file.find(std::string_view(t.raw_data.data(), 16));
    offsets.push_back(at == std::string::npos ? -1 : static_cast<int64_t>(at));
  }
  return offsets;
}

TEST(RunCliTest, UnalignedWeightsAreNotHeldTwiceWhileLoading) {
  // Six 16 MiB weights whose raw data lies at offsets that are not a
  // multiple of 4 (so the session copies them), each read through a
  // Transpose that folds: y = sum_i MatMul(x, Transpose(w_i)). The copied
  // pages of the file go back to the OS, and each copy goes as soon as its
  // Transpose folds, so the peak stays near the transposed weights and one
  // copy (7 x 16 MiB); keeping the file's pages, or every copy until all
  // have folded, would be twice the weights.
  constexpr int64_t kRows = 1024, kCols = 4096, kWeights = 6;
  constexpr int64_t kWeightBytes = kRows * kCols * 4;
  auto dir = MakeTempDir();
  std::vector<pb::TensorProto> weights;
  // Padding that moves weight i's raw data and those after it by a byte
  // each: the graph's name for weight 0, weight i - 1's doc_string else.
  std::vector<std::string> padding(kWeights);
  std::string model, file;
  for (int attempt = 0; attempt < 4 * kWeights; ++attempt) {
    weights.clear();
    GraphBuilder g("g" + padding[0]);
    g.Input("x", pb::kFloat, std::vector<int64_t>{1, kCols});
    for (int64_t i = 0; i < kWeights; ++i) {
      const std::string n = std::to_string(i);
      weights.push_back(RawFloatTensor("w" + n, {kRows, kCols}, static_cast<float>(i) * 1.0e7f));
      if (i + 1 < kWeights) weights.back().doc_string = padding[static_cast<size_t>(i + 1)];
      g.Initializer(weights.back());
      g.Node("Transpose", {"w" + n}, {"t" + n}).Node("MatMul", {"x", "t" + n}, {"m" + n});
    }
    std::string sum = "m0";
    for (int64_t i = 1; i < kWeights; ++i) {
      const std::string next = i + 1 < kWeights ? "s" + std::to_string(i) : "y";
      g.Node("Add", {sum, "m" + std::to_string(i)}, {next});
      sum = next;
    }
    g.Output("y", pb::kFloat);
    model = (dir / "m.onnx").string();
    ASSERT_TRUE(io::SaveModel(ModelFromGraph(g.Build()), dir, model).ok());
    file = ReadFileOrEmpty(model);
    std::vector<int64_t> offsets = RawDataOffsets(file, weights);
    auto aligned = std::find_if(offsets.begin(), offsets.end(), [](int64_t o) { return o % 4 == 0; });
    if (aligned == offsets.end()) break;
    padding[static_cast<size_t>(aligned - offsets.begin())] += "_";
  }
  for (int64_t offset : RawDataOffsets(file, weights)) {
    ASSERT_GE(offset, 0);
    ASSERT_NE(offset % 4, 0);
  }
  const CliResult tiny =
      RunCli({"run", WriteModel(dir, "tiny.onnx", 1), "--random", "--backend", "reference"});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  const CliResult r = RunCli({"run", model, "--random", "--backend", "reference"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("y: float[1, 1024] min "));
  const int64_t grown_kb = r.max_rss_kb - tiny.max_rss_kb;
  EXPECT_LT(grown_kb * 1024, 3 * kWeights * kWeightBytes / 2)
      << "peak RSS grew by " << grown_kb / 1024 << " MiB";
  fs::remove_all(dir);
}

TEST(RunCliTest, Bfloat16InputFromAUint16Npy) {
  // bfloat16 arrays are written to .npy as uint16 bit patterns; given back
  // for a bfloat16 input they are read as bfloat16 (1.0 and -2.0 here).
  auto dir = MakeTempDir();
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kBfloat16, {{2}})
                                        .Node("Cast", {"x"}, {"y"}, {AttrInt("to", pb::kFloat)})
                                        .Output("y", pb::kFloat)
                                        .Build());
  ASSERT_TRUE(io::SaveModel(m, dir, dir / "bf16.onnx").ok());
  const uint16_t bits[2] = {0x3f80, 0xc000};
  pb::TensorProto x = tensor::FromRawBytes("x", pb::kUint16, {2},
                                           std::string(reinterpret_cast<const char*>(bits), sizeof(bits)));
  auto npy = tensor::WriteNpy(x);
  ASSERT_TRUE(npy.ok());
  std::ofstream(dir / "x.npy", std::ios::binary) << *npy;
  CliResult r = RunCli({"run", (dir / "bf16.onnx").string(), "--input", "x=" + (dir / "x.npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("first [1, -2]"));
  // Another integer type is still refused.
  x.data_type = pb::kInt16;
  std::ofstream(dir / "i16.npy", std::ios::binary) << *tensor::WriteNpy(x);
  EXPECT_EQ(
      RunCli({"run", (dir / "bf16.onnx").string(), "--input", "x=" + (dir / "i16.npy").string()}).exit_code,
      3);
}

TEST(CompareCliTest, RandomInputsInARange) {
  // Relu(x) + w (w = 1, 2, 3) on both sides: with --range -3,-1 every input
  // is negative, so the outputs are w; a range with LOW above HIGH is refused.
  auto dir = MakeTempDir();
  std::string model = WriteModel(dir, "m.onnx", 1);
  CliResult r = RunCli({"compare", "--a", model, "--b", model, "--b-backend", "cpu", "--random", "--range",
                        "-3,-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CliResult run = RunCli({"run", model, "--random", "--range", "-3,-1"});
  EXPECT_THAT(run.out, HasSubstr("first [1, 2, 3, 1, 2, 3]"));
  EXPECT_EQ(RunCli({"compare", "--a", model, "--b", model, "--random", "--range", "2,1"}).exit_code, 2);
  EXPECT_EQ(RunCli({"optimize", model, "-o", (dir / "o.onnx").string(), "--range", "-3,-1"}).exit_code, 0);
}

TEST(CompareCliTest, UsageErrors) {
  auto dir = MakeTempDir();
  std::string a = WriteModel(dir, "a.onnx", 1);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--random"}).exit_code, 2);  // neither --b nor --reference
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", a, "--reference", dir.string(), "--random"}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--reference", dir.string(), "--per-layer", "--random"}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", a, "--random", "--tol", "y=abc"}).exit_code, 2);
  CliResult tol = RunCli({"compare", "--a", a, "--b", a, "--random", "--tol", "nope=0.1,0"});
  EXPECT_EQ(tol.exit_code, 2);
  EXPECT_THAT(tol.err, HasSubstr("--per-layer"));
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", a, "--random", "--tol", "y=0.1,0"}).exit_code, 0);
  EXPECT_EQ(RunCli({"compare", "--a", a, "--b", "/nonexistent.onnx", "--random"}).exit_code, 3);
  // A model is needed, given one way: as an argument or with --a / --b.
  CliResult none = RunCli({"compare", "--random"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("a model is needed"));
  EXPECT_EQ(RunCli({"compare", a, "--a", a, "--b", a, "--random"}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", a, a, "--b", a, "--random"}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", a, a, a, "--random"}).exit_code, 2);
}

}  // namespace
}  // namespace onnxkit::testing
