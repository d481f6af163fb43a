// The pass table and pipeline parsing.
#include "passes/registry.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/base/strings.h"
#include "passes/pass_list.h"

namespace onnxkit::passes {
namespace {

constexpr PassInfo kPasses[] = {
#define ONNXKIT_PASS(name, create, in_default, needs_shapes, numerics, description) \
  PassInfo{name, description, in_default, needs_shapes, numerics, &create},
#include "passes/passes.def"
#undef ONNXKIT_PASS
};

std::string ValidNames() {
  std::vector<std::string> names;
  for (const PassInfo& p : kPasses) names.emplace_back(p.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

std::span<const PassInfo> AllPasses() { return kPasses; }

absl::StatusOr<const PassInfo*> FindPass(std::string_view name) {
  for (const PassInfo& p : kPasses) {
    if (p.name == name) return &p;
  }
  return absl::NotFoundError(absl::StrCat("unknown pass '", Sv(name), "'; valid passes: ", ValidNames()));
}

std::vector<const PassInfo*> DefaultPipeline() {
  std::vector<const PassInfo*> out;
  for (const PassInfo& p : kPasses) {
    if (p.in_default) out.push_back(&p);
  }
  return out;
}

absl::StatusOr<std::vector<const PassInfo*>> ParsePipeline(std::string_view list) {
  std::vector<const PassInfo*> out;
  for (absl::string_view part : absl::StrSplit(Sv(list), ',')) {
    std::string_view name = StdSv(absl::StripAsciiWhitespace(part));
    if (name.empty()) continue;
    if (name == "default") {
      for (const PassInfo* p : DefaultPipeline()) out.push_back(p);
      continue;
    }
    auto found = FindPass(name);
    if (!found.ok()) return absl::InvalidArgumentError(found.status().message());
    out.push_back(*found);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("empty pass list; valid passes: ", ValidNames()));
  }
  return out;
}

absl::StatusOr<std::vector<const PassInfo*>> WithoutPasses(std::vector<const PassInfo*> pipeline,
                                                           const std::vector<std::string>& skip) {
  for (const std::string& name : skip) {
    auto found = FindPass(name);
    if (!found.ok()) return absl::InvalidArgumentError(found.status().message());
    pipeline.erase(std::remove(pipeline.begin(), pipeline.end(), *found), pipeline.end());
  }
  return pipeline;
}

}  // namespace onnxkit::passes
