// The command oracle: an outside tool judges the candidate. Each call gets
// its own scratch folder holding model.onnx and test_data_set_0/; the
// command (the user's own string, `{model}` replaced by the quoted model
// path, else the path appended) runs through /bin/sh -c in that folder, in
// its own process group, killed at the timeout. -j N runs N calls at once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "bisect/candidate.h"
#include "bisect/oracle.h"
#include "lib/base/scratch_dir.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"
#include "runner/convert.h"

namespace onnxkit::bisect {

absl::StatusOr<std::regex> CompileRegex(const std::string& pattern, std::string_view flag);
bool RegexSearch(const std::regex& re, const std::string& text);

namespace {

namespace fs = std::filesystem;

std::string ShellQuote(const std::string& s) { return "'" + absl::StrReplaceAll(s, {{"'", "'\\''"}}) + "'"; }

class CommandOracle : public Oracle {
 public:
  CommandOracle(OracleOptions o, const GoldenStore* golden, std::optional<std::regex> re)
      : o_(std::move(o)), golden_(golden), re_(std::move(re)) {}

  std::string Describe() const override { return absl::StrCat("command '", o_.command, "'"); }
  bool Runs() const override { return false; }

  absl::StatusOr<bool> Prepare(const pb::ModelProto& original, std::string* why) override {
    timed_out_ = false;
    ONNXKIT_ASSIGN_OR_RETURN(bool interesting, Test(original));
    if (!interesting) {
      *why = timed_out_ ? absl::StrCat("the command ran past --timeout (", o_.timeout_seconds,
                                       " s) on the original; a timeout is not a failure")
             : re_      ? "the command's output on the original does not match --fail-regex"
                        : "the command exits 0 on the original";
    }
    return interesting;
  }

  absl::StatusOr<bool> Test(const pb::ModelProto& candidate) override {
    int64_t calls = 0;
    ONNXKIT_ASSIGN_OR_RETURN(int first, TestFirst({candidate}, &calls));
    return first == 0;
  }

  absl::StatusOr<int> TestFirst(const std::vector<pb::ModelProto>& candidates, int64_t* calls) override {
    size_t jobs = static_cast<size_t>(std::max(1, o_.jobs));
    for (size_t start = 0; start < candidates.size(); start += jobs) {
      std::vector<pid_t> pids;
      std::vector<fs::path> dirs;
      std::vector<std::unique_ptr<KillOnSignal>> on_signal;  // Ctrl-C ends the calls too
      for (size_t i = start; i < std::min(candidates.size(), start + jobs); ++i) {
        fs::path dir = o_.scratch / absl::StrCat("call_", counter_++);
        ONNXKIT_ASSIGN_OR_RETURN(pid_t pid, Launch(candidates[i], dir));
        on_signal.push_back(std::make_unique<KillOnSignal>(pid, /*group=*/true));
        pids.push_back(pid);
        dirs.push_back(dir);
        ++*calls;
      }
      std::vector<bool> verdicts = WaitAll(pids, dirs);
      for (size_t k = 0; k < verdicts.size(); ++k) {
        std::error_code ec;
        fs::remove_all(dirs[k], ec);
        if (verdicts[k]) return static_cast<int>(start + k);
      }
    }
    return -1;
  }

 private:
  absl::StatusOr<pid_t> Launch(const pb::ModelProto& model, const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir / "test_data_set_0", ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
    fs::path path = dir / "model.onnx";
    ONNXKIT_RETURN_IF_ERROR(io::SaveModel(model, o_.base_dir, path));
    if (golden_ != nullptr) {
      auto feeds = GoldenFeeds(model, *golden_);
      for (size_t i = 0; feeds.ok() && i < feeds->size(); ++i) {
        const auto& [name, v] = (*feeds)[i];
        ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(dir / "test_data_set_0" / absl::StrCat("input_", i, ".pb"),
                                                        runner::ValueToPbBytes(v, name)));
      }
    }
    std::string cmd = o_.command;
    std::string quoted = ShellQuote(fs::absolute(path).string());
    if (cmd.find("{model}") != std::string::npos) {
      cmd = absl::StrReplaceAll(cmd, {{"{model}", quoted}});
    } else {
      absl::StrAppend(&cmd, " ", quoted);
    }
    std::string log = (dir / "output.log").string();
    std::string cwd = dir.string();
    pid_t pid = fork();
    if (pid < 0) return absl::ResourceExhaustedError("fork failed");
    if (pid == 0) {
      setpgid(0, 0);
      if (chdir(cwd.c_str()) != 0) _exit(127);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    return pid;
  }

  std::vector<bool> WaitAll(const std::vector<pid_t>& pids, const std::vector<fs::path>& dirs) {
    std::vector<bool> verdicts(pids.size(), false);
    std::vector<bool> done(pids.size(), false);
    auto start = std::chrono::steady_clock::now();
    size_t left = pids.size();
    while (left > 0) {
      for (size_t k = 0; k < pids.size(); ++k) {
        if (done[k]) continue;
        int status = 0;
        pid_t r = waitpid(pids[k], &status, WNOHANG);
        if (r == 0) continue;
        done[k] = true;
        --left;
        verdicts[k] = Judge(status, dirs[k]);
      }
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left > 0 && o_.timeout_seconds > 0 && elapsed > o_.timeout_seconds) {
        for (size_t k = 0; k < pids.size(); ++k) {
          if (done[k]) continue;
          kill(-pids[k], SIGKILL);
          int status = 0;
          waitpid(pids[k], &status, 0);
          done[k] = true;  // a timeout is not interesting
          timed_out_ = true;
        }
        left = 0;
      }
      if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return verdicts;
  }

  bool Judge(int status, const fs::path& dir) {
    std::ifstream in(dir / "output.log", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string output = text.str().substr(0, 1 << 20);
    bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    bool interesting = re_ ? RegexSearch(*re_, output) : failed;
    if (interesting) detail_ = output.substr(0, 400);
    return interesting;
  }

  OracleOptions o_;
  const GoldenStore* golden_;
  std::optional<std::regex> re_;
  int64_t counter_ = 0;
  bool timed_out_ = false;  // some call of the last batch was killed at --timeout
};

}  // namespace

absl::StatusOr<std::unique_ptr<Oracle>> MakeCommandOracle(const OracleOptions& options, const GoldenStore* golden) {
  if (options.command.empty()) return absl::InvalidArgumentError("--command needs a command");
  std::optional<std::regex> re;
  if (!options.pattern.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(re, CompileRegex(options.pattern, "--fail-regex"));
  }
  return std::unique_ptr<Oracle>(new CommandOracle(options, golden, std::move(re)));
}

}  // namespace onnxkit::bisect
