// Adapters for Upsample and Resize, and Pad-18's axes:
//   Upsample 9:   scales attribute <-> input
//   Upsample 10:  deprecated; Resize-10 has its exact signature and meaning
//   Resize 11:    roi input added; Resize-10 behaves as
//                 coordinate_transformation_mode="asymmetric" (nearest: floor)
//   Resize 13:    roi and scales became optional: filled with empty tensors
//   Pad 18:       axes input: folded into full-rank pads going down
// Before (up):  %y = Upsample[mode="nearest", scales=[1,1,2,2]](%x)  (opset 8)
// After:        %y = Resize[mode="nearest", coordinate_transformation_mode=
//                 "asymmetric", nearest_mode="floor"](%x, %roi=[], %scales) (opset 11)
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
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

}  // namespace

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

absl::Status ResizeToUpsample(Step& step) {
  step.node->set_op_type("Upsample");
  step.to = ops::FindSchema("", "Upsample", 9);
  return GenericStep(step);
}

absl::Status ResizeUp11(Step& step) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * roi, AddFloats(step, "roi", {}));
  ONNXKIT_RETURN_IF_ERROR(Insert(step, 1, roi));
  step.node->SetAttribute(StringAttr("coordinate_transformation_mode", "asymmetric"));
  if (step.node->GetString("mode").value_or("nearest") == "nearest") {
    step.node->SetAttribute(StringAttr("nearest_mode", "floor"));
  }
  step.check_names = false;
  return GenericStep(step);
}

absl::Status ResizeDown11(Step& step) {
  std::string mode = step.node->GetString("mode").value_or("nearest");
  if (mode != "nearest" && mode != "linear") return Block(absl::StrCat("mode '", mode, "' has no Resize-10 form"));
  if (step.node->GetString("coordinate_transformation_mode").value_or("half_pixel") != "asymmetric") {
    return Block("Resize-10 only knows coordinate_transformation_mode='asymmetric'");
  }
  if (mode == "nearest" && step.node->GetString("nearest_mode").value_or("round_prefer_floor") != "floor") {
    return Block("Resize-10 only knows nearest_mode='floor'");
  }
  if (step.node->num_inputs() > 3 && step.node->input(3) != nullptr) return Block("sizes has no Resize-10 form");
  while (step.node->num_inputs() > 3) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 3));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  step.node->RemoveAttribute("coordinate_transformation_mode");
  step.node->RemoveAttribute("nearest_mode");
  step.check_names = false;
  return GenericStep(step);
}

absl::Status ResizeDown13(Step& step) {
  for (int i : {1, 2}) {
    if (i < step.node->num_inputs() && step.node->input(i) != nullptr) continue;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * empty, AddFloats(step, i == 1 ? "roi" : "scales", {}));
    while (step.node->num_inputs() <= i) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, nullptr));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, empty));
  }
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
