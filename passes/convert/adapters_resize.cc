// Adapters for Upsample and Resize, and Pad-18's axes:
//   Upsample 9:   scales attribute <-> input
//   Upsample 10:  deprecated; Resize-10 has its exact signature and meaning
//   Resize 11:    roi input added; Resize-10 behaves as
//                 coordinate_transformation_mode="asymmetric"; its nearest
//                 rounds the source coordinate up on shrinking axes and down
//                 on the others: nearest_mode "floor" when no constant scale
//                 is below 1, "ceil" when none is above 1, an expansion when
//                 both (scales that are not constant get "floor": Upsample's
//                 are at least 1, and verification runs both models)
//   Resize 13:    roi and scales became optional: filled with empty tensors
//   Resize 19:    half_pixel_symmetric is half_pixel where the output length
//                 is exactly scale * in (sizes, or whole products)
//   Pad 18:       axes input: folded into full-rank pads going down
// A Resize that no older Resize or Upsample can say (cubic, coordinate modes
// other than asymmetric, axes, antialias, keep_aspect_ratio_policy, sizes,
// half_pixel_symmetric) is expanded instead, for a static input shape and
// constant scales/sizes/roi: per resized axis, Gathers of the input
// positions each output coordinate reads, weighted and summed, with the
// positions and weights of the reference kernel's geometry:
//   Y_axis = sum_k Gather(X, index_k, axis) * weight_k  (+ extrapolation)
// Before (up):  %y = Upsample[mode="nearest", scales=[1,1,2,2]](%x)  (opset 8)
// After:        %y = Resize[mode="nearest", coordinate_transformation_mode=
//                 "asymmetric", nearest_mode="floor"](%x, %roi=[], %scales) (opset 11)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/reference/float_types.h"
#include "runner/reference/resize_geometry.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

absl::StatusOr<ir::Value*> AddFloats(Step& step, std::string_view hint, const std::vector<float>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(pb::kFloat, {static_cast<int64_t>(v.size())}));
  if (!v.empty()) std::memcpy(t.mutable_raw(), v.data(), v.size() * sizeof(float));
  return AddConstant(*step.graph, hint, t);
}

absl::Status Insert(Step& step, int index, ir::Value* v) {
  std::vector<ir::Value*> rest(step.node->inputs().begin() + index, step.node->inputs().end());
  while (step.node->num_inputs() > index) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, index));
  ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, v));
  for (ir::Value* r : rest) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, r));
  return absl::OkStatus();
}

// The constant tensor of input `i`; an undefined tensor when absent.
absl::StatusOr<runner::Tensor> OptionalConstant(Step& step, int i) {
  if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) return runner::Tensor();
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*step.node->input(i), *step.ctx);
  if (!t.ok()) return Block(absl::StrCat("input '", step.node->input(i)->name(), "' is not constant"));
  return t;
}

// A constant of `elem` (float, double, float16) with `shape`, from doubles.
absl::StatusOr<ir::Value*> AddWeights(Step& step, std::string_view hint, int32_t elem,
                                      const std::vector<int64_t>& shape, const std::vector<double>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(elem, shape));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (elem) {
      case pb::kDouble: t.mutable_data<double>()[i] = v[i]; break;
      case pb::kFloat: t.mutable_data<float>()[i] = static_cast<float>(v[i]); break;
      case pb::kFloat16: t.mutable_data<uint16_t>()[i] = runner::Float16FromDouble(v[i]).bits; break;
      default: return Block("weights of this element type cannot be built");
    }
  }
  return AddConstant(*step.graph, hint, t);
}

constexpr size_t kMaxTaps = 64;

absl::Status ExpandResize(Step& step) {
  namespace rz = runner::reference::resize;
  ir::Node* node = step.node;
  ir::Value* x = node->input(0);
  std::optional<std::vector<int64_t>> shape = KnownShape(*x, *step.ctx);
  if (!shape || std::any_of(shape->begin(), shape->end(), [](int64_t d) { return d < 0; })) {
    return Block("expanding it into Gathers needs the input's static shape");
  }
  std::optional<int32_t> elem = ElemType(*x, *step.ctx);
  if (!elem) return Block("expanding it into Gathers needs the input's element type");
  const bool is_float = *elem == pb::kFloat || *elem == pb::kDouble || *elem == pb::kFloat16;
  const bool upsample = node->op_type() == "Upsample";
  const int64_t version = step.from->since_version();
  absl::StatusOr<rz::Config> parsed = upsample ? rz::ParseUpsample(*node, version) : rz::ParseResize(*node, version);
  if (!parsed.ok()) return Block(std::string(StdSv(parsed.status().message())));
  const rz::Config& c = *parsed;
  runner::Tensor scales, sizes, roi;
  if (c.form == rz::Form::kScalesInput) {
    ONNXKIT_ASSIGN_OR_RETURN(scales, OptionalConstant(step, 1));
  } else if (c.form == rz::Form::kResize) {
    ONNXKIT_ASSIGN_OR_RETURN(scales, OptionalConstant(step, 2));
    ONNXKIT_ASSIGN_OR_RETURN(sizes, OptionalConstant(step, 3));
    if (c.coord == rz::Coord::kTfCropAndResize) {
      ONNXKIT_ASSIGN_OR_RETURN(roi, OptionalConstant(step, 1));
    }
  }
  absl::StatusOr<rz::Geometry> g = rz::ResolveGeometry(c, *shape, scales.defined() ? &scales : nullptr,
                                                       sizes.defined() ? &sizes : nullptr,
                                                       roi.defined() ? &roi : nullptr);
  if (!g.ok()) return Block(std::string(StdSv(g.status().message())));
  const size_t rank = shape->size();
  ir::Value* cur = x;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t in = (*shape)[d], out = g->out_shape[d];
    if (out > (int64_t{1} << 24)) return Block(absl::StrCat("axis ", d, " resizes to ", out, " elements"));
    if (in == 0 && out > 0) return Block(absl::StrCat("axis ", d, " is empty"));
    std::vector<rz::Taps> taps = rz::AxisTaps(c, in, out, g->scales[d], g->roi_start[d], g->roi_end[d]);
    if (static_cast<int64_t>(taps.size()) != out) return Block("the resize geometry is inconsistent");
    // An axis that maps every coordinate onto itself stays as it is.
    bool identity = in == out;
    size_t k_max = 0;
    bool outside = false;
    for (int64_t j = 0; j < out; ++j) {
      const rz::Taps& t = taps[static_cast<size_t>(j)];
      const bool empty = t.outside || t.index.empty();
      outside = outside || empty;
      size_t used = c.mode == rz::Mode::kNearest ? std::min<size_t>(t.index.size(), 1) : t.index.size();
      if (!empty) k_max = std::max(k_max, used);
      bool same = !empty && used == 1 && t.index[0] == j &&
                  (c.mode == rz::Mode::kNearest || t.weight[0] == 1.0);
      if (!same && c.mode != rz::Mode::kNearest && !empty) {
        // Several taps whose weights put everything on j.
        double w_j = 0, w_other = 0;
        for (size_t k = 0; k < t.index.size(); ++k) (t.index[k] == j ? w_j : w_other) += std::abs(t.weight[k]);
        same = w_j == 1.0 && w_other == 0.0;
      }
      identity = identity && same;
    }
    if (identity) continue;
    if (k_max > kMaxTaps) return Block(absl::StrCat("axis ", d, " reads ", k_max, " input positions per output"));
    // The index and weight constants hold out x taps values.
    if (out * static_cast<int64_t>(std::max<size_t>(k_max, 1)) > (int64_t{1} << 22)) {
      return Block(absl::StrCat("axis ", d, " is too large to expand (", out, " outputs x ", k_max, " taps)"));
    }
    const bool weighted = c.mode != rz::Mode::kNearest || outside;
    if (weighted && !is_float) {
      return Block("expanding it into Gathers computes weighted sums, which needs a float input");
    }
    // The weights broadcast along axis d: shape [out, 1, ..., 1].
    std::vector<int64_t> wshape{out};
    for (size_t r = d + 1; r < rank; ++r) wshape.push_back(1);
    ir::Value* sum = nullptr;
    for (size_t k = 0; k < std::max<size_t>(k_max, 1); ++k) {
      std::vector<int64_t> index(static_cast<size_t>(out), 0);
      std::vector<double> weight(static_cast<size_t>(out), 0.0);
      for (int64_t j = 0; j < out; ++j) {
        const rz::Taps& t = taps[static_cast<size_t>(j)];
        if (t.outside || k >= t.index.size()) continue;
        index[static_cast<size_t>(j)] = std::clamp<int64_t>(t.index[k], 0, std::max<int64_t>(in - 1, 0));
        weight[static_cast<size_t>(j)] = c.mode == rz::Mode::kNearest ? 1.0 : t.weight[k];
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * idx, AddInts(step, "resize_index", index));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * gather, AddBefore(step, "Gather", {cur, idx}, 1,
                                                           {IntAttr("axis", static_cast<int64_t>(d))}));
      ir::Value* term = gather->output(0);
      if (weighted) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, AddWeights(step, "resize_weight", *elem, wshape, weight));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Node * m, AddBefore(step, "Mul", {term, w}, 1));
        term = m->output(0);
      }
      if (sum == nullptr) {
        sum = term;
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Node * a, AddBefore(step, "Add", {sum, term}, 1));
        sum = a->output(0);
      }
    }
    if (outside && c.extrapolation != 0) {
      std::vector<double> fill(static_cast<size_t>(out), 0.0);
      for (int64_t j = 0; j < out; ++j) {
        const rz::Taps& t = taps[static_cast<size_t>(j)];
        if (t.outside || t.index.empty()) fill[static_cast<size_t>(j)] = c.extrapolation;
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, AddWeights(step, "resize_extrapolation", *elem, wshape, fill));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * a, AddBefore(step, "Add", {sum, e}, 1));
      sum = a->output(0);
    }
    cur = sum;
  }
  if (cur == x) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * id, AddBefore(step, "Identity", {x}, 1));
    cur = id->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, cur));
  step.replaced = true;
  return absl::OkStatus();
}

// Whether the constant float scales of input `i` shrink (< 1) and grow (> 1)
// some axis; neither when they are not constant.
struct ScaleDirections {
  bool shrinks = false, grows = false;
};

ScaleDirections Directions(Step& step, int i) {
  ScaleDirections d;
  if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) return d;
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*step.node->input(i), *step.ctx);
  if (!t.ok() || t->dtype() != pb::kFloat) return d;
  for (int64_t k = 0; k < t->size(); ++k) {
    d.shrinks = d.shrinks || t->data<float>()[k] < 1;
    d.grows = d.grows || t->data<float>()[k] > 1;
  }
  return d;
}

// The step, or the expansion where the step has no equivalent.
absl::Status ResizeStepOrExpand(Step& step, AdapterFn fn) {
  absl::Status st = fn(step);
  if (!IsBlock(st) || step.replaced) return st;
  absl::Status expanded = ExpandResize(step);
  if (expanded.ok() || !IsBlock(expanded)) return expanded;
  std::string a(StdSv(st.message())), b(StdSv(expanded.message()));
  return Block(absl::StrCat(a.substr(a.find(": ") + 2), "; ", b.substr(b.find(": ") + 2)));
}

// half_pixel_symmetric shifts the source coordinate by in/2 * (1 - out /
// (scale * in)): nothing when the output length is scale * in exactly, that
// is for sizes without keep_aspect_ratio_policy, or for constant scales
// that are whole or whose products with the static length are. It is
// half_pixel there.
bool SymmetricIsHalfPixel(Step& step) {
  const ir::Attribute* policy = step.node->FindAttribute("keep_aspect_ratio_policy");
  if (step.node->FindAttribute("axes") != nullptr) return false;
  const bool stretch = policy == nullptr || policy->proto.s == "stretch";
  auto sizes = OptionalConstant(step, 3);
  if (sizes.ok() && sizes->defined() && sizes->size() > 0) return stretch;
  if (step.node->num_inputs() > 3 && step.node->input(3) != nullptr && !sizes.ok()) return false;
  auto scales = OptionalConstant(step, 2);
  if (!scales.ok() || !scales->defined() || scales->dtype() != pb::kFloat) return false;
  std::optional<std::vector<int64_t>> shape = KnownShape(*step.node->input(0), *step.ctx);
  for (int64_t k = 0; k < scales->size(); ++k) {
    const double scale = scales->data<float>()[k];
    if (scale == std::floor(scale)) continue;  // whole for any length
    if (!shape || static_cast<int64_t>(shape->size()) != scales->size() || (*shape)[k] < 0) return false;
    const double product = scale * static_cast<double>((*shape)[k]);
    if (product != std::floor(product)) return false;
  }
  return true;
}

absl::Status ResizeDown19Step(Step& step) {
  ir::Attribute* mode = step.node->FindAttribute("coordinate_transformation_mode");
  if (mode != nullptr && mode->proto.ref_attr_name.empty() && mode->proto.s == "half_pixel_symmetric" &&
      SymmetricIsHalfPixel(step)) {
    mode->proto.s = "half_pixel";
  }
  return GenericStep(step);
}

}  // namespace

absl::Status ResizeDown19(Step& step) { return ResizeStepOrExpand(step, ResizeDown19Step); }

absl::Status ResizeDown18(Step& step) { return ResizeStepOrExpand(step, GenericStep); }

absl::Status UpsampleUp9(Step& step) {
  const ir::Attribute* a = step.node->FindAttribute("scales");
  if (a == nullptr) return Block("attribute scales missing");
  std::vector<float> scales = a->proto.floats;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AddFloats(step, "scales", scales));
  ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, s));
  step.node->RemoveAttribute("scales");
  return GenericStep(step);
}

absl::Status UpsampleDown9(Step& step) {
  auto t = ConstantTensor(*step.node->input(1), *step.ctx);
  if (!t.ok() || t->dtype() != pb::kFloat) return Block("input scales is not a constant float tensor");
  pb::AttributeProto a;
  a.name = "scales";
  a.type = pb::kAttrFloats;
  a.floats.assign(t->data<float>(), t->data<float>() + t->size());
  step.node->SetAttribute(std::move(a));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  return GenericStep(step);
}

absl::Status UpsampleToResize(Step& step) {
  step.node->set_op_type("Resize");
  step.to = ops::FindSchema("", "Resize", 10);
  return GenericStep(step);
}

namespace {

absl::Status ResizeToUpsampleStep(Step& step) {
  // Upsample's scales are at least 1; scales only known at run time are
  // left to verification.
  if (Directions(step, 1).shrinks) return Block("Upsample cannot shrink an axis (a scale below 1)");
  step.node->set_op_type("Upsample");
  step.to = ops::FindSchema("", "Upsample", 9);
  return GenericStep(step);
}

}  // namespace

absl::Status ResizeToUpsample(Step& step) { return ResizeStepOrExpand(step, ResizeToUpsampleStep); }

namespace {

absl::Status ResizeUp11Step(Step& step) {
  const bool nearest = step.node->GetString("mode").value_or("nearest") == "nearest";
  const ScaleDirections d = Directions(step, 1);
  if (nearest && d.shrinks && d.grows) {
    return Block(
        "Resize-10's nearest rounds up on shrinking axes and down on growing ones, which no nearest_mode "
        "says");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * roi, AddFloats(step, "roi", {}));
  ONNXKIT_RETURN_IF_ERROR(Insert(step, 1, roi));
  step.node->SetAttribute(StringAttr("coordinate_transformation_mode", "asymmetric"));
  if (nearest) step.node->SetAttribute(StringAttr("nearest_mode", d.shrinks ? "ceil" : "floor"));
  step.check_names = false;
  return GenericStep(step);
}

}  // namespace

absl::Status ResizeUp11(Step& step) { return ResizeStepOrExpand(step, ResizeUp11Step); }

absl::Status ResizeDown11Step(Step& step) {
  std::string mode = step.node->GetString("mode").value_or("nearest");
  if (mode != "nearest" && mode != "linear") return Block(absl::StrCat("mode '", mode, "' has no Resize-10 form"));
  if (step.node->GetString("coordinate_transformation_mode").value_or("half_pixel") != "asymmetric") {
    return Block("Resize-10 only knows coordinate_transformation_mode='asymmetric'");
  }
  if (mode == "nearest") {
    // Resize-10 rounds up where an axis shrinks, down elsewhere.
    const std::string rounding = step.node->GetString("nearest_mode").value_or("round_prefer_floor");
    const ScaleDirections d = Directions(step, 2);
    if (!((rounding == "floor" && !d.shrinks) || (rounding == "ceil" && d.shrinks && !d.grows))) {
      return Block("Resize-10's nearest is nearest_mode='floor' where no axis shrinks, 'ceil' where all do");
    }
  }
  if (step.node->num_inputs() > 3 && step.node->input(3) != nullptr) return Block("sizes has no Resize-10 form");
  while (step.node->num_inputs() > 3) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 3));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  step.node->RemoveAttribute("coordinate_transformation_mode");
  step.node->RemoveAttribute("nearest_mode");
  step.check_names = false;
  return GenericStep(step);
}

absl::Status ResizeDown11(Step& step) { return ResizeStepOrExpand(step, ResizeDown11Step); }

absl::Status ResizeDown13(Step& step) {
  for (int i : {1, 2}) {
    if (i < step.node->num_inputs() && step.node->input(i) != nullptr) continue;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * empty, AddFloats(step, i == 1 ? "roi" : "scales", {}));
    while (step.node->num_inputs() <= i) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, nullptr));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, empty));
  }
  return GenericStep(step);
}

absl::Status PadDown19(Step& step) {
  if (step.node->GetString("mode").value_or("constant") == "wrap")
    return Block("mode 'wrap' has no Pad before 19");
  return GenericStep(step);
}

absl::Status PadDown18(Step& step) {
  if (step.node->num_inputs() < 4 || step.node->input(3) == nullptr) return GenericStep(step);
  std::optional<std::vector<int64_t>> axes = ConstInts(step, 3);
  std::optional<std::vector<int64_t>> pads = ConstInts(step, 1);
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (!axes || !pads || !rank) return Block("axes needs constant axes and pads and a known rank");
  size_t n = axes->size();
  if (pads->size() != 2 * n) return Block("pads do not match axes");
  std::vector<int64_t> full(static_cast<size_t>(2 * *rank), 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = (*axes)[i] < 0 ? (*axes)[i] + *rank : (*axes)[i];
    if (a < 0 || a >= *rank) return Block("axis out of range");
    full[static_cast<size_t>(a)] = (*pads)[i];
    full[static_cast<size_t>(a + *rank)] = (*pads)[i + n];
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * p, AddInts(step, "pads", full));
  ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 1, p));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 3));
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
