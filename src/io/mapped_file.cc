// mmap-backed file access and atomic file writes.
#include "nexus/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "nexus/io/temp_file.h"

namespace nexus {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::error("cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error("'" + path + "' is not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Status::error("cannot map '" + path + "': " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error("error reading '" + path + "'");
  return ss.str();
}

Status write_file_atomic(const std::string& path, const void* bytes, size_t n) {
  TempFile tmp(path + ".tmp." + std::to_string(getpid()));
  if (tmp.fd() < 0) return tmp.open_status(path);
  NEXUS_RETURN_IF_ERROR(tmp.reserve(n, path));
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  size_t left = n;
  while (left > 0) {
    const ssize_t w = ::write(tmp.fd(), p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::error("cannot write '" + tmp.path() + "': " + std::strerror(errno));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return tmp.commit(path);
}

}  // namespace nexus
