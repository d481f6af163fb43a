// Model rules (E02xx): ir_version, opset imports, metadata keys, and the
// model-local functions: unique ids, well-formed signatures, no recursion
// (direct, mutual, or hidden in If/Loop/Scan bodies), call depth within
// limits::kMaxFunctionCallDepth.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checker/rules/rules.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"

namespace onnxkit::checker::internal {
namespace {

// The newest IR version onnxkit knows: 13 (onnx 1.20+, November 2025, which
// added int2/uint2). IR_VERSION history: 3 opset_import, 4 initializers
// need not be inputs, 8 model-local functions, 10 overloads, 11 float4e2m1,
// 12 float8e8m0, 13 int2/uint2.
constexpr int64_t kMaxIrVersion = 13;

void CheckIrVersion(const pb::ModelProto& model, Sink* sink) {
  const std::string range = absl::StrCat("expected 1 to ", kMaxIrVersion);
  if (model.ir_version == 0 && !model.Has(1)) {
    sink->Report(
        rules::kE0200, "ir_version", absl::StrCat("ir_version is missing (", range, ")"),
        "set ir_version to the IR version the exporter targets, e.g. 8 for opsets 15-18, 10 for opset 21");
  } else if (model.ir_version <= 0) {
    sink->Report(rules::kE0200, "ir_version", absl::StrCat("ir_version is ", model.ir_version, ", ", range));
  } else if (model.ir_version > kMaxIrVersion) {
    sink->Report(
        rules::kE0200, "ir_version",
        absl::StrCat("ir_version ", model.ir_version, " is newer than onnxkit supports (", range, ")"),
        "re-export the model for an older IR version, or update onnxkit");
  }
}

// Checks one list of opset imports (the model's or a function's). `where`
// prefixes locations ("" or "function 'f'"). Returns false when broken.
bool CheckOpsetList(const std::vector<pb::OperatorSetIdProto>& list, const std::string& where, Sink* sink) {
  bool sound = true;
  std::map<std::string_view, size_t> first;
  for (size_t i = 0; i < list.size(); ++i) {
    const pb::OperatorSetIdProto& opset = list[i];
    const std::string location = Join(where, absl::StrCat("opset_import[", i, "]"));
    const std::string_view domain = ops::CanonicalDomain(opset.domain);
    auto [it, inserted] = first.emplace(domain, i);
    if (!inserted) {
      sound = false;
      sink->Report(
          rules::kE0203, location,
          absl::StrCat("domain ", Quote(domain), " is imported twice: version ", list[it->second].version,
                       " (opset_import[", it->second, "]) and version ", opset.version),
          "keep one opset_import entry per domain (\"\" and \"ai.onnx\" are the same domain)");
      continue;
    }
    const int64_t max = ops::IsKnownDomain(domain) ? ops::MaxKnownOpset(domain)
                                                   : int64_t{std::numeric_limits<int32_t>::max()};
    if (opset.version < 1 || opset.version > max) {
      sound = false;
      std::string message = absl::StrCat("domain ", Quote(domain), " is imported at version ", opset.version,
                                         ", expected 1 to ", max);
      std::string hint;
      if (opset.version > max && ops::IsKnownDomain(domain)) {
        hint = absl::StrCat("onnxkit knows ", Sv(domain), " up to opset ", max,
                            "; convert the model to an older opset");
      }
      sink->Report(rules::kE0202, location, std::move(message), std::move(hint));
    }
  }
  return sound;
}

void CheckOpsets(const pb::ModelProto& model, ModelFacts* facts, Sink* sink) {
  if (model.opset_import.empty()) {
    if (model.ir_version >= 1 && model.ir_version < 3) {
      facts->opsets.emplace(std::string(ops::kOnnxDomain), 1);  // implied before IR 3
      return;
    }
    facts->opsets_sound = false;
    sink->Report(rules::kE0201, "opset_import", "the model imports no opset (opset_import is empty)",
                 "add an opset_import entry for the default domain \"\" with the opset the nodes follow");
    return;
  }
  if (!CheckOpsetList(model.opset_import, "", sink)) facts->opsets_sound = false;
  for (const pb::OperatorSetIdProto& opset : model.opset_import) {
    facts->opsets.emplace(std::string(ops::CanonicalDomain(opset.domain)), opset.version);
  }
}

void CheckMetadata(const pb::ModelProto& model, Sink* sink) {
  std::map<std::string_view, size_t> first;
  for (size_t i = 0; i < model.metadata_props.size() && !sink->stopped(); ++i) {
    auto [it, inserted] = first.emplace(model.metadata_props[i].key, i);
    if (!inserted) {
      sink->Report(rules::kE0205, absl::StrCat("metadata_props[", i, "]"),
                   absl::StrCat("metadata key ", Quote(model.metadata_props[i].key),
                                " appears twice (first at metadata_props[", it->second, "])"));
    }
  }
}

// Duplicate or empty names in a function's inputs, outputs or attributes.
void CheckNameList(const std::vector<std::string>& names, std::string_view what, const std::string& where,
                   std::set<std::string_view>* seen, Sink* sink) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      sink->Report(rules::kE0210, where, absl::StrCat(Sv(what), " #", i, " has an empty name"));
    } else if (!seen->insert(names[i]).second) {
      sink->Report(rules::kE0210, where, absl::StrCat(Sv(what), " ", Quote(names[i]), " is declared twice"));
    }
  }
}

void CheckFunctionSignatures(const pb::ModelProto& model, ModelFacts* facts, Sink* sink) {
  std::map<FunctionKey, size_t> first;
  for (size_t i = 0; i < model.functions.size() && !sink->stopped(); ++i) {
    const pb::FunctionProto& f = model.functions[i];
    const std::string where = FunctionLabel(f);
    if (f.name.empty())
      sink->Report(rules::kE0210, where, absl::StrCat("functions[", i, "] has an empty name"));
    auto [it, inserted] = first.emplace(KeyOf(f), i);
    if (!inserted) {
      sink->Report(
          rules::kE0206, where,
          absl::StrCat(Sv(where), " is defined twice (functions[", it->second, "] and functions[", i, "])"),
          "give each function a distinct (domain, name, overload)");
    } else {
      facts->functions.emplace(KeyOf(f), &f);
    }
    std::set<std::string_view> inputs, outputs, attributes;
    CheckNameList(f.input, "input", where, &inputs, sink);
    CheckNameList(f.output, "output", where, &outputs, sink);
    CheckNameList(f.attribute, "attribute", where, &attributes, sink);
    std::vector<std::string> with_defaults;
    for (const pb::AttributeProto& a : f.attribute_proto) with_defaults.push_back(a.name);
    CheckNameList(with_defaults, "attribute", where, &attributes, sink);
    if (!CheckOpsetList(f.opset_import, where, sink)) facts->opsets_sound = false;
  }
}

// --- Calls between functions ---------------------------------------------

// Indexes (into `order`) of the functions called by `nodes`, recursively
// through subgraphs, in first-call order.
void CollectCalls(const std::vector<pb::NodeProto>& nodes, const std::map<FunctionKey, size_t>& index,
                  int depth, std::set<size_t>* seen, std::vector<size_t>* calls) {
  for (const pb::NodeProto& node : nodes) {
    auto it = index.find(KeyOf(node));
    if (it != index.end() && seen->insert(it->second).second) calls->push_back(it->second);
    if (depth + 1 > limits::kMaxGraphDepth) continue;
    for (const SubgraphRef& sub : Subgraphs(node))
      CollectCalls(sub.graph->node, index, depth + 1, seen, calls);
  }
}

std::string ChainText(const std::vector<const pb::FunctionProto*>& chain) {
  constexpr size_t kMaxShown = 10, kEnds = 4;
  std::vector<std::string> names;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain.size() > kMaxShown && i == kEnds) {
      names.push_back(absl::StrCat("... (", chain.size() - 2 * kEnds, " more)"));
      i = chain.size() - kEnds - 1;
      continue;
    }
    names.push_back(FunctionLabel(*chain[i]).substr(9));  // without "function "
  }
  return absl::StrJoin(names, " \xe2\x86\x92 ");
}

// Finds call cycles (E0207) and, when there are none, the longest call chain
// (E0208). Iterative: the number of functions is only bounded by the file.
void CheckCalls(const pb::ModelProto& model, const ModelFacts& facts, Sink* sink) {
  if (facts.functions.empty()) return;
  std::vector<const pb::FunctionProto*> order;  // unique functions, file order
  std::map<FunctionKey, size_t> index;
  for (const pb::FunctionProto& f : model.functions) {
    auto it = facts.functions.find(KeyOf(f));
    if (it != facts.functions.end() && it->second == &f) {
      index.emplace(it->first, order.size());
      order.push_back(&f);
    }
  }
  std::vector<std::vector<size_t>> calls(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    std::set<size_t> seen;
    CollectCalls(order[i]->node, index, 0, &seen, &calls[i]);
  }

  // Depth-first search with an explicit stack; color 0 new, 1 on the stack,
  // 2 done. depth[i]: the longest chain of calls starting at i (i counts 1).
  std::vector<int> color(order.size(), 0);
  std::vector<int64_t> depth(order.size(), 1);
  std::vector<std::pair<size_t, size_t>> stack;  // (function, next callee)
  bool cyclic = false;
  for (size_t root = 0; root < order.size() && !sink->stopped(); ++root) {
    if (color[root] != 0) continue;
    stack.push_back({root, 0});
    color[root] = 1;
    while (!stack.empty()) {
      auto& [f, next] = stack.back();
      if (next < calls[f].size()) {
        const size_t callee = calls[f][next++];
        if (color[callee] == 0) {
          color[callee] = 1;
          stack.push_back({callee, 0});
        } else if (color[callee] == 1) {
          cyclic = true;
          std::vector<const pb::FunctionProto*> chain;
          size_t start = 0;
          while (stack[start].first != callee) ++start;
          for (size_t k = start; k < stack.size(); ++k) chain.push_back(order[stack[k].first]);
          chain.push_back(order[callee]);
          sink->Report(rules::kE0207, FunctionLabel(*order[callee]),
                       absl::StrCat("model-local functions call themselves: ", ChainText(chain)),
                       "a function may not call itself, directly, through other functions, or from an "
                       "If/Loop/Scan body");
        } else {
          depth[f] = std::max(depth[f], depth[callee] + 1);
        }
        continue;
      }
      color[f] = 2;
      const size_t done = f;
      stack.pop_back();
      if (!stack.empty()) depth[stack.back().first] = std::max(depth[stack.back().first], depth[done] + 1);
    }
  }
  if (cyclic) return;
  size_t deepest = 0;
  for (size_t i = 1; i < order.size(); ++i) {
    if (depth[i] > depth[deepest]) deepest = i;
  }
  if (depth[deepest] <= limits::kMaxFunctionCallDepth) return;
  std::vector<const pb::FunctionProto*> chain;
  for (size_t f = deepest;;) {
    chain.push_back(order[f]);
    size_t next = f;
    for (size_t callee : calls[f]) {
      if (depth[callee] + 1 == depth[f]) next = callee;
    }
    if (next == f) break;
    f = next;
  }
  sink->Report(
      rules::kE0208, FunctionLabel(*order[deepest]),
      absl::StrCat("model-local function calls nest ", depth[deepest], " deep, over the limit of ",
                   limits::kMaxFunctionCallDepth, " (limits::kMaxFunctionCallDepth): ", ChainText(chain)));
}

// A function importing a domain at another version than the model: every op
// of that domain it uses must have the same definition at both versions.
void CheckFunctionOpsets(const pb::ModelProto& model, Sink* sink) {
  std::map<std::string_view, int64_t> imported;
  for (const pb::OperatorSetIdProto& o : model.opset_import)
    imported.emplace(ops::CanonicalDomain(o.domain), o.version);
  for (const pb::FunctionProto& f : model.functions) {
    for (const pb::OperatorSetIdProto& o : f.opset_import) {
      const std::string_view domain = ops::CanonicalDomain(o.domain);
      auto it = imported.find(domain);
      if (it == imported.end() || it->second == o.version) continue;
      std::set<std::string_view> reported;
      for (const pb::NodeProto& node : f.node) {
        if (ops::CanonicalDomain(node.domain) != domain || !reported.insert(node.op_type).second) continue;
        const ops::OpSchema* in_function = ops::FindSchema(domain, node.op_type, o.version);
        const ops::OpSchema* in_model = ops::FindSchema(domain, node.op_type, it->second);
        if (in_function == nullptr || in_model == nullptr || in_function == in_model) continue;
        sink->Report(rules::kE0211, FunctionLabel(f),
                     absl::StrCat("imports ", Quote(domain.empty() ? "ai.onnx" : domain), " ", o.version,
                                  " where the model imports ", it->second, ", and ", Quote(node.op_type),
                                  " differs between them (version ", in_function->since_version(),
                                  " against ", in_model->since_version(), ")"),
                     "import the model's version in the function, or convert one of them");
        if (sink->stopped()) return;
      }
    }
  }
}

}  // namespace

void CheckModelRules(const pb::ModelProto& model, ModelFacts* facts, Sink* sink) {
  facts->ir_version = model.ir_version;
  CheckIrVersion(model, sink);
  CheckOpsets(model, facts, sink);
  CheckMetadata(model, sink);
  if (!model.graph) {
    sink->Report(rules::kE0209, "", "the model has no graph");
  }
  CheckFunctionSignatures(model, facts, sink);
  if (!sink->stopped()) CheckCalls(model, *facts, sink);
  if (!sink->stopped()) CheckFunctionOpsets(model, sink);
}

}  // namespace onnxkit::checker::internal
