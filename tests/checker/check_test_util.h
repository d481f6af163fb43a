// Helpers for checker tests: run the checker on a model built in code and
// look at the diagnostics of one rule.
#ifndef ONNXKIT_TESTS_CHECKER_CHECK_TEST_UTIL_H_
#define ONNXKIT_TESTS_CHECKER_CHECK_TEST_UTIL_H_

#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "checker/checker.h"
#include "checker/report.h"
#include "gtest/gtest.h"
#include "lib/io/proto.h"

namespace onnxkit::checker {
// gtest prints diagnostics as their text line.
inline void PrintTo(const Diagnostic& d, std::ostream* os) {
  *os << d.rule->code << " " << d.location << ": " << d.message;
}
}  // namespace onnxkit::checker

namespace onnxkit::testing {

// Checks `model` with `base_dir` as the model folder (empty: none).
inline checker::CheckResult Check(const pb::ModelProto& model, const checker::CheckOptions& options = {},
                                  const std::filesystem::path& base_dir = {}) {
  return checker::CheckModel(model, base_dir, options, "m.onnx");
}

// The diagnostics of rule `code` ("E0300"), in order.
inline std::vector<checker::Diagnostic> Findings(const checker::CheckResult& r, std::string_view code) {
  std::vector<checker::Diagnostic> out;
  for (const checker::Diagnostic& d : r.diagnostics) {
    if (d.rule->code == code) out.push_back(d);
  }
  return out;
}

// The text report, for failure messages.
inline std::string Dump(const checker::CheckResult& r) { return checker::RenderText({r}); }

// "location: message" of the only diagnostic of rule `code`; "" (and a
// test failure) when there is not exactly one.
inline std::string Only(const checker::CheckResult& r, std::string_view code) {
  std::vector<checker::Diagnostic> found = Findings(r, code);
  if (found.size() != 1) {
    ADD_FAILURE() << "expected exactly one " << code << ", got " << found.size() << ":\n" << Dump(r);
    return "";
  }
  return found[0].location.empty() ? found[0].message : found[0].location + ": " + found[0].message;
}

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_CHECKER_CHECK_TEST_UTIL_H_
