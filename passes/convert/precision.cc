// Precision conversion (see precision.h) in four steps over the whole graph
// tree: decide each node (kept or converted), decide each Cast(to=FLOAT),
// decide which float32 values take the target type, then rewrite: tensors,
// types, retargeted Casts, and a Cast wherever a value's type and what its
// reader wants differ.
//
// Before (float16, keep-io-types):
//   %y = Conv(%x, %w)          %w float32 initializer
//   %z = Range(%a, %b, %d)     kept list
// After:
//   %x_float16 = Cast<to=FLOAT16>(%x)
//   %y_float16 = Conv(%x_float16, %w)      %w float16
//   %y = Cast<to=FLOAT>(%y_float16)        graph output keeps its name
#include "passes/convert/precision.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "passes/convert/precision_policy.h"
#include "passes/convert/precision_tensor.h"

namespace onnxkit::passes::convert {
namespace {

// Float values computed from integers are kept float32 up to this many
// elements: shapes, sizes and indices, not activations.
constexpr int64_t kMaxIntegerDerivedElements = 64;

struct ValueFacts {
  bool tensor = false;  // a tensor of known element type
  int32_t elem = 0;
  std::optional<int64_t> elements;
};

struct Decision {
  bool touches = false;  // reads or writes a float32 tensor
  bool convert = false;
  bool pending_cast = false;  // Cast(to=FLOAT): decided by its readers
  bool constant = false;      // Constant: decided with its value
  SlotPlan plan;
};

bool IsIntegerElem(int32_t e) {
  return e == pb::kBool || e == pb::kInt8 || e == pb::kUint8 || e == pb::kInt16 || e == pb::kUint16 ||
         e == pb::kInt32 || e == pb::kUint32 || e == pb::kInt64 || e == pb::kUint64;
}

bool IsOnnxDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

pb::AttributeProto IntAttrOf(std::string name, int64_t v) {
  pb::AttributeProto a;
  a.name = std::move(name);
  a.type = pb::kAttrInt;
  a.i = v;
  return a;
}

pb::TypeProto Retyped(const ir::Value& v, int32_t elem) {
  pb::TypeProto t;
  if (v.type() != nullptr && v.type()->tensor_type) t = *v.type();
  if (!t.tensor_type) t.tensor_type.mutable_value();
  t.tensor_type->elem_type = elem;
  return t;
}

class Converter {
 public:
  Converter(ir::Model& model, int64_t opset, const PrecisionOptions& options,
            const std::map<std::string, infer::ValueState>& states, io::ExternalDataResolver* resolver,
            const ValueMagnitudes* observed, PrecisionReport* report)
      : model_(model),
        opset_(opset),
        o_(options),
        states_(states),
        resolver_(resolver),
        observed_(observed),
        report_(report) {}

  absl::Status Run();

 private:
  void CollectFacts(ir::Graph& g);
  void DecideNode(ir::Node* node);
  void PruneIslands();
  bool IsFloat32(const ir::Value* v) const {
    auto it = facts_.find(v);
    return it != facts_.end() && it->second.tensor && it->second.elem == pb::kFloat;
  }
  bool IsSmall(const ir::Value* v) const {
    auto it = facts_.find(v);
    return it != facts_.end() && it->second.elements && *it->second.elements <= kMaxIntegerDerivedElements;
  }
  bool IsConstantSource(const ir::Value* v) const {
    // Initializers listed as inputs (IR < 4) count: they are the weights.
    return v->initializer() != nullptr || (v->producer() != nullptr && v->producer()->op_type() == "Constant" &&
                               IsOnnxDomain(v->producer()->domain()));
  }
  void Keep(ir::Node* node, const std::string& reason) {
    decisions_[node].convert = false;
    ++report_->kept[reason];
  }
  // What the reader `use` wants of a float32 value: target, float32, or
  // nothing (0).
  int32_t Want(const ir::Use& use) const;
  void Wants(const ir::Value* v, bool* target, bool* f32) const;
  int32_t OutputWant(const ir::Graph& g) const {
    return (&g == &model_.graph() && !o_.keep_io_types) ? o_.target : pb::kFloat;
  }
  absl::Status ConvertConstant(ir::Value* v);
  absl::StatusOr<ir::Value*> CastOf(ir::Value* v, int32_t to);
  absl::Status FixOutput(ir::Graph& g, int index, int32_t to);
  absl::Status Rewrite();

  ir::Model& model_;
  int64_t opset_;
  const PrecisionOptions& o_;
  const std::map<std::string, infer::ValueState>& states_;
  io::ExternalDataResolver* resolver_;
  const ValueMagnitudes* observed_;
  PrecisionReport* report_;
  absl::flat_hash_set<const ir::Node*> beyond_range_;  // the range guard's nodes
  std::vector<ir::Graph*> graphs_;  // pre-order
  std::vector<ir::Node*> nodes_;    // every node, graph by graph
  absl::flat_hash_map<const ir::Value*, ValueFacts> facts_;
  absl::flat_hash_map<const ir::Node*, Decision> decisions_;
  absl::flat_hash_set<const ir::Value*> integer_derived_;
  absl::flat_hash_set<const ir::Value*> converted_;
  absl::flat_hash_set<const ir::Value*> copy_for_target_;  // constants read both ways
  absl::flat_hash_map<const ir::Value*, std::vector<const ir::Graph*>> output_of_;
  std::map<std::pair<const ir::Value*, int32_t>, ir::Value*> casts_;
  std::set<std::string> keep_names_used_;
};

void Converter::CollectFacts(ir::Graph& g) {
  for (ir::Value* v : g.values()) {
    ValueFacts f;
    auto it = states_.find(v->name());
    infer::Type t = it != states_.end() ? it->second.type : infer::Type{};
    if (t.unknown() && v->type() != nullptr) t = infer::TypeFromProto(*v->type());
    if (v->initializer() != nullptr && t.unknown()) {
      std::vector<infer::Dim> dims;
      for (int64_t d : v->initializer()->dims) dims.push_back(infer::Dim::Of(d));
      t = infer::TensorOf(v->initializer()->data_type, dims);
    }
    if (t.is_tensor() && t.elem_type != 0) {
      f.tensor = true;
      f.elem = t.elem_type;
      if (t.shape) {
        int64_t n = 1;
        bool known = true;
        for (const infer::Dim& d : *t.shape) {
          if (!d.known() || *d.value < 0 || *d.value > kMaxIntegerDerivedElements) {
            known = false;
            break;
          }
          n *= *d.value;
          if (n > kMaxIntegerDerivedElements) n = kMaxIntegerDerivedElements + 1;
        }
        if (known) f.elements = n;
      }
    }
    facts_[v] = f;
  }
  for (int i = 0; i < static_cast<int>(g.outputs().size()); ++i) output_of_[g.outputs()[i]].push_back(&g);
}

void Converter::DecideNode(ir::Node* node) {
  Decision& d = decisions_[node];
  for (const ir::Value* v : node->inputs()) d.touches |= v != nullptr && IsFloat32(v);
  for (const ir::Value* v : node->outputs()) d.touches |= !v->name().empty() && IsFloat32(v);
  if (!d.touches) return;
  auto keep_named = std::find_if(o_.keep_float32.begin(), o_.keep_float32.end(), [&](const std::string& k) {
    return k == node->op_type() || (!node->name().empty() && k == node->name());
  });
  if (!IsOnnxDomain(node->domain())) return Keep(node, absl::StrCat("domain ", node->domain(), ": called as it is"));
  if (keep_named != o_.keep_float32.end()) {
    keep_names_used_.insert(*keep_named);
    return Keep(node, "--keep-float32");
  }
  for (const ir::Value* v : node->outputs()) {
    if (!v->name().empty() && !facts_[v].tensor && v->type() == nullptr) return Keep(node, "output type unknown");
  }
  // An input of unknown type (made by a custom-domain node) would get no
  // Cast to the type a converted node reads.
  for (const ir::Value* v : node->inputs()) {
    if (v != nullptr && !v->name().empty() && !facts_[v].tensor && v->type() == nullptr) {
      return Keep(node, "input type unknown");
    }
  }
  bool int_input = false, derived_input = false, other_input = false;
  for (const ir::Value* v : node->inputs()) {
    if (v == nullptr) continue;
    const ValueFacts& f = facts_[v];
    if (f.tensor && IsIntegerElem(f.elem)) int_input = true;
    if (!IsFloat32(v)) continue;
    if (integer_derived_.contains(v)) {
      derived_input = true;
    } else if (!IsConstantSource(v)) {
      other_input = true;
    }
  }
  bool small_outputs = true;
  for (const ir::Value* v : node->outputs()) {
    if (!v->name().empty() && IsFloat32(v) && !IsSmall(v)) small_outputs = false;
  }
  bool is_cast = node->op_type() == "Cast";
  bool derived = small_outputs && ((is_cast && int_input) || (derived_input && !other_input));
  if (derived) {
    for (const ir::Value* v : node->outputs()) {
      if (IsFloat32(v)) integer_derived_.insert(v);
    }
    return Keep(node, "integer-derived float arithmetic (shapes, indices)");
  }
  NodeVerdict verdict = PlanNode(*node, opset_, o_.target, [this](const ir::Value* v) { return IsFloat32(v); });
  if (!verdict.convert) return Keep(node, verdict.reason);
  if (beyond_range_.contains(node)) {
    report_->range_guard.nodes.push_back(ir::NodeLabel(*node));
    const RangeLimits& l = report_->range_guard.limits;
    return Keep(node, absl::StrCat("range guard: float32 values beyond +-", l.high, " or all below ", l.low));
  }
  d.convert = true;
  d.plan = std::move(verdict.plan);
  d.pending_cast = is_cast && node->num_outputs() == 1 && IsFloat32(node->output(0));
  d.constant = node->op_type() == "Constant";
}

int32_t Converter::Want(const ir::Use& use) const {
  auto it = decisions_.find(use.node);
  if (it == decisions_.end() || !it->second.touches) return 0;
  const Decision& d = it->second;
  // A Cast takes any input type: its input never needs a Cast of its own.
  if (use.node->op_type() == "Cast" && IsOnnxDomain(use.node->domain())) return 0;
  if (!d.convert) return pb::kFloat;
  if (d.pending_cast) return 0;
  switch (d.plan.inputs[static_cast<size_t>(use.input_index)]) {
    case SlotRole::kTarget: return o_.target;
    case SlotRole::kFloat32: return pb::kFloat;
    case SlotRole::kEither:
      return d.plan.either_allows_target[static_cast<size_t>(use.input_index)] ? 0 : pb::kFloat;
    case SlotRole::kNone: return 0;
  }
  return 0;
}

void Converter::Wants(const ir::Value* v, bool* target, bool* f32) const {
  *target = *f32 = false;
  for (const ir::Use& u : v->uses()) {
    int32_t w = Want(u);
    *target |= w == o_.target;
    *f32 |= w == pb::kFloat;
  }
  auto it = output_of_.find(v);
  if (it == output_of_.end()) return;
  for (const ir::Graph* g : it->second) {
    int32_t w = OutputWant(*g);
    *target |= w == o_.target;
    *f32 |= w == pb::kFloat;
  }
}

// Ops that only move or select data: reading a constant, they compute nothing
// that a float32 reader would not have to cast back.
bool MovesData(const std::string& op) {
  static constexpr std::string_view kOps[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                              "Transpose", "Expand", "Tile", "Concat", "Split", "Slice"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Groups of converted nodes joined by target-typed values; a group that
// computes on no weight (a constant of more than 64 elements, MovesData
// aside: Clip bounds and scalars do not count) and touches no graph input or
// output of the main graph (nor a retargeted Cast) sits between float32
// nodes: converting it would only add Casts and round its values, so it
// stays float32.
void Converter::PruneIslands() {
  std::vector<ir::Node*> members;
  absl::flat_hash_map<const ir::Node*, size_t> index;
  for (ir::Node* n : nodes_) {
    const Decision& d = decisions_[n];
    if (d.convert && !d.constant) {
      index[n] = members.size();
      members.push_back(n);
    }
  }
  std::vector<size_t> parent(members.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::vector<bool> anchored(members.size(), false);
  const ir::Graph& main = model_.graph();
  auto main_io = [&](const ir::Value* v) {
    if (v->graph() == &main && v->kind() == ir::ValueKind::kGraphInput) return true;
    auto it = output_of_.find(v);
    return it != output_of_.end() && std::find(it->second.begin(), it->second.end(), &main) != it->second.end();
  };
  for (size_t i = 0; i < members.size(); ++i) {
    ir::Node* n = members[i];
    const Decision& d = decisions_[n];
    if (d.pending_cast) anchored[i] = true;
    for (const ir::Value* out : n->outputs()) anchored[i] = anchored[i] || (converted_.contains(out) && main_io(out));
    for (int k = 0; k < n->num_inputs(); ++k) {
      const ir::Value* v = n->input(k);
      if (v == nullptr || !IsFloat32(v) || d.pending_cast) continue;
      SlotRole role = d.plan.inputs[static_cast<size_t>(k)];
      if (role != SlotRole::kTarget && role != SlotRole::kEither) continue;
      if (role == SlotRole::kTarget && (main_io(v) || (IsConstantSource(v) && !IsSmall(v) && !MovesData(n->op_type())))) {
        anchored[i] = true;
      }
      ir::Node* p = v->producer();
      if (p != nullptr && converted_.contains(v) && index.contains(p)) parent[find(index[p])] = find(i);
    }
  }
  std::vector<bool> keep_group(members.size(), false);
  for (size_t i = 0; i < members.size(); ++i) {
    if (anchored[i]) keep_group[find(i)] = true;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (keep_group[find(i)]) continue;
    ir::Node* n = members[i];
    for (const ir::Value* out : n->outputs()) converted_.erase(out);
    Keep(n, "no weights, between float32 nodes: converting would only add Casts");
  }
}

absl::Status Converter::Run() {
  if (o_.target != pb::kFloat16 && o_.target != pb::kBfloat16) {
    return absl::InvalidArgumentError("precision target must be float16 or bfloat16");
  }
  ir::ForEachGraph(model_.graph(), [&](ir::Graph& g) {
    graphs_.push_back(&g);
    CollectFacts(g);
  });
  for (ir::Graph* g : graphs_) {
    for (ir::Node* n : g->nodes()) nodes_.push_back(n);
  }
  if (observed_ != nullptr) {
    report_->range_guard.applied = true;
    report_->range_guard.limits = RangeGuardLimits(o_.target);
    for (ir::Node* n : NodesBeyondRange(model_.graph(), *observed_, report_->range_guard.limits)) {
      beyond_range_.insert(n);
    }
  }
  // Bodies come after their owners in pre-order, so outer producers are
  // decided before the body nodes that read them.
  for (ir::Node* n : nodes_) DecideNode(n);
  for (ir::Node* n : nodes_) {
    Decision& d = decisions_[n];
    if (!d.convert) continue;
    if (d.pending_cast) {
      bool target = false, f32 = false;
      if (n->num_outputs() >= 1) Wants(n->output(0), &target, &f32);
      if (!target || f32) {
        Keep(n, "Cast to float32 read as float32");
        continue;
      }
      ++report_->casts_retargeted;
      converted_.insert(n->output(0));
      continue;
    }
    if (d.constant) continue;
    for (int j = 0; j < n->num_outputs(); ++j) {
      if (d.plan.outputs[static_cast<size_t>(j)]) converted_.insert(n->output(j));
    }
  }
  PruneIslands();
  for (ir::Node* n : nodes_) {
    const Decision& d = decisions_[n];
    if (!d.convert || d.constant || d.pending_cast) continue;
    bool any = false;
    for (int j = 0; j < n->num_outputs(); ++j) any |= d.plan.outputs[static_cast<size_t>(j)];
    for (SlotRole r : d.plan.inputs) any |= r == SlotRole::kTarget;
    if (any) ++report_->nodes_converted;
  }
  // Constants (initializers and Constant values) follow their readers.
  for (ir::Graph* g : graphs_) {
    std::vector<ir::Value*> constants;
    for (ir::Value* v : g->values()) {
      if (!IsFloat32(v) || !IsConstantSource(v) || v->initializer() == nullptr) continue;
      constants.push_back(v);
    }
    for (ir::Node* n : g->nodes()) {
      if (decisions_[n].constant && decisions_[n].convert && n->num_outputs() == 1) constants.push_back(n->output(0));
    }
    for (ir::Value* v : constants) {
      bool target = false, f32 = false;
      Wants(v, &target, &f32);
      if (!target) continue;
      if (f32) {
        copy_for_target_.insert(v);
      } else {
        converted_.insert(v);
      }
    }
  }
  if (!o_.keep_io_types) {
    for (ir::Value* v : model_.graph().inputs()) {
      if (IsFloat32(v) && v->initializer() == nullptr && v->sparse_initializer() == nullptr) converted_.insert(v);
    }
  }
  ONNXKIT_RETURN_IF_ERROR(Rewrite());
  for (const std::string& k : o_.keep_float32) {
    if (!keep_names_used_.contains(k)) {
      report_->warnings.push_back(absl::StrCat("--keep-float32 ", k, " matches no node that reads or writes float32"));
    }
  }
  if (!model_.functions().empty()) {
    report_->warnings.push_back(absl::StrCat(model_.functions().size(),
                                             " model-local function(s) kept float32; their calls get Casts"));
  }
  return absl::OkStatus();
}

// The float32 data a Constant node holds (value, value_float, value_floats).
absl::StatusOr<pb::TensorProto> ConstantNodeTensor(const ir::Node& n) {
  for (const ir::Attribute& a : n.attributes()) {
    if (a.name() == "value" && a.proto.t) return *a.proto.t;
    if (a.name() == "value_float") {
      pb::TensorProto t;
      t.data_type = pb::kFloat;
      t.float_data = {a.proto.f};
      return t;
    }
    if (a.name() == "value_floats") {
      pb::TensorProto t;
      t.data_type = pb::kFloat;
      t.dims = {static_cast<int64_t>(a.proto.floats.size())};
      t.float_data = a.proto.floats;
      return t;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("Constant ", ir::NodeLabel(n), " holds no float32 value"));
}

pb::AttributeProto TensorAttr(std::string name, pb::TensorProto t) {
  pb::AttributeProto a;
  a.name = std::move(name);
  a.type = pb::kAttrTensor;
  a.t = std::move(t);
  return a;
}

absl::Status Converter::ConvertConstant(ir::Value* v) {
  int64_t clamped = 0;
  int64_t elements = 0;
  if (v->initializer() != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, ConvertFloatTensor(*v->initializer(), o_.target, resolver_, &clamped));
    elements = static_cast<int64_t>(t.raw_data.size() / 2);
    *v->mutable_initializer() = std::move(t);
  } else {
    ir::Node* n = v->producer();
    ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto src, ConstantNodeTensor(*n));
    ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, ConvertFloatTensor(src, o_.target, resolver_, &clamped));
    elements = static_cast<int64_t>(t.raw_data.size() / 2);
    n->RemoveAttribute("value_float");
    n->RemoveAttribute("value_floats");
    n->SetAttribute(TensorAttr("value", std::move(t)));
  }
  ++report_->tensors_converted;
  report_->tensor_bytes_before += elements * 4;
  report_->tensor_bytes_after += elements * 2;
  if (clamped > 0) report_->clamped.emplace_back(v->name(), clamped);
  return absl::OkStatus();
}

absl::StatusOr<ir::Value*> Converter::CastOf(ir::Value* v, int32_t to) {
  auto key = std::make_pair(static_cast<const ir::Value*>(v), to);
  if (auto it = casts_.find(key); it != casts_.end()) return it->second;
  ir::Graph& g = *v->graph();
  std::string hint = absl::StrCat(v->name(), "_", to == pb::kFloat ? "float32" : PrecisionName(to));
  ir::Value* out = nullptr;
  if (v->initializer() != nullptr && to == o_.target) {
    // A constant read both ways: a converted copy rather than a Cast.
    int64_t clamped = 0;
    ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, ConvertFloatTensor(*v->initializer(), to, resolver_, &clamped));
    t.name = g.FreshName(hint);
    if (clamped > 0) report_->clamped.emplace_back(v->name(), clamped);
    ++report_->tensors_converted;
    ONNXKIT_ASSIGN_OR_RETURN(out, g.AddInitializer(std::move(t)));
  } else {
    ir::Position where = ir::Position::End();
    if (v->producer() != nullptr) {
      where = ir::Position::After(v->producer());
    } else if (!g.nodes().empty()) {
      where = ir::Position::Before(*g.nodes().begin());
    }
    pb::AttributeProto to_attr;
    to_attr.name = "to";
    to_attr.type = pb::kAttrInt;
    to_attr.i = to;
    ir::NodeSpec spec{.op_type = "Cast", .name = g.FreshName(hint), .inputs = {v},
                      .outputs = {g.FreshName(hint)}, .attributes = {std::move(to_attr)}};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, g.AddNode(std::move(spec), where));
    out = n->output(0);
    ++report_->casts_inserted;
  }
  out->set_type(Retyped(*v, to));
  casts_[key] = out;
  return out;
}

// Graph output `index` of `g` gets the type `to` through a Cast; the Cast
// takes over the output's name when the value is a node output of `g`
// named by no other graph output.
absl::Status Converter::FixOutput(ir::Graph& g, int index, int32_t to) {
  ir::Value* v = g.outputs()[static_cast<size_t>(index)];
  ir::Value* c = nullptr;
  {
    ir::Position where = v->producer() != nullptr && v->graph() == &g ? ir::Position::After(v->producer())
                                                                         : ir::Position::End();
    pb::AttributeProto to_attr;
    to_attr.name = "to";
    to_attr.type = pb::kAttrInt;
    to_attr.i = to;
    std::string hint = absl::StrCat(v->name(), "_cast");
    ir::NodeSpec spec{.op_type = "Cast", .name = g.FreshName(hint), .inputs = {v}, .outputs = {g.FreshName(hint)},
                      .attributes = {std::move(to_attr)}};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, g.AddNode(std::move(spec), where));
    c = n->output(0);
    c->mutable_info() = v->info();
    c->set_type(Retyped(*v, to));
    ++report_->casts_inserted;
  }
  int uses_as_output = 0;
  for (ir::Graph* other : graphs_) {
    for (ir::Value* o : other->outputs()) uses_as_output += o == v;
  }
  if (v->graph() == &g && v->kind() == ir::ValueKind::kNodeOutput && uses_as_output == 1) {
    std::string name = v->name();
    std::string renamed = g.FreshName(absl::StrCat(name, "_", to == pb::kFloat ? PrecisionName(o_.target) : "float32"));
    ONNXKIT_RETURN_IF_ERROR(g.RenameValue(v, renamed));
    ONNXKIT_RETURN_IF_ERROR(g.RenameValue(c, name));
  }
  std::vector<ir::Value*> tail(g.outputs().begin() + index, g.outputs().end());
  for (int i = static_cast<int>(g.outputs().size()) - 1; i >= index; --i) ONNXKIT_RETURN_IF_ERROR(g.RemoveOutput(i));
  tail[0] = c;
  for (ir::Value* t : tail) ONNXKIT_RETURN_IF_ERROR(g.AddOutput(t));
  return absl::OkStatus();
}

absl::Status Converter::Rewrite() {
  // Snapshot the reads of every float32 value before Casts add new ones.
  std::vector<std::pair<ir::Value*, std::vector<ir::Use>>> reads;
  for (ir::Graph* g : graphs_) {
    for (ir::Value* v : g->values()) {
      if (IsFloat32(v)) reads.emplace_back(v, v->uses());
    }
  }
  for (ir::Graph* g : graphs_) {
    std::vector<ir::Value*> values(g->values().begin(), g->values().end());
    for (ir::Value* v : values) {
      if (!converted_.contains(v)) continue;
      if (IsConstantSource(v)) ONNXKIT_RETURN_IF_ERROR(ConvertConstant(v));
      v->set_type(Retyped(*v, o_.target));
    }
  }
  for (ir::Node* n : nodes_) {
    const Decision& d = decisions_[n];
    if (!d.convert || n->num_outputs() < 1 || !converted_.contains(n->output(0))) continue;
    if (d.pending_cast) {
      // A Cast whose input already has the target type (a float16 island
      // of the original, cast back to float32) becomes an Identity.
      const ir::Value* in = n->num_inputs() > 0 ? n->input(0) : nullptr;
      auto fact = in != nullptr ? facts_.find(in) : facts_.end();
      const bool same =
          in != nullptr && (converted_.contains(in) ||
                            (fact != facts_.end() && fact->second.tensor && fact->second.elem == o_.target));
      if (same) {
        while (!n->attributes().empty()) {
          const std::string attr = n->attributes().front().name();
          n->RemoveAttribute(attr);
        }
        n->set_op_type("Identity");
      } else {
        n->SetAttribute(IntAttrOf("to", o_.target));
      }
    } else if (n->op_type() == "ConstantOfShape") {
      const ir::Attribute* a = n->FindAttribute("value");
      pb::TensorProto src;
      if (a != nullptr && a->proto.t) {
        src = *a->proto.t;
      } else {
        src.data_type = pb::kFloat;
        src.dims = {1};
        src.float_data = {0.f};
      }
      int64_t clamped = 0;
      ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, ConvertFloatTensor(src, o_.target, resolver_, &clamped));
      if (clamped > 0) report_->clamped.emplace_back(n->output(0)->name(), clamped);
      n->SetAttribute(TensorAttr("value", std::move(t)));
    }
  }
  for (auto& [v, uses] : reads) {
    int32_t have = converted_.contains(v) ? o_.target : pb::kFloat;
    for (const ir::Use& u : uses) {
      int32_t want = Want(u);
      if (want == 0 || want == have) continue;
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, CastOf(v, want));
      ONNXKIT_RETURN_IF_ERROR(u.node->graph()->SetInput(u.node, u.input_index, c));
    }
  }
  for (ir::Graph* g : graphs_) {
    for (int i = 0; i < static_cast<int>(g->outputs().size()); ++i) {
      ir::Value* v = g->outputs()[static_cast<size_t>(i)];
      if (!IsFloat32(v)) continue;
      int32_t have = converted_.contains(v) ? o_.target : pb::kFloat;
      int32_t want = OutputWant(*g);
      if (have != want) ONNXKIT_RETURN_IF_ERROR(FixOutput(*g, i, want));
    }
  }
  for (const auto& [name, n] : report_->clamped) {
    report_->warnings.push_back(absl::StrCat("tensor '", name, "': ", n, " value(s) beyond the ",
                                             PrecisionName(o_.target), " range clamped to +-",
                                             TargetMax(o_.target)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertPrecision(ir::Model& model, int64_t opset, const PrecisionOptions& options,
                              const std::map<std::string, infer::ValueState>& states,
                              io::ExternalDataResolver* resolver, const ValueMagnitudes* observed,
                              PrecisionReport* report) {
  Converter c(model, opset, options, states, resolver, observed, report);
  return c.Run();
}

}  // namespace onnxkit::passes::convert
