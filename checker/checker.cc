// CheckFile / CheckModel: loading (container rules), then the rule groups in
// order, each gated on the soundness of what it needs.
#include "checker/checker.h"

#include <cctype>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checker/rules/rules.h"
#include "lib/base/strings.h"
#include "lib/infer/infer.h"
#include "lib/io/model_io.h"


namespace onnxkit::checker {
namespace {

// The byte offset in a decoder message ("... at byte offset 123: ..."); -1.
int64_t ByteOffsetIn(std::string_view message) {
  constexpr std::string_view kMarker = "byte offset ";
  const size_t at = message.find(kMarker);
  if (at == std::string_view::npos) return -1;
  int64_t offset = 0;
  size_t i = at + kMarker.size();
  const size_t start = i;
  for (; i < message.size() && std::isdigit(static_cast<unsigned char>(message[i])) && i - start < 18; ++i) {
    offset = offset * 10 + (message[i] - '0');
  }
  return i == start ? -1 : offset;
}

// A LoadModel failure as a container diagnostic (see lib/io/model_io.h for
// the codes).
void ReportLoadError(const absl::Status& status, const std::string& path, internal::Sink* sink) {
  std::string message(status.message());
  const std::string prefix = path + ": ";
  if (absl::StartsWith(message, prefix)) message.erase(0, prefix.size());
  const int64_t offset = ByteOffsetIn(message);
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      if (absl::StrContains(message, "MiB of memory")) {
        sink->Report(rules::kE0105, "", std::move(message), "", offset);
      } else {
        sink->Report(rules::kE0103, "", std::move(message),
                     "keep large tensors in external data files next to the model", offset);
      }
      return;
    case absl::StatusCode::kDataLoss:
      if (absl::StrContains(message, "nested deeper")) {
        sink->Report(rules::kE0104, "", std::move(message), "", offset);
      } else {
        sink->Report(rules::kE0101, "", std::move(message),
                     "the file is truncated, corrupted, or not an ONNX model", offset);
      }
      return;
    case absl::StatusCode::kInvalidArgument:
      sink->Report(rules::kE0102, "", std::move(message), "", offset);
      return;
    default:  // NotFound, PermissionDenied, FailedPrecondition, I/O errors
      sink->Report(rules::kE0100, "", std::move(message));
      return;
  }
}

// The checker rule of an inference issue.
rules::RuleId RuleOf(infer::IssueKind kind) {
  switch (kind) {
    case infer::IssueKind::kTypeConflict: return rules::kE0600;
    case infer::IssueKind::kImpossibleShape: return rules::kE0601;
    case infer::IssueKind::kShapeConflict: return rules::kE0602;
    case infer::IssueKind::kTypeConstraint: return rules::kE0603;
  }
  return rules::kE0601;
}

// Type and shape inference (--full), run only on a structurally valid model.
void RunInference(const pb::ModelProto& model, internal::Sink* sink) {
  for (infer::InferenceIssue& issue : infer::InferModel(model)) {
    sink->Report(RuleOf(issue.rule), std::move(issue.location), std::move(issue.message));
  }
}

}  // namespace

std::string_view FileStatusName(FileStatus status) {
  switch (status) {
    case FileStatus::kValid:
      return "valid";
    case FileStatus::kInvalid:
      return "invalid";
    case FileStatus::kRefused:
      return "refused";
  }
  return "";
}

CheckResult CheckModel(const pb::ModelProto& model, const std::filesystem::path& base_dir,
                       const CheckOptions& options, const std::string& display_path) {
  CheckResult result;
  result.path = display_path;
  internal::Sink sink(options, &result);
  internal::ModelFacts facts;

  internal::CheckModelRules(model, &facts, &sink);
  const int before_graph = sink.hard_errors();
  if (!sink.stopped()) internal::CheckGraphRules(model, facts, &sink);
  const bool graph_sound = sink.hard_errors() == before_graph;
  if (!sink.stopped()) {
    if (!facts.opsets_sound) {
      sink.Note("node rules (E04xx) were skipped: the opset imports are invalid");
    } else if (!graph_sound) {
      sink.Note("node rules (E04xx) were skipped: the graph structure is invalid");
    } else {
      internal::CheckNodeRules(model, facts, options, &sink);
    }
  }
  if (!sink.stopped()) internal::CheckTensorRules(model, base_dir, &sink);
  if (options.full && !sink.stopped()) {
    if (sink.hard_errors() > 0) {
      sink.Note("--full was skipped: type and shape inference needs a model without structural errors");
    } else {
      RunInference(model, &sink);
    }
  }
  return result;
}

CheckResult CheckFile(const std::filesystem::path& path, const CheckOptions& options) {
  absl::StatusOr<io::LoadedModel> loaded = io::LoadModel(path);
  if (!loaded.ok()) {
    CheckResult result;
    result.path = path.string();
    internal::Sink sink(options, &result);
    ReportLoadError(loaded.status(), path.string(), &sink);
    return result;
  }
  return CheckModel(loaded->proto, loaded->base_dir, options, path.string());
}

}  // namespace onnxkit::checker
