// `onnxkit check FILE...`: validates models (checker/) and prints a report
// as text, JSON or SARIF on stdout.
//
// Exit codes: 0 every file valid (warnings allowed unless --werror); 1 some
// file invalid (a file that is not a parseable ONNX model included); 2 usage
// error; 3 some file unreadable or refused by policy or limits (missing,
// unsafe external data, too large). 3 wins over 1: a refusal means the input
// could not be judged.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/onnxkit/commands.h"
#include "checker/checker.h"
#include "checker/report.h"

namespace onnxkit::app {
namespace {

struct CheckCommandOptions {
  std::vector<std::string> files;
  bool full = false;
  bool json = false;
  bool sarif = false;
  int max_errors = 0;
  bool quiet = false;
  bool werror = false;
  bool strict_custom = false;
  bool list_rules = false;
};

absl::StatusOr<int> RunCheck(const CheckCommandOptions& o) {
  if (o.list_rules) {
    std::cout << checker::RenderRuleList();
    return kExitOk;
  }
  if (o.files.empty()) return UsageError("check: give at least one model file (or --list-rules)");
  checker::CheckOptions options;
  options.full = o.full;
  options.strict_custom = o.strict_custom;
  options.max_errors = o.max_errors;
  options.werror = o.werror;
  std::vector<checker::CheckResult> results;
  for (const std::string& file : o.files) results.push_back(checker::CheckFile(file, options));
  if (o.json) {
    std::cout << checker::RenderJson(results);
  } else if (o.sarif) {
    std::cout << checker::RenderSarif(results);
  } else {
    checker::TextOptions text;
    text.quiet = o.quiet;
    std::cout << checker::RenderText(results, text);
  }
  const checker::CheckSummary summary = checker::Summarize(results);
  if (summary.refused > 0) return kExitInput;
  if (summary.invalid > 0) return kExitNo;
  return kExitOk;
}

}  // namespace

void RegisterCheck(CLI::App& app, Action& action) {
  auto opts = std::make_shared<CheckCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "Validate models: structure, operators, attributes, types, tensors and external data, without "
      "crashing on broken or hostile files. Exit codes: 0 all valid, 1 some model invalid, 2 usage, "
      "3 some file unreadable or refused (3 wins over 1).");
  sub->add_option("files", opts->files, "Model files (.onnx)");
  sub->add_flag("--full", opts->full, "Also run type and shape inference through the whole graph");
  CLI::Option* json = sub->add_flag("--json", opts->json, "Print a JSON report");
  CLI::Option* sarif = sub->add_flag("--sarif", opts->sarif, "Print a SARIF 2.1.0 log");
  json->excludes(sarif);
  sub->add_option("--max-errors", opts->max_errors, "Stop checking a file after N errors (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("-q,--quiet", opts->quiet, "Print only errors, and the summary only when a file fails");
  sub->add_flag("--werror", opts->werror, "Treat warnings as errors");
  sub->add_flag("--strict-custom", opts->strict_custom,
                "Treat ops of custom domains (which onnxkit cannot check) as errors");
  sub->add_flag("--list-rules", opts->list_rules, "Print every rule (code, name, kind, summary) and exit");
  sub->callback([opts, &action] { action = [opts] { return RunCheck(*opts); }; });
}

}  // namespace onnxkit::app
