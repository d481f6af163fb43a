// GoldenStore: records a reference run value by value into a scratch file.
#include "bisect/golden.h"

#include <stdlib.h>

#include <algorithm>
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
    index_.erase(it);  // (its bytes stay in the file, unread)
    order_.erase(std::find(order_.begin(), order_.end(), name));
    ambiguous_.insert(name);
    return absl::OkStatus();
  }
  if (!spill_.is_open()) {
    std::error_code ec;
    std::filesystem::create_directories(scratch_, ec);
    if (ec)
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", scratch_.string(), ": ", ec.message()));
    ONNXKIT_RETURN_IF_ERROR(spill_.Create(scratch_ / "golden.bin"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(io::SpillFile::Span span, spill_.Append(runner::ValueToPbBytes(value, name)));
  index_[name] = Entry{span, TypeOfValue(value)};
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
  ONNXKIT_ASSIGN_OR_RETURN(const std::string bytes, spill_.Read(it->second.span));
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
