// Renderers of check results: compiler-style text, JSON, and SARIF 2.1.0
// (for code-scanning dashboards). All output is deterministic: results in
// the order given, diagnostics in the order found, no timestamps.
//
// Text, one line per diagnostic, then a summary:
//   model.onnx: error[E0300 ssa-unique-outputs]: graph 'main' › node 'conv1' (Conv): output 'y' is ...
//     hint: every value must have exactly one producer (static single assignment)
//   model.onnx: note: node rules (E04xx) were skipped: the graph structure is invalid
//   checked 3 files: 1 invalid, 1 refused, 1 valid (2 errors, 1 warning)
#ifndef ONNXKIT_CHECKER_REPORT_H_
#define ONNXKIT_CHECKER_REPORT_H_

#include <string>
#include <vector>

#include "checker/checker.h"

namespace onnxkit::checker {

// Totals over several files.
struct CheckSummary {
  int files = 0;
  int valid = 0;
  int invalid = 0;
  int refused = 0;
  int errors = 0;
  int warnings = 0;
};
CheckSummary Summarize(const std::vector<CheckResult>& results);

// "checked 3 files: 1 invalid, 1 refused, 1 valid (2 errors, 1 warning)".
std::string SummaryLine(const CheckSummary& summary);

struct TextOptions {
  // Only error diagnostics (with their hints); no warnings, no notes, and
  // the summary line only when some file is not valid.
  bool quiet = false;
};

// Human-readable report. Control bytes in names and paths are escaped.
std::string RenderText(const std::vector<CheckResult>& results, const TextOptions& options = {});

// One JSON object:
//   {"version": 1,
//    "files": [{"path", "status": "valid"|"invalid"|"refused", "errors", "warnings", "truncated",
//               "diagnostics": [{"code", "rule", "severity", "location", "message",
//                                "hint" (string or null), "byte_offset" (int or null)}],
//               "notes": [string]}],
//    "summary": {"files", "valid", "invalid", "refused", "errors", "warnings"}}
std::string RenderJson(const std::vector<CheckResult>& results);

// A SARIF 2.1.0 log with one run: tool.driver (name "onnxkit", every rule
// with id = code, name, shortDescription, defaultConfiguration.level) and
// one result per diagnostic (ruleId, ruleIndex, level, message.text, a
// physicalLocation with the file as artifactLocation.uri and, when known,
// region.byteOffset, and a logicalLocation whose fullyQualifiedName is the
// diagnostic's location).
std::string RenderSarif(const std::vector<CheckResult>& results);

// The rule table for `check --list-rules`: code, name, kind, summary.
std::string RenderRuleList();

}  // namespace onnxkit::checker

#endif  // ONNXKIT_CHECKER_REPORT_H_
