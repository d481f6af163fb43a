// Loading and saving ONNX model files: the only code that reads or writes
// model bytes (with proto_codec and external_data).
//
// Load: the file is checked (regular file, size within limits) before any
// parsing, then memory-mapped and decoded; tensor raw data stays a view into
// the mapping, so loading does not read weights. External data is resolved
// lazily and safely (see external_data.h).
//
// Save: bytes are deterministic; the file is written to a temporary file in
// the destination folder, flushed, then renamed into place, so a failed save
// never leaves a partial file and saving over the input is safe.
#ifndef ONNXKIT_LIB_IO_MODEL_IO_H_
#define ONNXKIT_LIB_IO_MODEL_IO_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::io {

// A read-only mapping of a whole file. Bytes views keep it alive.
class MappedFile {
 public:
  // Maps `path`, which must be an existing regular file (not a directory,
  // FIFO or device). Symlinks are followed only when `follow_symlinks`.
  // Errors: NotFound (missing), FailedPrecondition (not a regular file),
  // PermissionDenied, ResourceExhausted (larger than `max_bytes`).
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(
      const std::filesystem::path& path, int64_t max_bytes, bool follow_symlinks = true);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {data_, size_}; }
  // Returns to the OS the whole pages of [data, data + size) that lie in
  // this mapping (read again, they come back from the file); a range not
  // inside the mapping is ignored.
  void ReleasePages(const void* data, size_t size) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  // The external data resolver opens files itself (component by component,
  // never following a symlink) and maps the descriptor it got.
  friend class ExternalDataResolver;
  // Maps the file open on `fd` (always closed before returning), with the
  // checks of Open; `path` is used in messages and kept as path().
  static absl::StatusOr<std::shared_ptr<const MappedFile>> MapFd(
      int fd, const std::filesystem::path& path, int64_t max_bytes);

  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::filesystem::path path_;
};

struct LoadOptions {
  // Largest accepted protobuf part; a bigger file is refused before parsing.
  int64_t max_file_bytes = (int64_t{1} << 31) - 1;
};

// A decoded model and where it came from (external data locations are
// relative to `base_dir`).
struct LoadedModel {
  pb::ModelProto proto;
  std::filesystem::path path;      // as given
  std::filesystem::path base_dir;  // folder holding the model file
  std::shared_ptr<const MappedFile> mapping;  // keeps raw_data views valid
};

// Loads a model file. Error codes: NotFound / PermissionDenied /
// FailedPrecondition (directory, FIFO...) for unreadable paths,
// ResourceExhausted for limits, DataLoss for truncated or malformed bytes,
// InvalidArgument for bytes that are protobuf but not an ONNX model (no graph,
// no ir_version and no opset_import). Messages start with the path.
absl::StatusOr<LoadedModel> LoadModel(const std::filesystem::path& path, const LoadOptions& options = {});

struct SaveOptions {
  // Tensors whose raw_data is at least this many bytes (and not empty) go to
  // one external data file next to the output; -1 keeps data where it is
  // (inline stays inline; external data is re-written next to the output
  // either way). Tensors holding typed fields (float_data...) stay inline.
  // In the data file every offset is a multiple of 64, and a tensor of
  // 64 KiB or more starts on a 4096-byte boundary.
  int64_t external_data_threshold = -1;
  // Name of the external data file: one plain file name in the output
  // folder; empty: "<output file name>.data". When that is a file the model
  // reads external data from (or the model file itself), "<name>.1",
  // "<name>.2"... is used instead, so the input's data is never overwritten.
  std::string external_data_name;
};

// Saves `model` to `path` atomically. External data referenced by `model`
// (relative to `source_base_dir`) is copied into a fresh data file next to
// `path` with new locations, never reusing an input file's path; the saved
// model refers only to files written by this call. The data file is renamed
// into place just before the model; on error no existing file is replaced.
// Errors: those of LoadModel/ExternalDataResolver for the sources (prefixed
// with the tensor's field path), NotFound (output folder missing),
// FailedPrecondition (`path` is a directory or one of the model's data
// files), InvalidArgument (bad external_data_name), ResourceExhausted (over
// 2 GiB without external data, disk full).
absl::Status SaveModel(const pb::ModelProto& model, const std::filesystem::path& source_base_dir,
                       const std::filesystem::path& path, const SaveOptions& options = {});

// Writes `bytes` to `path` atomically (temporary file in the same folder,
// fsync, rename). Like SaveModel, a character device or FIFO at `path` is
// written through (a FIFO without a reader fails: FailedPrecondition), a
// block device or socket refused, a symlink replaced, never followed.
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace onnxkit::io

#endif  // ONNXKIT_LIB_IO_MODEL_IO_H_
