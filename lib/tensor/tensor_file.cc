// Tensor files: dispatch by extension to the .pb codec, .npy and .npz.
#include "lib/tensor/tensor_file.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/external_data.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/npy.h"
#include "lib/tensor/npz.h"
#include "lib/tensor/tensor_data.h"

namespace onnxkit::tensor {
namespace {

enum class Format { kPb, kNpy, kNpz };

absl::StatusOr<Format> FormatOf(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".pb") return Format::kPb;
  if (ext == ".npy") return Format::kNpy;
  if (ext == ".npz") return Format::kNpz;
  return absl::InvalidArgumentError(absl::StrCat("unsupported tensor file extension '",
                                                 ext.empty() ? std::string("(none)") : ext,
                                                 "' (supported: ", Sv(SupportedTensorFileExtensions()), ")"));
}

// A .pb tensor with its external data (if any) loaded as raw_data.
absl::StatusOr<pb::TensorProto> ReadPb(const std::filesystem::path& path,
                                       const std::shared_ptr<const io::MappedFile>& file) {
  io::DecodeOptions options;
  options.keepalive = file;
  ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, io::DecodeTensor(file->bytes(), options));
  if (IsExternal(t)) {
    io::ExternalDataResolver resolver(path.parent_path().empty() ? std::filesystem::path(".")
                                                                 : path.parent_path());
    ONNXKIT_ASSIGN_OR_RETURN(Bytes data, resolver.Read(t));
    t.raw_data = std::move(data);
    t.MarkPresent(9);
    t.external_data.clear();
    t.data_location = 0;
  }
  return t;
}

absl::StatusOr<std::vector<pb::TensorProto>> ReadByFormat(const std::filesystem::path& path, Format format) {
  const int64_t limit = format == Format::kPb ? kMaxTensorPbFileBytes : kMaxNumpyFileBytes;
  // MappedFile's messages already start with the path.
  auto file = io::MappedFile::Open(path, limit);
  if (!file.ok()) return file.status();
  std::vector<pb::TensorProto> tensors;
  absl::Status st;
  if (format == Format::kPb) {
    auto t = ReadPb(path, *file);
    st = t.status();
    if (t.ok()) tensors.push_back(*std::move(t));
  } else if (format == Format::kNpy) {
    auto t = ReadNpy((*file)->bytes(), path.stem().string());
    st = t.status();
    if (t.ok()) tensors.push_back(*std::move(t));
  } else {
    auto ts = ReadNpz((*file)->bytes());
    st = ts.status();
    if (ts.ok()) tensors = *std::move(ts);
  }
  for (const pb::TensorProto& t : tensors) {
    if (!st.ok()) break;
    st = ValidateTensorData(t);
  }
  if (!st.ok()) return AnnotateStatus(st, path.string());
  return tensors;
}

}  // namespace

std::string_view SupportedTensorFileExtensions() { return ".pb, .npy, .npz"; }

absl::StatusOr<std::vector<pb::TensorProto>> ReadTensorFile(const std::filesystem::path& path) {
  auto format = FormatOf(path);
  if (!format.ok()) return AnnotateStatus(format.status(), path.string());
  return ReadByFormat(path, *format);
}

absl::Status WriteTensorFile(const std::filesystem::path& path, const pb::TensorProto& tensor) {
  auto format = FormatOf(path);
  if (!format.ok()) return AnnotateStatus(format.status(), path.string());
  absl::StatusOr<std::string> bytes;
  if (*format == Format::kPb) {
    absl::Status valid = ValidateTensorData(tensor);
    bytes = valid.ok() ? absl::StatusOr<std::string>(io::Encode(tensor)) : valid;
  } else if (*format == Format::kNpy) {
    bytes = WriteNpy(tensor);
  } else {
    bytes = WriteNpz({tensor});
  }
  if (!bytes.ok()) return AnnotateStatus(bytes.status(), path.string());
  // WriteFileAtomically's messages name the path.
  return io::WriteFileAtomically(path, *bytes);
}

}  // namespace onnxkit::tensor
