// External tensor data: parsing TensorProto.external_data entries and reading
// the bytes they point at, with the security rules of onnxkit:
//   - location is a relative path, with no ".." component, no NUL, not
//     absolute; after resolution it stays inside the model's folder;
//   - no component of the resolved path is a symlink; the target is a regular
//     file (no FIFO, device, socket or directory);
//   - offset and length are non-negative, fit the real file size, and length
//     equals what dims x element size require (when the type has a fixed
//     layout);
//   - data is memory-mapped; files are opened once per load and shared.
#ifndef ONNXKIT_LIB_IO_EXTERNAL_DATA_H_
#define ONNXKIT_LIB_IO_EXTERNAL_DATA_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/bytes.h"
#include "lib/io/proto.h"

namespace onnxkit::io {

class MappedFile;

// The parsed external_data entries of one tensor.
struct ExternalDataInfo {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;  // absent: to the end of the file
  std::string checksum;
};

// True when the tensor stores its data externally (data_location EXTERNAL).
inline bool HasExternalData(const pb::TensorProto& t) { return t.data_location == 1; }

// Parses and validates the entries (keys location/offset/length/checksum;
// location required; numbers are decimal non-negative int64; unknown or
// duplicate keys are errors).
absl::StatusOr<ExternalDataInfo> ParseExternalData(const pb::TensorProto& tensor);

// Resolves external data against one model folder, caching open mappings.
class ExternalDataResolver {
 public:
  explicit ExternalDataResolver(std::filesystem::path base_dir);
  ~ExternalDataResolver();

  // Checks the location rules and returns the resolved path (no reading).
  absl::StatusOr<std::filesystem::path> ResolveLocation(const std::string& location) const;

  // Returns the tensor's data bytes (a view into a mapping) after every check
  // above. Error messages name the tensor and the location.
  absl::StatusOr<Bytes> Read(const pb::TensorProto& tensor);

  // Validates without keeping the data (file size, offset and length only).
  absl::Status Validate(const pb::TensorProto& tensor);

 private:
  absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::filesystem::path& resolved);

  std::filesystem::path base_dir_;
  std::map<std::string, std::shared_ptr<const MappedFile>> open_files_;
};

// The data bytes of a tensor stored in raw_data, or in external data (read
// through `resolver`); NotFound if the tensor keeps its data in typed fields.
absl::StatusOr<Bytes> TensorRawBytes(const pb::TensorProto& tensor, ExternalDataResolver* resolver);

// What InlineExternalTensors brought inline.
struct InlinedTensors {
  int64_t tensors = 0;
  int64_t bytes = 0;  // their data bytes
};

// Replaces the external tensors of `model` by their data read through
// `resolver` (null: an external tensor is a FailedPrecondition error), as
// raw_data viewing the mapped file: node attributes (Constant values,
// ConstantOfShape's, ...) in every graph, subgraph and model-local function,
// and, with `initializers`, the graphs' initializers too. On an error
// (unreadable or unsafe data, naming the tensor) `model` keeps what was
// inlined so far.
absl::StatusOr<InlinedTensors> InlineExternalTensors(pb::ModelProto& model, ExternalDataResolver* resolver,
                                                     bool initializers);

}  // namespace onnxkit::io

#endif  // ONNXKIT_LIB_IO_EXTERNAL_DATA_H_
