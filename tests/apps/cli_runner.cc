// Child-process runner for CLI tests (fork/exec, output through temp files,
// wait4 for the exit status and resource usage, SIGKILL on timeout).
#include "tests/apps/cli_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/util/test_paths.h"

namespace onnxkit::testing {

CliResult RunCli(const std::vector<std::string>& args) { return RunCli(args, CliOptions{}); }

CliResult RunCli(const std::vector<std::string>& args, const CliOptions& options) {
  CliResult result;
  std::filesystem::path dir = MakeTempDir();
  std::string out_path = (dir / "stdout").string();
  std::string err_path = (dir / "stderr").string();
  std::string cwd = options.cwd.string();
  // Everything the child needs is prepared before fork.
  std::string bin = ONNXKIT_BIN;
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  argv.push_back(bin.data());
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    for (const std::string& e : options.env) putenv(const_cast<char*>(e.c_str()));
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  if (pid < 0) {
    result.err = "fork failed";
    std::filesystem::remove_all(dir);
    return result;
  }
  int status = 0;
  struct rusage usage {};
  {
    if (options.timeout_seconds <= 0) {
      while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
      }
    } else {
      const auto deadline = start + std::chrono::duration<double>(options.timeout_seconds);
      while (true) {
        pid_t done = wait4(pid, &status, WNOHANG, &usage);
        if (done == pid || (done < 0 && errno != EINTR)) break;
        if (std::chrono::steady_clock::now() >= deadline) {
          kill(pid, options.timeout_signal);
          result.timed_out = true;
          while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
          }
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.max_rss_kb = usage.ru_maxrss;  // kilobytes on Linux
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace onnxkit::testing
