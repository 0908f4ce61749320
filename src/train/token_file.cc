// Token file reading (map, validate header and ids) and streaming writing (temp file + rename).
// All multi-byte fields are little-endian; the reader assumes a little-endian host.
#include "nexus/train/token_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "nexus/io/mapped_file.h"
#include "nexus/io/temp_file.h"

namespace nexus {

namespace {

constexpr char kMagic[4] = {'N', 'X', 'T', 'K'};
constexpr size_t kCrcOffset = 60;

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as zlib computes it.
uint32_t crc32(const uint8_t* p, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Status file_error(const std::string& path, const std::string& what) {
  return Status::error("[token file] '" + path + "': " + what);
}

// Index of the first id >= vocab, or n when all are below it.
template <typename T>
uint64_t first_bad_id(const T* ids, uint64_t n, uint64_t vocab) {
  constexpr uint64_t kBlock = 1 << 16;
  for (uint64_t b = 0; b < n; b += kBlock) {
    const uint64_t e = std::min(n, b + kBlock);
    T mx = 0;
    for (uint64_t i = b; i < e; ++i) mx = std::max(mx, ids[i]);  // vectorizes
    if (mx < vocab) continue;
    for (uint64_t i = b; i < e; ++i)
      if (ids[i] >= vocab) return i;
  }
  return n;
}

}  // namespace

uint64_t tokenizer_fingerprint(const Tokenizer& tokenizer) {
  uint64_t h = 0xCBF29CE484222325ull;
  auto mix = [&h](uint8_t byte) {
    h ^= byte;
    h *= 0x100000001B3ull;
  };
  for (int64_t id = 0; id < tokenizer.n_vocab(); ++id) {
    for (char c : tokenizer.token_text(static_cast<int32_t>(id))) mix(static_cast<uint8_t>(c));
    mix(0);
  }
  return h;
}

std::array<uint8_t, TokenFileHeader::kSize> encode_token_file_header(const TokenFileHeader& h) {
  std::array<uint8_t, TokenFileHeader::kSize> b{};
  std::memcpy(b.data(), kMagic, 4);
  put<uint32_t>(&b[4], h.version);
  put<uint32_t>(&b[8], h.token_bytes);
  put<uint32_t>(&b[12], static_cast<uint32_t>(TokenFileHeader::kSize));
  put<uint64_t>(&b[16], h.n_tokens);
  put<uint64_t>(&b[24], h.vocab_size);
  put<uint64_t>(&b[32], h.tokenizer_hash);
  put<uint32_t>(&b[40], h.eos_id);
  put<uint32_t>(&b[kCrcOffset], crc32(b.data(), kCrcOffset));
  return b;
}

Result<TokenFile> TokenFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return Status::error("[token file] " + mapped.status().message());
  const uint8_t* p = mapped.value()->data();
  const size_t size = mapped.value()->size();
  if (size == 0) return file_error(path, "empty file (0 bytes)");
  if (size < 4 || std::memcmp(p, kMagic, 4) != 0)
    return file_error(path, "not a token file (bad magic; expected \"NXTK\")");
  if (size < TokenFileHeader::kSize)
    return file_error(path, "truncated header: " + std::to_string(size) + " of " +
                                std::to_string(TokenFileHeader::kSize) + " bytes");
  TokenFileHeader h;
  h.version = get<uint32_t>(p + 4);
  if (h.version != TokenFileHeader::kVersion)
    return file_error(path, "unsupported version " + std::to_string(h.version) + " (expected " +
                                std::to_string(TokenFileHeader::kVersion) + ")");
  if (get<uint32_t>(p + kCrcOffset) != crc32(p, kCrcOffset))
    return file_error(path, "header checksum mismatch (corrupt header)");
  h.token_bytes = get<uint32_t>(p + 8);
  const uint32_t header_size = get<uint32_t>(p + 12);
  h.n_tokens = get<uint64_t>(p + 16);
  h.vocab_size = get<uint64_t>(p + 24);
  h.tokenizer_hash = get<uint64_t>(p + 32);
  h.eos_id = get<uint32_t>(p + 40);
  if (header_size != TokenFileHeader::kSize)
    return file_error(path, "unsupported header size " + std::to_string(header_size));
  if (h.token_bytes != 2 && h.token_bytes != 4)
    return file_error(
        path, "bad token width " + std::to_string(h.token_bytes) + " bytes (expected 2 or 4)");
  if (h.vocab_size == 0 || (h.token_bytes == 2 && h.vocab_size > 65536) ||
      h.vocab_size > 0x80000000ull)
    return file_error(path, "bad vocab size " + std::to_string(h.vocab_size) + " for " +
                                std::to_string(h.token_bytes) + "-byte ids");
  if (h.n_tokens == 0) return file_error(path, "holds no tokens");
  const uint64_t payload = size - TokenFileHeader::kSize;
  const bool too_short = h.n_tokens > payload / h.token_bytes;
  if (too_short || payload != h.n_tokens * h.token_bytes)
    return file_error(path, std::string(too_short ? "truncated" : "size mismatch") + ": " +
                                std::to_string(h.n_tokens) + " tokens need " +
                                std::to_string(h.n_tokens) + " x " + std::to_string(h.token_bytes) +
                                " bytes after the header, found " + std::to_string(payload));
  TokenFile f;
  f.path_ = path;
  f.header_ = h;
  f.map_ = std::move(mapped.value());
  const uint8_t* ids = p + TokenFileHeader::kSize;
  uint64_t bad;
  if (h.token_bytes == 2) {
    f.u16_ = reinterpret_cast<const uint16_t*>(ids);
    bad = first_bad_id(f.u16_, h.n_tokens, h.vocab_size);
  } else {
    f.u32_ = reinterpret_cast<const uint32_t*>(ids);
    bad = first_bad_id(f.u32_, h.n_tokens, h.vocab_size);
  }
  if (bad < h.n_tokens)
    return file_error(path, "token " + std::to_string(bad) + " has id " + std::to_string(f[bad]) +
                                ", outside the vocabulary of " + std::to_string(h.vocab_size));
  return f;
}

void TokenFile::copy(uint64_t begin, std::span<int32_t> out) const {
  if (header_.token_bytes == 2) {
    const uint16_t* src = u16_ + begin;
    for (size_t i = 0; i < out.size(); ++i) out[i] = src[i];
  } else {
    std::memcpy(out.data(), u32_ + begin, out.size() * sizeof(int32_t));
  }
}

Result<std::unique_ptr<TokenFileWriter>> TokenFileWriter::create(const std::string& path,
                                                                 uint64_t vocab_size,
                                                                 uint64_t tokenizer_hash,
                                                                 int32_t eos_id) {
  if (vocab_size == 0 || vocab_size > 0x80000000ull)
    return file_error(path, "bad vocab size " + std::to_string(vocab_size));
  std::unique_ptr<TokenFileWriter> w(new TokenFileWriter());
  w->path_ = path;
  w->header_.token_bytes = vocab_size <= 65535 ? 2 : 4;
  w->header_.vocab_size = vocab_size;
  w->header_.tokenizer_hash = tokenizer_hash;
  w->header_.eos_id = eos_id >= 0 ? static_cast<uint32_t>(eos_id) : 0xFFFFFFFFu;
  w->tmp_ = std::make_unique<TempFile>(path + ".tmp." + std::to_string(getpid()));
  if (w->tmp_->fd() < 0) return w->tmp_->open_status(path);
  // A zeroed placeholder header; finish() writes the real one.
  const std::array<uint8_t, TokenFileHeader::kSize> zero{};
  NEXUS_RETURN_IF_ERROR(w->write(zero.data(), zero.size()));
  return w;
}

TokenFileWriter::~TokenFileWriter() = default;

Status TokenFileWriter::write(const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(tmp_->fd(), p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return file_error(path_, "cannot write '" + tmp_->path() + "': " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

Status TokenFileWriter::append(std::span<const int32_t> ids) {
  const uint32_t width = header_.token_bytes;
  buf_.resize(ids.size() * width);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= header_.vocab_size)
      return file_error(path_, "id " + std::to_string(ids[i]) + " outside the vocabulary of " +
                                   std::to_string(header_.vocab_size));
    if (width == 2)
      put<uint16_t>(&buf_[i * 2], static_cast<uint16_t>(ids[i]));
    else
      put<uint32_t>(&buf_[i * 4], static_cast<uint32_t>(ids[i]));
  }
  NEXUS_RETURN_IF_ERROR(write(buf_.data(), buf_.size()));
  header_.n_tokens += ids.size();
  return Status::ok();
}

Status TokenFileWriter::finish() {
  if (header_.n_tokens == 0) return file_error(path_, "no tokens to write (empty input)");
  const auto h = encode_token_file_header(header_);
  if (::pwrite(tmp_->fd(), h.data(), h.size(), 0) != static_cast<ssize_t>(h.size()))
    return file_error(path_, "cannot write '" + tmp_->path() + "': " + std::strerror(errno));
  if (Status st = tmp_->commit(path_); !st) return file_error(path_, st.message());
  return Status::ok();
}

}  // namespace nexus
