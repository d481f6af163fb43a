// Runs the onnxkit binary as a child process and captures its exit code,
// stdout and stderr, for CLI end-to-end tests.
#ifndef ONNXKIT_TESTS_APPS_CLI_RUNNER_H_
#define ONNXKIT_TESTS_APPS_CLI_RUNNER_H_

#include <string>
#include <vector>

namespace onnxkit::testing {

struct CliResult {
  int exit_code = -1;  // -1: the child did not exit normally
  int signal = 0;      // non-zero: the child was killed by this signal
  std::string out;
  std::string err;
};

// Runs `onnxkit args...` (no shell) and waits for it.
CliResult RunCli(const std::vector<std::string>& args);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_APPS_CLI_RUNNER_H_
