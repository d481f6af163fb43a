// Shared pieces of the rule groups: the diagnostic sink, labels for
// locations, function keys, opset resolution and the subgraph walk helpers.
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checker/rules/rules.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"

namespace onnxkit::checker::internal {

// --- Sink ------------------------------------------------------------------

Sink::Sink(const CheckOptions& options, CheckResult* result) : options_(options), result_(result) {}

void Sink::Report(rules::RuleId id, std::string location, std::string message, std::string hint,
                  int64_t byte_offset) {
  if (stopped_) return;
  const Rule& rule = RuleFor(id);
  Severity severity = Severity::kError;
  if (rule.kind == RuleKind::kWarning) {
    const bool promoted = options_.werror || (id == rules::kE0409 && options_.strict_custom);
    severity = promoted ? Severity::kError : Severity::kWarning;
  }
  // The limits stop the check at the first diagnostic past them, so that
  // `truncated` means something was left out (a file with exactly N errors
  // under --max-errors N is complete).
  if (severity == Severity::kError && options_.max_errors > 0 && result_->errors >= options_.max_errors) {
    if (rule.kind == RuleKind::kRefused) result_->refused = true;
    Stop(absl::StrCat("stopped after ", result_->errors, result_->errors == 1 ? " error" : " errors",
                      " (--max-errors ", options_.max_errors, "); the rest of the file was not checked"));
    return;
  }
  if (result_->diagnostics.size() >= static_cast<size_t>(kMaxDiagnostics)) {
    if (rule.kind == RuleKind::kRefused) result_->refused = true;
    Stop(absl::StrCat("stopped after ", kMaxDiagnostics, " diagnostics (the limit per file)"));
    return;
  }
  Diagnostic d;
  d.rule = &rule;
  d.severity = severity;
  d.file = result_->path;
  d.location = std::move(location);
  d.message = std::move(message);
  d.hint = std::move(hint);
  d.byte_offset = byte_offset;
  result_->diagnostics.push_back(std::move(d));
  if (rule.kind == RuleKind::kRefused) result_->refused = true;
  if (rule.kind != RuleKind::kWarning) ++hard_errors_;
  if (severity == Severity::kWarning) {
    ++result_->warnings;
  } else {
    ++result_->errors;
  }
}

void Sink::Stop(std::string note) {
  stopped_ = true;
  result_->truncated = true;
  Note(std::move(note));
}

void Sink::Note(std::string note) { result_->notes.push_back(std::move(note)); }

// --- Functions and opsets --------------------------------------------------

FunctionKey KeyOf(const pb::FunctionProto& function) {
  return {std::string(ops::CanonicalDomain(function.domain)), function.name, function.overload};
}

FunctionKey KeyOf(const pb::NodeProto& node) {
  return {std::string(ops::CanonicalDomain(node.domain)), node.op_type, node.overload};
}

std::optional<int64_t> OpsetFor(const ModelFacts& facts, const pb::FunctionProto* function,
                                std::string_view domain) {
  const std::string_view canonical = ops::CanonicalDomain(domain);
  if (function != nullptr) {
    for (const pb::OperatorSetIdProto& opset : function->opset_import) {
      if (ops::CanonicalDomain(opset.domain) == canonical) return opset.version;
    }
  }
  auto it = facts.opsets.find(canonical);
  if (it == facts.opsets.end()) return std::nullopt;
  return it->second;
}

// --- Labels ----------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence starting at s[i]; 0 when invalid.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
  return n;
}

}  // namespace

std::string EscapeText(std::string_view s, bool escape_quotes, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (i >= max_bytes) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8Length(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    const bool escape = c < 0x20 || c >= 0x7f || (escape_quotes && (c == '\'' || c == '\\'));
    if (escape) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

std::string Quote(std::string_view s) { return absl::StrCat("'", EscapeText(s, true, 120), "'"); }

std::string GraphLabel(const pb::GraphProto& graph) {
  return graph.name.empty() ? std::string("graph (unnamed)") : absl::StrCat("graph ", Quote(graph.name));
}

std::string NodeLabel(const pb::NodeProto& node, size_t index) {
  std::string op = node.domain.empty() || node.domain == ops::kOnnxDomain
                       ? node.op_type
                       : absl::StrCat(node.domain, "::", node.op_type);
  // The op is shown as written, but quoted only when it holds odd bytes.
  std::string shown_op = Quote(op);
  shown_op = shown_op.substr(1, shown_op.size() - 2);
  if (node.name.empty()) return absl::StrCat("node #", index, " (", shown_op, ")");
  return absl::StrCat("node ", Quote(node.name), " (", shown_op, ")");
}

std::string FunctionLabel(const pb::FunctionProto& function) {
  std::string id =
      function.domain.empty() ? function.name : absl::StrCat(function.domain, "::", function.name);
  if (!function.overload.empty()) absl::StrAppend(&id, ":", function.overload);
  return absl::StrCat("function ", Quote(id));
}

std::string Join(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  return absl::StrCat(Sv(a), " \xe2\x80\xba ", Sv(b));
}

std::string ElemTypeLabel(int32_t elem_type) {
  std::string_view name = DataTypeName(elem_type);
  if (name.empty()) return absl::StrCat("data_type ", elem_type);
  return std::string(name);
}

// --- Subgraphs -------------------------------------------------------------

std::vector<SubgraphRef> Subgraphs(const pb::NodeProto& node) {
  std::vector<SubgraphRef> refs;
  for (const pb::AttributeProto& attr : node.attribute) {
    if (attr.g) refs.push_back({attr.g.get(), absl::StrCat("attribute ", Quote(attr.name))});
    for (size_t i = 0; i < attr.graphs.size(); ++i) {
      refs.push_back({&attr.graphs[i], absl::StrCat("attribute ", Quote(attr.name), "[", i, "]")});
    }
  }
  return refs;
}

std::vector<std::string> OuterReferences(const pb::GraphProto& graph, int depth) {
  std::set<std::string_view> defined;
  for (const pb::ValueInfoProto& v : graph.input) defined.insert(v.name);
  for (const pb::TensorProto& t : graph.initializer) defined.insert(t.name);
  for (const pb::SparseTensorProto& s : graph.sparse_initializer) {
    if (s.values) defined.insert(s.values->name);
  }
  for (const pb::NodeProto& node : graph.node) {
    for (const std::string& out : node.output) defined.insert(out);
  }
  std::vector<std::string> refs;
  std::set<std::string> seen;
  auto use = [&](const std::string& name) {
    if (name.empty() || defined.count(name) > 0 || !seen.insert(name).second) return;
    refs.push_back(name);
  };
  for (const pb::NodeProto& node : graph.node) {
    for (const std::string& in : node.input) use(in);
    if (depth + 1 > limits::kMaxGraphDepth) continue;
    for (const SubgraphRef& sub : Subgraphs(node)) {
      for (const std::string& name : OuterReferences(*sub.graph, depth + 1)) use(name);
    }
  }
  for (const pb::ValueInfoProto& v : graph.output) use(v.name);
  return refs;
}

}  // namespace onnxkit::checker::internal
