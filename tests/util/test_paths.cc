// Test path helpers.
#include "tests/util/test_paths.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"

namespace onnxkit::testing {

std::filesystem::path TestdataPath(const std::string& relative) {
  return std::filesystem::path(ONNXKIT_SOURCE_DIR) / "testdata" / relative;
}

std::vector<std::filesystem::path> HostileModels() {
  std::vector<std::filesystem::path> models;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataPath("hostile"))) {
    if (entry.path().extension() == ".onnx") models.push_back(entry.path());
  }
  std::sort(models.begin(), models.end());
  return models;
}

std::filesystem::path BackendDataDir() {
  std::filesystem::path p = std::filesystem::path(ONNXKIT_SHARED_DIR) / "onnx-backend-data";
  std::error_code ec;
  if (std::filesystem::is_directory(p / "node", ec)) return p;
  return {};
}

std::filesystem::path DebianBackendDataDir() {
  for (const char* candidate : {"/usr/share/libonnx-testdata/data",
                                "/usr/lib/python3/dist-packages/onnx/backend/test/data"}) {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(candidate) / "node", ec)) return candidate;
  }
  return {};
}

namespace {

// Folders MakeTempDir made during the running test. Removed when the test ends, so
// that a suite run leaves nothing behind (a failed large-model test once left
// 2 GiB); ONNXKIT_KEEP_TEST_DIRS=1 keeps those of failed tests for a look.
class TempDirCleaner : public ::testing::EmptyTestEventListener {
 public:
  void Add(const std::filesystem::path& p) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(p);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::vector<std::filesystem::path> dirs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dirs.swap(dirs_);
    }
    const char* keep = std::getenv("ONNXKIT_KEEP_TEST_DIRS");
    bool keep_failed = keep != nullptr && std::string(keep) == "1";
    if (keep_failed && info.result() != nullptr && info.result()->Failed()) return;
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

// Owned by gtest's listener list once appended.
TempDirCleaner* Cleaner() {
  static TempDirCleaner* cleaner = [] {
    auto* c = new TempDirCleaner();
    ::testing::UnitTest::GetInstance()->listeners().Append(c);
    return c;
  }();
  return cleaner;
}

// Appended before any test starts, so the first test's folders go too.
[[maybe_unused]] TempDirCleaner* const kCleaner = Cleaner();

}  // namespace

std::filesystem::path MakeTempDir() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  std::filesystem::path p = std::filesystem::temp_directory_path() /
                            ("onnxkit_" + std::to_string(::getpid()) + "_" +
                             std::to_string(counter++) + "_" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  if (info != nullptr) Cleaner()->Add(p);
  return p;
}

std::string ReadFileOrEmpty(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace onnxkit::testing
