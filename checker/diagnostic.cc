// The rule table, generated at compile time from checker/rules.def.
#include "checker/diagnostic.h"

#include <array>

namespace onnxkit::checker {
namespace {

constexpr std::array<Rule, rules::kRuleCount> kRules = {{
#define ONNXKIT_RULE(code, name, kind, summary) Rule{#code, name, RuleKind::kind, summary},
#include "checker/rules.def"
#undef ONNXKIT_RULE
}};

// The table is the single source of truth; codes and names must be unique.
constexpr bool UniqueCodesAndNames() {
  for (size_t i = 0; i < kRules.size(); ++i) {
    for (size_t j = i + 1; j < kRules.size(); ++j) {
      if (kRules[i].code == kRules[j].code || kRules[i].name == kRules[j].name) return false;
    }
  }
  return true;
}
static_assert(UniqueCodesAndNames(), "rules.def: a code or name appears twice");

}  // namespace

std::span<const Rule> AllRules() { return kRules; }

const Rule* FindRule(std::string_view code_or_name) {
  for (const Rule& rule : kRules) {
    if (rule.code == code_or_name || rule.name == code_or_name) return &rule;
  }
  return nullptr;
}

const Rule& RuleFor(rules::RuleId id) { return kRules[static_cast<size_t>(id)]; }

std::string_view SeverityName(Severity severity) {
  return severity == Severity::kError ? "error" : "warning";
}

std::string_view RuleKindName(RuleKind kind) {
  switch (kind) {
    case RuleKind::kInvalid:
      return "invalid";
    case RuleKind::kRefused:
      return "refused";
    case RuleKind::kWarning:
      return "warning";
  }
  return "";
}

}  // namespace onnxkit::checker
