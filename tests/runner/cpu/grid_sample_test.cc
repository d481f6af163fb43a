// The cpu backend's GridSample kernel against the reference kernel: every
// mode, padding mode and align_corners, at opset 16 and 20, grids reaching
// past the image and holding NaN and infinities, images holding them,
// batches, one channel and many, 2 threads, and the cases that run on the
// reference kernel (5-D inputs at opset 20, double tensors).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/conv.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

pb::GraphProto GridSampleGraph(const std::string& mode, const std::string& padding, int64_t align) {
  GraphBuilder g("g");
  g.Input("x")
      .Input("grid")
      .Node("GridSample", {"x", "grid"}, {"y"},
            {AttrString("mode", mode), AttrString("padding_mode", padding), AttrInt("align_corners", align)})
      .Output("y");
  return g.Build();
}

TEST(CpuGridSampleTest, EveryModePaddingAndAlignmentMatchesReference) {
  uint32_t seed = 0;
  for (int64_t opset : {16, 20}) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      std::string m = mode;
      if (opset >= 20) m = m == "bilinear" ? "linear" : m == "bicubic" ? "cubic" : m;
      for (const char* padding : {"zeros", "border", "reflection"}) {
        for (int64_t align : {0, 1}) {
          SCOPED_TRACE(m + " " + padding + " align_corners " + std::to_string(align) + " opset " +
                       std::to_string(opset));
          // Grid points reaching up to 1.4 past the borders on both sides.
          const int64_t before = runner::cpu::CpuGridSampleRuns();
          ExpectCpuMatchesReference(GridSampleGraph(m, padding, align),
                                    {{"x", RandomFloats({2, 3, 5, 7}, ++seed)},
                                     {"grid", RandomFloats({2, 4, 6, 2}, ++seed, -1.4f, 1.4f)}},
                                    opset, 1e-5, 1e-4);
          EXPECT_EQ(runner::cpu::CpuGridSampleRuns(), before + 1);
        }
      }
    }
  }
}

TEST(CpuGridSampleTest, NonFiniteGridsAndImagesMatchReference) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      SCOPED_TRACE(std::string(mode) + " " + padding);
      runner::Tensor x = RandomFloats({1, 2, 4, 5}, 3);
      x.mutable_data<float>()[6] = kInf;
      x.mutable_data<float>()[13] = kNaN;
      x.mutable_data<float>()[27] = -kInf;
      runner::Tensor grid = RandomFloats({1, 3, 4, 2}, 4, -1.2f, 1.2f);
      float* g = grid.mutable_data<float>();
      g[0] = kNaN;
      g[3] = kInf;
      g[6] = -kInf;
      g[9] = 1e30f;
      g[12] = 1.0f;  // exactly on the border
      g[13] = -1.0f;
      ExpectCpuMatchesReference(GridSampleGraph(mode, padding, 0), {{"x", x}, {"grid", grid}}, 16, 1e-5, 1e-4);
    }
  }
}

TEST(CpuGridSampleTest, ManyPointsOnOneChannelAndManyChannelsAtTwoThreads) {
  // The correlation lookups of optical-flow models: thousands of images of
  // one channel; and feature maps of many channels sampled densely.
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{256, 1, 16, 16}, {2, 64, 24, 20}}) {
    const int64_t n = shape[0];
    pb::GraphProto graph = GridSampleGraph("bilinear", "zeros", 1);
    Feeds feeds = {{"x", RandomFloats(shape, 5)}, {"grid", RandomFloats({n, 9, 9, 2}, 6, -1.1f, 1.1f)}};
    auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, 16, 2);
    const int64_t before = runner::cpu::CpuGridSampleRuns();
    auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, 16, 2);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ(runner::cpu::CpuGridSampleRuns(), before + 1);
    ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, "y");
  }
}

TEST(CpuGridSampleTest, OtherRanksAndTypesRunOnTheReference) {
  const int64_t before = runner::cpu::CpuGridSampleRuns();
  // 5-D at opset 20.
  ExpectCpuMatchesReference(GridSampleGraph("linear", "zeros", 0),
                            {{"x", RandomFloats({1, 2, 3, 4, 5}, 7)},
                             {"grid", RandomFloats({1, 2, 3, 4, 3}, 8, -1.f, 1.f)}},
                            20, 1e-5, 1e-4);
  // Double.
  GraphBuilder g("g");
  g.Input("x", pb::kDouble)
      .Input("grid", pb::kDouble)
      .Node("GridSample", {"x", "grid"}, {"y"})
      .Output("y", pb::kDouble);
  ExpectCpuMatchesReference(g.Build(),
                            {{"x", MakeTensor<double>(pb::kDouble, {1, 1, 2, 2}, {1, 2, 3, 4})},
                             {"grid", MakeTensor<double>(pb::kDouble, {1, 1, 2, 2}, {-0.5, 0.25, 0.75, -1})}},
                            16, 1e-12, 1e-12);
  EXPECT_EQ(runner::cpu::CpuGridSampleRuns(), before);
}

}  // namespace
}  // namespace onnxkit::testing
