// Type and shape functions of sequence and optional ops, whose output types
// the schemas leave to inference: SequenceEmpty (dtype), SequenceConstruct,
// SequenceInsert, SequenceAt, SequenceLength, SplitToSequence,
// ConcatFromSequence, Optional, OptionalGetElement, OptionalHasElement.
//
//   SequenceConstruct(a: float[2, 3], b: float[2, 3]) -> seq(tensor(float)[2, 3])
//   SequenceAt(s: seq(tensor(int64)), 0)              -> tensor(int64)
//   ConcatFromSequence(seq(float[2, 3]), axis=0)      -> tensor(float)[?, 3]
#include <utility>

#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"

namespace onnxkit::infer {
namespace {

// The element type of a sequence (or optional) input; unknown otherwise.
Type ElementOf(NodeContext& ctx, int i, Type::Kind kind) {
  const Type* t = ctx.input_type(i);
  if (t == nullptr || t->kind != kind || !t->inner) return Type{};
  return *t->inner;
}

}  // namespace

void ShapeSequenceEmpty(NodeContext& ctx) {
  ctx.set_type(0, SequenceOf(TensorOf(static_cast<int32_t>(ctx.attr_int("dtype", pb::kFloat)))));
}

void ShapeSequenceConstruct(NodeContext& ctx) {
  std::optional<Type> element;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Type* t = ctx.input_type(i);
    if (t == nullptr || t->unknown()) return;
    element = element ? UnionTypes(*element, *t) : *t;
  }
  if (element) ctx.set_type(0, SequenceOf(std::move(*element)));
}

void ShapeSequenceInsert(NodeContext& ctx) {
  const Type* seq = ctx.input_type(0);
  const Type* tensor = ctx.input_type(1);
  if (seq == nullptr || seq->kind != Type::Kind::kSequence) return;
  Type element = ElementOf(ctx, 0, Type::Kind::kSequence);
  if (tensor == nullptr || tensor->unknown()) {
    ctx.set_type(0, SequenceOf(WithoutShapes(element)));
  } else if (element.unknown()) {
    ctx.set_type(0, SequenceOf(*tensor));
  } else {
    // An empty sequence's element shape says nothing: keep the union with
    // what is inserted only when the element types agree.
    ctx.set_type(0, SequenceOf(element.elem_type == tensor->elem_type ? UnionTypes(element, *tensor)
                                                                       : WithoutShapes(element)));
  }
}

void ShapeSequenceAt(NodeContext& ctx) {
  Type element = ElementOf(ctx, 0, Type::Kind::kSequence);
  if (!element.unknown()) ctx.set_type(0, std::move(element));
}

void ShapeSequenceLength(NodeContext& ctx) { ctx.set_shape(0, {}); }

void ShapeSplitToSequence(NodeContext& ctx) {
  const Type* in = ctx.input_type(0);
  if (in == nullptr || !in->is_tensor()) return;
  Type element = TensorOf(in->elem_type);
  if (!ctx.has_input(1) && in->shape) {
    std::optional<int64_t> axis =
        ctx.NormalizeAxis(ctx.attr_int("axis", 0), static_cast<int64_t>(in->shape->size()));
    if (!axis) return;
    Dims dims = *in->shape;
    if (ctx.attr_int("keepdims", 1) != 0) {
      dims[static_cast<size_t>(*axis)] = Dim::Of(1);
    } else {
      dims.erase(dims.begin() + *axis);
    }
    element.shape = std::move(dims);
  }
  ctx.set_type(0, SequenceOf(std::move(element)));
}

void ShapeConcatFromSequence(NodeContext& ctx) {
  Type element = ElementOf(ctx, 0, Type::Kind::kSequence);
  if (!element.is_tensor()) return;
  ctx.set_elem(0, element.elem_type);
  if (!element.shape || !ctx.has_attr("axis")) return;
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const int64_t rank = static_cast<int64_t>(element.shape->size()) + (new_axis ? 1 : 0);
  std::optional<int64_t> axis = ctx.NormalizeAxis(ctx.attr_int("axis", 0), rank);
  if (!axis) return;
  Dims dims = *element.shape;
  if (new_axis) {
    dims.insert(dims.begin() + *axis, Dim::Unknown());
  } else {
    dims[static_cast<size_t>(*axis)] = Dim::Unknown();
  }
  ctx.set_shape(0, std::move(dims));
}

void ShapeOptional(NodeContext& ctx) {
  if (const Type* t = ctx.input_type(0)) {
    ctx.set_type(0, OptionalOf(*t));
  } else if (const ir::Attribute* a = ctx.attr("type"); a != nullptr && a->proto.tp) {
    ctx.set_type(0, OptionalOf(TypeFromProto(*a->proto.tp)));
  }
}

void ShapeOptionalGetElement(NodeContext& ctx) {
  const Type* t = ctx.input_type(0);
  if (t == nullptr) return;
  if (t->kind == Type::Kind::kOptional) {
    if (t->inner) ctx.set_type(0, *t->inner);
  } else {
    ctx.set_type(0, *t);
  }
}

void ShapeOptionalHasElement(NodeContext& ctx) { ctx.set_shape(0, {}); }

}  // namespace onnxkit::infer
