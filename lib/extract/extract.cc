// Subgraph extraction: a backward walk from the requested outputs to the
// requested inputs over the IR's producer links (values used inside
// If/Loop/Scan bodies count as inputs of the node owning the body), then the
// kept parts of the original protobuf are assembled in their original order.
#include "lib/extract/extract.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/base/usage_error.h"
#include "lib/ir/ir.h"
#include "lib/onnx_bridge/shape_inference_bridge.h"

namespace onnxkit::extract {
namespace {

// Edit distance, for "did you mean" suggestions.
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

absl::Status UnknownName(const ir::Graph& g, const std::string& name, const char* role) {
  std::string best;
  size_t best_distance = name.size() / 3 + 1;
  for (const ir::Value* v : g.values()) {
    if (v->name().empty()) continue;
    size_t d = Distance(name, v->name());
    if (d < best_distance || (d == best_distance && !best.empty() && v->name() < best)) {
      best_distance = d;
      best = v->name();
    }
  }
  return absl::NotFoundError(absl::StrCat(role, " tensor '", name, "' is not a tensor of the main graph",
                                          best.empty() ? "" : absl::StrCat("; did you mean '", best, "'?")));
}

// Pushes the values of `main` used by nodes inside `node`'s subgraphs.
void PushOuterUses(const ir::Node& node, const ir::Graph* main, std::vector<ir::Value*>* work) {
  node.ForEachSubgraph([&](ir::Graph* sub) {
    for (ir::Node* inner : sub->nodes()) {
      for (ir::Value* v : inner->inputs()) {
        if (v != nullptr && v->graph() == main) work->push_back(v);
      }
      PushOuterUses(*inner, main, work);
    }
  });
}

pb::TypeProto TypeOfTensor(const pb::TensorProto& t) {
  pb::TypeProto type;
  auto& tensor = type.tensor_type.mutable_value();
  tensor.elem_type = t.data_type;
  auto& shape = tensor.shape.mutable_value();
  for (int64_t d : t.dims) {
    pb::TensorShapeProto::Dimension dim;
    dim.kind = pb::TensorShapeProto::Dimension::kValue;
    dim.dim_value = d;
    shape.dim.push_back(dim);
  }
  return type;
}

// Finds a typed description of each boundary tensor.
class TypeFinder {
 public:
  TypeFinder(const pb::ModelProto& model, bool infer) : model_(model), infer_(infer) {
    const pb::GraphProto& g = *model.graph;
    for (const auto* list : {&g.input, &g.value_info, &g.output}) {
      for (const auto& vi : *list) {
        if (vi.type && !entries_.count(vi.name)) entries_[vi.name] = &vi;
      }
    }
    for (const auto& t : g.initializer) initializers_[t.name] = &t;
  }

  absl::StatusOr<pb::ValueInfoProto> Find(const std::string& name) {
    auto it = entries_.find(name);
    if (it != entries_.end()) return *it->second;
    auto init = initializers_.find(name);
    if (init != initializers_.end()) {
      pb::ValueInfoProto vi;
      vi.name = name;
      vi.type = TypeOfTensor(*init->second);
      return vi;
    }
    if (infer_ && !inferred_done_) {
      inferred_done_ = true;
      auto inferred = onnx_bridge::InferValueInfo(model_);
      if (inferred.ok()) inferred_ = std::move(*inferred);
      else inference_error_ = std::string(inferred.status().message());
    }
    for (const auto& vi : inferred_) {
      if (vi.name == name && vi.type) return vi;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the type of tensor '", name, "' is unknown: the model declares none",
        infer_ ? (inference_error_.empty() ? " and shape inference could not find one"
                                           : absl::StrCat(" and shape inference failed (", inference_error_, ")"))
               : " (type inference disabled)"));
  }

 private:
  const pb::ModelProto& model_;
  bool infer_;
  std::map<std::string, const pb::ValueInfoProto*> entries_;
  std::map<std::string, const pb::TensorProto*> initializers_;
  bool inferred_done_ = false;
  std::vector<pb::ValueInfoProto> inferred_;
  std::string inference_error_;
};

absl::Status CheckRequest(const ExtractRequest& request) {
  if (request.outputs.empty()) return UsageError("no output tensor given");
  std::set<std::string> seen;
  for (const auto* list : {&request.inputs, &request.outputs}) {
    for (const auto& name : *list) {
      if (name.empty()) return UsageError("a tensor name is empty");
    }
  }
  for (const auto& name : request.inputs) {
    if (!seen.insert(name).second) return UsageError(absl::StrCat("input '", name, "' is given twice"));
  }
  seen.clear();
  for (const auto& name : request.outputs) {
    if (!seen.insert(name).second) return UsageError(absl::StrCat("output '", name, "' is given twice"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pb::ModelProto> ExtractModel(const pb::ModelProto& model, const ExtractRequest& request,
                                            ExtractStats* stats) {
  ONNXKIT_RETURN_IF_ERROR(CheckRequest(request));
  if (!model.graph) return absl::InvalidArgumentError("the model has no graph");
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> ir_model, ir::FromProto(model));
  ir::Graph& g = ir_model->graph();

  absl::flat_hash_set<const ir::Value*> boundary;
  std::vector<ir::Value*> work;
  for (const auto& name : request.inputs) {
    ir::Value* v = g.FindLocalValue(name);
    if (v == nullptr) return UnknownName(g, name, "input");
    boundary.insert(v);
  }
  for (const auto& name : request.outputs) {
    ir::Value* v = g.FindLocalValue(name);
    if (v == nullptr) return UnknownName(g, name, "output");
    work.push_back(v);
  }

  absl::flat_hash_set<const ir::Node*> kept_nodes;
  absl::flat_hash_set<std::string> kept_initializers;
  std::vector<std::string> missing;
  absl::flat_hash_set<const ir::Value*> visited;
  while (!work.empty()) {
    ir::Value* v = work.back();
    work.pop_back();
    if (!visited.insert(v).second || boundary.count(v)) continue;
    switch (v->kind()) {
      case ir::ValueKind::kInitializer:
        kept_initializers.insert(v->name());
        break;
      case ir::ValueKind::kNodeOutput:
        if (kept_nodes.insert(v->producer()).second) {
          for (ir::Value* in : v->producer()->inputs()) {
            if (in != nullptr) work.push_back(in);
          }
          PushOuterUses(*v->producer(), &g, &work);
        }
        break;
      case ir::ValueKind::kGraphInput:
      case ir::ValueKind::kUndefined:
        missing.push_back(v->name());
        break;
    }
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    return absl::FailedPreconditionError(absl::StrCat(
        "the outputs cannot be computed from the given inputs: they also depend on ",
        absl::StrJoin(missing, ", ", [](std::string* out, const std::string& s) { absl::StrAppend(out, "'", s, "'"); }),
        " (add ", missing.size() == 1 ? "it" : "them", " to the inputs)"));
  }

  // Assemble from the original protobuf, in original order.
  const pb::GraphProto& src = *model.graph;
  pb::ModelProto out = model;
  out.training_info.clear();  // refers to the full graph's tensors
  pb::GraphProto& dst = *out.graph;
  dst.node.clear();
  dst.initializer.clear();
  dst.sparse_initializer.clear();
  dst.input.clear();
  dst.output.clear();
  dst.value_info.clear();
  dst.quantization_annotation.clear();

  absl::flat_hash_set<std::string> kept_names;  // tensors defined in the result
  size_t index = 0;
  for (const ir::Node* node : g.nodes()) {
    const pb::NodeProto& pn = src.node[index++];
    if (!kept_nodes.count(node)) continue;
    dst.node.push_back(pn);
    for (const auto& o : pn.output) kept_names.insert(o);
  }
  for (const auto& t : src.initializer) {
    if (kept_initializers.count(t.name)) {
      dst.initializer.push_back(t);
      kept_names.insert(t.name);
    }
  }
  for (const auto& sp : src.sparse_initializer) {
    if (sp.values && kept_initializers.count(sp.values->name)) {
      dst.sparse_initializer.push_back(sp);
      kept_names.insert(sp.values->name);
    }
  }
  TypeFinder types(model, request.infer_types);
  for (const auto* names : {&request.inputs, &request.outputs}) {
    for (const auto& name : *names) {
      ONNXKIT_ASSIGN_OR_RETURN(pb::ValueInfoProto vi, types.Find(name));
      vi.name = name;
      (names == &request.inputs ? dst.input : dst.output).push_back(std::move(vi));
      kept_names.insert(name);
    }
  }
  if (model.ir_version < 4) {
    // Before IR 4 every initializer must also be listed as a graph input.
    for (const auto& t : dst.initializer) {
      auto entry = std::find_if(src.input.begin(), src.input.end(),
                                [&](const pb::ValueInfoProto& vi) { return vi.name == t.name; });
      pb::ValueInfoProto vi;
      if (entry != src.input.end()) {
        vi = *entry;
      } else {
        vi.name = t.name;
        vi.type = TypeOfTensor(t);
      }
      dst.input.push_back(std::move(vi));
    }
  }
  absl::flat_hash_set<std::string> io_names(request.inputs.begin(), request.inputs.end());
  io_names.insert(request.outputs.begin(), request.outputs.end());
  for (const auto& vi : src.value_info) {
    if (kept_names.count(vi.name) && !io_names.count(vi.name)) dst.value_info.push_back(vi);
  }
  for (const auto& qa : src.quantization_annotation) {
    if (kept_names.count(qa.tensor_name)) dst.quantization_annotation.push_back(qa);
  }
  if (stats != nullptr) {
    stats->nodes_kept = static_cast<int64_t>(dst.node.size());
    stats->nodes_total = static_cast<int64_t>(src.node.size());
    stats->initializers_kept = static_cast<int64_t>(dst.initializer.size() + dst.sparse_initializer.size());
  }
  return out;
}

}  // namespace onnxkit::extract
