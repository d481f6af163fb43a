// Diagnostics of the checker: what a rule found, where, and how bad it is.
//
// Every diagnostic names a rule of checker/rules.def (stable code and
// kebab-case name). Locations are paths from the model down to the element:
// "graph 'main' › node 'conv1' (Conv) › attribute 'kernel_shape'".
#ifndef ONNXKIT_CHECKER_DIAGNOSTIC_H_
#define ONNXKIT_CHECKER_DIAGNOSTIC_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace onnxkit::checker {

enum class RuleKind { kInvalid, kRefused, kWarning };

// One line of rules.def.
struct Rule {
  std::string_view code;  // "E0300"
  std::string_view name;  // "ssa-unique-outputs"
  RuleKind kind;
  std::string_view summary;  // one line
};

// Every rule, in rules.def order.
std::span<const Rule> AllRules();
// The rule with this code or name; null if none.
const Rule* FindRule(std::string_view code_or_name);

// Indexes into AllRules(), generated from rules.def: rules::kE0300 is
// AllRules()[rules::kE0300], "ssa-unique-outputs".
namespace rules {
enum RuleId : int {
#define ONNXKIT_RULE(code, name, kind, summary) k##code,
#include "checker/rules.def"
#undef ONNXKIT_RULE
  kRuleCount
};
}  // namespace rules

// The rule with this id (always valid: ids come from the table).
const Rule& RuleFor(rules::RuleId id);

// "invalid", "refused", "warning".
std::string_view RuleKindName(RuleKind kind);

enum class Severity { kError, kWarning };

// "error", "warning".
std::string_view SeverityName(Severity severity);

struct Diagnostic {
  const Rule* rule = nullptr;
  Severity severity = Severity::kError;
  std::string file;          // the model file
  std::string location;      // "graph 'main' › node 'conv1' (Conv)"; empty: the whole file
  std::string message;       // lowercase, names the element, expected vs actual
  std::string hint;          // optional: how to fix it
  int64_t byte_offset = -1;  // for container errors, when known
};

}  // namespace onnxkit::checker

#endif  // ONNXKIT_CHECKER_DIAGNOSTIC_H_
