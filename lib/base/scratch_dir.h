// A private scratch folder under the temp folder (honours TMPDIR), removed
// with everything in it when the ScratchDir goes out of scope, and also when
// the process is ended by SIGINT, SIGTERM or SIGHUP while it exists (Ctrl-C
// in a long bisect): the handler kills the registered child processes,
// removes the registered folders with async-signal-safe calls, then ends
// the process by the same signal.
//
//   ScratchDir scratch("onnxkit-bisect");
//   if (scratch.path().empty()) return absl::PermissionDeniedError(...);
#ifndef ONNXKIT_LIB_BASE_SCRATCH_DIR_H_
#define ONNXKIT_LIB_BASE_SCRATCH_DIR_H_

#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace onnxkit {

class ScratchDir {
 public:
  // "<temp>/<prefix>-XXXXXX"; path() is empty when it cannot be made.
  explicit ScratchDir(std::string_view prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int slot_ = -1;  // in the registry the signal handler reads
};

// A child process (a process group when `group`) that a terminating signal
// of this process kills too, from construction to destruction: a forked
// run or an outside command in its own group would outlive Ctrl-C.
class KillOnSignal {
 public:
  KillOnSignal(pid_t pid, bool group);
  ~KillOnSignal();
  KillOnSignal(const KillOnSignal&) = delete;
  KillOnSignal& operator=(const KillOnSignal&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_SCRATCH_DIR_H_
