// Node rules (E04xx), for every node of the main graph, its subgraphs and
// the model-local function bodies:
//   - the op exists at the imported opset of its domain (ai.onnx,
//     ai.onnx.ml, ai.onnx.preview, ai.onnx.preview.training) and is not
//     deprecated; a node calling a model-local function is checked against
//     the function's signature instead; other domains are not checked (a
//     warning, an error with --strict-custom);
//   - arity: required inputs/outputs present and not empty, no extra ones
//     unless the last formal is variadic;
//   - attributes: known, unique, typed as the schema says, value fields
//     consistent with the type, required ones present;
//   - type constraints: where the types of a node's inputs and outputs are
//     declared (graph inputs, initializers, value_info, graph outputs), each
//     is allowed by its formal, and one type variable binds one type.
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checker/rules/rules.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/ops/attribute_values.h"
#include "lib/ops/contrib_lowering.h"
#include "lib/ops/registry.h"
#include "lib/ops/schema.h"
#include "lib/ops/type_string.h"

namespace onnxkit::checker::internal {
namespace {

std::string_view AttributeTypeName(int32_t type) {
  switch (type) {
    case pb::kAttrFloat:
      return "FLOAT";
    case pb::kAttrInt:
      return "INT";
    case pb::kAttrString:
      return "STRING";
    case pb::kAttrTensor:
      return "TENSOR";
    case pb::kAttrGraph:
      return "GRAPH";
    case pb::kAttrFloats:
      return "FLOATS";
    case pb::kAttrInts:
      return "INTS";
    case pb::kAttrStrings:
      return "STRINGS";
    case pb::kAttrTensors:
      return "TENSORS";
    case pb::kAttrGraphs:
      return "GRAPHS";
    case pb::kAttrSparseTensor:
      return "SPARSE_TENSOR";
    case pb::kAttrSparseTensors:
      return "SPARSE_TENSORS";
    case pb::kAttrTypeProto:
      return "TYPE_PROTO";
    case pb::kAttrTypeProtos:
      return "TYPE_PROTOS";
    default:
      return "";
  }
}

std::string TypeName(int32_t type) {
  std::string_view name = AttributeTypeName(type);
  return name.empty() ? absl::StrCat("type ", type) : std::string(name);
}

// The value fields an attribute populates, by the AttributeType using each.
std::vector<int32_t> PopulatedFields(const pb::AttributeProto& a) {
  std::vector<int32_t> fields;
  if (a.Has(2) || a.f != 0) fields.push_back(pb::kAttrFloat);
  if (a.Has(3) || a.i != 0) fields.push_back(pb::kAttrInt);
  if (a.Has(4) || !a.s.empty()) fields.push_back(pb::kAttrString);
  if (a.t) fields.push_back(pb::kAttrTensor);
  if (a.g) fields.push_back(pb::kAttrGraph);
  if (!a.floats.empty()) fields.push_back(pb::kAttrFloats);
  if (!a.ints.empty()) fields.push_back(pb::kAttrInts);
  if (!a.strings.empty()) fields.push_back(pb::kAttrStrings);
  if (!a.tensors.empty()) fields.push_back(pb::kAttrTensors);
  if (!a.graphs.empty()) fields.push_back(pb::kAttrGraphs);
  if (a.sparse_tensor) fields.push_back(pb::kAttrSparseTensor);
  if (!a.sparse_tensors.empty()) fields.push_back(pb::kAttrSparseTensors);
  if (a.tp) fields.push_back(pb::kAttrTypeProto);
  if (!a.type_protos.empty()) fields.push_back(pb::kAttrTypeProtos);
  return fields;
}

std::string_view FieldName(int32_t type) {
  switch (type) {
    case pb::kAttrFloat:
      return "f";
    case pb::kAttrInt:
      return "i";
    case pb::kAttrString:
      return "s";
    case pb::kAttrTensor:
      return "t";
    case pb::kAttrGraph:
      return "g";
    case pb::kAttrFloats:
      return "floats";
    case pb::kAttrInts:
      return "ints";
    case pb::kAttrStrings:
      return "strings";
    case pb::kAttrTensors:
      return "tensors";
    case pb::kAttrGraphs:
      return "graphs";
    case pb::kAttrSparseTensor:
      return "sparse_tensor";
    case pb::kAttrSparseTensors:
      return "sparse_tensors";
    case pb::kAttrTypeProto:
      return "tp";
    case pb::kAttrTypeProtos:
      return "type_protos";
    default:
      return "";
  }
}

// Why the attribute's value fields disagree with its declared type; "" if
// they agree. Singular message values (t, g, sparse_tensor, tp) must be set.
std::string ValueFieldProblem(const pb::AttributeProto& a) {
  if (AttributeTypeName(a.type).empty()) return "";  // reported by the caller
  for (int32_t field : PopulatedFields(a)) {
    if (field != a.type) {
      return absl::StrCat("attribute ", Quote(a.name), " is ", TypeName(a.type), " but also sets ",
                          Sv(FieldName(field)));
    }
  }
  const bool singular_message = a.type == pb::kAttrTensor || a.type == pb::kAttrGraph ||
                                a.type == pb::kAttrSparseTensor || a.type == pb::kAttrTypeProto;
  if (singular_message) {
    const std::vector<int32_t> fields = PopulatedFields(a);
    if (fields.empty()) {
      return absl::StrCat("attribute ", Quote(a.name), " is ", TypeName(a.type), " but has no value (",
                          Sv(FieldName(a.type)), " is not set)");
    }
  }
  return "";
}

// A known type: every part set, element types valid.
bool IsKnownType(const pb::TypeProto& type) {
  const std::string text = ops::TypeToString(type);
  return text.find("undefined") == std::string::npos && text.find("data_type_") == std::string::npos;
}

// Declared types of one graph's values (first declaration wins: graph
// input, initializer, value_info, graph output).
class TypeScope {
 public:
  void Declare(const std::string& name, const pb::TypeProto* type) {
    if (!name.empty() && type != nullptr && IsKnownType(*type)) types_.try_emplace(name, type);
  }
  void DeclareTensor(const std::string& name, int32_t elem_type) {
    if (name.empty() || !IsKnownDataType(elem_type) || types_.count(name) > 0) return;
    pb::TypeProto& t = owned_.emplace_back();
    t.tensor_type.mutable_value().elem_type = elem_type;
    types_.emplace(name, &t);
  }
  const pb::TypeProto* Find(std::string_view name) const {
    auto it = types_.find(name);
    return it == types_.end() ? nullptr : it->second;
  }

 private:
  absl::flat_hash_map<std::string_view, const pb::TypeProto*> types_;  // an index
  std::deque<pb::TypeProto> owned_;
};

class NodeRules {
 public:
  NodeRules(const ModelFacts& facts, const CheckOptions& options, Sink* sink)
      : facts_(facts), options_(options), sink_(sink) {}

  void Graph(const pb::GraphProto& g, const std::string& location, int depth, const pb::FunctionProto* fn);
  void Function(const pb::FunctionProto& f);

 private:
  void Nodes(const std::vector<pb::NodeProto>& nodes, const std::string& location, int depth,
             const pb::FunctionProto* fn);
  void CheckNode(const pb::NodeProto& node, const NodeWhere& where, const pb::FunctionProto* fn);
  // A call of model-local function `callee`, from function `fn` (null: a graph).
  void CheckCall(const pb::NodeProto& node, const NodeWhere& where, const pb::FunctionProto& callee,
                 const pb::FunctionProto* fn);
  void CheckArity(const pb::NodeProto& node, const NodeWhere& where, const ops::OpSchema& schema,
                  bool inputs);
  void CheckAttributes(const pb::NodeProto& node, const NodeWhere& where, const ops::OpSchema* schema,
                       const pb::FunctionProto* callee, const pb::FunctionProto* fn);
  void CheckTypes(const pb::NodeProto& node, const NodeWhere& where, const ops::OpSchema& schema);
  // A string attribute with a value the op does not accept (E0411).
  void CheckEnumValue(const pb::AttributeProto& a, const NodeWhere& where, const ops::OpSchema& schema);
  const pb::TypeProto* DeclaredType(std::string_view name) const;
  std::string UnknownOpMessage(std::string_view domain, const std::string& op, int64_t version);
  // The attribute names `function` declares (with or without defaults).
  const std::set<std::string_view>& FunctionAttributes(const pb::FunctionProto& function);

  const ModelFacts& facts_;
  const CheckOptions& options_;
  Sink* sink_;
  std::vector<const TypeScope*> scopes_;  // innermost last
  std::set<std::pair<std::string, std::string>> custom_reported_;
  // Caches, so that a file of a million nodes costs a million lookups.
  std::map<std::tuple<std::string, std::string, int64_t>, std::string> unknown_ops_;
  std::map<const pb::FunctionProto*, std::set<std::string_view>> function_attributes_;
};

// Spelling suggestions cost an edit distance against every op name: they
// are made for short names and the first distinct unknown ops only.
constexpr size_t kMaxSuggestedOpName = 64;
constexpr size_t kMaxSuggestions = 256;

std::string NodeRules::UnknownOpMessage(std::string_view domain, const std::string& op, int64_t version) {
  auto key = std::make_tuple(std::string(domain), op, version);
  auto it = unknown_ops_.find(key);
  if (it != unknown_ops_.end()) return it->second;
  std::string message;
  if (op.size() <= kMaxSuggestedOpName && unknown_ops_.size() < kMaxSuggestions) {
    message = std::string(ops::LookupSchema(domain, op, version).status().message());
  } else {
    message = absl::StrCat("op ", Quote(op), " is not defined in ", Sv(domain), " opset ", version);
  }
  unknown_ops_.emplace(std::move(key), message);
  return message;
}

const std::set<std::string_view>& NodeRules::FunctionAttributes(const pb::FunctionProto& function) {
  auto [it, inserted] = function_attributes_.try_emplace(&function);
  if (inserted) {
    for (const std::string& a : function.attribute) it->second.insert(a);
    for (const pb::AttributeProto& a : function.attribute_proto) it->second.insert(a.name);
  }
  return it->second;
}

std::string SchemaLabel(const ops::OpSchema& schema) {
  return absl::StrCat(Sv(schema.name()), "-", schema.since_version());
}

void NodeRules::Graph(const pb::GraphProto& g, const std::string& location, int depth,
                      const pb::FunctionProto* fn) {
  TypeScope scope;
  for (const pb::ValueInfoProto& vi : g.input) scope.Declare(vi.name, vi.type.get());
  for (const pb::TensorProto& t : g.initializer) scope.DeclareTensor(t.name, t.data_type);
  for (const pb::SparseTensorProto& s : g.sparse_initializer) {
    if (s.values) scope.DeclareTensor(s.values->name, s.values->data_type);
  }
  for (const pb::ValueInfoProto& vi : g.value_info) scope.Declare(vi.name, vi.type.get());
  for (const pb::ValueInfoProto& vi : g.output) scope.Declare(vi.name, vi.type.get());
  scopes_.push_back(&scope);
  Nodes(g.node, location, depth, fn);
  scopes_.pop_back();
}

void NodeRules::Function(const pb::FunctionProto& f) {
  TypeScope scope;
  for (const pb::ValueInfoProto& vi : f.value_info) scope.Declare(vi.name, vi.type.get());
  scopes_.push_back(&scope);
  Nodes(f.node, FunctionLabel(f), 0, &f);
  scopes_.pop_back();
}

void NodeRules::Nodes(const std::vector<pb::NodeProto>& nodes, const std::string& location, int depth,
                      const pb::FunctionProto* fn) {
  for (size_t j = 0; j < nodes.size() && !sink_->stopped(); ++j) {
    const NodeWhere where(location, nodes[j], j);
    CheckNode(nodes[j], where, fn);
    if (depth + 1 > limits::kMaxGraphDepth) continue;  // reported by the graph rules
    for (const SubgraphRef& sub : Subgraphs(nodes[j])) {
      Graph(*sub.graph, Join(std::string(where), sub.label), depth + 1, fn);
    }
  }
}

const pb::TypeProto* NodeRules::DeclaredType(std::string_view name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (const pb::TypeProto* t = (*it)->Find(name)) return t;
  }
  return nullptr;
}

void NodeRules::CheckNode(const pb::NodeProto& node, const NodeWhere& where, const pb::FunctionProto* fn) {
  if (node.op_type.empty()) {
    sink_->Report(rules::kE0410, where, "the node has an empty op_type");
    return;
  }
  const std::string_view domain = ops::CanonicalDomain(node.domain);
  const std::optional<int64_t> version = OpsetFor(facts_, fn, node.domain);
  if (!version) {
    sink_->Report(rules::kE0204, where,
                  absl::StrCat("domain ", Quote(domain), " of op ", Quote(node.op_type), " is not imported",
                               fn != nullptr ? " by the function or the model" : " by the model"),
                  absl::StrCat("add an opset_import entry for domain ", Quote(domain)));
    return;
  }
  auto local = facts_.functions.find(KeyOf(node));
  if (local != facts_.functions.end()) {
    CheckCall(node, where, *local->second, fn);
    return;
  }
  if (!ops::IsKnownDomain(domain)) {
    if (!custom_reported_.emplace(std::string(domain), node.op_type).second) return;
    sink_->Report(
        rules::kE0409, where,
        absl::StrCat("op ", Quote(node.op_type), " of custom domain ", Quote(domain),
                     " is not checked: onnxkit has no schema for it (reported once per op)"),
        ops::IsLowerableContribOp(domain, node.op_type)
            ? absl::StrCat(
                  "an ONNX Runtime contrib op: `onnxkit run` runs it as the standard ops it stands for, ",
                  "`onnxkit optimize --passes lower-contrib,default` writes it so",
                  options_.strict_custom ? "" : "; run with --strict-custom to treat unchecked ops as errors")
        : options_.strict_custom
            ? "with --strict-custom, ops outside the ONNX domains and the model's functions are errors"
            : "run with --strict-custom to treat unchecked ops as errors");
    return;
  }
  const ops::OpSchema* schema = ops::FindSchema(domain, node.op_type, *version);
  if (schema == nullptr) {
    if (domain == "ai.onnx" &&
        (node.op_type == "LayerNormalization" || node.op_type == "SimplifiedLayerNormalization")) {
      sink_->Report(
          rules::kE0400, where, UnknownOpMessage(domain, node.op_type, *version),
          "ONNX Runtime writes this op at any opset: `onnxkit run` runs it; `onnxkit optimize --passes "
          "lower-contrib,default` writes it as standard ops");
      return;
    }
    sink_->Report(rules::kE0400, where, UnknownOpMessage(domain, node.op_type, *version));
    return;
  }
  if (schema->deprecated()) {
    // A later version that is not deprecated (GroupNormalization 18 -> 21):
    // convert gets there.
    std::string hint = "replace the op (e.g. Upsample by Resize) or keep the model at an older opset";
    for (const ops::OpSchema* later : ops::SchemaVersions(domain, node.op_type)) {
      if (later->since_version() > schema->since_version() && !later->deprecated()) {
        hint = absl::StrCat("`onnxkit convert --opset ", later->since_version(), "` moves it to ",
                            node.op_type, "-", later->since_version());
        break;
      }
    }
    sink_->Report(rules::kE0401, where,
                  absl::StrCat("op ", Quote(node.op_type), " is deprecated since ", Sv(domain), " opset ",
                               schema->since_version(), " (the model imports opset ", *version, ")"),
                  hint);
    return;
  }
  CheckArity(node, where, *schema, /*inputs=*/true);
  CheckArity(node, where, *schema, /*inputs=*/false);
  CheckAttributes(node, where, schema, nullptr, fn);
  CheckTypes(node, where, *schema);
}

void NodeRules::CheckCall(const pb::NodeProto& node, const NodeWhere& where, const pb::FunctionProto& callee,
                          const pb::FunctionProto* fn) {
  const std::string label = FunctionLabel(callee);
  if (node.input.size() > callee.input.size()) {
    sink_->Report(rules::kE0402, where,
                  absl::StrCat("the node has ", node.input.size(), " inputs, but ", label, " declares ",
                               callee.input.size()));
  }
  if (node.output.size() > callee.output.size()) {
    sink_->Report(rules::kE0403, where,
                  absl::StrCat("the node has ", node.output.size(), " outputs, but ", label, " declares ",
                               callee.output.size()));
  }
  CheckAttributes(node, where, nullptr, &callee, fn);
}

void NodeRules::CheckArity(const pb::NodeProto& node, const NodeWhere& where, const ops::OpSchema& schema,
                           bool inputs) {
  const std::vector<std::string>& actual = inputs ? node.input : node.output;
  const std::span<const ops::FormalParameter> formals = inputs ? schema.inputs() : schema.outputs();
  const rules::RuleId rule = inputs ? rules::kE0402 : rules::kE0403;
  const std::string_view what = inputs ? "input" : "output";
  const size_t n = actual.size();
  const bool variadic = !formals.empty() && formals.back().option == ops::ParamOption::kVariadic;
  if (!variadic && n > formals.size()) {
    sink_->Report(rule, where,
                  absl::StrCat("the node has ", n, " ", Sv(what), "s, but ", SchemaLabel(schema),
                               " takes at most ", formals.size()));
    return;
  }
  for (size_t j = 0; j < formals.size(); ++j) {
    const ops::FormalParameter& f = formals[j];
    if (f.option == ops::ParamOption::kSingle) {
      if (j >= n || actual[j].empty()) {
        sink_->Report(rule, where,
                      absl::StrCat("required ", Sv(what), " ", Quote(f.name), " (#", j, ") of ",
                                   SchemaLabel(schema), j >= n ? " is missing" : " has an empty name"),
                      j >= n
                          ? absl::StrCat(SchemaLabel(schema), " needs at least ",
                                         inputs ? schema.min_input() : schema.min_output(), " ", Sv(what),
                                         (inputs ? schema.min_input() : schema.min_output()) == 1 ? "" : "s")
                          : std::string());
        return;
      }
    } else if (f.option == ops::ParamOption::kVariadic) {
      const size_t count = n > j ? n - j : 0;
      if (count < static_cast<size_t>(std::max(f.min_arity, 0))) {
        sink_->Report(rule, where,
                      absl::StrCat("variadic ", Sv(what), " ", Quote(f.name), " of ", SchemaLabel(schema),
                                   " needs at least ", f.min_arity, f.min_arity == 1 ? " value" : " values",
                                   ", the node gives ", count));
        return;
      }
    }
  }
  const int64_t min = inputs ? schema.min_input() : schema.min_output();
  const int64_t max = inputs ? schema.max_input() : schema.max_output();
  if (static_cast<int64_t>(n) < min || static_cast<int64_t>(n) > max) {
    sink_->Report(rule, where,
                  absl::StrCat("the node has ", n, " ", Sv(what), "s, but ", SchemaLabel(schema), " takes ",
                               min, max >= int64_t{2147483647} ? " or more" : absl::StrCat(" to ", max)));
  }
}

void NodeRules::CheckAttributes(const pb::NodeProto& node, const NodeWhere& where,
                                const ops::OpSchema* schema, const pb::FunctionProto* callee,
                                const pb::FunctionProto* fn) {
  std::set<std::string_view> seen;
  static const std::set<std::string_view> kNone;
  const std::set<std::string_view>& callee_attributes =
      callee != nullptr ? FunctionAttributes(*callee) : kNone;
  const std::string owner = schema != nullptr ? SchemaLabel(*schema) : FunctionLabel(*callee);
  for (size_t i = 0; i < node.attribute.size() && !sink_->stopped(); ++i) {
    const pb::AttributeProto& a = node.attribute[i];
    if (a.name.empty()) {
      sink_->Report(rules::kE0404, where, absl::StrCat("attribute #", i, " has an empty name"));
      continue;
    }
    if (!seen.insert(a.name).second) {
      sink_->Report(rules::kE0407, where, absl::StrCat("attribute ", Quote(a.name), " appears twice"));
      continue;
    }
    const ops::AttributeSpec* spec = schema != nullptr ? schema->FindAttribute(a.name) : nullptr;
    const bool declared = schema != nullptr ? spec != nullptr : callee_attributes.count(a.name) > 0;
    if (!declared && a.name.rfind("__", 0) != 0) {
      std::string hint;
      if (schema != nullptr) {
        std::vector<absl::string_view> names;
        for (const ops::AttributeSpec& s : schema->attributes()) names.push_back(Sv(s.name));
        hint = names.empty() ? absl::StrCat(owner, " has no attributes")
                             : absl::StrCat(owner, " accepts: ", absl::StrJoin(names, ", "));
      }
      sink_->Report(rules::kE0404, where,
                    absl::StrCat("attribute ", Quote(a.name), " is not defined by ", owner), std::move(hint));
      continue;
    }
    if (a.type != pb::kAttrUndefined && AttributeTypeName(a.type).empty()) {
      sink_->Report(rules::kE0405, where,
                    absl::StrCat("attribute ", Quote(a.name), " has type ", a.type,
                                 ", which is not an AttributeProto type"));
      continue;
    }
    if (!a.ref_attr_name.empty()) {
      std::string problem;
      if (fn == nullptr) {
        problem = "refers to a function attribute, but the node is not in a function body";
      } else if (FunctionAttributes(*fn).count(a.ref_attr_name) == 0) {
        problem = "refers to an attribute the function does not declare";
      }
      if (problem.empty() && !PopulatedFields(a).empty())
        problem = "refers to a function attribute and also sets a value";
      if (!problem.empty()) {
        sink_->Report(rules::kE0405, where,
                      absl::StrCat("attribute ", Quote(a.name), " (ref_attr_name ", Quote(a.ref_attr_name),
                                   ") ", problem));
        continue;
      }
    }
    if (a.type == pb::kAttrUndefined) {
      sink_->Report(rules::kE0405, where,
                    absl::StrCat("attribute ", Quote(a.name), " has no type (AttributeProto.type is unset)",
                                 spec != nullptr ? absl::StrCat("; expected ", TypeName(spec->type)) : ""));
      continue;
    }
    if (spec != nullptr && a.type != spec->type) {
      sink_->Report(rules::kE0405, where,
                    absl::StrCat("attribute ", Quote(a.name), " is ", TypeName(a.type), ", but ", owner,
                                 " expects ", TypeName(spec->type)));
      continue;
    }
    if (a.ref_attr_name.empty()) {
      std::string problem = ValueFieldProblem(a);
      if (!problem.empty()) {
        sink_->Report(rules::kE0405, where, std::move(problem));
      } else if (schema != nullptr && a.type == pb::kAttrString && schema->domain() == "ai.onnx") {
        CheckEnumValue(a, where, *schema);
      }
    }
  }
  if (schema == nullptr) return;
  for (const ops::AttributeSpec& spec : schema->attributes()) {
    if (spec.required && seen.count(spec.name) == 0) {
      sink_->Report(rules::kE0406, where,
                    absl::StrCat("required attribute ", Quote(spec.name), " (", TypeName(spec.type), ") of ",
                                 owner, " is missing"));
    }
  }
}

void NodeRules::CheckEnumValue(const pb::AttributeProto& a, const NodeWhere& where,
                               const ops::OpSchema& schema) {
  if (ops::AcceptsValue(schema.name(), a.name, schema.since_version(), a.s)) return;
  std::vector<std::string> quoted;
  for (std::string_view v : *ops::EnumValues(schema.name(), a.name, schema.since_version()))
    quoted.push_back(Quote(v));
  std::string hint = absl::StrCat(SchemaLabel(schema), " accepts ", absl::StrJoin(quoted, ", "));
  if (int64_t from = ops::FirstVersionAccepting(schema.name(), a.name, a.s, schema.since_version());
      from > 0) {
    absl::StrAppend(&hint, "; ", Sv(schema.name()), " accepts ", Quote(a.s), " from opset ", from,
                    " (`onnxkit convert --opset ", from, "`)");
  }
  sink_->Report(rules::kE0411, where,
                absl::StrCat("attribute ", Quote(a.name), " is ", Quote(a.s), ", which ", SchemaLabel(schema),
                             " does not accept"),
                std::move(hint));
}

void NodeRules::CheckTypes(const pb::NodeProto& node, const NodeWhere& where, const ops::OpSchema& schema) {
  struct Binding {
    std::string type;
    std::string what;
  };
  std::map<std::string_view, Binding> bindings;
  auto check = [&](const std::vector<std::string>& actual, std::span<const ops::FormalParameter> formals,
                   std::string_view what) {
    const bool variadic = !formals.empty() && formals.back().option == ops::ParamOption::kVariadic;
    for (size_t i = 0; i < actual.size() && !sink_->stopped(); ++i) {
      if (actual[i].empty()) continue;
      if (i >= formals.size() && !variadic) return;  // an arity error
      const ops::FormalParameter& f = formals[std::min(i, formals.size() - 1)];
      const pb::TypeProto* type = DeclaredType(actual[i]);
      if (type == nullptr) continue;
      const std::span<const std::string_view> allowed = schema.AllowedTypes(f);
      if (allowed.empty()) continue;
      const std::string label = absl::StrCat(Sv(what), " ", Quote(actual[i]), " (#", i, ")");
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || ops::TypeStringMatches(a, *type);
      const std::string text = ops::TypeToString(*type);
      if (!ok) {
        constexpr size_t kMaxListed = 12;
        std::vector<absl::string_view> listed;
        for (size_t k = 0; k < allowed.size() && k < kMaxListed; ++k) listed.push_back(Sv(allowed[k]));
        sink_->Report(
            rules::kE0408, where,
            absl::StrCat(label, " has type ", text, ", but ", SchemaLabel(schema), " allows ",
                         f.is_type_parameter() ? absl::StrCat(Sv(f.type_str), " in {") : "{",
                         absl::StrJoin(listed, ", "), allowed.size() > kMaxListed ? ", ...}" : "}"));
        continue;
      }
      if (!f.is_type_parameter() || (f.option == ops::ParamOption::kVariadic && !f.homogeneous)) continue;
      auto [it, inserted] = bindings.try_emplace(f.type_str, Binding{text, label});
      if (!inserted && it->second.type != text) {
        sink_->Report(rules::kE0408, where,
                      absl::StrCat("type variable ", Sv(f.type_str), " of ", SchemaLabel(schema), " is ",
                                   it->second.type, " for ", it->second.what, " but ", text, " for ", label),
                      absl::StrCat("all values bound to ", Sv(f.type_str), " must have the same type"));
      }
    }
  };
  check(node.input, schema.inputs(), "input");
  check(node.output, schema.outputs(), "output");
}

}  // namespace

void CheckNodeRules(const pb::ModelProto& model, const ModelFacts& facts, const CheckOptions& options,
                    Sink* sink) {
  NodeRules rules(facts, options, sink);
  if (model.graph) rules.Graph(*model.graph, GraphLabel(*model.graph), 0, nullptr);
  for (const pb::FunctionProto& f : model.functions) {
    if (sink->stopped()) break;
    rules.Function(f);
  }
}

}  // namespace onnxkit::checker::internal
