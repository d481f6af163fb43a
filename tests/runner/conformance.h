// The ONNX backend conformance driver: runs one test case (model + a
// test_data_set folder, or a light model with its output) through a session
// and compares every output with the expected one.
#ifndef ONNXKIT_TESTS_RUNNER_CONFORMANCE_H_
#define ONNXKIT_TESTS_RUNNER_CONFORMANCE_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runner/kernel_registry.h"
#include "runner/value.h"

namespace onnxkit::testing {

struct ConformanceCase {
  std::string id;                  // "onnx-1.23/node/test_abs"
  std::filesystem::path model;     // model.onnx
  std::filesystem::path data_set;  // test_data_set_0 (empty for light models)
  std::filesystem::path light_output;  // light models: expected output_0
  double atol = 1e-7;                  // the absolute tolerance of the comparison
};

// Every case of the suites present on this machine, sorted by id.
std::vector<ConformanceCase> CollectConformanceCases();

// Runs a case; OK when every output matches within rtol 1e-3 / atol (1e-7 unless the case says)
// (exact for integers, bools and strings; dtype and shape always exact).
// `runs` > 1: the session runs the case that many times and the last run's
// outputs are checked (on cuda, a replayed CUDA graph where the case allows
// one); `fuse` and `cuda_experimental`: those SessionOptions.
absl::Status RunConformanceCase(const ConformanceCase& c, runner::Backend backend, int runs = 1,
                                bool fuse = true, bool cuda_experimental = false);

// Compares an actual value with the expected one.
absl::Status CompareValues(const runner::RtValue& actual, const runner::RtValue& expected, double rtol, double atol);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_RUNNER_CONFORMANCE_H_
