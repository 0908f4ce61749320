// The temporary file an atomic write fills before renaming it into place (write_file_atomic,
// GgufStreamWriter): its space is reserved before the first byte, so a full disk is one clear
// error up front instead of a long write that fails near its end, and while it exists it is
// registered, so that an interrupt (SIGINT, SIGTERM, SIGHUP) removes it instead of leaving a
// partial file (gigabytes, for a model) beside the output.
#pragma once

#include <cstdint>
#include <string>

#include "nexus/status.h"

namespace nexus {

// Creates `tmp` for writing and registers it. fd() is the descriptor (-1 after a failed open);
// the destructor closes it if still open, and removes the file unless commit() renamed it.
class TempFile {
 public:
  explicit TempFile(std::string tmp);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return tmp_; }
  // Error naming `target` and the reason when the file could not be created.
  Status open_status(const std::string& target) const;
  // Makes sure `bytes` fit (`target`, the final path, names the file in errors): an error naming
  // the size and the free space when the filesystem has fewer bytes available, then the space
  // allocated (fallocate; skipped where the filesystem does not support it), an error on ENOSPC or
  // EFBIG (a file-size limit).
  Status reserve(uint64_t bytes, const std::string& target) const;
  // fsync, close, rename onto `target`; removes the temporary file on failure.
  Status commit(const std::string& target);

 private:
  std::string tmp_;
  int fd_ = -1;
  int open_errno_ = 0;
  int slot_ = -1;
  bool done_ = false;
};

// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every registered temporary file,
// then end the process by the same signal (its default action). Once per process; the CLI calls
// it at start. Signals whose handler is not the default one are left alone.
void remove_temp_files_on_signals();

// Registered temporary files at this moment (for tests).
int registered_temp_files();

}  // namespace nexus
