// Loading and saving model files: MappedFile (checked, read-only mmap),
// LoadModel (map + decode, raw data stays a view into the mapping),
// WriteFileAtomically and SaveModel (temporary file + fsync + rename, one
// fresh external data file next to the output).
//
// External data layout written by SaveModel: tensors go to one file in
// model traversal order (graph initializers, sparse initializers, node
// attributes, subgraphs depth-first, functions, training info). Every offset
// is a multiple of 64; a tensor of 64 KiB or more starts on a 4096-byte
// boundary so runtimes can map it directly. Padding bytes are zero.
#include "lib/io/model_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/external_data.h"
#include "lib/io/proto_codec.h"

namespace onnxkit::io {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSmallAlignment = 64;
constexpr int64_t kPageAlignment = 4096;
constexpr int64_t kPageAlignThreshold = 64 * 1024;
// How many "<name>.N" alternatives SaveModel tries for the data file name.
constexpr int kMaxDataNameAttempts = 1000;

std::string ErrnoText(int err) {
  char buffer[256];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  return std::string(strerror_r(err, buffer, sizeof(buffer)));
}

// "<path>: <what>: <strerror>" with the code errno maps to.
absl::Status ErrnoStatus(int err, const fs::path& path, std::string_view what) {
  absl::StatusCode code = absl::ErrnoToStatusCode(err);
  if (err == ELOOP) code = absl::StatusCode::kFailedPrecondition;
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) code = absl::StatusCode::kResourceExhausted;
  if (err == EROFS) code = absl::StatusCode::kPermissionDenied;
  return absl::Status(code, absl::StrCat(path.string(), ": ", Sv(what), ": ", ErrnoText(err)));
}

std::string_view FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

fs::path FolderOf(const fs::path& path) {
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// --- Atomic writing -----------------------------------------------------

// A temporary file next to `target`; Commit() renames it over `target`.
// Until then (or on any failure) the destructor removes it.
class TempFile {
 public:
  static absl::StatusOr<std::unique_ptr<TempFile>> Create(const fs::path& target);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  absl::Status Write(std::string_view bytes);
  absl::Status WriteZeros(int64_t count);
  // Flushes, fsyncs and closes the file.
  absl::Status Finish();
  // Renames the finished file over the target.
  absl::Status Commit();

 private:
  TempFile(fs::path target, fs::path temp, int fd)
      : target_(std::move(target)), temp_(std::move(temp)), fd_(fd) {}
  absl::Status WriteAll(std::string_view bytes);
  absl::Status Flush();

  static constexpr size_t kBufferBytes = size_t{1} << 20;
  fs::path target_;
  fs::path temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

absl::StatusOr<std::unique_ptr<TempFile>> TempFile::Create(const fs::path& target) {
  static std::atomic<uint64_t> counter{0};
  const fs::path folder = FolderOf(target);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(target.string(), ": cannot save: folder '", folder.string(), "' does not exist"));
    }
    return ErrnoStatus(err, target, absl::StrCat("cannot save into '", folder.string(), "'"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(target.string(), ": cannot save: '", folder.string(), "' is not a folder"));
  }
  const bool exists = ::lstat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(target.string(), ": cannot save: is a directory"));
  }
  // Keep the permissions of a file being replaced (not of a symlink's target).
  const bool keep_mode = exists && S_ISREG(st.st_mode);
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path temp = folder / absl::StrCat(target.filename().string(), ".tmp-", ::getpid(), "-", counter++);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // a stale temporary file: try the next name
      return ErrnoStatus(errno, target, "cannot create a temporary file");
    }
    if (keep_mode) ::fchmod(fd, st.st_mode & 07777);  // best effort
    return std::unique_ptr<TempFile>(new TempFile(target, std::move(temp), fd));
  }
  return absl::AlreadyExistsError(
      absl::StrCat(target.string(), ": cannot create a temporary file: too many stale temporary files"));
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

absl::Status TempFile::WriteAll(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t chunk = std::min(bytes.size(), size_t{1} << 30);
    ssize_t n = ::write(fd_, bytes.data(), chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, target_, "cannot write");
    }
    if (n == 0) return absl::UnknownError(absl::StrCat(target_.string(), ": cannot write: no progress"));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status TempFile::Flush() {
  absl::Status status = WriteAll(buffer_);
  buffer_.clear();
  return status;
}

absl::Status TempFile::Write(std::string_view bytes) {
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  ONNXKIT_RETURN_IF_ERROR(Flush());
  if (bytes.size() >= kBufferBytes) return WriteAll(bytes);
  buffer_.append(bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status TempFile::WriteZeros(int64_t count) {
  static const char kZeros[kPageAlignment] = {};
  while (count > 0) {
    int64_t n = std::min(count, kPageAlignment);
    ONNXKIT_RETURN_IF_ERROR(Write(std::string_view(kZeros, static_cast<size_t>(n))));
    count -= n;
  }
  return absl::OkStatus();
}

absl::Status TempFile::Finish() {
  ONNXKIT_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, target_, "cannot flush to disk");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus(errno, target_, "cannot close");
  return absl::OkStatus();
}

absl::Status TempFile::Commit() {
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    return ErrnoStatus(errno, target_, "cannot rename the temporary file into place");
  }
  committed_ = true;
  return absl::OkStatus();
}

// What an output path names. A character device or FIFO (/dev/null, a
// pipe) is written straight through, without a temporary file (renaming one
// over it would replace the device); a block device or socket is refused;
// a symbolic link is replaced like a file, never followed (a link planted
// in an output folder cannot redirect the write).
struct OutputTarget {
  fs::path path;
  bool stream = false;
};

absl::StatusOr<OutputTarget> ResolveOutput(const fs::path& path) {
  OutputTarget t{path};
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return t;  // absent: created
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    t.stream = true;
  } else if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path.string(), ": cannot save: it is a ",
                                                      S_ISBLK(st.st_mode) ? "block device" : "socket",
                                                      ", not a file"));
  }
  return t;
}

// Writes into a character device or FIFO as it is, chunk by chunk.
class StreamFile {
 public:
  // A FIFO without a reader fails (ENXIO) instead of waiting for one.
  static absl::StatusOr<StreamFile> Open(const fs::path& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENXIO) {
        return absl::FailedPreconditionError(
            absl::StrCat(path.string(), ": cannot save: a pipe nothing reads"));
      }
      return ErrnoStatus(errno, path, "cannot open for writing");
    }
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return StreamFile(path, fd);
  }
  StreamFile(StreamFile&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}
  StreamFile(const StreamFile&) = delete;
  StreamFile& operator=(const StreamFile&) = delete;
  StreamFile& operator=(StreamFile&&) = delete;
  ~StreamFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Write(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), std::min(bytes.size(), size_t{1} << 30));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, path_, "cannot write");
      }
      if (n == 0) return absl::UnknownError(absl::StrCat(path_.string(), ": cannot write: no progress"));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Close() {
    int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) return ErrnoStatus(errno, path_, "cannot close");
    return absl::OkStatus();
  }

 private:
  StreamFile(fs::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  fs::path path_;
  int fd_ = -1;
};

// Makes the renames durable; some file systems cannot fsync a folder, which
// is not an error.
void SyncFolder(const fs::path& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// --- Tensor traversal ---------------------------------------------------

using TensorFn = std::function<absl::Status(pb::TensorProto*, const std::string& where)>;

// Visits every tensor of a model in a fixed order, with a field path.
class TensorWalker {
 public:
  explicit TensorWalker(TensorFn fn) : fn_(std::move(fn)) {}

  absl::Status Model(pb::ModelProto* m) {
    if (m->graph) ONNXKIT_RETURN_IF_ERROR(Graph(m->graph.get(), "graph", 0));
    for (size_t i = 0; i < m->functions.size(); ++i) {
      pb::FunctionProto& f = m->functions[i];
      std::string where = absl::StrCat("functions[", i, "]");
      for (size_t j = 0; j < f.node.size(); ++j) {
        ONNXKIT_RETURN_IF_ERROR(Node(&f.node[j], absl::StrCat(where, ".node[", j, "]"), 0));
      }
      for (size_t j = 0; j < f.attribute_proto.size(); ++j) {
        ONNXKIT_RETURN_IF_ERROR(
            Attribute(&f.attribute_proto[j], absl::StrCat(where, ".attribute_proto[", j, "]"), 0));
      }
    }
    for (size_t i = 0; i < m->training_info.size(); ++i) {
      pb::TrainingInfoProto& t = m->training_info[i];
      std::string where = absl::StrCat("training_info[", i, "]");
      if (t.initialization) {
        ONNXKIT_RETURN_IF_ERROR(Graph(t.initialization.get(), where + ".initialization", 0));
      }
      if (t.algorithm) ONNXKIT_RETURN_IF_ERROR(Graph(t.algorithm.get(), where + ".algorithm", 0));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Graph(pb::GraphProto* g, const std::string& where, int depth) {
    if (depth > limits::kMaxMessageDepth) {
      return absl::ResourceExhaustedError(
          absl::StrCat(where, ": subgraphs nested deeper than ", limits::kMaxMessageDepth));
    }
    for (size_t i = 0; i < g->initializer.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(fn_(&g->initializer[i], absl::StrCat(where, ".initializer[", i, "]")));
    }
    for (size_t i = 0; i < g->sparse_initializer.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(
          Sparse(&g->sparse_initializer[i], absl::StrCat(where, ".sparse_initializer[", i, "]")));
    }
    for (size_t i = 0; i < g->node.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(Node(&g->node[i], absl::StrCat(where, ".node[", i, "]"), depth));
    }
    return absl::OkStatus();
  }

  absl::Status Node(pb::NodeProto* n, const std::string& where, int depth) {
    for (size_t i = 0; i < n->attribute.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(Attribute(&n->attribute[i], absl::StrCat(where, ".attribute[", i, "]"), depth));
    }
    return absl::OkStatus();
  }

  absl::Status Attribute(pb::AttributeProto* a, const std::string& where, int depth) {
    if (a->t) ONNXKIT_RETURN_IF_ERROR(fn_(a->t.get(), where + ".t"));
    for (size_t i = 0; i < a->tensors.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(fn_(&a->tensors[i], absl::StrCat(where, ".tensors[", i, "]")));
    }
    if (a->sparse_tensor) ONNXKIT_RETURN_IF_ERROR(Sparse(a->sparse_tensor.get(), where + ".sparse_tensor"));
    for (size_t i = 0; i < a->sparse_tensors.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(Sparse(&a->sparse_tensors[i], absl::StrCat(where, ".sparse_tensors[", i, "]")));
    }
    if (a->g) ONNXKIT_RETURN_IF_ERROR(Graph(a->g.get(), where + ".g", depth + 1));
    for (size_t i = 0; i < a->graphs.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(Graph(&a->graphs[i], absl::StrCat(where, ".graphs[", i, "]"), depth + 1));
    }
    return absl::OkStatus();
  }

  absl::Status Sparse(pb::SparseTensorProto* s, const std::string& where) {
    if (s->values) ONNXKIT_RETURN_IF_ERROR(fn_(s->values.get(), where + ".values"));
    if (s->indices) ONNXKIT_RETURN_IF_ERROR(fn_(s->indices.get(), where + ".indices"));
    return absl::OkStatus();
  }

  TensorFn fn_;
};

// --- SaveModel helpers --------------------------------------------------

// A tensor whose data goes to the output's external data file.
struct Piece {
  pb::TensorProto* tensor;
  Bytes data;
  int64_t offset = 0;
};

// Identity of an existing file (device, inode); nullopt if it does not exist.
std::optional<std::pair<dev_t, ino_t>> FileId(const fs::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

std::string CanonicalOrLexical(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  fs::path canonical = fs::weakly_canonical(absolute, ec);
  if (ec) return absolute.lexically_normal().string();
  return canonical.string();
}

// The files a model being saved reads its external data from.
struct SourceFiles {
  std::set<std::string> paths;  // canonical
  std::set<std::pair<dev_t, ino_t>> ids;

  void Add(const fs::path& path) {
    paths.insert(CanonicalOrLexical(path));
    if (auto id = FileId(path)) ids.insert(*id);
  }
  bool Contains(const fs::path& path) const {
    if (paths.count(CanonicalOrLexical(path)) != 0) return true;
    auto id = FileId(path);
    return id && ids.count(*id) != 0;
  }
};

// A data file name must be one plain file name that the external data
// resolver accepts when the model is loaded again.
absl::Status CheckDataFileName(const std::string& name, const fs::path& model_path) {
  bool drive = name.size() >= 2 && name[1] == ':' &&
               ((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z'));
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos || name.find('\0') != std::string::npos || drive) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path.string(), ": invalid external data file name '", name,
                     "': expected one plain file name in the output folder (no '/', '\\', '..' or drive)"));
  }
  return absl::OkStatus();
}

// Picks the data file name: `wanted`, else "<wanted>.1", "<wanted>.2" ...,
// skipping names of files the model reads and the model file itself.
absl::StatusOr<std::string> ChooseDataFileName(const std::string& wanted, const fs::path& model_path,
                                               const SourceFiles& sources) {
  const fs::path folder = FolderOf(model_path);
  const std::string model_name = model_path.filename().string();
  for (int i = 0; i < kMaxDataNameAttempts; ++i) {
    std::string name = i == 0 ? wanted : absl::StrCat(wanted, ".", i);
    if (name == model_name || sources.Contains(folder / name)) continue;
    return name;
  }
  return absl::AlreadyExistsError(absl::StrCat(model_path.string(),
                                               ": no free external data file name after '", wanted, ".",
                                               kMaxDataNameAttempts - 1, "'"));
}

// Collects the tensors whose data moves to the output data file, reading
// external sources through `resolver`.
absl::StatusOr<std::vector<Piece>> CollectPieces(pb::ModelProto* model, ExternalDataResolver* resolver,
                                                 int64_t threshold, SourceFiles* sources) {
  std::vector<Piece> pieces;
  TensorWalker walker([&](pb::TensorProto* t, const std::string& where) -> absl::Status {
    if (HasExternalData(*t)) {
      auto data = resolver->Read(*t);
      if (!data.ok()) return AnnotateStatus(data.status(), where);
      // Read succeeded, so the location parses and resolves.
      auto info = ParseExternalData(*t);
      if (info.ok()) {
        auto resolved = resolver->ResolveLocation(info->location);
        if (resolved.ok()) sources->Add(*resolved);
      }
      pieces.push_back({t, *std::move(data)});
    } else if (threshold >= 0 && !t->raw_data.empty() &&
               static_cast<uint64_t>(t->raw_data.size()) >= static_cast<uint64_t>(threshold)) {
      pieces.push_back({t, t->raw_data});
    }
    return absl::OkStatus();
  });
  ONNXKIT_RETURN_IF_ERROR(walker.Model(model));
  return pieces;
}

// Assigns offsets (see the layout at the top of this file) and points each
// tensor at `name`. Returns the data file size.
absl::StatusOr<int64_t> LayOut(std::vector<Piece>* pieces, const std::string& name, const fs::path& path) {
  int64_t end = 0;
  for (Piece& piece : *pieces) {
    const int64_t size = static_cast<int64_t>(piece.data.size());
    const int64_t align = size >= kPageAlignThreshold ? kPageAlignment : kSmallAlignment;
    auto padded = CheckedAdd(end, (align - end % align) % align);
    auto next = padded ? CheckedAdd(*padded, size) : std::nullopt;
    if (!next) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path.string(), ": external data file size overflows int64"));
    }
    piece.offset = *padded;
    end = *next;
    pb::TensorProto* t = piece.tensor;
    t->external_data.clear();
    for (auto [key, value] : {std::pair<const char*, std::string>{"location", name},
                              {"offset", absl::StrCat(piece.offset)},
                              {"length", absl::StrCat(size)}}) {
      pb::StringStringEntryProto entry;
      entry.key = key;
      entry.value = value;
      t->external_data.push_back(std::move(entry));
    }
    t->data_location = 1;
    t->MarkPresent(14);
    t->raw_data = Bytes();
    t->present &= ~(uint64_t{1} << 9);
  }
  return end;
}

absl::Status WriteDataFile(TempFile* file, const std::vector<Piece>& pieces) {
  int64_t written = 0;
  for (const Piece& piece : pieces) {
    ONNXKIT_RETURN_IF_ERROR(file->WriteZeros(piece.offset - written));
    ONNXKIT_RETURN_IF_ERROR(file->Write(piece.data.view()));
    written = piece.offset + static_cast<int64_t>(piece.data.size());
  }
  return file->Finish();
}

}  // namespace

// --- MappedFile ---------------------------------------------------------

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const fs::path& path, int64_t max_bytes,
                                                                   bool follow_symlinks) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // after fstat anyway); it has no effect on regular files.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_symlinks ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP && !follow_symlinks) {
      return absl::FailedPreconditionError(absl::StrCat(path.string(), ": is a symlink (not followed)"));
    }
    if (err == ENXIO) {
      return absl::FailedPreconditionError(absl::StrCat(path.string(), ": is not a regular file"));
    }
    return ErrnoStatus(err, path, "cannot open");
  }
  return MapFd(fd, path, max_bytes);
}

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::MapFd(int fd, const fs::path& path,
                                                                    int64_t max_bytes) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path.string(), ": is ", Sv(FileKind(st.st_mode)), ", not a regular file"));
  }
  if (st.st_size < 0 || st.st_size > max_bytes) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(path.string(), ": file is ", st.st_size,
                                                     " bytes, over the limit of ", max_bytes, " bytes"));
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, path, "cannot map");
    }
    file->data_ = static_cast<const char*>(p);
    file->size_ = static_cast<size_t>(st.st_size);
  }
  ::close(fd);  // the mapping stays valid
  return std::shared_ptr<const MappedFile>(std::move(file));
}

void MappedFile::ReleasePages(const void* data, size_t size) const {
  const uintptr_t file_begin = reinterpret_cast<uintptr_t>(data_), file_end = file_begin + size_;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + size;
  if (data == nullptr || size_ == 0 || begin < file_begin || end > file_end) return;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_size > 0 ? static_cast<uintptr_t>(page_size) : 4096;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

// --- Load ---------------------------------------------------------------

absl::StatusOr<LoadedModel> LoadModel(const fs::path& path, const LoadOptions& options) {
  LoadedModel loaded;
  ONNXKIT_ASSIGN_OR_RETURN(loaded.mapping, MappedFile::Open(path, options.max_file_bytes));
  const std::string_view bytes = loaded.mapping->bytes();
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is not an ONNX model (empty file)"));
  }
  DecodeOptions decode_options;
  decode_options.keepalive = loaded.mapping;
  auto model = DecodeModel(bytes, decode_options);
  if (!model.ok()) {
    if (model.status().code() != absl::StatusCode::kDataLoss)
      return AnnotateStatus(model.status(), path.string());
    return absl::DataLossError(
        absl::StrCat(path.string(), ": not a valid ONNX model (", model.status().message(), ")"));
  }
  if (!model->graph && model->opset_import.empty() && model->ir_version == 0 && !model->Has(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.string(),
        ": is not an ONNX model (a protobuf message with no graph, opset_import or ir_version)"));
  }
  loaded.proto = *std::move(model);
  loaded.path = path;
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  loaded.base_dir = FolderOf(ec ? path : absolute);
  return loaded;
}

// --- Save ---------------------------------------------------------------

absl::Status WriteFileAtomically(const fs::path& requested, std::string_view bytes) {
  ONNXKIT_ASSIGN_OR_RETURN(OutputTarget target, ResolveOutput(requested));
  const fs::path& path = target.path;
  if (target.stream) {
    ONNXKIT_ASSIGN_OR_RETURN(StreamFile stream, StreamFile::Open(path));
    ONNXKIT_RETURN_IF_ERROR(stream.Write(bytes));
    return stream.Close();
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<TempFile> file, TempFile::Create(path));
  ONNXKIT_RETURN_IF_ERROR(file->Write(bytes));
  ONNXKIT_RETURN_IF_ERROR(file->Finish());
  ONNXKIT_RETURN_IF_ERROR(file->Commit());
  SyncFolder(FolderOf(path));
  return absl::OkStatus();
}

// Given: a model, the folder its external data locations are relative to,
//   an output path whose folder exists.
// Execute: copies the model; gathers external tensors (read and validated
//   through ExternalDataResolver) and inline raw data at or over the
//   threshold; lays them out in one data file with a fresh name; writes the
//   data file and the model to temporary files; renames the data file, then
//   the model, into place.
// Result: `path` holds the encoded model, referring only to the data file
//   written here; on error no existing file was replaced (temporary files
//   are removed).
absl::Status SaveModel(const pb::ModelProto& model, const fs::path& source_base_dir,
                       const fs::path& requested, const SaveOptions& options) {
  ONNXKIT_ASSIGN_OR_RETURN(OutputTarget target, ResolveOutput(requested));
  const fs::path& path = target.path;
  pb::ModelProto copy = model;
  ExternalDataResolver resolver(source_base_dir);
  SourceFiles sources;
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<Piece> pieces,
                           CollectPieces(&copy, &resolver, options.external_data_threshold, &sources));
  if (sources.Contains(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path.string(),
                     ": cannot save: the model reads its external data from this file; choose another path"));
  }
  std::string data_name;
  if (!pieces.empty()) {
    std::string wanted = options.external_data_name.empty() ? absl::StrCat(path.filename().string(), ".data")
                                                            : options.external_data_name;
    ONNXKIT_RETURN_IF_ERROR(CheckDataFileName(wanted, path));
    ONNXKIT_ASSIGN_OR_RETURN(data_name, ChooseDataFileName(wanted, path, sources));
    ONNXKIT_RETURN_IF_ERROR(LayOut(&pieces, data_name, path).status());
  }
  const uint64_t size = EncodedSize(copy);
  if (size > static_cast<uint64_t>(limits::kMaxProtoBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path.string(), ": cannot save: the model would be ", size,
        " bytes, over the 2 GiB protobuf limit; store large tensors as external data (--external-data)"));
  }
  if (target.stream) {
    if (!pieces.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(requested.string(),
                       ": cannot save: external data needs a file beside the model, and this is a device or "
                       "pipe; write to a file"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(StreamFile stream, StreamFile::Open(path));
    ONNXKIT_RETURN_IF_ERROR(EncodeToSink(copy, [&](std::string_view piece) { return stream.Write(piece); }));
    return stream.Close();
  }
  std::unique_ptr<TempFile> data_file;
  if (!pieces.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(data_file, TempFile::Create(FolderOf(path) / data_name));
    ONNXKIT_RETURN_IF_ERROR(WriteDataFile(data_file.get(), pieces));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<TempFile> model_file, TempFile::Create(path));
  ONNXKIT_RETURN_IF_ERROR(
      EncodeToSink(copy, [&](std::string_view piece) { return model_file->Write(piece); }));
  ONNXKIT_RETURN_IF_ERROR(model_file->Finish());
  if (data_file) ONNXKIT_RETURN_IF_ERROR(data_file->Commit());
  ONNXKIT_RETURN_IF_ERROR(model_file->Commit());
  SyncFolder(FolderOf(path));
  return absl::OkStatus();
}

}  // namespace onnxkit::io
