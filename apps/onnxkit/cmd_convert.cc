// `onnxkit convert MODEL --opset N -o OUT.onnx`: move the ai.onnx opset up
// or down, list every node that blocks it, prove the result by execution,
// write it atomically.
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/onnxkit/commands.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/model_io.h"
#include "passes/convert/convert.h"

namespace onnxkit::app {
namespace {

struct ConvertFlags {
  std::string model;
  std::string output;
  int64_t opset = 0;
  int64_t ml_opset = 0;
  int64_t ir_version = 0;
  bool dry_run = false;
  bool no_verify = false;
  runner::InputSpec inputs;
  double atol = 1e-4;
  double rtol = 1e-3;
  bool json = false;
  int64_t external_data = -1;
  bool quiet = false;
};

void WriteJson(const ConvertFlags& f, const passes::convert::ConvertResult& r, bool written) {
  JsonWriter w;
  w.BeginObject();
  w.KeyString("model", f.model);
  w.KeyString("output", f.output);
  w.KeyBool("written", written);
  w.KeyInt("source_opset", r.source_opset);
  w.KeyInt("target_opset", r.target_opset);
  w.KeyInt("source_ml_opset", r.source_ml_opset);
  w.KeyInt("target_ml_opset", r.target_ml_opset);
  w.KeyInt("ir_version_before", r.ir_before);
  w.KeyInt("ir_version_after", r.ir_after);
  w.KeyInt("nodes", r.nodes_converted);
  w.Key("steps");
  w.BeginObject();
  for (const auto& [step, n] : r.steps) w.KeyInt(step, n);
  w.EndObject();
  w.Key("blockers");
  w.BeginArray();
  for (const auto& b : r.blockers) {
    w.BeginObject();
    w.KeyString("graph", b.graph);
    w.KeyString("node", b.node);
    w.KeyString("reason", b.reason);
    w.EndObject();
  }
  w.EndArray();
  w.Key("warnings");
  w.BeginArray();
  for (const std::string& s : r.warnings) w.String(s);
  w.EndArray();
  w.Key("verification");
  if (!r.verification) {
    w.Null();
  } else {
    w.BeginObject();
    w.KeyBool("ok", r.verification->ok);
    w.KeyString("inputs", r.verify_inputs);
    w.KeyString("summary", r.verification->summary);
    w.EndObject();
  }
  w.EndObject();
  std::cout << w.Take();
}

// "opset 13 -> 17, ai.onnx.ml 5 -> 3" (the parts that apply).
std::string Change(const passes::convert::ConvertResult& r) {
  std::string s;
  if (r.source_opset != 0) s = absl::StrCat("opset ", r.source_opset, " -> ", r.target_opset);
  if (r.target_ml_opset != r.source_ml_opset) {
    absl::StrAppend(&s, s.empty() ? "" : ", ", "ai.onnx.ml ", r.source_ml_opset, " -> ", r.target_ml_opset);
  }
  return s;
}

void PrintHuman(const ConvertFlags& f, const passes::convert::ConvertResult& r, bool written) {
  for (const std::string& s : r.warnings) std::cerr << "warning: " << s << "\n";
  for (const auto& b : r.blockers) std::cout << "blocked: " << b.graph << " " << b.node << ": " << b.reason << "\n";
  if (f.quiet && written) return;
  for (const auto& [step, n] : r.steps) std::cout << absl::StrCat("  ", step, ": ", n, "\n");
  if (r.verification) {
    std::cout << "verification (" << r.verify_inputs << "): " << r.verification->summary << "\n";
  }
  if (written) {
    std::cout << absl::StrCat("wrote ", f.output, ": ", Change(r), ", IR ", r.ir_before, " -> ", r.ir_after, "\n");
  } else if (!r.blockers.empty()) {
    std::cout << absl::StrCat("conversion (", Change(r), ") is impossible: ", r.blockers.size(),
                              " blocking node(s); nothing written\n");
  } else if (f.dry_run) {
    std::cout << absl::StrCat("dry run: ", Change(r),
                              " is possible; nothing written\n");
  } else {
    std::cout << "nothing written: the converted model's outputs differ from the original's\n";
  }
}

absl::StatusOr<int> RunConvert(const ConvertFlags& f) {
  if (f.model.empty()) return UsageError("convert needs MODEL");
  if (f.output.empty() && !f.dry_run) return UsageError("convert needs -o OUT.onnx (or --dry-run)");
  if (f.opset < passes::convert::kMinTargetOpset || f.opset > passes::convert::kMaxTargetOpset) {
    return UsageError(absl::StrCat("--opset must be in ", passes::convert::kMinTargetOpset, "..",
                                   passes::convert::kMaxTargetOpset));
  }
  if (f.ml_opset != 0 &&
      (f.ml_opset < passes::convert::kMinTargetMlOpset || f.ml_opset > passes::convert::kMaxTargetMlOpset)) {
    return UsageError(absl::StrCat("--ml-opset must be in ", passes::convert::kMinTargetMlOpset, "..",
                                   passes::convert::kMaxTargetMlOpset));
  }
  if (f.ir_version != 0 && (f.ir_version < 3 || f.ir_version > 11)) {
    return UsageError("--ir-version must be in 3..11");
  }
  passes::convert::ConvertOptions options;
  options.target_opset = f.opset;
  if (f.ml_opset != 0) options.target_ml_opset = f.ml_opset;
  if (f.ir_version > 0) options.ir_version = f.ir_version;
  options.dry_run = f.dry_run;
  options.verify = !f.no_verify;
  options.verify_options.inputs = f.inputs;
  options.verify_options.atol = f.atol;
  options.verify_options.rtol = f.rtol;
  auto loaded = io::LoadModel(f.model);
  if (!loaded.ok()) return loaded.status();
  auto result = passes::convert::Convert(*loaded, options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument) {
      return absl::FailedPreconditionError(absl::StrCat(f.model, ": ", result.status().message()));
    }
    return AnnotateStatus(result.status(), f.model);
  }
  bool ok = result->blockers.empty() && (f.dry_run || !options.verify || result->verified);
  bool written = false;
  if (ok && !f.dry_run) {
    io::SaveOptions save;
    save.external_data_threshold = f.external_data;
    ONNXKIT_RETURN_IF_ERROR(io::SaveModel(result->model, loaded->base_dir, f.output, save));
    written = true;
  }
  if (f.json) {
    WriteJson(f, *result, written);
  } else {
    PrintHuman(f, *result, written);
  }
  return ok ? kExitOk : kExitNo;
}

}  // namespace

void RegisterConvert(CLI::App& app, Action& action) {
  auto f = std::make_shared<ConvertFlags>();
  CLI::App* sub = app.add_subcommand(
      "convert",
      "Convert the ai.onnx opset up or down (7..28); prove the result by running both models. Exit codes: 0 "
      "written (or, with --dry-run, possible), 1 conversion impossible (every blocking node listed) or the "
      "outputs differ (nothing written), 2 usage, 3 model unreadable or refused, or the original cannot run for "
      "verification, 4 internal error.");
  sub->add_option("model", f->model, "Model file (.onnx)");
  sub->add_option("-o,--output", f->output, "Where to write the converted model (may equal MODEL)");
  sub->add_option("--opset", f->opset, "Target ai.onnx opset (7..28)")->required();
  sub->add_option("--ml-opset", f->ml_opset,
                  "Target ai.onnx.ml opset (1..5; default: ai.onnx.ml nodes stay as they are)");
  sub->add_option("--ir-version", f->ir_version, "IR version of the result (default: what the target opset needs)");
  sub->add_flag("--dry-run", f->dry_run, "List every node that blocks the conversion; write nothing");
  sub->add_flag("--no-verify", f->no_verify, "Write without running both models");
  AddVerificationFlags(sub, &f->inputs, &f->atol, &f->rtol);
  sub->add_option("--input-shape", f->inputs.shapes, "NAME=DIMS for symbolic input dims of random inputs");
  sub->add_flag("--json", f->json, "Print one JSON object (steps per op, blockers, verification)");
  sub->add_option("--external-data", f->external_data,
                  "Move tensors of at least this many bytes to OUT.onnx.data (-1: keep where they are)");
  sub->add_flag("-q,--quiet", f->quiet, "Print nothing on success");
  sub->callback([f, &action] { action = [f] { return RunConvert(*f); }; });
}

}  // namespace onnxkit::app
