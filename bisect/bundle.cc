// The reproducer bundle: model.onnx, test_data_set_0/ (inputs from the
// golden run and, where the golden run computed them and no strategy changed
// weights or attributes, expected outputs; for a mismatch against reference
// files, those files' values), repro.sh and report.json.
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "bisect/bisect.h"
#include "bisect/candidate.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/model_io.h"
#include "runner/convert.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;

std::string BackendFlag(runner::Backend b) { return b == runner::Backend::kCpu ? "cpu" : "reference"; }

std::string ReportJson(const BisectOptions& options, const BisectOutcome& o) {
  const ReduceResult& r = o.result;
  JsonWriter w;
  w.BeginObject();
  w.KeyString("model", options.model_path);
  w.KeyString("oracle", o.oracle);
  w.KeyBool("reproduces", o.reproduces);
  w.KeyString("sample", o.sample);
  w.KeyInt("samples_tried", o.samples_tried);
  w.KeyInt("oracle_calls", r.calls);
  w.KeyInt("invalid_candidates", r.invalid);
  w.KeyDouble("seconds", r.seconds);
  w.KeyInt("nodes_before", r.nodes_before);
  w.KeyInt("nodes_after", r.nodes_after);
  w.KeyBool("one_minimal", r.one_minimal);
  w.KeyBool("budget_hit", r.budget_hit);
  w.KeyInt("rounds", r.rounds);
  w.KeyString("detail", r.detail);
  w.Key("strategies");
  w.BeginArray();
  for (const StrategyEffect& e : r.effects) {
    w.BeginObject();
    w.KeyString("name", e.name);
    w.KeyInt("calls", e.calls);
    w.KeyInt("accepted", e.accepted);
    w.KeyInt("nodes_before", e.nodes_before);
    w.KeyInt("nodes_after", e.nodes_after);
    w.KeyInt("nodes_removed", e.nodes_removed);
    w.KeyDouble("seconds", e.seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("nodes");
  w.BeginArray();
  if (r.model.graph) {
    for (const pb::NodeProto& n : r.model.graph->node) {
      w.BeginObject();
      w.KeyString("name", n.name);
      w.KeyString("op_type", n.op_type);
      w.EndObject();
    }
  }
  w.EndArray();
  w.EndObject();
  return w.Take() + "\n";
}

}  // namespace

std::string ShellBinary(const std::string& binary) {
  // Inside double quotes only \, ", $ and ` are special.
  std::string escaped;
  for (char c : binary) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') escaped += '\\';
    escaped += c;
  }
  return absl::StrCat("\"${ONNXKIT:-", escaped, "}\"");
}

std::string ReproCommand(const BisectOptions& options) {
  const OracleOptions& o = options.oracle;
  std::string bin = ShellBinary(options.onnxkit_binary);
  std::string model = "\"$here/model.onnx\"";
  std::string inputs = "--inputs \"$here/test_data_set_0\"";
  switch (o.kind) {
    case OracleKind::kCheckFails:
      return absl::StrCat(bin, " check --full ", model, o.pattern.empty() ? "" : "  # expect " + o.pattern);
    case OracleKind::kRunFails:
    case OracleKind::kNan:
      return absl::StrCat(bin, " run ", model, " ", inputs, " --backend ", BackendFlag(o.a_backend));
    case OracleKind::kMismatch: {
      std::string tolerances = absl::StrCat(o.atol ? absl::StrCat(" --atol ", *o.atol) : "",
                                            o.rtol ? absl::StrCat(" --rtol ", *o.rtol) : "");
      if (!o.reference_dir.empty()) {
        // The bundle's test_data_set_0 holds the reference outputs.
        return absl::StrCat(bin, " compare --a ", model, " --a-backend ", BackendFlag(o.a_backend),
                            " --reference \"$here/test_data_set_0\"", tolerances);
      }
      return absl::StrCat(bin, " compare --a ", model, " --b ", model, " --a-backend ",
                          BackendFlag(o.a_backend), " --b-backend ", BackendFlag(o.b_backend), " ", inputs,
                          tolerances);
    }
    case OracleKind::kCommand: {
      std::string cmd = o.command;
      if (cmd.find("{model}") != std::string::npos) return absl::StrReplaceAll(cmd, {{"{model}", model}});
      return absl::StrCat(cmd, " ", model);
    }
  }
  return "";
}

absl::Status WriteBundle(const BisectOptions& options, const BisectOutcome& outcome,
                         const GoldenStore& golden, const Oracle& oracle, const fs::path& base_dir) {
  const fs::path& dir = options.output_dir;
  std::error_code ec;
  fs::create_directories(dir / "test_data_set_0", ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  // Tensors of an earlier bundle in the same folder would be read as this one's.
  for (const fs::directory_entry& e : fs::directory_iterator(dir / "test_data_set_0", ec)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("input_", 0) == 0 || name.rfind("output_", 0) == 0) && e.path().extension() == ".pb") {
      fs::remove(e.path(), ec);
    }
  }
  // An --optimize bundle's models, were the folder one.
  for (const char* stale : {"before.onnx", "after.onnx"}) fs::remove(dir / stale, ec);
  const bool against_files =
      options.oracle.kind == OracleKind::kMismatch && !options.oracle.reference_dir.empty();
  pb::ModelProto model = outcome.result.model;
  if (against_files && model.graph) {
    // Only outputs with a reference value were judged; `compare --reference`
    // needs a file for every output, so the others go.
    std::vector<pb::ValueInfoProto> judged;
    for (const auto& out : model.graph->output) {
      if (oracle.Expected(out.name) != nullptr) judged.push_back(out);
    }
    if (!judged.empty()) model.graph->output = std::move(judged);
  }
  ONNXKIT_RETURN_IF_ERROR(io::SaveModel(model, base_dir, dir / "model.onnx"));
  auto feeds = GoldenFeeds(model, golden);
  if (feeds.ok()) {
    for (size_t i = 0; i < feeds->size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(dir / "test_data_set_0" / absl::StrCat("input_", i, ".pb"),
                                                      runner::ValueToPbBytes((*feeds)[i].second, (*feeds)[i].first)));
    }
  }
  // Zeroed weights or dropped attributes change what the reduced model
  // computes: the original's values are then no expected outputs of it.
  bool values_changed = false;
  for (const StrategyEffect& e : outcome.result.effects) {
    values_changed =
        values_changed || ((e.name == "initializers" || e.name == "attributes") && e.accepted > 0);
  }
  if (against_files && model.graph) {
    // The reference files' values, for the outputs that remain (unchanged
    // weights or not: these are what the failure is judged against).
    for (size_t i = 0; i < model.graph->output.size(); ++i) {
      const std::string& name = model.graph->output[i].name;
      const runner::RtValue* v = oracle.Expected(name);
      if (v == nullptr) break;
      ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(
          dir / "test_data_set_0" / absl::StrCat("output_", i, ".pb"), runner::ValueToPbBytes(*v, name)));
    }
  } else if (model.graph && options.oracle.kind != OracleKind::kMismatch && !values_changed) {
    // Expected outputs: the reference backend's values (not for a mismatch,
    // where which side is right is the question).
    bool all = true;
    for (const auto& out : model.graph->output) all = all && golden.Has(out.name);
    for (size_t i = 0; all && i < model.graph->output.size(); ++i) {
      const std::string& name = model.graph->output[i].name;
      auto v = golden.Load(name);
      if (!v.ok()) break;
      ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(dir / "test_data_set_0" / absl::StrCat("output_", i, ".pb"),
                                                      runner::ValueToPbBytes(*v, name)));
    }
  }
  std::string script = absl::StrCat("#!/bin/sh\n# Reproduces: ", outcome.oracle, "\n# ", absl::StrReplaceAll(outcome.result.detail.substr(0, 200), {{"\n", " "}}),
                                    "\nhere=$(cd \"$(dirname \"$0\")\" && pwd)\n", ReproCommand(options), "\n");
  absl::StrReplaceAll({{"\n# \n", "\n"}}, &script);
  fs::path repro = dir / "repro.sh";
  ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(repro, script));
  chmod(repro.c_str(), 0755);
  return io::WriteFileAtomically(dir / "report.json", ReportJson(options, outcome));
}

}  // namespace onnxkit::bisect
