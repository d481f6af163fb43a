// Adapters that bring models of the first opsets (1 to 6, the model zoo's
// oldest exports) up to the forms later versions spell differently:
//   Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less/Gemm 7: the legacy
//                 broadcast attribute (B lined up with A from `axis` on) ->
//                 numpy broadcasting (B unsqueezed with trailing dims);
//                 Gemm's C broadcasts in either
//   Cast 6:       `to` as a type name ("FLOAT") -> the element type code
//   Pad 2:        `paddings` -> `pads` (same layout)
//   Concat 4:     `axis` required; Concat-1's default was 1
//   Reshape 5:    `shape` attribute -> shape input
//   Split 2:      a constant `split` input -> the attribute
//   Upsample 7:   height_scale/width_scale -> scales [1, 1, h, w]
//   Tile 6:       constant tiles and axis inputs -> repeats (1 elsewhere)
#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {

absl::Status LegacyBroadcastUp7(Step& step) {
  ir::Node& node = *step.node;
  const bool broadcast = node.GetInt("broadcast").value_or(0) != 0;
  std::optional<int64_t> axis = node.GetInt("axis");
  node.RemoveAttribute("broadcast");
  if (node.op_type() == "Gemm" || !broadcast) {
    // Gemm-7 broadcasts C whatever the flag said; without the flag the
    // shapes were equal and `axis` meant nothing.
    node.RemoveAttribute("axis");
    return GenericStep(step);
  }
  if (axis.has_value()) {
    // B's dims line up with A's from `axis` on; numpy broadcasting lines
    // them up from the end, so B gets trailing 1s.
    std::optional<int64_t> rank_a = RankOf(step, node.input(0));
    std::optional<int64_t> rank_b = RankOf(step, node.input(1));
    if (!rank_a || !rank_b) return Block("broadcast at an axis needs the ranks of both inputs");
    int64_t at = *axis < 0 ? *axis + *rank_a : *axis;
    int64_t trailing = *rank_a - at - *rank_b;
    if (at < 0 || trailing < 0)
      return Block(absl::StrCat("broadcast axis ", *axis, " does not fit the ranks"));
    if (trailing > 0) {
      std::vector<int64_t> axes;
      for (int64_t d = 0; d < trailing; ++d) axes.push_back(*rank_b + d);
      // Written for opset 7 (axes an attribute); converted further with the rest.
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * u,
                               AddBefore(step, "Unsqueeze", {node.input(1)}, 1, {IntsAttr("axes", axes)}));
      ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(&node, 1, u->output(0)));
    }
    node.RemoveAttribute("axis");
  }
  return GenericStep(step);
}

namespace {

// The type of `v` without its first dim (Scan-8's batch axis).
std::optional<pb::TypeProto> WithoutFirstDim(const ir::Value& v) {
  const pb::TypeProto* t = v.type();
  if (t == nullptr || !t->tensor_type) return std::nullopt;
  pb::TypeProto out = *t;
  auto& shape = out.tensor_type.mutable_value().shape;
  if (shape && !shape->dim.empty()) shape.mutable_value().dim.erase(shape.mutable_value().dim.begin());
  return out;
}

}  // namespace

// Scan-8 runs its body once per batch entry over inputs [batch, sequence,
// ...] (with per-entry lengths); Scan-9 has no batch axis. With batch 1
// and no sequence_lens they say the same: the states and scan inputs lose
// the batch axis (Squeeze), the body stays, and every output gets it back
// (Unsqueeze).
absl::Status ScanUp9(Step& step) {
  ir::Node& node = *step.node;
  if (node.num_inputs() < 1) return Block("Scan-8 without inputs");
  if (node.input(0) != nullptr)
    return Block("sequence_lens (lengths per batch entry) has no Scan-9 equivalent");
  for (int i = 1; i < node.num_inputs(); ++i) {
    const ir::Value* v = node.input(i);
    if (v == nullptr) return Block("an omitted state or scan input");
    std::optional<std::vector<int64_t>> dims = KnownShape(*v, *step.ctx);
    if (!dims || dims->empty() || (*dims)[0] != 1) {
      return Block(
          absl::StrCat("input '", v->name(), "' has batch size ",
                       dims && !dims->empty() && (*dims)[0] >= 0 ? absl::StrCat((*dims)[0]) : "unknown",
                       "; Scan-9 has no batch axis (batch 1 converts)"));
    }
  }
  const int n = node.num_inputs();
  for (int i = 1; i < n; ++i) {
    ir::Value* v = node.input(i);
    // Written for opset 8 (axes an attribute); converted further with the rest.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * squeeze, AddBefore(step, "Squeeze", {v}, 1, {IntsAttr("axes", {0})}));
    if (std::optional<pb::TypeProto> t = WithoutFirstDim(*v)) squeeze->output(0)->set_type(std::move(*t));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(&node, i, squeeze->output(0)));
  }
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(&node, 0));
  if (std::optional<std::vector<int64_t>> d = node.GetInts("directions")) {
    node.RemoveAttribute("directions");
    node.SetAttribute(IntsAttr("scan_input_directions", *d));
  }
  ir::Node* anchor = &node;
  for (int j = 0; j < node.num_outputs(); ++j) {
    ir::Value* out = node.output(j);
    if (out == nullptr) continue;
    const std::string name = out->name();
    const std::optional<pb::TypeProto> batched =
        out->type() ? std::optional<pb::TypeProto>(*out->type()) : std::nullopt;
    ir::NodeSpec spec;
    spec.op_type = "Unsqueeze";
    spec.inputs = {out};
    spec.attributes = {IntsAttr("axes", {0})};
    spec.outputs = {step.graph->FreshName(name)};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * unsqueeze,
                             step.graph->AddNode(std::move(spec), ir::Position::After(anchor)));
    if (step.created != nullptr) step.created->push_back(unsqueeze);
    anchor = unsqueeze;
    ir::Value* back = unsqueeze->output(0);
    // Every reader (and a graph output) moves to the batched value; the
    // Unsqueeze itself goes on reading the Scan's output, which takes a
    // fresh name so the batched value keeps the old one.
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(out, back));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(unsqueeze, 0, out));
    ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(out, step.graph->FreshName(name)));
    ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(back, name));
    if (batched) {
      back->set_type(*batched);
      if (std::optional<pb::TypeProto> t = WithoutFirstDim(*back)) out->set_type(std::move(*t));
    }
  }
  step.check_names = false;  // sequence_lens is gone; the states come first
  return GenericStep(step);
}

absl::Status CastUp6(Step& step) {
  std::optional<std::string> to = step.node->GetString("to");
  if (to) {
    std::string lower = *to;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::optional<int32_t> elem = DataTypeFromName(lower);
    if (!elem || *elem == pb::kUndefined) return Block(absl::StrCat("'to' names no element type: ", *to));
    step.node->SetAttribute(IntAttr("to", *elem));
  }
  return GenericStep(step);
}

absl::Status PadUp2(Step& step) {
  if (std::optional<std::vector<int64_t>> p = step.node->GetInts("paddings")) {
    step.node->RemoveAttribute("paddings");
    step.node->SetAttribute(IntsAttr("pads", *p));
  }
  return GenericStep(step);
}

absl::Status ConcatUp4(Step& step) {
  if (!step.node->GetInt("axis")) step.node->SetAttribute(IntAttr("axis", 1));
  return GenericStep(step);
}

absl::Status ReshapeUp5(Step& step) {
  std::optional<std::vector<int64_t>> shape = step.node->GetInts("shape");
  if (!shape) return Block("Reshape without a shape");
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddInts(step, "shape", *shape));
  ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, c));
  step.node->RemoveAttribute("shape");
  return GenericStep(step);
}

absl::Status SplitUp2(Step& step) {
  if (step.node->num_inputs() > 1 && step.node->input(1) != nullptr) {
    std::optional<std::vector<int64_t>> v = ConstInts(step, 1);
    if (!v) return Block("input 'split' is not constant");
    step.node->SetAttribute(IntsAttr("split", *v));
  }
  while (step.node->num_inputs() > 1) ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 1));
  // Split-1's variadic outputs are Split-2's under a new formal name.
  step.check_names = false;
  return GenericStep(step);
}

absl::Status UpsampleUp7(Step& step) {
  std::optional<float> h = step.node->GetFloat("height_scale");
  std::optional<float> w = step.node->GetFloat("width_scale");
  if (!h || !w) return Block("height_scale and width_scale are required");
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (rank && *rank != 4) return Block("Upsample-1 scales a 4-D input");
  step.node->RemoveAttribute("height_scale");
  step.node->RemoveAttribute("width_scale");
  step.node->SetAttribute(FloatsAttr("scales", {1.0f, 1.0f, *h, *w}));
  return GenericStep(step);
}

absl::Status TileUp6(Step& step) {
  if (step.node->num_inputs() != 3 || step.node->input(1) == nullptr || step.node->input(2) == nullptr)
    return Block("Tile-1 takes input, tiles and axis");
  std::optional<std::vector<int64_t>> tiles = ConstInts(step, 1);
  std::optional<std::vector<int64_t>> axis = ConstInts(step, 2);
  if (!tiles || !axis || tiles->size() != 1 || axis->size() != 1)
    return Block("tiles and axis must be constant scalars");
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (!rank) return Block("the repeats need the input rank");
  int64_t at = (*axis)[0] < 0 ? (*axis)[0] + *rank : (*axis)[0];
  if (at < 0 || at >= *rank) return Block("axis out of range");
  std::vector<int64_t> repeats(static_cast<size_t>(*rank), 1);
  repeats[static_cast<size_t>(at)] = (*tiles)[0];
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, AddInts(step, "repeats", repeats));
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 2));
  ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 1, r));
  step.check_names = false;  // tiles -> repeats
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
