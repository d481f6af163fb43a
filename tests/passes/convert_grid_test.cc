// `onnxkit convert` taking GridSample below the opset that introduced it
// (16; 20 for 5-D inputs): the expansion into older ops reproduces the
// original on the reference backend for every mode, padding mode and
// align_corners, grids reaching past the image, non-finite grid values,
// and dims known only at run time.
#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using passes::convert::ConvertResult;
using ::testing::HasSubstr;

struct Case {
  std::string mode;
  std::string padding;
  int align;
};

pb::ModelProto GridModel(const Case& c, int64_t opset, const std::vector<int64_t>& x_dims,
                         const std::vector<int64_t>& grid_dims, int32_t elem = pb::kFloat) {
  return ModelFromGraph(GraphBuilder("g")
                            .Input("x", elem, x_dims)
                            .Input("grid", elem, grid_dims)
                            .Node("GridSample", {"x", "grid"}, {"y"},
                                  {AttrString("mode", c.mode), AttrString("padding_mode", c.padding),
                                   AttrInt("align_corners", c.align)})
                            .Output("y", elem)
                            .Build(),
                        opset, 8);
}

// A grid of `shape` in [-1.6, 1.6] (past the image on every side), with
// exact borders, pixel centres and non-finite values at fixed places.
runner::Tensor Grid(const std::vector<int64_t>& shape, uint32_t seed) {
  runner::Tensor t = RandomFloats(shape, seed, -1.6f, 1.6f);
  float* g = t.mutable_data<float>();
  const float special[] = {-1.f,
                           1.f,
                           0.f,
                           0.5f,
                           -0.5f,
                           std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           3.5f,
                           -7.25f};
  int64_t n = t.size();
  for (int64_t i = 0; i < 10 && i * 7 < n; ++i) g[i * 7] = special[i];
  return t;
}

void ExpectExpands(const pb::ModelProto& m, int64_t opset, const Feeds& feeds) {
  SCOPED_TRACE(opset);
  ConvertResult down = ConvertTo(m, opset);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "GridSample"), 0);
  EXPECT_GT(OpCount(down.model, "GatherElements"), 0);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, feeds, 2e-5, 2e-5);
}

TEST(ConvertGridTest, EveryModePaddingAndAlignmentExpandsBelow16) {
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int align : {0, 1}) {
        Case c{mode, padding, align};
        SCOPED_TRACE(c.mode + " " + c.padding + " " + std::to_string(align));
        pb::ModelProto m = GridModel(c, 16, {2, 3, 5, 4}, {2, 6, 7, 2});
        Feeds feeds = {{"x", RandomFloats({2, 3, 5, 4}, 1, -2, 2)}, {"grid", Grid({2, 6, 7, 2}, 2)}};
        for (int64_t opset : {15, 11}) ExpectExpands(m, opset, feeds);
      }
    }
  }
}

// Sizes unknown until run time, and images of one pixel (the reflection
// span is 0 with align_corners).
TEST(ConvertGridTest, RunTimeDimsAndOnePixelImages) {
  for (const char* padding : {"zeros", "border", "reflection"}) {
    for (int align : {0, 1}) {
      Case c{"bilinear", padding, align};
      SCOPED_TRACE(c.padding + " " + std::to_string(align));
      pb::ModelProto m = GridModel(c, 17, {-1, -1, -1, -1}, {-1, -1, -1, 2});
      ExpectExpands(m, 11, {{"x", RandomFloats({1, 2, 3, 6}, 3)}, {"grid", Grid({1, 4, 5, 2}, 4)}});
      ExpectExpands(m, 13, {{"x", RandomFloats({2, 1, 1, 1}, 5)}, {"grid", Grid({2, 3, 3, 2}, 6)}});
    }
  }
}

TEST(ConvertGridTest, VolumetricGridSampleExpandsBelow20) {
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    for (const char* padding : {"zeros", "reflection"}) {
      Case c{mode, padding, 0};
      SCOPED_TRACE(c.mode + " " + c.padding);
      pb::ModelProto m = GridModel(c, 20, {1, 2, 3, 4, 5}, {1, 2, 3, 2, 3});
      Feeds feeds = {{"x", RandomFloats({1, 2, 3, 4, 5}, 7)}, {"grid", Grid({1, 2, 3, 2, 3}, 8)}};
      ExpectExpands(m, 19, feeds);
      ExpectExpands(m, 11, feeds);
    }
  }
  // 4-D stays a GridSample down to 16.
  pb::ModelProto m = GridModel({"linear", "border", 1}, 20, {1, 2, 3, 4}, {1, 2, 3, 2});
  ConvertResult down = ConvertTo(m, 16);
  EXPECT_EQ(OpCount(down.model, "GridSample"), 1);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({1, 2, 3, 4}, 9)}, {"grid", Grid({1, 2, 3, 2}, 10)}});
}

TEST(ConvertGridTest, BlocksWhatTheExpansionCannotSay) {
  pb::ModelProto m = GridModel({"bilinear", "zeros", 0}, 16, {1, 1, 4, 4}, {1, 2, 2, 2});
  ConvertResult r = ConvertTo(m, 10);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("GatherElements (opset 11)"));
  pb::ModelProto half = GridModel({"bilinear", "zeros", 0}, 16, {1, 1, 4, 4}, {1, 2, 2, 2}, pb::kFloat16);
  r = ConvertTo(half, 13);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("float or double"));
  pb::ModelProto unknown_rank = ModelFromGraph(
      GraphBuilder("g").Input("x").Input("grid").Node("GridSample", {"x", "grid"}, {"y"}).Output("y").Build(),
      16, 8);
  r = ConvertTo(unknown_rank, 13);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("rank 4"));
}

}  // namespace
}  // namespace onnxkit::testing
