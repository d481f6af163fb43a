// The cpu backend's RNN, GRU and LSTM kernel against the reference kernels:
// every cell, direction and layout, batches with ragged sequence lengths,
// initial states, biases, clip, peepholes, input_forget, GRU's
// linear_before_reset, activations with parameters, outputs left out,
// NaN and infinities, repeated runs with new shapes, and the fallbacks.
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

int Gates(const std::string& op) { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }

struct Layer {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  int64_t seq = 5, batch = 1, input = 7, hidden = 6;
  bool bias = true, initial = true, peepholes = false, ragged = false;
  bool constant_weights = false;  // W and R as initializers (packed once)
  std::vector<pb::AttributeProto> extra;
  std::vector<std::string> outputs = {"y", "yh", "yc"};
};

// The graph of one recurrent node whose inputs are all graph inputs, and
// seeded feeds for them.
std::pair<pb::GraphProto, Feeds> Build(const Layer& l, uint32_t seed) {
  int64_t nd = l.direction == "bidirectional" ? 2 : 1, g = Gates(l.op);
  GraphBuilder b("g");
  Feeds feeds;
  std::vector<std::string> inputs = {"x", "w", "r"};
  std::vector<int64_t> xs = l.layout == 1 ? std::vector<int64_t>{l.batch, l.seq, l.input}
                                          : std::vector<int64_t>{l.seq, l.batch, l.input};
  std::vector<int64_t> ss = l.layout == 1 ? std::vector<int64_t>{l.batch, nd, l.hidden}
                                          : std::vector<int64_t>{nd, l.batch, l.hidden};
  feeds.push_back({"x", RandomFloats(xs, seed, -2.f, 2.f)});
  feeds.push_back({"w", RandomFloats({nd, g * l.hidden, l.input}, seed + 1, -0.6f, 0.6f)});
  feeds.push_back({"r", RandomFloats({nd, g * l.hidden, l.hidden}, seed + 2, -0.6f, 0.6f)});
  inputs.push_back(l.bias ? "b" : "");
  if (l.bias) feeds.push_back({"b", RandomFloats({nd, 2 * g * l.hidden}, seed + 3)});
  inputs.push_back(l.ragged ? "lens" : "");
  if (l.ragged) {
    std::vector<int32_t> lens;
    for (int64_t i = 0; i < l.batch; ++i) lens.push_back(static_cast<int32_t>((i * 3 + 1) % (l.seq + 1)));
    feeds.push_back({"lens", Int32s({l.batch}, lens)});
  }
  inputs.push_back(l.initial ? "h0" : "");
  if (l.initial) feeds.push_back({"h0", RandomFloats(ss, seed + 4)});
  if (l.op == "LSTM") {
    inputs.push_back(l.initial ? "c0" : "");
    if (l.initial) feeds.push_back({"c0", RandomFloats(ss, seed + 5)});
    inputs.push_back(l.peepholes ? "p" : "");
    if (l.peepholes) feeds.push_back({"p", RandomFloats({nd, 3 * l.hidden}, seed + 6)});
  }
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  if (l.constant_weights) {
    for (size_t i = 0; i < feeds.size();) {
      if (feeds[i].first == "w" || feeds[i].first == "r") {
        b.Initializer(InitializerFrom(feeds[i].first, feeds[i].second));
        feeds.erase(feeds.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (const std::string& in : inputs) {
    if (!in.empty() && !(l.constant_weights && (in == "w" || in == "r"))) {
      b.Input(in, in == "lens" ? pb::kInt32 : pb::kFloat);
    }
  }
  std::vector<pb::AttributeProto> attrs = {AttrInt("hidden_size", l.hidden),
                                           AttrString("direction", l.direction), AttrInt("layout", l.layout)};
  attrs.insert(attrs.end(), l.extra.begin(), l.extra.end());
  std::vector<std::string> outs = l.outputs;
  if (l.op != "LSTM") outs.resize(std::min<size_t>(outs.size(), 2));
  b.Node(l.op, inputs, outs, attrs);
  for (const std::string& o : outs) {
    if (!o.empty()) b.Output(o);
  }
  return {b.Build(), feeds};
}

TEST(CpuRnnTest, EveryCellDirectionAndLayoutMatchesReference) {
  uint32_t seed = 1;
  for (std::string op : {"RNN", "GRU", "LSTM"}) {
    for (std::string direction : {"forward", "reverse", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        for (int64_t batch : {1, 3}) {
          for (bool ragged : {false, true}) {
            Layer l;
            l.op = op, l.direction = direction, l.layout = layout, l.batch = batch, l.ragged = ragged;
            l.constant_weights = seed % 4 < 2;
            l.bias = seed % 2 == 0;
            l.initial = seed % 3 != 0;
            SCOPED_TRACE(op + " " + direction + " layout " + std::to_string(layout) + " batch " +
                         std::to_string(batch) + (ragged ? " ragged" : "") +
                         (l.constant_weights ? " constant weights" : ""));
            auto [graph, feeds] = Build(l, seed++);
            ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
          }
        }
      }
    }
  }
}

TEST(CpuRnnTest, GruLinearBeforeResetAndClipMatchReference) {
  uint32_t seed = 100;
  for (int64_t lbr : {0, 1}) {
    for (bool clip : {false, true}) {
      Layer l;
      l.op = "GRU", l.direction = "bidirectional", l.batch = 2, l.ragged = true, l.seq = 7;
      l.constant_weights = clip;
      l.extra = {AttrInt("linear_before_reset", lbr)};
      if (clip) l.extra.push_back(AttrFloat("clip", 0.5f));
      SCOPED_TRACE("linear_before_reset " + std::to_string(lbr) + (clip ? " clip" : ""));
      auto [graph, feeds] = Build(l, seed++);
      ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
    }
  }
}

TEST(CpuRnnTest, LstmPeepholesInputForgetClipAndActivationsMatchReference) {
  uint32_t seed = 200;
  for (bool input_forget : {false, true}) {
    for (bool clip : {false, true}) {
      Layer l;
      l.direction = "bidirectional", l.batch = 2, l.peepholes = true, l.seq = 6;
      l.constant_weights = input_forget;
      l.extra = {AttrInt("input_forget", input_forget ? 1 : 0)};
      if (clip) l.extra.push_back(AttrFloat("clip", 0.7f));
      SCOPED_TRACE(std::string(input_forget ? "input_forget" : "") + (clip ? " clip" : ""));
      auto [graph, feeds] = Build(l, seed++);
      ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
    }
  }
  // Activations with alpha and beta, different per direction.
  Layer l;
  l.direction = "bidirectional", l.peepholes = true;
  l.extra = {
      AttrStrings("activations", {"HardSigmoid", "LeakyRelu", "ScaledTanh", "Sigmoid", "Softsign", "Elu"}),
      AttrFloats("activation_alpha", {0.3f, 0.05f, 0.9f, 1.1f}), AttrFloats("activation_beta", {0.4f, 1.2f})};
  auto [graph, feeds] = Build(l, 300);
  ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
  Layer rnn;
  rnn.op = "RNN", rnn.extra = {AttrStrings("activations", {"Relu"})};
  auto [rgraph, rfeeds] = Build(rnn, 301);
  ExpectCpuMatchesReference(rgraph, rfeeds, 14, 1e-5, 1e-4);
}

TEST(CpuRnnTest, FusedCellsWithClipAndWideLayersMatchReference) {
  // LSTM without peepholes and GRU with linear_before_reset, default
  // activations: one pass over the units per step. Hidden sizes that fill
  // whole vectors and leave tails, with and without clip and biases.
  uint32_t seed = 250;
  for (std::string op : {"LSTM", "GRU"}) {
    for (int64_t hidden : {16, 21, 40}) {
      for (bool clip : {false, true}) {
        Layer l;
        l.op = op, l.direction = "bidirectional", l.batch = 3, l.seq = 9, l.hidden = hidden;
        l.ragged = hidden == 21, l.bias = !clip || hidden == 40, l.constant_weights = hidden != 16;
        if (op == "GRU") l.extra.push_back(AttrInt("linear_before_reset", 1));
        if (clip) l.extra.push_back(AttrFloat("clip", 0.4f));
        SCOPED_TRACE(op + " hidden " + std::to_string(hidden) + (clip ? " clip" : ""));
        auto [graph, feeds] = Build(l, seed++);
        ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
      }
    }
  }
}

TEST(CpuRnnTest, OutputsLeftOutAndHiddenSizeFromR) {
  for (std::vector<std::string> outs :
       std::vector<std::vector<std::string>>{{"", "yh"}, {"y"}, {"", "", "yc"}}) {
    Layer l;
    l.direction = "reverse", l.batch = 2, l.outputs = outs;
    auto [graph, feeds] = Build(l, 400);
    ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
  }
  // No hidden_size attribute: R gives it.
  Layer l;
  l.op = "GRU";
  auto [graph, feeds] = Build(l, 401);
  pb::AttributeProto& first = graph.node[0].attribute[0];
  ASSERT_EQ(first.name, "hidden_size");
  graph.node[0].attribute.erase(graph.node[0].attribute.begin());
  ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
}

TEST(CpuRnnTest, LongSequencesRunInFloat32) {
  // A long sequence and a wide layer: the float32 kernel agrees with the
  // double-precision reference within float rounding, and is not the
  // reference itself (its values differ in the last bits).
  Layer l;
  l.seq = 64, l.batch = 4, l.input = 40, l.hidden = 48, l.direction = "bidirectional";
  l.constant_weights = true;
  auto [graph, feeds] = Build(l, 500);
  ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
  auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, 14);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, 14);
  ASSERT_TRUE(ref.ok() && cpu.ok());
  const runner::Tensor& a = (*ref)[0].tensor();
  const runner::Tensor& b = (*cpu)[0].tensor();
  int64_t differ = 0;
  for (int64_t i = 0; i < a.size(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
  EXPECT_GT(differ, 0);
}

TEST(CpuRnnTest, NanAndInfinityPropagateAsInTheReference) {
  const float kInf = std::numeric_limits<float>::infinity();
  for (std::string op : {"RNN", "GRU", "LSTM"}) {
    // Unbounded activations (Relu) and the default ones (the fused cells
    // for GRU with linear_before_reset and LSTM), with and without clip.
    for (bool defaults : {false, true}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf}) {
        Layer l;
        l.op = op, l.batch = 2, l.seq = 4, l.direction = "bidirectional";
        l.constant_weights = std::isnan(bad);
        if (!defaults) {
          l.extra = {AttrStrings("activations", op == "RNN" ? std::vector<std::string>{"Relu"}
                                                : op == "GRU"
                                                    ? std::vector<std::string>{"Sigmoid", "Relu"}
                                                    : std::vector<std::string>{"Sigmoid", "Relu", "Relu"})};
        } else {
          if (op == "GRU") l.extra.push_back(AttrInt("linear_before_reset", 1));
          if (!(bad > 0)) l.extra.push_back(AttrFloat("clip", 3.f));  // NaN and -inf
        }
        auto [graph, feeds] = Build(l, 600);
        // One value of batch item 1 at time step 2.
        runner::Tensor& x = feeds[0].second;
        x.mutable_data<float>()[(2 * l.batch + 1) * l.input + 3] = bad;
        SCOPED_TRACE(op + (defaults ? " default activations " : " ") + std::to_string(bad));
        ExpectCpuMatchesReference(graph, feeds, 14, 1e-5, 1e-4);
      }
    }
  }
}

TEST(CpuRnnTest, BidirectionalLayersOnTwoThreads) {
  // Each direction on its own thread: the same results as the reference.
  uint32_t seed = 900;
  for (std::string op : {"RNN", "GRU", "LSTM"}) {
    for (bool constant : {false, true}) {
      Layer l;
      l.op = op, l.direction = "bidirectional", l.batch = 3, l.seq = 9, l.ragged = true, l.layout = seed % 2;
      l.input = 40, l.hidden = 48;  // over 16384 input elements: the session keeps both threads
      l.constant_weights = constant;
      SCOPED_TRACE(op + (constant ? " constant weights" : ""));
      auto [graph, feeds] = Build(l, seed++);
      auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, 14);
      auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, 14, /*threads=*/2);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ASSERT_EQ(ref->size(), cpu->size());
      for (size_t i = 0; i < ref->size(); ++i) {
        ExpectTensorsClose((*ref)[i].tensor(), (*cpu)[i].tensor(), 1e-5, 1e-4, "output " + std::to_string(i));
      }
    }
  }
}

TEST(CpuRnnTest, RepeatedRunsWithNewShapes) {
  Layer l;
  l.op = "GRU", l.ragged = true;
  std::vector<Feeds> runs;
  pb::GraphProto graph;
  for (int64_t batch : {1, 4, 2}) {
    l.batch = batch, l.seq = 3 + batch;
    auto [g, f] = Build(l, static_cast<uint32_t>(700 + batch));
    graph = g;
    runs.push_back(f);
  }
  ExpectRepeatedRunsMatch(graph, runs, 1e-4, 14);
}

TEST(CpuRnnTest, Opset7BadShapesAndEmptyInputsMatchReference) {
  // Opset 7 (no layout attribute) runs here too.
  Layer l;
  l.extra = {};
  auto [graph, feeds] = Build(l, 800);
  graph.node[0].attribute.pop_back();  // layout
  ExpectCpuMatchesReference(graph, feeds, 7, 1e-5, 1e-4);
  // W of the wrong shape: both backends fail the same way.
  auto [bad_graph, bad_feeds] = Build(l, 801);
  bad_feeds[1].second = RandomFloats({1, 4 * 6, 8}, 802);
  auto ref = RunGraphOn(runner::Backend::kReference, bad_graph, bad_feeds, 14);
  auto cpu = RunGraphOn(runner::Backend::kCpu, bad_graph, bad_feeds, 14);
  ASSERT_FALSE(ref.ok());
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ref.status().code(), cpu.status().code());
  // An empty batch and an empty sequence.
  Layer empty;
  empty.batch = 0;
  auto [eg, ef] = Build(empty, 803);
  ExpectCpuMatchesReference(eg, ef, 14);
  empty.batch = 1, empty.seq = 0;
  auto [sg, sf] = Build(empty, 804);
  ExpectCpuMatchesReference(sg, sf, 14);
}

}  // namespace
}  // namespace onnxkit::testing
