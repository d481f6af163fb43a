// The convert driver (see convert.h): the main graph and its bodies at the
// model's opset, each model-local function at its own, then opset imports,
// the IR version, and the proof by execution.
#include "passes/convert/convert.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/engine.h"
#include "lib/io/external_data.h"
#include "lib/ir/ir.h"
#include "passes/convert/walker.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

constexpr std::string_view kMl = "ai.onnx.ml";

bool InDomain(const std::string& d, std::string_view domain) {
  return domain.empty() ? d.empty() || d == "ai.onnx" : d == domain;
}

// Converts every function importing `domain`; sets its import to `to`.
absl::Status ConvertFunctions(ir::Model& model, std::string_view domain, int64_t to,
                              io::ExternalDataResolver* resolver, WalkStats& stats) {
  for (pb::FunctionProto& f : model.functions()) {
    pb::OperatorSetIdProto* onnx = nullptr;
    for (pb::OperatorSetIdProto& o : f.opset_import) {
      if (InDomain(o.domain, domain) && onnx == nullptr) onnx = &o;
    }
    if (onnx == nullptr) continue;
    auto body = ir::FunctionBodyFromProto(f);
    std::string path = absl::StrCat("function '", f.name, "'");
    if (!body.ok()) {
      stats.blockers->push_back({path, "", absl::StrCat("malformed body: ", body.status().message())});
      continue;
    }
    ConvertContext ctx(domain.empty() ? onnx->version : 0, nullptr, resolver, domain.empty() ? 0 : onnx->version);
    ONNXKIT_RETURN_IF_ERROR(ConvertGraph(**body, path, domain, onnx->version, to, ctx, stats));
    ir::FunctionBodyToProto(**body, &f);
    onnx->version = to;
  }
  return absl::OkStatus();
}

// The range guard's run (range_guard.h): the original once on the
// verification inputs, magnitudes into `*seen`. That run is the
// verification's reference too (`*verifier`, when verifying). Returns whether
// it ran; when it cannot, the conversion fails if it is to be verified
// (the verification could not run either), else goes on unguarded with a
// warning.
absl::StatusOr<bool> ObserveMagnitudes(const io::LoadedModel& loaded, const ConvertOptions& options,
                                       ValueMagnitudes* seen, std::unique_ptr<Verifier>* verifier,
                                       ConvertResult* result) {
  VerifyOptions vo = options.verify_options;
  vo.observer = MagnitudeObserver(seen);
  vo.observe_subgraphs = true;  // what bodies compute inside counts too
  auto v = Verifier::Create(loaded, vo);
  const bool verifying = options.verify && !options.dry_run;
  if (!v.ok()) {
    if (verifying) return v.status();
    result->warnings.push_back(absl::StrCat("range guard skipped (", v.status().message(),
                                            "): nodes whose values pass the ", PrecisionName(options.precision->target),
                                            " range are not detected"));
    return false;
  }
  result->verify_inputs = (*v)->input_description();
  if (verifying) *verifier = std::move(*v);
  return true;
}

// "range guard: 12 node(s) kept float32 ...: a, b, c, d, e and 7 more".
std::string RangeGuardWarning(const RangeGuardReport& g, const std::string& inputs) {
  constexpr size_t kNamed = 5;
  std::string names;
  for (size_t i = 0; i < g.nodes.size() && i < kNamed; ++i) absl::StrAppend(&names, i == 0 ? "" : ", ", g.nodes[i]);
  if (g.nodes.size() > kNamed) absl::StrAppend(&names, " and ", g.nodes.size() - kNamed, " more");
  return absl::StrCat("range guard: ", g.nodes.size(), " node(s) kept float32, their float32 values beyond +-",
                      g.limits.high, " or all below ", g.limits.low, " on the ", inputs, ": ", names,
                      " (--no-range-guard converts them)");
}

// Whether `graph` or a body of its nodes holds an ai.onnx node.
bool HasOnnxNode(const ir::Graph& graph) {
  for (ir::Node* n : SnapshotNodes(const_cast<ir::Graph&>(graph))) {
    if (InDomain(n->domain(), "")) return true;
    for (const ir::Attribute& a : n->attributes()) {
      if (a.g && HasOnnxNode(*a.g)) return true;
      for (const auto& g : a.graphs) {
        if (HasOnnxNode(*g)) return true;
      }
    }
  }
  return false;
}

}  // namespace

int64_t IrVersionForOpset(int64_t opset) {
  if (opset <= 8) return 3;
  if (opset == 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset == 23) return 11;
  if (opset == 24) return 12;
  return 13;
}

int64_t IrVersionForMlOpset(int64_t opset) {
  if (opset <= 1) return 3;
  if (opset == 2) return 6;
  if (opset == 3) return 8;
  if (opset == 4) return 9;
  return 10;
}

absl::StatusOr<ConvertResult> Convert(const io::LoadedModel& loaded, const ConvertOptions& options) {
  if (options.target_opset != 0 && (options.target_opset < kMinTargetOpset || options.target_opset > kMaxTargetOpset)) {
    return absl::InvalidArgumentError(absl::StrCat("--opset ", options.target_opset, " is outside ", kMinTargetOpset,
                                                   "..", kMaxTargetOpset));
  }
  if (options.target_ml_opset &&
      (*options.target_ml_opset < kMinTargetMlOpset || *options.target_ml_opset > kMaxTargetMlOpset)) {
    return absl::InvalidArgumentError(absl::StrCat("--ml-opset ", *options.target_ml_opset, " is outside ",
                                                   kMinTargetMlOpset, "..", kMaxTargetMlOpset));
  }
  ConvertResult result;
  result.ir_before = loaded.proto.ir_version;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, ir::FromProto(loaded.proto));
  std::optional<int64_t> from = model->OpsetVersion("");
  const std::optional<int64_t> ml_from = model->OpsetVersion(std::string(kMl));
  // A model of ai.onnx.ml nodes alone converts only its ml opset.
  const bool onnx_walk = from.has_value();
  if (!onnx_walk && !(options.target_ml_opset && ml_from)) {
    return absl::InvalidArgumentError("the model imports no ai.onnx opset");
  }
  if (!onnx_walk && options.precision) {
    return absl::InvalidArgumentError("precision conversion needs a model importing an ai.onnx opset");
  }
  result.source_opset = from.value_or(0);
  const int64_t to = !onnx_walk ? 0 : options.target_opset != 0 ? options.target_opset : *from;
  result.target_opset = to;

  std::unique_ptr<io::ExternalDataResolver> resolver;
  if (!loaded.base_dir.empty()) resolver = std::make_unique<io::ExternalDataResolver>(loaded.base_dir);
  infer::Engine engine(*model);
  engine.Run();
  std::map<std::string, infer::ValueState> states = engine.States();
  std::set<std::string> foreign;
  WalkStats stats{&result.blockers, &result.steps, &foreign};
  for (const pb::FunctionProto& f : model->functions()) stats.local_functions.insert(absl::StrCat(f.domain, "::", f.name));
  result.source_ml_opset = ml_from.value_or(0);
  result.target_ml_opset = result.source_ml_opset;
  const bool convert_ml = options.target_ml_opset && ml_from;
  if (convert_ml) stats.converted_domains.insert(std::string(kMl));
  if (options.target_ml_opset && !ml_from) {
    result.warnings.push_back("--ml-opset: the model imports no ai.onnx.ml opset; nothing to convert there");
  }
  ConvertContext ctx(from.value_or(0), &states, resolver.get(), ml_from.value_or(0));
  if (onnx_walk && to != *from) {
    ONNXKIT_RETURN_IF_ERROR(ConvertGraph(model->graph(), "main", "", *from, to, ctx, stats));
    ONNXKIT_RETURN_IF_ERROR(ConvertFunctions(*model, "", to, resolver.get(), stats));
  }
  if (convert_ml) {
    stats.converted_domains = {""};
    ONNXKIT_RETURN_IF_ERROR(ConvertGraph(model->graph(), "main", kMl, *ml_from, *options.target_ml_opset, ctx, stats));
    ONNXKIT_RETURN_IF_ERROR(ConvertFunctions(*model, kMl, *options.target_ml_opset, resolver.get(), stats));
    model->SetOpsetVersion(std::string(kMl), *options.target_ml_opset);
    result.target_ml_opset = *options.target_ml_opset;
  }
  result.nodes_converted = stats.nodes;
  for (const std::string& op : foreign) {
    result.warnings.push_back(absl::StrCat("op ", op, " is not ai.onnx: kept as it is"));
  }
  if (onnx_walk) {
    model->SetOpsetVersion("", to);
  } else if (HasOnnxNode(model->graph())) {
    // ml adapters added Cast or Add nodes: import the ai.onnx opset released
    // with the target ml opset.
    static constexpr int64_t kOnnxForMl[] = {0, 8, 11, 16, 20, 21};
    model->SetOpsetVersion("", kOnnxForMl[result.target_ml_opset]);
  }
  // Going up never lowers the IR version; going down sets the one the
  // target opset needs (older runtimes refuse newer IR versions).
  int64_t needed = onnx_walk ? IrVersionForOpset(to) : 3;
  if (result.target_ml_opset > 0) needed = std::max(needed, IrVersionForMlOpset(result.target_ml_opset));
  const bool up = (!onnx_walk || to >= *from) && result.target_ml_opset >= result.source_ml_opset;
  if (up) needed = std::max(needed, result.ir_before);
  // No opset change: the IR version stays.
  if ((!onnx_walk || to == *from) && result.target_ml_opset == result.source_ml_opset) needed = result.ir_before;
  // bfloat16 tensors need IR 4; model-local functions IR 8.
  if (options.precision && options.precision->target == pb::kBfloat16) needed = std::max<int64_t>(needed, 4);
  if (!model->functions().empty()) needed = std::max<int64_t>(needed, 8);
  result.ir_after = options.ir_version.value_or(needed);
  model->set_ir_version(result.ir_after);
  if (result.ir_after < 4) {
    ONNXKIT_RETURN_IF_ERROR(ListInitializersAsInputs(model->graph()));
    ONNXKIT_RETURN_IF_ERROR(BodyInitializersToConstants(model->graph()));
  }
  // Below IR 4 every initializer must be listed as a graph input, and is a
  // constant all the same; from IR 4 a listed one is an input a user may
  // feed. Going across, the weights stay constants: unlisted.
  if (result.ir_before < 4 && result.ir_after >= 4) {
    std::vector<ir::Value*> listed;
    for (ir::Value* v : model->graph().initializers()) {
      if (v->is_graph_input()) listed.push_back(v);
    }
    for (ir::Value* v : listed) ONNXKIT_RETURN_IF_ERROR(model->graph().RemoveInput(v));
    if (!listed.empty())
      result.steps["initializers no longer listed as inputs (IR < 4 -> IR >= 4)"] = listed.size();
  }
  if (!result.blockers.empty()) return result;
  std::unique_ptr<Verifier> verifier;
  if (options.precision) {
    ValueMagnitudes seen;
    bool observed = false;
    if (options.precision->range_guard) {
      ONNXKIT_ASSIGN_OR_RETURN(observed, ObserveMagnitudes(loaded, options, &seen, &verifier, &result));
    }
    infer::Engine after(*model);
    after.Run();
    result.precision.emplace();
    ONNXKIT_RETURN_IF_ERROR(ConvertPrecision(*model, to, *options.precision, after.States(), resolver.get(),
                                             observed ? &seen : nullptr, &*result.precision));
    for (const std::string& w : result.precision->warnings) result.warnings.push_back(w);
    if (!result.precision->range_guard.nodes.empty()) {
      result.warnings.push_back(RangeGuardWarning(result.precision->range_guard, result.verify_inputs));
    }
  }
  if (options.dry_run) return result;
  result.model = ir::ToProto(std::move(model));
  if (options.inline_external_data) {
    ONNXKIT_ASSIGN_OR_RETURN(InlineReport inlined,
                             InlineExternalData(result.model, resolver.get(), options.max_inline_bytes));
    result.inlined = inlined;
  }
  if (!options.verify) return result;
  if (verifier == nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(verifier, Verifier::Create(loaded, options.verify_options));
  }
  result.verify_inputs = verifier->input_description();
  ONNXKIT_ASSIGN_OR_RETURN(VerifyResult r, verifier->Check(result.model));
  result.verified = r.ok;
  result.verification = std::move(r);
  return result;
}

}  // namespace onnxkit::passes::convert
