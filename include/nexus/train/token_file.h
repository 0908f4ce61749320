// Pre-tokenized training data: a 64-byte header ("NXTK", dtype, token count, vocab size,
// tokenizer fingerprint, CRC-32) followed by the token ids, memory-mapped for the data loader.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nexus/status.h"
#include "nexus/tokenizer.h"

namespace nexus {

class TempFile;

class MappedFile;

// The header fields, as stored (see docs/TRAINING.md for the byte layout).
struct TokenFileHeader {
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kSize = 64;
  uint32_t version = kVersion;
  uint32_t token_bytes = 2;  // 2: uint16 ids (vocab <= 65535), 4: uint32 ids
  uint64_t n_tokens = 0;
  uint64_t vocab_size = 0;
  uint64_t tokenizer_hash = 0;    // tokenizer_fingerprint() of the tokenizer that wrote it
  uint32_t eos_id = 0xFFFFFFFFu;  // the tokenizer's EOS, 0xFFFFFFFF when it has none
};

// FNV-1a (64-bit) over every token string, each followed by a 0 byte: equal for two tokenizers
// exactly when their vocabularies spell the same strings in the same order.
uint64_t tokenizer_fingerprint(const Tokenizer& tokenizer);

// A validated, memory-mapped token file. Cheap to copy (the mapping is shared).
class TokenFile {
 public:
  // Maps `path` and checks it: magic, version, header CRC, dtype, exact size for n_tokens, at
  // least one token, and every id below vocab_size. The id check is one sequential scan at open
  // (about 1 GB/s), so a loader never meets a bad id mid-run. Errors name the file and the fault.
  static Result<TokenFile> open(const std::string& path);

  const TokenFileHeader& header() const { return header_; }
  uint64_t size() const { return header_.n_tokens; }
  uint64_t vocab_size() const { return header_.vocab_size; }
  const std::string& path() const { return path_; }
  // Names the file in later messages: a token file made from a text in a temporary file (already
  // removed) goes by the text's path.
  void rename_for_messages(std::string name) { path_ = std::move(name); }
  // Token `i` (unchecked; i < size()).
  int32_t operator[](uint64_t i) const {
    return header_.token_bytes == 2 ? static_cast<int32_t>(u16_[i]) : static_cast<int32_t>(u32_[i]);
  }
  // Copies tokens [begin, begin + out.size()) into `out`, widening to int32.
  void copy(uint64_t begin, std::span<int32_t> out) const;

 private:
  TokenFile() = default;
  std::shared_ptr<MappedFile> map_;
  std::string path_;
  TokenFileHeader header_;
  const uint16_t* u16_ = nullptr;
  const uint32_t* u32_ = nullptr;
};

// Streams ids into a token file: the tokens go to a temporary file beside `path`, and finish()
// writes the header, syncs and renames it into place, so `path` never holds a partial file.
class TokenFileWriter {
 public:
  // `vocab_size` decides the dtype (uint16 up to 65535 tokens).
  static Result<std::unique_ptr<TokenFileWriter>> create(const std::string& path,
                                                         uint64_t vocab_size,
                                                         uint64_t tokenizer_hash, int32_t eos_id);
  ~TokenFileWriter();  // removes the temporary file unless finish() succeeded (io/temp_file.h)
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Appends ids; an id outside [0, vocab_size) is an error.
  Status append(std::span<const int32_t> ids);
  // Completes the file; fails on zero tokens (an empty token file is never written).
  Status finish();
  uint64_t n_tokens() const { return header_.n_tokens; }

 private:
  TokenFileWriter() = default;
  Status write(const uint8_t* p, size_t n);
  std::string path_;
  std::unique_ptr<TempFile> tmp_;
  TokenFileHeader header_;
  std::vector<uint8_t> buf_;
};

// The 64-byte header image (CRC included); exposed for tests that craft damaged files.
std::array<uint8_t, TokenFileHeader::kSize> encode_token_file_header(const TokenFileHeader& h);

}  // namespace nexus
