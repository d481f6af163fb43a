// libonnx shape inference behind a Status boundary.
#include "lib/onnx_bridge/shape_inference_bridge.h"

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "lib/io/proto_codec.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace onnxkit::onnx_bridge {
namespace {

// Tensors above this size are stubbed: shape inference needs their dims and
// type only (small ones, such as Reshape shapes, keep their data).
constexpr size_t kStubBytes = 1024;

void StubTensor(pb::TensorProto* t) {
  if (t->raw_data.size() <= kStubBytes) return;
  t->raw_data = Bytes();
  t->data_location = 1;
  t->external_data.clear();
  pb::StringStringEntryProto location;
  location.key = "location";
  location.value = "onnxkit-stub";
  t->external_data.push_back(location);
}

}  // namespace

absl::StatusOr<std::vector<pb::ValueInfoProto>> InferValueInfo(const pb::ModelProto& model) {
  if (!model.graph) return absl::InvalidArgumentError("model has no graph");
  pb::ModelProto stub = model;  // raw data is shared, not copied
  for (auto& t : stub.graph->initializer) StubTensor(&t);
  std::string bytes = io::Encode(stub);
  std::string inferred_bytes;
  try {
    onnx::ModelProto m;
    if (!m.ParseFromString(bytes)) return absl::InternalError("libonnx could not parse the model");
    onnx::ShapeInferenceOptions options(/*check_type_val=*/false, /*strict_mode_val=*/0,
                                        /*data_prop_val=*/true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
    inferred_bytes = m.graph().SerializeAsString();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory in onnx shape inference");
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("onnx shape inference failed: ", e.what()));
  } catch (...) {
    return absl::InternalError("onnx shape inference raised a non-standard exception");
  }
  auto graph = io::DecodeGraph(inferred_bytes);
  if (!graph.ok()) return graph.status();
  return std::move(graph->value_info);
}

}  // namespace onnxkit::onnx_bridge
