#include "lib/io/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

#include "absl/strings/str_cat.h"

namespace onnxkit::io {

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status SpillFile::Create(const std::filesystem::path& path) {
  if (fd_ >= 0) return absl::FailedPreconditionError(absl::StrCat(path_.string(), " is already open"));
  path_ = path;
  size_ = 0;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path.string()));
  return absl::OkStatus();
}

absl::StatusOr<SpillFile::Span> SpillFile::Append(std::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError("the scratch file is not open");
  const Span span{size_, bytes.size()};
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(size_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::ErrnoToStatus(n < 0 ? errno : EIO, absl::StrCat("cannot write ", path_.string()));
    bytes.remove_prefix(static_cast<size_t>(n));
    size_ += static_cast<uint64_t>(n);
  }
  return span;
}

absl::StatusOr<std::string> SpillFile::Read(Span span) const {
  if (fd_ < 0) return absl::FailedPreconditionError("the scratch file is not open");
  if (span.offset > size_ || span.size > size_ - span.offset ||
      span.offset + span.size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return absl::DataLossError(absl::StrCat(path_.string(), ": no record of ", span.size, " bytes at ",
                                            span.offset, " (the file holds ", size_, ")"));
  }
  std::string out(span.size, '\0');
  uint64_t done = 0;
  while (done < span.size) {
    const ssize_t n = ::pread(fd_, out.data() + done, span.size - done, static_cast<off_t>(span.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path_.string()));
    if (n == 0) return absl::DataLossError(absl::StrCat(path_.string(), " was cut short"));
    done += static_cast<uint64_t>(n);
  }
  return out;
}

}  // namespace onnxkit::io
