// Runs both ONNX backend suites through the reference backend and the cpu
// backend and holds each result against its list,
// testdata/conformance/expected_failures.txt (reference) and
// expected_failures_cpu.txt: a case that fails but is not listed, or is
// listed but passes, fails the test. ONNXKIT_UPDATE_CONFORMANCE=1 rewrites
// the lists from the current results (the reason recorded is the first line
// of the error). On a machine with a CUDA device the cuda backend must pass
// every case the cpu backend passes.
#include <fstream>
#include <algorithm>
#include <map>
#include <string_view>

#include "absl/strings/str_split.h"

#include "gtest/gtest.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/kernel_registry.h"
#include "tests/runner/conformance.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

std::map<std::string, std::string> ReadExpectedFailures(const std::filesystem::path& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    out[line.substr(0, tab)] = tab == std::string::npos ? "" : line.substr(tab + 1);
  }
  return out;
}

// Reasons of cases whose result is random (ops without a seed): listed, but
// allowed to pass.
constexpr char kNondeterministic[] = "nondeterministic:";
bool IsNondeterministic(const std::string& reason) { return reason.rfind(kNondeterministic, 0) == 0; }

std::string FirstLine(std::string_view s) {
  std::string line(s.substr(0, s.find('\n')));
  for (char& c : line) {
    if (c == '\t') c = ' ';
  }
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// ONNXKIT_CONFORMANCE_FILTER=relu,conv runs only the cases whose id contains
// one of the words and prints every result instead of checking the list
// (on the cpu or cuda backend when ONNXKIT_CONFORMANCE_BACKEND=cpu or cuda).
TEST(ConformanceTest, FilteredCasesReport) {
  const char* filter = std::getenv("ONNXKIT_CONFORMANCE_FILTER");
  if (filter == nullptr) GTEST_SKIP() << "set ONNXKIT_CONFORMANCE_FILTER to run";
  std::vector<std::string> words = absl::StrSplit(filter, ',', absl::SkipEmpty());
  const char* backend_name = std::getenv("ONNXKIT_CONFORMANCE_BACKEND");
  const std::string_view chosen = backend_name != nullptr ? backend_name : "";
  runner::Backend backend = chosen == "cpu"    ? runner::Backend::kCpu
                            : chosen == "cuda" ? runner::Backend::kCuda
                                               : runner::Backend::kReference;
  int passed = 0, total = 0;
  for (const ConformanceCase& c : CollectConformanceCases()) {
    if (std::none_of(words.begin(), words.end(), [&](const std::string& w) { return c.id.find(w) != std::string::npos; })) {
      continue;
    }
    absl::Status status = RunConformanceCase(c, backend);
    ++total;
    passed += status.ok();
    std::printf("%s %s%s\n", status.ok() ? "PASS" : "FAIL", c.id.c_str(),
                status.ok() ? "" : (": " + FirstLine(status.ToString())).c_str());
  }
  std::printf("filtered: %d / %d passed\n", passed, total);
}

void CheckAgainstList(runner::Backend backend, const std::string& list_name) {
  if (std::getenv("ONNXKIT_CONFORMANCE_FILTER") != nullptr) GTEST_SKIP() << "filtered run";
  std::vector<ConformanceCase> cases = CollectConformanceCases();
  if (cases.empty()) GTEST_SKIP() << "no backend suite on this machine";
  std::string name(runner::BackendName(backend));
  std::filesystem::path list_path = TestdataPath("conformance/" + list_name);
  std::map<std::string, std::string> expected = ReadExpectedFailures(list_path);
  std::map<std::string, std::string> failures;
  std::map<std::string, std::pair<int, int>> per_suite;  // passed, total
  for (const ConformanceCase& c : cases) {
    absl::Status status = RunConformanceCase(c, backend);
    std::string suite = c.id.substr(0, c.id.rfind('/'));
    per_suite[suite].second++;
    if (status.ok()) {
      per_suite[suite].first++;
    } else {
      failures[c.id] = FirstLine(status.ToString());
    }
  }
  for (const auto& [suite, counts] : per_suite) {
    std::printf("conformance %-9s %-28s %4d / %4d passed\n", name.c_str(), suite.c_str(), counts.first,
                counts.second);
  }
  if (std::getenv("ONNXKIT_UPDATE_CONFORMANCE") != nullptr) {
    std::ofstream out(list_path);
    out << "# Conformance cases the " << name
        << " backend fails, with the reason (written by hand where known, else the error it gives).\n"
        << "# Regenerate with ONNXKIT_UPDATE_CONFORMANCE=1 after fixing kernels; review the diff.\n"
        << "# A reason starting with \"" << kNondeterministic << "\" marks a case that may pass or fail.\n";
    std::map<std::string, std::string> listed = failures;
    for (const auto& [id, reason] : expected) {
      if (IsNondeterministic(reason)) listed[id] = reason;  // kept even when this run passed it
    }
    for (const auto& [id, reason] : listed) {
      auto it = expected.find(id);
      // Keep a hand-written reason when the case still fails.
      out << id << '\t' << (it != expected.end() && !it->second.empty() ? it->second : reason) << '\n';
    }
    GTEST_SKIP() << "rewrote " << list_path;
  }
  int unexpected_failures = 0, unexpected_passes = 0;
  for (const auto& [id, reason] : failures) {
    if (!expected.count(id)) {
      ++unexpected_failures;
      ADD_FAILURE() << "unexpected failure: " << id << ": " << reason;
    }
  }
  for (const auto& [id, reason] : expected) {
    bool exists = std::any_of(cases.begin(), cases.end(), [&](const ConformanceCase& c) { return c.id == id; });
    if (exists && !failures.count(id) && !IsNondeterministic(reason)) {
      ++unexpected_passes;
      ADD_FAILURE() << "now passes, remove it from the list: " << id;
    }
  }
  std::printf("conformance %s: %zu cases, %zu expected failures, %d unexpected failures, %d unexpected passes\n",
              name.c_str(), cases.size(), failures.size(), unexpected_failures, unexpected_passes);
}

TEST(ConformanceTest, ReferenceBackendMatchesTheExpectedFailureList) {
  CheckAgainstList(runner::Backend::kReference, "expected_failures.txt");
}

TEST(ConformanceTest, CpuBackendMatchesItsExpectedFailureList) {
  CheckAgainstList(runner::Backend::kCpu, "expected_failures_cpu.txt");
}

// cuda (CUDA kernels, the cpu backend for the rest) passes every case cpu
// passes; it may pass more. Each case runs three times in its session (the
// third run replays a recorded CUDA graph where the case allows one), with
// fusion (the default) and without (every node its own kernel), and with
// what is not yet run on a GPU (SessionOptions::cuda_experimental).
void CheckCudaWhereCpuPasses(bool fuse, bool experimental = false) {
  if (!runner::cuda::CheckDevice(0).ok()) GTEST_SKIP() << "no CUDA device";
  if (std::getenv("ONNXKIT_CONFORMANCE_FILTER") != nullptr) GTEST_SKIP() << "filtered run";
  std::vector<ConformanceCase> cases = CollectConformanceCases();
  if (cases.empty()) GTEST_SKIP() << "no backend suite on this machine";
  std::map<std::string, std::string> cpu_fails =
      ReadExpectedFailures(TestdataPath("conformance/expected_failures_cpu.txt"));
  int checked = 0, failed = 0;
  for (const ConformanceCase& c : cases) {
    if (cpu_fails.count(c.id)) continue;
    ++checked;
    absl::Status status = RunConformanceCase(c, runner::Backend::kCuda, /*runs=*/3, fuse, experimental);
    if (!status.ok()) {
      ++failed;
      ADD_FAILURE() << "cuda fails a case cpu passes: " << c.id << ": " << FirstLine(status.ToString());
    }
  }
  std::printf("conformance cuda%s: %d cases cpu passes, %d failed on cuda\n",
              experimental ? " (experimental)"
              : fuse       ? ""
                           : " (unfused)",
              checked, failed);
}

TEST(ConformanceTest, CudaBackendPassesWhereCpuPasses) { CheckCudaWhereCpuPasses(true); }

TEST(ConformanceTest, CudaUnfusedPassesWhereCpuPasses) { CheckCudaWhereCpuPasses(false); }

TEST(ConformanceTest, CudaExperimentalPassesWhereCpuPasses) { CheckCudaWhereCpuPasses(true, true); }

}  // namespace
}  // namespace onnxkit::testing
