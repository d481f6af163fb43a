// The strategy table and its parser.
#include "bisect/strategies.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/strings.h"

namespace onnxkit::bisect {

const std::vector<StrategyInfo>& AllStrategies() {
  static const std::vector<StrategyInfo> kAll = {
      {"outputs", "keep only the cone of one graph output", true, &ReduceOutputs},
      {"divergence", "cut at the first tensor where the two backends diverge (--mismatch)", true, &CutAtDivergence},
      {"ddmin", "delta debugging over node sets; cut tensors are fed golden values", true, &Ddmin},
      {"subgraphs", "replace an If by its then or else branch", true, &InlineSubgraphs},
      {"bodies", "remove dead nodes (outputs unused, not body outputs) from Loop/Scan bodies", true,
       &RemoveDeadBodyNodes},
      {"initializers", "replace float weights by zeros", true, &ZeroInitializers},
      {"attributes", "drop node attributes", true, &DropAttributes},
      {"prefix-suffix", "contiguous range of nodes by binary search (baseline, like polygraphy)", false, &PrefixSuffix},
  };
  return kAll;
}

absl::StatusOr<std::vector<const StrategyInfo*>> ParseStrategies(const std::vector<std::string>& names) {
  std::vector<const StrategyInfo*> out;
  std::vector<std::string> list;
  for (const std::string& n : names) {
    for (absl::string_view part : absl::StrSplit(n, ',', absl::SkipEmpty())) list.emplace_back(part);
  }
  if (list.empty()) list.push_back("default");
  for (const std::string& name : list) {
    if (name == "default") {
      for (const StrategyInfo& s : AllStrategies()) {
        if (s.in_default) out.push_back(&s);
      }
      continue;
    }
    const StrategyInfo* found = nullptr;
    for (const StrategyInfo& s : AllStrategies()) {
      if (s.name == name) found = &s;
    }
    if (found == nullptr) {
      std::string valid;
      for (const StrategyInfo& s : AllStrategies()) absl::StrAppend(&valid, valid.empty() ? "" : ", ", Sv(s.name));
      return absl::InvalidArgumentError(absl::StrCat("unknown strategy '", name, "' (valid: default, ", valid, ")"));
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace onnxkit::bisect
