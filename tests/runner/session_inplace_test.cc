// Computing in place: a cpu kernel may write its output over an input that
// is used for the last time and whose buffer nothing else holds; values
// still needed, fed by the caller, or read twice by the node are never
// overwritten.
#include <limits>
#include <map>
#include <memory>
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

struct Observed {
  std::vector<runner::Tensor> outputs;
  std::map<std::string, const void*> data;  // value name -> its buffer when computed
};

Observed RunObserved(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds) {
  Observed result;
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, 18);
  runner::SessionOptions options;
  options.backend = backend;
  options.observer = [&](const ir::Value& v, const runner::RtValue& value) {
    if (value.is_tensor()) result.data[v.name()] = value.tensor().raw();
    return absl::OkStatus();
  };
  auto session = runner::Session::Create(std::move(loaded), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return result;
  std::vector<std::pair<std::string, runner::RtValue>> in;
  for (const auto& [name, t] : feeds) in.emplace_back(name, runner::RtValue::FromTensor(t));
  auto out = (*session)->Run(std::move(in));
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return result;
  for (const runner::RtValue& v : *out) result.outputs.push_back(v.tensor());
  return result;
}

TEST(SessionInPlaceTest, DyingValuesAreOverwrittenOthersAreNot) {
  GraphBuilder g("g");
  g.Input("x")
      .Input("z")
      .Node("Sigmoid", {"x"}, {"s"})
      .Node("Tanh", {"s"}, {"t"})       // s dies here: t takes its buffer
      .Node("Add", {"t", "z"}, {"u"})   // t dies: u takes it
      .Node("Erf", {"u"}, {"e"})        // and so on
      .Node("Neg", {"e"}, {"n"})        // e is still needed below: n is new memory
      .Node("Sum", {"n", "e"}, {"m"})   // n dies: m takes it
      .Node("Abs", {"x"}, {"a"})        // x was fed: never overwritten
      .Node("Add", {"a", "a"}, {"aa"})  // a read twice: not overwritten
      .Node("Mul", {"m", "aa"}, {"y"})
      .Output("y");
  Feeds feeds = {{"x", RandomFloats({4, 1000}, 1)}, {"z", RandomFloats({4, 1000}, 2)}};
  Observed ref = RunObserved(g.Build(), runner::Backend::kReference, feeds);
  Observed cpu = RunObserved(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_EQ(ref.outputs.size(), 1u);
  ASSERT_EQ(cpu.outputs.size(), 1u);
  ExpectTensorsClose(ref.outputs[0], cpu.outputs[0], 1e-6, 1e-5, "y");
  EXPECT_EQ(cpu.data["t"], cpu.data["s"]);
  EXPECT_EQ(cpu.data["u"], cpu.data["t"]);
  EXPECT_EQ(cpu.data["e"], cpu.data["u"]);
  EXPECT_NE(cpu.data["n"], cpu.data["e"]);
  EXPECT_EQ(cpu.data["m"], cpu.data["n"]);
  EXPECT_NE(cpu.data["a"], feeds[0].second.raw());
  EXPECT_NE(cpu.data["aa"], cpu.data["a"]);
  // The fed tensors are unchanged.
  ExpectTensorsClose(RandomFloats({4, 1000}, 1), feeds[0].second, 0, 0, "x");
  ExpectTensorsClose(RandomFloats({4, 1000}, 2), feeds[1].second, 0, 0, "z");
}

TEST(SessionInPlaceTest, KernelsThatReadTheirInputAfterwardsUseNewMemory) {
  GraphBuilder g("g");
  g.Input("x")
      .Input("b")
      .Node("Sigmoid", {"x"}, {"s"})
      .Node("Relu", {"s"}, {"r"})      // relu copies NaNs from its input afterwards: new memory
      .Node("Add", {"b", "r"}, {"y"})  // b [2] broadcasts against r [4, 2]
      .Output("y");
  Feeds feeds = {{"x", Floats({4, 2}, {1, -1, 0, 2, -2, 3, -3, 0.5f})}, {"b", Floats({2}, {1, 2})}};
  feeds[0].second.mutable_data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Observed ref = RunObserved(g.Build(), runner::Backend::kReference, feeds);
  Observed cpu = RunObserved(g.Build(), runner::Backend::kCpu, feeds);
  ASSERT_EQ(cpu.outputs.size(), 1u);
  ExpectTensorsClose(ref.outputs[0], cpu.outputs[0], 1e-6, 1e-5, "y");
  EXPECT_NE(cpu.data["r"], cpu.data["s"]);
}

TEST(SessionInPlaceTest, WhatKernelsDeriveFromAValueStaysWithThatValueObject) {
  // What a kernel derived from a value (a copy in another layout) is for
  // the readers of that value object in the run: a copy of the value (a
  // view another node outputs, a fed tensor the caller keeps) starts
  // without it; moving keeps it; changing the tensor drops it.
  static constexpr char kKind = 0;
  runner::RtValue v = runner::RtValue::FromTensor(RandomFloats({2, 3}, 1));
  v.AddDerived(std::make_shared<const runner::RtValue::Derived>(&kKind));
  ASSERT_EQ(v.derived().size(), 1u);
  EXPECT_EQ(v.derived()[0]->kind(), &kKind);
  runner::RtValue copy = v;
  EXPECT_TRUE(copy.derived().empty());
  EXPECT_EQ(copy.tensor().raw(), v.tensor().raw());
  runner::RtValue assigned;
  assigned = v;
  EXPECT_TRUE(assigned.derived().empty());
  runner::RtValue moved = std::move(v);
  EXPECT_EQ(moved.derived().size(), 1u);
  moved.mutable_tensor();
  EXPECT_TRUE(moved.derived().empty());
}

}  // namespace
}  // namespace onnxkit::testing
