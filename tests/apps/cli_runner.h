// Runs the onnxkit binary as a child process and captures its exit code,
// stdout and stderr, for CLI end-to-end tests; optionally in a given working
// folder, with a time limit, recording wall time and peak memory.
#ifndef ONNXKIT_TESTS_APPS_CLI_RUNNER_H_
#define ONNXKIT_TESTS_APPS_CLI_RUNNER_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace onnxkit::testing {

struct CliResult {
  int exit_code = -1;  // -1: the child did not exit normally
  int signal = 0;      // non-zero: the child was killed by this signal
  std::string out;
  std::string err;
  double wall_seconds = 0;  // from fork to the child's exit
  int64_t max_rss_kb = 0;   // the child's peak resident set (wait4 rusage)
  bool timed_out = false;   // killed (SIGKILL) after CliOptions::timeout_seconds
};

struct CliOptions {
  // The child's working folder; empty: the test's own.
  std::filesystem::path cwd;
  // Kill the child with SIGKILL after this many seconds; 0: wait forever.
  double timeout_seconds = 0;
  // The signal sent at the timeout (SIGTERM or SIGINT: how the child ends
  // when interrupted).
  int timeout_signal = 9;
  // NAME=VALUE entries set in the child's environment (TMPDIR=...).
  std::vector<std::string> env;
};

// Runs `onnxkit args...` (no shell) and waits for it.
CliResult RunCli(const std::vector<std::string>& args);
CliResult RunCli(const std::vector<std::string>& args, const CliOptions& options);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_APPS_CLI_RUNNER_H_
