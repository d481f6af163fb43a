// Constant folding in the session: nodes whose inputs are all constant run
// once at creation; overridable initializers (also graph inputs), random ops
// and failing nodes are left to Run.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

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

}  // namespace
}  // namespace onnxkit::testing
