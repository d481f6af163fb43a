// Usage errors: a status that says the command line does not fit (a flag
// value, a name the model lacks, a missing --shape), as opposed to an input
// that cannot be read. The CLI maps them to exit code 2, everything else by
// status code.
#ifndef ONNXKIT_LIB_BASE_USAGE_ERROR_H_
#define ONNXKIT_LIB_BASE_USAGE_ERROR_H_

#include <string_view>

#include "absl/status/status.h"

namespace onnxkit {

// An InvalidArgument status marked as a usage error.
absl::Status UsageError(std::string_view message);

// `status` marked as a usage error (message and code kept); OK stays OK.
absl::Status AsUsageError(absl::Status status);

bool IsUsageError(const absl::Status& status);

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_USAGE_ERROR_H_
