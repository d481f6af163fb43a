// The cpu backend's pooling kernels against the reference kernels: random
// windows (1-D to 3-D, strides, dilations, pads, auto_pad, ceil_mode,
// count_include_pad), wider random 2-D windows on images large and small,
// NaN and infinities in MaxPool, 2 threads, global pooling, int8 MaxPool,
// repeated runs with changing shapes, and the cases that fall back.
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

std::string Join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (int64_t x : v) s += std::to_string(x) + ",";
  return s + "]";
}

// A random pooling node of `op` over `spatial` dims and its input shape.
struct PoolCase {
  std::vector<int64_t> shape;
  std::vector<pb::AttributeProto> attrs;
  std::string text;
};

PoolCase RandomPool(std::mt19937& rng, const std::string& op, int spatial) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  PoolCase c;
  c.shape = {pick(1, 2), pick(1, 5)};
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool dilate = pick(0, 2) == 0;
  for (int d = 0; d < spatial; ++d) {
    int64_t k = pick(1, 4), dil = dilate ? pick(1, 2) : 1;
    kernel.push_back(k);
    strides.push_back(pick(1, 3));
    dilations.push_back(dil);
    c.shape.push_back((k - 1) * dil + 1 + pick(0, spatial == 3 ? 4 : 8));
  }
  // Pads below the kernel extent, as ONNX requires.
  for (int i = 0; i < 2 * spatial; ++i) {
    int64_t d = i % spatial;
    pads.push_back(pick(0, (kernel[static_cast<size_t>(d)] - 1) * dilations[static_cast<size_t>(d)] / 2));
  }
  c.attrs = {AttrInts("kernel_shape", kernel), AttrInts("strides", strides)};
  if (dilate) c.attrs.push_back(AttrInts("dilations", dilations));
  static const char* kAutoPads[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  int64_t pad_kind = pick(0, 4);
  std::string auto_pad = "NOTSET";
  if (pad_kind < 3) {
    auto_pad = kAutoPads[pad_kind];
    c.attrs.push_back(AttrString("auto_pad", auto_pad));
  } else if (pad_kind == 3) {
    c.attrs.push_back(AttrInts("pads", pads));
  }
  int64_t ceil = pick(0, 1);
  c.attrs.push_back(AttrInt("ceil_mode", ceil));
  int64_t include = pick(0, 1);
  if (op == "AveragePool") c.attrs.push_back(AttrInt("count_include_pad", include));
  c.text = op + " x=" + Join(c.shape) + " kernel=" + Join(kernel) + " strides=" + Join(strides) +
           " dilations=" + (dilate ? Join(dilations) : "-") + " pads=" + (pad_kind == 3 ? Join(pads) : "-") +
           " auto_pad=" + auto_pad + " ceil=" + std::to_string(ceil) + " include=" + std::to_string(include);
  return c;
}

// Runs a pooling node `op` with `attrs` over x on the reference backend,
// then on the cpu backend on one and two threads, handing each cpu result
// with the reference's to `check`.
void CompareOnThreads(
    const char* op, const std::vector<pb::AttributeProto>& attrs, const runner::Tensor& x,
    const std::function<void(const runner::Tensor& want, const runner::Tensor& got, int threads)>& check) {
  GraphBuilder g("g");
  g.Input("x").Node(op, {"x"}, {"y"}, attrs).Output("y");
  Feeds feeds = {{"x", x}};
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 19);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (int threads : {1, 2}) {
    auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19, threads);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    check((*ref)[0].tensor(), (*cpu)[0].tensor(), threads);
  }
}

void ExpectPoolMatches(const std::string& op, const PoolCase& c, uint32_t seed) {
  SCOPED_TRACE(c.text);
  GraphBuilder g("g");
  g.Input("x").Node(op, {"x"}, {"y"}, c.attrs).Output("y");
  ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(c.shape, seed)}}, 19, 1e-5, 1e-4);
}

TEST(CpuPoolTest, MaxPoolMatchesReferenceOnRandomWindows) {
  std::mt19937 rng(11);
  for (uint32_t i = 0; i < 50; ++i) ExpectPoolMatches("MaxPool", RandomPool(rng, "MaxPool", 2), i);
  for (uint32_t i = 0; i < 15; ++i) ExpectPoolMatches("MaxPool", RandomPool(rng, "MaxPool", 1), i);
  for (uint32_t i = 0; i < 10; ++i) ExpectPoolMatches("MaxPool", RandomPool(rng, "MaxPool", 3), i);
}

TEST(CpuPoolTest, AveragePoolMatchesReferenceOnRandomWindows) {
  std::mt19937 rng(12);
  for (uint32_t i = 0; i < 60; ++i) ExpectPoolMatches("AveragePool", RandomPool(rng, "AveragePool", 2), i);
  for (uint32_t i = 0; i < 15; ++i) ExpectPoolMatches("AveragePool", RandomPool(rng, "AveragePool", 1), i);
  for (uint32_t i = 0; i < 10; ++i) ExpectPoolMatches("AveragePool", RandomPool(rng, "AveragePool", 3), i);
}

// A random 2-D pooling: kernels 1..7, strides 1..3, dilations 1..2,
// asymmetric pads, auto_pad, ceil_mode, count_include_pad, batch up to 3;
// `small` images are at most one kernel extent (plus 2) wide, so windows
// cover all of them, the others have room for interior columns.
PoolCase RandomPool2d(std::mt19937& rng, const std::string& op, bool small) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  PoolCase c;
  c.shape = {pick(1, 3), pick(1, 4)};
  std::vector<int64_t> kernel, strides, dilations, pads;
  for (int d = 0; d < 2; ++d) {
    int64_t k = pick(1, 7), dil = pick(1, 2), extent = (k - 1) * dil + 1;
    kernel.push_back(k);
    strides.push_back(pick(1, 3));
    dilations.push_back(dil);
    c.shape.push_back(small ? extent + pick(0, 2) : extent + pick(0, d == 0 ? 12 : 60));
  }
  for (int i = 0; i < 4; ++i) {
    size_t d = static_cast<size_t>(i % 2);
    pads.push_back(pick(0, (kernel[d] - 1) * dilations[d]));
  }
  c.attrs = {AttrInts("kernel_shape", kernel), AttrInts("strides", strides),
             AttrInts("dilations", dilations)};
  static const char* kAutoPads[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  int64_t pad_kind = pick(0, 5);
  std::string auto_pad = "NOTSET";
  if (pad_kind < 3) {
    auto_pad = kAutoPads[pad_kind];
    c.attrs.push_back(AttrString("auto_pad", auto_pad));
  } else if (pad_kind < 5) {
    c.attrs.push_back(AttrInts("pads", pads));
  }
  int64_t ceil = pick(0, 1);
  c.attrs.push_back(AttrInt("ceil_mode", ceil));
  int64_t include = pick(0, 1);
  if (op == "AveragePool") c.attrs.push_back(AttrInt("count_include_pad", include));
  c.text = op + " x=" + Join(c.shape) + " kernel=" + Join(kernel) + " strides=" + Join(strides) +
           " dilations=" + Join(dilations) + " pads=" + (pad_kind >= 3 && pad_kind < 5 ? Join(pads) : "-") +
           " auto_pad=" + auto_pad + " ceil=" + std::to_string(ceil) + " include=" + std::to_string(include);
  return c;
}

TEST(CpuPoolTest, Pool2dMatchesReferenceOnWideRandomWindows) {
  std::mt19937 rng(13);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (uint32_t i = 0; i < 120; ++i) ExpectPoolMatches(op, RandomPool2d(rng, op, false), i);
    for (uint32_t i = 0; i < 40; ++i) ExpectPoolMatches(op, RandomPool2d(rng, op, true), i);
  }
}

TEST(CpuPoolTest, Pool2dCommonWindowsMatchReference) {
  // The windows of the usual image models, interior blocks included.
  struct Common {
    std::vector<int64_t> shape, kernel, strides, pads;
    int64_t ceil;
  };
  for (const Common& w : std::vector<Common>{{{1, 8, 14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0},
                                             {{1, 4, 112, 112}, {3, 3}, {2, 2}, {0, 0, 1, 1}, 0},
                                             {{1, 4, 55, 55}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
                                             {{2, 3, 57, 40}, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0},
                                             {{1, 5, 35, 35}, {5, 5}, {1, 1}, {2, 2, 2, 2}, 0},
                                             {{1, 2, 9, 33}, {7, 7}, {3, 3}, {3, 3, 3, 3}, 1}}) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int64_t include : {0, 1}) {
        PoolCase c;
        c.shape = w.shape;
        c.attrs = {AttrInts("kernel_shape", w.kernel), AttrInts("strides", w.strides),
                   AttrInts("pads", w.pads), AttrInt("ceil_mode", w.ceil)};
        if (std::string(op) == "AveragePool") c.attrs.push_back(AttrInt("count_include_pad", include));
        c.text = std::string(op) + " x=" + Join(w.shape) + " kernel=" + Join(w.kernel) +
                 " strides=" + Join(w.strides) + " pads=" + Join(w.pads) + " ceil=" + std::to_string(w.ceil) +
                 " include=" + std::to_string(include);
        ExpectPoolMatches(op, c, static_cast<uint32_t>(w.shape[2] + include));
      }
    }
  }
}

TEST(CpuPoolTest, MaxPoolPropagatesNaNAndInfinitiesAsReference) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(14);
  for (std::vector<int64_t> strides : std::vector<std::vector<int64_t>>{{1, 1}, {2, 2}, {1, 3}}) {
    for (int64_t ceil : {0, 1}) {
      runner::Tensor x = RandomFloats({2, 3, 23, 41}, static_cast<uint32_t>(strides[1] + ceil));
      float* p = x.mutable_data<float>();
      std::uniform_int_distribution<int64_t> at(0, x.size() - 1);
      for (int i = 0; i < 12; ++i) p[at(rng)] = kNaN;
      for (int i = 0; i < 12; ++i) p[at(rng)] = kInf;
      for (int i = 0; i < 40; ++i) p[at(rng)] = -kInf;
      for (int i = 0; i < 20; ++i) p[at(rng)] = i % 2 == 0 ? 0.f : -0.f;
      // A plane of -inf, and one of -inf with a NaN in a corner.
      for (int64_t i = 0; i < 23 * 41; ++i) p[23 * 41 + i] = p[2 * 23 * 41 + i] = -kInf;
      p[2 * 23 * 41] = kNaN;
      GraphBuilder g("g");
      g.Input("x")
          .Node("MaxPool", {"x"}, {"y"},
                {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", strides),
                 AttrInts("pads", {1, 0, 1, 2}), AttrInt("ceil_mode", ceil)})
          .Output("y");
      SCOPED_TRACE("strides " + Join(strides) + " ceil " + std::to_string(ceil));
      ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 18, 0, 0);
    }
  }
}

TEST(CpuPoolTest, Pool2dOnTwoThreadsMatchesReference) {
  std::mt19937 rng(15);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (uint32_t i = 0; i < 12; ++i) {
      PoolCase c = RandomPool2d(rng, op, false);
      c.shape[0] = 2;
      c.shape[1] = 24;
      SCOPED_TRACE(c.text);
      GraphBuilder g("g");
      g.Input("x").Node(op, {"x"}, {"y"}, c.attrs).Output("y");
      Feeds feeds = {{"x", RandomFloats(c.shape, i)}};
      auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 19, 2);
      auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19, 2);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, "y");
    }
  }
}

TEST(CpuPoolTest, SameSizeWindowsMatchReference) {
  // Stride 1 with pads adding up to the kernel extent less one: the output
  // is as large as the input and the pooling runs rows, then columns. Every
  // split of the pads, kernels wider and taller than the plane, planes of
  // one row or column.
  struct Shape {
    std::vector<int64_t> x, kernel;
  };
  for (const Shape& s : std::vector<Shape>{{{1, 3, 1, 1}, {3, 3}},
                                           {{1, 2, 2, 5}, {2, 2}},
                                           {{2, 3, 14, 14}, {3, 3}},
                                           {{1, 2, 7, 9}, {5, 5}},
                                           {{1, 2, 1, 17}, {3, 7}},
                                           {{1, 2, 19, 4}, {7, 3}}}) {
    for (int64_t top = 0; top < s.kernel[0]; ++top) {
      for (int64_t left = 0; left < s.kernel[1]; ++left) {
        for (const char* op : {"MaxPool", "AveragePool"}) {
          for (int64_t include : {0, 1}) {
            if (std::string(op) == "MaxPool" && include == 1) continue;
            PoolCase c;
            c.shape = s.x;
            std::vector<int64_t> pads = {top, left, s.kernel[0] - 1 - top, s.kernel[1] - 1 - left};
            c.attrs = {AttrInts("kernel_shape", s.kernel), AttrInts("strides", {1, 1}),
                       AttrInts("pads", pads)};
            if (std::string(op) == "AveragePool") c.attrs.push_back(AttrInt("count_include_pad", include));
            c.text = std::string(op) + " x=" + Join(s.x) + " kernel=" + Join(s.kernel) +
                     " pads=" + Join(pads) + " include=" + std::to_string(include);
            ExpectPoolMatches(op, c, static_cast<uint32_t>(top * 7 + left));
          }
        }
      }
    }
  }
}

TEST(CpuPoolTest, ThreeByThreeSameSizeWindowsMatchReference) {
  // 3x3 windows of stride 1 padded by one run 16 columns at a time in
  // vector registers: widths around the 16-column chunks, planes of one to
  // seven rows, NaN and infinities in AveragePool's sums, -inf and +inf in
  // MaxPool's (NaN takes the tap-by-tap path), one and two threads.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  uint32_t seed = 60;
  for (int64_t height : {1, 2, 3, 7}) {
    for (int64_t width : {1, 2, 15, 16, 17, 31, 32, 33, 40}) {
      for (const char* op : {"MaxPool", "AveragePool"}) {
        for (int64_t include : {0, 1}) {
          const bool max = std::string(op) == "MaxPool";
          if (max && include == 1) continue;
          const int64_t channels = 64;  // 7x33 planes and wider: two threads
          runner::Tensor x = RandomFloats({1, channels, height, width}, ++seed);
          float* p = x.mutable_data<float>();
          const int64_t plane = height * width;
          p[1 * plane + plane / 2] = kInf;
          p[2 * plane + plane - 1] = -kInf;
          if (!max) {
            p[3 * plane] = kNaN;
            p[4 * plane + width - 1] = kInf;
            p[4 * plane + (height - 1) * width] = -kInf;
          }
          std::vector<pb::AttributeProto> attrs = {AttrInts("kernel_shape", {3, 3}),
                                                   AttrInts("pads", {1, 1, 1, 1})};
          if (!max) attrs.push_back(AttrInt("count_include_pad", include));
          SCOPED_TRACE(std::string(op) + " " + std::to_string(height) + "x" + std::to_string(width) +
                       " include=" + std::to_string(include));
          CompareOnThreads(op, attrs, x, [&](const runner::Tensor& want, const runner::Tensor& got, int) {
            ExpectTensorsClose(want, got, max ? 0 : 1e-5, max ? 0 : 1e-4, "y");
          });
        }
      }
    }
  }
}

TEST(CpuPoolTest, TwoByTwoStrideTwoWindowsEqualReference) {
  // 2x2 windows of stride 2 (DenseNet's transitions, VGG's pools) run 16
  // outputs at a time in vector registers: widths around the 16-output
  // chunks, odd sizes (the last row and column unread), end padding and
  // ceil_mode that add no partial window, NaN, infinities and zeros of both
  // signs in every tap position, one and two threads. The values are the
  // reference's bit for bit.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  struct Shape {
    int64_t height, width;
    std::vector<int64_t> pads;
    int64_t ceil;
  };
  std::vector<Shape> shapes;
  for (int64_t height : {2, 3, 5}) {
    for (int64_t width : {2, 3, 15, 16, 17, 31, 32, 33, 34, 40, 64})
      shapes.push_back({height, width, {0, 0, 0, 0}, 0});
  }
  shapes.push_back({4, 34, {0, 0, 1, 1}, 0});
  shapes.push_back({6, 36, {0, 0, 0, 0}, 1});
  shapes.push_back({40, 66, {0, 0, 0, 0}, 0});  // enough for two threads
  uint32_t seed = 90;
  for (const Shape& s : shapes) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int64_t include : {0, 1}) {
        const bool max = std::string(op) == "MaxPool";
        if (max && include == 1) continue;
        const int64_t channels = 64;
        runner::Tensor x = RandomFloats({1, channels, s.height, s.width}, ++seed, -2, 2);
        float* p = x.mutable_data<float>();
        const int64_t plane = s.height * s.width;
        // Planes 1-4: NaN in each tap of the first window (after a larger
        // value, before a smaller one); 5-8: +inf, -inf; 9: zeros of both
        // signs; 10: a NaN and an infinity in one window; 11: negative
        // zeros (whose sum from zero is a positive zero).
        for (int64_t tap = 0; tap < 4; ++tap) {
          const int64_t at = (tap / 2) * s.width + tap % 2;
          p[(1 + tap) * plane + at] = kNaN;
          p[(5 + tap) * plane + at] = tap % 2 == 0 ? kInf : -kInf;
          p[9 * plane + at] = tap % 2 == 0 ? 0.f : -0.f;
          p[11 * plane + at] = -0.f;
        }
        p[10 * plane + s.width] = kNaN;
        p[10 * plane + 1] = -kInf;
        std::vector<pb::AttributeProto> attrs = {AttrInts("kernel_shape", {2, 2}),
                                                 AttrInts("strides", {2, 2}), AttrInts("pads", s.pads),
                                                 AttrInt("ceil_mode", s.ceil)};
        if (!max) attrs.push_back(AttrInt("count_include_pad", include));
        SCOPED_TRACE(std::string(op) + " " + std::to_string(s.height) + "x" + std::to_string(s.width) +
                     " pads=" + Join(s.pads) + " ceil=" + std::to_string(s.ceil) +
                     " include=" + std::to_string(include));
        CompareOnThreads(
            op, attrs, x, [](const runner::Tensor& want, const runner::Tensor& got, int threads) {
              ASSERT_EQ(want.shape(), got.shape());
              for (int64_t i = 0; i < want.size(); ++i) {
                const float a = want.data<float>()[i], b = got.data<float>()[i];
                if (std::isnan(a) && std::isnan(b)) continue;
                ASSERT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b))
                    << "element " << i << ": " << a << " vs " << b << " (" << threads << " threads)";
              }
            });
      }
    }
  }
}

TEST(CpuPoolTest, SameSizeMaxPoolKeepsNaNOfSomePlanes) {
  // Planes holding NaN take the tap-by-tap path, the others the separable
  // one; infinities alone keep a plane separable.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  runner::Tensor x = RandomFloats({1, 6, 9, 11}, 21);
  float* p = x.mutable_data<float>();
  p[0 * 99 + 40] = kNaN;
  p[2 * 99 + 98] = kNaN;
  p[3 * 99 + 5] = kInf;
  p[4 * 99 + 50] = -kInf;
  GraphBuilder g("g");
  g.Input("x")
      .Node("MaxPool", {"x"}, {"y"}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})})
      .Output("y");
  ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 18, 0, 0);
}

TEST(CpuPoolTest, ChannelBlocksMatchReference) {
  // Channels that fill 16-channel blocks (16, 32, 144), or enough of them
  // that the last block's padding costs little (136: the backend's
  // transposes into and out of padded blocks) run over channel blocks: random 2-D windows, images
  // large and small, batches up to 3, one and two threads; 24 channels keep
  // the plane loops.
  std::mt19937 rng(31);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (uint32_t i = 0; i < 40; ++i) {
      PoolCase c = RandomPool2d(rng, op, i % 3 == 0);
      c.shape[1] = std::vector<int64_t>{16, 32, 144, 136, 24}[i % 5];
      SCOPED_TRACE(c.text + " channels " + std::to_string(c.shape[1]));
      GraphBuilder g("g");
      g.Input("x").Node(op, {"x"}, {"y"}, c.attrs).Output("y");
      Feeds feeds = {{"x", RandomFloats(c.shape, i)}};
      auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 19);
      ASSERT_TRUE(ref.ok()) << ref.status();
      for (int threads : {1, 2}) {
        auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 19, threads);
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, "y");
      }
    }
  }
}

TEST(CpuPoolTest, ChannelBlocksKeepNaNAndInfinities) {
  // MaxPool over NaN or -inf leaves the channel blocks for the plane loops
  // (the reference's values exactly); AveragePool's sums carry NaN and
  // infinities as the reference's do. The pads (1 before, 0 after) keep the
  // stride-1 windows off the 3x3 same-size path.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  // 136 channels: into padded blocks by the backend's transpose.
  for (int64_t channels : {32, 136}) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int variant = 0; variant < 3; ++variant) {
        runner::Tensor x = RandomFloats({1, channels, 14, 14}, static_cast<uint32_t>(variant + 50));
        float* p = x.mutable_data<float>();
        if (variant == 0) p[3 * 196 + 20] = kNaN;
        if (variant == 1) p[5 * 196 + 100] = -kInf, p[9 * 196] = kInf;
        if (variant == 2) p[7 * 196 + 15] = kInf, p[7 * 196 + 16] = -kInf;  // inf - inf: NaN in the sums
        GraphBuilder g("g");
        g.Input("x")
            .Node(op, {"x"}, {"y"},
                  {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {1 + variant % 2, 1 + variant % 2}),
                   AttrInts("pads", {1, 1, 0, 0})})
            .Output("y");
        SCOPED_TRACE(std::string(op) + " variant " + std::to_string(variant) + " channels " +
                     std::to_string(channels));
        const bool max = std::string(op) == "MaxPool";
        ExpectCpuMatchesReference(g.Build(), {{"x", x}}, 18, max ? 0 : 1e-5, max ? 0 : 1e-4);
      }
    }
  }
}

TEST(CpuPoolTest, CeilModeWithCountIncludePadMatchesReference) {
  // The ceil_mode window is partly outside the padded input: its divisor
  // counts only the explicit padding.
  PoolCase c;
  c.shape = {1, 2, 6, 6};
  c.attrs = {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1}),
             AttrInt("ceil_mode", 1), AttrInt("count_include_pad", 1)};
  ExpectPoolMatches("AveragePool", c, 3);
  c.attrs.back() = AttrInt("count_include_pad", 0);
  ExpectPoolMatches("AveragePool", c, 4);
  c.attrs.pop_back();
  ExpectPoolMatches("MaxPool", c, 5);
}

TEST(CpuPoolTest, GlobalPoolsMatchReference) {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{2, 3, 7}, {1, 16, 7, 7}, {2, 4, 3, 5, 2}, {1, 3}}) {
      GraphBuilder g("g");
      g.Input("x").Node(op, {"x"}, {"y"}).Output("y");
      ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats(shape, 9)}});
    }
  }
}

TEST(CpuPoolTest, GlobalAveragePoolGivesTheReferencesValues) {
  // Float sums in index order, as the reference's: the same floats, NaN,
  // infinities and sums that overflow included; plane counts around the
  // 16 planes summed at once, at one and two threads.
  GraphBuilder g("g");
  g.Input("x").Node("GlobalAveragePool", {"x"}, {"y"}).Output("y");
  const float kInf = std::numeric_limits<float>::infinity();
  uint32_t seed = 40;
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
           {1, 16, 7, 7}, {2, 21, 5, 9}, {1, 40, 112, 112}, {3, 5, 13}, {1, 17, 2, 3, 4}}) {
    runner::Tensor x = RandomFloats(shape, seed++, -5.f, 5.f);
    float* v = x.mutable_data<float>();
    const int64_t plane = x.size() / (shape[0] * shape[1]);
    v[1] = std::numeric_limits<float>::quiet_NaN();                // plane 0
    v[plane + 2] = kInf;                                           // plane 1
    v[2 * plane] = kInf, v[2 * plane + 1] = -kInf;                 // plane 2: NaN
    for (int64_t i = 0; i < plane; ++i) v[3 * plane + i] = 3e38f;  // plane 3: overflows to inf
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << x.size() << " elements, " << threads << " threads");
      auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), {{"x", x}}, 19, threads);
      auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), {{"x", x}}, 19, threads);
      ASSERT_TRUE(ref.ok() && cpu.ok());
      const runner::Tensor& a = (*ref)[0].tensor();
      const runner::Tensor& b = (*cpu)[0].tensor();
      ASSERT_EQ(a.shape(), b.shape());
      EXPECT_TRUE(std::isnan(b.data<float>()[0]) && b.data<float>()[1] == kInf &&
                  std::isnan(b.data<float>()[2]) && b.data<float>()[3] == kInf);
      EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())));
    }
  }
}

TEST(CpuPoolTest, MaxPoolOnInt8AndUint8MatchesReference) {
  for (int32_t dtype : {pb::kInt8, pb::kUint8}) {
    GraphBuilder g("g");
    g.Input("x", dtype)
        .Node("MaxPool", {"x"}, {"y"},
              {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})})
        .Output("y", dtype);
    ExpectCpuMatchesReference(g.Build(),
                              {{"x", RandomInts(dtype, {1, 3, 9, 8}, 4, dtype == pb::kInt8 ? -128 : 0,
                                                dtype == pb::kInt8 ? 127 : 255)}});
  }
}

TEST(CpuPoolTest, FallbackCasesMatchReference) {
  // Indices requested.
  GraphBuilder g("g");
  g.Input("x")
      .Node("MaxPool", {"x"}, {"y", "i"}, {AttrInts("kernel_shape", {2, 2}), AttrInt("storage_order", 1)})
      .Output("y")
      .Output("i", pb::kInt64);
  ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({1, 2, 5, 4}, 1)}});
  // Windows wholly in the padding (-inf for MaxPool, NaN for AveragePool).
  for (const char* op : {"MaxPool", "AveragePool"}) {
    GraphBuilder p("g");
    p.Input("x")
        .Node(op, {"x"}, {"y"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("pads", {3, 0, 0, 3})})
        .Output("y");
    ExpectCpuMatchesReference(p.Build(), {{"x", RandomFloats({1, 2, 3, 3}, 2)}});
  }
  // 4 spatial dims, and an empty batch.
  GraphBuilder r("g");
  r.Input("x").Node("AveragePool", {"x"}, {"y"}, {AttrInts("kernel_shape", {2, 2, 1, 2})}).Output("y");
  ExpectCpuMatchesReference(r.Build(), {{"x", RandomFloats({1, 2, 3, 3, 2, 3}, 3)}});
  ExpectCpuMatchesReference(r.Build(), {{"x", RandomFloats({0, 2, 3, 3, 2, 3}, 3)}});
  // A window larger than the input: the reference's error.
  GraphBuilder e("g");
  e.Input("x").Node("MaxPool", {"x"}, {"y"}, {AttrInts("kernel_shape", {5, 5})}).Output("y");
  auto ref = RunGraphOn(runner::Backend::kReference, e.Build(), {{"x", RandomFloats({1, 1, 3, 3}, 4)}});
  auto cpu = RunGraphOn(runner::Backend::kCpu, e.Build(), {{"x", RandomFloats({1, 1, 3, 3}, 4)}});
  ASSERT_FALSE(ref.ok());
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ref.status().code(), cpu.status().code());
}

TEST(CpuPoolTest, RepeatedRunsWithChangingShapes) {
  GraphBuilder g("g");
  g.Input("x")
      .Node("AveragePool", {"x"}, {"y"},
            {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}),
             AttrString("auto_pad", "SAME_LOWER")})
      .Output("y");
  std::vector<Feeds> runs;
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{1, 2, 8, 8}, {2, 3, 5, 11}, {1, 2, 8, 8}}) {
    runs.push_back({{"x", RandomFloats(shape, static_cast<uint32_t>(shape[3]))}});
  }
  ExpectRepeatedRunsMatch(g.Build(), runs, 1e-5);
}

}  // namespace
}  // namespace onnxkit::testing
