// The reduction strategies of `onnxkit bisect`, one file each, listed in
// one table (strategies.cc) in the order they run:
//   outputs        keep one graph output's cone
//   divergence     cut at the first tensor where the backends diverge (--mismatch)
//   ddmin          delta debugging over node sets (any subset, not ranges)
//   subgraphs      inline an If's then/else branch in place of the If
//   bodies         remove dead nodes from Loop/Scan bodies
//   initializers   replace weights by zeros
//   attributes     drop node attributes
//   prefix-suffix  contiguous range search (the baseline; not in the default list)
#ifndef ONNXKIT_BISECT_STRATEGIES_H_
#define ONNXKIT_BISECT_STRATEGIES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/reducer.h"

namespace onnxkit::bisect {

struct StrategyInfo {
  std::string_view name;
  std::string_view description;
  bool in_default;
  absl::Status (*run)(Reducer& reducer);
};

const std::vector<StrategyInfo>& AllStrategies();
// "ddmin,attributes" or "default"; InvalidArgument lists valid names.
absl::StatusOr<std::vector<const StrategyInfo*>> ParseStrategies(const std::vector<std::string>& names);

absl::Status ReduceOutputs(Reducer& r);
absl::Status CutAtDivergence(Reducer& r);
absl::Status Ddmin(Reducer& r);
absl::Status InlineSubgraphs(Reducer& r);
absl::Status RemoveDeadBodyNodes(Reducer& r);
absl::Status ZeroInitializers(Reducer& r);
absl::Status DropAttributes(Reducer& r);
absl::Status PrefixSuffix(Reducer& r);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_STRATEGIES_H_
