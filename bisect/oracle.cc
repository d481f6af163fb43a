// Oracle plumbing shared by every oracle: validity, the forked child, the
// factory.
#include "bisect/oracle.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>

#include "checker/checker.h"
#include "lib/base/scratch_dir.h"
#include "lib/ir/ir.h"

namespace onnxkit::bisect {

// Defined in oracle_check.cc, oracle_run.cc and oracle_command.cc.
absl::StatusOr<std::unique_ptr<Oracle>> MakeCheckOracle(const OracleOptions& options);
absl::StatusOr<std::unique_ptr<Oracle>> MakeRunOracle(const OracleOptions& options, const GoldenStore* golden);
absl::StatusOr<std::unique_ptr<Oracle>> MakeCommandOracle(const OracleOptions& options, const GoldenStore* golden);

absl::StatusOr<int> Oracle::TestFirst(const std::vector<pb::ModelProto>& candidates, int64_t* calls) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    ++*calls;
    auto r = Test(candidates[i]);
    if (!r.ok()) return r.status();
    if (*r) return static_cast<int>(i);
  }
  return -1;
}

bool StructurallyValid(const pb::ModelProto& model, const std::vector<std::string>* allowed_codes,
                       const std::filesystem::path& base_dir) {
  checker::CheckOptions options;
  checker::CheckResult r = checker::CheckModel(model, base_dir, options);
  for (const checker::Diagnostic& d : r.diagnostics) {
    if (d.severity != checker::Severity::kError) continue;
    if (allowed_codes == nullptr || d.rule == nullptr) return false;
    bool allowed = false;
    for (const std::string& c : *allowed_codes) allowed = allowed || d.rule->code == c;
    if (!allowed) return false;
  }
  return true;
}

bool Oracle::Valid(const pb::ModelProto& candidate) const {
  if (!ir::FromProto(candidate).ok()) return false;
  return StructurallyValid(candidate, nullptr, base_dir_);
}

ChildResult RunInChild(const std::function<std::string()>& fn, double timeout_seconds) {
  ChildResult result;
  int fds[2];
  if (pipe(fds) != 0) return result;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    close(fds[0]);
    std::string out = fn();
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  KillOnSignal on_signal(pid, /*group=*/false);  // Ctrl-C ends the run too
  auto start = std::chrono::steady_clock::now();
  char buffer[4096];
  while (true) {
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      double left = timeout_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left <= 0) {
        result.timed_out = true;
        kill(pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(left * 1000) + 1;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, wait_ms);
    if (ready < 0) continue;
    if (ready == 0) continue;  // the deadline check above fires next
    ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    result.signal = result.timed_out ? 0 : WTERMSIG(status);
  } else if (WIFEXITED(status) && !result.timed_out) {
    result.finished = true;
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Oracle>> MakeOracle(const OracleOptions& options, const GoldenStore* golden) {
  absl::StatusOr<std::unique_ptr<Oracle>> oracle;
  switch (options.kind) {
    case OracleKind::kCheckFails:
      oracle = MakeCheckOracle(options);
      break;
    case OracleKind::kCommand:
      oracle = MakeCommandOracle(options, golden);
      break;
    default:
      oracle = MakeRunOracle(options, golden);
      break;
  }
  if (oracle.ok()) (*oracle)->set_base_dir(options.base_dir);
  return oracle;
}

}  // namespace onnxkit::bisect
