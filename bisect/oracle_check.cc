// The check-fails oracle: the checker (with type and shape inference)
// reports an error of the pinned code.
#include <set>

#include "absl/strings/str_cat.h"
#include "bisect/oracle.h"
#include "checker/checker.h"
#include "checker/diagnostic.h"
#include "lib/base/strings.h"

namespace onnxkit::bisect {
namespace {

class CheckFailsOracle : public Oracle {
 public:
  explicit CheckFailsOracle(std::string code) : code_(std::move(code)) {}

  std::string Describe() const override { return absl::StrCat("check-fails ", code_.empty() ? "(any)" : code_); }
  bool Runs() const override { return false; }

  absl::StatusOr<bool> Prepare(const pb::ModelProto& original, std::string* why) override {
    std::set<std::string> codes;
    std::string first;
    for (const checker::Diagnostic& d : Check(original)) {
      std::string code(d.rule->code);
      if (first.empty()) first = code;
      if (codes.insert(code).second) allowed_.push_back(code);
    }
    if (first.empty()) {
      *why = "the checker finds no error in the original";
      return false;
    }
    if (code_.empty()) code_ = first;
    if (codes.count(code_) == 0) {
      *why = absl::StrCat("the checker finds no ", code_, " error in the original (it finds ", first, ")");
      return false;
    }
    return true;
  }

  absl::StatusOr<bool> Test(const pb::ModelProto& candidate) override {
    for (const checker::Diagnostic& d : Check(candidate)) {
      if (d.rule->code == code_) {
        detail_ = absl::StrCat(code_, " ", d.location, ": ", d.message);
        return true;
      }
    }
    return false;
  }

  bool Valid(const pb::ModelProto& candidate) const override {
    return StructurallyValid(candidate, &allowed_, base_dir_);
  }

 private:
  std::vector<checker::Diagnostic> Check(const pb::ModelProto& model) const {
    checker::CheckOptions options;
    options.full = true;
    std::vector<checker::Diagnostic> errors;
    for (checker::Diagnostic& d : checker::CheckModel(model, base_dir_, options).diagnostics) {
      if (d.severity == checker::Severity::kError && d.rule != nullptr) errors.push_back(std::move(d));
    }
    return errors;
  }

  std::string code_;
  std::vector<std::string> allowed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Oracle>> MakeCheckOracle(const OracleOptions& options) {
  if (!options.pattern.empty() && checker::FindRule(options.pattern) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--check-fails: unknown diagnostic code '", options.pattern, "'"));
  }
  std::string code = options.pattern;
  if (!code.empty()) code = std::string(checker::FindRule(code)->code);
  return std::unique_ptr<Oracle>(new CheckFailsOracle(code));
}

}  // namespace onnxkit::bisect
