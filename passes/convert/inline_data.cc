// External data brought inline (see inline_data.h).
#include "passes/convert/inline_data.h"

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto_codec.h"

namespace onnxkit::passes::convert {

absl::StatusOr<InlineReport> InlineExternalData(pb::ModelProto& model, io::ExternalDataResolver* resolver,
                                                int64_t max_bytes) {
  ONNXKIT_ASSIGN_OR_RETURN(io::InlinedTensors done, io::InlineExternalTensors(model, resolver, true));
  uint64_t size = io::EncodedSize(model);
  if (size > static_cast<uint64_t>(max_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("--inline would make the model ", size, " bytes (", done.bytes,
                     " bytes of external data in ", done.tensors, " tensors), over the ", max_bytes,
                     "-byte protobuf limit; keep the data external (--external-data BYTES)"));
  }
  return InlineReport{done.tensors, done.bytes};
}

}  // namespace onnxkit::passes::convert
