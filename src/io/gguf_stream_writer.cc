// GgufStreamWriter: same byte layout as GgufWriter::serialize(), but tensor data is pulled from
// producers chunk by chunk and written straight to a temporary file that is renamed at the end.
#include "io/gguf_stream_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "io/gguf_encode.h"
#include "nexus/io/temp_file.h"

namespace nexus {
namespace {

using gguf_encode::put;
using gguf_encode::put_kv;
using gguf_encode::put_string;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Writes all of `n` bytes; false (errno set) on failure.
bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void GgufStreamWriter::set(const std::string& key, GgufValue v) {
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufStreamWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                  RowProducer produce) {
  NEXUS_CHECK(
      !shape.empty() && shape.size() <= kMaxDims,
      "[gguf stream writer] tensor '" + name + "' has rank " + std::to_string(shape.size()));
  for (const auto& t : tensors_)
    NEXUS_CHECK(t.name != name, "[gguf stream writer] duplicate tensor '" + name + "'");
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const size_t rb = row_bytes(dtype, shape.back());  // throws on a block-size mismatch
  tensors_.push_back({name, dtype, std::move(shape), rows, rb, std::move(produce)});
}

std::vector<uint8_t> GgufStreamWriter::header() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  const bool add_align =
      alignment_ != 32 && std::none_of(kv_.begin(), kv_.end(), [](const auto& kv) {
        return kv.first == "general.alignment";
      });
  put<uint64_t>(out, kv_.size() + (add_align ? 1 : 0));
  for (const auto& [k, v] : kv_) put_kv(out, k, v);
  if (add_align) put_kv(out, "general.alignment", gguf_u32(alignment_));
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) put<uint64_t>(out, t.shape[d]);  // innermost first
    put<uint32_t>(out, static_cast<uint32_t>(t.dtype));
    put<uint64_t>(out, offset);
    offset += align_up(t.row_bytes * t.rows, alignment_);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

size_t GgufStreamWriter::file_size() const {
  size_t n = header().size();
  for (const auto& t : tensors_) n += align_up(t.row_bytes * t.rows, alignment_);
  return n;
}

Status GgufStreamWriter::write(const std::string& path) const {
  TempFile tmp(path + ".tmp." + std::to_string(getpid()));
  if (tmp.fd() < 0) return tmp.open_status(path);
  const int fd = tmp.fd();
  NEXUS_RETURN_IF_ERROR(tmp.reserve(file_size(), path));
  const std::vector<uint8_t> head = header();
  if (!write_all(fd, head.data(), head.size()))
    return Status::error("cannot write '" + tmp.path() + "': " + std::strerror(errno));
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    const int64_t rows_per_chunk =
        std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes_ / std::max<size_t>(1, t.row_bytes)));
    for (int64_t r0 = 0; r0 < t.rows; r0 += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, t.rows - r0);
      buf.assign(static_cast<size_t>(n) * t.row_bytes, 0);
      try {
        t.produce(r0, n, buf.data());
      } catch (const std::exception& e) {
        return Status::error("cannot produce tensor '" + t.name + "': " + e.what());
      }
      if (!write_all(fd, buf.data(), buf.size()))
        return Status::error("cannot write '" + tmp.path() + "': " + std::strerror(errno));
    }
    const size_t data = t.row_bytes * t.rows;
    const std::vector<uint8_t> pad(align_up(data, alignment_) - data, 0);
    if (!write_all(fd, pad.data(), pad.size()))
      return Status::error("cannot write '" + tmp.path() + "': " + std::strerror(errno));
  }
  return tmp.commit(path);
}

}  // namespace nexus
