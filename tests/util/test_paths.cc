// Test path helpers.
#include "tests/util/test_paths.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace onnxkit::testing {

std::filesystem::path TestdataPath(const std::string& relative) {
  return std::filesystem::path(ONNXKIT_SOURCE_DIR) / "testdata" / relative;
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
  return p;
}

std::string ReadFileOrEmpty(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace onnxkit::testing
