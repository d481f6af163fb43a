// Helpers every convert adapter shares (see adapter.h): blocking statuses,
// constants, nodes added before the node being converted.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/context.h"
#include "passes/convert/adapter.h"
#include "passes/util.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {
constexpr std::string_view kBlockTag = "convert-block: ";
}  // namespace

absl::Status Block(std::string reason) {
  return absl::FailedPreconditionError(absl::StrCat(Sv(kBlockTag), reason));
}

bool IsBlock(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StartsWith(status.message(), Sv(kBlockTag));
}

absl::StatusOr<ir::Value*> AddInts(Step& step, std::string_view hint, const std::vector<int64_t>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t,
                           runner::Tensor::Allocate(pb::kInt64, {static_cast<int64_t>(v.size())}));
  if (!v.empty()) std::memcpy(t.mutable_raw(), v.data(), v.size() * sizeof(int64_t));
  return AddConstant(*step.graph, hint, t);
}

absl::StatusOr<ir::Value*> AddIntScalar(Step& step, std::string_view hint, int32_t dtype, int64_t v) {
  auto fits = [v](auto lo, auto hi) {
    return v >= static_cast<int64_t>(lo) && v <= static_cast<int64_t>(hi);
  };
  runner::Tensor t;
  switch (dtype) {
    case pb::kInt64:
      t = runner::Tensor::Scalar<int64_t>(dtype, v);
      break;
    case pb::kInt32:
      if (!fits(INT32_MIN, INT32_MAX)) return Block(absl::StrCat("the constant ", v, " does not fit int32"));
      t = runner::Tensor::Scalar<int32_t>(dtype, static_cast<int32_t>(v));
      break;
    case pb::kInt8:
      if (!fits(INT8_MIN, INT8_MAX)) return Block(absl::StrCat("the constant ", v, " does not fit int8"));
      t = runner::Tensor::Scalar<int8_t>(dtype, static_cast<int8_t>(v));
      break;
    case pb::kUint8:
      if (!fits(0, UINT8_MAX)) return Block(absl::StrCat("the constant ", v, " does not fit uint8"));
      t = runner::Tensor::Scalar<uint8_t>(dtype, static_cast<uint8_t>(v));
      break;
    case pb::kBool:
      t = runner::Tensor::Scalar<uint8_t>(dtype, v != 0 ? 1 : 0);
      break;
    default:
      return Block(absl::StrCat("no integer constant of element type ", dtype, " can be built here"));
  }
  return AddConstant(*step.graph, hint, t);
}

absl::StatusOr<ir::Value*> AddScalar(Step& step, std::string_view hint, int32_t dtype, double v) {
  switch (dtype) {
    case pb::kFloat:
      return AddConstant(*step.graph, hint, runner::Tensor::Scalar<float>(dtype, static_cast<float>(v)));
    case pb::kDouble:
      return AddConstant(*step.graph, hint, runner::Tensor::Scalar<double>(dtype, v));
    default:
      break;
  }
  // Integer types: whole values within int64 only (beyond 2^53 a double
  // no longer holds every integer: AddIntScalar takes those exactly).
  if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18) || v != std::trunc(v))
    return Block(absl::StrCat("the constant ", v, " is not an integer of element type ", dtype));
  return AddIntScalar(step, hint, dtype, static_cast<int64_t>(v));
}

absl::StatusOr<ir::Value*> AddFloatScalar(Step& step, std::string_view hint, int32_t elem, double v) {
  if (elem == pb::kFloat || elem == pb::kDouble) return AddScalar(step, hint, elem, v);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * f, AddScalar(step, hint, pb::kFloat, v));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * c, AddBefore(step, "Cast", {f}, 1, {IntAttr("to", elem)}));
  return c->output(0);
}

absl::StatusOr<ir::Value*> Op(Step& step, std::string op, std::vector<ir::Value*> inputs,
                              std::vector<pb::AttributeProto> attrs) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n,
                           AddBefore(step, std::move(op), std::move(inputs), 1, std::move(attrs)));
  return n->output(0);
}

absl::StatusOr<ir::Value*> Dims(Step& step, ir::Value* x, int64_t start, int64_t end) {
  return Op(step, "Shape", {x}, {IntAttr("start", start), IntAttr("end", end)});
}

absl::StatusOr<ir::Value*> DimScalar(Step& step, ir::Value* x, int64_t axis) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Op(step, "Shape", {x}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * index, AddIntScalar(step, "dim_index", pb::kInt64, axis));
  return Op(step, "Gather", {shape, index});
}

absl::Status RouteOutput(Step& step, int i, ir::Value* value,
                         std::vector<std::pair<ir::Value*, std::string>>& renames) {
  if (i >= step.node->num_outputs()) return absl::OkStatus();
  ir::Value* o = step.node->output(i);
  if (o == nullptr || o->name().empty() || (!o->has_uses() && !o->IsGraphOutput())) return absl::OkStatus();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, Op(step, "Identity", {value}));
  if (std::optional<int32_t> e = ElemType(*o, *step.ctx)) TypeLike(step, r, *e, o);
  if (o->IsGraphOutput()) renames.emplace_back(r, o->name());
  return step.graph->ReplaceAllUsesWith(o, r);
}

ir::Value* PresentInput(const Step& step, int i) {
  if (i >= step.node->num_inputs()) return nullptr;
  ir::Value* v = step.node->input(i);
  return v != nullptr && !v->name().empty() ? v : nullptr;
}

std::optional<int64_t> KnownDim(Step& step, const ir::Value* v, size_t i) {
  if (v == nullptr) return std::nullopt;
  std::optional<std::vector<int64_t>> s = KnownShape(*v, *step.ctx);
  if (!s || i >= s->size() || (*s)[i] < 0) return std::nullopt;
  return (*s)[i];
}

bool IsFloatElem(std::optional<int32_t> elem) {
  return elem &&
         (*elem == pb::kFloat || *elem == pb::kDouble || *elem == pb::kFloat16 || *elem == pb::kBfloat16);
}

std::optional<std::vector<int64_t>> ConstInts(Step& step, int i) {
  if (i >= step.node->num_inputs() || step.node->input(i) == nullptr) return std::nullopt;
  auto t = ConstantTensor(*step.node->input(i), *step.ctx);
  if (!t.ok()) {
    // A value computed from static shapes (Shape -> Gather -> Concat,
    // Range over a Size, ...): inference knows its contents.
    const infer::ValueState* state = step.ctx->State(*step.node->input(i));
    if (state == nullptr || !state->data) return std::nullopt;
    return infer::KnownValues(*state->data);
  }
  if (t->is_string()) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t->size(); ++k) {
    if (t->dtype() == pb::kInt64) {
      out.push_back(t->data<int64_t>()[k]);
    } else if (t->dtype() == pb::kInt32) {
      out.push_back(t->data<int32_t>()[k]);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

absl::StatusOr<ir::Node*> AddBefore(Step& step, std::string op, std::vector<ir::Value*> inputs, int num_outputs,
                                    std::vector<pb::AttributeProto> attrs) {
  ir::NodeSpec spec;
  spec.op_type = std::move(op);
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  for (int i = 0; i < num_outputs; ++i) spec.outputs.push_back(step.graph->FreshName(spec.op_type + "_out"));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, step.graph->AddNode(std::move(spec), ir::Position::Before(step.node)));
  if (step.created != nullptr) step.created->push_back(n);
  return n;
}

std::optional<int64_t> RankOf(Step& step, const ir::Value* value) {
  if (value == nullptr) return std::nullopt;
  auto shape = KnownShape(*value, *step.ctx);
  if (!shape) return std::nullopt;
  return static_cast<int64_t>(shape->size());
}

absl::Status ReplaceNodeOutput(Step& step, ir::Value* result) {
  ir::Value* old = step.node->output(0);
  for (int i = 1; i < step.node->num_outputs(); ++i) {
    ir::Value* o = step.node->output(i);
    if (o != nullptr && !o->name().empty() && (o->has_uses() || o->IsGraphOutput())) {
      return Block(absl::StrCat("output ", i, " is used and has no equivalent"));
    }
  }
  if (!CanReplace(*old, *result)) return Block("its output cannot be rerouted");
  // The replacement (a value an expansion made) is typed as the output it
  // stands for, so that later steps see through it: a LayerNormalization
  // whose input is another's expansion needs its element type.
  if (result->type() == nullptr) {
    if (std::optional<int32_t> elem = ElemType(*old, *step.ctx)) TypeLike(step, result, *elem, old);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(*step.graph, old, result));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ReplaceNodeOutputs(Step& step, ir::Value* result,
                                const std::vector<std::pair<int, ir::Value*>>& others) {
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (const auto& [i, value] : others) ONNXKIT_RETURN_IF_ERROR(RouteOutput(step, i, value, renames));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, result));
  step.replaced = true;
  for (auto& [v, name] : renames) ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(v, name));
  return absl::OkStatus();
}

absl::Status TrimInputs(Step& step) {
  while (step.node->num_inputs() > 0 && step.node->input(step.node->num_inputs() - 1) == nullptr) {
    ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveInput(step.node, step.node->num_inputs() - 1));
  }
  return absl::OkStatus();
}

// Types `value` as a tensor of `elem` with the dims of `like` where known,
// so later steps (broadcast checks) see through the Casts widening adds.
void TypeLike(Step& step, ir::Value* value, int32_t elem, const ir::Value* like) {
  pb::TypeProto type;
  auto& tensor = type.tensor_type.mutable_value();
  tensor.elem_type = elem;
  if (std::optional<std::vector<int64_t>> dims = KnownShape(*like, *step.ctx)) {
    auto& shape = tensor.shape.mutable_value();
    for (int64_t d : *dims) {
      pb::TensorShapeProto::Dimension dim;
      if (d >= 0) {
        dim.kind = pb::TensorShapeProto::Dimension::kValue;
        dim.dim_value = d;
      }
      shape.dim.push_back(dim);
    }
  }
  value->set_type(std::move(type));
}

}  // namespace onnxkit::passes::convert
