// Tensor files by extension: reading .pb (one serialized TensorProto), .npy
// and .npz; writing .pb, .npy and .npz (a one-array archive).
//
// Reading checks the path first (a regular file within the size limit, see
// io::MappedFile), decodes by the (case-insensitive) extension and validates
// every tensor with ValidateTensorData, so callers get tensors whose data
// matches their dims. A .pb tensor with external data has it loaded from the
// .pb file's folder under io::ExternalDataResolver's rules, and becomes an
// inline raw_data tensor. A .npy tensor is named after the file's stem
// ("input_0.npy" -> "input_0"); .npz tensors after their entries.
//
// Writing is atomic (io::WriteFileAtomically: temporary file in the same
// folder, then rename), so a failure never leaves a partial file.
//
// Every error message starts with the path.
#ifndef ONNXKIT_LIB_TENSOR_TENSOR_FILE_H_
#define ONNXKIT_LIB_TENSOR_TENSOR_FILE_H_

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/base/limits.h"
#include "lib/io/proto.h"

namespace onnxkit::tensor {

// Largest .pb tensor file: protobuf cannot represent 2 GiB or more.
inline constexpr int64_t kMaxTensorPbFileBytes = limits::kMaxProtoBytes;

// Largest .npy / .npz file (64 GiB): the whole file is mapped and its
// tensors copied out, so this bounds memory to about twice the limit.
inline constexpr int64_t kMaxNumpyFileBytes = int64_t{1} << 36;

// ".pb, .npy, .npz": the extensions ReadTensorFile accepts.
std::string_view SupportedTensorFileExtensions();

// Reads the tensors stored in `path` (one for .pb and .npy). Errors:
// InvalidArgument for an unsupported extension (the message lists the
// supported ones) or invalid contents, NotFound / PermissionDenied /
// FailedPrecondition (not a regular file) for the path, ResourceExhausted
// for limits, DataLoss for truncated data.
absl::StatusOr<std::vector<pb::TensorProto>> ReadTensorFile(const std::filesystem::path& path);

// Writes `tensor` to `path` atomically, as .pb (encoded as is), .npy
// (WriteNpy) or .npz (WriteNpz of one array). The tensor must pass
// ValidateTensorData: external data must be loaded first.
absl::Status WriteTensorFile(const std::filesystem::path& path, const pb::TensorProto& tensor);

}  // namespace onnxkit::tensor

#endif  // ONNXKIT_LIB_TENSOR_TENSOR_FILE_H_
