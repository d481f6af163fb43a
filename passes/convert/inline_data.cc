// External data brought inline (see inline_data.h).
#include "passes/convert/inline_data.h"

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto_codec.h"

namespace onnxkit::passes::convert {
namespace {

class Inliner {
 public:
  explicit Inliner(io::ExternalDataResolver* resolver) : resolver_(resolver) {}

  absl::Status Tensor(pb::TensorProto& t) {
    if (!io::HasExternalData(t)) return absl::OkStatus();
    if (resolver_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("tensor '", t.name, "' has external data and the model ",
                                                        "has no folder to read it from"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Bytes data, resolver_->Read(t));
    report_.bytes += static_cast<int64_t>(data.size());
    ++report_.tensors;
    t.raw_data = std::move(data);
    t.external_data.clear();
    t.data_location = 0;
    return absl::OkStatus();
  }

  absl::Status Attribute(pb::AttributeProto& a, int depth) {
    if (a.t) ONNXKIT_RETURN_IF_ERROR(Tensor(*a.t));
    for (pb::TensorProto& t : a.tensors) ONNXKIT_RETURN_IF_ERROR(Tensor(t));
    if (a.sparse_tensor) ONNXKIT_RETURN_IF_ERROR(Sparse(*a.sparse_tensor));
    for (pb::SparseTensorProto& s : a.sparse_tensors) ONNXKIT_RETURN_IF_ERROR(Sparse(s));
    if (a.g) ONNXKIT_RETURN_IF_ERROR(Graph(*a.g, depth + 1));
    for (pb::GraphProto& g : a.graphs) ONNXKIT_RETURN_IF_ERROR(Graph(g, depth + 1));
    return absl::OkStatus();
  }

  absl::Status Sparse(pb::SparseTensorProto& s) {
    if (s.values) ONNXKIT_RETURN_IF_ERROR(Tensor(*s.values));
    if (s.indices) ONNXKIT_RETURN_IF_ERROR(Tensor(*s.indices));
    return absl::OkStatus();
  }

  absl::Status Nodes(std::vector<pb::NodeProto>& nodes, int depth) {
    for (pb::NodeProto& n : nodes) {
      for (pb::AttributeProto& a : n.attribute) ONNXKIT_RETURN_IF_ERROR(Attribute(a, depth));
    }
    return absl::OkStatus();
  }

  absl::Status Graph(pb::GraphProto& g, int depth) {
    if (depth > limits::kMaxGraphDepth) return absl::ResourceExhaustedError("subgraphs nested too deep");
    for (pb::TensorProto& t : g.initializer) ONNXKIT_RETURN_IF_ERROR(Tensor(t));
    for (pb::SparseTensorProto& s : g.sparse_initializer) ONNXKIT_RETURN_IF_ERROR(Sparse(s));
    return Nodes(g.node, depth);
  }

  const InlineReport& report() const { return report_; }

 private:
  io::ExternalDataResolver* resolver_;
  InlineReport report_;
};

}  // namespace

absl::StatusOr<InlineReport> InlineExternalData(pb::ModelProto& model, io::ExternalDataResolver* resolver,
                                                int64_t max_bytes) {
  Inliner inliner(resolver);
  if (model.graph) ONNXKIT_RETURN_IF_ERROR(inliner.Graph(*model.graph, 0));
  for (pb::FunctionProto& f : model.functions) ONNXKIT_RETURN_IF_ERROR(inliner.Nodes(f.node, 0));
  uint64_t size = io::EncodedSize(model);
  if (size > static_cast<uint64_t>(max_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--inline would make the model ", size, " bytes (", inliner.report().bytes, " bytes of external data in ",
        inliner.report().tensors, " tensors), over the ", max_bytes,
        "-byte protobuf limit; keep the data external (--external-data BYTES)"));
  }
  return inliner.report();
}

}  // namespace onnxkit::passes::convert
