// Computing in place: a cpu kernel may write its output over an input that
// is used for the last time and whose buffer nothing else holds; values
// still needed, fed by the caller, or read twice by the node are never
// overwritten. The inputs of a batch-1 Concat are written where its result
// holds them, from the second run with the same shapes on.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
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

// Runs `graph` `runs.size()` times in one session of `backend`, with the
// feeds of each run; per run, the outputs and where each value was computed
// (with `observe`: else the plan fuses and `data` stays empty), and the
// Concat inputs the session wrote in place.
struct Runs {
  std::vector<Observed> runs;
  std::vector<int64_t> joined;
};
Runs RunRepeatedly(const pb::GraphProto& graph, runner::Backend backend, const std::vector<Feeds>& runs,
                   bool observe) {
  Runs result;
  result.runs.resize(runs.size());
  size_t at = 0;
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, 18);
  runner::SessionOptions options;
  options.backend = backend;
  if (observe) {
    options.observer = [&](const ir::Value& v, const runner::RtValue& value) {
      if (value.is_tensor()) result.runs[at].data[v.name()] = value.tensor().raw();
      return absl::OkStatus();
    };
  }
  auto session = runner::Session::Create(std::move(loaded), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return result;
  for (at = 0; at < runs.size(); ++at) {
    std::vector<std::pair<std::string, runner::RtValue>> in;
    for (const auto& [name, t] : runs[at]) in.emplace_back(name, runner::RtValue::FromTensor(t));
    auto out = (*session)->Run(std::move(in));
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return result;
    for (const runner::RtValue& v : *out) result.runs[at].outputs.push_back(v.tensor());
    result.joined.push_back((*session)->last_run_joined_inputs());
  }
  return result;
}

// One run of `graph` on `backend`, observed.
Observed RunObserved(const pb::GraphProto& graph, runner::Backend backend, const Feeds& feeds) {
  Runs runs = RunRepeatedly(graph, backend, {feeds}, /*observe=*/true);
  return runs.runs.empty() ? Observed() : std::move(runs.runs[0]);
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

TEST(SessionInPlaceTest, FreedLargeBuffersAreTakenAgain) {
  // Runs of a model with a large activation, as a benchmark makes them: the
  // input is held throughout, and each run's result is freed once the next
  // run has made its own. The results take turns in the same two blocks
  // instead of new pages being faulted in and zeroed every run (small
  // allocations between them, as a run makes, keep the heap from merging
  // freed blocks).
  constexpr size_t kBytes = (size_t{20} << 20) + 12345;
  std::shared_ptr<runner::Buffer> input = runner::Buffer::Allocate(kBytes, /*zero_fill=*/false);
  ASSERT_NE(input, nullptr);
  std::shared_ptr<runner::Buffer> previous;
  std::vector<std::shared_ptr<runner::Buffer>> small;
  std::set<void*> places;
  for (int run = 0; run < 8; ++run) {
    std::shared_ptr<runner::Buffer> result = runner::Buffer::Allocate(kBytes, /*zero_fill=*/run % 2 == 0);
    ASSERT_NE(result, nullptr);
    EXPECT_EQ(result->size(), kBytes);
    if (run % 2 == 0) {  // asked zero-filled, a reused block is zeroed
      const char* bytes = static_cast<const char*>(result->data());
      EXPECT_TRUE(std::all_of(bytes, bytes + kBytes, [](char c) { return c == 0; })) << "run " << run;
    }
    std::memset(result->data(), 7, kBytes);
    places.insert(result->data());
    small.push_back(runner::Buffer::Allocate(4096 * (run + 1), /*zero_fill=*/false));
    previous = std::move(result);
  }
  EXPECT_LE(places.size(), 2u);
}

TEST(SessionInPlaceTest, FreedSmallBuffersAreTakenAgainByTheirThread) {
  // A small buffer freed is the next one of its size class this thread
  // allocates, zero-filled when asked, 64-byte aligned; the live-bytes count
  // does not hold kept blocks; other threads free theirs when they end.
  const int64_t live = runner::LiveTensorBytes();
  void* first = nullptr;
  {
    std::shared_ptr<runner::Buffer> b = runner::Buffer::Allocate(200, /*zero_fill=*/false);
    ASSERT_NE(b, nullptr);
    first = b->data();
    std::memset(b->data(), 7, 200);
  }
  EXPECT_EQ(runner::LiveTensorBytes(), live);
  std::shared_ptr<runner::Buffer> again = runner::Buffer::Allocate(250, /*zero_fill=*/true);  // 256 too
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->data()) % 64, 0u);
  const char* bytes = static_cast<const char*>(again->data());
  EXPECT_TRUE(std::all_of(bytes, bytes + 250, [](char c) { return c == 0; }));
  std::shared_ptr<runner::Buffer> other = runner::Buffer::Allocate(1000, /*zero_fill=*/false);
  EXPECT_NE(other->data(), first);
  // Made by another thread, freed here after it ended (and the reverse).
  std::shared_ptr<runner::Buffer> from_thread;
  std::thread t([&] {
    from_thread = runner::Buffer::Allocate(300, false);
    std::shared_ptr<runner::Buffer> dropped = runner::Buffer::Allocate(300, false);
    other.reset();
  });
  t.join();
  ASSERT_NE(from_thread, nullptr);
  from_thread.reset();
  again.reset();
  EXPECT_EQ(runner::LiveTensorBytes(), live);
}

const char* At(const void* base, size_t bytes) { return static_cast<const char*>(base) + bytes; }

TEST(SessionInPlaceTest, ConcatInputsAreWrittenWhereTheResultHoldsThem) {
  GraphBuilder g("g");
  g.Input("x")
      .Input("v")
      .Node("Sigmoid", {"x"}, {"a"})
      .Node("Tanh", {"x"}, {"b"})
      .Node("Neg", {"x"}, {"c"})
      // v, fed, is copied; b is read again after the Concat.
      .Node("Concat", {"a", "b", "c", "v"}, {"y"}, {AttrInt("axis", 1)})
      // y dies here, but b still holds its buffer: Exp may not take it.
      .Node("Exp", {"y"}, {"e"})
      .Node("Abs", {"b"}, {"w"})
      // Along the last axis of a [1, 8, h, w] result: not contiguous ranges.
      .Node("Sin", {"x"}, {"s"})
      .Node("Cos", {"x"}, {"k"})
      .Node("Concat", {"s", "k"}, {"z"}, {AttrInt("axis", 3)})
      .Output("e")
      .Output("w")
      .Output("z");
  const int64_t kPart = 8 * 16 * 16 * 4;  // bytes of a, b, c at [1, 8, 16, 16]
  auto feeds = [](std::vector<int64_t> x, int64_t v_channels, uint32_t seed) {
    std::vector<int64_t> v = x;
    v[1] = v_channels;
    return Feeds{{"x", RandomFloats(x, seed)}, {"v", RandomFloats(v, seed + 100)}};
  };
  std::vector<Feeds> runs = {
      feeds({1, 8, 16, 16}, 8, 1),
      feeds({1, 8, 16, 16}, 8, 2),
      // The inputs made have their planned shapes, but the result has
      // another: it is not the buffer they were written in.
      feeds({1, 8, 16, 16}, 4, 3),
      feeds({1, 8, 20, 16}, 8, 4),  // new shapes: learned again
      feeds({1, 8, 20, 16}, 8, 5),
      feeds({2, 8, 20, 16}, 8, 6),  // batch 2: ranges not contiguous
      feeds({1, 2, 4, 4}, 2, 7),    // too small to be worth it
      feeds({1, 2, 4, 4}, 2, 8),
  };
  Runs ref = RunRepeatedly(g.Build(), runner::Backend::kReference, runs, true);
  Runs cpu = RunRepeatedly(g.Build(), runner::Backend::kCpu, runs, true);
  ASSERT_EQ(ref.runs.size(), runs.size());
  ASSERT_EQ(cpu.joined.size(), runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE("run " + std::to_string(r));
    ASSERT_EQ(cpu.runs[r].outputs.size(), 3u);
    for (size_t o = 0; o < 3; ++o)
      ExpectTensorsClose(ref.runs[r].outputs[o], cpu.runs[r].outputs[o], 1e-6, 1e-5, "output");
    std::map<std::string, const void*>& data = cpu.runs[r].data;
    const bool placed = r == 1 || r == 4;
    EXPECT_EQ(cpu.joined[r], placed || r == 2 ? 3 : 0);
    // The reference backend plans no joins.
    EXPECT_EQ(ref.joined[r], 0);
    const size_t part = static_cast<size_t>(r < 3 ? kPart : kPart * 20 / 16);
    EXPECT_EQ(data["a"] == data["y"], placed);
    EXPECT_EQ(data["b"] == At(data["y"], part), placed);
    EXPECT_EQ(data["c"] == At(data["y"], 2 * part), placed);
    EXPECT_NE(data["v"], At(data["y"], 3 * part));
    EXPECT_NE(data["e"], data["y"]);
    EXPECT_NE(data["s"], data["z"]);
  }
}

TEST(SessionInPlaceTest, NestedConcatsShareTheOutermostResult) {
  // DenseNet's growing features: each Concat appends one more input to the
  // previous one's result. From the second run on, every input and every
  // inner result is written where the outermost result holds it; the inner
  // results stay intact for their later readers.
  GraphBuilder g("g");
  g.Input("x")
      .Node("Sigmoid", {"x"}, {"a"})
      .Node("Tanh", {"x"}, {"f1"})
      .Node("Concat", {"a", "f1"}, {"c1"}, {AttrInt("axis", 1)})
      .Node("Exp", {"c1"}, {"g1"})
      .Node("Neg", {"x"}, {"f2"})
      .Node("Concat", {"c1", "f2"}, {"c2"}, {AttrInt("axis", 1)})
      .Node("Cos", {"x"}, {"f3"})
      .Node("Concat", {"c2", "f3"}, {"c3"}, {AttrInt("axis", 1)})
      .Node("Sin", {"c1"}, {"h1"})  // c1 read after both outer Concats
      .Node("Abs", {"c2"}, {"h2"})
      // An inner result that is a graph output keeps a buffer of its own.
      .Node("Concat", {"f1", "f2"}, {"d1"}, {AttrInt("axis", 1)})
      .Node("Concat", {"d1", "f3"}, {"d2"}, {AttrInt("axis", 1)})
      // Nested as the second input.
      .Node("Exp", {"x"}, {"q1"})
      .Node("Erf", {"x"}, {"q2"})
      .Node("Concat", {"q1", "q2"}, {"e1"}, {AttrInt("axis", 1)})
      .Node("Abs", {"x"}, {"f4"})
      .Node("Concat", {"f4", "e1"}, {"e2"}, {AttrInt("axis", 1)})
      .Output("e2")
      .Output("c3")
      .Output("g1")
      .Output("h1")
      .Output("h2")
      .Output("d1")
      .Output("d2");
  std::vector<Feeds> runs;
  const std::vector<std::vector<int64_t>> shapes = {{1, 8, 16, 16}, {1, 8, 16, 16}, {1, 8, 20, 16},
                                                    {1, 8, 20, 16}, {2, 8, 16, 16}, {1, 8, 16, 16},
                                                    {1, 8, 16, 16}};
  for (size_t r = 0; r < shapes.size(); ++r)
    runs.push_back({{"x", RandomFloats(shapes[r], static_cast<uint32_t>(r))}});
  Runs ref = RunRepeatedly(g.Build(), runner::Backend::kReference, runs, true);
  Runs cpu = RunRepeatedly(g.Build(), runner::Backend::kCpu, runs, true);
  ASSERT_EQ(cpu.joined.size(), runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE("run " + std::to_string(r));
    ASSERT_EQ(cpu.runs[r].outputs.size(), 7u);
    for (size_t o = 0; o < 7; ++o)
      ExpectTensorsClose(ref.runs[r].outputs[o], cpu.runs[r].outputs[o], 1e-6, 1e-5, "output");
    std::map<std::string, const void*>& data = cpu.runs[r].data;
    // Runs 0, 2, 4 and 5 have shapes other than the run before (4: batch 2,
    // not contiguous ranges).
    const bool placed = r == 1 || r == 3 || r == 6;
    // a, f1 (c1's); f2 (c2's); f3 (c3's); f1 and f2 again can't be: each
    // value has one place. d2's f3 neither. d1 is an output: not nested.
    // q1, q2 and f4 (e2's).
    EXPECT_EQ(cpu.joined[r], placed ? 7 : 0);
    const size_t part = static_cast<size_t>(shapes[r][1] * shapes[r][2] * shapes[r][3] * 4);
    EXPECT_EQ(data["a"] == data["c3"], placed);
    EXPECT_EQ(data["c1"] == data["c3"], placed);
    EXPECT_EQ(data["c2"] == data["c3"], placed);
    EXPECT_EQ(data["f1"] == At(data["c3"], part), placed);
    EXPECT_EQ(data["f2"] == At(data["c3"], 2 * part), placed);
    EXPECT_EQ(data["f3"] == At(data["c3"], 3 * part), placed);
    EXPECT_NE(data["d1"], data["d2"]);
    EXPECT_EQ(data["f4"] == data["e2"], placed);
    EXPECT_EQ(data["e1"] == At(data["e2"], part), placed);
    EXPECT_EQ(data["q1"] == At(data["e2"], part), placed);
    EXPECT_EQ(data["q2"] == At(data["e2"], 2 * part), placed);
  }
}

TEST(SessionInPlaceTest, FusedBranchesAndBodiesWriteTheirConcatInputsInPlace) {
  // Two Conv + Relu branches (fused chains) and a Sigmoid joined by a Concat,
  // in the main graph and in both branches of an If.
  auto branches = [](GraphBuilder& b, const std::string& p) {
    b.Node("Conv", {"x", "w1"}, {p + "c1"}, {AttrInts("pads", {1, 1, 1, 1})})
        .Node("Relu", {p + "c1"}, {p + "r1"})
        .Node("Conv", {"x", "w2"}, {p + "c2"})
        .Node("Relu", {p + "c2"}, {p + "r2"})
        .Node("Sigmoid", {"x"}, {p + "s"})
        .Node("Concat", {p + "r1", p + "r2", p + "s"}, {p + "y"}, {AttrInt("axis", 1)});
  };
  GraphBuilder then_g("then_g"), else_g("else_g");
  branches(then_g, "t");
  then_g.Node("Neg", {"ty"}, {"tn"}).Output("tn");
  branches(else_g, "e");
  else_g.Node("Abs", {"ey"}, {"en"}).Output("en");
  GraphBuilder g("g");
  g.Input("x")
      .Input("cond", pb::kBool, {})
      .Initializer(InitializerFrom("w1", RandomFloats({8, 4, 3, 3}, 11)))
      .Initializer(InitializerFrom("w2", RandomFloats({8, 4, 1, 1}, 12)));
  branches(g, "m");
  g.Node("If", {"cond"}, {"i"},
         {AttrGraph("then_branch", then_g.Build()), AttrGraph("else_branch", else_g.Build())})
      .Output("my")
      .Output("i");
  bool yes = true, no = false;
  auto cond = [](bool v) {
    runner::Tensor t = *runner::Tensor::AllocateUninitialized(pb::kBool, {});
    *t.mutable_data<bool>() = v;
    return t;
  };
  std::vector<Feeds> runs;
  for (uint32_t r = 0; r < 4; ++r)
    runs.push_back({{"x", RandomFloats({1, 4, 16, 16}, r)}, {"cond", cond(r % 2 == 0 ? yes : no)}});
  Runs ref = RunRepeatedly(g.Build(), runner::Backend::kReference, runs, false);
  Runs cpu = RunRepeatedly(g.Build(), runner::Backend::kCpu, runs, false);
  ASSERT_EQ(cpu.joined.size(), runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE("run " + std::to_string(r));
    ASSERT_EQ(cpu.runs[r].outputs.size(), 2u);
    for (size_t o = 0; o < 2; ++o)
      ExpectTensorsClose(ref.runs[r].outputs[o], cpu.runs[r].outputs[o], 1e-5, 1e-4, "output");
  }
  // Run 0 learns the main graph's join and the then-branch's, run 1 the
  // else-branch's; from then on all three inputs of each are placed.
  EXPECT_EQ(cpu.joined[0], 0);
  EXPECT_EQ(cpu.joined[1], 3);
  EXPECT_EQ(cpu.joined[2], 6);
  EXPECT_EQ(cpu.joined[3], 6);
}

}  // namespace
}  // namespace onnxkit::testing
