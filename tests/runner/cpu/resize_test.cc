// The cpu backend's Resize kernel against the reference kernel: random
// shapes of rank 3 to 5 resized up and down by integer and fractional
// factors, from scales and from sizes, under every
// coordinate_transformation_mode with every nearest_mode and with linear and
// cubic, the axes attribute and keep_aspect_ratio_policy, every opset range,
// infinities and NaN, 2 threads, repeated runs with changing shapes, and the
// cases that fall back.
//
// Nearest results are compared exactly (an element is copied or not).
// The kernel (runner/cpu/resize.cc) decides per geometry whether oneDNN
// computes the reference's result; with ONEDNN_VERBOSE=1 these tests show
// resampling running for, among others: nearest and linear with
// half_pixel, pytorch_half_pixel and half_pixel_symmetric under integer
// factors and from sizes; nearest with round_prefer_ceil, and with the
// other nearest modes or coordinate modes on geometries that pick the same
// elements (round_prefer_floor without ties, asymmetric with floor under
// integer upscales as in Resize-10); axes and keep_aspect_ratio_policy
// resolving to such geometries. The other geometries that resize only the
// last two axes (cubic, antialias, exclude_outside, tf_crop_and_resize,
// align_corners, asymmetric, linear where a given scale is not out / in,
// nearest geometries picking other elements, rank 2) run on the backend's
// own loops; the rest on the reference kernel: integer types, resized N or
// C, a third-last axis resized, empty tensors, inputs holding Inf or NaN
// (on the own loops, and on oneDNN on geometries with zero weights).
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/cpu/conv.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

template <typename T>
std::string Join(const std::vector<T>& v) {
  std::string s = "[";
  for (const T& x : v) s += std::to_string(x) + ",";
  return s + "]";
}

const char* const kCoordModes[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                   "align_corners", "asymmetric",           "tf_half_pixel_for_nn"};
const char* const kNearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

// A Resize node's input shape, attributes and scales or sizes (roi for
// tf_crop_and_resize).
struct ResizeCase {
  std::vector<int64_t> shape;
  std::vector<pb::AttributeProto> attrs;
  std::optional<std::vector<float>> scales;
  std::optional<std::vector<int64_t>> sizes;
  std::optional<std::vector<float>> roi;
  std::string text;
};

// The graph of `c` at `opset` (the scales, sizes and roi are graph inputs)
// and its feeds.
pb::GraphProto ResizeGraph(const ResizeCase& c, int64_t opset, Feeds& feeds, uint32_t seed) {
  GraphBuilder g("g");
  g.Input("x");
  feeds = {{"x", RandomFloats(c.shape, seed)}};
  std::vector<std::string> inputs = {"x"};
  if (opset < 11) {
    g.Input("scales");
    feeds.push_back({"scales", Floats({static_cast<int64_t>(c.scales->size())}, *c.scales)});
    inputs.push_back("scales");
  } else {
    inputs.push_back(c.roi ? "roi" : "");
    if (c.roi) {
      g.Input("roi");
      feeds.push_back({"roi", Floats({static_cast<int64_t>(c.roi->size())}, *c.roi)});
    }
    if (c.scales) {
      g.Input("scales");
      feeds.push_back({"scales", Floats({static_cast<int64_t>(c.scales->size())}, *c.scales)});
      inputs.push_back("scales");
    } else {
      // Resize-11 and -12 take the scales input even when sizes are given.
      g.Input("scales");
      feeds.push_back({"scales", Floats({0}, {})});
      inputs.push_back("scales");
    }
    if (c.sizes) {
      g.Input("sizes", pb::kInt64);
      feeds.push_back({"sizes", Int64s({static_cast<int64_t>(c.sizes->size())}, *c.sizes)});
      inputs.push_back("sizes");
    }
  }
  g.Node("Resize", inputs, {"y"}, c.attrs).Output("y");
  return g.Build();
}

bool IsNearest(const ResizeCase& c) {
  for (const pb::AttributeProto& a : c.attrs) {
    if (a.name == "mode") return a.s == "nearest";
  }
  return true;
}

void ExpectResizeMatches(const ResizeCase& c, uint32_t seed, int64_t opset = 19) {
  SCOPED_TRACE(c.text + " opset " + std::to_string(opset));
  Feeds feeds;
  pb::GraphProto graph = ResizeGraph(c, opset, feeds, seed);
  // Nearest copies elements: exact.
  double tol = IsNearest(c) ? 0 : 1;
  ExpectCpuMatchesReference(graph, feeds, opset, 1e-5 * tol, 1e-4 * tol);
}

// A random resize of a rank-`rank` tensor: N and C kept, each spatial dim
// scaled up or down by an integer factor, by a fractional one, or kept;
// given as scales or as sizes.
ResizeCase RandomResize(std::mt19937& rng, int rank, bool use_sizes, std::vector<pb::AttributeProto> attrs) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  static const float kFractions[] = {0.6f, 0.75f, 1.25f, 1.5f, 2.5f, 1.f / 3, 0.4f, 1.7f};
  ResizeCase c;
  c.shape = {pick(1, 2), pick(1, 3)};
  std::vector<float> scales = {1.f, 1.f};
  std::vector<int64_t> sizes = c.shape;
  for (int d = 2; d < rank; ++d) {
    int64_t in = pick(1, rank == 5 ? 6 : 11);
    c.shape.push_back(in);
    int64_t kind = pick(0, 4), k = pick(2, 3);
    float s = 1.f;
    int64_t size = in;
    if (kind == 0) {  // integer upscale
      s = static_cast<float>(k);
      size = in * k;
    } else if (kind == 1) {  // integer downscale
      in = k * pick(1, rank == 5 ? 2 : 4);
      c.shape.back() = in;
      s = 1.f / static_cast<float>(k);
      size = in / k;
    } else if (kind == 2) {  // fractional
      s = kFractions[pick(0, 7)];
      size = std::max<int64_t>(1, pick(in / 2, 2 * in + 1));
      if (size == in) ++size;
    } else if (kind == 3) {  // fractional with an integral scale * in
      int64_t n = pick(1, 3);
      in = 4 * n;
      c.shape.back() = in;
      s = pick(0, 1) == 0 ? 0.75f : 1.25f;
      size = static_cast<int64_t>(s * static_cast<float>(in));
    }
    scales.push_back(s);
    sizes.push_back(size);
  }
  if (use_sizes) {
    c.sizes = sizes;
  } else {
    c.scales = scales;
  }
  c.attrs = std::move(attrs);
  c.text = "x=" + Join(c.shape) + (use_sizes ? " sizes=" + Join(sizes) : " scales=" + Join(scales));
  for (const pb::AttributeProto& a : c.attrs) c.text += " " + a.name + "=" + a.s;
  return c;
}

TEST(CpuResizeTest, NearestMatchesReferenceForEveryCoordinateAndNearestMode) {
  std::mt19937 rng(21);
  uint32_t seed = 0;
  for (const char* coord : kCoordModes) {
    for (const char* nearest : kNearestModes) {
      for (int rank = 3; rank <= 5; ++rank) {
        for (bool sizes : {false, true}) {
          for (int i = 0; i < 3; ++i) {
            ExpectResizeMatches(RandomResize(rng, rank, sizes,
                                             {AttrString("mode", "nearest"),
                                              AttrString("coordinate_transformation_mode", coord),
                                              AttrString("nearest_mode", nearest)}),
                                ++seed);
          }
        }
      }
    }
  }
}

TEST(CpuResizeTest, LinearAndCubicMatchReferenceForEveryCoordinateMode) {
  std::mt19937 rng(22);
  uint32_t seed = 0;
  for (const char* coord : kCoordModes) {
    for (const char* mode : {"linear", "cubic"}) {
      for (int rank = 3; rank <= 5; ++rank) {
        for (bool sizes : {false, true}) {
          for (int i = 0; i < (std::string(mode) == "linear" ? 6 : 2); ++i) {
            ExpectResizeMatches(
                RandomResize(rng, rank, sizes,
                             {AttrString("mode", mode), AttrString("coordinate_transformation_mode", coord)}),
                ++seed);
          }
        }
      }
    }
  }
}

TEST(CpuResizeTest, CommonImageResizesMatchReference) {
  // The resizes of the usual image models, 2x and 4x up, 2x down, and odd
  // sizes.
  struct Common {
    std::vector<int64_t> shape;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
  };
  for (const Common& r : std::vector<Common>{{{1, 8, 20, 20}, {1, 1, 2, 2}, {}},
                                             {{2, 4, 13, 17}, {1, 1, 2, 2}, {}},
                                             {{1, 3, 9, 11}, {1, 1, 4, 4}, {}},
                                             {{1, 5, 32, 24}, {1, 1, 0.5f, 0.5f}, {}},
                                             {{1, 4, 15, 20}, {}, {1, 4, 45, 60}},
                                             {{1, 2, 37, 23}, {}, {1, 2, 18, 46}},
                                             {{1, 3, 6, 10, 12}, {1, 1, 2, 2, 2}, {}},
                                             {{2, 6, 50}, {}, {2, 6, 100}}}) {
    for (const char* coord : {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"}) {
      for (const char* mode : {"nearest", "linear"}) {
        for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor"}) {
          if (std::string(mode) == "linear" && std::string(nearest) != "floor") continue;
          ResizeCase c;
          c.shape = r.shape;
          if (!r.scales.empty()) c.scales = r.scales;
          if (!r.sizes.empty()) c.sizes = r.sizes;
          c.attrs = {AttrString("mode", mode), AttrString("coordinate_transformation_mode", coord),
                     AttrString("nearest_mode", nearest)};
          c.text = "x=" + Join(r.shape) + " scales=" + Join(r.scales) + " sizes=" + Join(r.sizes) + " " +
                   mode + " " + coord + " " + nearest;
          ExpectResizeMatches(c, static_cast<uint32_t>(r.shape[2]));
        }
      }
    }
  }
}

TEST(CpuResizeTest, PytorchHalfPixelWithOutputSizeOne) {
  // pytorch_half_pixel reads coordinate -0.5 where the output size is 1;
  // oneDNN reads the middle of the axis, so those fall back.
  for (const char* mode : {"nearest", "linear"}) {
    ResizeCase c;
    c.shape = {1, 2, 5, 8};
    c.sizes = {1, 2, 1, 4};
    c.attrs = {AttrString("mode", mode), AttrString("coordinate_transformation_mode", "pytorch_half_pixel")};
    c.text = std::string(mode) + " sizes [1,2,1,4]";
    ExpectResizeMatches(c, 1);
    c.sizes = {1, 2, 10, 16};
    c.text = std::string(mode) + " sizes [1,2,10,16]";
    ExpectResizeMatches(c, 2);
  }
}

TEST(CpuResizeTest, EveryOpsetRangeMatchesReference) {
  // Resize-10 (scales input 1, asymmetric and floor), -11, -13, -18, -19.
  std::mt19937 rng(23);
  uint32_t seed = 0;
  for (int64_t opset : {10, 11, 13, 18, 19}) {
    for (const char* mode : {"nearest", "linear"}) {
      for (int rank = 3; rank <= 5; ++rank) {
        for (bool sizes : {false, true}) {
          if (opset < 11 && sizes) continue;
          ResizeCase c = RandomResize(rng, rank, sizes, {AttrString("mode", mode)});
          ExpectResizeMatches(c, ++seed, opset);
        }
      }
      // Integer upscales: Resize-10's asymmetric floor matches oneDNN's nearest.
      ResizeCase c;
      c.shape = {1, 3, 7, 5};
      c.scales = std::vector<float>{1, 1, 2, 3};
      c.attrs = {AttrString("mode", mode)};
      c.text = std::string(mode) + " x=[1,3,7,5] scales=[1,1,2,3]";
      ExpectResizeMatches(c, ++seed, opset);
    }
  }
}

// Upsample (opsets 7 and 9: scales as an attribute, then an input) is
// Resize-10's geometry and runs on the same kernel: the own loops for a
// fractional linear scale, as the counter shows.
TEST(CpuResizeTest, UpsampleRunsAsResize) {
  uint32_t seed = 900;
  for (const char* mode : {"nearest", "linear"}) {
    for (const std::vector<float>& scales :
         std::vector<std::vector<float>>{{1, 1, 2, 2}, {1, 1, 1.5f, 2.5f}}) {
      SCOPED_TRACE(::testing::Message() << mode << " scales " << Join(scales));
      const int64_t own = runner::cpu::OwnResizeRuns();
      GraphBuilder g7("g");
      g7.Input("x")
          .Node("Upsample", {"x"}, {"y"}, {AttrString("mode", mode), AttrFloats("scales", scales)})
          .Output("y");
      ExpectCpuMatchesReference(g7.Build(), {{"x", RandomFloats({1, 3, 6, 5}, seed++)}}, 7, 1e-5, 1e-5);
      GraphBuilder g9("g");
      g9.Input("x").Initializer(InitializerFrom("s", Floats({4}, scales)));
      g9.Node("Upsample", {"x", "s"}, {"y"}, {AttrString("mode", mode)}).Output("y");
      ExpectCpuMatchesReference(g9.Build(), {{"x", RandomFloats({2, 4, 5, 7}, seed++)}}, 9, 1e-5, 1e-5);
      if (std::string(mode) == "linear" && scales[2] != 2) {
        EXPECT_GE(runner::cpu::OwnResizeRuns(), own + 2);
      }
    }
  }
}

TEST(CpuResizeTest, AxesAndKeepAspectRatioMatchReference) {
  std::mt19937 rng(24);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  uint32_t seed = 0;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    for (std::vector<int64_t> axes : std::vector<std::vector<int64_t>>{{2, 3}, {-1}, {3, 2}, {-2, -1}}) {
      for (const char* policy : {"stretch", "not_larger", "not_smaller"}) {
        for (bool use_sizes : {false, true}) {
          if (!use_sizes && std::string(policy) != "stretch") continue;
          ResizeCase c;
          c.shape = {pick(1, 2), pick(1, 3), pick(2, 9), pick(2, 9)};
          std::vector<float> scales;
          std::vector<int64_t> sizes;
          for (size_t i = 0; i < axes.size(); ++i) {
            int64_t k = pick(1, 3);
            scales.push_back(pick(0, 1) == 0 ? static_cast<float>(k) : 0.5f);
            sizes.push_back(pick(1, 20));
          }
          if (use_sizes) {
            c.sizes = sizes;
          } else {
            c.scales = scales;
          }
          c.attrs = {AttrString("mode", mode), AttrInts("axes", axes),
                     AttrString("keep_aspect_ratio_policy", policy)};
          c.text = std::string(mode) + " x=" + Join(c.shape) + " axes=" + Join(axes) + " " + policy +
                   (use_sizes ? " sizes=" + Join(sizes) : " scales=" + Join(scales));
          ExpectResizeMatches(c, ++seed, 18);
        }
      }
    }
  }
}

TEST(CpuResizeTest, InfinitiesAndNaNMatchReference) {
  // Linear on an unresized spatial axis weighs elements by zero; those
  // inputs run on the reference kernel, the others on oneDNN.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const char* mode : {"nearest", "linear"}) {
    for (std::vector<int64_t> sizes :
         std::vector<std::vector<int64_t>>{{1, 2, 6, 14}, {1, 2, 12, 14}, {1, 2, 3, 7}, {1, 2, 2, 3}}) {
      GraphBuilder g("g");
      g.Input("x")
          .Input("sizes", pb::kInt64)
          .Node("Resize", {"x", "", "", "sizes"}, {"y"}, {AttrString("mode", mode)})
          .Output("y");
      runner::Tensor x = RandomFloats({1, 2, 6, 7}, 5);
      float* p = x.mutable_data<float>();
      p[3] = kInf;
      p[10] = -kInf;
      p[11] = kInf;
      p[50] = kNaN;
      p[70] = -kInf;
      SCOPED_TRACE(std::string(mode) + " sizes " + Join(sizes));
      ExpectCpuMatchesReference(g.Build(), {{"x", x}, {"sizes", Int64s({4}, sizes)}}, 19, 1e-5, 1e-4);
    }
  }
}

TEST(CpuResizeTest, TwoThreadsMatchReference) {
  std::mt19937 rng(25);
  for (const char* mode : {"nearest", "linear"}) {
    for (int rank = 3; rank <= 5; ++rank) {
      for (int i = 0; i < 3; ++i) {
        ResizeCase c =
            RandomResize(rng, rank, i % 2 == 1,
                         {AttrString("mode", mode), AttrString("nearest_mode", "round_prefer_ceil")});
        c.shape[0] = 2;
        c.shape[1] = 16;
        if (c.sizes) {
          (*c.sizes)[0] = 2;
          (*c.sizes)[1] = 16;
        }
        SCOPED_TRACE(c.text);
        Feeds feeds;
        pb::GraphProto graph = ResizeGraph(c, 19, feeds, static_cast<uint32_t>(i));
        auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, 19, 2);
        auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, 19, 2);
        ASSERT_TRUE(ref.ok()) << ref.status();
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, "y");
      }
    }
  }
}

TEST(CpuResizeTest, RepeatedRunsWithChangingShapesAndSizes) {
  for (const char* mode : {"nearest", "linear"}) {
    GraphBuilder g("g");
    g.Input("x")
        .Input("sizes", pb::kInt64)
        .Node("Resize", {"x", "", "", "sizes"}, {"y"}, {AttrString("mode", mode)})
        .Output("y");
    std::unique_ptr<runner::Session> sessions[2];
    runner::Backend backends[2] = {runner::Backend::kReference, runner::Backend::kCpu};
    for (int i = 0; i < 2; ++i) {
      io::LoadedModel loaded;
      loaded.proto = ModelFromGraph(g.Build(), 19);
      runner::SessionOptions options;
      options.backend = backends[i];
      auto s = runner::Session::Create(std::move(loaded), options);
      ASSERT_TRUE(s.ok()) << s.status();
      sessions[i] = std::move(*s);
    }
    struct Run {
      std::vector<int64_t> shape, sizes;
    };
    for (const Run& r : std::vector<Run>{{{1, 2, 8, 8}, {1, 2, 16, 16}},
                                         {{1, 2, 8, 8}, {1, 2, 4, 4}},
                                         {{2, 3, 5, 11}, {2, 3, 10, 22}},
                                         {{1, 2, 8, 8}, {1, 2, 16, 16}},
                                         {{1, 2, 8, 8}, {1, 2, 13, 5}},
                                         {{1, 2, 8, 8}, {1, 4, 16, 16}}}) {
      SCOPED_TRACE(std::string(mode) + " x=" + Join(r.shape) + " sizes=" + Join(r.sizes));
      runner::Tensor x = RandomFloats(r.shape, static_cast<uint32_t>(r.sizes[3]));
      runner::Tensor sizes = Int64s({4}, r.sizes);
      std::vector<runner::RtValue> outs[2];
      for (int i = 0; i < 2; ++i) {
        auto o = sessions[i]->Run(
            {{"x", runner::RtValue::FromTensor(x)}, {"sizes", runner::RtValue::FromTensor(sizes)}});
        ASSERT_TRUE(o.ok()) << o.status();
        outs[i] = std::move(*o);
      }
      ExpectTensorsClose(outs[0][0].tensor(), outs[1][0].tensor(), 1e-5, 1e-4, "y");
    }
  }
}

TEST(CpuResizeTest, FallbackCasesMatchReference) {
  // Resized N and C.
  for (std::vector<float> scales :
       std::vector<std::vector<float>>{{2, 1, 2, 2}, {1, 3, 1, 1}, {1, 0.5f, 1, 2}}) {
    for (const char* mode : {"nearest", "linear"}) {
      ResizeCase c;
      c.shape = {2, 4, 3, 5};
      c.scales = scales;
      c.attrs = {AttrString("mode", mode)};
      c.text = std::string(mode) + " scales=" + Join(scales);
      ExpectResizeMatches(c, 1);
    }
  }
  // Antialias, exclude_outside, tf_crop_and_resize with extrapolation.
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    ResizeCase c;
    c.shape = {1, 2, 9, 7};
    c.scales = std::vector<float>{1, 1, 0.5f, 0.75f};
    c.attrs = {AttrString("mode", mode), AttrInt("antialias", 1)};
    c.text = std::string(mode) + " antialias";
    ExpectResizeMatches(c, 2);
    c.attrs = {AttrString("mode", mode), AttrInt("exclude_outside", 1), AttrString("nearest_mode", "ceil")};
    c.scales = std::vector<float>{1, 1, 2, 2};
    c.text = std::string(mode) + " exclude_outside";
    ExpectResizeMatches(c, 3);
    c.attrs = {AttrString("mode", mode), AttrString("coordinate_transformation_mode", "tf_crop_and_resize"),
               AttrFloat("extrapolation_value", 7.f)};
    c.roi = std::vector<float>{0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f};
    c.sizes = std::vector<int64_t>{1, 2, 6, 8};
    c.scales.reset();
    c.text = std::string(mode) + " tf_crop_and_resize";
    ExpectResizeMatches(c, 4);
  }
  // Integer types, rank 2 and 6, an empty batch.
  {
    GraphBuilder g("g");
    g.Input("x", pb::kUint8)
        .Input("scales")
        .Node("Resize", {"x", "", "scales"}, {"y"}, {AttrString("mode", "nearest")})
        .Output("y", pb::kUint8);
    ExpectCpuMatchesReference(
        g.Build(),
        {{"x", RandomInts(pb::kUint8, {1, 2, 4, 5}, 6, 0, 255)}, {"scales", Floats({4}, {1, 1, 2, 2})}}, 19);
  }
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{4, 6}, {1, 2, 2, 2, 2, 3}, {0, 2, 4, 4}, {1, 2, 0, 4}}) {
    GraphBuilder g("g");
    g.Input("x")
        .Input("scales")
        .Node("Resize", {"x", "", "scales"}, {"y"}, {AttrString("mode", "linear")})
        .Output("y");
    std::vector<float> scales(shape.size(), 2.f);
    SCOPED_TRACE("x=" + Join(shape));
    ExpectCpuMatchesReference(
        g.Build(),
        {{"x", RandomFloats(shape, 7)}, {"scales", Floats({static_cast<int64_t>(shape.size())}, scales)}},
        19);
  }
  // Invalid inputs: both scales and sizes, neither, a wrong count, a
  // negative size, a zero scale. The reference's error.
  struct Bad {
    std::vector<float> scales;
    std::vector<int64_t> sizes;
  };
  for (const Bad& b : std::vector<Bad>{{{1, 1, 2, 2}, {1, 2, 6, 6}},
                                       {{}, {}},
                                       {{1, 2, 2}, {}},
                                       {{}, {1, 2, -1, 6}},
                                       {{1, 1, 0, 2}, {}}}) {
    GraphBuilder g("g");
    g.Input("x")
        .Input("scales")
        .Input("sizes", pb::kInt64)
        .Node("Resize", {"x", "", "scales", "sizes"}, {"y"}, {AttrString("mode", "linear")})
        .Output("y");
    Feeds feeds = {{"x", RandomFloats({1, 2, 3, 3}, 8)},
                   {"scales", Floats({static_cast<int64_t>(b.scales.size())}, b.scales)},
                   {"sizes", Int64s({static_cast<int64_t>(b.sizes.size())}, b.sizes)}};
    SCOPED_TRACE("scales=" + Join(b.scales) + " sizes=" + Join(b.sizes));
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 19);
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19);
    ASSERT_FALSE(ref.ok());
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(ref.status().code(), cpu.status().code());
  }
}

TEST(CpuResizeTest, OwnLoopsRunWhereOneDnnDoesNot) {
  struct Own {
    std::vector<int64_t> shape;
    std::vector<float> scales;
    std::vector<pb::AttributeProto> attrs;
    bool own;  // on the own loops (else oneDNN or the reference)
  };
  const std::vector<Own> cases = {
      // RAFT's flow upsampling and older segmentation heads.
      {{1, 2, 16, 16},
       {1, 1, 8, 8},
       {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")},
       true},
      {{2, 3, 7, 9}, {1, 1, 2.5f, 0.5f}, {AttrString("mode", "cubic")}, true},
      {{1, 4, 12, 10}, {1, 1, 0.5f, 0.6f}, {AttrString("mode", "linear"), AttrInt("antialias", 1)}, true},
      {{1, 2, 5, 6},
       {1, 1, 3, 3},
       {AttrString("mode", "nearest"), AttrString("coordinate_transformation_mode", "asymmetric"),
        AttrString("nearest_mode", "ceil")},
       true},
      {{6, 9}, {2, 3}, {AttrString("mode", "linear")}, true},
      {{2, 3, 4, 5, 6},
       {1, 1, 1, 2, 2},
       {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")},
       true},
      // oneDNN's: half_pixel 2x.
      {{1, 2, 8, 8}, {1, 1, 2, 2}, {AttrString("mode", "linear")}, false},
      // The reference's: a third-last axis resized.
      {{1, 2, 4, 5, 6},
       {1, 1, 2, 2, 2},
       {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")},
       false},
  };
  uint32_t seed = 30;
  for (const Own& o : cases) {
    ResizeCase c;
    c.shape = o.shape;
    c.scales = o.scales;
    c.attrs = o.attrs;
    c.text = "x=" + Join(o.shape) + " scales=" + Join(o.scales);
    const int64_t before = runner::cpu::OwnResizeRuns();
    ExpectResizeMatches(c, ++seed);
    EXPECT_EQ(runner::cpu::OwnResizeRuns() - before, o.own ? 1 : 0) << c.text;
  }
  // Sizes no plane can have go to the reference, which names the
  // allocation it cannot make.
  {
    GraphBuilder g("g");
    g.Input("x")
        .Input("sizes", pb::kInt64)
        .Node("Resize", {"x", "", "", "sizes"}, {"y"},
              {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")})
        .Output("y");
    Feeds feeds = {{"x", RandomFloats({1, 1, 2, 2}, 8)}, {"sizes", Int64s({4}, {1, 1, 2, int64_t{1} << 40})}};
    const int64_t before = runner::cpu::OwnResizeRuns();
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19);
    ASSERT_FALSE(cpu.ok());
    EXPECT_NE(std::string(cpu.status().message()).find("cannot allocate"), std::string::npos) << cpu.status();
    EXPECT_EQ(runner::cpu::OwnResizeRuns(), before);
  }
  // Large enough for both threads, with the extrapolation value of
  // tf_crop_and_resize where the roi reaches past the input.
  for (const char* coord : {"align_corners", "tf_crop_and_resize"}) {
    GraphBuilder g("g");
    g.Input("x")
        .Input("roi")
        .Input("sizes", pb::kInt64)
        .Node("Resize", {"x", "roi", "", "sizes"}, {"y"},
              {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", coord),
               AttrFloat("extrapolation_value", -3.f)})
        .Output("y");
    Feeds feeds = {{"x", RandomFloats({2, 16, 30, 40}, 9)},
                   {"roi", Floats({8}, {0, 0, -0.1f, 0.05f, 1, 1, 1.2f, 0.9f})},
                   {"sizes", Int64s({4}, {2, 16, 61, 79})}};
    auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 19, 2);
    const int64_t before = runner::cpu::OwnResizeRuns();
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19, 2);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ(runner::cpu::OwnResizeRuns(), before + 1) << coord;
    ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, coord);
  }
}

}  // namespace
}  // namespace onnxkit::testing
