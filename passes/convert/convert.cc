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

namespace onnxkit::passes::convert {
namespace {

bool IsOnnxDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Converts every function importing ai.onnx; sets its import to `to`.
absl::Status ConvertFunctions(ir::Model& model, int64_t to, io::ExternalDataResolver* resolver, WalkStats& stats) {
  for (pb::FunctionProto& f : model.functions()) {
    pb::OperatorSetIdProto* onnx = nullptr;
    for (pb::OperatorSetIdProto& o : f.opset_import) {
      if (IsOnnxDomain(o.domain) && onnx == nullptr) onnx = &o;
    }
    if (onnx == nullptr) continue;
    auto body = ir::FunctionBodyFromProto(f);
    std::string path = absl::StrCat("function '", f.name, "'");
    if (!body.ok()) {
      stats.blockers->push_back({path, "", absl::StrCat("malformed body: ", body.status().message())});
      continue;
    }
    ConvertContext ctx(onnx->version, nullptr, resolver);
    ONNXKIT_RETURN_IF_ERROR(ConvertGraph(**body, path, onnx->version, to, ctx, stats));
    ir::FunctionBodyToProto(**body, &f);
    onnx->version = to;
  }
  return absl::OkStatus();
}

// IR < 4 requires every initializer of the main graph to be a graph input.
absl::Status ListInitializersAsInputs(ir::Model& model) {
  std::vector<ir::Value*> unlisted;
  for (ir::Value* v : model.graph().initializers()) {
    if (!v->is_graph_input()) unlisted.push_back(v);
  }
  for (ir::Value* v : unlisted) ONNXKIT_RETURN_IF_ERROR(model.graph().AddInput(v));
  return absl::OkStatus();
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
  return 11;
}

absl::StatusOr<ConvertResult> Convert(const io::LoadedModel& loaded, const ConvertOptions& options) {
  if (options.target_opset != 0 && (options.target_opset < kMinTargetOpset || options.target_opset > kMaxTargetOpset)) {
    return absl::InvalidArgumentError(absl::StrCat("--opset ", options.target_opset, " is outside ", kMinTargetOpset,
                                                   "..", kMaxTargetOpset));
  }
  ConvertResult result;
  result.ir_before = loaded.proto.ir_version;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> model, ir::FromProto(loaded.proto));
  std::optional<int64_t> from = model->OpsetVersion("");
  if (!from) return absl::InvalidArgumentError("the model imports no ai.onnx opset");
  result.source_opset = *from;
  const int64_t to = options.target_opset != 0 ? options.target_opset : *from;
  result.target_opset = to;

  std::unique_ptr<io::ExternalDataResolver> resolver;
  if (!loaded.base_dir.empty()) resolver = std::make_unique<io::ExternalDataResolver>(loaded.base_dir);
  infer::Engine engine(*model);
  engine.Run();
  std::map<std::string, infer::ValueState> states = engine.States();
  std::set<std::string> foreign;
  WalkStats stats{&result.blockers, &result.steps, &foreign};
  for (const pb::FunctionProto& f : model->functions()) stats.local_functions.insert(absl::StrCat(f.domain, "::", f.name));
  if (to != *from) {
    ConvertContext ctx(*from, &states, resolver.get());
    ONNXKIT_RETURN_IF_ERROR(ConvertGraph(model->graph(), "main", *from, to, ctx, stats));
    ONNXKIT_RETURN_IF_ERROR(ConvertFunctions(*model, to, resolver.get(), stats));
  }
  result.nodes_converted = stats.nodes;
  for (const std::string& op : foreign) {
    result.warnings.push_back(absl::StrCat("op ", op, " is not ai.onnx: kept as it is"));
  }
  model->SetOpsetVersion("", to);
  // Going up never lowers the IR version; going down sets the one the
  // target opset needs (older runtimes refuse newer IR versions).
  int64_t needed = IrVersionForOpset(to);
  if (to >= *from) needed = std::max(needed, result.ir_before);
  if (to == *from) needed = result.ir_before;
  // bfloat16 tensors need IR 4.
  if (options.precision && options.precision->target == pb::kBfloat16) needed = std::max<int64_t>(needed, 4);
  result.ir_after = options.ir_version.value_or(needed);
  model->set_ir_version(result.ir_after);
  if (result.ir_after < 4) ONNXKIT_RETURN_IF_ERROR(ListInitializersAsInputs(*model));
  if (!result.blockers.empty()) return result;
  if (options.precision) {
    infer::Engine after(*model);
    after.Run();
    result.precision.emplace();
    ONNXKIT_RETURN_IF_ERROR(ConvertPrecision(*model, to, *options.precision, after.States(), resolver.get(),
                                             &*result.precision));
    for (const std::string& w : result.precision->warnings) result.warnings.push_back(w);
  }
  if (options.dry_run) return result;
  result.model = ir::ToProto(std::move(model));
  if (options.inline_external_data) {
    ONNXKIT_ASSIGN_OR_RETURN(InlineReport inlined,
                             InlineExternalData(result.model, resolver.get(), options.max_inline_bytes));
    result.inlined = inlined;
  }
  if (!options.verify) return result;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Verifier> verifier, Verifier::Create(loaded, options.verify_options));
  result.verify_inputs = verifier->input_description();
  ONNXKIT_ASSIGN_OR_RETURN(VerifyResult r, verifier->Check(result.model));
  result.verified = r.ok;
  result.verification = std::move(r);
  return result;
}

}  // namespace onnxkit::passes::convert
