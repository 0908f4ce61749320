// Read-only memory mapping of a whole file (model weights stay in the page cache, zero-copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nexus/status.h"

namespace nexus {

class MappedFile {
 public:
  // Maps `path` read-only; error names the path and the OS reason.
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole file into a string; error names the path and the OS reason.
Result<std::string> read_file(const std::string& path);
// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename.
Status write_file_atomic(const std::string& path, const void* bytes, size_t n);

}  // namespace nexus
