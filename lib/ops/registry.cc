// Operator schema lookups over the generated table (lib/ops/schema_table.inc,
// built from lib/ops/schemas.json by lib/ops/gen_schema_table.py). The table
// is sorted by (domain, name, since_version), so every version of one op is a
// contiguous run found by binary search.
#include "lib/ops/registry.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"

namespace onnxkit::ops {
namespace {

struct DomainInfo {
  std::string_view name;  // canonical spelling
  int64_t max_opset;
};

#include "lib/ops/schema_table.inc"

using OpKey = std::pair<std::string_view, std::string_view>;  // (domain, name)

OpKey KeyOf(const OpSchema& schema) { return {schema.domain(), schema.name()}; }

// Every version of `op` in the canonical `domain`, since_version ascending.
std::span<const OpSchema> Versions(std::string_view domain, std::string_view op) {
  const OpKey key(domain, op);
  const OpSchema* begin =
      std::lower_bound(std::begin(kSchemas), std::end(kSchemas), key,
                       [](const OpSchema& schema, const OpKey& k) { return KeyOf(schema) < k; });
  const OpSchema* end =
      std::upper_bound(begin, std::end(kSchemas), key,
                       [](const OpKey& k, const OpSchema& schema) { return k < KeyOf(schema); });
  return {begin, end};
}

const DomainInfo* FindDomain(std::string_view domain) {
  domain = CanonicalDomain(domain);
  for (const DomainInfo& info : kDomains) {
    if (info.name == domain) return &info;
  }
  return nullptr;
}

// The version in effect at `opset`: the largest since_version <= opset.
const OpSchema* VersionAt(std::span<const OpSchema> versions, int64_t opset) {
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->since_version() <= opset) return &*it;
  }
  return nullptr;
}

// Levenshtein distance, ignoring ASCII case.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      const size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

// The op of `domain` closest to `op` when it is close enough to be a likely
// typo (at most a third of the name differs); "" otherwise. Ties go to the
// first name in table order, so the answer is deterministic.
std::string_view ClosestOp(std::string_view domain, std::string_view op) {
  const size_t limit = std::max<size_t>(1, op.size() / 3);
  std::string_view best;
  size_t best_distance = limit + 1;
  for (const OpSchema& schema : kSchemas) {
    if (schema.domain() != domain || schema.name() == best) continue;
    const size_t distance = EditDistance(op, schema.name());
    if (distance < best_distance) {
      best = schema.name();
      best_distance = distance;
    }
  }
  return best;
}

std::string KnownDomainList() {
  std::string list;
  for (const DomainInfo& info : kDomains) {
    if (!list.empty()) list += ", ";
    absl::StrAppend(&list, Sv(info.name));
    if (info.name == kOnnxDomain) list += " (also written \"\")";
  }
  return list;
}

absl::Status UnknownOpError(std::string_view domain, std::string_view op) {
  std::string message = absl::StrCat("unknown op '", absl::CHexEscape(Sv(op)), "' in domain ", Sv(domain));
  for (const DomainInfo& other : kDomains) {
    if (other.name != domain && !Versions(other.name, op).empty()) {
      absl::StrAppend(&message, "; it is defined in domain ", Sv(other.name));
      return absl::NotFoundError(message);
    }
  }
  const std::string_view closest = ClosestOp(domain, op);
  if (!closest.empty()) absl::StrAppend(&message, "; did you mean '", Sv(closest), "'?");
  return absl::NotFoundError(message);
}

}  // namespace

std::string_view CanonicalDomain(std::string_view domain) { return domain.empty() ? kOnnxDomain : domain; }

bool IsKnownDomain(std::string_view domain) { return FindDomain(domain) != nullptr; }

std::vector<std::string_view> KnownDomains() {
  std::vector<std::string_view> domains;
  for (const DomainInfo& info : kDomains) domains.push_back(info.name);
  return domains;
}

int64_t MaxKnownOpset(std::string_view domain) {
  const DomainInfo* info = FindDomain(domain);
  return info == nullptr ? 0 : info->max_opset;
}

std::span<const OpSchema> AllSchemas() { return kSchemas; }

std::vector<const OpSchema*> SchemaVersions(std::string_view domain, std::string_view op) {
  std::vector<const OpSchema*> result;
  for (const OpSchema& schema : Versions(CanonicalDomain(domain), op)) result.push_back(&schema);
  return result;
}

const OpSchema* FindSchema(std::string_view domain, std::string_view op, int64_t opset) {
  const DomainInfo* info = FindDomain(domain);
  if (info == nullptr || opset < 1 || opset > info->max_opset) return nullptr;
  return VersionAt(Versions(info->name, op), opset);
}

absl::StatusOr<const OpSchema*> LookupSchema(std::string_view domain, std::string_view op, int64_t opset) {
  const DomainInfo* info = FindDomain(domain);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown operator domain '", absl::CHexEscape(Sv(domain)),
                                            "'; known domains are ", KnownDomainList()));
  }
  if (opset < 1 || opset > info->max_opset) {
    return absl::InvalidArgumentError(absl::StrCat("opset ", opset, " is out of range for domain ",
                                                   Sv(info->name), ": known opsets are 1 to ",
                                                   info->max_opset));
  }
  const std::span<const OpSchema> versions = Versions(info->name, op);
  if (versions.empty()) return UnknownOpError(info->name, op);
  const OpSchema* schema = VersionAt(versions, opset);
  if (schema == nullptr) {
    return absl::NotFoundError(absl::StrCat("op '", Sv(op), "' is not defined in ", Sv(info->name), " opset ",
                                            opset, "; its first version is opset ",
                                            versions.front().since_version()));
  }
  return schema;
}

}  // namespace onnxkit::ops
