// The passes by name: the table of passes/passes.def, lookup, pipelines.
#ifndef ONNXKIT_PASSES_REGISTRY_H_
#define ONNXKIT_PASSES_REGISTRY_H_

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pass.h"

namespace onnxkit::passes {

// Every pass, in table order (the default pipeline's order).
std::span<const PassInfo> AllPasses();

// The pass named `name`; NotFound listing the valid names otherwise.
absl::StatusOr<const PassInfo*> FindPass(std::string_view name);

// The passes the default pipeline runs, in order.
std::vector<const PassInfo*> DefaultPipeline();

// A pipeline from a comma-separated list ("fold,dce,fuse-conv-bn"); the
// word "default" stands for the default pipeline. Spaces around names are
// ignored; an empty list or unknown name is InvalidArgument (listing the
// valid names).
absl::StatusOr<std::vector<const PassInfo*>> ParsePipeline(std::string_view list);

// `pipeline` without the passes named in `skip` (each must be a pass name).
absl::StatusOr<std::vector<const PassInfo*>> WithoutPasses(std::vector<const PassInfo*> pipeline,
                                                           const std::vector<std::string>& skip);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_REGISTRY_H_
