// `onnxkit bisect MODEL (--check-fails [CODE] | --run-fails [REGEX] | --nan |
// --mismatch | --command CMD | --optimize) -o DIR`: shrink a failing model to
// a minimal reproducer, or name the optimizer rewrite that breaks it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apps/onnxkit/commands.h"
#include "bisect/bisect.h"
#include "bisect/optimize_bisect.h"
#include "bisect/strategies.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "passes/registry.h"

namespace onnxkit::app {
namespace {

struct BisectFlags {
  std::string model;
  std::string output;
  std::optional<std::string> check_fails, run_fails;
  bool nan = false, mismatch = false, optimize = false;
  std::string command, fail_regex;
  std::string a_backend = "reference", b_backend = "cpu", reference;
  std::optional<double> atol, rtol;
  double timeout = 60;
  int jobs = 1;
  runner::InputSpec inputs;
  std::vector<std::string> input_dirs;
  std::vector<std::string> strategies;
  bool list_strategies = false;
  int64_t max_calls = 2000;
  double time_limit = 600;
  std::string passes = "default";
  std::vector<std::string> skip;
  bool json = false;
};

runner::Backend BackendOf(const std::string& s) { return s == "cpu" ? runner::Backend::kCpu : runner::Backend::kReference; }

void ListStrategies(bool json) {
  JsonWriter w;
  w.BeginArray();
  for (const bisect::StrategyInfo& s : bisect::AllStrategies()) {
    if (json) {
      w.BeginObject();
      w.KeyString("name", s.name);
      w.KeyBool("default", s.in_default);
      w.KeyString("description", s.description);
      w.EndObject();
    } else {
      std::cout << absl::StrFormat("%-14s %-8s %s\n", Sv(s.name), s.in_default ? "default" : "", Sv(s.description));
    }
  }
  w.EndArray();
  if (json) std::cout << w.Take() << "\n";
}

// This binary's path, for the repro.sh it writes ("onnxkit" when unknown).
std::string SelfBinary() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec || self.empty() ? std::string("onnxkit") : self.string();
}

absl::StatusOr<int> RunOptimizeMode(const BisectFlags& f) {
  passes::OptimizeOptions options;
  auto pipeline = passes::ParsePipeline(f.passes);
  if (!pipeline.ok()) return UsageError(StdSv(pipeline.status().message()));
  auto without = passes::WithoutPasses(*pipeline, f.skip);
  if (!without.ok()) return UsageError(StdSv(without.status().message()));
  options.pipeline = *without;
  if (f.input_dirs.size() > 1) return UsageError("--optimize takes one --inputs folder");
  options.verify_options.inputs = f.inputs;
  if (!f.input_dirs.empty()) options.verify_options.inputs.dir = f.input_dirs[0];
  if (f.atol) options.verify_options.atol = *f.atol;
  if (f.rtol) options.verify_options.rtol = *f.rtol;
  options.verify_options.backend = BackendOf(f.a_backend);
  std::string flags = absl::StrCat("--passes '", f.passes, "'");
  for (const std::string& s : f.skip) absl::StrAppend(&flags, " --skip '", s, "'");
  if (f.atol) absl::StrAppend(&flags, " --atol ", *f.atol);
  if (f.rtol) absl::StrAppend(&flags, " --rtol ", *f.rtol);
  if (f.a_backend != "reference") absl::StrAppend(&flags, " --verify-backend ", f.a_backend);
  auto r = bisect::BisectOptimize(f.model, options, f.output, SelfBinary(), flags);
  if (!r.ok()) return AnnotateStatus(r.status(), f.model);
  if (!r->culprit) {
    std::cerr << "onnxkit: the original is not interesting: the optimized model's outputs match\n";
    return kExitUsage;
  }
  const passes::Culprit& c = *r->culprit;
  if (f.json) {
    // The same document as the bundle's report.json, as without --optimize.
    std::ifstream in(std::filesystem::path(f.output) / "report.json");
    std::cout << in.rdbuf();
  } else {
    std::cout << absl::StrCat("first rewrite that moves the outputs: #", c.rewrite, " ", c.pass, " at ", c.record.node,
                              " (", c.record.what, ")\n", c.summary, "\n",
                              r->shrunk ? absl::StrCat("model.onnx: ", r->nodes_before, " -> ", r->nodes_after,
                                                       " nodes around the rewrite, still moved by the pipeline\n")
                                        : "model.onnx: after.onnx (no smaller model around the rewrite moves)\n",
                              "wrote ", f.output, "/{before,after,model}.onnx, ",
                              r->shrunk ? "test_data_set_0, " : "", "repro.sh, report.json\n");
  }
  return kExitOk;
}

absl::StatusOr<int> RunBisectCmd(const BisectFlags& f) {
  if (f.list_strategies) {
    ListStrategies(f.json);
    return kExitOk;
  }
  if (f.model.empty() || f.output.empty()) return UsageError("bisect needs MODEL and -o DIR");
  // The bundle's files must not replace the model being reduced.
  for (const char* name : {"model.onnx", "before.onnx", "after.onnx", "optimized.onnx"}) {
    std::error_code ec;
    if (std::filesystem::equivalent(f.model, std::filesystem::path(f.output) / name, ec)) {
      return UsageError(absl::StrCat("-o ", f.output, " would overwrite the model being reduced (", name,
                                     "): choose another folder"));
    }
  }
  int oracles = (f.check_fails ? 1 : 0) + (f.run_fails ? 1 : 0) + f.nan + f.mismatch + !f.command.empty() + f.optimize;
  if (oracles != 1) {
    return UsageError("choose exactly one of --check-fails, --run-fails, --nan, --mismatch, --command, --optimize");
  }
  if (f.jobs < 1 || f.timeout <= 0 || f.max_calls < 1 || !(f.time_limit > 0)) {
    return UsageError("-j, --timeout, --time-limit and --max-calls must be positive");
  }
  if (!f.fail_regex.empty() && f.command.empty()) return UsageError("--fail-regex needs --command");
  if (f.optimize) return RunOptimizeMode(f);
  auto parsed = bisect::ParseStrategies(f.strategies);
  if (!parsed.ok()) return UsageError(StdSv(parsed.status().message()));

  bisect::BisectOptions o;
  o.model_path = f.model;
  o.onnxkit_binary = SelfBinary();
  o.output_dir = f.output;
  o.inputs = f.inputs;
  o.input_dirs = f.input_dirs;
  o.reduce.strategies = f.strategies;
  o.reduce.max_calls = f.max_calls;
  o.reduce.time_limit_seconds = f.time_limit;
  o.reduce.jobs = f.jobs;
  o.reduce.progress = isatty(2) && !f.json;
  bisect::OracleOptions& oo = o.oracle;
  if (f.check_fails) oo = {bisect::OracleKind::kCheckFails, *f.check_fails};
  if (f.run_fails) oo = {bisect::OracleKind::kRunFails, *f.run_fails};
  if (f.nan) oo.kind = bisect::OracleKind::kNan;
  if (f.mismatch) oo.kind = bisect::OracleKind::kMismatch;
  if (!f.command.empty()) {
    oo.kind = bisect::OracleKind::kCommand;
    oo.command = f.command;
    oo.pattern = f.fail_regex;
  }
  oo.a_backend = BackendOf(f.a_backend);
  oo.b_backend = BackendOf(f.b_backend);
  oo.reference_dir = f.reference;
  oo.atol = f.atol;
  oo.rtol = f.rtol;
  oo.timeout_seconds = f.timeout;
  auto outcome = bisect::RunBisect(o);
  if (!outcome.ok()) {
    absl::StatusCode code = outcome.status().code();
    std::string_view msg = StdSv(outcome.status().message());
    if (code == absl::StatusCode::kInvalidArgument && (msg.find("--") == 0 || msg.find("input") != std::string::npos)) {
      return UsageError(msg);
    }
    return AnnotateStatus(outcome.status(), f.model);
  }
  if (!outcome->interesting) {
    std::cerr << "onnxkit: the original is not interesting (" << outcome->oracle << "): " << outcome->why << "\n";
    return kExitUsage;
  }
  const bisect::ReduceResult& r = outcome->result;
  if (f.json) {
    std::ifstream in(std::filesystem::path(f.output) / "report.json");
    std::cout << in.rdbuf();
  } else {
    if (outcome->samples_tried > 1) std::cout << "failing sample: " << outcome->sample << "\n";
    std::cout << absl::StrFormat("%s: %d -> %d nodes in %d oracle calls, %.2f s%s%s\n", outcome->oracle, r.nodes_before,
                                 r.nodes_after, r.calls, r.seconds, r.one_minimal ? " (1-minimal)" : "",
                                 outcome->reproduces ? "" : " (WARNING: the result no longer reproduces)");
    for (const bisect::StrategyEffect& e : r.effects) {
      std::cout << absl::StrFormat("  %-14s %4d calls %4d accepted %5d nodes removed\n", e.name, e.calls,
                                   e.accepted, e.nodes_removed);
    }
    std::cout << "wrote " << f.output << "/{model.onnx,test_data_set_0,repro.sh,report.json}\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterBisect(CLI::App& app, Action& action) {
  auto f = std::make_shared<BisectFlags>();
  CLI::App* sub = app.add_subcommand(
      "bisect",
      "Shrink a failing model to a minimal reproducer, or name the optimizer rewrite that breaks it. Exit codes: 0 "
      "reproducer written, 2 usage or the original is not interesting, 3 model unreadable, 4 internal error.");
  sub->add_option("model", f->model, "Model file (.onnx)");
  sub->add_option("-o,--output", f->output, "Folder for model.onnx, test_data_set_0/, repro.sh, report.json");
  sub->add_option("--check-fails", f->check_fails, "Interesting: check --full reports an error (with CODE)")
      ->expected(0, 1)->default_str("");
  sub->add_option("--run-fails", f->run_fails, "Interesting: the run fails (message matching REGEX); runs in a child")
      ->expected(0, 1)->default_str("");
  sub->add_flag("--nan", f->nan, "Interesting: a node makes NaN/Inf from finite inputs (the same tensor)");
  sub->add_flag("--mismatch", f->mismatch, "Interesting: --a-backend and --b-backend (or --reference) disagree");
  sub->add_option("--command", f->command, "Interesting: 'CMD {model}' exits non-zero (or matches --fail-regex)");
  sub->add_option("--fail-regex", f->fail_regex, "With --command: interesting when its output matches");
  sub->add_flag("--optimize", f->optimize, "Find the first optimizer rewrite that moves the outputs");
  sub->add_option("--passes", f->passes, "--optimize: pipeline (as optimize --passes)");
  sub->add_option("--skip", f->skip, "--optimize: leave this pass out; repeatable");
  sub->add_option("--a-backend", f->a_backend, "reference (default) or cpu")->check(CLI::IsMember({"reference", "cpu"}));
  sub->add_option("--b-backend", f->b_backend, "reference or cpu (default)")->check(CLI::IsMember({"reference", "cpu"}));
  sub->add_option("--reference", f->reference, "--mismatch: folder of expected output_<i>.pb of the original");
  sub->add_option("--atol", f->atol, "--mismatch: absolute tolerance (default by element type)")
      ->check(FiniteNonNegative());
  sub->add_option("--rtol", f->rtol, "--mismatch: relative tolerance (default by element type)")
      ->check(FiniteNonNegative());
  sub->add_option("--timeout", f->timeout, "Seconds per oracle call (default 60)")
      ->check(FiniteNonNegative());
  sub->add_option("-j,--jobs", f->jobs, "--command: candidates tested in parallel (default 1)");
  sub->add_option("--inputs", f->input_dirs,
                  "A test_data_set folder (input_<i>.pb in graph-input order), or a folder of test_data_set_* "
                  "folders; repeatable: the first sample on which the original fails is used");
  sub->add_option("--input", f->inputs.files, "NAME=FILE (.pb or .npy), or FILE.npz; repeatable");
  sub->add_flag("--random", f->inputs.random, "Seeded random inputs (the default when none are given)");
  sub->add_option("--seed", f->inputs.seed, "Seed of --random (default 0)");
  AddRangeFlag(sub, &f->inputs);
  sub->add_option("--shape", f->inputs.shapes, "NAME=1x3x224x224 for inputs with symbolic dims; repeatable");
  sub->add_option("--strategies", f->strategies, "Comma-separated strategies (see --list-strategies)");
  sub->add_flag("--list-strategies", f->list_strategies, "List the reduction strategies");
  sub->add_option("--max-calls", f->max_calls, "Oracle calls at most (default 2000)");
  sub->add_option("--time-limit", f->time_limit, "Seconds of reduction at most (default 600)")
      ->check(FiniteNonNegative());
  sub->add_flag("--json", f->json, "Print report.json on stdout");
  sub->callback([f, &action] { action = [f] { return RunBisectCmd(*f); }; });
}

}  // namespace onnxkit::app
