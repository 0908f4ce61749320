// Token files: write/read round trips in both widths, and every kind of damaged file rejected with
// a message naming the file and the fault.
#include "nexus/train/token_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

std::string temp(const std::string& name) { return ::testing::TempDir() + "tokfile_" + name; }

std::string write_tokens(const std::string& name, const std::vector<int32_t>& ids, uint64_t vocab) {
  const std::string path = temp(name);
  auto w = TokenFileWriter::create(path, vocab, 0x1234, 7);
  EXPECT_TRUE(w) << w.status().message();
  EXPECT_TRUE(w.value()->append(ids));
  EXPECT_TRUE(w.value()->finish());
  return path;
}

std::string read_bytes(const std::string& path) { return read_file(path).value(); }

void write_bytes(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(write_file_atomic(path, bytes.data(), bytes.size()));
}

// Expects open(path) to fail with a message holding the path and `what`.
void expect_rejected(const std::string& path, const std::string& what) {
  auto f = TokenFile::open(path);
  ASSERT_FALSE(f) << path;
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
}

TEST(TokenFile, RoundTripUint16AndUint32) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back((i * 37) % 500);
  const std::string p16 = write_tokens("u16.bin", ids, 500);
  auto f = TokenFile::open(p16);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->size(), 1000u);
  EXPECT_EQ(f->header().token_bytes, 2u);
  EXPECT_EQ(f->header().tokenizer_hash, 0x1234u);
  EXPECT_EQ(f->header().eos_id, 7u);
  EXPECT_EQ(std::filesystem::file_size(p16), 64u + 2000u);
  std::vector<int32_t> back(ids.size());
  f->copy(0, back);
  EXPECT_EQ(back, ids);

  ids.push_back(69999);
  const std::string p32 = write_tokens("u32.bin", ids, 70000);
  auto g = TokenFile::open(p32);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->header().token_bytes, 4u);
  EXPECT_EQ((*g)[1000], 69999);
  std::vector<int32_t> tail(2);
  g->copy(999, tail);
  EXPECT_EQ(tail, (std::vector<int32_t>{ids[999], 69999}));
  EXPECT_FALSE(std::filesystem::exists(p32 + ".tmp." + std::to_string(getpid())));
}

TEST(TokenFile, WriterRejectsBadIdsAndEmptyOutput) {
  const std::string path = temp("writer_bad.bin");
  std::filesystem::remove(path);
  {
    auto w = TokenFileWriter::create(path, 10, 0, -1);
    ASSERT_TRUE(w);
    const std::vector<int32_t> bad{1, 10};
    const Status st = w.value()->append(bad);
    ASSERT_FALSE(st);
    EXPECT_NE(st.message().find("id 10 outside the vocabulary of 10"), std::string::npos);
    const Status empty = w.value()->finish();
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.message().find("no tokens"), std::string::npos);
  }
  // Nothing is left behind: neither the file nor its temporary.
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(getpid())));
}

TEST(TokenFile, DamagedFilesAreRejectedWithTheReason) {
  const std::vector<int32_t> ids{1, 2, 3, 4, 5, 6, 7, 8};
  const std::string good = read_bytes(write_tokens("good.bin", ids, 100));

  expect_rejected(temp("does_not_exist.bin"), "cannot open");
  write_bytes(temp("empty.bin"), "");
  expect_rejected(temp("empty.bin"), "empty file");
  write_bytes(temp("magic.bin"), "GGUF" + good.substr(4));
  expect_rejected(temp("magic.bin"), "bad magic");
  write_bytes(temp("short_header.bin"), good.substr(0, 40));
  expect_rejected(temp("short_header.bin"), "truncated header");
  write_bytes(temp("truncated.bin"), good.substr(0, good.size() - 3));
  expect_rejected(temp("truncated.bin"), "truncated: 8 tokens");
  write_bytes(temp("extra.bin"), good + "xx");
  expect_rejected(temp("extra.bin"), "size mismatch");
  std::string flipped = good;
  flipped[20] ^= 1;  // n_tokens changed without fixing the CRC
  write_bytes(temp("crc.bin"), flipped);
  expect_rejected(temp("crc.bin"), "checksum mismatch");

  TokenFileHeader h;
  h.vocab_size = 100;
  h.n_tokens = 0;
  auto img = encode_token_file_header(h);
  write_bytes(temp("zero.bin"), std::string(img.begin(), img.end()));
  expect_rejected(temp("zero.bin"), "holds no tokens");

  h.n_tokens = 8;
  h.vocab_size = 5;  // ids 5..8 are out of range
  img = encode_token_file_header(h);
  write_bytes(temp("ids.bin"), std::string(img.begin(), img.end()) + good.substr(64));
  expect_rejected(temp("ids.bin"), "token 4 has id 5, outside the vocabulary of 5");

  h.vocab_size = 100;
  h.token_bytes = 3;
  img = encode_token_file_header(h);
  write_bytes(temp("width.bin"), std::string(img.begin(), img.end()) + good.substr(64));
  expect_rejected(temp("width.bin"), "bad token width 3");

  h.token_bytes = 2;
  h.version = 9;
  img = encode_token_file_header(h);
  write_bytes(temp("version.bin"), std::string(img.begin(), img.end()) + good.substr(64));
  expect_rejected(temp("version.bin"), "unsupported version 9");
}

}  // namespace
}  // namespace nexus
