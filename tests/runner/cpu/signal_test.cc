// The cpu backend's DFT and STFT (fast transforms: radix 2 for powers of
// two, Bluestein's convolution for other lengths) against the reference's
// direct sums: forward, inverse, one-sided and its inverse, dft_length
// padding and truncation, complex input, axes, windows.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

struct DftCase {
  int64_t n;
  int64_t channels;  // 1 real, 2 complex
  int64_t length;    // dft_length, 0: none
  bool inverse, onesided;
};

TEST(CpuSignalTest, DftMatchesTheDirectSums) {
  const DftCase cases[] = {
      {1, 1, 0, false, false},  {2, 2, 0, false, false},   {7, 1, 0, false, true},   {8, 2, 0, true, false},
      {12, 2, 0, false, false}, {400, 1, 0, false, true},  {512, 2, 0, true, false}, {9, 2, 0, true, true},
      {16, 1, 20, false, true}, {30, 2, 17, false, false}, {5, 2, 3, true, false},
  };
  for (const DftCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "n " << c.n << " channels " << c.channels << " length " << c.length
                                      << " inverse " << c.inverse << " onesided " << c.onesided);
    for (int64_t opset : {17, 20}) {
      GraphBuilder g("g");
      g.Input("x", pb::kFloat, {{2, c.n, 3, c.channels}});
      std::vector<std::string> inputs = {"x", c.length > 0 ? "len" : ""};
      if (c.length > 0) g.Initializer(InitializerFrom("len", Int64Scalar(c.length)));
      std::vector<pb::AttributeProto> attrs = {AttrInt("inverse", c.inverse),
                                               AttrInt("onesided", c.onesided)};
      if (opset == 17) {
        attrs.push_back(AttrInt("axis", 1));
      } else {
        g.Initializer(InitializerFrom("axis", Int64Scalar(-3)));
        inputs.push_back("axis");
      }
      g.Node("DFT", inputs, {"y"}, attrs).Output("y", pb::kFloat);
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({2, c.n, 3, c.channels}, 1, -4, 4)}}, opset,
                                1e-4, 1e-5);
    }
  }
}

TEST(CpuSignalTest, StftMatchesTheDirectSums) {
  for (int64_t frame : {400, 512, 33}) {
    for (int64_t channels : {1, 2}) {
      for (bool onesided : {true, false}) {
        if (channels == 2 && onesided) continue;  // one-sided needs a real signal
        SCOPED_TRACE(::testing::Message() << "frame " << frame << " channels " << channels);
        pb::GraphProto g = GraphBuilder("g")
                               .Input("x", pb::kFloat, {{2, 1600, channels}})
                               .Input("w", pb::kFloat, {{frame}})
                               .Initializer(InitializerFrom("step", Int64Scalar(160)))
                               .Node("STFT", {"x", "step", "w"}, {"y"}, {AttrInt("onesided", onesided)})
                               .Output("y", pb::kFloat)
                               .Build();
        ExpectCpuMatchesReference(
            g, {{"x", RandomFloats({2, 1600, channels}, 2)}, {"w", RandomFloats({frame}, 3, 0, 1)}}, 17, 1e-4,
            1e-5);
      }
    }
  }
}

// The product form (real float32 frames of 16 to 1024 samples, not a power
// of two): no window with frame_length given, two-sided, one frame, frames
// at the signal's end; the basis follows a fed window that changes between
// runs; a NaN in the signal goes to the transforms and spreads as there.
TEST(CpuSignalTest, StftAsAProductMatchesTheDirectSums) {
  struct Case {
    int64_t length, frame, step;
    bool onesided, window;
  };
  const Case cases[] = {{100, 17, 7, true, false},
                        {400, 400, 1, true, true},
                        {1000, 1000, 3, false, false},
                        {333, 30, 30, false, true},
                        {1200, 601, 599, true, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "length " << c.length << " frame " << c.frame << " step " << c.step);
    GraphBuilder g("g");
    g.Input("x", pb::kFloat, {{2, c.length, 1}}).Initializer(InitializerFrom("step", Int64Scalar(c.step)));
    std::vector<std::string> inputs = {"x", "step"};
    if (c.window) {
      g.Input("w", pb::kFloat, {{c.frame}});
      inputs.push_back("w");
    } else {
      g.Initializer(InitializerFrom("n", Int64Scalar(c.frame)));
      inputs.insert(inputs.end(), {"", "n"});
    }
    g.Node("STFT", inputs, {"y"}, {AttrInt("onesided", c.onesided)}).Output("y", pb::kFloat);
    std::vector<Feeds> runs;
    for (uint32_t r = 0; r < 2; ++r) {
      Feeds feeds = {{"x", RandomFloats({2, c.length, 1}, 10 + r)}};
      if (c.window) feeds.push_back({"w", RandomFloats({c.frame}, 20 + r, 0, 1)});
      runs.push_back(feeds);
    }
    ExpectRepeatedRunsMatch(g.Build(), runs, 2e-4, 17);
  }
  runner::Tensor x = RandomFloats({1, 200, 1}, 30);
  x.mutable_data<float>()[57] = std::numeric_limits<float>::quiet_NaN();
  pb::GraphProto g = GraphBuilder("g")
                         .Input("x", pb::kFloat, {{1, 200, 1}})
                         .Initializer(InitializerFrom("step", Int64Scalar(20)))
                         .Initializer(InitializerFrom("n", Int64Scalar(40)))
                         .Node("STFT", {"x", "step", "", "n"}, {"y"})
                         .Output("y", pb::kFloat)
                         .Build();
  ExpectCpuMatchesReference(g, {{"x", x}}, 17, 1e-4, 1e-5);
}

}  // namespace
}  // namespace onnxkit::testing
