// The boundary to libonnx's shape inference (onnx 1.12: ai.onnx opsets up to
// 17). libonnx throws; this is the only file that calls it, and it turns
// every exception into a Status.
#ifndef ONNXKIT_LIB_ONNX_BRIDGE_SHAPE_INFERENCE_BRIDGE_H_
#define ONNXKIT_LIB_ONNX_BRIDGE_SHAPE_INFERENCE_BRIDGE_H_

#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::onnx_bridge {

// Runs onnx's shape inference (non-strict, with data propagation) on a copy of
// `model` whose large tensors are replaced by external-data stubs (weights are
// never read or copied), and returns the inferred value_info entries of the
// main graph. Nodes onnx does not know are skipped, as onnx does.
absl::StatusOr<std::vector<pb::ValueInfoProto>> InferValueInfo(const pb::ModelProto& model);

}  // namespace onnxkit::onnx_bridge

#endif  // ONNXKIT_LIB_ONNX_BRIDGE_SHAPE_INFERENCE_BRIDGE_H_
