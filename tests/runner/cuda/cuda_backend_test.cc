// Tests of the cuda backend: every CUDA kernel against the reference
// kernels on random inputs (fixed seeds), graphs that mix CUDA and cpu
// nodes, and the error without a device. Tests that need a device skip
// with "no CUDA device" when there is none.
#include "runner/cuda/cuda_backend.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/proto.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::Backend;

#define ONNXKIT_NEED_CUDA_DEVICE()                                              \
  do {                                                                          \
    if (!runner::cuda::CheckDevice(0).ok()) GTEST_SKIP() << "no CUDA device";   \
  } while (0)

// Runs `graph` on cuda and on the reference backend; outputs must agree
// within atol + rtol * |ref|.
void ExpectCudaMatchesReference(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset = 18,
                                double atol = 1e-5, double rtol = 1e-3) {
  auto want = RunGraphOn(Backend::kReference, graph, feeds, opset);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = RunGraphOn(Backend::kCuda, graph, feeds, opset);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_TRUE((*got)[i].is_tensor());
    EXPECT_FALSE((*got)[i].tensor().on_device()) << "outputs come back to the host";
    ExpectTensorsClose((*want)[i].tensor(), (*got)[i].tensor(), atol, rtol, "output " + std::to_string(i));
  }
}

// Runs `graph` on cuda with the given feeds (initializers from `inits`) and
// on the reference backend; outputs must agree within atol + rtol * |ref|,
// and every node whose op is in `on_device` must have run on the device
// (not fallen back to the cpu backend).
void ExpectOnDeviceAndClose(const pb::GraphProto& graph, const Feeds& feeds,
                            const std::vector<std::string>& on_device, int64_t opset = 18, double atol = 1e-4,
                            double rtol = 1e-3) {
  ExpectCudaMatchesReference(graph, feeds, opset, atol, rtol);
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset);
  runner::SessionOptions options;
  options.backend = Backend::kCuda;
  std::vector<std::pair<std::string, Backend>> ran;
  options.on_node_run = [&](const ir::Node& node, const runner::NodeRun& run) {
    ran.emplace_back(node.op_type(), run.backend);
  };
  auto session = runner::Session::Create(std::move(loaded), options);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::pair<std::string, runner::RtValue>> run_feeds;
  for (const auto& [name, t] : feeds) run_feeds.emplace_back(name, runner::RtValue::FromTensor(t));
  auto out = (*session)->Run(std::move(run_feeds));
  ASSERT_TRUE(out.ok()) << out.status();
  for (const auto& [op, backend] : ran) {
    if (std::find(on_device.begin(), on_device.end(), op) != on_device.end()) {
      EXPECT_EQ(backend, Backend::kCuda) << op << " ran on the host";
    }
  }
}

void ExpectUnaryMatches(const std::string& op, std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 18,
                        float lo = -3, float hi = 3) {
  SCOPED_TRACE(op);
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{3, 5, 7}})
                         .Node(op, {"x"}, {"y"}, std::move(attrs))
                         .Output("y", pb::kFloat)
                         .Build();
  ExpectCudaMatchesReference(g, {{"x", RandomFloats({3, 5, 7}, 1, lo, hi)}}, opset);
}

TEST(CudaBackendTest, WithoutADeviceSessionsFailCleanly) {
  if (runner::cuda::CheckDevice(0).ok()) GTEST_SKIP() << "a CUDA device is present";
  pb::GraphProto g = GraphBuilder("g").Input("x", pb::kFloat, {{2}}).Node("Relu", {"x"}, {"y"}).Output("y").Build();
  auto out = RunGraphOn(Backend::kCuda, g, {{"x", RandomFloats({2}, 1)}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(out.status().message()).rfind("no CUDA device", 0), 0u) << out.status();
}

TEST(CudaBackendTest, CublasAndCudnnLoadWithoutADevice) {
  // They are loaded on first use, not linked: a built backend must find
  // every entry it calls in the libraries it was compiled against.
  if (!runner::cuda::CompiledIn()) GTEST_SKIP() << "built without the CUDA backend";
  absl::Status status = runner::cuda::LoadLibraries();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(runner::cuda::LoadLibraries(), status) << "loaded once, the same answer after";
}

TEST(CudaBackendTest, DeviceIndexOutOfRangeIsRefused) {
  absl::Status status = runner::cuda::CheckDevice(1 << 20);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(std::string(status.message()).rfind("no CUDA device", 0), 0u) << status;
}

TEST(CudaBackendTest, UnaryOps) {
  ONNXKIT_NEED_CUDA_DEVICE();
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Erf"}) {
    ExpectUnaryMatches(op);
  }
  ExpectUnaryMatches("Log", {}, 18, 0.1f, 3);
  ExpectUnaryMatches("Sqrt", {}, 18, 0, 3);
  ExpectUnaryMatches("Reciprocal", {}, 18, 0.5f, 3);
  ExpectUnaryMatches("LeakyRelu", {AttrFloat("alpha", 0.2f)});
  ExpectUnaryMatches("Elu", {AttrFloat("alpha", 0.7f)});
  ExpectUnaryMatches("HardSigmoid", {AttrFloat("alpha", 0.3f), AttrFloat("beta", 0.4f)});
  ExpectUnaryMatches("Gelu", {}, 20);
  ExpectUnaryMatches("Gelu", {AttrString("approximate", "tanh")}, 20);
}

TEST(CudaBackendTest, BroadcastingBinaryOps) {
  ONNXKIT_NEED_CUDA_DEVICE();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"}) {
    SCOPED_TRACE(op);
    for (auto [as, bs] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{1}, {2, 3}}, {{}, {5}}}) {
      pb::GraphProto g = GraphBuilder("g")
                             .Input("a", pb::kFloat)
                             .Input("b", pb::kFloat)
                             .Node(op, {"a", "b"}, {"y"})
                             .Output("y", pb::kFloat)
                             .Build();
      float lo = std::string(op) == "Pow" || std::string(op) == "Div" ? 0.5f : -2.f;
      ExpectCudaMatchesReference(g, {{"a", RandomFloats(as, 2, lo, 2)}, {"b", RandomFloats(bs, 3, lo, 2)}});
    }
  }
}

TEST(CudaBackendTest, CastAndFloat16) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // float -> float16 -> Relu, Add (on float16) -> float; float -> int64 -> float.
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{4, 6}})
                         .Node("Cast", {"x"}, {"h"}, {AttrInt("to", pb::kFloat16)})
                         .Node("Relu", {"h"}, {"r"})
                         .Node("Add", {"r", "h"}, {"s"})
                         .Node("Cast", {"s"}, {"y"}, {AttrInt("to", pb::kFloat)})
                         .Node("Cast", {"x"}, {"i"}, {AttrInt("to", pb::kInt64)})
                         .Node("Cast", {"i"}, {"z"}, {AttrInt("to", pb::kFloat)})
                         .Output("y", pb::kFloat)
                         .Output("z", pb::kFloat)
                         .Build();
  ExpectCudaMatchesReference(g, {{"x", RandomFloats({4, 6}, 4, -9, 9)}}, 18, 1e-3, 1e-3);
}

TEST(CudaBackendTest, TransposeAndSoftmax) {
  ONNXKIT_NEED_CUDA_DEVICE();
  pb::GraphProto t = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                         .Node("Transpose", {"x"}, {"y"}, {AttrInts("perm", {0, 2, 3, 1})})
                         .Node("Transpose", {"x"}, {"z"})
                         .Output("y", pb::kFloat)
                         .Output("z", pb::kFloat)
                         .Build();
  ExpectCudaMatchesReference(t, {{"x", RandomFloats({2, 3, 4, 5}, 5)}});
  for (int64_t opset : {11, 13}) {
    for (int64_t axis : {-1, 1, 0}) {
      SCOPED_TRACE(absl::StrCat("opset ", opset, " axis ", axis));
      pb::GraphProto s = GraphBuilder("g")
                             .Input("x", pb::kFloat, {{3, 300, 4}})
                             .Node("Softmax", {"x"}, {"y"}, {AttrInt("axis", axis)})
                             .Node("LogSoftmax", {"x"}, {"z"}, {AttrInt("axis", axis)})
                             .Output("y", pb::kFloat)
                             .Output("z", pb::kFloat)
                             .Build();
      ExpectCudaMatchesReference(s, {{"x", RandomFloats({3, 300, 4}, 6, -5, 5)}}, opset);
    }
  }
}

TEST(CudaBackendTest, MatMulAndGemm) {
  ONNXKIT_NEED_CUDA_DEVICE();
  for (auto [as, bs] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{7, 5}, {5, 3}}, {{2, 4, 7, 5}, {5, 3}}, {{7, 5}, {3, 5, 6}}, {{3, 7, 5}, {3, 5, 2}}, {{5}, {5, 3}},
           {{4, 5}, {5}}, {{2, 1, 3, 5}, {4, 5, 2}}}) {
    pb::GraphProto g = GraphBuilder("g")
                           .Input("a", pb::kFloat)
                           .Input("b", pb::kFloat)
                           .Node("MatMul", {"a", "b"}, {"y"})
                           .Output("y", pb::kFloat)
                           .Build();
    ExpectCudaMatchesReference(g, {{"a", RandomFloats(as, 7)}, {"b", RandomFloats(bs, 8)}});
  }
  for (int ta : {0, 1}) {
    for (int tb : {0, 1}) {
      pb::GraphProto g = GraphBuilder("g")
                             .Input("a", pb::kFloat)
                             .Input("b", pb::kFloat)
                             .Input("c", pb::kFloat)
                             .Node("Gemm", {"a", "b", "c"}, {"y"},
                                   {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.5f),
                                    AttrFloat("beta", 2.f)})
                             .Output("y", pb::kFloat)
                             .Build();
      std::vector<int64_t> as = ta ? std::vector<int64_t>{5, 7} : std::vector<int64_t>{7, 5};
      std::vector<int64_t> bs = tb ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{5, 3};
      ExpectCudaMatchesReference(
          g, {{"a", RandomFloats(as, 9)}, {"b", RandomFloats(bs, 10)}, {"c", RandomFloats({3}, 11)}});
    }
  }
}

TEST(CudaBackendTest, Conv) {
  ONNXKIT_NEED_CUDA_DEVICE();
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<pb::AttributeProto> attrs;
  };
  std::vector<Case> cases = {
      {{1, 3, 9, 9}, {4, 3, 3, 3}, {AttrInts("pads", {1, 1, 1, 1})}},
      {{2, 4, 8, 7}, {6, 2, 3, 2}, {AttrInt("group", 2), AttrInts("strides", {2, 1})}},
      {{1, 2, 9, 9}, {3, 2, 3, 3}, {AttrInts("dilations", {2, 2}), AttrString("auto_pad", "SAME_UPPER")}},
      {{1, 3, 11}, {2, 3, 3}, {AttrInts("pads", {1, 1})}},
      {{1, 2, 4, 5, 6}, {3, 2, 2, 2, 2}, {}},
      // Asymmetric padding: runs on the cpu backend, same result.
      {{1, 3, 6, 6}, {2, 3, 3, 3}, {AttrInts("pads", {0, 1, 1, 0})}},
  };
  for (const Case& c : cases) {
    pb::GraphProto g = GraphBuilder("g")
                           .Input("x", pb::kFloat)
                           .Input("w", pb::kFloat)
                           .Input("b", pb::kFloat)
                           .Node("Conv", {"x", "w", "b"}, {"y"}, c.attrs)
                           .Output("y", pb::kFloat)
                           .Build();
    ExpectCudaMatchesReference(g, {{"x", RandomFloats(c.x, 12)}, {"w", RandomFloats(c.w, 13)},
                                   {"b", RandomFloats({c.w[0]}, 14)}},
                               18, 1e-4, 1e-3);
  }
}

TEST(CudaBackendTest, BatchNormalizationAndPooling) {
  ONNXKIT_NEED_CUDA_DEVICE();
  const int64_t c = 5;
  pb::GraphProto bn =
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{2, c, 7, 6}})
          .Initializer(InitializerFrom("s", RandomFloats({c}, 21)))
          .Initializer(InitializerFrom("b", RandomFloats({c}, 22)))
          .Initializer(InitializerFrom("m", RandomFloats({c}, 23)))
          .Initializer(InitializerFrom("v", RandomFloats({c}, 24, 0.5f, 2.f)))
          .Node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"n"}, {AttrFloat("epsilon", 1e-3f)})
          .Node("MaxPool", {"n"}, {"p"},
                {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}),
                 AttrInts("pads", {1, 0, 1, 1}), AttrInt("ceil_mode", 1)})
          .Node("AveragePool", {"n"}, {"q"},
                {AttrInts("kernel_shape", {2, 3}), AttrInts("pads", {1, 1, 0, 1}),
                 AttrInt("count_include_pad", 1)})
          .Node("AveragePool", {"n"}, {"r"},
                {AttrInts("kernel_shape", {3, 2}), AttrString("auto_pad", "SAME_UPPER"),
                 AttrInts("dilations", {2, 1})})
          .Node("GlobalAveragePool", {"n"}, {"u"})
          .Node("GlobalMaxPool", {"n"}, {"w"})
          .Output("p", pb::kFloat)
          .Output("q", pb::kFloat)
          .Output("r", pb::kFloat)
          .Output("u", pb::kFloat)
          .Output("w", pb::kFloat)
          .Build();
  Feeds feeds = {{"x", RandomFloats({2, c, 7, 6}, 25, -3, 3)}};
  // A NaN and an Inf reach the pooled outputs as on the reference backend.
  feeds[0].second.mutable_data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  feeds[0].second.mutable_data<float>()[50] = std::numeric_limits<float>::infinity();
  // Opset 19: AveragePool's dilations.
  ExpectOnDeviceAndClose(
      bn, feeds, {"BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}, 19);
  // 1-D and 3-D windows.
  pb::GraphProto p1 =
      GraphBuilder("g")
          .Input("x", pb::kFloat, {{1, 3, 11}})
          .Input("z", pb::kFloat, {{1, 2, 5, 4, 6}})
          .Node("MaxPool", {"x"}, {"a"}, {AttrInts("kernel_shape", {3}), AttrInts("strides", {2})})
          .Node("AveragePool", {"z"}, {"b"}, {AttrInts("kernel_shape", {2, 2, 3})})
          .Output("a", pb::kFloat)
          .Output("b", pb::kFloat)
          .Build();
  ExpectOnDeviceAndClose(p1, {{"x", RandomFloats({1, 3, 11}, 26)}, {"z", RandomFloats({1, 2, 5, 4, 6}, 27)}},
                         {"MaxPool", "AveragePool"});
}

TEST(CudaBackendTest, LayerNormalizationLrnClipSum) {
  ONNXKIT_NEED_CUDA_DEVICE();
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3, 300}})
                         .Input("t", pb::kFloat, {{300}})
                         .Initializer(InitializerFrom("s", RandomFloats({300}, 31)))
                         .Initializer(InitializerFrom("b", RandomFloats({300}, 32)))
                         .Initializer(InitializerFrom("lo", Floats({}, {-0.5f})))
                         .Node("LayerNormalization", {"x", "s", "b"}, {"ln"}, {AttrFloat("epsilon", 1e-5f)})
                         .Node("LayerNormalization", {"x", "s"}, {"ln2"}, {AttrInt("axis", 1)})
                         .Node("Clip", {"ln", "lo"}, {"c"})
                         .Node("Sum", {"c", "ln2", "t"}, {"y"})
                         .Node("LRN", {"x"}, {"l"}, {AttrInt("size", 3), AttrFloat("alpha", 0.01f)})
                         .Output("y", pb::kFloat)
                         .Output("l", pb::kFloat)
                         .Build();
  // ln2 normalizes over [3, 300] with scale of 300 elements: the cpu runs it.
  ExpectOnDeviceAndClose(g, {{"x", RandomFloats({2, 3, 300}, 33, -4, 4)}, {"t", RandomFloats({300}, 34)}},
                         {"Clip", "Sum", "LRN"}, 18, 1e-4, 1e-3);
  pb::GraphProto h = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{4, 64}})
                         .Initializer(InitializerFrom("s", RandomFloats({64}, 35)))
                         .Node("LayerNormalization", {"x", "s"}, {"y"})
                         .Output("y", pb::kFloat)
                         .Build();
  ExpectOnDeviceAndClose(h, {{"x", RandomFloats({4, 64}, 36)}}, {"LayerNormalization"}, 18);
  // Clip's bounds as attributes (opset 10), one of them left out.
  pb::GraphProto k = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{4, 64}})
                         .Node("Clip", {"x"}, {"y"}, {AttrFloat("min", -0.3f), AttrFloat("max", 0.2f)})
                         .Node("Clip", {"x"}, {"z"}, {AttrFloat("max", 0.1f)})
                         .Output("y", pb::kFloat)
                         .Output("z", pb::kFloat)
                         .Build();
  ExpectOnDeviceAndClose(k, {{"x", RandomFloats({4, 64}, 37)}}, {"Clip"}, 10);
}

TEST(CudaBackendTest, ViewsAndDataMovement) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Shape arithmetic (Shape, Gather, Concat on int64) stays on the host;
  // the float data it shapes stays on the device.
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{2, 3, 4, 5}})
                         .Input("ids", pb::kInt64, {{2, 6}})
                         .Initializer(InitializerFrom("emb", RandomFloats({10, 8}, 41)))
                         .Initializer(InitializerFrom("i0", Int64s({}, {0})))
                         .Initializer(InitializerFrom("minus1", Int64s({1}, {-1})))
                         .Initializer(InitializerFrom("starts", Int64s({2}, {1, -1})))
                         .Initializer(InitializerFrom("ends", Int64s({2}, {3, -6})))
                         .Initializer(InitializerFrom("axes", Int64s({2}, {1, 3})))
                         .Initializer(InitializerFrom("steps", Int64s({2}, {1, -2})))
                         .Initializer(InitializerFrom("ex", Int64s({4}, {3, 1, 1, 4})))
                         .Node("Relu", {"x"}, {"r"})
                         .Node("Shape", {"r"}, {"sh"})
                         .Node("Gather", {"sh", "i0"}, {"n"})
                         .Node("Unsqueeze", {"n", "i0"}, {"n1"})
                         .Node("Concat", {"n1", "minus1"}, {"newshape"}, {AttrInt("axis", 0)})
                         .Node("Reshape", {"r", "newshape"}, {"flat"})
                         .Node("Flatten", {"r"}, {"f2"}, {AttrInt("axis", 2)})
                         .Node("Concat", {"r", "x", "r"}, {"cat"}, {AttrInt("axis", 1)})
                         .Node("Slice", {"cat", "starts", "ends", "axes", "steps"}, {"sl"})
                         .Node("Gather", {"emb", "ids"}, {"e"})
                         .Node("Gather", {"x", "i0"}, {"g1"}, {AttrInt("axis", 3)})
                         .Node("Expand", {"g1", "ex"}, {"big"})
                         .Node("Squeeze", {"e"}, {"sq"})
                         .Output("flat", pb::kFloat)
                         .Output("f2", pb::kFloat)
                         .Output("sl", pb::kFloat)
                         .Output("sq", pb::kFloat)
                         .Output("big", pb::kFloat)
                         .Build();
  ExpectOnDeviceAndClose(
      g, {{"x", RandomFloats({2, 3, 4, 5}, 42)}, {"ids", RandomInts(pb::kInt64, {2, 6}, 43, -10, 9)}},
      {"Relu", "Reshape", "Flatten", "Slice", "Expand", "Squeeze"}, 18, 0, 0);
  // An index out of range is an error, as on the other backends.
  pb::GraphProto bad = GraphBuilder("g")
                           .Input("x", pb::kFloat, {{4, 3}})
                           .Input("i", pb::kInt64, {{2}})
                           .Node("Relu", {"x"}, {"r"})
                           .Node("Gather", {"r", "i"}, {"y"})
                           .Output("y", pb::kFloat)
                           .Build();
  auto out = RunGraphOn(Backend::kCuda, bad, {{"x", RandomFloats({4, 3}, 44)}, {"i", Int64s({2}, {1, 4})}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("out of range"), std::string::npos) << out.status();
}

TEST(CudaBackendTest, InferenceDropoutStaysOnTheDevice) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Opset 9: the mask has the input's type; it is a host tensor of ones.
  for (int64_t opset : {9, 13}) {
    SCOPED_TRACE(opset);
    pb::GraphProto g = GraphBuilder("g")
                           .Input("x", pb::kFloat, {{3, 4}})
                           .Node("Relu", {"x"}, {"r"})
                           .Node("Dropout", {"r"}, {"d", "mask"})
                           .Node("Add", {"d", "x"}, {"y"})
                           .Output("y", pb::kFloat)
                           .Output("mask", opset < 10 ? pb::kFloat : pb::kBool)
                           .Build();
    ExpectOnDeviceAndClose(g, {{"x", RandomFloats({3, 4}, 61)}}, {"Relu", "Dropout", "Add"}, opset, 0, 0);
  }
}

TEST(CudaBackendTest, Float16NormalizationAndPooling) {
  ONNXKIT_NEED_CUDA_DEVICE();
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{1, 4, 9, 9}})
                         .Input("s", pb::kFloat, {{9}})
                         .Node("Cast", {"x"}, {"h"}, {AttrInt("to", pb::kFloat16)})
                         .Node("Cast", {"s"}, {"sh"}, {AttrInt("to", pb::kFloat16)})
                         .Node("MaxPool", {"h"}, {"p"}, {AttrInts("kernel_shape", {3, 3})})
                         .Node("GlobalAveragePool", {"p"}, {"a"})
                         .Node("Flatten", {"a"}, {"f"})
                         .Node("LayerNormalization", {"h", "sh"}, {"ln"})
                         .Node("Cast", {"f"}, {"y"}, {AttrInt("to", pb::kFloat)})
                         .Node("Cast", {"ln"}, {"z"}, {AttrInt("to", pb::kFloat)})
                         .Output("y", pb::kFloat)
                         .Output("z", pb::kFloat)
                         .Build();
  ExpectOnDeviceAndClose(g, {{"x", RandomFloats({1, 4, 9, 9}, 51, -3, 3)}, {"s", RandomFloats({9}, 52)}},
                         {"MaxPool", "GlobalAveragePool", "Flatten", "LayerNormalization"}, 18, 1e-2, 1e-2);
}

// Runs one cuda session (CUDA graphs on or off) on each feed set in turn
// and the reference backend on the same feeds; outputs must agree. Returns
// for each run whether it replayed a recorded graph (-1: the run failed,
// with an error containing `error` when that is not empty).
std::vector<int> RunRepeatedly(const pb::GraphProto& graph, const std::vector<Feeds>& runs, bool graphs,
                               const std::string& error = "") {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, 18);
  runner::SessionOptions options;
  options.backend = Backend::kCuda;
  options.cuda_graphs = graphs;
  auto session = runner::Session::Create(std::move(loaded), options);
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<int> replayed;
  if (!session.ok()) return replayed;
  for (size_t k = 0; k < runs.size(); ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    std::vector<std::pair<std::string, runner::RtValue>> feeds;
    for (const auto& [name, t] : runs[k]) feeds.emplace_back(name, runner::RtValue::FromTensor(t));
    auto got = (*session)->Run(std::move(feeds));
    auto want = RunGraphOn(Backend::kReference, graph, runs[k]);
    if (!got.ok()) {
      EXPECT_FALSE(want.ok()) << got.status();
      if (!error.empty()) {
        EXPECT_NE(std::string(got.status().message()).find(error), std::string::npos) << got.status();
      }
      replayed.push_back(-1);
      continue;
    }
    EXPECT_TRUE(want.ok()) << want.status();
    if (!want.ok()) continue;
    EXPECT_EQ(got->size(), want->size());
    for (size_t i = 0; i < std::min(got->size(), want->size()); ++i) {
      ExpectTensorsClose((*want)[i].tensor(), (*got)[i].tensor(), 1e-5, 1e-4, "output " + std::to_string(i));
    }
    replayed.push_back((*session)->last_run_replayed() ? 1 : 0);
  }
  return replayed;
}

TEST(CudaBackendTest, RepeatedRunsReplayARecordedGraph) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Device work with host shape arithmetic between (Shape -> Gather ->
  // Concat -> Reshape), a host Range whose result is copied up, embedding
  // lookups with indices fed (checked on the device), a product and a
  // Softmax: every run after the second is one graph launch, and each
  // gives the outputs of its own inputs.
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat)
                         .Input("ids", pb::kInt64)
                         .Initializer(InitializerFrom("emb", RandomFloats({10, 8}, 51)))
                         .Initializer(InitializerFrom("pos", RandomFloats({16, 8}, 52)))
                         .Initializer(InitializerFrom("w", RandomFloats({8, 5}, 53)))
                         .Initializer(InitializerFrom("i1", Int64s({1}, {1})))
                         .Initializer(InitializerFrom("zero", Int64s({}, {0})))
                         .Initializer(InitializerFrom("one", Int64s({}, {1})))
                         .Initializer(InitializerFrom("minus1", Int64s({1}, {-1})))
                         .Node("Gather", {"emb", "ids"}, {"e"})
                         .Node("Shape", {"ids"}, {"sh"})
                         .Node("Gather", {"sh", "i1"}, {"len1"})
                         .Node("Squeeze", {"len1"}, {"len"})
                         .Node("Range", {"zero", "len", "one"}, {"p"})
                         .Node("Gather", {"pos", "p"}, {"pe"})
                         .Node("Add", {"e", "pe"}, {"h"})
                         .Node("Relu", {"x"}, {"r"})
                         .Node("Concat", {"minus1", "len1"}, {"shape"}, {AttrInt("axis", 0)})
                         .Node("Reshape", {"r", "shape"}, {"r2"})
                         .Node("MatMul", {"h", "w"}, {"m"})
                         .Node("Softmax", {"m"}, {"y"}, {AttrInt("axis", -1)})
                         .Output("y", pb::kFloat)
                         .Output("r2", pb::kFloat)
                         .Build();
  std::vector<Feeds> runs;
  for (uint32_t k = 0; k < 5; ++k) {
    runs.push_back(
        {{"x", RandomFloats({2, 3, 6}, 60 + k)}, {"ids", RandomInts(pb::kInt64, {2, 6}, 70 + k, -10, 9)}});
  }
  // An index out of range in a replayed run is an error; the next run is not affected.
  runs.push_back(
      {{"x", RandomFloats({2, 3, 6}, 80)}, {"ids", Int64s({2, 6}, {0, 1, 2, 3, 4, 10, 0, 1, 2, 3, 4, 5})}});
  runs.push_back({{"x", RandomFloats({2, 3, 6}, 81)}, {"ids", RandomInts(pb::kInt64, {2, 6}, 82, -10, 9)}});
  // Other shapes: watched, recorded, replayed again.
  for (uint32_t k = 0; k < 3; ++k) {
    runs.push_back(
        {{"x", RandomFloats({3, 2, 4}, 90 + k)}, {"ids", RandomInts(pb::kInt64, {3, 4}, 95 + k, -10, 9)}});
  }
  EXPECT_EQ(RunRepeatedly(g, runs, true, "out of range"), (std::vector<int>{0, 1, 1, 1, 1, -1, 1, 0, 1, 1}));
  EXPECT_EQ(RunRepeatedly(g, runs, false, "out of range"), (std::vector<int>{0, 0, 0, 0, 0, -1, 0, 0, 0, 0}));
}

TEST(CudaBackendTest, RunsThatReadDeviceValuesOnTheHostAreNotRecorded) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Sin runs on the cpu backend (a device value brought down mid-run);
  // the Reshape's shape is an input read on the host. Neither can be
  // replayed: each run runs node by node, with its own inputs.
  pb::GraphProto down = GraphBuilder("g")
                            .Input("x", pb::kFloat, {{2, 8}})
                            .Node("Relu", {"x"}, {"a"})
                            .Node("Sin", {"a"}, {"b"})
                            .Node("Add", {"a", "b"}, {"y"})
                            .Output("y", pb::kFloat)
                            .Build();
  std::vector<Feeds> runs;
  for (uint32_t k = 0; k < 4; ++k) runs.push_back({{"x", RandomFloats({2, 8}, 100 + k)}});
  EXPECT_EQ(RunRepeatedly(down, runs, true), (std::vector<int>{0, 0, 0, 0}));
  pb::GraphProto shaped = GraphBuilder("g")
                              .Input("x", pb::kFloat, {{2, 8}})
                              .Input("s", pb::kInt64, {{2}})
                              .Node("Relu", {"x"}, {"a"})
                              .Node("Reshape", {"a", "s"}, {"y"})
                              .Output("y", pb::kFloat)
                              .Build();
  runs.clear();
  for (int64_t k = 0; k < 4; ++k) {
    runs.push_back({{"x", RandomFloats({2, 8}, 110 + static_cast<uint32_t>(k))},
                    {"s", Int64s({2}, {k % 2 == 0 ? 4 : 8, -1})}});
  }
  EXPECT_EQ(RunRepeatedly(shaped, runs, true), (std::vector<int>{0, 0, 0, 0}));
}

// The outputs of one cuda run of `graph` (SessionOptions::fuse and
// cuda_experimental as given), and the op types that ran on the device.
std::vector<runner::Tensor> RunCuda(const pb::GraphProto& graph, const Feeds& feeds, bool fuse,
                                    std::vector<std::string>* on_device = nullptr, bool experimental = false,
                                    int64_t opset = 18) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset);
  runner::SessionOptions options;
  options.backend = Backend::kCuda;
  options.fuse = fuse;
  options.cuda_experimental = experimental;
  options.on_node_run = [&](const ir::Node& node, const runner::NodeRun& run) {
    if (on_device != nullptr && run.backend == Backend::kCuda) on_device->push_back(node.op_type());
  };
  auto session = runner::Session::Create(std::move(loaded), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  std::vector<std::pair<std::string, runner::RtValue>> run_feeds;
  for (const auto& [name, t] : feeds) run_feeds.emplace_back(name, runner::RtValue::FromTensor(t));
  auto out = (*session)->Run(std::move(run_feeds));
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<runner::Tensor> tensors;
  if (out.ok()) {
    for (const auto& v : *out) tensors.push_back(v.tensor());
  }
  return tensors;
}

// Runs `graph` on cuda with cuda_experimental (fused), on cuda node by
// node and on the reference backend: both cuda runs must match the
// reference within `tol` (atol and rtol), and every op of `on_device` must
// have run on the device in the experimental run.
void ExpectExperimentalMatches(const pb::GraphProto& graph, const Feeds& feeds, double tol,
                               const std::vector<std::string>& on_device, int64_t opset = 18) {
  std::vector<std::string> ran;
  std::vector<runner::Tensor> got = RunCuda(graph, feeds, true, &ran, /*experimental=*/true, opset);
  std::vector<runner::Tensor> plain = RunCuda(graph, feeds, false, nullptr, false, opset);
  auto want = RunGraphOn(Backend::kReference, graph, feeds, opset);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got.size(), want->size());
  ASSERT_EQ(plain.size(), want->size());
  for (size_t i = 0; i < got.size(); ++i) {
    ExpectTensorsClose((*want)[i].tensor(), got[i], tol, tol, "output " + std::to_string(i));
    ExpectTensorsClose((*want)[i].tensor(), plain[i], tol, tol, "unfused output " + std::to_string(i));
  }
  for (const std::string& op : on_device) {
    EXPECT_NE(std::find(ran.begin(), ran.end(), op), ran.end()) << op << " did not run on the device";
  }
}

TEST(CudaBackendTest, ElementwiseChainsRunAsOneKernel) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // A bias and GELU written out (the bias sum read twice), a residual sum
  // and Relu (eight nodes: one chain, whose last value is also read after
  // it), then a per-channel scale and a broadcast that needs strides. In float16
  // too, where fused values round as node outputs do: equal to the run
  // node by node.
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    SCOPED_TRACE(type);
    GraphBuilder b("g");
    b.Input("x", pb::kFloat, {{2, 3, 4}})
        .Input("r", pb::kFloat, {{2, 3, 4}})
        .Input("s", pb::kFloat, {{2, 1, 4}})
        .Initializer(InitializerFrom("w", RandomFloats({4, 4}, 121)))
        .Initializer(InitializerFrom("bias", RandomFloats({4}, 122)))
        .Initializer(InitializerFrom("c", RandomFloats({3, 1}, 123)))
        .Initializer(InitializerFrom("sqrt2", Floats({}, {1.41421356f})))
        .Initializer(InitializerFrom("one", Floats({}, {1.f})))
        .Initializer(InitializerFrom("half", Floats({}, {0.5f})))
        .Node("Cast", {"x"}, {"xt"}, {AttrInt("to", type)})
        .Node("Cast", {"r"}, {"rt"}, {AttrInt("to", type)})
        .Node("Cast", {"s"}, {"st"}, {AttrInt("to", type)})
        .Node("Cast", {"w"}, {"wt"}, {AttrInt("to", type)})
        .Node("Cast", {"bias"}, {"bt"}, {AttrInt("to", type)})
        .Node("Cast", {"c"}, {"ct"}, {AttrInt("to", type)})
        .Node("Cast", {"sqrt2"}, {"s2"}, {AttrInt("to", type)})
        .Node("Cast", {"one"}, {"o1"}, {AttrInt("to", type)})
        .Node("Cast", {"half"}, {"h1"}, {AttrInt("to", type)})
        .Node("MatMul", {"xt", "wt"}, {"m"})
        .Node("Add", {"m", "bt"}, {"a"})
        .Node("Div", {"a", "s2"}, {"d"})
        .Node("Erf", {"d"}, {"e"})
        .Node("Add", {"e", "o1"}, {"e1"})
        .Node("Mul", {"a", "e1"}, {"g0"})
        .Node("Mul", {"g0", "h1"}, {"g"})
        .Node("Add", {"g", "rt"}, {"res"})
        .Node("Relu", {"res"}, {"act"})
        .Node("Mul", {"act", "ct"}, {"sc"})
        .Node("Sub", {"sc", "st"}, {"y0"})
        .Node("Sigmoid", {"y0"}, {"y1"})
        .Node("Tanh", {"y1"}, {"y2"})
        .Node("Cast", {"y2"}, {"y"}, {AttrInt("to", pb::kFloat)})
        .Node("Cast", {"act"}, {"act32"}, {AttrInt("to", pb::kFloat)})
        // The product read twice: the bias Add stays an element-wise node
        // (no linear-layer product, also with cuda_experimental).
        .Node("Cast", {"m"}, {"m32"}, {AttrInt("to", pb::kFloat)})
        .Output("y", pb::kFloat)
        .Output("act32", pb::kFloat)
        .Output("m32", pb::kFloat);
    pb::GraphProto g = b.Build();
    Feeds feeds = {{"x", RandomFloats({2, 3, 4}, 124, -2, 2)},
                   {"r", RandomFloats({2, 3, 4}, 125)},
                   {"s", RandomFloats({2, 1, 4}, 126)}};
    std::vector<std::string> ran;
    std::vector<runner::Tensor> fused = RunCuda(g, feeds, true, &ran);
    std::vector<runner::Tensor> plain = RunCuda(g, feeds, false);
    ASSERT_EQ(fused.size(), 3u);
    ASSERT_EQ(plain.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      ExpectTensorsClose(plain[i], fused[i], 0, 0, "fused output " + std::to_string(i));
    for (const char* op : {"Div", "Erf", "Mul", "Relu", "Sub", "Sigmoid", "Tanh"}) {
      EXPECT_NE(std::find(ran.begin(), ran.end(), op), ran.end()) << op << " did not run on the device";
    }
    if (type == pb::kFloat) ExpectCudaMatchesReference(g, feeds, 18, 1e-5, 1e-4);
  }
  // NaN and infinities pass through a chain as node by node.
  pb::GraphProto nan = GraphBuilder("g")
                           .Input("x", pb::kFloat, {{8}})
                           .Input("z", pb::kFloat, {{8}})
                           .Node("Mul", {"x", "z"}, {"a"})
                           .Node("Relu", {"a"}, {"b"})
                           .Node("Max", {"b", "z"}, {"c"})
                           .Node("Exp", {"c"}, {"y"})
                           .Output("y", pb::kFloat)
                           .Build();
  const float inf = std::numeric_limits<float>::infinity();
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  ExpectCudaMatchesReference(nan, {{"x", Floats({8}, {qnan, inf, -inf, 1, -1, 0, inf, 2})},
                                   {"z", Floats({8}, {1, 0, 2, qnan, inf, -inf, -1, 0.5f})}});
}

TEST(CudaBackendTest, LinearLayersRunAsOneProduct) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // MatMul -> Add (bias, first operand) -> Add (residual); MatMul -> Add
  // (bias) read by two nodes; MatMul -> Add whose other operand is not a
  // row (node by node); a residual that broadcasts (the product declines
  // at run time: node by node); Gemm with a bias row and with a whole C.
  // Float, float16 and bfloat16 against the reference backend, with
  // cuda_experimental (which makes the products) and node by node.
  for (int32_t type : {pb::kFloat, pb::kFloat16, pb::kBfloat16}) {
    SCOPED_TRACE(type);
    GraphBuilder b("g");
    b.Input("x", pb::kFloat, {{2, 5, 8}})
        .Input("r", pb::kFloat, {{2, 5, 6}})
        .Input("s", pb::kFloat, {{5, 1}})
        .Input("x2", pb::kFloat, {{5, 8}})
        .Initializer(InitializerFrom("w", RandomFloats({8, 6}, 151)))
        .Initializer(InitializerFrom("bias", RandomFloats({6}, 152)))
        .Initializer(InitializerFrom("w2", RandomFloats({6, 8}, 153)))
        .Initializer(InitializerFrom("bias2", RandomFloats({1, 1, 8}, 154)))
        .Initializer(InitializerFrom("full", RandomFloats({5, 6}, 155)))
        .Initializer(InitializerFrom("wg", RandomFloats({6, 8}, 156)))
        .Initializer(InitializerFrom("c", RandomFloats({5, 6}, 157)));
    for (const char* name : {"x", "r", "s", "x2", "w", "bias", "w2", "bias2", "full", "wg", "c"}) {
      b.Node("Cast", {name}, {std::string(name) + "t"}, {AttrInt("to", type)});
    }
    b.Node("MatMul", {"xt", "wt"}, {"m1"})
        .Node("Add", {"biast", "m1"}, {"a1"})
        .Node("Add", {"a1", "rt"}, {"y1"})
        .Node("MatMul", {"y1", "w2t"}, {"m2"})
        .Node("Add", {"m2", "bias2t"}, {"y2"})
        .Node("Tanh", {"y2"}, {"t2"})
        .Node("Mul", {"y2", "t2"}, {"u2"})
        .Node("MatMul", {"x2t", "wt"}, {"m3"})
        .Node("Add", {"m3", "fullt"}, {"y3"})
        .Node("MatMul", {"x2t", "wt"}, {"m4"})
        .Node("Add", {"m4", "biast"}, {"a4"})
        .Node("Add", {"a4", "st"}, {"y4"})
        .Node("Gemm", {"x2t", "wgt", "biast"}, {"y5"}, {AttrInt("transB", 1), AttrFloat("alpha", 0.5f)})
        .Node("Gemm", {"x2t", "wgt", "ct"}, {"y6"}, {AttrInt("transB", 1), AttrFloat("beta", 0.25f)});
    for (const char* name : {"y1", "u2", "y3", "y4", "y5", "y6"}) {
      b.Node("Cast", {name}, {std::string(name) + "_out"}, {AttrInt("to", pb::kFloat)})
          .Output(std::string(name) + "_out");
    }
    pb::GraphProto g = b.Build();
    Feeds feeds = {{"x", RandomFloats({2, 5, 8}, 158)},
                   {"r", RandomFloats({2, 5, 6}, 159)},
                   {"s", RandomFloats({5, 1}, 160)},
                   {"x2", RandomFloats({5, 8}, 161)}};
    const double tol = type == pb::kFloat ? 1e-5 : type == pb::kFloat16 ? 1e-2 : 8e-2;
    ExpectExperimentalMatches(g, feeds, tol, {"MatMul", "Add", "Tanh", "Gemm"});
  }
}

TEST(CudaBackendTest, TransposesAroundMatMulAreReadAsStrides) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Attention as exporters write it: heads split by Transposes before the
  // products (one of K's moves the head dim last), merged by one after; a
  // Transpose whose view no strided product reads (node by node); one
  // whose result is also an output (kept). Float and float16 against the
  // reference backend, with cuda_experimental (which reads the Transposes
  // as strides) and node by node.
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    SCOPED_TRACE(type);
    GraphBuilder b("g");
    b.Input("q", pb::kFloat, {{2, 5, 3, 4}})
        .Input("k", pb::kFloat, {{2, 5, 3, 4}})
        .Input("v", pb::kFloat, {{2, 5, 3, 4}})
        .Input("z", pb::kFloat, {{2, 3, 4, 5}})
        .Initializer(InitializerFrom("w", RandomFloats({3, 6}, 171)));
    for (const char* name : {"q", "k", "v", "z", "w"}) {
      b.Node("Cast", {name}, {std::string(name) + "t"}, {AttrInt("to", type)});
    }
    b.Node("Transpose", {"qt"}, {"qh"}, {AttrInts("perm", {0, 2, 1, 3})})
        .Node("Transpose", {"kt"}, {"kh"}, {AttrInts("perm", {0, 2, 3, 1})})
        .Node("Transpose", {"vt"}, {"vh"}, {AttrInts("perm", {0, 2, 1, 3})})
        .Node("MatMul", {"qh", "kh"}, {"s"})
        .Node("Softmax", {"s"}, {"p"}, {AttrInt("axis", -1)})
        .Node("MatMul", {"p", "vh"}, {"c"})
        .Node("Transpose", {"c"}, {"ct"}, {AttrInts("perm", {0, 2, 1, 3})})
        .Node("Transpose", {"zt"}, {"zv"}, {AttrInts("perm", {3, 2, 0, 1})})
        .Node("MatMul", {"zv", "wt"}, {"y2"})
        .Node("Transpose", {"vt"}, {"vk"}, {AttrInts("perm", {0, 2, 1, 3})})
        .Node("Transpose", {"kt"}, {"kh2"}, {AttrInts("perm", {0, 2, 3, 1})})
        .Node("MatMul", {"vk", "kh2"}, {"y3"});
    for (const char* name : {"ct", "y2", "y3", "vk"}) {
      b.Node("Cast", {name}, {std::string(name) + "_out"}, {AttrInt("to", pb::kFloat)})
          .Output(std::string(name) + "_out");
    }
    pb::GraphProto g = b.Build();
    Feeds feeds = {{"q", RandomFloats({2, 5, 3, 4}, 172)},
                   {"k", RandomFloats({2, 5, 3, 4}, 173)},
                   {"v", RandomFloats({2, 5, 3, 4}, 174)},
                   {"z", RandomFloats({2, 3, 4, 5}, 175)}};
    ExpectExperimentalMatches(g, feeds, type == pb::kFloat ? 1e-5 : 1e-2, {"MatMul", "Transpose", "Softmax"});
  }
}

TEST(CudaBackendTest, ScaleAndMaskBeforeSoftmaxRunAsOneKernel) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Attention's scores: Div by a scalar, Add of a mask with -inf in places,
  // Softmax on the last axis; a lone Add before a LogSoftmax on axis 1 (at
  // opset 11 rows are flattened from the axis on); a chain whose result is
  // also an output (the Softmax stays its own kernel). Float and float16,
  // with cuda_experimental, against the reference backend and node by node.
  const float inf = std::numeric_limits<float>::infinity();
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    for (int64_t opset : {int64_t{18}, int64_t{11}}) {
      SCOPED_TRACE(std::to_string(type) + " opset " + std::to_string(opset));
      GraphBuilder b("g");
      b.Input("x", pb::kFloat, {{2, 3, 5, 7}})
          .Input("mask", pb::kFloat, {{2, 1, 1, 7}})
          .Initializer(InitializerFrom("scale", Floats({}, {8.f})));
      for (const char* name : {"x", "mask", "scale"}) {
        b.Node("Cast", {name}, {std::string(name) + "t"}, {AttrInt("to", type)});
      }
      b.Node("Div", {"xt", "scalet"}, {"d"})
          .Node("Add", {"d", "maskt"}, {"s"})
          .Node("Softmax", {"s"}, {"p"}, {AttrInt("axis", -1)})
          .Node("Add", {"xt", "xt"}, {"x2"})
          .Node("LogSoftmax", {"x2"}, {"l"}, {AttrInt("axis", 1)})
          .Node("Mul", {"xt", "scalet"}, {"m"})
          .Node("Sub", {"m", "maskt"}, {"m2"})
          .Node("Softmax", {"m2"}, {"q"}, {AttrInt("axis", -1)});
      for (const char* name : {"p", "l", "m2", "q"}) {
        b.Node("Cast", {name}, {std::string(name) + "_out"}, {AttrInt("to", pb::kFloat)})
            .Output(std::string(name) + "_out");
      }
      pb::GraphProto g = b.Build();
      std::vector<float> mask(14, 0.f);
      mask[3] = mask[9] = mask[10] = -inf;
      Feeds feeds = {{"x", RandomFloats({2, 3, 5, 7}, 181, -4, 4)}, {"mask", Floats({2, 1, 1, 7}, mask)}};
      ExpectExperimentalMatches(g, feeds, type == pb::kFloat ? 1e-5 : 1e-2,
                                {"Div", "Add", "Softmax", "LogSoftmax"}, opset);
    }
  }
}

TEST(CudaBackendTest, ResizeAndUpsample) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Resize (with cuda_experimental) in every mode, up and down, by scales
  // and by sizes, with antialias, crop-and-resize with its extrapolation
  // value, and Upsample-9; float and float16, against the reference backend.
  struct Case {
    std::string mode, coord;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
    bool antialias;
    int64_t opset;
  };
  const std::vector<Case> cases = {
      {"nearest", "asymmetric", {1, 1, 2, 3}, {}, false, 18},
      {"nearest", "half_pixel", {1, 1, 0.5f, 0.6f}, {}, false, 18},
      {"linear", "half_pixel", {1, 1, 1.5f, 2}, {}, false, 18},
      {"linear", "align_corners", {}, {2, 3, 3, 11}, false, 18},
      {"linear", "pytorch_half_pixel", {1, 1, 0.5f, 0.5f}, {}, true, 18},
      {"cubic", "half_pixel", {1, 1, 2, 1.25f}, {}, false, 18},
      {"cubic", "asymmetric", {1, 1, 0.6f, 0.6f}, {}, true, 18},
      {"linear", "tf_crop_and_resize", {}, {2, 3, 4, 4}, false, 18},
      {"linear", "half_pixel", {1, 1, 2, 2}, {}, false, 11},
  };
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::to_string(type) + " " + c.mode + " " + c.coord + " opset " + std::to_string(c.opset));
      GraphBuilder b("g");
      b.Input("x", pb::kFloat, {{2, 3, 5, 7}})
          .Initializer(InitializerFrom("roi", Floats({8}, {0, 0, 0.2f, 0.1f, 1, 1, 0.9f, 1.2f})))
          .Node("Cast", {"x"}, {"xt"}, {AttrInt("to", type)});
      std::vector<std::string> inputs = {"xt", "roi"};
      if (!c.scales.empty()) {
        b.Initializer(InitializerFrom("scales", Floats({4}, c.scales)));
        inputs.push_back("scales");
      } else {
        b.Initializer(InitializerFrom("sizes", Int64s({4}, c.sizes)));
        inputs.push_back("");
        inputs.push_back("sizes");
      }
      std::vector<pb::AttributeProto> attrs = {AttrString("mode", c.mode),
                                               AttrString("coordinate_transformation_mode", c.coord),
                                               AttrFloat("extrapolation_value", -2.f)};
      if (c.antialias) attrs.push_back(AttrInt("antialias", 1));
      b.Node("Resize", inputs, {"r"}, attrs)
          .Node("Cast", {"r"}, {"y"}, {AttrInt("to", pb::kFloat)})
          .Output("y", pb::kFloat);
      ExpectExperimentalMatches(b.Build(), {{"x", RandomFloats({2, 3, 5, 7}, 191)}},
                                type == pb::kFloat ? 1e-5 : 1e-2, {"Resize"}, c.opset);
    }
  }
  pb::GraphProto up = GraphBuilder("g")
                          .Input("x", pb::kFloat, {{1, 2, 3, 4}})
                          .Initializer(InitializerFrom("scales", Floats({4}, {1, 1, 2, 3})))
                          .Node("Upsample", {"x", "scales"}, {"y"}, {AttrString("mode", "linear")})
                          .Output("y", pb::kFloat)
                          .Build();
  ExpectExperimentalMatches(up, {{"x", RandomFloats({1, 2, 3, 4}, 192)}}, 1e-5, {"Upsample"}, 9);
}

TEST(CudaBackendTest, QuantizeAndDequantizeLinear) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // QuantizeLinear then DequantizeLinear (with cuda_experimental) per
  // tensor, per axis and blocked, into uint8, int8, uint16 and int16, with
  // and without a zero point, from float and float16: the integers equal
  // the reference backend's (ties to even, saturation, NaN to the zero
  // point, infinities), the dequantized values too.
  struct Case {
    int32_t qtype;
    std::vector<int64_t> scale_shape;
    int64_t axis, block;
    bool zero_point;
    int64_t opset;
  };
  const std::vector<Case> cases = {
      {pb::kUint8, {}, 1, 0, true, 13},        {pb::kUint8, {}, 1, 0, false, 10},
      {pb::kInt8, {6}, 1, 0, true, 13},        {pb::kUint8, {4}, -1, 0, true, 19},
      {pb::kInt16, {2, 3, 4}, 1, 2, true, 21}, {pb::kUint16, {6}, 1, 0, true, 21},
      {pb::kInt8, {2, 6, 2}, 2, 3, false, 21},
  };
  runner::Tensor x = RandomFloats({2, 6, 4}, 193, -4, 4);
  const float special[] = {NAN, INFINITY, -INFINITY, 0.125f, 0.375f, -0.125f, -0.375f, 1e9f};
  for (int i = 0; i < 8; ++i) x.mutable_data<float>()[i * 5] = special[i];
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::to_string(type) + " to " + std::to_string(c.qtype) + " scale rank " +
                   std::to_string(c.scale_shape.size()) + " opset " + std::to_string(c.opset));
      int64_t count = 1;
      for (int64_t d : c.scale_shape) count *= d;
      std::vector<float> scales(static_cast<size_t>(count));
      for (size_t i = 0; i < scales.size(); ++i)
        scales[i] = i == 0 ? 0.25f : 0.01f + 0.003f * static_cast<float>(i);
      std::vector<int64_t> zps(static_cast<size_t>(count));
      for (size_t i = 0; i < zps.size(); ++i)
        zps[i] = static_cast<int64_t>(i % 7) * (c.qtype == pb::kInt8 ? -3 : 5);
      GraphBuilder b("g");
      b.Input("x", pb::kFloat, {{2, 6, 4}})
          .Initializer(InitializerFrom("s32", Floats(c.scale_shape, scales)))
          .Node("Cast", {"x"}, {"xt"}, {AttrInt("to", type)})
          .Node("Cast", {"s32"}, {"s"}, {AttrInt("to", type)});
      std::vector<std::string> inputs = {"xt", "s"};
      if (c.zero_point) {
        b.Initializer(InitializerFrom("z64", Int64s(c.scale_shape, zps)))
            .Node("Cast", {"z64"}, {"z"}, {AttrInt("to", c.qtype)});
        inputs.push_back("z");
      }
      std::vector<pb::AttributeProto> attrs;
      if (c.opset >= 13) attrs.push_back(AttrInt("axis", c.axis));
      if (c.block > 0) attrs.push_back(AttrInt("block_size", c.block));
      if (!c.zero_point && c.opset >= 21) attrs.push_back(AttrInt("output_dtype", c.qtype));
      std::vector<pb::AttributeProto> dq_attrs;
      if (c.opset >= 13) dq_attrs.push_back(AttrInt("axis", c.axis));
      if (c.block > 0) dq_attrs.push_back(AttrInt("block_size", c.block));
      std::vector<std::string> dq_inputs = inputs;
      dq_inputs[0] = "q";
      b.Node("QuantizeLinear", inputs, {"q"}, attrs)
          .Node("DequantizeLinear", dq_inputs, {"d"}, dq_attrs)
          .Node("Cast", {"d"}, {"y"}, {AttrInt("to", pb::kFloat)})
          .Output("q", c.qtype)
          .Output("y", pb::kFloat);
      ExpectExperimentalMatches(b.Build(), {{"x", x}}, 1e-6, {"QuantizeLinear", "DequantizeLinear"}, c.opset);
    }
  }
}

TEST(CudaBackendTest, ConvChainsFoldNormalizationAndFuseWhatFollows) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // ResNet-like: Conv -> BatchNormalization -> Add (residual) -> Relu; a
  // Conv with bias as the residual; a Conv -> BatchNormalization whose
  // result is also an output; a 1-D Conv -> LeakyRelu; a Conv whose window
  // pads asymmetrically
  // (the chain declines: node by node, on the cpu backend). Float and
  // float16 against the reference backend.
  for (int32_t type : {pb::kFloat, pb::kFloat16}) {
    SCOPED_TRACE(type);
    GraphBuilder b("g");
    b.Input("x", pb::kFloat, {{2, 4, 7, 7}})
        .Input("x1", pb::kFloat, {{1, 3, 10}})
        .Initializer(InitializerFrom("w1", RandomFloats({6, 4, 3, 3}, 131)))
        .Initializer(InitializerFrom("g1", RandomFloats({6}, 132, 0.5f, 1.5f)))
        .Initializer(InitializerFrom("b1", RandomFloats({6}, 133)))
        .Initializer(InitializerFrom("m1", RandomFloats({6}, 134)))
        .Initializer(InitializerFrom("v1", RandomFloats({6}, 135, 0.5f, 2.f)))
        .Initializer(InitializerFrom("w2", RandomFloats({6, 4, 1, 1}, 136)))
        .Initializer(InitializerFrom("c2", RandomFloats({6}, 137)))
        .Initializer(InitializerFrom("w3", RandomFloats({6, 6, 3, 3}, 138)))
        .Initializer(InitializerFrom("w4", RandomFloats({2, 3, 3}, 139)))
        .Initializer(InitializerFrom("w5", RandomFloats({3, 6, 3, 3}, 140)));
    for (const char* name : {"x", "x1", "w1", "g1", "b1", "m1", "v1", "w2", "c2", "w3", "w4", "w5"}) {
      b.Node("Cast", {name}, {std::string(name) + "t"}, {AttrInt("to", type)});
    }
    b.Node("Conv", {"xt", "w1t"}, {"c1"}, {AttrInts("pads", {1, 1, 1, 1})})
        .Node("BatchNormalization", {"c1", "g1t", "b1t", "m1t", "v1t"}, {"n1"}, {AttrFloat("epsilon", 1e-3f)})
        .Node("Conv", {"xt", "w2t", "c2t"}, {"d2"})
        .Node("Add", {"n1", "d2"}, {"s1"})
        .Node("Relu", {"s1"}, {"r1"})
        .Node("Conv", {"r1", "w3t"}, {"c3"}, {AttrInts("strides", {2, 2})})
        .Node("BatchNormalization", {"c3", "g1t", "b1t", "m1t", "v1t"}, {"n3"})
        .Node("Mul", {"n3", "n3"}, {"sq"})
        .Node("Conv", {"x1t", "w4t"}, {"c4"}, {AttrInts("pads", {1, 1})})
        .Node("LeakyRelu", {"c4"}, {"l4"}, {AttrFloat("alpha", 0.2f)})
        .Node("Conv", {"r1", "w5t"}, {"c5"}, {AttrInts("pads", {0, 1, 1, 0})})
        .Node("Relu", {"c5"}, {"r5"});
    for (const char* name : {"r1", "sq", "n3", "l4", "r5"}) {
      b.Node("Cast", {name}, {std::string(name) + "_out"}, {AttrInt("to", pb::kFloat)})
          .Output(std::string(name) + "_out");
    }
    pb::GraphProto g = b.Build();
    Feeds feeds = {{"x", RandomFloats({2, 4, 7, 7}, 141)}, {"x1", RandomFloats({1, 3, 10}, 142)}};
    std::vector<std::string> ran;
    std::vector<runner::Tensor> got = RunCuda(g, feeds, true, &ran);
    auto want = RunGraphOn(Backend::kReference, g, feeds);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got.size(), want->size());
    const double tol = type == pb::kFloat ? 1e-4 : 2e-2;
    for (size_t i = 0; i < got.size(); ++i) {
      ExpectTensorsClose((*want)[i].tensor(), got[i], tol, tol, "output " + std::to_string(i));
    }
    for (const char* op : {"BatchNormalization", "Add", "Relu", "LeakyRelu", "Mul"}) {
      EXPECT_NE(std::find(ran.begin(), ran.end(), op), ran.end()) << op << " did not run on the device";
    }
  }
}

TEST(CudaBackendTest, ReductionsOverAnyAxes) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Trailing axes (contiguous), a middle axis, several axes, every axis,
  // keepdims on and off, axes as attribute (opset 13) and as input (18),
  // many values per output (a block each) and few (a thread each), NaN in
  // ReduceMax / ReduceMin, float16.
  struct Case {
    std::string op;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const std::vector<Case> cases = {
      {"ReduceMean", {-1}, 1},         {"ReduceSum", {1}, 0},
      {"ReduceMax", {0, 2}, 1},        {"ReduceMin", {}, 0},
      {"ReduceSumSquare", {2, 3}, 1},  {"ReduceL2", {1, 3}, 0},
      {"ReduceMean", {0, 1, 2, 3}, 1},
  };
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  runner::Tensor x = RandomFloats({3, 70, 5, 80}, 151);
  x.mutable_data<float>()[7] = qnan;
  for (int64_t opset : {13, 18}) {
    for (const Case& c : cases) {
      for (int32_t type : {pb::kFloat, pb::kFloat16}) {
        SCOPED_TRACE(c.op + " opset " + std::to_string(opset) + " type " + std::to_string(type));
        GraphBuilder b("g");
        b.Input("x", pb::kFloat, {{3, 70, 5, 80}});
        std::vector<std::string> inputs = {"xt"};
        std::vector<pb::AttributeProto> attrs = {AttrInt("keepdims", c.keepdims)};
        const bool axes_input = opset >= (c.op == "ReduceSum" ? 13 : 18);
        if (axes_input && !c.axes.empty()) {
          b.Initializer(InitializerFrom("axes", Int64s({static_cast<int64_t>(c.axes.size())}, c.axes)));
          inputs.push_back("axes");
        } else if (!axes_input && !c.axes.empty()) {
          attrs.push_back(AttrInts("axes", c.axes));
        }
        b.Node("Cast", {"x"}, {"xt"}, {AttrInt("to", type)})
            .Node(c.op, inputs, {"r"}, attrs)
            .Node("Cast", {"r"}, {"y"}, {AttrInt("to", pb::kFloat)})
            .Output("y", pb::kFloat);
        pb::GraphProto g = b.Build();
        auto want = RunGraphOn(Backend::kReference, g, {{"x", x}}, opset);
        ASSERT_TRUE(want.ok()) << want.status();
        io::LoadedModel loaded;
        loaded.proto = ModelFromGraph(g, opset);
        runner::SessionOptions options;
        options.backend = Backend::kCuda;
        std::vector<std::string> ran;
        options.on_node_run = [&](const ir::Node& node, const runner::NodeRun& run) {
          if (run.backend == Backend::kCuda) ran.push_back(node.op_type());
        };
        auto session = runner::Session::Create(std::move(loaded), options);
        ASSERT_TRUE(session.ok()) << session.status();
        auto got = (*session)->Run({{"x", runner::RtValue::FromTensor(x)}});
        ASSERT_TRUE(got.ok()) << got.status();
        const double tol = type == pb::kFloat ? 1e-4 : 2e-2;
        ExpectTensorsClose((*want)[0].tensor(), (*got)[0].tensor(), tol, tol, c.op);
        EXPECT_NE(std::find(ran.begin(), ran.end(), c.op), ran.end()) << c.op << " did not run on the device";
      }
    }
  }
}

TEST(CudaBackendTest, ComparisonsLogicAndWhere) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Float comparisons with NaN and infinities, int64 with broadcasting, bool
  // logic, and Where choosing float16 and int64 values under a broadcast
  // condition, against the reference backend; all on the device.
  const float inf = std::numeric_limits<float>::infinity();
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  pb::GraphProto g = GraphBuilder("g")
                         .Input("a", pb::kFloat, {{2, 3, 4}})
                         .Input("b", pb::kFloat, {{3, 1}})
                         .Input("i", pb::kInt64, {{2, 3, 4}})
                         .Input("j", pb::kInt64, {{4}})
                         .Node("Equal", {"a", "b"}, {"eq"})
                         .Node("Less", {"a", "b"}, {"lt"})
                         .Node("Greater", {"a", "b"}, {"gt"})
                         .Node("LessOrEqual", {"a", "b"}, {"le"})
                         .Node("GreaterOrEqual", {"a", "b"}, {"ge"})
                         .Node("Less", {"i", "j"}, {"ilt"})
                         .Node("Equal", {"i", "j"}, {"ieq"})
                         .Node("And", {"lt", "ilt"}, {"and"})
                         .Node("Or", {"eq", "ieq"}, {"or"})
                         .Node("Xor", {"gt", "ilt"}, {"xor"})
                         .Node("Not", {"le"}, {"not"})
                         .Node("Equal", {"and", "or"}, {"beq"})
                         .Node("Cast", {"a"}, {"ah"}, {AttrInt("to", pb::kFloat16)})
                         .Node("Cast", {"b"}, {"bh"}, {AttrInt("to", pb::kFloat16)})
                         .Node("Where", {"ge", "ah", "bh"}, {"wh"})
                         .Node("Cast", {"wh"}, {"w"}, {AttrInt("to", pb::kFloat)})
                         .Node("Where", {"not", "i", "j"}, {"wi"})
                         .Output("eq", pb::kBool)
                         .Output("lt", pb::kBool)
                         .Output("gt", pb::kBool)
                         .Output("le", pb::kBool)
                         .Output("ge", pb::kBool)
                         .Output("and", pb::kBool)
                         .Output("or", pb::kBool)
                         .Output("xor", pb::kBool)
                         .Output("not", pb::kBool)
                         .Output("beq", pb::kBool)
                         .Output("w", pb::kFloat)
                         .Output("wi", pb::kInt64)
                         .Build();
  runner::Tensor a = RandomFloats({2, 3, 4}, 161);
  a.mutable_data<float>()[0] = qnan;
  a.mutable_data<float>()[1] = inf;
  a.mutable_data<float>()[2] = -inf;
  runner::Tensor b = Floats({3, 1}, {qnan, 0.f, -inf});
  a.mutable_data<float>()[5] = 0.f;  // equal to b's middle row
  Feeds feeds = {{"a", a},
                 {"b", b},
                 {"i", RandomInts(pb::kInt64, {2, 3, 4}, 162, -3, 3)},
                 {"j", Int64s({4}, {-1, 0, 1, 2})}};
  auto want = RunGraphOn(Backend::kReference, g, feeds);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<std::string> ran;
  std::vector<runner::Tensor> got = RunCuda(g, feeds, true, &ran);
  ASSERT_EQ(got.size(), want->size());
  for (size_t i = 0; i < got.size(); ++i) {
    ExpectTensorsClose((*want)[i].tensor(), got[i], 0, 0, "output " + std::to_string(i));
  }
  for (const char* op :
       {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Where"}) {
    EXPECT_NE(std::find(ran.begin(), ran.end(), op), ran.end()) << op << " did not run on the device";
  }
}

TEST(CudaBackendTest, MixedGraphReportsPlacementAndCopies) {
  ONNXKIT_NEED_CUDA_DEVICE();
  // Sin has no CUDA kernel: Relu (cuda) -> Sin (cpu) -> Add (cuda).
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(GraphBuilder("g")
                                    .Input("x", pb::kFloat, {{2, 8}})
                                    .Node("Relu", {"x"}, {"a"})
                                    .Node("Sin", {"a"}, {"b"})
                                    .Node("Add", {"a", "b"}, {"y"})
                                    .Output("y", pb::kFloat)
                                    .Build(),
                                18);
  runner::SessionOptions options;
  options.backend = Backend::kCuda;
  std::vector<std::pair<std::string, Backend>> ran;
  options.on_node_run = [&](const ir::Node& node, const runner::NodeRun& run) {
    ran.emplace_back(node.op_type(), run.backend);
  };
  auto session = runner::Session::Create(std::move(loaded), options);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(RandomFloats({2, 8}, 15))}});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<std::pair<std::string, Backend>> want = {
      {"Relu", Backend::kCuda}, {"Sin", Backend::kCpu}, {"Add", Backend::kCuda}};
  EXPECT_EQ(ran, want);
  // x up, a down, b up, y down: the plan's copies, and nothing more.
  EXPECT_EQ((*session)->last_run_copies().count, 4);
  EXPECT_EQ((*session)->placement().num_transfers, 4);
}

}  // namespace
}  // namespace onnxkit::testing
