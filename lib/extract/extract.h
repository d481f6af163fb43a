// Extraction of the subgraph that computes given tensors from given tensors
// (`onnxkit extract`).
#ifndef ONNXKIT_LIB_EXTRACT_EXTRACT_H_
#define ONNXKIT_LIB_EXTRACT_EXTRACT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::extract {

struct ExtractRequest {
  std::vector<std::string> inputs;   // tensors that become graph inputs
  std::vector<std::string> outputs;  // tensors that become graph outputs
  // When an input or output has no known type, run shape inference (libonnx,
  // opsets <= 17) to find it; without a type the result would be invalid.
  bool infer_types = true;
};

struct ExtractStats {
  int64_t nodes_kept = 0, nodes_total = 0;
  int64_t initializers_kept = 0;
};

// Returns the minimal model computing `outputs` from `inputs` (and the
// initializers it needs): nodes in their original order, needed
// initializers, value_info, opset imports, functions and metadata carried
// over; values used inside If/Loop/Scan bodies count as needed. Errors:
//   NotFound         a requested name is not a tensor of the main graph
//                    (the message suggests close names);
//   FailedPrecondition  an output depends on a graph input that is not in
//                    `inputs` (the message lists the missing tensors);
//   InvalidArgument  the model is not structurally sound (from the IR) or a
//                    type cannot be determined.
absl::StatusOr<pb::ModelProto> ExtractModel(const pb::ModelProto& model, const ExtractRequest& request,
                                            ExtractStats* stats = nullptr);

}  // namespace onnxkit::extract

#endif  // ONNXKIT_LIB_EXTRACT_EXTRACT_H_
