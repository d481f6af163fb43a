// GoldenStore: records a reference run value by value into a scratch folder.
#include "bisect/golden.h"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/session.h"

namespace onnxkit::bisect {

pb::TypeProto TypeOfValue(const runner::RtValue& v) {
  pb::TypeProto type;
  // Sequences, optionals and maps: the kind, which is what reading the
  // recorded proto back needs.
  if (v.is_sequence()) type.sequence_type = pb::TypeProto::Sequence{};
  if (v.is_optional()) type.optional_type = pb::TypeProto::Optional{};
  if (v.is_map()) type.map_type = pb::TypeProto::Map{};
  if (!v.is_tensor()) return type;
  auto& t = type.tensor_type.mutable_value();
  t.elem_type = v.tensor().dtype();
  auto& shape = t.shape.mutable_value();
  for (int64_t d : v.tensor().shape()) {
    pb::TensorShapeProto::Dimension dim;
    dim.kind = pb::TensorShapeProto::Dimension::kValue;
    dim.dim_value = d;
    shape.dim.push_back(dim);
  }
  return type;
}

absl::Status GoldenStore::Put(const std::string& name, const runner::RtValue& value, const void* source) {
  if (ambiguous_.count(name) > 0) return absl::OkStatus();
  if (auto it = index_.find(name); it != index_.end()) {
    const void*& first = source_[name];
    if (first == nullptr) first = source;                               // a fed input, now seen running
    if (first == source || source == nullptr) return absl::OkStatus();  // the same value (a later iteration)
    std::error_code ec;
    std::filesystem::remove(it->second.file, ec);
    index_.erase(it);
    order_.erase(std::find(order_.begin(), order_.end(), name));
    ambiguous_.insert(name);
    return absl::OkStatus();
  }
  std::error_code ec;
  std::filesystem::create_directories(scratch_, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", scratch_.string(), ": ", ec.message()));
  std::filesystem::path file = scratch_ / runner::SafeFileName(name, files_++);
  ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(file, runner::ValueToPbBytes(value, name)));
  index_[name] = Entry{file, TypeOfValue(value)};
  source_[name] = source;
  order_.push_back(name);
  return absl::OkStatus();
}

absl::Status GoldenStore::Record(const io::LoadedModel& loaded, const runner::InputSpec& spec,
                                 std::string* run_error, double timeout_seconds) {
  io::LoadedModel copy = loaded;
  runner::SessionOptions options;
  options.backend = runner::Backend::kReference;
  options.timeout_seconds = timeout_seconds;
  options.observer = [this](const ir::Value& value, const runner::RtValue& v) {
    return Put(value.name(), v, &value);
  };
  // Body values too: a candidate that inlines an If branch feeds them.
  options.observe_subgraphs = true;
  auto session = runner::Session::Create(std::move(copy), options);
  if (!session.ok()) {
    *run_error = std::string(session.status().message());
    return absl::OkStatus();
  }
  auto feeds = runner::PrepareInputs((*session)->FeedInputs(), spec, (*session)->OverridableInputs());
  if (!feeds.ok()) return absl::InvalidArgumentError(feeds.status().message());
  feeds_ = *feeds;
  for (const auto& [name, value] : feeds_) ONNXKIT_RETURN_IF_ERROR(Put(name, value));
  auto outputs = (*session)->Run(*feeds);
  if (!outputs.ok()) *run_error = std::string(outputs.status().message());
  return absl::OkStatus();
}

absl::StatusOr<runner::RtValue> GoldenStore::Load(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return absl::NotFoundError(absl::StrCat("no golden value for '", name, "'"));
  std::ifstream in(it->second.file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", it->second.file.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  ONNXKIT_ASSIGN_OR_RETURN(runner::RtValue v, runner::ValueFromPbBytes(bytes, &it->second.type));
  // Own the data: the decoded tensor may view `bytes`.
  if (v.is_tensor()) return runner::RtValue::FromTensor(v.tensor().Clone());
  return v;
}

const pb::TypeProto* GoldenStore::TypeOf(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &it->second.type;
}

}  // namespace onnxkit::bisect
