// Tests of the flattened Resize taps (reference::resize::FlattenTaps) that
// the cuda Resize sums on the device: the same loop, run here in float,
// must give the reference backend's Resize outputs in every mode, up and
// down, with antialias, crop-and-resize and nearest rounding modes.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "runner/reference/resize_geometry.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

namespace rs = runner::reference::resize;

// The cuda kernel's loop over FlatTaps for every output element.
std::vector<float> SumTaps(const rs::FlatTaps& f, const std::vector<int64_t>& out_shape, const float* x,
                           float extrapolation) {
  const size_t rank = out_shape.size();
  int64_t n = 1;
  for (int64_t d : out_shape) n *= d;
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> first(rank), count(rank), k(rank, 0);
    bool outside = false;
    int64_t rest = o;
    for (size_t d = rank; d-- > 0;) {
      const auto c = static_cast<size_t>(rest % out_shape[d]);
      rest /= out_shape[d];
      first[d] = f.first[d][c];
      count[d] = f.count[d][c];
      outside = outside || count[d] <= 0;
    }
    if (outside) {
      y[static_cast<size_t>(o)] = extrapolation;
      continue;
    }
    float sum = 0.f;
    while (true) {
      float w = 1.f;
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d) {
        w *= f.weight[d][static_cast<size_t>(first[d] + k[d])];
        src += f.offset[d][static_cast<size_t>(first[d] + k[d])];
      }
      sum += w * x[src];
      size_t d = rank;
      while (d > 0 && ++k[d - 1] == count[d - 1]) k[--d] = 0;
      if (d == 0) break;
    }
    y[static_cast<size_t>(o)] = sum;
  }
  return y;
}

struct Case {
  std::vector<pb::AttributeProto> attrs;
  std::vector<float> scales;
  std::vector<int64_t> sizes;
};

TEST(ResizeFlatTapsTest, SummingTheTapsGivesTheReferenceResize) {
  const std::vector<int64_t> x_shape = {2, 3, 5, 7};
  const runner::Tensor x = RandomFloats(x_shape, 201);
  const std::vector<float> roi = {0, 0, 0.2f, 0.1f, 1, 1, 0.9f, 1.2f};
  const std::vector<Case> cases = {
      {{AttrString("mode", "nearest")}, {1, 1, 2, 3}, {}},
      {{AttrString("mode", "nearest"), AttrString("nearest_mode", "ceil"),
        AttrString("coordinate_transformation_mode", "asymmetric")},
       {1, 1, 0.5f, 0.6f},
       {}},
      {{AttrString("mode", "nearest"), AttrString("nearest_mode", "round_prefer_ceil")}, {}, {2, 3, 9, 4}},
      {{AttrString("mode", "linear")}, {1, 1, 1.5f, 2}, {}},
      {{AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")}, {}, {2, 3, 3, 11}},
      {{AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "pytorch_half_pixel"),
        AttrInt("antialias", 1)},
       {1, 1, 0.5f, 0.4f},
       {}},
      {{AttrString("mode", "cubic")}, {1, 1, 2, 1.25f}, {}},
      {{AttrString("mode", "cubic"), AttrInt("exclude_outside", 1), AttrFloat("cubic_coeff_a", -0.5f)},
       {1, 1, 0.8f, 1.4f},
       {}},
      {{AttrString("mode", "cubic"), AttrInt("antialias", 1)}, {1, 1, 0.6f, 0.3f}, {}},
      {{AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "tf_crop_and_resize"),
        AttrFloat("extrapolation_value", -2.f)},
       {},
       {2, 3, 4, 6}},
      {{AttrString("mode", "linear"), AttrInts("axes", {3, 2}), AttrString("keep_aspect_ratio_policy", "not_larger")},
       {},
       {4, 4}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& c = cases[i];
    GraphBuilder b("g");
    b.Input("x", pb::kFloat, {x_shape}).Initializer(InitializerFrom("roi", Floats({8}, roi)));
    std::vector<std::string> inputs = {"x", "roi"};
    runner::Tensor scales_t, sizes_t;
    if (!c.scales.empty()) {
      scales_t = Floats({static_cast<int64_t>(c.scales.size())}, c.scales);
      b.Initializer(InitializerFrom("scales", scales_t));
      inputs.push_back("scales");
    } else {
      sizes_t = Int64s({static_cast<int64_t>(c.sizes.size())}, c.sizes);
      b.Initializer(InitializerFrom("sizes", sizes_t));
      inputs.push_back("");
      inputs.push_back("sizes");
    }
    b.Node("Resize", inputs, {"y"}, c.attrs, "resize").Output("y", pb::kFloat);
    pb::GraphProto g = b.Build();
    auto want = RunGraphOn(runner::Backend::kReference, g, {{"x", x}}, 19);
    ASSERT_TRUE(want.ok()) << want.status();
    // The geometry the kernel would resolve, from the node itself.
    auto model = ir::FromProto(ModelFromGraph(g, 19));
    ASSERT_TRUE(model.ok()) << model.status();
    const ir::Node* node = nullptr;
    for (const ir::Node* n : (*model)->graph().nodes()) node = n;
    ASSERT_NE(node, nullptr);
    auto config = rs::ParseResize(*node, 19);
    ASSERT_TRUE(config.ok()) << config.status();
    // roi counts for tf_crop_and_resize only (as ResolveGeometry of a
    // kernel context reads it).
    runner::Tensor roi_t = Floats({8}, roi);
    const bool crop = config->coord == rs::Coord::kTfCropAndResize;
    auto geometry = rs::ResolveGeometry(*config, x_shape, c.scales.empty() ? nullptr : &scales_t,
                                        c.sizes.empty() ? nullptr : &sizes_t, crop ? &roi_t : nullptr);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    const runner::Tensor& ref = (*want)[0].tensor();
    ASSERT_EQ(ref.shape(), geometry->out_shape);
    std::vector<float> got = SumTaps(rs::FlattenTaps(*config, x_shape, *geometry), geometry->out_shape,
                                     x.data<float>(), static_cast<float>(config->extrapolation));
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref.size());
    for (int64_t j = 0; j < ref.size(); ++j) {
      const float r = ref.data<float>()[j];
      EXPECT_NEAR(got[static_cast<size_t>(j)], r, 1e-5 + 1e-5 * std::fabs(r)) << "element " << j;
    }
  }
}

}  // namespace
}  // namespace onnxkit::testing
