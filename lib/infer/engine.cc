// The inference engine: graph walk, node typing (schema types, then the
// op's shape function from shape_fns.def), declared-type comparison.
//
// Output types from an operator schema: type parameters bound by the node's
// actual inputs, concrete formal types ("tensor(int64)" for Shape), and
// parameters constrained to one type:
//   Add(x: tensor(float), y: tensor(float)) -> T bound to tensor(float) -> z: tensor(float)
//   Shape(x: tensor(float))                 -> formal "tensor(int64)"   -> s: tensor(int64)
// Heterogeneous variadic formals (If/Loop/Scan's V) bind nothing: their
// shape functions type the outputs from the bodies.
#include "lib/infer/engine.h"

#include <algorithm>
#include <map>
#include <span>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/infer/shape_fns.h"
#include "lib/infer/tensor_state.h"
#include "lib/ir/topo.h"
#include "lib/ops/registry.h"
#include "lib/ops/type_string.h"

namespace onnxkit::infer {

std::string_view IssueCode(IssueKind kind) {
  switch (kind) {
    case IssueKind::kTypeConflict: return "E0600";
    case IssueKind::kImpossibleShape: return "E0601";
    case IssueKind::kShapeConflict: return "E0602";
    case IssueKind::kTypeConstraint: return "E0603";
  }
  return "E0601";
}
namespace {

constexpr char kSep[] = " › ";

Type DeclaredType(const ir::Value* value, int64_t* rank_too_large) {
  return value->type() != nullptr ? TypeFromProto(*value->type(), rank_too_large) : Type{};
}

// The attribute of `owner` holding `graph`.
std::string AttributeHolding(const ir::Node& owner, const ir::Graph& graph) {
  for (const ir::Attribute& a : owner.attributes()) {
    if (a.g.get() == &graph) return a.name();
    for (const auto& g : a.graphs) {
      if (g.get() == &graph) return a.name();
    }
  }
  return "?";
}

// A message when a fully known tensor type could not exist: its element
// count or byte size overflows int64.
std::optional<std::string> SizeOverflow(const Type& t) {
  if (!t.is_tensor() || !t.shape) return std::nullopt;
  std::optional<std::vector<int64_t>> dims = KnownValues(*t.shape);
  if (!dims) return std::nullopt;
  std::optional<int64_t> count = CheckedElementCount(*dims);
  if (!count) return absl::StrCat("shape ", DimsToString(t.shape), " has more elements than int64 can count");
  if (DataTypeBits(t.elem_type) > 0 && !RawByteSize(t.elem_type, *count)) {
    return absl::StrCat("shape ", DimsToString(t.shape), " of ", TypeName(t),
                        " needs more bytes than int64 can count");
  }
  return std::nullopt;
}

// The formal parameter actual `index` binds to; null past the end.
const ops::FormalParameter* FormalAt(std::span<const ops::FormalParameter> formals, int index) {
  if (formals.empty() || index < 0) return nullptr;
  if (static_cast<size_t>(index) < formals.size()) return &formals[static_cast<size_t>(index)];
  const ops::FormalParameter& last = formals.back();
  return last.option == ops::ParamOption::kVariadic ? &last : nullptr;
}

bool Complete(const Type& t) {
  switch (t.kind) {
    case Type::Kind::kTensor:
    case Type::Kind::kSparseTensor:
      return t.elem_type != 0;
    case Type::Kind::kSequence:
    case Type::Kind::kOptional:
    case Type::Kind::kMap:
      return t.inner != nullptr && Complete(*t.inner);
    case Type::Kind::kOpaque:
      return true;
    case Type::Kind::kUnknown:
      break;
  }
  return false;
}

std::optional<Type> ParseType(std::string_view type_string) {
  absl::StatusOr<pb::TypeProto> parsed = ops::ParseTypeString(type_string);
  if (!parsed.ok()) return std::nullopt;
  return WithoutShapes(TypeFromProto(*parsed));
}

// Sets the output types of `ctx` that `schema` determines from the input
// types: bound type parameters, concrete formal types, and parameters
// allowing a single type. Shapes are left unknown.
void InferSchemaTypes(const ops::OpSchema& schema, NodeContext& ctx) {
  std::vector<std::pair<std::string_view, Type>> bound;
  auto find = [&](std::string_view param) -> const Type* {
    for (const auto& [p, t] : bound) {
      if (p == param) return &t;
    }
    return nullptr;
  };
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const ops::FormalParameter* f = FormalAt(schema.inputs(), i);
    if (f == nullptr || !f->is_type_parameter() || !f->homogeneous) continue;
    const Type* t = ctx.input_type(i);
    if (t == nullptr || !Complete(*t) || find(f->type_str) != nullptr) continue;
    bound.emplace_back(f->type_str, WithoutShapes(*t));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ops::FormalParameter* f = FormalAt(schema.outputs(), i);
    if (f == nullptr) continue;
    std::optional<Type> t;
    if (!f->is_type_parameter()) {
      t = ParseType(f->type_str);
    } else if (!f->homogeneous) {
      continue;
    } else if (const Type* b = find(f->type_str)) {
      t = *b;
    } else if (std::span<const std::string_view> allowed = schema.AllowedTypes(*f); allowed.size() == 1) {
      t = ParseType(allowed[0]);
    }
    if (t) ctx.set_type(i, std::move(*t));
  }
}

struct Entry {
  std::string_view domain;
  std::string_view op;
  ShapeFn fn;
};

constexpr Entry kEntries[] = {
#define ONNXKIT_SHAPE_FN(domain, op, function) {domain, op, &function},
#include "lib/infer/shape_fns.def"
#undef ONNXKIT_SHAPE_FN
};

constexpr bool Sorted() {
  for (size_t i = 1; i < std::size(kEntries); ++i) {
    const Entry& a = kEntries[i - 1];
    const Entry& b = kEntries[i];
    if (std::pair(a.domain, a.op) >= std::pair(b.domain, b.op)) return false;
  }
  return true;
}
static_assert(Sorted(), "shape_fns.def must be sorted by (domain, op) without duplicates");

}  // namespace

ShapeFn FindShapeFn(std::string_view domain, std::string_view op) {
  const std::pair<std::string_view, std::string_view> key(ops::CanonicalDomain(domain), op);
  const Entry* it = std::lower_bound(std::begin(kEntries), std::end(kEntries), key, [](const Entry& e, const auto& k) {
    return std::pair(e.domain, e.op) < k;
  });
  if (it == std::end(kEntries) || it->domain != key.first || it->op != key.second) return nullptr;
  return it->fn;
}

Engine::Engine(const ir::Model& model) : model_(model) {
  for (const pb::FunctionProto& f : model.functions()) {
    functions_.emplace(std::string(ops::CanonicalDomain(f.domain)), f.name);
  }
}

void Engine::Run() { InferGraph(model_.graph(), nullptr); }

std::map<std::string, ValueState> Engine::States() const {
  std::map<std::string, ValueState> out;
  for (const ir::Value* v : order_) {
    if (!v->name().empty()) out.emplace(v->name(), states_.at(v));
  }
  return out;
}

void Engine::Report(IssueKind rule, std::string location, std::string message) {
  if (issues_.size() >= kMaxIssues) return;
  issues_.push_back(InferenceIssue{rule, std::move(location), std::move(message)});
}

std::string Engine::GraphLocation(const ir::Graph& graph) const {
  std::string self = absl::StrCat("graph '", Sv(graph.name()), "'");
  const ir::Node* owner = graph.owner_node();
  if (graph.parent() == nullptr || owner == nullptr) return self;
  return absl::StrCat(GraphLocation(*graph.parent()), kSep, "node ", ir::NodeLabel(*owner), kSep, "attribute '",
                      Sv(AttributeHolding(*owner, graph)), "'", kSep, self);
}

std::string Engine::NodeLocation(const ir::Node& node) const {
  return absl::StrCat(GraphLocation(*node.graph()), kSep, "node ", ir::NodeLabel(node));
}

const ValueState* Engine::StateOf(const ir::Value* value) {
  auto it = states_.find(value);
  if (it != states_.end()) return &it->second;
  ValueState s;
  s.type = DeclaredType(value, nullptr);
  order_.push_back(value);
  return &states_.emplace(value, std::move(s)).first->second;
}

void Engine::Settle(const ir::Value* value, ValueState inferred, absl::FunctionRef<std::string()> location) {
  int64_t rank_too_large = 0;
  Type declared = DeclaredType(value, &rank_too_large);
  std::string what = absl::StrCat("'", Sv(value->name()), "'");
  if (rank_too_large > 0) {
    Report(IssueKind::kImpossibleShape, location(),
           absl::StrCat(what, ": declared rank ", rank_too_large, " is above the limit of ", limits::kMaxRank,
                        " (limits::kMaxRank)"));
  }
  if (std::optional<Conflict> c = FindConflict(inferred.type, declared)) {
    Report(c->element_type ? IssueKind::kTypeConflict : IssueKind::kShapeConflict, location(),
           absl::StrCat(what, ": ", c->message));
    reported_.insert(value);
    inferred.data.reset();
    inferred.float_data.reset();
  }
  inferred.type = MergeTypes(inferred.type, declared);
  if (states_.find(value) == states_.end()) order_.push_back(value);
  states_[value] = std::move(inferred);
}

void Engine::InferGraph(const ir::Graph& graph, const std::vector<Type>* inputs) {
  std::string location;  // computed on first use
  auto where = [&]() -> const std::string& {
    if (location.empty()) location = GraphLocation(graph);
    return location;
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ir::Value* v = graph.inputs()[i];
    if (v->kind() == ir::ValueKind::kInitializer) continue;
    ValueState s;
    if (inputs != nullptr && i < inputs->size()) s.type = (*inputs)[i];
    Settle(v, std::move(s), [&] { return absl::StrCat(where(), kSep, "input '", Sv(v->name()), "'"); });
  }
  for (const ir::Value* v : graph.initializers()) {
    ValueState s = StateFromTensor(*v->initializer());
    // An initializer that is also a graph input (from IR 4 on) is only a
    // default the caller may override: its contents are not known.
    if (v->is_graph_input() && model_.ir_version() >= 4) {
      s.data.reset();
      s.float_data.reset();
    }
    Settle(v, std::move(s), [&] { return absl::StrCat(where(), kSep, "initializer '", Sv(v->name()), "'"); });
  }
  for (const ir::Value* v : graph.sparse_initializers()) {
    Settle(v, StateFromSparseTensor(*v->sparse_initializer()),
           [&] { return absl::StrCat(where(), kSep, "sparse initializer '", Sv(v->name()), "'"); });
  }
  absl::StatusOr<std::vector<ir::Node*>> order = ir::TopologicalOrder(graph);
  if (order.ok()) {
    for (const ir::Node* n : *order) InferNode(*n);
  } else {
    for (const ir::Node* n : graph.nodes()) InferNode(*n);
  }
  CheckGraphOutputs(graph);
}

void Engine::CheckGraphOutputs(const ir::Graph& graph) {
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ir::Value* v = graph.outputs()[i];
    pb::ValueInfoProto entry = graph.OutputEntry(static_cast<int>(i));
    if (!entry.type || reported_.count(v) > 0) continue;
    Type declared = TypeFromProto(*entry.type);
    if (std::optional<Conflict> c = FindConflict(StateOf(v)->type, declared)) {
      Report(c->element_type ? IssueKind::kTypeConflict : IssueKind::kShapeConflict,
             absl::StrCat(GraphLocation(graph), kSep, "output '", Sv(v->name()), "'"),
             absl::StrCat("'", Sv(v->name()), "': ", c->message));
      reported_.insert(v);
    }
  }
}

namespace {

// A value whose type the file states (graph input, value_info, initializer):
// the node rules check those before inference runs.
bool Declared(const ir::Value& v) {
  return v.type() != nullptr || v.initializer() != nullptr || v.sparse_initializer() != nullptr;
}

std::string TypeListing(const ops::OpSchema& schema, const ops::FormalParameter& f) {
  std::vector<absl::string_view> listed;
  for (std::string_view a : schema.AllowedTypes(f)) listed.push_back(Sv(a));
  return absl::StrCat(f.is_type_parameter() ? absl::StrCat(Sv(f.type_str), " in {") : "{",
                      absl::StrJoin(listed, ", "), "}");
}

// Whether inference knows `type` well enough to hold it against a formal.
bool Checkable(const Type& type) {
  return Complete(type) && type.kind != Type::Kind::kOpaque &&
         !(type.kind == Type::Kind::kMap && type.elem_type == 0);
}

}  // namespace

// Outputs without a declared type (declared ones are the node rules'
// business) whose inferred type the schema's formal does not allow.
void Engine::CheckOutputConstraints(const ops::OpSchema& schema, const ir::Node& node, NodeContext& ctx) {
  if (ctx.failed()) return;
  for (int i = 0; i < node.num_outputs(); ++i) {
    const ir::Value* value = node.output(i);
    if (value == nullptr || value->name().empty() || value->type() != nullptr) continue;
    const Type& type = ctx.outputs()[static_cast<size_t>(i)].type;
    // Sequences, optionals and maps too: a sequence passed through an op
    // that takes tensors only (Identity-13) shows here.
    if (!Checkable(type)) continue;
    const ops::FormalParameter* f = FormalAt(schema.outputs(), i);
    if (f == nullptr) continue;
    const std::span<const std::string_view> allowed = schema.AllowedTypes(*f);
    if (allowed.empty()) continue;
    const pb::TypeProto proto = TypeToProto(WithoutShapes(type));
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || ops::TypeStringMatches(a, proto);
    if (ok) continue;
    Report(
        IssueKind::kTypeConstraint, NodeLocation(node),
        absl::StrCat("output '", Sv(value->name()), "' would be ", ops::TypeToString(proto), ", but ",
                     Sv(node.op_type()), "-", schema.since_version(), " allows ", TypeListing(schema, *f)));
  }
}

bool Engine::CheckInputConstraints(const ops::OpSchema& schema, const ir::Node& node, NodeContext& ctx) {
  struct Binding {
    std::string type;
    std::string what;
    bool declared;
  };
  std::map<std::string_view, Binding> bindings;
  for (int i = 0; i < ctx.num_inputs() && i < node.num_inputs(); ++i) {
    const ir::Value* value = node.input(i);
    const Type* t = ctx.input_type(i);
    if (value == nullptr || value->name().empty() || t == nullptr || !Checkable(*t)) continue;
    const ops::FormalParameter* f = FormalAt(schema.inputs(), i);
    if (f == nullptr || schema.AllowedTypes(*f).empty()) continue;
    const pb::TypeProto proto = TypeToProto(WithoutShapes(*t));
    const std::string text = ops::TypeToString(proto);
    const std::string label = absl::StrCat("input '", Sv(value->name()), "' (#", i, ")");
    const bool declared = Declared(*value);
    if (!declared) {
      bool ok = false;
      for (std::string_view a : schema.AllowedTypes(*f)) ok = ok || ops::TypeStringMatches(a, proto);
      if (!ok) {
        Report(IssueKind::kTypeConstraint, NodeLocation(node),
               absl::StrCat(label, " is ", text, ", but ", Sv(node.op_type()), "-", schema.since_version(),
                            " allows ", TypeListing(schema, *f)));
        return true;
      }
    }
    if (!f->is_type_parameter() || (f->option == ops::ParamOption::kVariadic && !f->homogeneous)) continue;
    auto [it, inserted] = bindings.try_emplace(f->type_str, Binding{text, label, declared});
    if (!inserted && it->second.type != text && !(it->second.declared && declared)) {
      Report(IssueKind::kTypeConstraint, NodeLocation(node),
             absl::StrCat("type variable ", Sv(f->type_str), " of ", Sv(node.op_type()), "-",
                          schema.since_version(), " is ", it->second.type, " for ", it->second.what, " but ",
                          text, " for ", label, ": all values bound to ", Sv(f->type_str),
                          " must have the same type"));
      return true;
    }
  }
  return false;
}

void Engine::InferNode(const ir::Node& node) {
  std::vector<const ValueState*> inputs;
  inputs.reserve(node.inputs().size());
  for (const ir::Value* v : node.inputs()) inputs.push_back(v == nullptr ? nullptr : StateOf(v));
  std::optional<int64_t> opset = model_.OpsetVersion(node.domain());
  std::vector<const ValueState*> opaque_inputs;
  if (opaque_typer_) opaque_inputs = inputs;
  NodeContext ctx(node, opset.value_or(0), std::move(inputs), this);
  const bool function_call =
      !functions_.empty() &&
      functions_.count({std::string(ops::CanonicalDomain(node.domain())), node.op_type()}) > 0;
  const ops::OpSchema* schema =
      opset && !function_call ? ops::FindSchema(node.domain(), node.op_type(), *opset) : nullptr;
  if (schema != nullptr) {
    const bool reported = CheckInputConstraints(*schema, node, ctx);
    InferSchemaTypes(*schema, ctx);
    if (ShapeFn fn = FindShapeFn(node.domain(), node.op_type())) fn(ctx);
    if (!reported) CheckOutputConstraints(*schema, node, ctx);
  } else if (opaque_typer_ && !function_call) {
    std::vector<std::optional<Type>> types = opaque_typer_(node, opaque_inputs);
    for (size_t i = 0; i < types.size() && i < ctx.outputs().size(); ++i) {
      if (types[i]) ctx.outputs()[i].type = *std::move(types[i]);
    }
  }
  std::string location;
  auto where = [&]() -> const std::string& {
    if (location.empty()) location = NodeLocation(node);
    return location;
  };
  for (const std::string& f : ctx.failures()) Report(IssueKind::kImpossibleShape, where(), f);
  for (int i = 0; i < node.num_outputs(); ++i) {
    ValueState& out = ctx.outputs()[static_cast<size_t>(i)];
    if (!ctx.failed()) {
      if (std::optional<std::string> overflow = SizeOverflow(out.type)) {
        Report(IssueKind::kImpossibleShape, where(),
               absl::StrCat(Sv(node.op_type()), ": output '", Sv(node.output(i)->name()), "': ", *overflow));
        out.type.shape.reset();
      }
    }
    Settle(node.output(i), std::move(out), where);
  }
}

std::vector<Type> Engine::InferBody(const ir::Graph& body, const std::vector<Type>& inputs) {
  InferGraph(body, &inputs);
  std::vector<Type> out;
  out.reserve(body.outputs().size());
  for (const ir::Value* v : body.outputs()) out.push_back(StateOf(v)->type);
  return out;
}

std::map<std::string, pb::TypeProto> InferredTypes(const pb::ModelProto& model) {
  std::map<std::string, pb::TypeProto> out;
  absl::StatusOr<std::unique_ptr<ir::Model>> ir_model = ir::FromProto(model);
  if (!ir_model.ok()) return out;
  Engine engine(**ir_model);
  engine.Run();
  for (auto& [name, state] : engine.States()) out.emplace(name, TypeToProto(state.type));
  return out;
}

std::vector<InferenceIssue> InferModel(const pb::ModelProto& model) {
  absl::StatusOr<std::unique_ptr<ir::Model>> ir_model = ir::FromProto(model);
  if (!ir_model.ok()) return {};
  Engine engine(**ir_model);
  engine.Run();
  return engine.issues();
}

}  // namespace onnxkit::infer
