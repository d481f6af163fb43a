// Constant folding in the session: nodes whose inputs are all constant run
// once at creation; overridable initializers (also graph inputs), random ops
// and failing nodes are left to Run.
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

pb::TensorProto Int64Initializer(std::string name, std::vector<int64_t> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kInt64;
  t.dims = {static_cast<int64_t>(values.size())};
  t.int64_data = std::move(values);
  return t;
}

// y = x + ConstantOfShape(shape, 2.5) * w: the ConstantOfShape and Mul fold.
pb::GraphProto FoldableGraph(bool w_is_input) {
  GraphBuilder g("g");
  g.Input("x");
  if (w_is_input) g.Input("w");
  pb::TensorProto value = RawFloatTensor("value", {1}, 2.5f);
  g.Initializer(Int64Initializer("shape", {2}))
      .Initializer(RawFloatTensor("w", {2}, 1.0f))
      .Node("ConstantOfShape", {"shape"}, {"c"}, {AttrTensor("value", value)}, "fill")
      .Node("Mul", {"c", "w"}, {"cw"}, {}, "scale")
      .Node("Add", {"x", "cw"}, {"y"}, {}, "add")
      .Output("y");
  return g.Build();
}

absl::StatusOr<std::unique_ptr<runner::Session>> Open(pb::GraphProto graph, runner::SessionOptions options) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(std::move(graph), 18);
  return runner::Session::Create(std::move(loaded), std::move(options));
}

TEST(SessionFoldTest, ConstantNodesRunOnceAtCreation) {
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    std::vector<std::string> ran;
    runner::SessionOptions options;
    options.backend = backend;
    options.on_node_done = [&](const ir::Node& node, double) { ran.push_back(node.name()); };
    auto session = Open(FoldableGraph(false), options);
    ASSERT_TRUE(session.ok()) << session.status();
    ran.clear();
    for (int run = 0; run < 2; ++run) {
      auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(Floats({2}, {10, 20}))}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Values<float>((*out)[0].tensor()), (std::vector<float>{12.5f, 25.0f}));
    }
    EXPECT_EQ(ran, (std::vector<std::string>{"add", "add"})) << "only Add runs per Run";
  }
}

TEST(SessionFoldTest, FeedingAFoldedInitializerRecomputesWhatDependsOnIt) {
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    runner::SessionOptions options;
    options.backend = backend;
    auto session = Open(FoldableGraph(true), options);
    ASSERT_TRUE(session.ok()) << session.status();
    auto x = runner::RtValue::FromTensor(Floats({2}, {0, 0}));
    // w defaults to its initializer {1, 2}; fed, it wins; then the default again.
    auto a = (*session)->Run({{"x", x}});
    auto b = (*session)->Run({{"x", x}, {"w", runner::RtValue::FromTensor(Floats({2}, {4, 4}))}});
    auto c = (*session)->Run({{"x", x}});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(Values<float>((*a)[0].tensor()), (std::vector<float>{2.5f, 5.0f}));
    EXPECT_EQ(Values<float>((*b)[0].tensor()), (std::vector<float>{10.0f, 10.0f}));
    EXPECT_EQ(Values<float>((*c)[0].tensor()), (std::vector<float>{2.5f, 5.0f}));
  }
}

TEST(SessionFoldTest, ObserversStillSeeFoldedValues) {
  std::vector<std::string> seen;
  runner::SessionOptions options;
  options.observer = [&](const ir::Value& v, const runner::RtValue&) {
    seen.push_back(v.name());
    return absl::OkStatus();
  };
  auto session = Open(FoldableGraph(false), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({{"x", runner::RtValue::FromTensor(Floats({2}, {1, 1}))}}).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"c", "cw", "y"}));
}

TEST(SessionFoldTest, AFailingConstantNodeFailsInRunNamingTheNode) {
  GraphBuilder g("g");
  g.Input("x")
      .Initializer(RawFloatTensor("a", {2}))
      .Initializer(RawFloatTensor("b", {3}))
      .Node("Add", {"a", "b"}, {"ab"}, {}, "bad_add")
      .Node("Add", {"x", "ab"}, {"y"})
      .Output("y");
  auto session = Open(g.Build(), {});
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(Floats({2}, {1, 1}))}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("bad_add"), std::string::npos) << out.status();
}

TEST(SessionFoldTest, RandomOpsAreNotFolded) {
  GraphBuilder g("g");
  g.Node("RandomUniform", {}, {"r"}, {AttrInts("shape", {4})}, "random").Output("r");
  std::vector<std::string> ran;
  runner::SessionOptions options;
  options.on_node_done = [&](const ir::Node& node, double) { ran.push_back(node.name()); };
  auto session = Open(g.Build(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"random"}));
}

TEST(SessionFoldTest, InitializersOnlyFoldedNodesReadAreReleasedAndConvertedAgainWhenNeeded) {
  // IR 3 (initializers are inputs too) from a file: w1 and w2 only feed
  // Transposes that fold, so the session drops them; a run that feeds b
  // recomputes the Transposes and must read w1 and w2 again, right.
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{3, 1031})
      .Initializer(RawFloatTensor("w1", {1031, 3}, 0.5f))
      .Initializer(RawFloatTensor("w2", {1031, 3}, -7.0f))
      .Initializer(RawFloatTensor("b", {1}, 1.0f))
      .Node("Transpose", {"w1"}, {"t1"}, {}, "transpose1")
      .Node("Transpose", {"w2"}, {"t2"}, {}, "transpose2")
      .Node("Add", {"x", "t1"}, {"s"})
      .Node("Add", {"s", "t2"}, {"u"})
      .Node("Add", {"u", "b"}, {"y"})
      .Output("y");
  pb::GraphProto graph = g.Build();
  for (const char* name : {"w1", "w2", "b"}) graph.input.push_back(MakeValueInfo(name, pb::kFloat));
  std::filesystem::path dir = MakeTempDir();
  ASSERT_TRUE(io::SaveModel(ModelFromGraph(graph, 13, 3), dir, dir / "m.onnx").ok());
  std::vector<float> x(3 * 1031, 0.25f);
  // y[i][j] = 0.25 + w1[j][i] + w2[j][i] + b with w1 = 0.5 + k, w2 = -7 + k, k = j * 3 + i.
  auto expected = [&](float b, int64_t i, int64_t j) {
    float k = static_cast<float>(j * 3 + i);
    return 0.25f + (0.5f + k) + (-7.0f + k) + b;
  };
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    auto loaded = io::LoadModel(dir / "m.onnx");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    runner::SessionOptions options;
    options.backend = backend;
    auto session = runner::Session::Create(*std::move(loaded), options);
    ASSERT_TRUE(session.ok()) << session.status();
    for (float b : {1.0f, 3.0f, 1.0f}) {
      std::vector<std::pair<std::string, runner::RtValue>> feeds = {
          {"x", runner::RtValue::FromTensor(Floats({3, 1031}, x))}};
      if (b != 1.0f) feeds.emplace_back("b", runner::RtValue::FromTensor(Floats({1}, {b})));
      auto out = (*session)->Run(std::move(feeds));
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<float> y = Values<float>((*out)[0].tensor());
      ASSERT_EQ(y.size(), x.size());
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 1031; j += 103)
          EXPECT_EQ(y[static_cast<size_t>(i * 1031 + j)], expected(b, i, j));
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// y = x + ((float(q) * 2) + 1), from an int32 initializer: Cast, Mul and Add
// fold; with `quantized`, y = x + DequantizeLinear(QuantizeLinear(w)) instead.
pb::GraphProto FoldedChainGraph(bool quantized) {
  GraphBuilder g("g");
  g.Input("x", pb::kFloat, std::vector<int64_t>{2});
  if (quantized) {
    g.Initializer(RawFloatTensor("w", {2}, 1.0f))
        .Initializer(RawFloatTensor("scale", {}, 0.5f))
        .Node("QuantizeLinear", {"w", "scale"}, {"q"}, {}, "quantize")
        .Node("DequantizeLinear", {"q", "scale"}, {"c"}, {}, "dequantize")
        .Node("Add", {"x", "c"}, {"y"}, {}, "add");
  } else {
    pb::TensorProto q;
    q.name = "q";
    q.data_type = pb::kInt32;
    q.dims = {2};
    q.int32_data = {3, 4};
    g.Initializer(q)
        .Initializer(RawFloatTensor("two", {}, 2.0f))
        .Initializer(RawFloatTensor("one", {}, 1.0f))
        .Node("Cast", {"q"}, {"c"}, {AttrInt("to", pb::kFloat)}, "cast")
        .Node("Mul", {"c", "two"}, {"m"}, {}, "scale")
        .Node("Add", {"m", "one"}, {"w"}, {}, "shift")
        .Node("Add", {"x", "w"}, {"y"}, {}, "add");
  }
  g.Output("y");
  return g.Build();
}

TEST(SessionFoldTest, AFoldedChainKeepsOnlyWhatRunsRead) {
  for (runner::Backend backend : {runner::Backend::kReference, runner::Backend::kCpu}) {
    for (bool observed : {false, true}) {
      std::vector<std::string> seen;
      runner::SessionOptions options;
      options.backend = backend;
      if (observed) {
        options.observer = [&](const ir::Value& v, const runner::RtValue&) {
          seen.push_back(v.name());
          return absl::OkStatus();
        };
      }
      auto session = Open(FoldedChainGraph(false), options);
      ASSERT_TRUE(session.ok()) << session.status();
      // Cast's and Mul's results only fed folded nodes: dropped unless observed.
      EXPECT_EQ((*session)->held_folded_values(), observed ? 3 : 1);
      auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(Floats({2}, {10, 20}))}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Values<float>((*out)[0].tensor()), (std::vector<float>{17.0f, 29.0f}));
      if (observed) {
        EXPECT_EQ(seen, (std::vector<std::string>{"c", "m", "w", "y"}));
      }
    }
  }
}

TEST(SessionFoldTest, AFoldedValueADequantizeLinearReadsIsKept) {
  // Quantized chains read a DequantizeLinear's inputs in its place.
  runner::SessionOptions options;
  options.backend = runner::Backend::kCpu;
  auto session = Open(FoldedChainGraph(true), options);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->held_folded_values(), 2);
  auto out = (*session)->Run({{"x", runner::RtValue::FromTensor(Floats({2}, {10, 20}))}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0].tensor()), (std::vector<float>{11.0f, 22.0f}));
}

}  // namespace
}  // namespace onnxkit::testing
