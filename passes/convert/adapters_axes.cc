// Adapters for axes and sizes that moved between attributes and inputs:
// Reduce* axes (ReduceSum 13, the others 18), Squeeze/Unsqueeze axes (13),
// Split split (13) and num_outputs (18), TopK k (10), Slice (10).
// Before (up):  %y = ReduceMean[axes=[1]](%x)           (opset 17)
// After:        %y = ReduceMean(%x, %axes = [1])         (opset 18)
// Going down, the input must be constant; it becomes the attribute again.
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

// Moves INTS attribute `attr` to input `index` (omitted inputs before it
// are padded); nothing when the attribute is absent.
absl::Status AttrToInput(Step& step, std::string_view attr, int index) {
  std::optional<std::vector<int64_t>> v = step.node->GetInts(attr);
  if (!v) return absl::OkStatus();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddInts(step, attr, *v));
  while (step.node->num_inputs() < index) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, nullptr));
  if (step.node->num_inputs() == index) {
    ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, c));
  } else {
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, index, c));
  }
  step.node->RemoveAttribute(attr);
  return absl::OkStatus();
}

// Moves constant input `index` to INTS attribute `attr`.
absl::Status InputToAttr(Step& step, std::string_view attr, int index) {
  if (index >= step.node->num_inputs() || step.node->input(index) == nullptr) return absl::OkStatus();
  std::optional<std::vector<int64_t>> v = ConstInts(step, index);
  if (!v) return Block(absl::StrCat("input '", step.node->input(index)->name(), "' (", Sv(attr), ") is not constant"));
  // Empty (Squeeze's or a reduction's "all axes"): the attribute left out,
  // as an INTS attribute without values is malformed.
  if (!v->empty()) step.node->SetAttribute(IntsAttr(std::string(attr), *v));
  return step.graph->SetInput(step.node, index, nullptr);
}

}  // namespace

absl::Status AxesAttrToInput(Step& step) {
  ONNXKIT_RETURN_IF_ERROR(AttrToInput(step, "axes", 1));
  return GenericStep(step);
}

absl::Status AxesInputToAttr(Step& step) {
  std::optional<int64_t> noop = step.node->GetInt("noop_with_empty_axes");
  bool has_axes = step.node->num_inputs() > 1 && step.node->input(1) != nullptr;
  if (noop && *noop != 0) {
    std::optional<std::vector<int64_t>> v = has_axes ? ConstInts(step, 1) : std::vector<int64_t>{};
    if (!v) return Block("noop_with_empty_axes=1 with axes computed at run time has no older equivalent");
    if (v->empty()) {
      // Nothing reduced: the input itself for the reductions whose one-element
      // case is the element (not the L1/L2 norms, logs and squares).
      const std::string& op = step.node->op_type();
      if (op != "ReduceSum" && op != "ReduceMean" && op != "ReduceMax" && op != "ReduceMin" &&
          op != "ReduceProd") {
        return Block("noop_with_empty_axes=1 with empty axes has no older equivalent for this reduction");
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * same, AddBefore(step, "Identity", {step.node->input(0)}, 1));
      ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, same->output(0)));
      step.replaced = true;
      return absl::OkStatus();
    }
    step.node->RemoveAttribute("noop_with_empty_axes");
  }
  const std::string& op = step.node->op_type();
  if (has_axes && (op == "Squeeze" || op == "Unsqueeze")) {
    // An empty axes tensor squeezes nothing (as the ONNX reference reads
    // it); without the attribute Squeeze would drop every 1.
    std::optional<std::vector<int64_t>> v = ConstInts(step, 1);
    if (v && v->empty()) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * same, AddBefore(step, "Identity", {step.node->input(0)}, 1));
      ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, same->output(0)));
      step.replaced = true;
      return absl::OkStatus();
    }
  }
  ONNXKIT_RETURN_IF_ERROR(InputToAttr(step, "axes", 1));
  return GenericStep(step);
}

absl::Status SplitAttrToInput(Step& step) {
  ONNXKIT_RETURN_IF_ERROR(AttrToInput(step, "split", 1));
  return GenericStep(step);
}

absl::Status SplitInputToAttr(Step& step) {
  ONNXKIT_RETURN_IF_ERROR(InputToAttr(step, "split", 1));
  return GenericStep(step);
}

// Split-18's num_outputs: Split-13 splits evenly into its outputs, the same
// when the axis length is divisible; otherwise the sizes become `split`.
absl::Status SplitDropNumOutputs(Step& step) {
  std::optional<int64_t> n = step.node->GetInt("num_outputs");
  if (n) {
    auto shape = KnownShape(*step.node->input(0), *step.ctx);
    int64_t axis = step.node->GetInt("axis").value_or(0);
    if (!shape) return Block("num_outputs needs the input shape to become split sizes");
    int64_t rank = static_cast<int64_t>(shape->size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || (*shape)[axis] < 0 || *n <= 0) return Block("split axis length unknown");
    int64_t len = (*shape)[axis];
    if (len % *n != 0) {
      int64_t chunk = (len + *n - 1) / *n;
      std::vector<int64_t> sizes;
      for (int64_t left = len; left > 0; left -= chunk) sizes.push_back(std::min(chunk, left));
      // Fewer elements than outputs: the last outputs are empty.
      while (static_cast<int64_t>(sizes.size()) < *n) sizes.push_back(0);
      if (static_cast<int64_t>(sizes.size()) != *n) return Block("num_outputs does not split the axis");
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddInts(step, "split", sizes));
      if (step.node->num_inputs() < 2) {
        ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, c));
      } else {
        ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 1, c));
      }
    }
    step.node->RemoveAttribute("num_outputs");
  }
  return GenericStep(step);
}

// Split-18 wants num_outputs where no split input says the sizes (equal
// parts, one per output).
absl::Status SplitAddNumOutputs(Step& step) {
  const bool sizes = step.node->num_inputs() > 1 && step.node->input(1) != nullptr;
  if (!sizes && !step.node->GetInt("num_outputs")) {
    step.node->SetAttribute(IntAttr("num_outputs", step.node->num_outputs()));
  }
  return GenericStep(step);
}

absl::Status TopKAttrToInput(Step& step) {
  std::optional<int64_t> k = step.node->GetInt("k");
  if (!k) return Block("attribute k missing");
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddInts(step, "k", {*k}));
  ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, c));
  step.node->RemoveAttribute("k");
  return GenericStep(step);
}

absl::Status TopKInputToAttr(Step& step) {
  std::optional<std::vector<int64_t>> k = ConstInts(step, 1);
  if (!k || k->size() != 1) return Block("input K is not a constant one-element tensor");
  step.node->SetAttribute(IntAttr("k", (*k)[0]));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  return GenericStep(step);
}

absl::Status SliceAttrsToInputs(Step& step) {
  std::optional<std::vector<int64_t>> starts = step.node->GetInts("starts");
  std::optional<std::vector<int64_t>> ends = step.node->GetInts("ends");
  if (!starts || !ends) return Block("attributes starts/ends missing");
  ONNXKIT_RETURN_IF_ERROR(AttrToInput(step, "starts", 1));
  ONNXKIT_RETURN_IF_ERROR(AttrToInput(step, "ends", 2));
  ONNXKIT_RETURN_IF_ERROR(AttrToInput(step, "axes", 3));
  return GenericStep(step);
}

absl::Status SliceInputsToAttrs(Step& step) {
  if (step.node->num_inputs() > 4 && step.node->input(4) != nullptr) {
    std::optional<std::vector<int64_t>> steps = ConstInts(step, 4);
    if (!steps) return Block("input steps is not constant");
    for (int64_t s : *steps) {
      if (s != 1) return Block("steps other than 1 have no Slice-1 equivalent");
    }
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 4, nullptr));
  }
  ONNXKIT_RETURN_IF_ERROR(InputToAttr(step, "axes", 3));
  ONNXKIT_RETURN_IF_ERROR(InputToAttr(step, "ends", 2));
  ONNXKIT_RETURN_IF_ERROR(InputToAttr(step, "starts", 1));
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
