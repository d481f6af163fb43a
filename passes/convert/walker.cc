// The node walker of `onnxkit convert` (see walker.h): per node, the chain
// of version steps between the source and the target opset, each through
// its adapters.def row or the generic step; nodes an adapter creates are
// converted onward from the step's target side.
#include "passes/convert/walker.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/context.h"
#include "lib/infer/types.h"
#include "lib/ops/registry.h"
#include "lib/ops/type_string.h"
#include "passes/convert/adapter.h"
#include "passes/util.h"
#include "runner/reference/dispatch.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

// "" and "ai.onnx" are one domain.
std::string_view Canonical(std::string_view domain) { return domain == "ai.onnx" ? std::string_view() : domain; }
bool InDomain(const ir::Node& n, std::string_view domain) { return Canonical(n.domain()) == domain; }

// The next step of `op` at opset `cur` towards `to`; false when done.
bool NextStep(std::string_view domain, const std::string& op, int64_t cur, int64_t to, const ops::OpSchema* schema,
              Step* step) {
  if (to > cur) {
    for (const ops::OpSchema* s : ops::SchemaVersions(domain, op)) {
      if (s->since_version() > schema->since_version() && s->since_version() <= to) {
        step->direction = Direction::kUp;
        step->boundary = s->since_version();
        step->from = schema;
        step->to = s;
        return true;
      }
    }
    return false;
  }
  if (schema->since_version() <= to) return false;
  step->direction = Direction::kDown;
  step->boundary = schema->since_version();
  step->from = schema;
  step->to = ops::FindSchema(domain, op, schema->since_version() - 1);
  return true;
}

// --- Type widening ---
// An op whose older version lacks an element type of the node (Max on int8
// below 12, Celu on float16 below 28, ReduceMax on bool below 20...) runs
// on a wider type between Casts when the result is the same: integers of 8
// and 16 bits in int32, uint32 in int64, bool in int32 (for the ops that
// only pick one of their inputs), float16/bfloat16 in float.

enum class Widen { kNone, kExact, kPick, kCompare, kFloat };

// How `op` may widen: kExact ops give the same result in any wider integer
// type (modular arithmetic), kPick ops return one of their inputs (bool
// too) and kCompare ops compare them, so both are exact in any type that
// holds every value (float for 8- and 16-bit integers, double for 32-bit
// ones); kFloat ops only widen reduced floats.
Widen WidenKind(std::string_view op) {
  // (Not ReduceMax/ReduceMin: an empty reduction yields the lowest value of
  // its type, which the Cast back does not map to the narrow lowest.)
  static constexpr std::string_view kPickOps[] = {"Max", "Min", "ArgMax", "ArgMin",
                                                  "TopK", "Clip", "Where", "Relu", "Abs", "Neg"};
  static constexpr std::string_view kCompareOps[] = {"Equal", "Less", "Greater"};
  static constexpr std::string_view kExactOps[] = {"Add", "Sub", "Mul", "Div", "Sum", "Sign", "ReduceSum",
                                                   "ReduceProd", "Mod"};
  static constexpr std::string_view kFloatOps[] = {
      "Celu", "Elu", "Selu", "LeakyRelu", "ThresholdedRelu", "HardSigmoid", "Sigmoid", "Tanh", "Exp", "Log",
      "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Softplus", "Softsign", "Erf", "Sin", "Cos", "Pow",
      "Mean", "ReduceMean", "Softmax", "LogSoftmax", "IsNaN", "IsInf", "PRelu", "MatMul", "Gemm"};
  for (std::string_view o : kPickOps) {
    if (o == op) return Widen::kPick;
  }
  for (std::string_view o : kCompareOps) {
    if (o == op) return Widen::kCompare;
  }
  for (std::string_view o : kExactOps) {
    if (o == op) return Widen::kExact;
  }
  for (std::string_view o : kFloatOps) {
    if (o == op) return Widen::kFloat;
  }
  return Widen::kNone;
}

// The wider types `elem` may run in for `kind`, narrowest first.
std::vector<int32_t> WiderTypes(int32_t elem, Widen kind) {
  const bool holds = kind == Widen::kPick || kind == Widen::kCompare;
  switch (elem) {
    case pb::kFloat16:
    case pb::kBfloat16: return {pb::kFloat};
    case pb::kInt8:
    case pb::kInt16:
    case pb::kUint8:
    case pb::kUint16:
      if (kind == Widen::kFloat) return {};
      if (holds) return {pb::kInt32, pb::kFloat, pb::kDouble};
      return {pb::kInt32};
    case pb::kUint32:
      if (kind == Widen::kFloat) return {};
      if (holds) return {pb::kInt64, pb::kDouble};
      return {pb::kInt64};
    case pb::kInt32: return holds ? std::vector<int32_t>{pb::kDouble} : std::vector<int32_t>{};
    case pb::kBool: return kind == Widen::kPick ? std::vector<int32_t>{pb::kInt32, pb::kFloat} : std::vector<int32_t>{};
    default: return {};
  }
}

bool Allowed(const ops::OpSchema& schema, std::span<const ops::FormalParameter> formals, size_t i, int32_t elem) {
  if (formals.empty()) return false;
  const ops::FormalParameter& f = formals[std::min(i, formals.size() - 1)];
  pb::TypeProto type = infer::TypeToProto(infer::TensorOf(elem));
  for (std::string_view t : schema.AllowedTypes(f)) {
    if (ops::TypeStringMatches(t, type)) return true;
  }
  return false;
}


// `value` converted to the wider type `to` when it is a constant (of at most
// 2^20 elements); null otherwise. Exact: `to` holds every value.
absl::StatusOr<ir::Value*> WidenedConstant(Step& step, ir::Value* value, int32_t to) {
  if (!IsConstantValue(*value)) return nullptr;
  auto t = ConstantTensor(*value, *step.ctx);
  if (!t.ok() || t->is_string() || t->size() > (int64_t{1} << 20)) return nullptr;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor w, runner::Tensor::Allocate(to, t->shape()));
  for (int64_t i = 0; i < t->size(); ++i) {
    std::optional<double> d = runner::reference::ElementAsDouble(*t, i);
    if (!d) return nullptr;
    switch (to) {
      case pb::kInt32: w.mutable_data<int32_t>()[i] = static_cast<int32_t>(*d); break;
      case pb::kInt64: w.mutable_data<int64_t>()[i] = static_cast<int64_t>(*d); break;
      case pb::kFloat: w.mutable_data<float>()[i] = static_cast<float>(*d); break;
      case pb::kDouble: w.mutable_data<double>()[i] = *d; break;
      default: return nullptr;
    }
  }
  return AddConstant(*step.graph, absl::StrCat(value->name(), "_wide"), w);
}

// Rewrites `node` (at the step `step`) to run on wider types when that makes
// its types allowed at the step's target; returns the new node (enqueued by
// the caller at the step's source opset), or null when widening does not
// apply.
absl::StatusOr<ir::Node*> TryWiden(Step& step) {
  ir::Node& node = *step.node;
  if (step.direction != Direction::kDown || step.to == nullptr || step.to->deprecated()) return nullptr;
  const Widen kind = WidenKind(node.op_type());
  if (kind == Widen::kNone) return nullptr;
  std::vector<int32_t> in_to(node.num_inputs(), 0), out_to(node.num_outputs(), 0);
  bool any = false;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const ir::Value* v = node.input(i);
    if (v == nullptr || v->name().empty()) continue;
    int32_t elem = ElemType(*v, *step.ctx).value_or(0);
    if (elem == 0 || Allowed(*step.to, step.to->inputs(), static_cast<size_t>(i), elem)) continue;
    if (node.op_type() == "Where" && i == 0) return nullptr;  // the condition stays bool
    int32_t wide = 0;
    for (int32_t w : WiderTypes(elem, kind)) {
      if (Allowed(*step.to, step.to->inputs(), static_cast<size_t>(i), w)) {
        wide = w;
        break;
      }
    }
    if (wide == 0) return nullptr;
    in_to[static_cast<size_t>(i)] = wide;
    any = true;
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const ir::Value* v = node.output(i);
    if (v == nullptr || v->name().empty()) continue;
    int32_t elem = ElemType(*v, *step.ctx).value_or(0);
    if (elem == 0 || Allowed(*step.to, step.to->outputs(), static_cast<size_t>(i), elem)) continue;
    // An output of the inputs' type constraint widens with them.
    int32_t wide = 0;
    for (int32_t w : in_to) {
      if (w != 0 && Allowed(*step.to, step.to->outputs(), static_cast<size_t>(i), w)) wide = w;
    }
    if (wide == 0) return nullptr;
    out_to[static_cast<size_t>(i)] = wide;
    any = true;
  }
  if (!any) return nullptr;
  // Inputs sharing a type constraint must widen alike: all to one type.
  int32_t common = 0;
  for (int32_t w : in_to) {
    if (w == 0) continue;
    if (common != 0 && w != common) return nullptr;
    common = w;
  }
  ir::NodeSpec spec;
  spec.op_type = node.op_type();
  spec.domain = node.domain();
  spec.name = node.name();
  for (const ir::Attribute& a : node.attributes()) {
    if (a.g || !a.graphs.empty()) return nullptr;
    spec.attributes.push_back(a.proto);
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    ir::Value* v = node.input(i);
    if (in_to[static_cast<size_t>(i)] == 0) {
      spec.inputs.push_back(v);
      continue;
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * folded, WidenedConstant(step, v, in_to[static_cast<size_t>(i)]));
    if (folded != nullptr) {
      spec.inputs.push_back(folded);
      continue;
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * c, AddBefore(step, "Cast", {v}, 1, {IntAttr("to", in_to[static_cast<size_t>(i)])}));
    TypeLike(step, c->output(0), in_to[static_cast<size_t>(i)], v);
    spec.inputs.push_back(c->output(0));
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const ir::Value* v = node.output(i);
    spec.outputs.push_back(v == nullptr || v->name().empty() ? std::string()
                                                             : step.graph->FreshName(absl::StrCat(v->name(), "_wide")));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * wide, step.graph->AddNode(std::move(spec), ir::Position::Before(&node)));
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (int i = 0; i < node.num_outputs(); ++i) {
    ir::Value* o = node.output(i);
    if (o == nullptr || o->name().empty()) continue;
    ir::Value* r = wide->output(i);
    const int32_t elem = ElemType(*o, *step.ctx).value_or(0);
    if (out_to[static_cast<size_t>(i)] != 0) {
      TypeLike(step, r, out_to[static_cast<size_t>(i)], o);
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * back, AddBefore(step, "Cast", {r}, 1, {IntAttr("to", elem)}));
      r = back->output(0);
    }
    if (elem != 0 && !o->IsGraphOutput()) TypeLike(step, r, elem, o);
    if (o->IsGraphOutput()) renames.emplace_back(r, o->name());
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(o, r));
  }
  ONNXKIT_RETURN_IF_ERROR(step.graph->RemoveNode(&node));
  for (auto& [v, name] : renames) ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(v, name));
  return wide;
}

std::vector<ir::Node*> ProducersOf(const ir::Node& node);
absl::Status RemoveOrphanedProducers(ir::Graph& graph, std::vector<ir::Node*> producers);

// A node that blocks but whose every output inference knows (integers
// computed from static shapes: Range over a Size, Shape -> Gather ->
// Concat, ...) becomes constants, and producers left without readers go.
// Random ops and nodes with bodies are never folded.
absl::StatusOr<bool> FoldKnownOutputs(ir::Graph& graph, ir::Node* node, ConvertContext& ctx) {
  static constexpr std::string_view kRandom[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                 "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (std::string_view r : kRandom) {
    if (node->op_type() == r) return false;
  }
  for (const ir::Attribute& a : node->attributes()) {
    if (a.g || !a.graphs.empty()) return false;
  }
  if (node->num_outputs() == 0) return false;
  std::vector<runner::Tensor> values;
  for (const ir::Value* o : node->outputs()) {
    if (o == nullptr || o->name().empty() || o->IsGraphOutput()) return false;
    const infer::ValueState* state = ctx.State(*o);
    if (state == nullptr || !state->data || !state->type.is_tensor() || !state->type.shape) return false;
    const int32_t elem = state->type.elem_type;
    if (elem != pb::kInt64 && elem != pb::kInt32) return false;
    std::optional<std::vector<int64_t>> data = infer::KnownValues(*state->data);
    if (!data) return false;
    std::vector<int64_t> dims;
    int64_t count = 1;
    for (const infer::Dim& d : *state->type.shape) {
      // Shape-sized data only: inference keeps small tensors' contents.
      if (!d.known() || *d.value > (1 << 16)) return false;
      dims.push_back(*d.value);
      count *= *d.value;
      if (count > (1 << 16)) return false;
    }
    if (count != static_cast<int64_t>(data->size())) return false;
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(elem, dims));
    for (int64_t i = 0; i < count; ++i) {
      if (elem == pb::kInt64) {
        t.mutable_data<int64_t>()[i] = (*data)[static_cast<size_t>(i)];
      } else {
        t.mutable_data<int32_t>()[i] = static_cast<int32_t>((*data)[static_cast<size_t>(i)]);
      }
    }
    values.push_back(std::move(t));
  }
  std::vector<ir::Node*> producers = ProducersOf(*node);
  for (int i = 0; i < node->num_outputs(); ++i) {
    ir::Value* o = node->output(i);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, AddConstant(graph, absl::StrCat(o->name(), "_folded"),
                                                        values[static_cast<size_t>(i)]));
    ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(o, c));
  }
  ONNXKIT_RETURN_IF_ERROR(graph.RemoveNode(node));
  ONNXKIT_RETURN_IF_ERROR(RemoveOrphanedProducers(graph, std::move(producers)));
  return true;
}

std::vector<ir::Node*> ProducersOf(const ir::Node& node) {
  std::vector<ir::Node*> producers;
  for (ir::Value* in : node.inputs()) {
    if (in != nullptr && in->producer() != nullptr) producers.push_back(in->producer());
  }
  return producers;
}

// Removes the nodes of `producers` that a step left without readers (an
// input that became an attribute, a node folded away), and theirs in turn.
absl::Status RemoveOrphanedProducers(ir::Graph& graph, std::vector<ir::Node*> producers) {
  while (!producers.empty()) {
    ir::Node* p = producers.back();
    producers.pop_back();
    if (!IsLive(graph, p)) continue;  // also: a producer of an enclosing graph
    std::vector<ir::Node*> above;
    for (ir::Value* in : p->inputs()) {
      if (in != nullptr && in->producer() != nullptr) above.push_back(in->producer());
    }
    ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(graph, p));
    if (removed) producers.insert(producers.end(), above.begin(), above.end());
  }
  return absl::OkStatus();
}

// The first of `formals` that is required (single) and absent from
// `values`, as a reason naming it `what`.
std::optional<std::string> MissingRequired(std::span<const ops::FormalParameter> formals,
                                           const std::vector<ir::Value*>& values, std::string_view what) {
  for (size_t i = 0; i < formals.size(); ++i) {
    if (formals[i].option != ops::ParamOption::kSingle) continue;
    if (i >= values.size() || values[i] == nullptr || values[i]->name().empty()) {
      return absl::StrCat("required ", Sv(what), " ", i, " ('", Sv(formals[i].name), "') is missing");
    }
  }
  return std::nullopt;
}

// Why `node` does not have the operands its schema requires, if it does
// not: adapters read required inputs and outputs without checking (a
// hostile model may leave them out).
std::optional<std::string> MissingOperand(const ir::Node& node, const ops::OpSchema& schema) {
  if (std::optional<std::string> in = MissingRequired(schema.inputs(), node.inputs(), "input")) return in;
  if (node.num_inputs() > schema.max_input()) {
    return absl::StrCat(node.num_inputs(), " inputs are more than ", Sv(schema.name()), " takes");
  }
  return MissingRequired(schema.outputs(), node.outputs(), "output");
}

std::string StepKey(const Step& s, const std::string& op, std::string_view adapter) {
  int64_t a = s.from->since_version();
  int64_t b = s.to != nullptr ? s.to->since_version() : s.boundary - 1;
  return absl::StrCat(op, " ", a, "->", b, " ", Sv(adapter));
}

// Converts one node (and what its adapters create) from `from` to `to`.
// `first_label` names `first` as it was in the graph given (an unnamed
// node's index there, before adapters inserted nodes); nodes adapters create
// are named after it.
void ConvertNode(ir::Graph& graph, const std::string& path, std::string_view domain, ir::Node* first,
                 const std::string& first_label, int64_t from, int64_t to, ConvertContext& ctx,
                 WalkStats& stats) {
  std::deque<std::pair<ir::Node*, int64_t>> work{{first, from}};
  while (!work.empty()) {
    auto [node, cur] = work.front();
    work.pop_front();
    if (!IsLive(graph, node) || !InDomain(*node, domain)) continue;
    stats.nodes += 1;
    while (true) {
      std::string op = node->op_type();
      const std::string label = node == first          ? first_label
                                : node->name().empty() ? absl::StrCat("a ", Sv(op), " made for ", first_label)
                                                       : ir::NodeLabel(*node);
      const ops::OpSchema* schema = ops::FindSchema(domain, op, cur);
      if (schema == nullptr) {
        std::string why =
            absl::StrCat("op ", op, " is unknown at ", domain.empty() ? "" : "ai.onnx.ml ", "opset ", cur);
        if (domain.empty() && (op == "SimplifiedLayerNormalization" || op == "LayerNormalization")) {
          absl::StrAppend(&why,
                          " (ONNX Runtime's: `onnxkit optimize --passes lower-contrib` writes it as "
                          "standard ops first)");
        }
        stats.blockers->push_back({path, label, std::move(why)});
        break;
      }
      std::vector<ir::Node*> created;
      Step step;
      step.graph = &graph;
      step.node = node;
      step.ctx = &ctx;
      step.target = to;
      step.created = &created;
      if (!NextStep(domain, op, cur, to, schema, &step)) break;
      const AdapterRow* row = FindAdapter(op, step.boundary, step.direction);
      if (row == nullptr) {
        // Types the target lacks: run on a wider type between Casts.
        absl::StatusOr<ir::Node*> wide = TryWiden(step);
        if (!wide.ok()) {
          absl::StatusOr<bool> folded = FoldKnownOutputs(graph, node, ctx);
          if (folded.ok() && *folded) {
            (*stats.steps)[absl::StrCat(op, " ", step.from->since_version(), "->", step.boundary - 1,
                                        " fold-known-value")] += 1;
            break;
          }
          stats.blockers->push_back({path, label, absl::StrCat(op, ": ", wide.status().message())});
          break;
        }
        if (*wide != nullptr) {
          (*stats.steps)[absl::StrCat(op, " ", step.from->since_version(), "->", step.boundary - 1, " widen-types")] += 1;
          for (ir::Node* c : created) work.emplace_back(c, cur);
          work.emplace_front(*wide, cur);
          break;
        }
      }
      // In a function body an attribute may take the caller's value
      // (ref_attr_name): unknown here, so an adapter, which may read it,
      // cannot run.
      if (row != nullptr) {
        const ir::Attribute* ref = nullptr;
        for (const ir::Attribute& a : node->attributes()) {
          if (!a.proto.ref_attr_name.empty() && ref == nullptr) ref = &a;
        }
        if (ref != nullptr) {
          stats.blockers->push_back(
              {path, label,
               absl::StrCat(op, " ", step.from->since_version(), "->",
                            step.direction == Direction::kUp ? step.boundary : step.boundary - 1,
                            ": attribute '", ref->name(), "' takes the function's attribute '",
                            ref->proto.ref_attr_name, "', whose value differs per call; the ", Sv(row->name),
                            " step needs it")});
          break;
        }
      }
      if (row != nullptr) {
        if (std::optional<std::string> missing = MissingOperand(*node, *step.from)) {
          stats.blockers->push_back({path, label, absl::StrCat(op, ": ", *missing)});
          break;
        }
      }
      std::vector<ir::Node*> producers = ProducersOf(*node);
      absl::Status st = row != nullptr ? row->fn(step) : GenericStep(step);
      if (st.ok()) {
        // Best effort: a producer that stays is only untidy.
        RemoveOrphanedProducers(graph, std::move(producers)).IgnoreError();
      }
      if (row != nullptr && !st.ok() && IsBlock(st) && !step.replaced) {
        // An adapter that leaves a type it does not handle to the generic
        // step: widening may still apply.
        absl::StatusOr<ir::Node*> wide = TryWiden(step);
        if (wide.ok() && *wide != nullptr) {
          (*stats.steps)[absl::StrCat(op, " ", step.from->since_version(), "->", step.boundary - 1, " widen-types")] += 1;
          for (ir::Node* c : created) work.emplace_back(c, cur);
          work.emplace_front(*wide, cur);
          break;
        }
      }
      if (!st.ok() && IsBlock(st) && !step.replaced) {
        absl::StatusOr<bool> folded = FoldKnownOutputs(graph, node, ctx);
        if (folded.ok() && *folded) {
          (*stats.steps)[StepKey(step, op, "fold-known-value")] += 1;
          break;
        }
      }
      if (!st.ok()) {
        std::string reason(StdSv(st.message()));
        if (IsBlock(st)) reason = reason.substr(reason.find(": ") + 2);
        stats.blockers->push_back({path, label, absl::StrCat(op, " ", step.from->since_version(), "->",
                                                             step.direction == Direction::kUp ? step.boundary
                                                                                              : step.boundary - 1,
                                                             ": ", reason)});
        break;
      }
      (*stats.steps)[StepKey(step, op, row != nullptr ? row->name : "generic")] += 1;
      cur = step.direction == Direction::kUp ? step.boundary : step.boundary - 1;
      for (ir::Node* c : created) work.emplace_back(c, cur);
      if (step.replaced) break;
    }
  }
}

}  // namespace

absl::Status ConvertGraph(ir::Graph& graph, const std::string& path, std::string_view domain, int64_t from,
                          int64_t to, ConvertContext& ctx, WalkStats& stats) {
  domain = Canonical(domain);
  const std::vector<ir::Node*> nodes = SnapshotNodes(graph);
  for (size_t index = 0; index < nodes.size(); ++index) {
    ir::Node* node = nodes[index];
    if (!IsLive(graph, node)) continue;
    // Labels index the graph as given: adapters of earlier nodes may have
    // inserted nodes before this one by now.
    const std::string label = node->name().empty() ? absl::StrCat("#", index, " (", Sv(node->op_type()), ")")
                                                   : ir::NodeLabel(*node);
    for (ir::Attribute& a : node->mutable_attributes()) {
      std::string base = absl::StrCat(path, "/", label, "/", a.name());
      if (a.g) ONNXKIT_RETURN_IF_ERROR(ConvertGraph(*a.g, base, domain, from, to, ctx, stats));
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        ONNXKIT_RETURN_IF_ERROR(
            ConvertGraph(*a.graphs[i], absl::StrCat(base, "[", i, "]"), domain, from, to, ctx, stats));
      }
    }
    if (!InDomain(*node, domain)) {
      std::string key = absl::StrCat(node->domain(), "::", node->op_type());
      bool elsewhere = stats.converted_domains.count(std::string(Canonical(node->domain()))) > 0;
      if (!elsewhere && !stats.local_functions.count(key)) stats.foreign_ops->insert(key);
      continue;
    }
    ConvertNode(graph, path, domain, node, label, from, to, ctx, stats);
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
