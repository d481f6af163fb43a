// The cpu backend's Where, Expand, ScatterElements, RoiAlign, Cast,
// HardSigmoid, Floor, Ceil, Log, Softplus, Sign, Sin, Cos, Softsign, Selu, Swish, Mish
// and InstanceNormalization kernels
// (runner/cpu/common_ops.cc) against the reference kernels: broadcasts of
// every kind, element types by size, rois of every kind, conversion edge
// cases (NaN, infinities, values beyond int64), NaN in normalized planes,
// two threads, and the cases that fall back.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

runner::Tensor RandomBools(std::vector<int64_t> shape, uint32_t seed) {
  runner::Tensor ints = RandomInts(pb::kUint8, shape, seed, 0, 1);
  std::vector<bool> v;
  for (int64_t i = 0; i < ints.size(); ++i) v.push_back(ints.data<uint8_t>()[i] != 0);
  return Bools(shape, v);
}

// Runs the graph on both backends, at one and two threads, and expects
// exactly the reference's outputs (atol, rtol 0 unless given).
void ExpectSame(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset, double atol = 0, double rtol = 0) {
  auto ref = RunGraphOn(runner::Backend::kReference, graph, feeds, opset);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (int threads : {1, 2}) {
    auto cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, opset, threads);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_EQ(ref->size(), cpu->size());
    for (size_t i = 0; i < ref->size(); ++i) {
      ExpectTensorsClose((*ref)[i].tensor(), (*cpu)[i].tensor(), atol, rtol,
                         "output " + std::to_string(i) + " at " + std::to_string(threads) + " threads");
    }
  }
}

TEST(CpuCommonOpsTest, WhereBroadcastsEveryWay) {
  struct Case {
    std::vector<int64_t> c, x, y;
  };
  std::vector<Case> cases = {{{4, 5, 6}, {4, 5, 6}, {4, 5, 6}},
                             {{1, 1, 64, 64}, {}, {2, 12, 64, 64}},  // attention mask, scalar fill
                             {{64, 1}, {1, 300}, {64, 300}},
                             {{3, 1, 7}, {1, 5, 1}, {7}},
                             {{1}, {2, 3}, {1, 3}},
                             {{2, 0, 3}, {1, 3}, {1}},
                             {{3, 70}, {3, 70}, {}},  // a scalar other value
                             {{3, 70}, {}, {}}};      // two scalars
  uint32_t seed = 1;
  for (const Case& k : cases) {
    for (int32_t type : {pb::kFloat, pb::kInt64, pb::kUint8, pb::kBool, pb::kFloat16}) {
      SCOPED_TRACE(std::to_string(k.y.size()) + "-d y, type " + std::to_string(type));
      GraphBuilder g("g");
      g.Input("c", pb::kBool).Input("x", type).Input("y", type).Node("Where", {"c", "x", "y"}, {"z"}).Output("z", type);
      auto values = [&](const std::vector<int64_t>& shape) {
        if (type == pb::kFloat) return RandomFloats(shape, seed++);
        if (type == pb::kBool) return RandomBools(shape, seed++);
        if (type == pb::kFloat16) return RandomInts(pb::kInt32, shape, seed++, 0, 1);  // replaced below
        return RandomInts(type, shape, seed++, -100, 100);
      };
      Feeds feeds = {{"c", RandomBools(k.c, seed++)}, {"x", values(k.x)}, {"y", values(k.y)}};
      if (type == pb::kFloat16) {
        // float16 bit patterns of small integers: the kernel moves 2-byte words.
        for (int i = 1; i <= 2; ++i) {
          std::vector<int64_t> shape = i == 1 ? k.x : k.y;
          runner::Tensor t = *runner::Tensor::Allocate(pb::kFloat16, shape);
          for (int64_t j = 0; j < t.size(); ++j) static_cast<uint16_t*>(t.mutable_raw())[j] = static_cast<uint16_t>(0x3c00 + j);
          feeds[static_cast<size_t>(i)].second = t;
        }
      }
      ExpectSame(g.Build(), feeds, 16);
    }
  }
}

TEST(CpuCommonOpsTest, ExpandBroadcastsAndCopies) {
  struct Case {
    std::vector<int64_t> x, shape;
  };
  std::vector<Case> cases = {{{64, 1, 1}, {2, 64, 8, 8}}, {{1}, {5, 3}},       {{3, 1}, {2, 1, 6}},
                             {{2, 3}, {2, 3}},            {{1, 300}, {70, 1}}, {{4, 1, 5}, {4, 0, 5}}};
  uint32_t seed = 50;
  for (const Case& k : cases) {
    for (int32_t type : {pb::kFloat, pb::kInt64, pb::kBool}) {
      GraphBuilder g("g");
      g.Input("x", type).Input("s", pb::kInt64).Node("Expand", {"x", "s"}, {"y"}).Output("y", type);
      runner::Tensor x = type == pb::kFloat  ? RandomFloats(k.x, seed++)
                         : type == pb::kBool ? RandomBools(k.x, seed++)
                                             : RandomInts(type, k.x, seed++, -9, 9);
      Feeds feeds = {{"x", x}, {"s", Int64s({static_cast<int64_t>(k.shape.size())}, k.shape)}};
      ExpectSame(g.Build(), feeds, 13);
    }
  }
}

// ScatterElements: every axis, negative and repeated indices (the last
// write of a column wins, as in the reference), fewer index rows than data
// rows, int32 and int64 indices, element types by size, empty indices, and
// the cases that run on the reference (indices narrower than data on
// another axis, a reduction, an index out of range: the same error).
TEST(CpuCommonOpsTest, ScatterElementsMatchesReference) {
  struct Case {
    std::vector<int64_t> data, ind;
    int64_t axis;
  };
  std::vector<Case> cases = {{{150, 64, 7, 7}, {150, 64, 7, 7}, 0},  // 470k elements: threads
                             {{40, 16, 9}, {25, 16, 9}, 0},
                             {{4, 300, 70}, {4, 500, 70}, 1},  // repeats on every column
                             {{6, 5, 129}, {6, 5, 300}, -1},
                             {{3, 4, 5}, {3, 0, 5}, 1},
                             {{3, 4, 5}, {2, 4, 5}, 2}};  // narrower: reference
  uint32_t seed = 300;
  for (const Case& k : cases) {
    const int64_t rank = static_cast<int64_t>(k.data.size());
    const int64_t dim = k.data[static_cast<size_t>(k.axis < 0 ? k.axis + rank : k.axis)];
    for (int32_t type : {pb::kFloat, pb::kInt64, pb::kUint8}) {
      for (int32_t index_type : {pb::kInt64, pb::kInt32}) {
        SCOPED_TRACE(std::to_string(k.data.size()) + "-d data, axis " + std::to_string(k.axis) + ", type " +
                     std::to_string(type) + ", indices " + std::to_string(index_type));
        GraphBuilder g("g");
        g.Input("d", type)
            .Input("i", index_type)
            .Input("u", type)
            .Node("ScatterElements", {"d", "i", "u"}, {"y"}, {AttrInt("axis", k.axis)})
            .Output("y", type);
        auto values = [&](const std::vector<int64_t>& shape) {
          return type == pb::kFloat ? RandomFloats(shape, seed++) : RandomInts(type, shape, seed++, 0, 200);
        };
        Feeds feeds = {{"d", values(k.data)},
                       {"i", RandomInts(index_type, k.ind, seed++, -dim, dim - 1)},
                       {"u", values(k.ind)}};
        ExpectSame(g.Build(), feeds, 16);
      }
    }
  }
  // An index out of range: the reference's error on both backends.
  GraphBuilder g("g");
  g.Input("d", pb::kFloat)
      .Input("i", pb::kInt64)
      .Input("u", pb::kFloat)
      .Node("ScatterElements", {"d", "i", "u"}, {"y"}, {AttrInt("axis", 0)})
      .Output("y", pb::kFloat);
  runner::Tensor ind = RandomInts(pb::kInt64, {300, 300}, 7, 0, 299);
  ind.mutable_data<int64_t>()[70000] = 300;
  Feeds feeds = {{"d", RandomFloats({300, 300}, 8)}, {"i", ind}, {"u", RandomFloats({300, 300}, 9)}};
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 16);
  auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 16, 2);
  ASSERT_FALSE(ref.ok());
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ref.status().message(), cpu.status().message());
  // A reduction runs on the reference kernel.
  GraphBuilder add("g");
  add.Input("d", pb::kFloat)
      .Input("i", pb::kInt64)
      .Input("u", pb::kFloat)
      .Node("ScatterElements", {"d", "i", "u"}, {"y"}, {AttrInt("axis", 1), AttrString("reduction", "add")})
      .Output("y", pb::kFloat);
  ExpectSame(add.Build(),
             {{"d", RandomFloats({20, 30}, 10)},
              {"i", RandomInts(pb::kInt64, {20, 50}, 11, -30, 29)},
              {"u", RandomFloats({20, 50}, 12)}},
             16);
}

// A RoiAlign graph over X [N, C, H, W] with the given attributes.
pb::GraphProto RoiAlignGraph(const std::string& mode, const std::string& ctm, int64_t out_h, int64_t out_w,
                             int64_t ratio, float scale) {
  GraphBuilder g("g");
  std::vector<pb::AttributeProto> attrs = {AttrString("mode", mode), AttrInt("output_height", out_h),
                                           AttrInt("output_width", out_w), AttrInt("sampling_ratio", ratio),
                                           AttrFloat("spatial_scale", scale)};
  if (!ctm.empty()) attrs.push_back(AttrString("coordinate_transformation_mode", ctm));
  g.Input("x", pb::kFloat)
      .Input("rois", pb::kFloat)
      .Input("b", pb::kInt64)
      .Node("RoiAlign", {"x", "rois", "b"}, {"y"}, attrs)
      .Output("y", pb::kFloat);
  return g.Build();
}

// Rois of every kind over an h x w map at `scale`: inside, partly and
// wholly outside, inverted, single points, larger than the map.
runner::Tensor Rois(int64_t count, float h, float w, float scale, uint32_t seed) {
  runner::Tensor r = RandomFloats({count, 4}, seed, -0.3f, 1.3f);
  float* v = r.mutable_data<float>();
  for (int64_t i = 0; i < count; ++i) {
    float* roi = v + i * 4;
    roi[0] *= w / scale, roi[2] *= w / scale, roi[1] *= h / scale, roi[3] *= h / scale;
    if (i % 5 != 4) {  // every fifth stays as drawn (maybe inverted)
      if (roi[0] > roi[2]) std::swap(roi[0], roi[2]);
      if (roi[1] > roi[3]) std::swap(roi[1], roi[3]);
    }
    if (i % 11 == 3) roi[2] = roi[0], roi[3] = roi[1];              // a point
    if (i % 13 == 7) roi[0] = -2 * w / scale, roi[2] = -w / scale;  // left of the map
  }
  return r;
}

TEST(CpuCommonOpsTest, RoiAlignMatchesReference) {
  uint32_t seed = 700;
  for (const std::string mode : {"avg", "max"}) {
    for (const std::string ctm : {"half_pixel", "output_half_pixel"}) {
      for (int64_t ratio : {0, 2}) {
        // Two images, an odd channel count (vector tails), 37 rois; at one
        // and two threads.
        const int64_t n = 2, c = 19, h = 6, w = 9, r = 37;
        const float scale = 0.25f;
        SCOPED_TRACE(mode + " " + ctm + " sampling_ratio " + std::to_string(ratio));
        Feeds feeds = {{"x", RandomFloats({n, c, h, w}, seed++, -3.f, 3.f)},
                       {"rois", Rois(r, h, w, scale, seed++)},
                       {"b", RandomInts(pb::kInt64, {r}, seed++, 0, n - 1)}};
        ExpectSame(RoiAlignGraph(mode, ctm, 3, 4, ratio, scale), feeds, 16, 1e-5, 1e-5);
        // NaN and infinities in X reach (or, in max mode, are passed over
        // by) the same bins as in the reference.
        float* x = feeds[0].second.mutable_data<float>();
        x[5] = std::numeric_limits<float>::quiet_NaN();
        x[c * h * w + 2 * w + 4] = std::numeric_limits<float>::infinity();
        x[2 * h * w + w + 1] = -std::numeric_limits<float>::infinity();
        x[(n * c - 1) * h * w + 7] = std::numeric_limits<float>::quiet_NaN();
        ExpectSame(RoiAlignGraph(mode, ctm, 2, 2, ratio, scale), feeds, 16, 1e-5, 1e-5);
      }
    }
  }
  // Opset 10 (output_half_pixel without the attribute), a detector's
  // shapes (7 x 7 bins of 2 x 2 samples, 256 channels) large enough for
  // the threads; float arithmetic: not the reference's bits.
  Feeds big = {{"x", RandomFloats({1, 256, 10, 10}, 710)},
               {"rois", Rois(60, 10, 10, 0.03125f, 711)},
               {"b", RandomInts(pb::kInt64, {60}, 712, 0, 0)}};
  pb::GraphProto graph = RoiAlignGraph("avg", "", 7, 7, 2, 0.03125f);
  ExpectSame(graph, big, 10, 1e-5, 1e-5);
  auto ref = RunGraphOn(runner::Backend::kReference, graph, big, 10);
  auto cpu = RunGraphOn(runner::Backend::kCpu, graph, big, 10);
  ASSERT_TRUE(ref.ok() && cpu.ok());
  int64_t differ = 0;
  const runner::Tensor& a = (*ref)[0].tensor();
  for (int64_t i = 0; i < a.size(); ++i) differ += a.data<float>()[i] != (*cpu)[0].tensor().data<float>()[i];
  EXPECT_GT(differ, 0);
  // No rois; an empty map (every sample outside it).
  ExpectSame(graph,
             {{"x", RandomFloats({1, 4, 5, 5}, 713)},
              {"rois", RandomFloats({0, 4}, 714)},
              {"b", RandomInts(pb::kInt64, {0}, 715, 0, 0)}},
             16);
  ExpectSame(RoiAlignGraph("max", "half_pixel", 2, 2, 0, 1.f),
             {{"x", RandomFloats({1, 4, 0, 5}, 716)},
              {"rois", RandomFloats({3, 4}, 717, 0.f, 4.f)},
              {"b", RandomInts(pb::kInt64, {3}, 718, 0, 0)}},
             16);
  // A batch index out of range and an adaptive grid too large: the
  // reference's errors on both backends.
  for (int which : {0, 1}) {
    runner::Tensor rois = RandomFloats({4, 4}, 719, 0.f, 8.f);
    runner::Tensor b = RandomInts(pb::kInt64, {4}, 720, 0, 0);
    if (which == 0) b.mutable_data<int64_t>()[2] = 1;
    if (which == 1) rois.mutable_data<float>()[6] = 1e30f;
    Feeds bad = {{"x", RandomFloats({1, 3, 8, 8}, 721)}, {"rois", rois}, {"b", b}};
    pb::GraphProto adaptive = RoiAlignGraph("avg", "half_pixel", 2, 2, 0, 1.f);
    auto ref_bad = RunGraphOn(runner::Backend::kReference, adaptive, bad, 16);
    auto cpu_bad = RunGraphOn(runner::Backend::kCpu, adaptive, bad, 16, 2);
    ASSERT_FALSE(ref_bad.ok());
    ASSERT_FALSE(cpu_bad.ok());
    EXPECT_EQ(ref_bad.status().message(), cpu_bad.status().message());
  }
}

TEST(CpuCommonOpsTest, CastFloatToIntegersAndBackAsTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = {nan,   inf,    -inf,  1e20f, -1e20f, 0x1p63f, -0x1p63f, 0x1p64f, 3e9f, -3e9f,
                                -0.5f, 2.9f,   -2.9f, 0.f,   -0.f,   1e-40f,  65504.f,  -1.f,    0.5f, 2147483520.f};
  runner::Tensor x = RandomFloats({1000}, 1, -1e4f, 1e4f);
  for (size_t i = 0; i < special.size(); ++i) x.mutable_data<float>()[i * 37] = special[i];
  for (int32_t to : {pb::kInt64, pb::kInt32, pb::kBool}) {
    GraphBuilder g("g");
    g.Input("x").Node("Cast", {"x"}, {"y"}, {AttrInt("to", to)}).Output("y", to);
    ExpectSame(g.Build(), {{"x", x}}, 13);
  }
  // To float: int64 beyond 2^53 (rounded through double, as the reference),
  // int32, int8, uint8, bool.
  runner::Tensor big = RandomInts(pb::kInt64, {512}, 2, std::numeric_limits<int64_t>::min() / 2,
                                  std::numeric_limits<int64_t>::max() / 2);
  big.mutable_data<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  big.mutable_data<int64_t>()[1] = std::numeric_limits<int64_t>::min();
  big.mutable_data<int64_t>()[2] = (int64_t{1} << 53) + 1;
  for (const runner::Tensor& t : {big, RandomInts(pb::kInt32, {300}, 3, -100000, 100000),
                                  RandomInts(pb::kInt8, {300}, 4, -128, 127), RandomInts(pb::kUint8, {300}, 5, 0, 255),
                                  RandomBools({300}, 6)}) {
    GraphBuilder g("g");
    g.Input("x", t.dtype()).Node("Cast", {"x"}, {"y"}, {AttrInt("to", pb::kFloat)}).Output("y");
    ExpectSame(g.Build(), {{"x", t}}, 13);
  }
  // Tiny tensors run on the reference kernel.
  GraphBuilder s("g");
  s.Input("x").Node("Cast", {"x"}, {"y"}, {AttrInt("to", pb::kInt64)}).Output("y", pb::kInt64);
  ExpectSame(s.Build(), {{"x", RandomFloats({3}, 7, -5.f, 5.f)}}, 13);
}

// float32 to and from float16 and bfloat16: the reference's bits, NaN
// payloads, signed zeros, subnormals, ties and overflow included; every
// 16-bit pattern back to float32.
TEST(CpuCommonOpsTest, CastBetweenFloatAndHalvesBitForBit) {
  auto expect_same_bits = [](const pb::GraphProto& graph, const runner::Tensor& x) {
    auto ref = RunGraphOn(runner::Backend::kReference, graph, {{"x", x}}, 13);
    ASSERT_TRUE(ref.ok()) << ref.status();
    for (int threads : {1, 2}) {
      auto cpu = RunGraphOn(runner::Backend::kCpu, graph, {{"x", x}}, 13, threads);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      const runner::Tensor& r = (*ref)[0].tensor();
      const runner::Tensor& c = (*cpu)[0].tensor();
      ASSERT_EQ(r.dtype(), c.dtype());
      ASSERT_EQ(r.size(), c.size());
      const size_t width = r.dtype() == pb::kFloat ? 4 : 2;
      for (int64_t i = 0; i < r.size(); ++i) {
        ASSERT_EQ(std::memcmp(static_cast<const char*>(r.raw()) + i * width,
                              static_cast<const char*>(c.raw()) + i * width, width),
                  0)
            << "element " << i << " at " << threads << " threads";
      }
    }
  };
  const std::vector<uint32_t> special = {
      0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fc02001u, 0xff812345u, 0x7f800000u, 0xff800000u, 0x00000000u,
      0x80000000u, 0x00000001u, 0x33000000u, 0x33000001u, 0x387fc000u, 0x38800000u, 0x477fe000u, 0x477ff000u,
      0x477fefffu, 0x3f801000u, 0x3f803000u, 0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0xc7800000u};
  runner::Tensor x = RandomFloats({3001}, 21, -70000.f, 70000.f);
  for (size_t i = 0; i < special.size(); ++i) {
    std::memcpy(x.mutable_data<float>() + i * 101, &special[i], 4);
    std::memcpy(x.mutable_data<float>() + i * 101 + 1, &special[i],
                4);  // inside a group of 8 without NaN too
  }
  runner::Tensor small = RandomFloats({3001}, 22, -1e-4f, 1e-4f);
  for (int32_t to : {pb::kFloat16, pb::kBfloat16}) {
    GraphBuilder g("g");
    g.Input("x").Node("Cast", {"x"}, {"y"}, {AttrInt("to", to)}).Output("y", to);
    SCOPED_TRACE(to);
    expect_same_bits(g.Build(), x);
    expect_same_bits(g.Build(), small);
    // Every 16-bit pattern back to float32.
    absl::StatusOr<runner::Tensor> all = runner::Tensor::Allocate(to, {65536});
    ASSERT_TRUE(all.ok());
    for (uint32_t b = 0; b < 65536; ++b)
      static_cast<uint16_t*>(all->mutable_raw())[b] = static_cast<uint16_t>(b);
    GraphBuilder back("g");
    back.Input("x", to).Node("Cast", {"x"}, {"y"}, {AttrInt("to", pb::kFloat)}).Output("y");
    expect_same_bits(back.Build(), *all);
  }
}

TEST(CpuCommonOpsTest, UnaryRowsMatchTheReference) {
  runner::Tensor x = RandomFloats({3, 50, 700}, 8, -8.f, 8.f);
  const float inf = std::numeric_limits<float>::infinity();
  float* p = x.mutable_data<float>();
  p[0] = std::numeric_limits<float>::quiet_NaN(), p[1] = inf, p[2] = -inf, p[3] = -0.f, p[4] = 2.5f, p[5] = -2.5f;
  p[6] = 0.f;
  p[7] = 3e7f, p[8] = -1e30f;  // past Sin and Cos's reduced range
  for (std::string op : {"HardSigmoid", "Floor", "Ceil", "Log", "Softplus", "Sign", "Sin", "Cos", "Softsign",
                         "Selu", "Celu", "ThresholdedRelu", "Atan", "Asin", "Acos"}) {
    std::vector<pb::AttributeProto> attrs;
    if (op == "HardSigmoid") attrs = {AttrFloat("alpha", 0.1666667f), AttrFloat("beta", 0.5f)};
    GraphBuilder g("g");
    g.Input("x").Node(op, {"x"}, {"y"}, attrs).Output("y");
    SCOPED_TRACE(op);
    // Selu's and Celu's vectorized exponential: a last-bit difference at most.
    ExpectSame(g.Build(), {{"x", x}}, 13, 0, op == "Selu" || op == "Celu" ? 2e-7 : 0);
  }
  // Selu with its own alpha and gamma.
  GraphBuilder selu("g");
  selu.Input("x").Node("Selu", {"x"}, {"y"}, {AttrFloat("alpha", 2.f), AttrFloat("gamma", 0.5f)}).Output("y");
  ExpectSame(selu.Build(), {{"x", x}}, 13, 0, 2e-7);
  for (float alpha : {0.5f, 3.f}) {
    GraphBuilder celu("g");
    celu.Input("x").Node("Celu", {"x"}, {"y"}, {AttrFloat("alpha", alpha)}).Output("y");
    ExpectSame(celu.Build(), {{"x", x}}, 13, 0, 2e-7);
    GraphBuilder thresholded("g");
    thresholded.Input("x").Node("ThresholdedRelu", {"x"}, {"y"}, {AttrFloat("alpha", alpha)}).Output("y");
    ExpectSame(thresholded.Build(), {{"x", x}}, 13);
  }
  // Swish (opset 24): SwishRow's values with alpha 1 (the default too),
  // the reference kernel's with another alpha.
  for (std::optional<float> alpha :
       {std::optional<float>(), std::optional<float>(1.f), std::optional<float>(0.5f)}) {
    GraphBuilder swish("g");
    std::vector<pb::AttributeProto> attrs;
    if (alpha) attrs.push_back(AttrFloat("alpha", *alpha));
    swish.Input("x").Node("Swish", {"x"}, {"y"}, attrs).Output("y");
    ExpectSame(swish.Build(), {{"x", x}}, 24, 2e-36, 3e-7);
  }
  // Mish (opset 18), in double as the reference: a last-bit difference at most.
  GraphBuilder mish("g");
  mish.Input("x").Node("Mish", {"x"}, {"y"}).Output("y");
  runner::Tensor wide = RandomFloats({5, 1001}, 9, -120.f, 60.f);
  for (int64_t i = 0; i < 9; ++i) wide.mutable_data<float>()[i * 300] = p[i];
  ExpectSame(mish.Build(), {{"x", x}}, 18, 1e-38, 1.2e-7);
  ExpectSame(mish.Build(), {{"x", wide}}, 18, 1e-38, 1.2e-7);
  // float64 runs on the reference kernel.
  GraphBuilder d("g");
  d.Input("x", pb::kDouble).Node("Floor", {"x"}, {"y"}).Output("y", pb::kDouble);
  runner::Tensor xd = *runner::Tensor::Allocate(pb::kDouble, {4});
  for (int i = 0; i < 4; ++i) xd.mutable_data<double>()[i] = i * 0.7 - 1;
  ExpectSame(d.Build(), {{"x", xd}}, 13);
}

TEST(CpuCommonOpsTest, InstanceAndGroupNormalizationMatchReference) {
  uint32_t seed = 20;
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{2, 3, 5, 7}, {1, 16, 100}, {1, 4, 2, 3, 5}, {2, 32, 64, 64}}) {
    int64_t c = shape[1];
    GraphBuilder g("g");
    g.Input("x").Input("s").Input("b");
    g.Node("InstanceNormalization", {"x", "s", "b"}, {"y"}, {AttrFloat("epsilon", 1e-3f)}).Output("y");
    Feeds feeds = {{"x", RandomFloats(shape, seed++, -4.f, 6.f)},
                   {"s", RandomFloats({c}, seed++)},
                   {"b", RandomFloats({c}, seed++)}};
    ExpectSame(g.Build(), feeds, 13, 1e-6, 1e-5);
    // A NaN makes its plane NaN, as in the reference.
    feeds[0].second.mutable_data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
    ExpectSame(g.Build(), feeds, 13, 1e-6, 1e-5);
  }
  // Planes far from 0 (mean 1e4, spread 1), and planes whose first value
  // is an outlier 1e6 away (the statistics are taken around it first).
  for (bool outlier : {false, true}) {
    SCOPED_TRACE(outlier ? "outlier first" : "large mean");
    GraphBuilder g("g");
    g.Input("x").Input("s").Input("b");
    g.Node("InstanceNormalization", {"x", "s", "b"}, {"y"}).Output("y");
    runner::Tensor x = RandomFloats({2, 3, 64, 64}, seed++, -1.f, 1.f);
    for (int64_t i = 0; i < x.size(); ++i) {
      float& v = x.mutable_data<float>()[i];
      v = outlier ? (i % 4096 == 0 ? 1e6f : v) : 1e4f + v;
    }
    ExpectSame(g.Build(), {{"x", x}, {"s", RandomFloats({3}, seed++)}, {"b", RandomFloats({3}, seed++)}}, 13,
               1e-6, 1e-5);
  }
  // GroupNormalization: scale and bias per group (opset 18), per channel (21).
  for (int64_t opset : {18, 21}) {
    for (int64_t groups : {1, 4, 32}) {
      std::vector<int64_t> shape = {2, 32, 9, 11};
      int64_t params = opset >= 21 ? 32 : groups;
      GraphBuilder g("g");
      g.Input("x").Input("s").Input("b");
      g.Node("GroupNormalization", {"x", "s", "b"}, {"y"},
             {AttrInt("num_groups", groups), AttrFloat("epsilon", 1e-4f)})
          .Output("y");
      Feeds feeds = {{"x", RandomFloats(shape, seed++, -3.f, 5.f)},
                     {"s", RandomFloats({params}, seed++)},
                     {"b", RandomFloats({params}, seed++)}};
      SCOPED_TRACE("GroupNormalization-" + std::to_string(opset) + ", " + std::to_string(groups) + " groups");
      ExpectSame(g.Build(), feeds, opset, 1e-6, 1e-5);
    }
  }
  // Scale of the wrong size: the reference's error.
  GraphBuilder g("g");
  g.Input("x").Input("s").Input("b").Node("InstanceNormalization", {"x", "s", "b"}, {"y"}).Output("y");
  Feeds bad = {{"x", RandomFloats({1, 3, 4}, 1)}, {"s", RandomFloats({4}, 2)}, {"b", RandomFloats({3}, 3)}};
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), bad, 13);
  auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), bad, 13);
  ASSERT_FALSE(ref.ok());
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ref.status().code(), cpu.status().code());
}

}  // namespace
}  // namespace onnxkit::testing
