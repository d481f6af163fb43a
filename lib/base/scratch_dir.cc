// ScratchDir: mkdtemp, removal on scope exit, and removal on a terminating
// signal. The handler may only use async-signal-safe calls: it walks the
// folder with open/getdents64/unlinkat on fixed buffers (no malloc), and
// only in the process that registered the folder (a forked child that gets
// the same Ctrl-C must leave it to its parent).
#include "lib/base/scratch_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

namespace onnxkit {
namespace {

constexpr int kSlots = 8;
constexpr size_t kPathMax = 4096;
constexpr int kMaxDepth = 16;

// state: 0 free, 1 being written, 2 a folder the handler removes.
struct Slot {
  std::atomic<int> state{0};
  char path[kPathMax] = {};
};
Slot g_slots[kSlots];
std::atomic<pid_t> g_owner{0};
// Children to kill: a pid, or minus a process group; 0 free.
constexpr int kChildSlots = 64;
std::atomic<pid_t> g_children[kChildSlots];
std::mutex g_install_mu;
bool g_installed = false;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Removes everything inside the folder `dir_fd` refers to (depth-limited).
void RemoveContents(int dir_fd, int depth) {
  if (depth > kMaxDepth) return;
  alignas(8) char buffer[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dir_fd, buffer, sizeof(buffer));
    if (n <= 0) return;
    bool removed_any = false;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buffer + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      // A file system that does not report types (DT_UNKNOWN): a folder is
      // what unlinking refuses with EISDIR.
      bool folder = d->d_type == DT_DIR;
      if (!folder) {
        if (unlinkat(dir_fd, name, 0) == 0) {
          removed_any = true;
          continue;
        }
        folder = d->d_type == DT_UNKNOWN && errno == EISDIR;
        if (!folder) continue;
      }
      int sub = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        RemoveContents(sub, depth + 1);
        close(sub);
      }
      if (unlinkat(dir_fd, name, AT_REMOVEDIR) == 0) removed_any = true;
    }
    // Entries were removed under the reading position: read from the start.
    if (removed_any) lseek(dir_fd, 0, SEEK_SET);
  }
}

void OnSignal(int sig) {
  const int saved_errno = errno;
  if (getpid() == g_owner.load()) {
    for (std::atomic<pid_t>& c : g_children) {
      const pid_t target = c.load();
      if (target != 0) kill(target, SIGKILL);
    }
    for (Slot& s : g_slots) {
      if (s.state.load() != 2) continue;
      int fd = open(s.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        RemoveContents(fd, 0);
        close(fd);
      }
      rmdir(s.path);
    }
  }
  // End the process as the signal would have.
  signal(sig, SIG_DFL);
  errno = saved_errno;
  raise(sig);
}

void InstallOnce() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  g_owner.store(getpid());
  if (g_installed) return;
  g_installed = true;
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(kSignals[i], nullptr, &g_previous[i]);
    // A signal the process ignores (nohup) stays ignored.
    if (g_previous[i].sa_handler == SIG_IGN) continue;
    sigaction(kSignals[i], &sa, nullptr);
  }
}

}  // namespace

ScratchDir::ScratchDir(std::string_view prefix) {
  std::error_code ec;
  std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec) return;
  std::string tmpl = (temp / (std::string(prefix) + "-XXXXXX")).string();
  if (tmpl.size() >= kPathMax || mkdtemp(tmpl.data()) == nullptr) return;
  path_ = tmpl;
  InstallOnce();
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, tmpl.c_str(), tmpl.size() + 1);
      g_slots[i].state.store(2);
      slot_ = i;
      break;
    }
  }
}

ScratchDir::~ScratchDir() {
  if (slot_ >= 0) g_slots[slot_].state.store(0);
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

KillOnSignal::KillOnSignal(pid_t pid, bool group) {
  if (pid <= 0) return;
  InstallOnce();
  for (int i = 0; i < kChildSlots; ++i) {
    pid_t expected = 0;
    if (g_children[i].compare_exchange_strong(expected, group ? -pid : pid)) {
      slot_ = i;
      return;
    }
  }
}

KillOnSignal::~KillOnSignal() {
  if (slot_ >= 0) g_children[slot_].store(0);
}

}  // namespace onnxkit
