// Agreement with the ONNX backend suites: every model of the onnx 1.23 suite
// (../shared/onnx-backend-data) and of Debian's libonnx-testdata passes
// `onnxkit check` without errors, except the documented exceptions in
// testdata/check_exceptions.txt. A listed model that starts passing fails
// the test too, so the list stays true.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "checker/checker.h"
#include "checker/report.h"
#include "gtest/gtest.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

// path suffix -> reason
std::map<std::string, std::string> ReadExceptions() {
  std::map<std::string, std::string> exceptions;
  std::ifstream in(TestdataPath("check_exceptions.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << "check_exceptions.txt: no TAB in: " << line;
    if (tab == std::string::npos) continue;
    exceptions.emplace(line.substr(0, tab), line.substr(tab + 1));
  }
  return exceptions;
}

// Every model of a suite, sorted: node/*/model.onnx, simple/..., light/*.onnx
// and Debian's pytorch-converted, pytorch-operator and real folders.
std::vector<fs::path> SuiteModels(const fs::path& root) {
  std::vector<fs::path> models;
  std::error_code ec;
  for (const char* group : {"node", "simple", "pytorch-converted", "pytorch-operator", "real"}) {
    if (!fs::is_directory(root / group, ec)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(root / group, ec)) {
      if (fs::is_regular_file(e.path() / "model.onnx", ec)) models.push_back(e.path() / "model.onnx");
    }
  }
  if (fs::is_directory(root / "light", ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(root / "light", ec)) {
      if (e.path().extension() == ".onnx") models.push_back(e.path());
    }
  }
  std::sort(models.begin(), models.end());
  return models;
}

const std::string* ExceptionFor(const std::map<std::string, std::string>& exceptions,
                                const std::string& path) {
  for (const auto& [suffix, reason] : exceptions) {
    if (path.size() >= suffix.size() &&
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (path.size() == suffix.size() || path[path.size() - suffix.size() - 1] == '/')) {
      return &reason;
    }
  }
  return nullptr;
}

void CheckSuite(const std::string& label, const fs::path& root) {
  if (root.empty()) GTEST_SKIP() << label << " not found";
  const std::map<std::string, std::string> exceptions = ReadExceptions();
  const std::vector<fs::path> models = SuiteModels(root);
  ASSERT_FALSE(models.empty()) << root;
  int valid = 0, expected_failures = 0, warnings = 0;
  for (const fs::path& model : models) {
    const checker::CheckResult r = checker::CheckFile(model, {});
    const std::string* reason = ExceptionFor(exceptions, model.string());
    warnings += r.warnings;
    if (r.errors == 0) {
      ++valid;
      EXPECT_EQ(reason, nullptr) << model << " now passes; remove it from testdata/check_exceptions.txt";
    } else {
      ++expected_failures;
      EXPECT_NE(reason, nullptr) << model << " fails the check and is not in testdata/check_exceptions.txt:\n"
                                 << checker::RenderText({r});
    }
  }
  std::cout << "[ suite    ] " << label << ": " << models.size() << " models, " << valid << " valid, "
            << expected_failures << " with errors (" << exceptions.size() << " listed exceptions), "
            << warnings << " warnings\n";
}

TEST(SuiteAgreementTest, Onnx123BackendSuite) { CheckSuite("onnx 1.23 backend suite", BackendDataDir()); }

TEST(SuiteAgreementTest, DebianBackendSuite) {
  CheckSuite("Debian libonnx-testdata", DebianBackendDataDir());
}

TEST(SuiteAgreementTest, CommittedLightModels) { CheckSuite("testdata/models", TestdataPath("models")); }

}  // namespace
}  // namespace onnxkit::testing
