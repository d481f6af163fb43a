// `onnxkit convert --inline`: tensors stored as external data are brought
// back into the model (raw_data), in the main graph, every subgraph and
// every model-local function, as long as the result stays under protobuf's
// 2 GiB limit.
#ifndef ONNXKIT_PASSES_CONVERT_INLINE_DATA_H_
#define ONNXKIT_PASSES_CONVERT_INLINE_DATA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/base/limits.h"
#include "lib/io/external_data.h"
#include "lib/io/proto.h"

namespace onnxkit::passes::convert {

struct InlineReport {
  int64_t tensors = 0;  // tensors brought inline
  int64_t bytes = 0;    // their data bytes
};

// Replaces every external tensor of `model` by its data read through
// `resolver` (views into the mapped data files: no copy until saved).
// Errors: external data unreadable or unsafe (the resolver's error, naming
// the tensor); ResourceExhausted when the inlined model would be more than
// `max_bytes` (the message names its size); `model` is then left with the
// tensors it had inlined so far, so callers discard it.
absl::StatusOr<InlineReport> InlineExternalData(pb::ModelProto& model, io::ExternalDataResolver* resolver,
                                                int64_t max_bytes = limits::kMaxProtoBytes);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_INLINE_DATA_H_
