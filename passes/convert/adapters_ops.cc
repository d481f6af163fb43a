// Adapters for small ops whose newer forms are written with older ones
// going down:
//   Shape-15 start/end        -> Shape, then Slice of the shape
//   CastLike (15)             -> Cast[to = element type of target_type]
//   Constant-12 value_float/int/floats/ints/string(s) -> value tensor
//   LessOrEqual (12)          -> Or(Less(a, b), Equal(a, b)); GreaterOrEqual alike
//   Constant-9 of a non-float type -> an initializer (Constant-1 holds floats only)
//   ArgMax/ArgMin-12 select_last_index -> (dim - 1) - ArgMax(Slice(x, step -1))
//   Max/Min/Sum/Mean below 8 of static, differing shapes -> inputs broadcast
//                               by adding zeros of the output shape
//   Reshape-14 allowzero=1    -> dropped when the shape holds no 0; else the
//                               empty result as a constant
//   TopK-11 largest=0 (float) -> Neg(TopK(Neg(x))) values, its indices
//   TopK-11 sorted=0          -> sorted (one of the orders sorted=0 allows)
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/convert.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {

absl::Status ShapeDown15(Step& step) {
  std::optional<int64_t> start = step.node->GetInt("start");
  std::optional<int64_t> end = step.node->GetInt("end");
  step.node->RemoveAttribute("start");
  step.node->RemoveAttribute("end");
  if ((!start || *start == 0) && !end) return GenericStep(step);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape, AddBefore(step, "Shape", {step.node->input(0)}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AddInts(step, "start", {start.value_or(0)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e,
                           AddInts(step, "end", {end.value_or(std::numeric_limits<int64_t>::max())}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * slice, AddBefore(step, "Slice", {shape->output(0), s, e}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, slice->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ExpandCastLike(Step& step) {
  std::optional<int32_t> to = ElemType(*step.node->input(1), *step.ctx);
  if (!to) return Block("the element type of target_type is unknown");
  std::vector<pb::AttributeProto> attrs = {IntAttr("to", *to)};
  if (std::optional<int64_t> sat = step.node->GetInt("saturate")) attrs.push_back(IntAttr("saturate", *sat));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddBefore(step, "Cast", {step.node->input(0)}, 1, std::move(attrs)));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, cast->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ConstantDown12(Step& step) {
  pb::TensorProto t;
  bool found = false;
  for (const ir::Attribute& a : step.node->attributes()) {
    const pb::AttributeProto& p = a.proto;
    found = true;
    if (p.name == "value_float") {
      t.data_type = pb::kFloat;
      t.float_data = {p.f};
    } else if (p.name == "value_floats") {
      t.data_type = pb::kFloat;
      t.dims = {static_cast<int64_t>(p.floats.size())};
      t.float_data = p.floats;
    } else if (p.name == "value_int") {
      t.data_type = pb::kInt64;
      t.int64_data = {p.i};
    } else if (p.name == "value_ints") {
      t.data_type = pb::kInt64;
      t.dims = {static_cast<int64_t>(p.ints.size())};
      t.int64_data = p.ints;
    } else if (p.name == "value_string") {
      t.data_type = pb::kString;
      t.string_data = {p.s};
    } else if (p.name == "value_strings") {
      t.data_type = pb::kString;
      t.dims = {static_cast<int64_t>(p.strings.size())};
      t.string_data = p.strings;
    } else {
      found = false;
    }
    if (found) {
      std::string name = p.name;
      step.node->RemoveAttribute(name);
      break;
    }
  }
  if (found) {
    pb::AttributeProto value;
    value.name = "value";
    value.type = pb::kAttrTensor;
    value.t = std::move(t);
    step.node->SetAttribute(std::move(value));
  }
  return GenericStep(step);
}

// Constant-1 only holds float types: a constant of another type becomes an
// initializer of the graph (function bodies have none: it blocks there).
absl::Status ConstantDown9(Step& step) {
  std::optional<int32_t> elem = ElemType(*step.node->output(0), *step.ctx);
  const ir::Attribute* value = step.node->FindAttribute("value");
  if (value != nullptr && value->proto.t) elem = value->proto.t->data_type;
  if (!elem || *elem == pb::kFloat || *elem == pb::kFloat16 || *elem == pb::kDouble) return GenericStep(step);
  if (value == nullptr || !value->proto.t) return Block("only a 'value' tensor can become an initializer");
  if (step.graph->Root()->model() == nullptr) return Block("a function body holds no initializers");
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::TensorFromProto(*value->proto.t));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * init, AddConstant(*step.graph, step.node->output(0)->name(), t));
  ir::Value* out = step.node->output(0);
  const bool graph_output = out->IsGraphOutput();
  if (graph_output) {
    // An initializer cannot be renamed onto a graph output here: route it
    // through an Identity that takes the output's place.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * id, AddBefore(step, "Identity", {init}, 1));
    init = id->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, init));
  step.replaced = true;
  return absl::OkStatus();
}

// Max, Min, Sum and Mean broadcast from opset 8 on; below, every input must
// have the same shape.
absl::Status NoBroadcastDown8(Step& step) {
  // Static shapes that differ: each smaller input is broadcast first by
  // adding zeros of the output's shape (Add broadcasts from opset 7).
  std::vector<std::vector<int64_t>> shapes;
  for (ir::Value* v : step.node->inputs()) {
    if (v == nullptr) continue;
    std::optional<std::vector<int64_t>> shape = KnownShape(*v, *step.ctx);
    if (!shape || std::any_of(shape->begin(), shape->end(), [](int64_t d) { return d < 0; })) {
      return Block("below opset 8 its inputs must have one shape, and theirs are not known");
    }
    shapes.push_back(*shape);
  }
  bool same = std::all_of(shapes.begin(), shapes.end(), [&](const auto& s) { return s == shapes[0]; });
  if (same) return GenericStep(step);
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) return Block("below opset 8 it does not broadcast, and its input shapes do not broadcast either");
      o = s[i];
    }
  }
  int64_t count = 1;
  for (int64_t d : out) {
    count *= d;
    if (count > (int64_t{1} << 22)) return Block("below opset 8 it does not broadcast, and the output is too large to broadcast with a constant");
  }
  for (int i = 0; i < step.node->num_inputs(); ++i) {
    ir::Value* v = step.node->input(i);
    if (v == nullptr || KnownShape(*v, *step.ctx) == out) continue;
    std::optional<int32_t> elem = ElemType(*v, *step.ctx);
    if (!elem) return Block("broadcasting below opset 8 needs the element type");
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor zeros, runner::Tensor::Allocate(*elem, out));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, AddConstant(*step.graph, "broadcast_zeros", zeros));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * add, AddBefore(step, "Add", {v, z}, 1));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, add->output(0)));
  }
  return GenericStep(step);
}

// Reshape-14 allowzero=1 below 14: the same as allowzero=0 when the shape
// holds no 0; with a 0 the result is empty, so a constant empty tensor of
// the known output shape.
absl::Status ReshapeDown14(Step& step) {
  if (step.node->GetInt("allowzero").value_or(0) == 0) {
    step.node->RemoveAttribute("allowzero");
    return GenericStep(step);
  }
  std::optional<std::vector<int64_t>> shape = ConstInts(step, 1);
  if (!shape) return Block("allowzero=1 needs a constant shape going below 14");
  if (std::find(shape->begin(), shape->end(), 0) == shape->end()) {
    step.node->RemoveAttribute("allowzero");
    return GenericStep(step);
  }
  std::optional<std::vector<int64_t>> out = KnownShape(*step.node->output(0), *step.ctx);
  std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx);
  if (!out || !elem || std::any_of(out->begin(), out->end(), [](int64_t d) { return d < 0; })) {
    return Block("allowzero=1 with a 0 in the shape needs the known output shape");
  }
  // The result is empty: a 0 in the shape copies no dim under allowzero.
  if (std::find(out->begin(), out->end(), 0) == out->end()) {
    return Block("allowzero=1 with a 0 in the shape gives an empty tensor");
  }
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor empty, runner::Tensor::Allocate(*elem, *out));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddConstant(*step.graph, "reshaped_empty", empty));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * id, AddBefore(step, "Identity", {c}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, id->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

// ArgMax/ArgMin-12 select_last_index=1 below 12: the first index over the
// axis reversed (a Slice with step -1) counted from the end,
// (dim - 1) - ArgMax(reverse(x)); needs the axis length.
absl::Status SelectLastIndexDown12(Step& step) {
  if (step.node->GetInt("select_last_index").value_or(0) == 0) {
    step.node->RemoveAttribute("select_last_index");
    return GenericStep(step);
  }
  ir::Value* x = step.node->input(0);
  std::optional<std::vector<int64_t>> shape = KnownShape(*x, *step.ctx);
  if (!shape) return Block("select_last_index needs the input shape");
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t axis = step.node->GetInt("axis").value_or(0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return Block("axis out of range");
  const int64_t dim = (*shape)[static_cast<size_t>(axis)];
  if (dim <= 0) return Block("select_last_index needs a known, non-empty axis length");
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * starts, AddInts(step, "starts", {-1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ends, AddInts(step, "ends", {std::numeric_limits<int64_t>::min()}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axes, AddInts(step, "axes", {axis}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * steps, AddInts(step, "steps", {-1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * rev, AddBefore(step, "Slice", {x, starts, ends, axes, steps}, 1));
  std::vector<pb::AttributeProto> attrs = {IntAttr("axis", axis),
                                           IntAttr("keepdims", step.node->GetInt("keepdims").value_or(1))};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * arg, AddBefore(step, step.node->op_type(), {rev->output(0)}, 1, attrs));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * last, AddIntScalar(step, "last_index", pb::kInt64, dim - 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sub, AddBefore(step, "Sub", {last, arg->output(0)}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, sub->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ExpandOrEqual(Step& step) {
  std::string strict = step.node->op_type() == "LessOrEqual" ? "Less" : "Greater";
  ir::Value* a = step.node->input(0);
  ir::Value* b = step.node->input(1);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * lt, AddBefore(step, strict, {a, b}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * eq, AddBefore(step, "Equal", {a, b}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * o, AddBefore(step, "Or", {lt->output(0), eq->output(0)}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, o->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status TopKDown11(Step& step) {
  step.node->RemoveAttribute("sorted");
  if (step.node->GetInt("largest").value_or(1) != 0) {
    step.node->RemoveAttribute("largest");
    return GenericStep(step);
  }
  // The k smallest are the k largest of -x, in the same order, ties by the
  // lower index in both; negation is exact for floats.
  ir::Value* x = step.node->input(0);
  std::optional<int32_t> elem = ElemType(*x, *step.ctx);
  if (!elem || (*elem != pb::kFloat && *elem != pb::kDouble && *elem != pb::kFloat16)) {
    return Block("largest=0 is written as TopK of the negated input, which needs a float input");
  }
  step.node->RemoveAttribute("largest");
  ir::Value* values = step.node->output(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * neg, AddBefore(step, "Neg", {x}, 1));
  ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 0, neg->output(0)));
  if (values != nullptr && !values->name().empty() && (values->has_uses() || values->IsGraphOutput())) {
    // Readers of the values read them negated back; a graph output keeps
    // its name.
    const std::string name = values->name();
    const bool graph_output = values->IsGraphOutput();
    ir::NodeSpec spec{.op_type = "Neg", .inputs = {values}, .outputs = {step.graph->FreshName("topk_values")}};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back, step.graph->AddNode(std::move(spec), ir::Position::After(step.node)));
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(values, back->output(0)));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(back, 0, values));
    if (graph_output) {
      ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(values, step.graph->FreshName("topk_negated")));
      ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(back->output(0), name));
    }
    if (step.created != nullptr) step.created->push_back(back);
  }
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
