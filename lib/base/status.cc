// AnnotateStatus: context on the way up; usage errors.
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/base/usage_error.h"

namespace onnxkit {

absl::Status AnnotateStatus(const absl::Status& status, std::string_view context) {
  if (status.ok() || context.empty()) return status;
  // Context the message already starts with is not repeated.
  std::string_view message = StdSv(status.message());
  if (message.size() > context.size() + 1 && message.substr(0, context.size()) == context &&
      message.substr(context.size(), 2) == ": ") {
    return status;
  }
  absl::Status annotated(status.code(), absl::StrCat(Sv(context), ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

namespace {
constexpr char kUsagePayload[] = "onnxkit.dev/usage";
}  // namespace

absl::Status UsageError(std::string_view message) {
  return AsUsageError(absl::InvalidArgumentError(std::string(message)));
}

absl::Status AsUsageError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) { return status.GetPayload(kUsagePayload).has_value(); }

}  // namespace onnxkit
