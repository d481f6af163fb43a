// SpillFile: an append-only scratch file of byte records, read back at the
// offsets Append returned. One descriptor for many values: a file per value
// spends most of a large model's time creating files.
#ifndef ONNXKIT_LIB_IO_SPILL_FILE_H_
#define ONNXKIT_LIB_IO_SPILL_FILE_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace onnxkit::io {

class SpillFile {
 public:
  // Where a record lies in the file.
  struct Span {
    uint64_t offset = 0;
    uint64_t size = 0;
  };

  SpillFile() = default;
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  ~SpillFile();

  // Creates `path` (which must not exist) for writing and reading.
  absl::Status Create(const std::filesystem::path& path);
  bool is_open() const { return fd_ >= 0; }
  // Appends `bytes`; errors: not created, the disk refuses (full, ...).
  absl::StatusOr<Span> Append(std::string_view bytes);
  // The bytes of a record Append returned; DataLoss when the file is shorter.
  absl::StatusOr<std::string> Read(Span span) const;
  uint64_t size() const { return size_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace onnxkit::io

#endif  // ONNXKIT_LIB_IO_SPILL_FILE_H_
