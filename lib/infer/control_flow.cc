// Shape functions of ops with bodies: If (outputs from both branches), Loop
// (body inputs typed per the spec: iteration number, condition, loop-carried
// values; scan outputs gain a leading iteration dim), Scan (opset 8 with a
// batch axis, opset 9 on with scan axes), SequenceMap.
//
//   If(c) then -> [2, 3] else -> [2, 4]   -> [2, ?]
//   Loop(M, cond, v: [2]) body -> (cond, v' [2], s [3]) -> v_final [2], s_all [?, 3]
//   Scan(x [5, 4], scan_input_axes=[0]) body(x_t [4]) -> y_t [4] -> y [5, 4]
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/ir/graph.h"

namespace onnxkit::infer {
namespace {

const ir::Graph* Body(NodeContext& ctx, std::string_view name) {
  const ir::Attribute* a = ctx.attr(name);
  return a != nullptr && a->g ? a->g.get() : nullptr;
}

Type InputType(NodeContext& ctx, int i) {
  const Type* t = ctx.input_type(i);
  return t != nullptr ? *t : Type{};
}

// `t` with `dim` inserted at `axis` (a tensor of known rank), else the
// tensor type without a shape.
Type WithDim(const Type& t, size_t axis, Dim dim) {
  Type out = t;
  if (!out.is_tensor()) return out;
  if (!out.shape || axis > out.shape->size()) {
    out.shape.reset();
  } else {
    out.shape->insert(out.shape->begin() + static_cast<ptrdiff_t>(axis), std::move(dim));
  }
  return out;
}

// `t` without the dim at `axis` (nullopt shape when unknown or too short).
Type WithoutDim(const Type& t, size_t axis) {
  Type out = t;
  if (!out.is_tensor() || !out.shape) return out;
  if (axis >= out.shape->size()) {
    out.shape.reset();
  } else {
    out.shape->erase(out.shape->begin() + static_cast<ptrdiff_t>(axis));
  }
  return out;
}

}  // namespace

void ShapeIf(NodeContext& ctx) {
  const ir::Graph* then_branch = Body(ctx, "then_branch");
  const ir::Graph* else_branch = Body(ctx, "else_branch");
  if (then_branch == nullptr || else_branch == nullptr) return;
  // A condition known from constants and declared shapes selects one
  // branch; the other is dead code and not inferred (its shapes may well be
  // impossible for this model, as in onnx's rank-generic function bodies).
  if (std::optional<int64_t> cond = ctx.input_scalar(0)) {
    std::vector<Type> taken = ctx.subgraphs()->InferBody(*cond != 0 ? *then_branch : *else_branch, {});
    for (int i = 0; i < ctx.num_outputs() && static_cast<size_t>(i) < taken.size(); ++i) {
      ctx.set_type(i, std::move(taken[static_cast<size_t>(i)]));
    }
    return;
  }
  std::vector<Type> a = ctx.subgraphs()->InferBody(*then_branch, {});
  std::vector<Type> b = ctx.subgraphs()->InferBody(*else_branch, {});
  if (a.size() != b.size() || static_cast<int>(a.size()) != ctx.num_outputs()) {
    ctx.Fail(absl::StrCat("then_branch has ", a.size(), " outputs and else_branch ", b.size(), ", the node ",
                          ctx.num_outputs()));
    return;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_tensor() && b[i].is_tensor() && a[i].elem_type != 0 && b[i].elem_type != 0 &&
        a[i].elem_type != b[i].elem_type) {
      ctx.Fail(absl::StrCat("output ", i, " is ", TypeName(a[i]), " in then_branch but ", TypeName(b[i]),
                            " in else_branch"));
      return;
    }
    Type t = a[i].unknown() ? b[i] : b[i].unknown() ? a[i] : UnionTypes(a[i], b[i]);
    ctx.set_type(static_cast<int>(i), std::move(t));
  }
}

void ShapeLoop(NodeContext& ctx) {
  const ir::Graph* body = Body(ctx, "body");
  if (body == nullptr) return;
  const int carried = std::max(0, ctx.num_inputs() - 2);
  // Loop-carried values may change shape between iterations: the body sees
  // their types without shapes (as onnx does), and so the iteration number
  // and condition, which bodies declare as [] or [1].
  std::vector<Type> inputs = {TensorOf(pb::kInt64), TensorOf(pb::kBool)};
  for (int i = 0; i < carried; ++i) inputs.push_back(WithoutShapes(InputType(ctx, i + 2)));
  std::vector<Type> out = ctx.subgraphs()->InferBody(*body, inputs);
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    size_t k = static_cast<size_t>(i) + 1;  // skip the condition
    if (k >= out.size()) break;
    if (i < carried) {
      const Type in = InputType(ctx, i + 2);
      ctx.set_type(i, in.unknown() ? out[k] : out[k].unknown() ? in : UnionTypes(out[k], in));
    } else {
      ctx.set_type(i, WithDim(out[k], 0, Dim::Unknown()));
    }
  }
}

void ShapeScan(NodeContext& ctx) {
  const ir::Graph* body = Body(ctx, "body");
  const int64_t num_scan = ctx.attr_int("num_scan_inputs", -1);
  if (body == nullptr || num_scan < 0) return;
  const bool batched = ctx.opset() < 9;  // Scan-8: [batch, sequence, ...] and sequence_lens first
  const int first = batched ? 1 : 0;
  const int states = ctx.num_inputs() - first - static_cast<int>(num_scan);
  if (states < 0) return;
  std::optional<std::vector<int64_t>> in_axes = ctx.attr_ints("scan_input_axes");
  std::optional<std::vector<int64_t>> out_axes = ctx.attr_ints("scan_output_axes");
  std::vector<Type> inputs;
  Dim length = Dim::Unknown();
  Dim batch = Dim::Unknown();
  for (int i = 0; i < states; ++i) {
    Type t = InputType(ctx, first + i);
    inputs.push_back(batched ? WithoutDim(t, 0) : t);
  }
  for (int i = 0; i < num_scan; ++i) {
    Type t = InputType(ctx, first + states + i);
    int64_t axis = batched ? 1 : (in_axes && static_cast<size_t>(i) < in_axes->size() ? (*in_axes)[i] : 0);
    if (t.is_tensor() && t.shape) {
      const int64_t rank = static_cast<int64_t>(t.shape->size());
      std::optional<int64_t> a = ctx.NormalizeAxis(axis, rank, "scan input axis");
      if (!a) return;
      if (!length.known()) length = (*t.shape)[static_cast<size_t>(*a)];
      if (batched && !batch.known()) batch = (*t.shape)[0];
      t = WithoutDim(t, static_cast<size_t>(*a));
      if (batched) t = WithoutDim(t, 0);
    } else {
      t.shape.reset();
    }
    inputs.push_back(std::move(t));
  }
  std::vector<Type> out = ctx.subgraphs()->InferBody(*body, inputs);
  for (int i = 0; i < ctx.num_outputs() && static_cast<size_t>(i) < out.size(); ++i) {
    if (i < states) {
      ctx.set_type(i, batched ? WithDim(out[static_cast<size_t>(i)], 0, batch) : out[static_cast<size_t>(i)]);
      continue;
    }
    const Type& t = out[static_cast<size_t>(i)];
    size_t j = static_cast<size_t>(i - states);
    int64_t axis = out_axes && j < out_axes->size() ? (*out_axes)[j] : 0;
    if (batched) {
      ctx.set_type(i, WithDim(WithDim(t, 0, length), 0, batch));
    } else if (t.is_tensor() && t.shape) {
      std::optional<int64_t> a =
          ctx.NormalizeAxis(axis, static_cast<int64_t>(t.shape->size()) + 1, "scan output axis");
      if (!a) return;
      ctx.set_type(i, WithDim(t, static_cast<size_t>(*a), length));
    } else {
      ctx.set_type(i, WithoutShapes(t));
    }
  }
}

void ShapeSequenceMap(NodeContext& ctx) {
  const ir::Graph* body = Body(ctx, "body");
  if (body == nullptr) return;
  std::vector<Type> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    Type t = InputType(ctx, i);
    if (t.kind == Type::Kind::kSequence) t = t.inner ? *t.inner : Type{};
    inputs.push_back(std::move(t));
  }
  std::vector<Type> out = ctx.subgraphs()->InferBody(*body, inputs);
  for (int i = 0; i < ctx.num_outputs() && static_cast<size_t>(i) < out.size(); ++i) {
    ctx.set_type(i, SequenceOf(WithoutShapes(out[static_cast<size_t>(i)])));
  }
}

}  // namespace onnxkit::infer
