// Helpers shared by the passes (see util.h).
#include "passes/util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/kernel_registry.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::passes {

std::vector<ir::Node*> SnapshotNodes(const ir::Graph& graph) {
  std::vector<ir::Node*> out;
  out.reserve(static_cast<size_t>(graph.num_nodes()));
  for (ir::Node* n : graph.nodes()) out.push_back(n);
  return out;
}

bool IsLive(const ir::Graph& graph, const ir::Node* node) { return graph.HasNode(node); }

namespace {

const ir::Node* ConstantNodeOf(const ir::Value& value) {
  const ir::Node* p = value.producer();
  if (p == nullptr || p->op_type() != "Constant" || !(p->domain().empty() || p->domain() == "ai.onnx")) {
    return nullptr;
  }
  if (p->attributes().size() != 1 || p->num_outputs() != 1) return nullptr;
  return p;
}

}  // namespace

const pb::TensorProto* ConstantProto(const ir::Value& value) {
  if (value.IsConstant()) return value.initializer();
  const ir::Node* c = ConstantNodeOf(value);
  if (c == nullptr) return nullptr;
  const pb::AttributeProto& a = c->attributes()[0].proto;
  if (a.name == "value" && a.t) return a.t.get();
  return nullptr;
}

bool IsConstantValue(const ir::Value& value) {
  if (value.IsConstant()) return value.initializer() != nullptr;
  const ir::Node* c = ConstantNodeOf(value);
  if (c == nullptr) return false;
  const std::string& n = c->attributes()[0].proto.name;
  return n == "value" || n == "value_float" || n == "value_floats" || n == "value_int" || n == "value_ints" ||
         n == "value_string" || n == "value_strings";
}

absl::StatusOr<runner::Tensor> ConstantTensor(const ir::Value& value, PassContext& ctx) {
  if (value.IsConstant() && value.initializer() != nullptr) {
    return runner::TensorFromProto(*value.initializer(), ctx.resolver());
  }
  const ir::Node* c = ConstantNodeOf(value);
  if (c == nullptr || !IsConstantValue(value)) {
    return absl::NotFoundError(absl::StrCat("value '", value.name(), "' is not constant"));
  }
  const pb::AttributeProto& a = c->attributes()[0].proto;
  if (a.name == "value" && a.t) return runner::TensorFromProto(*a.t, ctx.resolver());
  // The other value_* forms: the reference Constant kernel builds them.
  int64_t opset = ctx.Opset("");
  ONNXKIT_ASSIGN_OR_RETURN(const runner::KernelEntry* entry,
                           runner::FindKernel(runner::Backend::kReference, "", "Constant", opset));
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Kernel> kernel, entry->factory(*c, runner::KernelInfo{opset, 1}));
  std::vector<runner::RtValue> outputs(1);
  runner::KernelContext kctx(*c, opset, {}, &outputs, nullptr);
  ONNXKIT_RETURN_IF_ERROR(kernel->Run(kctx));
  if (!outputs[0].is_tensor()) return absl::InternalError("Constant produced no tensor");
  return outputs[0].tensor();
}

std::optional<double> ConstantScalar(const ir::Value& value, PassContext& ctx) {
  if (!IsConstantValue(value)) return std::nullopt;
  auto t = ConstantTensor(value, ctx);
  if (!t.ok() || t->size() != 1 || t->is_string()) return std::nullopt;
  return runner::reference::ElementAsDouble(*t, 0);
}

absl::StatusOr<ir::Value*> AddConstant(ir::Graph& graph, std::string_view hint, const runner::Tensor& t) {
  if (graph.Root()->model() != nullptr) return graph.AddInitializer(runner::TensorToProto(t, graph.FreshName(hint)));
  // A function body holds no initializers: a Constant node at its start.
  return AddConstantNode(graph, graph.num_nodes() > 0 ? *graph.nodes().begin() : nullptr, hint, t);
}

absl::StatusOr<ir::Value*> AddConstantNode(ir::Graph& graph, ir::Node* anchor, std::string_view hint,
                                           const runner::Tensor& t) {
  pb::AttributeProto value;
  value.name = "value";
  value.type = pb::kAttrTensor;
  value.t = runner::TensorToProto(t, "");
  ir::NodeSpec spec{.op_type = "Constant", .outputs = {graph.FreshName(hint)}, .attributes = {std::move(value)}};
  ir::Position where = anchor != nullptr ? ir::Position::Before(anchor) : ir::Position::End();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * node, graph.AddNode(std::move(spec), where));
  return node->output(0);
}

absl::Status ListInitializersAsInputs(ir::Graph& graph) {
  std::vector<ir::Value*> unlisted;
  for (ir::Value* v : graph.initializers()) {
    if (!v->is_graph_input()) unlisted.push_back(v);
  }
  for (ir::Value* v : unlisted) {
    if (v->type() == nullptr && v->initializer() != nullptr) {
      pb::TypeProto type;
      auto& tensor = type.tensor_type.mutable_value();
      tensor.elem_type = v->initializer()->data_type;
      auto& shape = tensor.shape.mutable_value();
      for (int64_t d : v->initializer()->dims) {
        pb::TensorShapeProto::Dimension dim;
        dim.kind = pb::TensorShapeProto::Dimension::kValue;
        dim.dim_value = d;
        shape.dim.push_back(dim);
      }
      v->set_type(std::move(type));
    }
    ONNXKIT_RETURN_IF_ERROR(graph.AddInput(v));
  }
  return absl::OkStatus();
}

absl::Status BodyInitializersToConstants(ir::Graph& graph) {
  std::vector<ir::Graph*> bodies;
  ir::ForEachGraph(graph, [&](ir::Graph& g) {
    if (&g != &graph) bodies.push_back(&g);
  });
  for (ir::Graph* body : bodies) {
    std::vector<ir::Value*> weights(body->initializers().begin(), body->initializers().end());
    for (ir::Value* w : weights) {
      if (w->is_graph_input() || w->initializer() == nullptr) continue;
      pb::AttributeProto value;
      value.name = "value";
      value.type = pb::kAttrTensor;
      value.t = *w->initializer();
      value.t->name.clear();
      const std::string name = w->name();
      ir::NodeSpec spec{
          .op_type = "Constant", .outputs = {body->FreshName(name)}, .attributes = {std::move(value)}};
      ir::Position where =
          body->num_nodes() > 0 ? ir::Position::Before(*body->nodes().begin()) : ir::Position::End();
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * constant, body->AddNode(std::move(spec), where));
      ONNXKIT_RETURN_IF_ERROR(body->ReplaceAllUsesWith(w, constant->output(0)));
      ONNXKIT_RETURN_IF_ERROR(body->RemoveInitializer(w));
      ONNXKIT_RETURN_IF_ERROR(body->RenameValue(constant->output(0), name));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RenameShadowingValues(ir::Graph& root) {
  std::vector<ir::Graph*> bodies;
  ir::ForEachGraph(root, [&](ir::Graph& g) {
    if (&g != &root) bodies.push_back(&g);
  });
  int renamed = 0;
  // Outer bodies first (ForEachGraph visits a graph before its bodies), so
  // a name is judged against enclosing names already settled.
  for (ir::Graph* body : bodies) {
    std::vector<ir::Value*> shadowing;
    for (ir::Value* v : body->values()) {
      if (v->graph() != body || v->name().empty()) continue;
      for (const ir::Graph* outer = body->parent(); outer != nullptr; outer = outer->parent()) {
        const ir::Value* o = outer->FindLocalValue(v->name());
        if (o != nullptr && o->graph() == outer) {
          shadowing.push_back(v);
          break;
        }
      }
    }
    for (ir::Value* v : shadowing) {
      ONNXKIT_RETURN_IF_ERROR(body->RenameValue(v, body->FreshName(v->name())));
      ++renamed;
    }
  }
  return renamed;
}

bool CanReplace(const ir::Value& old_value, const ir::Value& replacement) {
  if (&old_value == &replacement) return false;
  if (!old_value.IsGraphOutput()) return true;
  // The producer must go away with the replacement (no other output of it
  // in use), and the replacement must be able to take over the name.
  const ir::Node* producer = old_value.producer();
  if (producer == nullptr) return false;
  for (const ir::Value* out : producer->outputs()) {
    if (out != nullptr && out != &old_value && (out->has_uses() || out->IsGraphOutput())) return false;
  }
  return replacement.kind() == ir::ValueKind::kNodeOutput && replacement.graph() == old_value.graph() &&
         !replacement.IsGraphOutput();
}

absl::Status ReplaceValue(ir::Graph& graph, ir::Value* old_value, ir::Value* replacement) {
  if (!CanReplace(*old_value, *replacement)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot replace '", old_value->name(), "' by '", replacement->name(), "'"));
  }
  bool was_output = old_value->IsGraphOutput();
  std::string name = old_value->name();
  ir::Node* producer = old_value->producer();
  ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(old_value, replacement));
  if (producer != nullptr && producer->graph() == &graph) {
    ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, producer).status());
  }
  if (was_output) {
    if (graph.FindLocalValue(name) != nullptr) {
      return absl::InternalError(absl::StrCat("graph output '", name, "' still has a producer after its replacement"));
    }
    ONNXKIT_RETURN_IF_ERROR(replacement->graph()->RenameValue(replacement, name));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RemoveIfDead(ir::Graph& graph, ir::Node* node) {
  for (ir::Value* out : node->outputs()) {
    if (out != nullptr && (out->has_uses() || out->IsGraphOutput())) return false;
  }
  ONNXKIT_RETURN_IF_ERROR(graph.RemoveNode(node));
  return true;
}

std::optional<int32_t> ElemType(const ir::Value& value, const PassContext& ctx) {
  if (const infer::ValueState* s = ctx.State(value); s != nullptr && s->type.is_tensor() && s->type.elem_type != 0) {
    return s->type.elem_type;
  }
  if (const pb::TensorProto* t = ConstantProto(value)) return t->data_type;
  const pb::TypeProto* type = value.type();
  if (type != nullptr && type->tensor_type && type->tensor_type->elem_type != 0) return type->tensor_type->elem_type;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> KnownShape(const ir::Value& value, const PassContext& ctx) {
  if (const pb::TensorProto* t = ConstantProto(value)) return t->dims;
  if (const infer::ValueState* s = ctx.State(value); s != nullptr && s->type.is_tensor() && s->type.shape) {
    std::vector<int64_t> dims;
    for (const infer::Dim& d : *s->type.shape) dims.push_back(d.known() ? *d.value : -1);
    return dims;
  }
  const pb::TypeProto* type = value.type();
  if (type == nullptr || !type->tensor_type || !type->tensor_type->shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : type->tensor_type->shape->dim) {
    dims.push_back(d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0 ? d.dim_value : -1);
  }
  return dims;
}

ir::Node* SoleConsumer(const ir::Value& value) {
  if (value.IsGraphOutput() || value.uses().size() != 1) return nullptr;
  return value.uses()[0].node;
}

}  // namespace onnxkit::passes
