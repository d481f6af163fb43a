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
#include <cstdlib>
#include <iostream>
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

// --- Cross-check with python3-onnx's checker (onnx 1.12: opsets <= 17) ---

struct OnnxVerdict {
  std::string kind;  // VALID, INVALID, SKIP
  std::string why;
};

// onnx's verdicts on `models` (tests/checker/onnx_verdicts.py), by path;
// empty when /usr/bin/python3 has no onnx module.
std::map<std::string, OnnxVerdict> OnnxVerdicts(const std::vector<fs::path>& models, bool full, bool isolate) {
  std::map<std::string, OnnxVerdict> out;
  if (std::system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") != 0) return out;
  const fs::path dir = MakeTempDir();
  {
    std::ofstream list(dir / "models.txt");
    for (const fs::path& m : models) list << m.string() << '\n';
  }
  const std::string cmd = std::string("/usr/bin/python3 ") + ONNXKIT_SOURCE_DIR + "/tests/checker/onnx_verdicts.py " +
                          (full ? "1" : "0") + (isolate ? " --isolate" : "") + " < " + (dir / "models.txt").string() +
                          " > " + (dir / "verdicts.txt").string() + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "verdicts.txt");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find('\t');
    if (a == std::string::npos) continue;
    const size_t b = line.find('\t', a + 1);
    out[line.substr(0, a)] = {line.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1),
                              b == std::string::npos ? "" : line.substr(b + 1)};
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

// Every model onnx can judge gets the same verdict (valid or not) from
// onnxkit, except the documented disagreements in
// testdata/onnx_checker_disagreements.txt (path suffix, TAB, reason; lines
// mention the mode: "check" or "check --full").
void CrossCheck(const std::vector<fs::path>& models, bool full, bool isolate, int min_judged) {
  const std::map<std::string, OnnxVerdict> verdicts = OnnxVerdicts(models, full, isolate);
  if (verdicts.empty()) GTEST_SKIP() << "python3-onnx is not installed";
  std::map<std::string, std::string> listed;
  {
    std::ifstream in(TestdataPath("onnx_checker_disagreements.txt"));
    std::string line;
    const std::string mode = full ? "check --full" : "check";
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      // MODE<TAB>SUFFIX<TAB>REASON
      const size_t a = line.find('\t');
      const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
      EXPECT_NE(b, std::string::npos) << "onnx_checker_disagreements.txt: " << line;
      if (b == std::string::npos || line.substr(0, a) != mode) continue;
      listed.emplace(line.substr(a + 1, b - a - 1), line.substr(b + 1));
    }
  }
  int judged = 0, agreed = 0, skipped = 0;
  for (const fs::path& model : models) {
    auto it = verdicts.find(model.string());
    ASSERT_NE(it, verdicts.end()) << "no onnx verdict for " << model;
    if (it->second.kind == "SKIP") {
      ++skipped;
      continue;
    }
    ++judged;
    checker::CheckOptions options;
    options.full = full;
    const checker::CheckResult r = checker::CheckFile(model, options);
    const bool ours_valid = r.errors == 0 && !r.refused;
    const bool onnx_valid = it->second.kind == "VALID";
    const std::string* reason = ExceptionFor(listed, model.string());
    if (ours_valid == onnx_valid) {
      ++agreed;
      EXPECT_EQ(reason, nullptr) << model << " now agrees with onnx; remove it from onnx_checker_disagreements.txt";
    } else {
      EXPECT_NE(reason, nullptr) << model << ": onnx says " << it->second.kind << " (" << it->second.why
                                 << "), onnxkit says " << (ours_valid ? "valid" : "invalid") << ":\n"
                                 << checker::RenderText({r});
    }
  }
  std::cout << "[ onnx     ] " << (full ? "check --full" : "check") << " vs onnx.checker (full_check="
            << (full ? "True" : "False") << "): " << judged << " judged, " << agreed << " agree, " << skipped
            << " skipped (beyond onnx " << "1.12's opsets)\n";
  EXPECT_GE(judged, min_judged);
}

std::vector<fs::path> AllSuiteModels() {
  std::vector<fs::path> models;
  for (const fs::path& root : {BackendDataDir(), DebianBackendDataDir(), TestdataPath("models")}) {
    if (root.empty()) continue;
    for (fs::path& m : SuiteModels(root)) models.push_back(std::move(m));
  }
  return models;
}

std::vector<fs::path> HostileModels() {
  std::vector<fs::path> models;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(TestdataPath("hostile"), ec)) {
    if (e.path().extension() == ".onnx" && fs::is_regular_file(e.path(), ec)) models.push_back(e.path());
  }
  std::sort(models.begin(), models.end());
  return models;
}

TEST(OnnxCrossCheckTest, SuiteVerdictsAgreeWithOnnxChecker) { CrossCheck(AllSuiteModels(), false, false, 1000); }

TEST(OnnxCrossCheckTest, SuiteVerdictsAgreeWithOnnxFullCheck) { CrossCheck(AllSuiteModels(), true, false, 1000); }

TEST(OnnxCrossCheckTest, HostileVerdictsAgreeWithOnnxChecker) { CrossCheck(HostileModels(), false, true, 50); }

}  // namespace
}  // namespace onnxkit::testing
