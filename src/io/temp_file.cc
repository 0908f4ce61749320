// TempFile (temp_file.h): open, reserve, commit; the registry the signal handler walks is a fixed
// array of atomic pointers, so the handler reads it without locks or allocation.
#include "nexus/io/temp_file.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "nexus/core/format_bytes.h"

namespace nexus {
namespace {

constexpr int kSlots = 64;  // temporary files open at once (one per writing thread in practice)
std::atomic<const char*> g_slots[kSlots];

int register_path(const char* p) {
  for (int i = 0; i < kSlots; ++i) {
    const char* none = nullptr;
    if (g_slots[i].compare_exchange_strong(none, p)) return i;
  }
  return -1;  // full: the file is still written and removed on errors, just not on a signal
}

void unregister(int slot) {
  if (slot >= 0) g_slots[slot].store(nullptr);
}

extern "C" void remove_and_reraise(int sig) {
  for (auto& slot : g_slots)
    if (const char* p = slot.load()) ::unlink(p);  // async-signal-safe
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

TempFile::TempFile(std::string tmp) : tmp_(std::move(tmp)) {
  // Registered before it exists, so no moment has the file on disk and unregistered.
  slot_ = register_path(tmp_.c_str());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    open_errno_ = errno;
    unregister(slot_);
    slot_ = -1;
    done_ = true;
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_) ::unlink(tmp_.c_str());
  unregister(slot_);
}

Status TempFile::open_status(const std::string& target) const {
  if (fd_ >= 0) return Status::ok();
  return Status::error("cannot write '" + target + "': cannot create the temporary file '" + tmp_ +
                       "': " + std::strerror(open_errno_));
}

Status TempFile::reserve(uint64_t bytes, const std::string& target) const {
  if (fd_ < 0 || bytes == 0) return Status::ok();
  struct statvfs fs;
  // A filesystem that reports no size at all (f_blocks 0: some FUSE and virtual ones) is not
  // judged by its free count; fallocate below still catches a real shortage.
  if (::fstatvfs(fd_, &fs) == 0 && fs.f_blocks > 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < bytes)
      return Status::error("not enough disk space for '" + target + "': it needs " +
                           format_bytes(bytes) + ", the filesystem has " +
                           format_bytes(free_bytes) + " free");
  }
  if (::fallocate(fd_, 0, 0, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    if (e == ENOSPC || e == EFBIG || e == EDQUOT)
      return Status::error("cannot reserve " + format_bytes(bytes) + " for '" + target +
                           "': " + std::strerror(e));
    // EOPNOTSUPP, ENOSYS, EINVAL...: the filesystem does not preallocate; write as before.
  }
  return Status::ok();
}

Status TempFile::commit(const std::string& target) {
  if (fd_ < 0) return open_status(target);
  if (::fsync(fd_) != 0)
    return Status::error("cannot fsync '" + tmp_ + "': " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    return Status::error("cannot close '" + tmp_ + "': " + std::strerror(errno));
  if (std::rename(tmp_.c_str(), target.c_str()) != 0)
    return Status::error("cannot rename '" + tmp_ + "' to '" + target +
                         "': " + std::strerror(errno));
  done_ = true;
  return Status::ok();
}

void remove_temp_files_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old = {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa = {};
      sa.sa_handler = remove_and_reraise;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

int registered_temp_files() {
  int n = 0;
  for (auto& slot : g_slots) n += slot.load() != nullptr ? 1 : 0;
  return n;
}

}  // namespace nexus
