// `onnxkit convert MODEL [--opset N] [--float16|--bfloat16] [--inline] -o
// OUT.onnx`: move the ai.onnx opset up or down (listing every node that
// blocks it), float32 to float16 or bfloat16, external data inline or out;
// prove the result by execution, write it atomically.
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

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
  double timeout = 0;  // seconds per verification run (0: none)
  bool json = false;
  int64_t external_data = -1;
  bool quiet = false;
  bool float16 = false;
  bool bfloat16 = false;
  bool keep_io_types = true;
  std::vector<std::string> keep_float32;
  bool range_guard = true;
  bool inline_data = false;
  double min_sqnr = 0;
  bool tolerances_given = false;  // --atol or --rtol on the command line
  bool min_sqnr_given = false;
};

// Verification defaults of precision conversion: a float16 result rounds
// every weight and activation to 11 significant bits, a bfloat16 one to 8.
struct PrecisionTolerance {
  double atol, rtol, min_sqnr_db;
};
constexpr PrecisionTolerance kFloat16Tolerance{5e-2, 5e-2, 30};
constexpr PrecisionTolerance kBfloat16Tolerance{2e-1, 1e-1, 20};

int64_t FileBytes(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

void WritePrecisionJson(JsonWriter& w, const passes::convert::PrecisionReport& p, int32_t target, bool keep_io) {
  w.BeginObject();
  w.KeyString("target", passes::convert::PrecisionName(target));
  w.KeyBool("keep_io_types", keep_io);
  w.KeyInt("nodes_converted", p.nodes_converted);
  w.Key("kept");
  w.BeginObject();
  for (const auto& [reason, n] : p.kept) w.KeyInt(reason, n);
  w.EndObject();
  w.KeyInt("casts_inserted", p.casts_inserted);
  w.KeyInt("casts_retargeted", p.casts_retargeted);
  w.KeyInt("tensors_converted", p.tensors_converted);
  w.KeyInt("tensor_bytes_before", p.tensor_bytes_before);
  w.KeyInt("tensor_bytes_after", p.tensor_bytes_after);
  w.Key("clamped");
  w.BeginArray();
  for (const auto& [name, n] : p.clamped) {
    w.BeginObject();
    w.KeyString("tensor", name);
    w.KeyInt("values", n);
    w.EndObject();
  }
  w.EndArray();
  w.Key("range_guard");
  w.BeginObject();
  w.KeyBool("applied", p.range_guard.applied);
  w.KeyDouble("limit", p.range_guard.limits.high);
  w.KeyDouble("low_limit", p.range_guard.limits.low);
  w.Key("nodes");
  w.BeginArray();
  for (const std::string& n : p.range_guard.nodes) w.String(n);
  w.EndArray();
  w.EndObject();
  w.EndObject();
}

int32_t TargetOf(const ConvertFlags& f) { return f.bfloat16 ? pb::kBfloat16 : pb::kFloat16; }

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
  w.KeyInt("file_bytes_before", FileBytes(f.model));
  w.KeyInt("file_bytes_after", written ? FileBytes(f.output) : -1);
  w.Key("precision");
  if (r.precision) {
    WritePrecisionJson(w, *r.precision, TargetOf(f), f.keep_io_types);
  } else {
    w.Null();
  }
  w.Key("inlined");
  if (r.inlined) {
    w.BeginObject();
    w.KeyInt("tensors", r.inlined->tensors);
    w.KeyInt("bytes", r.inlined->bytes);
    w.EndObject();
  } else {
    w.Null();
  }
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
    w.Key("outputs");
    w.BeginArray();
    for (const passes::OutputCheck& o : r.verification->outputs) {
      w.BeginObject();
      w.KeyString("name", o.name);
      w.KeyBool("comparable", o.metrics.comparable);
      w.KeyDouble("max_abs", o.metrics.max_abs);
      w.KeyDouble("max_rel", o.metrics.max_rel);
      w.KeyDouble("sqnr_db", o.metrics.sqnr_db);  // null when equal (infinite)
      w.KeyInt("out_of_tolerance", o.metrics.out_of_tolerance);
      w.KeyInt("nan_inf_mismatches", o.metrics.nan_inf_mismatches);
      w.EndObject();
    }
    w.EndArray();
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
  if (r.precision) {
    const passes::convert::PrecisionReport& p = *r.precision;
    std::cout << absl::StrCat(passes::convert::PrecisionName(TargetOf(f)), ": ", p.nodes_converted,
                              " node(s) converted, ", p.casts_inserted, " Cast(s) inserted, ", p.casts_retargeted,
                              " retargeted, ", p.tensors_converted, " tensor(s) converted (", p.tensor_bytes_before,
                              " -> ", p.tensor_bytes_after, " bytes)\n");
    for (const auto& [reason, n] : p.kept) std::cout << absl::StrCat("  kept float32: ", n, " node(s): ", reason, "\n");
  }
  if (r.inlined) {
    std::cout << absl::StrCat("inlined ", r.inlined->tensors, " tensor(s), ", r.inlined->bytes, " bytes\n");
  }
  if (r.verification) {
    std::cout << "verification (" << r.verify_inputs << "): " << r.verification->summary << "\n";
    if (r.precision) {
      for (const passes::OutputCheck& o : r.verification->outputs) {
        if (!o.metrics.comparable) continue;
        if (o.metrics.nan_inf_mismatches > 0) {
          std::cout << absl::StrCat("  output '", o.name, "': ", o.metrics.nan_inf_mismatches,
                                    " element(s) NaN or Inf where the original's are not (or the reverse)\n");
          continue;
        }
        std::cout << absl::StrCat("  output '", o.name, "': SQNR ", o.metrics.sqnr_db, " dB, max abs ",
                                  o.metrics.max_abs, "\n");
      }
    }
  }
  if (written) {
    std::cout << absl::StrCat("wrote ", f.output, ": ", Change(r), Change(r).empty() ? "" : ", ", "IR ", r.ir_before,
                              " -> ", r.ir_after);
    int64_t before = FileBytes(f.model), after = FileBytes(f.output);
    std::cout << absl::StrCat(", ", before, " -> ", after, " bytes\n");
  } else if (!r.blockers.empty()) {
    std::cout << absl::StrCat("conversion (", Change(r), ") is impossible: ", r.blockers.size(),
                              " blocking node(s); nothing written\n");
  } else if (f.dry_run) {
    std::cout << absl::StrCat("dry run: ", Change(r),
                              " is possible; nothing written\n");
  } else if (r.verification && !r.verification->error.empty()) {
    std::cout << "nothing written: the converted model does not run on the reference backend\n";
  } else {
    std::cout << "nothing written: the converted model's outputs differ from the original's\n";
  }
}

absl::StatusOr<int> RunConvert(const ConvertFlags& f) {
  if (f.model.empty()) return UsageError("convert needs MODEL");
  if (f.output.empty() && !f.dry_run) return UsageError("convert needs -o OUT.onnx (or --dry-run)");
  if (f.opset == 0 && f.ml_opset == 0 && !f.float16 && !f.bfloat16 && !f.inline_data && f.external_data < 0) {
    return UsageError(
        "convert needs at least one of --opset, --ml-opset, --float16, --bfloat16, --inline, --external-data");
  }
  if (f.float16 && f.bfloat16) return UsageError("--float16 and --bfloat16 exclude each other");
  if (f.inline_data && f.external_data >= 0) return UsageError("--inline and --external-data exclude each other");
  if (!f.float16 && !f.bfloat16 &&
      (!f.keep_float32.empty() || !f.keep_io_types || f.min_sqnr_given || !f.range_guard)) {
    return UsageError(
        "--keep-float32, --no-keep-io-types, --no-range-guard and --min-sqnr need --float16 or --bfloat16");
  }
  if (f.opset != 0 &&
      (f.opset < passes::convert::kMinTargetOpset || f.opset > passes::convert::kMaxTargetOpset)) {
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
  options.verify_options.timeout_seconds = f.timeout;
  options.inline_external_data = f.inline_data;
  if (f.float16 || f.bfloat16) {
    passes::convert::PrecisionOptions p;
    p.target = TargetOf(f);
    p.keep_io_types = f.keep_io_types;
    p.keep_float32 = f.keep_float32;
    p.range_guard = f.range_guard;
    options.precision = p;
    const PrecisionTolerance& t = f.bfloat16 ? kBfloat16Tolerance : kFloat16Tolerance;
    if (!f.tolerances_given) {
      options.verify_options.atol = t.atol;
      options.verify_options.rtol = t.rtol;
    }
    options.verify_options.min_sqnr_db = f.min_sqnr_given ? f.min_sqnr : t.min_sqnr_db;
  }
  auto loaded = io::LoadModel(f.model);
  if (!loaded.ok()) return loaded.status();
  auto result = passes::convert::Convert(*loaded, options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument && !IsUsageError(result.status())) {
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
      "Convert the ai.onnx opset up or down (7..28), the ai.onnx.ml opset (1..5), float32 to float16 or bfloat16, "
      "external data inline or "
      "out; prove the result by running both models. Exit codes: 0 written (or, with --dry-run, possible), 1 "
      "conversion impossible (every blocking node listed) or the outputs differ (nothing written), 2 usage, 3 "
      "model unreadable or refused (also: --inline past 2 GiB), or the original cannot run for verification, 4 "
      "internal error.");
  sub->add_option("model", f->model, "Model file (.onnx)");
  sub->add_option("-o,--output", f->output, "Where to write the converted model (may equal MODEL)");
  sub->add_option("--opset", f->opset, "Target ai.onnx opset (7..28; default: the model's)");
  sub->add_flag("--float16", f->float16,
                "Float32 weights and computation to float16 (verification then defaults to --atol 5e-2 --rtol 5e-2, "
                "SQNR >= 30 dB)");
  sub->add_flag("--bfloat16", f->bfloat16,
                "Float32 weights and computation to bfloat16 (verification then defaults to --atol 0.2 --rtol 0.1, "
                "SQNR >= 20 dB)");
  sub->add_flag("--keep-io-types,!--no-keep-io-types", f->keep_io_types,
                "Graph inputs and outputs stay float32 (default on)");
  sub->add_option("--keep-float32", f->keep_float32, "Op type or node name that stays float32; repeatable")
      ->allow_extra_args(false);
  sub->add_flag("--range-guard,!--no-range-guard", f->range_guard,
                "Run the original once on the verification inputs first and keep float32 every node whose float32 "
                "values pass half the target's range (float16: 32752) or lie all below its smallest normal value "
                "(float16: 6.1e-5); the kept nodes are listed in a warning (default on)");
  sub->add_option("--min-sqnr", f->min_sqnr,
                  "Verification floor of every float output's SQNR in dB (default 30 float16, 20 bfloat16)")
      ->check(Finite());
  sub->add_flag("--inline", f->inline_data, "Bring external data back into the .onnx file (refused past 2 GiB)");
  sub->add_option("--ml-opset", f->ml_opset,
                  "Target ai.onnx.ml opset (1..5; default: ai.onnx.ml nodes stay as they are)");
  sub->add_option("--ir-version", f->ir_version, "IR version of the result (default: what the target opset needs)");
  sub->add_flag("--dry-run", f->dry_run, "List every node that blocks the conversion; write nothing");
  sub->add_flag("--no-verify", f->no_verify, "Write without running both models");
  AddVerificationFlags(sub, &f->inputs, &f->atol, &f->rtol, &f->timeout, "--shape,--input-shape");
  sub->add_flag("--json", f->json, "Print one JSON object (steps per op, blockers, verification)");
  sub->add_option("--external-data", f->external_data,
                  "Move tensors of at least this many bytes to OUT.onnx.data (-1: keep where they are)");
  sub->add_flag("-q,--quiet", f->quiet, "Print nothing on success");
  sub->callback([f, sub, &action] {
    f->tolerances_given = sub->get_option("--atol")->count() > 0 || sub->get_option("--rtol")->count() > 0;
    f->min_sqnr_given = sub->get_option("--min-sqnr")->count() > 0;
    action = [f] { return RunConvert(*f); };
  });
}

}  // namespace onnxkit::app
