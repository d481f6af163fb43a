// `onnxkit optimize MODEL -o OUT.onnx`: run a pass pipeline (fold,
// eliminate, fuse), prove the result by execution, write it atomically.
#include <filesystem>
#include <iostream>
#include <memory>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/onnxkit/commands.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/model_io.h"
#include "passes/optimize.h"
#include "passes/registry.h"

namespace onnxkit::app {
namespace {

namespace fs = std::filesystem;

struct OptimizeFlags {
  std::string model;
  std::string output;
  std::string passes = "default";
  std::vector<std::string> skip;
  bool list_passes = false;
  std::vector<std::string> input_shapes;
  int64_t fold_limit = 1 << 16;
  bool keep_initializer_inputs = false;
  bool no_verify = false;
  bool verify_each = false;
  runner::InputSpec inputs;
  double atol = 1e-4;
  double rtol = 1e-3;
  double timeout = 0;  // seconds per verification run (0: none)
  std::string verify_backend = "reference";
  int64_t bisect_limit = -1;
  int max_iterations = 8;
  bool print_rewrites = false;
  bool json = false;
  int64_t external_data = -1;
  bool quiet = false;
};

// Bytes of the model file plus the external data files next to it that
// the model references.
int64_t FileBytes(const fs::path& model, const pb::ModelProto* proto) {
  std::error_code ec;
  int64_t total = static_cast<int64_t>(fs::file_size(model, ec));
  if (ec) return 0;
  std::set<std::string> locations;
  std::function<void(const pb::GraphProto&)> walk = [&](const pb::GraphProto& g) {
    for (const pb::TensorProto& t : g.initializer) {
      for (const auto& e : t.external_data) {
        if (e.key == "location") locations.insert(e.value);
      }
    }
    for (const pb::NodeProto& n : g.node) {
      for (const pb::AttributeProto& a : n.attribute) {
        if (a.g) walk(*a.g);
        for (const pb::GraphProto& sub : a.graphs) walk(sub);
      }
    }
  };
  if (proto != nullptr && proto->graph) walk(*proto->graph);
  for (const std::string& loc : locations) {
    auto size = fs::file_size(model.parent_path() / loc, ec);
    if (!ec) total += static_cast<int64_t>(size);
  }
  return total;
}

// Peak resident memory of this process in MiB (VmHWM: counted from the
// process's own start, unlike getrusage, which inherits the parent's peak
// across exec).
double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

void ListPasses(bool json) {
  if (json) {
    JsonWriter w;
    w.BeginArray();
    for (const passes::PassInfo& p : passes::AllPasses()) {
      w.BeginObject();
      w.KeyString("name", p.name);
      w.KeyBool("default", p.in_default);
      w.KeyBool("needs_shapes", p.needs_shapes);
      w.KeyBool("may_change_numerics", p.may_change_numerics);
      w.KeyString("description", p.description);
      w.EndObject();
    }
    w.EndArray();
    std::cout << w.Take();
    return;
  }
  for (const passes::PassInfo& p : passes::AllPasses()) {
    std::cout << absl::StrFormat("%-22s %-8s %s\n", Sv(p.name), p.in_default ? "default" : "", Sv(p.description));
  }
}

void WriteHistogram(JsonWriter& w, std::string_view key, const std::map<std::string, int64_t>& h) {
  w.Key(key);
  w.BeginObject();
  for (const auto& [op, n] : h) w.KeyInt(op, n);
  w.EndObject();
}

void WriteJson(const OptimizeFlags& f, const passes::OptimizeResult& r, int64_t bytes_before, int64_t bytes_after,
               bool written) {
  JsonWriter w;
  w.BeginObject();
  w.KeyString("model", f.model);
  w.KeyString("output", f.output);
  w.KeyBool("written", written);
  w.Key("pinned_inputs");
  w.BeginArray();
  for (const std::string& p : r.pinned) w.String(p);
  w.EndArray();
  w.KeyInt("iterations", r.report.iterations);
  w.KeyBool("fixed_point", r.report.fixed_point);
  w.KeyInt("rewrites", static_cast<int64_t>(r.report.rewrites.size()));
  w.KeyBool("bisect_limit_reached", r.report.limit_reached);
  w.Key("passes");
  w.BeginArray();
  for (const passes::PassStats& p : r.report.passes) {
    w.BeginObject();
    w.KeyString("name", p.name);
    w.KeyInt("runs", p.runs);
    w.KeyInt("rewrites", p.rewrites);
    w.KeyInt("nodes_removed", p.nodes_removed);
    w.KeyInt("nodes_added", p.nodes_added);
    w.KeyDouble("seconds", p.seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("failures");
  w.BeginArray();
  for (const passes::RewriteFailure& x : r.report.failures) {
    w.BeginObject();
    w.KeyString("pass", x.pass);
    w.KeyInt("rewrite", x.number);
    w.KeyString("graph", x.graph);
    w.KeyString("node", x.node);
    w.KeyString("message", x.message);
    w.EndObject();
  }
  w.EndArray();
  if (f.print_rewrites) {
    w.Key("rewrite_list");
    w.BeginArray();
    for (const passes::RewriteRecord& x : r.report.rewrites) {
      w.BeginObject();
      w.KeyInt("number", x.number);
      w.KeyString("pass", x.pass);
      w.KeyString("graph", x.graph);
      w.KeyString("node", x.node);
      w.KeyString("what", x.what);
      w.EndObject();
    }
    w.EndArray();
  }
  w.KeyInt("nodes_before", r.nodes_before);
  w.KeyInt("nodes_after", r.nodes_after);
  WriteHistogram(w, "ops_before", r.ops_before);
  WriteHistogram(w, "ops_after", r.ops_after);
  w.KeyInt("file_bytes_before", bytes_before);
  w.KeyInt("file_bytes_after", bytes_after);
  w.KeyDouble("peak_rss_mb", PeakRssMb());
  w.Key("verification");
  if (!r.verification) {
    w.Null();
  } else {
    w.BeginObject();
    w.KeyBool("ok", r.verification->ok);
    w.KeyString("inputs", r.verify_inputs);
    w.KeyString("backend", f.verify_backend);
    w.KeyDouble("atol", f.atol);
    w.KeyDouble("rtol", f.rtol);
    w.KeyString("summary", r.verification->summary);
    w.Key("outputs");
    w.BeginArray();
    for (const passes::OutputCheck& o : r.verification->outputs) {
      w.BeginObject();
      w.KeyString("name", o.name);
      w.KeyBool("within_tolerance", o.metrics.comparable && o.metrics.within_tolerance);
      w.KeyDouble("max_abs", o.metrics.max_abs);
      w.KeyDouble("max_rel", o.metrics.max_rel);
      w.KeyDouble("cosine", o.metrics.cosine);
      w.KeyDouble("sqnr_db", o.metrics.sqnr_db);
      w.EndObject();
    }
    w.EndArray();
    w.KeyInt("runs", r.verify_runs);
    w.EndObject();
  }
  w.Key("culprit");
  if (!r.culprit) {
    w.Null();
  } else {
    w.BeginObject();
    w.KeyString("pass", r.culprit->pass);
    w.KeyInt("rewrite", r.culprit->rewrite);
    w.KeyString("graph", r.culprit->record.graph);
    w.KeyString("node", r.culprit->record.node);
    w.KeyString("what", r.culprit->record.what);
    w.KeyString("summary", r.culprit->summary);
    w.EndObject();
  }
  w.EndObject();
  std::cout << w.Take();
}

void PrintHuman(const OptimizeFlags& f, const passes::OptimizeResult& r, int64_t bytes_before, int64_t bytes_after,
                bool written) {
  std::ostream& out = std::cout;
  if (f.print_rewrites) {
    for (const passes::RewriteRecord& x : r.report.rewrites) {
      out << absl::StrCat("#", x.number, " ", x.pass, " ", x.graph, " ", x.node, ": ", x.what, "\n");
    }
  }
  if (f.quiet && written) return;
  for (const std::string& p : r.pinned) out << "pinned input " << p << "\n";
  out << absl::StrFormat("%-22s %5s %9s %8s %8s %9s\n", "pass", "runs", "rewrites", "removed", "added", "ms");
  for (const passes::PassStats& p : r.report.passes) {
    out << absl::StrFormat("%-22s %5d %9d %8d %8d %9.1f\n", p.name, p.runs, p.rewrites, p.nodes_removed,
                           p.nodes_added, p.seconds * 1000);
  }
  for (const passes::RewriteFailure& x : r.report.failures) {
    out << absl::StrCat("warning: pass ", x.pass,
                        x.number ? absl::StrCat(" rewrite #", x.number, " at ", x.graph, " ", x.node) : "",
                        " failed and was undone: ", x.message, "\n");
  }
  if (r.verification) {
    out << absl::StrCat("verification (", r.verify_inputs, ", ", f.verify_backend, " backend): ",
                        r.verification->summary, "\n");
  } else {
    out << "verification: skipped (--no-verify)\n";
  }
  if (r.culprit) {
    out << absl::StrCat("first rewrite that moves the outputs: #", r.culprit->rewrite, " ", r.culprit->pass, " ",
                        r.culprit->record.graph, " ", r.culprit->record.node, ": ", r.culprit->record.what,
                        " (rerun with --skip ", r.culprit->pass, " or --bisect-limit ", r.culprit->rewrite - 1, ")\n");
  }
  if (written) {
    out << absl::StrFormat("wrote %s: %d -> %d nodes, %d -> %d bytes, %d rewrites in %d iterations\n", f.output,
                           r.nodes_before, r.nodes_after, bytes_before, bytes_after,
                           static_cast<int64_t>(r.report.rewrites.size()), r.report.iterations);
  } else {
    out << "nothing written: the optimized model's outputs differ from the original's\n";
  }
}

absl::StatusOr<int> RunOptimize(const OptimizeFlags& f) {
  if (f.list_passes) {
    ListPasses(f.json);
    return kExitOk;
  }
  if (f.model.empty() || f.output.empty()) return UsageError("optimize needs MODEL and -o OUT.onnx");
  if (f.fold_limit < 0) return UsageError("--fold-limit must not be negative");
  if (f.bisect_limit < -1) return UsageError("--bisect-limit must be -1 (all) or at least 0");
  if (f.max_iterations < 1) return UsageError("--max-iterations must be at least 1");
  passes::OptimizeOptions options;
  auto pipeline = passes::ParsePipeline(f.passes);
  if (!pipeline.ok()) return UsageError(StdSv(pipeline.status().message()));
  auto without = passes::WithoutPasses(*pipeline, f.skip);
  if (!without.ok()) return UsageError(StdSv(without.status().message()));
  options.pipeline = *without;
  for (const std::string& flag : f.input_shapes) {
    auto parsed = passes::ParseInputShape(flag);
    if (!parsed.ok()) return UsageError(StdSv(parsed.status().message()));
    options.input_shapes.push_back(*parsed);
  }
  options.manager.pass.fold_limit_bytes = f.fold_limit;
  options.manager.bisect_limit = f.bisect_limit;
  options.manager.max_iterations = f.max_iterations;
  options.keep_initializer_inputs = f.keep_initializer_inputs;
  options.verify = !f.no_verify;
  options.verify_each = f.verify_each;
  options.verify_options.inputs = f.inputs;
  options.verify_options.atol = f.atol;
  options.verify_options.rtol = f.rtol;
  options.verify_options.timeout_seconds = f.timeout;
  options.verify_options.backend = f.verify_backend == "cpu" ? runner::Backend::kCpu : runner::Backend::kReference;
  for (const auto& [name, dims] : options.input_shapes) {
    std::vector<std::string> parts;
    for (int64_t d : dims) parts.push_back(absl::StrCat(d));
    options.verify_options.inputs.shapes.push_back(absl::StrCat(name, "=", absl::StrJoin(parts, "x")));
  }

  auto loaded = io::LoadModel(f.model);
  if (!loaded.ok()) return loaded.status();
  int64_t bytes_before = FileBytes(f.model, &loaded->proto);
  auto result = passes::Optimize(*loaded, options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument &&
        absl::StartsWith(result.status().message(), "--input-shape")) {
      return UsageError(StdSv(result.status().message()));
    }
    return AnnotateStatus(result.status(), f.model);
  }
  bool ok = !options.verify || result->verified;
  int64_t bytes_after = 0;
  if (ok) {
    io::SaveOptions save;
    save.external_data_threshold = f.external_data;
    ONNXKIT_RETURN_IF_ERROR(io::SaveModel(result->model, loaded->base_dir, f.output, save));
    bytes_after = FileBytes(f.output, &result->model);
  }
  if (f.json) {
    WriteJson(f, *result, bytes_before, bytes_after, ok);
  } else {
    PrintHuman(f, *result, bytes_before, bytes_after, ok);
  }
  return ok ? kExitOk : kExitNo;
}

}  // namespace

void RegisterOptimize(CLI::App& app, Action& action) {
  auto f = std::make_shared<OptimizeFlags>();
  CLI::App* sub = app.add_subcommand(
      "optimize",
      "Fold, eliminate and fuse; prove the result by running both models. Exit codes: 0 written, 1 the optimized "
      "model's outputs differ (nothing written; the first rewrite to blame is named), 2 usage, 3 model "
      "unreadable or refused, or the original cannot run for verification, 4 internal error.");
  sub->add_option("model", f->model, "Model file (.onnx)");
  sub->add_option("-o,--output", f->output, "Where to write the optimized model (may equal MODEL)");
  sub->add_option("--passes", f->passes,
                  "Comma-separated pipeline, e.g. fold,dce,fuse-conv-bn ('default' stands for the default "
                  "pipeline; see --list-passes)");
  sub->add_option("--skip", f->skip, "Leave this pass out of the pipeline; repeatable");
  sub->add_flag("--list-passes", f->list_passes, "Print every pass (name, default or not, description) and exit");
  sub->add_option("--input-shape", f->input_shapes,
                  "NAME=DIMS (1x3x224x224): pin the dims of a main-graph input in the written model; repeatable");
  sub->add_option("--fold-limit", f->fold_limit,
                  "fold: a node folds when its outputs take at most max(2 x its inputs' bytes, this many bytes) "
                  "(default 65536)");
  sub->add_flag("--keep-initializer-inputs", f->keep_initializer_inputs,
                "IR < 4 models: treat initializers listed as graph inputs as feedable inputs, not constants");
  sub->add_flag("--no-verify", f->no_verify, "Write without running both models");
  CLI::Option* no_verify = sub->get_option("--no-verify");
  sub->add_flag("--verify-each", f->verify_each,
                "Verify after every pass that changed the model; stop at the first that moves the outputs")
      ->excludes(no_verify);
  AddVerificationFlags(sub, &f->inputs, &f->atol, &f->rtol, &f->timeout);
  sub->add_option("--verify-backend", f->verify_backend, "Backend that runs both models: reference (default) or cpu")
      ->check(CLI::IsMember({"reference", "cpu"}));
  sub->add_option("--bisect-limit", f->bisect_limit, "Apply only the first N rewrites (-1: all)");
  sub->add_option("--max-iterations", f->max_iterations, "Runs of the whole pipeline at most (default 8)");
  sub->add_flag("--print-rewrites", f->print_rewrites, "List every rewrite: number, pass, graph, node, what");
  sub->add_flag("--json", f->json, "Print one JSON object (passes, histograms, sizes, verification, culprit)");
  sub->add_option("--external-data", f->external_data,
                  "Move tensors of at least this many bytes to OUT.onnx.data (-1: keep where they are)");
  sub->add_flag("-q,--quiet", f->quiet, "Print nothing on success");
  sub->callback([f, &action] { action = [f] { return RunOptimize(*f); }; });
}

}  // namespace onnxkit::app
