// Text, JSON and SARIF renderings of check results.
#include "checker/report.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "checker/rules/rules.h"
#include "lib/base/json_writer.h"
#include "lib/base/strings.h"

namespace onnxkit::checker {
namespace {

// Control bytes and invalid UTF-8 escaped (a name or path holding a newline
// must not forge report lines); quotes kept.
std::string Clean(std::string_view s) { return internal::EscapeText(s, /*escape_quotes=*/false); }

std::string Plural(int n, std::string_view word) { return absl::StrCat(n, " ", Sv(word), n == 1 ? "" : "s"); }

void DiagnosticLine(const std::string& path, const Diagnostic& d, std::string* out) {
  absl::StrAppend(out, Clean(path), ": ", Sv(SeverityName(d.severity)), "[", Sv(d.rule->code), " ",
                  Sv(d.rule->name), "]: ");
  if (!d.location.empty()) absl::StrAppend(out, Clean(d.location), ": ");
  absl::StrAppend(out, Clean(d.message), "\n");
  if (!d.hint.empty()) absl::StrAppend(out, "  hint: ", Clean(d.hint), "\n");
}

// A path as a URI reference: unreserved bytes and '/' kept, the rest
// percent-encoded.
std::string PathToUri(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

CheckSummary Summarize(const std::vector<CheckResult>& results) {
  CheckSummary s;
  for (const CheckResult& r : results) {
    ++s.files;
    switch (r.status()) {
      case FileStatus::kValid:
        ++s.valid;
        break;
      case FileStatus::kInvalid:
        ++s.invalid;
        break;
      case FileStatus::kRefused:
        ++s.refused;
        break;
    }
    s.errors += r.errors;
    s.warnings += r.warnings;
  }
  return s;
}

std::string SummaryLine(const CheckSummary& s) {
  std::string parts;
  auto add = [&](int n, std::string_view what) {
    if (n == 0) return;
    absl::StrAppend(&parts, parts.empty() ? "" : ", ", n, " ", Sv(what));
  };
  add(s.invalid, "invalid");
  add(s.refused, "refused");
  add(s.valid, "valid");
  return absl::StrCat("checked ", Plural(s.files, "file"), parts.empty() ? "" : ": ", parts, " (",
                      Plural(s.errors, "error"), ", ", Plural(s.warnings, "warning"), ")");
}

std::string RenderText(const std::vector<CheckResult>& results, const TextOptions& options) {
  std::string out;
  for (const CheckResult& r : results) {
    for (const Diagnostic& d : r.diagnostics) {
      if (options.quiet && d.severity != Severity::kError) continue;
      DiagnosticLine(r.path, d, &out);
    }
    if (options.quiet) continue;
    for (const std::string& note : r.notes)
      absl::StrAppend(&out, Clean(r.path), ": note: ", Clean(note), "\n");
  }
  const CheckSummary summary = Summarize(results);
  if (!options.quiet || summary.valid != summary.files) absl::StrAppend(&out, SummaryLine(summary), "\n");
  return out;
}

std::string RenderJson(const std::vector<CheckResult>& results) {
  JsonWriter w;
  w.BeginObject();
  w.KeyInt("version", 1);
  w.Key("files");
  w.BeginArray();
  for (const CheckResult& r : results) {
    w.BeginObject();
    w.KeyString("path", r.path);
    w.KeyString("status", FileStatusName(r.status()));
    w.KeyInt("errors", r.errors);
    w.KeyInt("warnings", r.warnings);
    w.KeyBool("truncated", r.truncated);
    w.Key("diagnostics");
    w.BeginArray();
    for (const Diagnostic& d : r.diagnostics) {
      w.BeginObject();
      w.KeyString("code", d.rule->code);
      w.KeyString("rule", d.rule->name);
      w.KeyString("severity", SeverityName(d.severity));
      w.KeyString("location", d.location);
      w.KeyString("message", d.message);
      w.Key("hint");
      d.hint.empty() ? w.Null() : w.String(d.hint);
      w.Key("byte_offset");
      d.byte_offset < 0 ? w.Null() : w.Int(d.byte_offset);
      w.EndObject();
    }
    w.EndArray();
    w.Key("notes");
    w.BeginArray();
    for (const std::string& note : r.notes) w.String(note);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  const CheckSummary s = Summarize(results);
  w.Key("summary");
  w.BeginObject();
  w.KeyInt("files", s.files);
  w.KeyInt("valid", s.valid);
  w.KeyInt("invalid", s.invalid);
  w.KeyInt("refused", s.refused);
  w.KeyInt("errors", s.errors);
  w.KeyInt("warnings", s.warnings);
  w.EndObject();
  w.EndObject();
  return w.Take();
}

std::string RenderSarif(const std::vector<CheckResult>& results) {
  JsonWriter w;
  w.BeginObject();
  w.KeyString("$schema", "https://json.schemastore.org/sarif-2.1.0.json");
  w.KeyString("version", "2.1.0");
  w.Key("runs");
  w.BeginArray();
  w.BeginObject();
  w.Key("tool");
  w.BeginObject();
  w.Key("driver");
  w.BeginObject();
  w.KeyString("name", "onnxkit");
  w.Key("rules");
  w.BeginArray();
  for (const Rule& rule : AllRules()) {
    w.BeginObject();
    w.KeyString("id", rule.code);
    w.KeyString("name", rule.name);
    w.Key("shortDescription");
    w.BeginObject();
    w.KeyString("text", rule.summary);
    w.EndObject();
    w.Key("defaultConfiguration");
    w.BeginObject();
    w.KeyString("level", rule.kind == RuleKind::kWarning ? "warning" : "error");
    w.EndObject();
    w.Key("properties");
    w.BeginObject();
    w.KeyString("kind", RuleKindName(rule.kind));
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();  // driver
  w.EndObject();  // tool
  w.Key("results");
  w.BeginArray();
  for (const CheckResult& r : results) {
    for (const Diagnostic& d : r.diagnostics) {
      w.BeginObject();
      w.KeyString("ruleId", d.rule->code);
      w.KeyInt("ruleIndex", d.rule - AllRules().data());
      w.KeyString("level", SeverityName(d.severity));
      w.Key("message");
      w.BeginObject();
      w.KeyString("text", d.hint.empty() ? d.message : absl::StrCat(d.message, " (hint: ", d.hint, ")"));
      w.EndObject();
      w.Key("locations");
      w.BeginArray();
      w.BeginObject();
      w.Key("physicalLocation");
      w.BeginObject();
      w.Key("artifactLocation");
      w.BeginObject();
      w.KeyString("uri", PathToUri(r.path));
      w.EndObject();
      if (d.byte_offset >= 0) {
        w.Key("region");
        w.BeginObject();
        w.KeyInt("byteOffset", d.byte_offset);
        w.EndObject();
      }
      w.EndObject();  // physicalLocation
      if (!d.location.empty()) {
        w.Key("logicalLocations");
        w.BeginArray();
        w.BeginObject();
        w.KeyString("fullyQualifiedName", d.location);
        w.EndObject();
        w.EndArray();
      }
      w.EndObject();  // location
      w.EndArray();
      w.EndObject();  // result
    }
  }
  w.EndArray();
  w.EndObject();  // run
  w.EndArray();
  w.EndObject();
  return w.Take();
}

std::string RenderRuleList() {
  std::string out;
  for (const Rule& rule : AllRules()) {
    absl::StrAppend(&out, Sv(rule.code), "  ", Sv(rule.name),
                    std::string(28 - std::min<size_t>(rule.name.size(), 27), ' '),
                    Sv(RuleKindName(rule.kind)), std::string(9 - RuleKindName(rule.kind).size(), ' '),
                    Sv(rule.summary), "\n");
  }
  return out;
}

}  // namespace onnxkit::checker
