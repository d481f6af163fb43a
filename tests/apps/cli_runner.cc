// Child-process runner for CLI tests (fork/exec, output through temp files).
#include "tests/apps/cli_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/util/test_paths.h"

namespace onnxkit::testing {

CliResult RunCli(const std::vector<std::string>& args) {
  CliResult result;
  std::filesystem::path dir = MakeTempDir();
  std::string out_path = (dir / "stdout").string();
  std::string err_path = (dir / "stderr").string();
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    std::string bin = ONNXKIT_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace onnxkit::testing
