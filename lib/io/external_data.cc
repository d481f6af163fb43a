// External tensor data: parsing the external_data entries, resolving a
// location safely inside the model folder, and reading the bytes as a view
// into a cached read-only mapping.
//
// Error codes: InvalidArgument for malformed entries and sizes that contradict
// the tensor's dims; PermissionDenied for a location refused by policy
// (absolute, "..", symlink, hard link, NUL, backslash, drive, leaving the
// folder); NotFound for a missing file; FailedPrecondition for a target that
// is not a regular file; OutOfRange for offset/length past the end of file.
//
// Files are opened component by component from the model folder with
// O_NOFOLLOW (openat), so a symlink swapped in after the lstat checks of
// ResolveLocation is refused too, and only the opened descriptor is mapped.
#include "lib/io/external_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/model_io.h"

namespace onnxkit::io {
namespace {

namespace fs = std::filesystem;

// External data files have no size limit of their own (they exist to hold
// more than 2 GiB); each region read is limited instead.
constexpr int64_t kMaxDataFileBytes = std::numeric_limits<int64_t>::max();

// Quotes a string from a file for a message: control bytes become \xNN.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  return out;
}

std::string TensorLabel(const pb::TensorProto& t) { return absl::StrCat("tensor ", Quote(t.name)); }

std::string ErrnoText(int err) {
  char buffer[256];
  return std::string(strerror_r(err, buffer, sizeof(buffer)));
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

// Decimal, non-negative, fits int64; no sign, no spaces.
absl::StatusOr<int64_t> ParseNonNegative(const pb::TensorProto& t, const std::string& key,
                                         const std::string& value) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
    std::string why =
        !value.empty() && value[0] == '-' ? "is negative" : "is not a non-negative decimal integer";
    return absl::InvalidArgumentError(
        absl::StrCat(TensorLabel(t), ": external_data ", key, " ", Quote(value), " ", why));
  }
  int64_t n = 0;
  for (char c : value) {
    auto times10 = CheckedMul(n, 10);
    auto next = times10 ? CheckedAdd(*times10, c - '0') : std::nullopt;
    if (!next) {
      return absl::InvalidArgumentError(
          absl::StrCat(TensorLabel(t), ": external_data ", key, " ", Quote(value), " does not fit in int64"));
    }
    n = *next;
  }
  return n;
}

// Splits a location into its components, refusing every unsafe form.
absl::StatusOr<std::vector<std::string>> LocationComponents(const std::string& location) {
  const std::string q = Quote(location);
  if (location.empty()) return absl::InvalidArgumentError("external data location is empty");
  auto refuse = [&](std::string_view why) {
    return absl::PermissionDeniedError(absl::StrCat("external data location ", q, " refused: ", Sv(why)));
  };
  if (location.find('\0') != std::string::npos) return refuse("contains a NUL byte");
  if (location.rfind("*/_ORT_", 0) == 0) return refuse("is an in-memory address marker, not a file");
  if (location.find('\\') != std::string::npos)
    return refuse("contains a backslash (Windows paths are refused)");
  if (location[0] == '/') return refuse("is an absolute path");
  if (location.size() >= 2 && location[1] == ':' &&
      ((location[0] >= 'a' && location[0] <= 'z') || (location[0] >= 'A' && location[0] <= 'Z'))) {
    return refuse("starts with a drive letter");
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= location.size()) {
    size_t slash = location.find('/', start);
    if (slash == std::string::npos) slash = location.size();
    std::string part = location.substr(start, slash - start);
    if (part == "..") return refuse("has a '..' component");
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = slash + 1;
  }
  if (parts.empty())
    return absl::InvalidArgumentError(absl::StrCat("external data location ", q, " names no file"));
  if (location.back() == '/') {
    return absl::FailedPreconditionError(absl::StrCat("external data location ", q, " names a directory"));
  }
  return parts;
}

// True when `inner` is `outer` or below it (both canonical).
bool IsWithin(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty() && std::next(o) == outer.end()) break;  // trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<ExternalDataInfo> ParseExternalData(const pb::TensorProto& tensor) {
  ExternalDataInfo info;
  bool seen_location = false, seen_offset = false, seen_length = false, seen_checksum = false;
  for (const pb::StringStringEntryProto& entry : tensor.external_data) {
    bool* seen = nullptr;
    if (entry.key == "location") seen = &seen_location;
    if (entry.key == "offset") seen = &seen_offset;
    if (entry.key == "length") seen = &seen_length;
    if (entry.key == "checksum") seen = &seen_checksum;
    if (seen == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(TensorLabel(tensor), ": unknown external_data key ",
                                                     Quote(entry.key),
                                                     " (expected location, offset, length or checksum)"));
    }
    if (*seen) {
      return absl::InvalidArgumentError(
          absl::StrCat(TensorLabel(tensor), ": duplicate external_data key ", Quote(entry.key)));
    }
    *seen = true;
    if (seen == &seen_location) info.location = entry.value;
    if (seen == &seen_checksum) info.checksum = entry.value;
    if (seen == &seen_offset) {
      ONNXKIT_ASSIGN_OR_RETURN(info.offset, ParseNonNegative(tensor, entry.key, entry.value));
    }
    if (seen == &seen_length) {
      ONNXKIT_ASSIGN_OR_RETURN(info.length, ParseNonNegative(tensor, entry.key, entry.value));
    }
  }
  if (!seen_location) {
    return absl::InvalidArgumentError(absl::StrCat(TensorLabel(tensor), ": external_data has no 'location'"));
  }
  return info;
}

ExternalDataResolver::ExternalDataResolver(fs::path base_dir) : base_dir_(std::move(base_dir)) {}

ExternalDataResolver::~ExternalDataResolver() = default;

absl::StatusOr<fs::path> ExternalDataResolver::ResolveLocation(const std::string& location) const {
  if (base_dir_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no model folder to resolve external data location ", Quote(location), " against"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<std::string> parts, LocationComponents(location));
  const std::string q = Quote(location);
  fs::path current = base_dir_;
  for (size_t i = 0; i < parts.size(); ++i) {
    current /= parts[i];
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return absl::NotFoundError(
            absl::StrCat("external data file ", q, " not found (", current.string(), ")"));
      }
      return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat("external data location ", q, ": ",
                                                                     current.string(), ": ", ErrnoText(err)));
    }
    if (S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat("external data location ", q, " refused: '", current.string(), "' is a symlink"));
    }
    const bool last = i + 1 == parts.size();
    if (!last && !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat("external data location ", q, ": '", current.string(),
                                                        "' is ", Sv(FileKind(st.st_mode)), ", not a folder"));
    }
    if (last && !S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat("external data location ", q, ": '", current.string(),
                                                        "' is ", Sv(FileKind(st.st_mode)),
                                                        ", not a regular file"));
    }
    if (last && st.st_nlink > 1) {
      return absl::PermissionDeniedError(absl::StrCat("external data location ", q, " refused: '",
                                                      current.string(), "' has ", st.st_nlink,
                                                      " hard links"));
    }
  }
  // Defense in depth: with no symlink and no "..", this always holds.
  std::error_code ec1, ec2;
  fs::path canonical_base = fs::canonical(base_dir_, ec1);
  fs::path canonical_target = fs::canonical(current, ec2);
  if (ec1 || ec2 || !IsWithin(canonical_target, canonical_base)) {
    return absl::PermissionDeniedError(
        absl::StrCat("external data location ", q, " refused: it resolves outside the model folder"));
  }
  return current;
}

absl::StatusOr<std::shared_ptr<const MappedFile>> ExternalDataResolver::Open(const fs::path& resolved) {
  auto cached = open_files_.find(resolved.string());
  if (cached != open_files_.end()) return cached->second;

  // `resolved` is base_dir_ / component...; walk it again from a folder
  // descriptor without following any symlink.
  const fs::path relative = resolved.lexically_relative(base_dir_);
  std::vector<std::string> parts;
  for (const fs::path& p : relative) {
    if (!p.empty() && p != ".") parts.push_back(p.string());
  }
  if (parts.empty() || relative.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(resolved.string(), ": not inside ", base_dir_.string()));
  }
  Fd dir(::open(base_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(base_dir_.string(), ": cannot open the model folder: ", ErrnoText(err)));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (last ? O_NONBLOCK | O_NOCTTY : O_DIRECTORY);
    Fd next(::openat(dir.get(), parts[i].c_str(), flags));
    if (next.get() < 0) {
      int err = errno;
      if (err == ELOOP) {
        return absl::PermissionDeniedError(
            absl::StrCat(resolved.string(), ": refused: '", parts[i], "' is a symlink"));
      }
      if (err == ENOTDIR)
        return absl::FailedPreconditionError(
            absl::StrCat(resolved.string(), ": '", parts[i], "' is not a folder"));
      if (err == ENXIO)
        return absl::FailedPreconditionError(absl::StrCat(resolved.string(), ": is not a regular file"));
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat(resolved.string(), ": cannot open: ", ErrnoText(err)));
    }
    dir = std::move(next);
  }
  struct stat st;
  if (::fstat(dir.get(), &st) != 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(resolved.string(), ": cannot stat: ", ErrnoText(err)));
  }
  if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
    return absl::PermissionDeniedError(
        absl::StrCat(resolved.string(), ": refused: the file has ", st.st_nlink, " hard links"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file,
                           MappedFile::MapFd(dir.release(), resolved, kMaxDataFileBytes));
  open_files_.emplace(resolved.string(), file);
  return file;
}

absl::StatusOr<Bytes> ExternalDataResolver::Read(const pb::TensorProto& tensor) {
  const std::string label = TensorLabel(tensor);
  if (!HasExternalData(tensor)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": does not store its data externally"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ExternalDataInfo info, ParseExternalData(tensor));
  auto resolved = ResolveLocation(info.location);
  if (!resolved.ok()) return AnnotateStatus(resolved.status(), label);
  auto file = Open(*resolved);
  if (!file.ok()) return AnnotateStatus(file.status(), label);
  const std::string_view bytes = (*file)->bytes();
  const int64_t file_size = static_cast<int64_t>(bytes.size());
  const std::string where =
      absl::StrCat(label, ": external data in ", Quote(info.location), " (", file_size, " bytes)");
  if (info.offset > file_size) {
    return absl::OutOfRangeError(
        absl::StrCat(where, ": offset ", info.offset, " is past the end of the file"));
  }
  const int64_t length = info.length.value_or(file_size - info.offset);
  auto end = CheckedAdd(info.offset, length);
  if (!end || *end > file_size) {
    return absl::OutOfRangeError(
        absl::StrCat(where, ": offset ", info.offset, " + length ", length, " is past the end of the file"));
  }
  if (length > limits::kMaxExternalTensorBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": length ", length, " is over the limit of ",
                                                     limits::kMaxExternalTensorBytes, " bytes per tensor"));
  }
  if (DataTypeBits(tensor.data_type) > 0) {
    auto count = CheckedElementCount(tensor.dims);
    auto expected = count ? RawByteSize(tensor.data_type, *count) : std::nullopt;
    if (!expected) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": dims [", absl::StrJoin(tensor.dims, ", "),
                                                     "] are negative or their byte size overflows int64"));
    }
    if (*expected != length) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": length ", length, " does not match dims [", absl::StrJoin(tensor.dims, ", "),
                       "] of ", Sv(DataTypeName(tensor.data_type)), " (", *expected, " bytes)"));
    }
  }
  return Bytes::View(*file, bytes.data() + info.offset, static_cast<size_t>(length));
}

absl::Status ExternalDataResolver::Validate(const pb::TensorProto& tensor) { return Read(tensor).status(); }

absl::StatusOr<Bytes> TensorRawBytes(const pb::TensorProto& tensor, ExternalDataResolver* resolver) {
  if (HasExternalData(tensor)) {
    if (resolver == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(TensorLabel(tensor), ": stores its data externally and no model folder was given"));
    }
    return resolver->Read(tensor);
  }
  if (!tensor.raw_data.empty() || tensor.Has(9)) return tensor.raw_data;
  return absl::NotFoundError(
      absl::StrCat(TensorLabel(tensor), ": has no raw data (its values are in typed fields)"));
}

namespace {

// Walks a model bringing external tensors inline (InlineExternalTensors).
class Inliner {
 public:
  Inliner(ExternalDataResolver* resolver, bool initializers)
      : resolver_(resolver), initializers_(initializers) {}

  absl::Status Tensor(pb::TensorProto& t) {
    if (!HasExternalData(t)) return absl::OkStatus();
    if (resolver_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tensor '", t.name, "' has external data and the model ", "has no folder to read it from"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Bytes data, resolver_->Read(t));
    done_.bytes += static_cast<int64_t>(data.size());
    ++done_.tensors;
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
    if (initializers_) {
      for (pb::TensorProto& t : g.initializer) ONNXKIT_RETURN_IF_ERROR(Tensor(t));
      for (pb::SparseTensorProto& s : g.sparse_initializer) ONNXKIT_RETURN_IF_ERROR(Sparse(s));
    }
    return Nodes(g.node, depth);
  }

  const InlinedTensors& done() const { return done_; }

 private:
  ExternalDataResolver* resolver_;
  bool initializers_;
  InlinedTensors done_;
};

}  // namespace

absl::StatusOr<InlinedTensors> InlineExternalTensors(pb::ModelProto& model, ExternalDataResolver* resolver,
                                                     bool initializers) {
  Inliner inliner(resolver, initializers);
  if (model.graph) ONNXKIT_RETURN_IF_ERROR(inliner.Graph(*model.graph, 0));
  for (pb::FunctionProto& f : model.functions) ONNXKIT_RETURN_IF_ERROR(inliner.Nodes(f.node, 0));
  return inliner.done();
}

}  // namespace onnxkit::io
