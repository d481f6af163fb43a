// The optimize driver (see optimize.h).
#include "passes/optimize.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/engine.h"
#include "lib/ir/ir.h"
#include "passes/registry.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

void CountOps(const std::vector<pb::NodeProto>& nodes, std::map<std::string, int64_t>* out) {
  for (const pb::NodeProto& n : nodes) {
    bool standard = n.domain.empty() || n.domain == "ai.onnx";
    (*out)[standard ? n.op_type : absl::StrCat(n.domain, "::", n.op_type)] += 1;
    for (const pb::AttributeProto& a : n.attribute) {
      if (a.g) CountOps(a.g->node, out);
      for (const pb::GraphProto& g : a.graphs) CountOps(g.node, out);
    }
  }
}

int64_t Total(const std::map<std::string, int64_t>& h) {
  int64_t n = 0;
  for (const auto& [op, c] : h) n += c;
  return n;
}

// Sets the declared dims of main-graph input `name` to `dims`.
absl::Status PinInput(ir::Model& model, const std::string& name, const std::vector<int64_t>& dims) {
  ir::Value* input = nullptr;
  for (ir::Value* v : model.graph().inputs()) {
    if (v->name() == name) input = v;
  }
  if (input == nullptr || input->kind() != ir::ValueKind::kGraphInput) {
    std::vector<std::string> names;
    for (ir::Value* v : model.graph().inputs()) {
      if (v->kind() == ir::ValueKind::kGraphInput) names.push_back(v->name());
    }
    return absl::InvalidArgumentError(absl::StrCat("--input-shape: '", name, "' is not an input of the model; inputs: ",
                                                   absl::StrJoin(names, ", ")));
  }
  const pb::TypeProto* type = input->type();
  if (type == nullptr || !type->tensor_type) {
    return absl::InvalidArgumentError(absl::StrCat("--input-shape: input '", name, "' is not a typed tensor"));
  }
  pb::TypeProto pinned = *type;
  auto& shape = pinned.tensor_type->shape;
  if (shape) {
    if (shape->dim.size() != dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--input-shape: input '", name, "' has rank ", shape->dim.size(),
                                                     ", the flag gives ", dims.size(), " dims"));
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      const auto& d = shape->dim[i];
      if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value != dims[i]) {
        return absl::InvalidArgumentError(absl::StrCat("--input-shape: dim ", i, " of input '", name, "' is fixed at ",
                                                       d.dim_value, ", the flag gives ", dims[i]));
      }
    }
  }
  auto& s = shape.mutable_value();
  s.dim.resize(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    s.dim[i].kind = pb::TensorShapeProto::Dimension::kValue;
    s.dim[i].dim_value = dims[i];
    s.dim[i].dim_param.clear();
  }
  input->set_type(std::move(pinned));
  return absl::OkStatus();
}

// With inputs pinned, the main graph's outputs declare what inference now
// knows: a symbolic or unknown dim becomes the inferred number (declared
// numbers stay as they are).
void RefineOutputShapes(pb::ModelProto& model) {
  if (!model.graph) return;
  const std::map<std::string, pb::TypeProto> inferred = infer::InferredTypes(model);
  for (pb::ValueInfoProto& out : model.graph.mutable_value().output) {
    auto it = inferred.find(out.name);
    if (it == inferred.end() || !out.type || !out.type->tensor_type || !it->second.tensor_type ||
        !it->second.tensor_type->shape) {
      continue;
    }
    const pb::TensorShapeProto& known = *it->second.tensor_type->shape;
    auto& declared = out.type.mutable_value().tensor_type.mutable_value().shape;
    if (!declared) {
      declared.mutable_value() = known;
      continue;
    }
    if (declared->dim.size() != known.dim.size()) continue;
    for (size_t i = 0; i < known.dim.size(); ++i) {
      auto& d = declared.mutable_value().dim[i];
      if (d.kind != pb::TensorShapeProto::Dimension::kValue &&
          known.dim[i].kind == pb::TensorShapeProto::Dimension::kValue) {
        d.kind = pb::TensorShapeProto::Dimension::kValue;
        d.dim_value = known.dim[i].dim_value;
        d.dim_param.clear();
      }
    }
  }
}

class Driver {
 public:
  Driver(const io::LoadedModel& loaded, const OptimizeOptions& options) : loaded_(loaded), options_(options) {
    manager_options_ = options.manager;
    manager_options_.base_dir = loaded.base_dir;
    manager_options_.mapping = loaded.mapping;
  }

  // The model as loaded, with input shapes pinned.
  absl::StatusOr<std::unique_ptr<ir::Model>> Fresh() const {
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, ir::FromProto(loaded_.proto));
    for (const auto& [name, dims] : options_.input_shapes) ONNXKIT_RETURN_IF_ERROR(PinInput(*model, name, dims));
    if (!options_.keep_initializer_inputs && model->ir_version() < 4) {
      std::vector<ir::Value*> listed;
      for (ir::Value* v : model->graph().inputs()) {
        if (v->kind() == ir::ValueKind::kInitializer) listed.push_back(v);
      }
      for (ir::Value* v : listed) ONNXKIT_RETURN_IF_ERROR(model->graph().RemoveInput(v));
      model->set_ir_version(4);
    }
    return model;
  }

  // Undoes what Fresh changed for IR < 4: the IR version, and every
  // main-graph initializer listed as an input (as that IR requires).
  absl::Status Restore(ir::Model& model) const {
    if (options_.keep_initializer_inputs || loaded_.proto.ir_version >= 4) return absl::OkStatus();
    model.set_ir_version(loaded_.proto.ir_version);
    return ListInitializersAsInputs(model.graph());
  }

  absl::StatusOr<OptimizeResult> Run() {
    OptimizeResult result;
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, Fresh());
    for (const auto& [name, dims] : options_.input_shapes) {
      result.pinned.push_back(absl::StrCat(name, ": [", absl::StrJoin(dims, ", "), "]"));
    }
    pb::ModelProto pinned_proto = ir::ToProto(*model);
    result.ops_before = OpHistogram(pinned_proto);
    result.nodes_before = Total(result.ops_before);
    if (options_.verify) {
      io::LoadedModel original = loaded_;
      original.proto = std::move(pinned_proto);
      ONNXKIT_ASSIGN_OR_RETURN(verifier_, Verifier::Create(original, options_.verify_options));
      result.verify_inputs = verifier_->input_description();
    }
    ManagerOptions mo = manager_options_;
    std::optional<Culprit> failed_pass;
    if (options_.verify && options_.verify_each) {
      mo.after_pass = [&](const PassInfo& pass, int64_t first, int64_t last) -> absl::Status {
        ONNXKIT_ASSIGN_OR_RETURN(VerifyResult r, CheckModel(*model, &result));
        if (r.ok) return absl::OkStatus();
        failed_pass = Culprit{std::string(pass.name), 0, {}, r.summary};
        first_bad_range_ = {first - 1, last};
        return absl::AbortedError("verification failed");
      };
    }
    auto report = RunPipeline(model, options_.pipeline, mo);
    if (!report.ok() && !failed_pass) return report.status();
    if (report.ok()) result.report = std::move(*report);
    ONNXKIT_RETURN_IF_ERROR(Restore(*model));
    result.model = ir::ToProto(*model);
    if (!options_.input_shapes.empty()) RefineOutputShapes(result.model);
    result.ops_after = OpHistogram(result.model);
    result.nodes_after = Total(result.ops_after);
    if (!options_.verify) return result;
    if (!failed_pass) {
      ONNXKIT_ASSIGN_OR_RETURN(VerifyResult r, CheckModel(*model, &result));
      result.verification = r;
      result.verified = r.ok;
      if (r.ok) return result;
      first_bad_range_ = {0, static_cast<int64_t>(result.report.rewrites.empty() ? 0 : result.report.rewrites.back().number)};
    } else {
      VerifyResult r;
      r.ok = false;
      r.summary = failed_pass->summary;
      result.verification = r;
    }
    ONNXKIT_ASSIGN_OR_RETURN(result.culprit, FindCulprit(&result));
    return result;
  }

 private:
  absl::StatusOr<VerifyResult> CheckModel(const ir::Model& model, OptimizeResult* result) const {
    result->verify_runs += 1;
    return verifier_->Check(ir::ToProto(model));
  }

  // Binary search for the smallest bisect limit in (lo, hi] whose model
  // differs, given that lo rewrites match and hi do not.
  absl::StatusOr<Culprit> FindCulprit(OptimizeResult* result) {
    auto [lo, hi] = first_bad_range_;
    std::string summary;
    std::vector<RewriteRecord> records;
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, Fresh());
      ManagerOptions mo = manager_options_;
      mo.bisect_limit = mid;
      ONNXKIT_ASSIGN_OR_RETURN(ManagerReport r, RunPipeline(model, options_.pipeline, mo));
      ONNXKIT_ASSIGN_OR_RETURN(VerifyResult v, CheckModel(*model, result));
      if (v.ok) {
        lo = mid;
      } else {
        hi = mid;
        summary = v.summary;
        records = r.rewrites;
      }
    }
    Culprit c;
    c.rewrite = hi;
    // The record of rewrite `hi`: from the probe that applied it, or a run
    // with exactly that limit.
    if (records.empty() || records.back().number != hi) {
      ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, Fresh());
      ManagerOptions mo = manager_options_;
      mo.bisect_limit = hi;
      ONNXKIT_ASSIGN_OR_RETURN(ManagerReport r, RunPipeline(model, options_.pipeline, mo));
      ONNXKIT_ASSIGN_OR_RETURN(VerifyResult v, CheckModel(*model, result));
      records = r.rewrites;
      summary = v.summary;
    }
    for (const RewriteRecord& rec : records) {
      if (rec.number == hi) c.record = rec;
    }
    c.pass = c.record.pass;
    c.summary = summary;
    return c;
  }

  const io::LoadedModel& loaded_;
  const OptimizeOptions& options_;
  ManagerOptions manager_options_;
  std::unique_ptr<Verifier> verifier_;
  std::pair<int64_t, int64_t> first_bad_range_{0, 0};
};

}  // namespace

absl::StatusOr<OptimizeResult> Optimize(const io::LoadedModel& loaded, const OptimizeOptions& options) {
  Driver driver(loaded, options);
  return driver.Run();
}

absl::StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseInputShape(const std::string& flag) {
  size_t eq = flag.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--input-shape '", flag, "' must be NAME=DIMS, e.g. x=1x3x224x224"));
  }
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(absl::string_view(flag).substr(eq + 1), absl::ByAnyChar("x,"))) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--input-shape '", flag, "': '", part,
                                                     "' is not a dimension (a non-negative integer)"));
    }
    dims.push_back(d);
  }
  if (dims.size() > static_cast<size_t>(limits::kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat("--input-shape '", flag, "': rank above ", limits::kMaxRank));
  }
  return std::make_pair(flag.substr(0, eq), std::move(dims));
}

std::map<std::string, int64_t> OpHistogram(const pb::ModelProto& model) {
  std::map<std::string, int64_t> out;
  if (model.graph) CountOps(model.graph->node, &out);
  for (const pb::FunctionProto& f : model.functions) CountOps(f.node, &out);
  return out;
}

absl::Status PrepareForRun(std::unique_ptr<ir::Model>& model, const std::filesystem::path& base_dir,
                           std::shared_ptr<const io::MappedFile> mapping) {
  bool transposes = false, qdq = false;
  ir::ForEachGraph(*model, [&](ir::Graph& g) {
    int count = 0;
    for (const ir::Node* node : g.nodes()) {
      count += node->op_type() == "Transpose" ? 1 : 0;
      qdq = qdq || node->op_type() == "QuantizeLinear" || node->op_type() == "DequantizeLinear";
    }
    transposes = transposes || count >= 2;
  });
  std::string passes;
  // QDQ exports (PyTorch's) put a same-type Cast between each QuantizeLinear
  // and the DequantizeLinear reading it, and hold their scales, zero points
  // and weights in Constant nodes: as constants and without the Casts the
  // quantized chains pass 8-bit values to each other channels-last.
  if (qdq) passes = "eliminate-identity,fold";
  if (transposes)
    passes += passes.empty() ? "push-transpose,merge-transpose" : ",push-transpose,merge-transpose";
  if (passes.empty()) return absl::OkStatus();
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<const PassInfo*> pipeline, ParsePipeline(passes));
  ManagerOptions options;
  options.base_dir = base_dir;
  options.mapping = std::move(mapping);
  return RunPipeline(model, pipeline, options).status();
}

}  // namespace onnxkit::passes
