// Adapters for version steps whose meaning changed without the signature
// saying so (found by running the backend suites through convert):
//   DFT 20:               axis attribute (default 1) -> axis input (default -2)
//   GridSample 20:        mode names bilinear/bicubic -> linear/cubic; 16 is 4-D only
//                         (5-D expands into older ops, adapters_grid.cc)
//   OneHot 11:            negative indices and axis only from 11
//   ScatterElements/ScatterND 18: reduction max/min only from 18
//   QuantizeLinear/DequantizeLinear 13: per-axis scales only from 13
//   RoiAlign 16:          coordinate_transformation_mode added; the legacy
//                         behaviour is "output_half_pixel", not the new default
//   If 11:                branches may produce different shapes only from 11
//   GroupNormalization 21: scale and bias per channel, per group before
//                         (18 is deprecated: written out going down, as
//                         InstanceNormalization over grouped channels, which
//                         is also how 18 goes below 18)
//   OptionalHasElement/OptionalGetElement 18: no input, tensors and sequences
//                         only from 18
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/infer/context.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

// The kind of value `v` holds, when known.
infer::Type::Kind KindOf(Step& step, const ir::Value& v) {
  const infer::ValueState* state = step.ctx->State(v);
  if (state != nullptr && !state->type.unknown()) return state->type.kind;
  if (v.type() != nullptr) return infer::TypeFromProto(*v.type()).kind;
  return infer::Type::Kind::kUnknown;
}

// The declared dims of `v` (-1 for a symbolic or unknown dim); nullopt when
// the rank is not declared.
std::optional<std::vector<int64_t>> DeclaredDims(const ir::Value& v) {
  const pb::TypeProto* t = v.type();
  if (t == nullptr || !t->tensor_type || !t->tensor_type->shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : t->tensor_type->shape->dim) {
    dims.push_back(d.kind == pb::TensorShapeProto::Dimension::kValue ? d.dim_value : -1);
  }
  return dims;
}

}  // namespace

absl::Status IfDown11(Step& step) {
  const ir::Graph* then_branch = nullptr;
  const ir::Graph* else_branch = nullptr;
  for (const ir::Attribute& a : step.node->attributes()) {
    if (a.name() == "then_branch" && a.g) then_branch = a.g.get();
    if (a.name() == "else_branch" && a.g) else_branch = a.g.get();
  }
  if (then_branch == nullptr || else_branch == nullptr) return GenericStep(step);
  const size_t n = std::min(then_branch->outputs().size(), else_branch->outputs().size());
  for (size_t i = 0; i < n; ++i) {
    std::optional<std::vector<int64_t>> a = DeclaredDims(*then_branch->outputs()[i]);
    std::optional<std::vector<int64_t>> b = DeclaredDims(*else_branch->outputs()[i]);
    if (!a || !b) continue;
    bool differ = a->size() != b->size();
    for (size_t d = 0; !differ && d < a->size(); ++d)
      differ = (*a)[d] >= 0 && (*b)[d] >= 0 && (*a)[d] != (*b)[d];
    if (differ) {
      return Block(absl::StrCat(
          "output ", i, " has different shapes in the two branches, which If allows only from opset 11"));
    }
  }
  return GenericStep(step);
}

// GroupNormalization 18 -> 21, scale and bias per group -> per channel
// (channel c belongs to group c / (C / G)):
// Constant ones and a known C: repeated here. Otherwise, at run time:
//   %k = Div(Shape[start=1, end=2](%x), [G]); %t = Concat([1], %k)
//   %s21 = Reshape(Expand(Unsqueeze(%s, [1]), %t), [-1])        (G x C/G -> C)
absl::Status GroupNormUp21(Step& step) {
  ir::Node* node = step.node;
  const int64_t groups = node->GetInt("num_groups").value_or(0);
  if (groups <= 0) return Block("num_groups is missing or not positive");
  if (node->num_inputs() < 3 || node->input(1) == nullptr || node->input(2) == nullptr)
    return GenericStep(step);
  ir::Value* x = node->input(0);
  std::optional<std::vector<int64_t>> dims = KnownShape(*x, *step.ctx);
  const int64_t channels = dims && dims->size() >= 2 ? (*dims)[1] : -1;
  if (channels > 0 && channels % groups != 0) {
    return Block(absl::StrCat(channels, " channels do not divide into ", groups, " groups"));
  }
  ir::Value* target = nullptr;  // [1, C/G], made once for both inputs
  for (int i = 1; i <= 2; ++i) {
    ir::Value* v = node->input(i);
    absl::StatusOr<runner::Tensor> t = ConstantTensor(*v, *step.ctx);
    if (channels > 0 && t.ok() && !t->is_string() && t->rank() == 1 && t->size() == groups) {
      const int64_t per = channels / groups;
      const size_t width = t->nbytes() / static_cast<size_t>(groups);
      ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor wide, runner::Tensor::Allocate(t->dtype(), {channels}));
      const auto* from = static_cast<const std::byte*>(t->raw());
      auto* to = static_cast<std::byte*>(wide.mutable_raw());
      for (int64_t c = 0; c < channels; ++c) std::memcpy(to + c * width, from + (c / per) * width, width);
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w,
                               AddConstant(*step.graph, i == 1 ? "gn_scale" : "gn_bias", wide));
      ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(node, i, w));
      // The per-group initializer, now unread, goes (a Constant node's
      // producer is removed by the walker).
      if (v->IsConstant() && !v->has_uses() && !v->IsGraphOutput()) {
        ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInitializer(v));
      }
      continue;
    }
    if (target == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape,
                               AddBefore(step, "Shape", {x}, 1, {IntAttr("start", 1), IntAttr("end", 2)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * g, AddInts(step, "gn_groups", {groups}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * per, AddBefore(step, "Div", {shape->output(0), g}, 1));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddInts(step, "gn_one", {1}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cat,
                               AddBefore(step, "Concat", {one, per->output(0)}, 1, {IntAttr("axis", 0)}));
      target = cat->output(0);
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis, AddInts(step, "gn_axis", {1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * column, AddBefore(step, "Unsqueeze", {v, axis}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * spread, AddBefore(step, "Expand", {column->output(0), target}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * flat_shape, AddInts(step, "gn_flat", {-1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * flat, AddBefore(step, "Reshape", {spread->output(0), flat_shape}, 1));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(node, i, flat->output(0)));
  }
  return GenericStep(step);
}

namespace {

// A 1-D tensor of `n` ones (or zeros) of a float type.
absl::StatusOr<runner::Tensor> Filled(int32_t dtype, int64_t n, bool ones) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(dtype, {n}));
  if (!ones) return t;
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case pb::kFloat:
        static_cast<float*>(t.mutable_raw())[i] = 1.0f;
        break;
      case pb::kDouble:
        static_cast<double*>(t.mutable_raw())[i] = 1.0;
        break;
      case pb::kFloat16:
        static_cast<uint16_t*>(t.mutable_raw())[i] = 0x3C00;
        break;
      default:
        return Block(absl::StrCat("no ones of element type ", dtype, " can be built here"));
    }
  }
  return t;
}

}  // namespace

namespace {

// What both ways down need of a GroupNormalization node.
struct GroupNormNode {
  int64_t groups;
  int32_t elem;  // the input's element type
};

absl::StatusOr<GroupNormNode> ReadGroupNorm(Step& step) {
  const ir::Node* node = step.node;
  const int64_t groups = node->GetInt("num_groups").value_or(0);
  if (groups <= 0) return Block("num_groups is missing or not positive");
  if (node->num_inputs() < 3 || node->input(1) == nullptr || node->input(2) == nullptr) {
    return Block("scale and bias are required");
  }
  std::optional<int32_t> elem = ElemType(*node->input(0), *step.ctx);
  if (!elem) return Block("the input's element type is unknown");
  // Ones and zeros per group are allocated from num_groups: a known channel
  // count bounds it.
  std::optional<std::vector<int64_t>> dims = KnownShape(*node->input(0), *step.ctx);
  const int64_t channels = dims && dims->size() >= 2 ? (*dims)[1] : -1;
  if (channels > 0 && channels % groups != 0) {
    return Block(absl::StrCat(channels, " channels do not divide into ", groups, " groups"));
  }
  return GroupNormNode{groups, *elem};
}

// %x normalized per group of channels, scaled and shifted per group by
// %s and %b ([G], of `norm_type`), written with ops every opset from 6 has:
//   %g = Reshape(%x, [0, G, -1]); %n = InstanceNormalization(%g, %s, %b)
//   %z = Reshape(%n, Shape(%x))
// With `stash`, %x is cast to float first (%z is float).
absl::StatusOr<ir::Value*> GroupedInstanceNorm(Step& step, int64_t groups, ir::Value* scale, ir::Value* bias,
                                               bool stash) {
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * grouped_shape, AddInts(step, "gn_grouped", {0, groups, -1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape, AddBefore(step, "Shape", {x}, 1));
  ir::Value* src = x;
  if (stash) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * up, AddBefore(step, "Cast", {x}, 1, {IntAttr("to", pb::kFloat)}));
    src = up->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * grouped, AddBefore(step, "Reshape", {src, grouped_shape}, 1));
  std::vector<pb::AttributeProto> attrs;
  if (std::optional<float> eps = step.node->GetFloat("epsilon")) attrs.push_back(FloatAttr("epsilon", *eps));
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Node * norm, AddBefore(step, "InstanceNormalization", {grouped->output(0), scale, bias}, 1, attrs));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back,
                           AddBefore(step, "Reshape", {norm->output(0), shape->output(0)}, 1));
  return back->output(0);
}

}  // namespace

// GroupNormalization 21 -> 20: ONNX deprecated GroupNormalization-18 (its
// per-group scale), so below 21 the node is written out (GroupedInstanceNorm
// with ones and zeros), then the per-channel affine, in 21's order of
// operations (with stash_type 1 on a non-float32 input, all in float and
// the result cast back: one rounding, as a fused kernel would):
//   %y = Add(Mul(%z, Reshape(%s, [-1, 1, ..])), Reshape(%b, [-1, 1, ..]))
absl::Status GroupNormDown21(Step& step) {
  ir::Node* node = step.node;
  ONNXKIT_ASSIGN_OR_RETURN(GroupNormNode gn, ReadGroupNorm(step));
  const int64_t groups = gn.groups;
  const int32_t elem = gn.elem;
  std::optional<int64_t> rank = RankOf(step, node->input(0));
  if (!rank || *rank < 2) return Block("the per-channel affine needs the input rank");
  const bool stash = node->GetInt("stash_type").value_or(1) == 1 && elem != pb::kFloat;
  const int32_t norm_type = stash ? pb::kFloat : elem;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor ones, Filled(norm_type, groups, true));
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor zeros, Filled(norm_type, groups, false));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one_v, AddConstant(*step.graph, "gn_ones", ones));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero_v, AddConstant(*step.graph, "gn_zeros", zeros));
  std::vector<int64_t> column(static_cast<size_t>(*rank - 1), 1);
  column[0] = -1;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * column_shape, AddInts(step, "gn_column", column));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, GroupedInstanceNorm(step, groups, one_v, zero_v, stash));
  ir::Value* affine[2] = {node->input(1), node->input(2)};
  for (ir::Value*& v : affine) {
    if (stash) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * wide, AddBefore(step, "Cast", {v}, 1, {IntAttr("to", pb::kFloat)}));
      v = wide->output(0);
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * col, AddBefore(step, "Reshape", {v, column_shape}, 1));
    v = col->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * mul, AddBefore(step, "Mul", {z, affine[0]}, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * add, AddBefore(step, "Add", {mul->output(0), affine[1]}, 1));
  ir::Value* y = add->output(0);
  if (stash) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * narrow, AddBefore(step, "Cast", {y}, 1, {IntAttr("to", elem)}));
    y = narrow->output(0);
  }
  TypeLike(step, y, elem, node->output(0));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

// GroupNormalization 18 -> 17 (no GroupNormalization below 18): its
// per-group scale and bias are InstanceNormalization's over the grouped
// channels (GroupedInstanceNorm), so one InstanceNormalization does it.
absl::Status GroupNormDown18(Step& step) {
  ir::Node* node = step.node;
  ONNXKIT_ASSIGN_OR_RETURN(GroupNormNode gn, ReadGroupNorm(step));
  const int64_t groups = gn.groups;
  const int32_t elem = gn.elem;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z,
                           GroupedInstanceNorm(step, groups, node->input(1), node->input(2), false));
  TypeLike(step, z, elem, node->output(0));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, z));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status DftUp20(Step& step) {
  int64_t axis = step.node->GetInt("axis").value_or(1);
  step.node->RemoveAttribute("axis");
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, AddIntScalar(step, "dft_axis", pb::kInt64, axis));
  while (step.node->num_inputs() < 2) ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, nullptr));
  ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(step.node, a));
  return GenericStep(step);
}

absl::Status DftDown20(Step& step) {
  int64_t axis = -2;
  if (step.node->num_inputs() > 2 && step.node->input(2) != nullptr) {
    std::optional<std::vector<int64_t>> v = ConstInts(step, 2);
    if (!v || v->size() != 1) return Block("input axis is not a constant scalar");
    axis = (*v)[0];
    ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, 2));
  }
  if (axis < 0) {
    std::optional<int64_t> rank = RankOf(step, step.node->input(0));
    if (!rank) return Block("a negative axis needs the input rank");
    axis += *rank;
  }
  step.node->SetAttribute(IntAttr("axis", axis));
  return GenericStep(step);
}

absl::Status GridSampleUp20(Step& step) {
  std::string mode = step.node->GetString("mode").value_or("bilinear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  step.node->SetAttribute(StringAttr("mode", mode));
  return GenericStep(step);
}

absl::Status GridSampleDown20(Step& step) {
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (rank && *rank == 5) return ExpandGridSampleNd(step);
  if (!rank || *rank != 4) return Block("GridSample-16 takes 4-D inputs only (rank unknown or not 4)");
  std::string mode = step.node->GetString("mode").value_or("linear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  step.node->SetAttribute(StringAttr("mode", mode));
  return GenericStep(step);
}

absl::Status OneHotDown11(Step& step) {
  int64_t axis = step.node->GetInt("axis").value_or(-1);
  if (axis < 0) {
    std::optional<int64_t> rank = RankOf(step, step.node->input(0));
    if (!rank) return Block("a negative axis needs the indices' rank");
    step.node->SetAttribute(IntAttr("axis", axis + *rank + 1));
  }
  std::optional<std::vector<int64_t>> indices = ConstInts(step, 0);
  if (indices) {
    for (int64_t i : *indices) {
      if (i < 0) return Block("negative indices are only allowed from opset 11");
    }
  } else {
    // Fed at run time: wrap negatives as OneHot-11 does,
    // Where(i < 0, i + depth, i); what stays out of range is all off_value
    // in both versions.
    ir::Value* idx = step.node->input(0);
    std::optional<int32_t> elem = ElemType(*idx, *step.ctx);
    if (!elem) return Block("wrapping negative indices needs their element type");
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddScalar(step, "zero", *elem, 0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scalar_shape, AddInts(step, "scalar_shape", {}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddBefore(step, "Cast", {step.node->input(1)}, 1, {IntAttr("to", *elem)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * depth, AddBefore(step, "Reshape", {cast->output(0), scalar_shape}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * neg, AddBefore(step, "Less", {idx, zero}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * add, AddBefore(step, "Add", {idx, depth->output(0)}, 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * wrapped, AddBefore(step, "Where", {neg->output(0), add->output(0), idx}, 1));
    ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, 0, wrapped->output(0)));
  }
  return GenericStep(step);
}

absl::Status ScatterReductionDown18(Step& step) {
  std::string r = step.node->GetString("reduction").value_or("none");
  if (r == "max" || r == "min") return Block(absl::StrCat("reduction '", r, "' exists only from opset 18"));
  return GenericStep(step);
}

namespace {

// The shape [1, .., -1 at the node's axis, .., 1] of `x`'s rank, that makes
// a per-axis scale or zero point broadcast along the axis; a Block naming
// `what` when the rank is unknown or the axis out of range.
absl::StatusOr<ir::Value*> AlongAxis(Step& step, ir::Value* x, std::string_view what) {
  std::optional<int64_t> rank = RankOf(step, x);
  if (!rank || *rank < 1) return Block(absl::StrCat(std::string(what), " below 13 needs the input rank"));
  int64_t axis = step.node->GetInt("axis").value_or(1);
  if (axis < 0) axis += *rank;
  if (axis < 0 || axis >= *rank) return Block("axis out of range");
  std::vector<int64_t> shape(static_cast<size_t>(*rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return AddInts(step, "per_axis_shape", shape);
}

// DequantizeLinear-13 per axis below 13, where DequantizeLinear-10 is
// per-tensor: (Cast(x) - Cast(zero_point)) * scale with scale and zero point
// reshaped to broadcast along the axis. Exact for 8-bit x: x and the zero
// point are exact in float, their difference too, and the product is the
// one rounding both forms make. An int32 x (a quantized bias) has no zero
// point, or one of zeros (the operator allows no other): Cast(x) * scale,
// the cast the one rounding of x both forms make.
absl::Status DequantizePerAxisDown13(Step& step) {
  ir::Node* node = step.node;
  ir::Value* x = node->input(0);
  std::optional<int32_t> elem = ElemType(*x, *step.ctx);
  if (!elem || (*elem != pb::kInt8 && *elem != pb::kUint8 && *elem != pb::kInt32)) {
    return Block("per-axis dequantization below 13 is written out for int8/uint8/int32 inputs only");
  }
  bool zero_point = node->num_inputs() > 2 && node->input(2) != nullptr;
  if (zero_point && *elem == pb::kInt32) {
    std::optional<std::vector<int64_t>> z = ConstInts(step, 2);
    if (!z) return Block("an int32 zero point below 13 must be a constant of zeros");
    for (int64_t v : *z) {
      if (v != 0) return Block("an int32 zero point below 13 must be a constant of zeros");
    }
    zero_point = false;
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * along, AlongAxis(step, x, "per-axis dequantization"));
  auto reshape = [&](ir::Value* v) -> absl::StatusOr<ir::Value*> {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * r, AddBefore(step, "Reshape", {v, along}, 1));
    return r->output(0);
  };
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * xf, AddBefore(step, "Cast", {x}, 1, {IntAttr("to", pb::kFloat)}));
  ir::Value* centered = xf->output(0);
  if (zero_point) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * zf, AddBefore(step, "Cast", {node->input(2)}, 1, {IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, reshape(zf->output(0)));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sub, AddBefore(step, "Sub", {centered, z}, 1));
    centered = sub->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scale, reshape(node->input(1)));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * y, AddBefore(step, "Mul", {centered, scale}, 1));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y->output(0)));
  step.replaced = true;
  return absl::OkStatus();
}

// QuantizeLinear-13 per axis below 13 (written for opset 12; Round needs
// 11): Cast(Clip(Round(x / scale) + zero_point, lo, hi)) with scale and zero
// point reshaped to broadcast along the axis, [lo, hi] the output type's
// range. The same operations the op is defined by: one float division, a
// rounding half to even, an exact add of a small integer, saturation.
absl::Status QuantizePerAxisDown13(Step& step) {
  ir::Node* node = step.node;
  if (step.target < 11) {
    return Block(absl::StrCat(
        "per-axis quantization is written out with Round, which needs opset 11 (target ", step.target, ")"));
  }
  ir::Value* x = node->input(0);
  std::optional<int32_t> elem = ElemType(*x, *step.ctx);
  if (!elem || *elem != pb::kFloat)
    return Block("per-axis quantization below 13 is written out for float inputs only");
  const bool has_zero_point = node->num_inputs() > 2 && node->input(2) != nullptr;
  int32_t out = pb::kUint8;
  if (has_zero_point) {
    std::optional<int32_t> z = ElemType(*node->input(2), *step.ctx);
    if (!z || (*z != pb::kUint8 && *z != pb::kInt8)) {
      return Block("per-axis quantization below 13 is written out for uint8/int8 zero points only");
    }
    out = *z;
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * along, AlongAxis(step, x, "per-axis quantization"));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scale, Op(step, "Reshape", {node->input(1), along}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ratio, Op(step, "Div", {x, scale}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * q, Op(step, "Round", {ratio}));
  if (has_zero_point) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zf, Op(step, "Cast", {node->input(2)}, {IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, Op(step, "Reshape", {zf, along}));
    ONNXKIT_ASSIGN_OR_RETURN(q, Op(step, "Add", {q, z}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lo,
                           AddScalar(step, "quant_min", pb::kFloat, out == pb::kUint8 ? 0 : -128));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hi,
                           AddScalar(step, "quant_max", pb::kFloat, out == pb::kUint8 ? 255 : 127));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * clipped, Op(step, "Clip", {q, lo, hi}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Cast", {clipped}, {IntAttr("to", out)}));
  return ReplaceNodeOutput(step, y);
}

}  // namespace

absl::Status QuantizeDown13(Step& step) {
  if (step.node->num_inputs() > 1 && step.node->input(1) != nullptr) {
    std::optional<int64_t> scale_rank = RankOf(step, step.node->input(1));
    if (scale_rank && *scale_rank == 1) {
      std::optional<std::vector<int64_t>> dims = KnownShape(*step.node->input(1), *step.ctx);
      if (!dims || (*dims)[0] != 1) {  // per axis
        return step.node->op_type() == "DequantizeLinear" ? DequantizePerAxisDown13(step)
                                                          : QuantizePerAxisDown13(step);
      }
    }
  }
  for (int i : {1, 2}) {
    if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) continue;
    std::optional<int64_t> rank = RankOf(step, step.node->input(i));
    if (rank && *rank == 1) {
      // A one-element 1-D scale or zero point (what exporters write for
      // per-tensor quantization) is the scalar the older op takes.
      std::optional<std::vector<int64_t>> dims = KnownShape(*step.node->input(i), *step.ctx);
      if (dims && dims->size() == 1 && (*dims)[0] == 1) {
        ir::Value* in = step.node->input(i);
        if (IsConstantValue(*in)) {  // a scalar copy of the constant
          absl::StatusOr<runner::Tensor> t = ConstantTensor(*in, *step.ctx);
          absl::StatusOr<runner::Tensor> scalar = t.ok() ? t->Reshaped({}) : t.status();
          if (scalar.ok()) {
            ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddConstant(*step.graph, in->name(), *scalar));
            ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, c));
            continue;
          }
        }
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scalar_shape, AddInts(step, "scalar_shape", {}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scalar,
                                 Op(step, "Reshape", {step.node->input(i), scalar_shape}));
        if (std::optional<int32_t> elem = ElemType(*step.node->input(i), *step.ctx)) {
          pb::TypeProto type;
          type.tensor_type.mutable_value().elem_type = *elem;
          type.tensor_type.mutable_value().shape.mutable_value();  // rank 0
          scalar->set_type(std::move(type));
        }
        ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(step.node, i, scalar));
        continue;
      }
    }
    if (!rank || *rank != 0) return Block("per-axis (or unknown-rank) scale/zero point needs opset 13");
  }
  return GenericStep(step);
}

// QuantizeLinear-21's output_dtype picks the output type when there is no
// zero point; before 21 the zero point's type is the output type, so zeros
// of that type say the same (shaped like the scale: one per axis entry).
absl::Status QuantizeOutputDtypeDown21(Step& step) {
  ir::Node& node = *step.node;
  const int64_t dtype = node.GetInt("output_dtype").value_or(0);
  if (dtype == 0) return GenericStep(step);
  const bool has_zero_point = node.num_inputs() > 2 && node.input(2) != nullptr;
  if (!has_zero_point) {
    if (dtype != pb::kUint8 && dtype != pb::kInt8) {
      return Block(
          absl::StrCat("output_dtype ", std::string(DataTypeName(static_cast<int32_t>(dtype))),
                       " without a zero point: only uint8 and int8 zero points are written going down"));
    }
    if (node.num_inputs() < 2 || node.input(1) == nullptr) return Block("QuantizeLinear without a scale");
    ir::Value* scale = node.input(1);
    std::optional<int64_t> rank = RankOf(step, scale);
    if (!rank) return Block("the scale's rank is unknown, so the zero point's shape is");
    ir::Value* zero_point = nullptr;
    if (*rank == 0) {
      ONNXKIT_ASSIGN_OR_RETURN(zero_point, AddScalar(step, "zero_point", static_cast<int32_t>(dtype), 0));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * shape, AddBefore(step, "Shape", {scale}, 1));
      pb::AttributeProto value;
      value.name = "value";
      value.type = pb::kAttrTensor;
      pb::TensorProto zero;
      zero.data_type = static_cast<int32_t>(dtype);
      zero.dims = {1};
      zero.raw_data = Bytes::Own(std::string(1, '\0'));
      value.t = std::move(zero);
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * zeros,
                               AddBefore(step, "ConstantOfShape", {shape->output(0)}, 1, {std::move(value)}));
      TypeLike(step, zeros->output(0), static_cast<int32_t>(dtype), scale);
      zero_point = zeros->output(0);
    }
    if (node.num_inputs() == 2) {
      ONNXKIT_RETURN_IF_ERROR(step.graph->AppendInput(&node, zero_point));
    } else {
      ONNXKIT_RETURN_IF_ERROR(step.graph->SetInput(&node, 2, zero_point));
    }
  }
  node.RemoveAttribute("output_dtype");
  return GenericStep(step);
}

absl::Status RoiAlignUp16(Step& step) {
  step.node->SetAttribute(StringAttr("coordinate_transformation_mode", "output_half_pixel"));
  return GenericStep(step);
}

absl::Status RoiAlignDown16(Step& step) {
  if (step.node->GetString("coordinate_transformation_mode").value_or("half_pixel") != "output_half_pixel") {
    return Block("RoiAlign before opset 16 behaves as coordinate_transformation_mode='output_half_pixel' only");
  }
  step.node->RemoveAttribute("coordinate_transformation_mode");
  return GenericStep(step);
}

// OptionalHasElement / OptionalGetElement 18 also take no input
// (HasElement: false) and plain tensors and sequences, which always hold
// their element (HasElement: true; GetElement: the value itself); 15-17
// take optionals only.
absl::Status OptionalDown18(Step& step) {
  const bool has = step.node->op_type() == "OptionalHasElement";
  ir::Value* in = PresentInput(step, 0);
  infer::Type::Kind kind = in != nullptr ? KindOf(step, *in) : infer::Type::Kind::kUnknown;
  const bool plain = kind == infer::Type::Kind::kTensor || kind == infer::Type::Kind::kSequence;
  if (has && (in == nullptr || plain)) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddScalar(step, "has_element", pb::kBool, in != nullptr ? 1 : 0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Identity", {c}));
    ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
    step.replaced = true;
    return absl::OkStatus();
  }
  if (!has && in != nullptr && plain) {
    // The value itself; through an Identity only where the output is a
    // graph output (Identity takes sequences from 16 only).
    ir::Value* out = step.node->output(0);
    ir::Value* y = in;
    if (out->IsGraphOutput()) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Identity", {in}));
    }
    ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
    step.replaced = true;
    return absl::OkStatus();
  }
  return GenericStep(step);
}

}  // namespace onnxkit::passes::convert
