// Paths tests use: committed testdata, the build tree, the optional backend
// suites, and fresh temporary folders.
#ifndef ONNXKIT_TESTS_UTIL_TEST_PATHS_H_
#define ONNXKIT_TESTS_UTIL_TEST_PATHS_H_

#include <filesystem>
#include <string>
#include <vector>

namespace onnxkit::testing {

// <repo>/testdata/<relative>
std::filesystem::path TestdataPath(const std::string& relative);
// The .onnx files of the hostile catalogue (<repo>/testdata/hostile), sorted.
std::vector<std::filesystem::path> HostileModels();
// The onnx 1.23 backend suite (node/, simple/, light/); empty if absent.
std::filesystem::path BackendDataDir();
// Debian's libonnx-testdata suite (folder holding node/, simple/ ...); empty if absent.
std::filesystem::path DebianBackendDataDir();
// A new empty folder under the system temp dir, unique to this test.
std::filesystem::path MakeTempDir();
// Reads a whole file (test use only; returns "" on failure).
std::string ReadFileOrEmpty(const std::filesystem::path& path);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_UTIL_TEST_PATHS_H_
