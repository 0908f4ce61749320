// Malformed GGUF files: valid images from GgufWriter, corrupted field by field. Every corruption
// must give an error that names the problem and the byte offset, never a crash or a huge
// allocation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string_view>
#include <vector>

#include "nexus/io/gguf.h"

namespace nexus {
namespace {

using Bytes = std::vector<uint8_t>;

// Offset of the first occurrence of `needle` in `img`.
size_t find(const Bytes& img, std::string_view needle) {
  auto it = std::search(img.begin(), img.end(), needle.begin(), needle.end());
  EXPECT_NE(it, img.end()) << "'" << needle << "' not in the image";
  return static_cast<size_t>(it - img.begin());
}

template <typename T>
void poke(Bytes& img, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), img.size());
  std::memcpy(img.data() + at, &v, sizeof(T));
}

// The error message of parsing `img`; fails the test when it parses.
std::string parse_error(const Bytes& img) {
  auto r = GgufFile::parse(img, nullptr, "img");
  EXPECT_FALSE(r) << "a corrupted image parsed";
  return r ? std::string() : r.status().message();
}

std::string at(size_t offset) { return "at offset " + std::to_string(offset) + ":"; }

// Where the fields of a metadata entry with key `key` are.
struct KvFields {
  size_t key_len, type, value;
};
KvFields kv_fields(const Bytes& img, std::string_view key) {
  const size_t k = find(img, key);
  return {k - 8, k + key.size(), k + key.size() + 4};
}

// Where the fields of the tensor info for `name` (of rank `rank`) are.
struct TensorFields {
  size_t name_len, rank, dim0, type, offset;
};
TensorFields tensor_fields(const Bytes& img, std::string_view name, size_t rank) {
  const size_t n = find(img, name);
  const size_t r = n + name.size();
  return {n - 8, r, r + 4, r + 4 + 8 * rank, r + 8 + 8 * rank};
}

// A small valid file: a few keys of different types and two F32 tensors whose sizes are
// multiples of the alignment (so there is no trailing padding: every truncation cuts data).
Bytes base_image() {
  GgufWriter w;
  w.set_string("general.architecture", "test");
  w.set_u32("test.count", 7);
  w.set_bool("test.flag", true);
  w.set_string_array("test.strings", {"ab", "cde"});
  w.set_i32_array("test.ints", {1, 2, 3});
  w.set_u32("test.aaaa", 1);
  w.set_u32("test.bbbb", 2);
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i);
  w.add_tensor("tensor_a", DType::kF32, {2, 4}, v.data());
  w.add_tensor("tensor_b", DType::kF32, {8}, v.data());
  return w.serialize();
}

TEST(GgufMalformed, BaseImageParses) {
  const Bytes img = base_image();
  auto r = GgufFile::parse(img, nullptr, "img");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->tensors().size(), 2u);
  EXPECT_EQ(img.size(), r->data_offset() + 64);
}

TEST(GgufMalformed, BadMagic) {
  Bytes img = base_image();
  img[0] = 'X';
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(0)), std::string::npos) << e;
  EXPECT_NE(e.find("bad magic"), std::string::npos) << e;
  poke<uint32_t>(img, 0, 0x47475546);  // "GGUF" read as big-endian
  e = parse_error(img);
  EXPECT_NE(e.find("big-endian"), std::string::npos) << e;
}

TEST(GgufMalformed, Versions) {
  Bytes img = base_image();
  poke<uint32_t>(img, 4, 1);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(4) + " GGUF version 1 is not supported"), std::string::npos) << e;
  poke<uint32_t>(img, 4, 99);
  e = parse_error(img);
  EXPECT_NE(e.find(at(4) + " unsupported GGUF version 99"), std::string::npos) << e;
  poke<uint32_t>(img, 4, 2);  // v2 has the same layout as v3
  EXPECT_TRUE(GgufFile::parse(img, nullptr, "img"));
}

TEST(GgufMalformed, TruncationAtEveryOffsetFails) {
  const Bytes img = base_image();
  for (size_t n = 0; n < img.size(); ++n) {
    Bytes cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
    Result<GgufFile> r = Status::error("not run");
    ASSERT_NO_THROW(r = GgufFile::parse(cut, nullptr, "img")) << "truncated to " << n;
    ASSERT_FALSE(r) << "truncated to " << n << " bytes parsed";
    EXPECT_NE(r.status().message().find("at offset "), std::string::npos) << r.status().message();
  }
}

TEST(GgufMalformed, TruncationMessages) {
  const Bytes img = base_image();
  std::string e = parse_error(Bytes(img.begin(), img.begin() + 6));
  EXPECT_NE(e.find(at(4) + " file truncated while reading version (need 4 bytes, 2 left)"),
            std::string::npos)
      << e;
  e = parse_error(Bytes(img.begin(), img.end() - 1));
  EXPECT_NE(e.find("tensor 'tensor_b' data"), std::string::npos) << e;
  EXPECT_NE(e.find("runs past the end of the file"), std::string::npos) << e;
}

TEST(GgufMalformed, AbsurdCounts) {
  Bytes img = base_image();
  poke<uint64_t>(img, 8, 1ull << 60);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(8) + " tensor count 1152921504606846976 is impossible"), std::string::npos)
      << e;
  img = base_image();
  poke<uint64_t>(img, 16, ~0ull);
  e = parse_error(img);
  EXPECT_NE(e.find(at(16) + " metadata count 18446744073709551615 is impossible"),
            std::string::npos)
      << e;
}

TEST(GgufMalformed, StringLengthPastTheEnd) {
  Bytes img = base_image();
  const KvFields f = kv_fields(img, "general.architecture");
  poke<uint64_t>(img, f.value, 1ull << 40);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(f.value) + " string length 1099511627776 runs past the end"),
            std::string::npos)
      << e;
  img = base_image();
  poke<uint64_t>(img, f.key_len, ~0ull);
  e = parse_error(img);
  EXPECT_NE(e.find(at(f.key_len) + " metadata key length"), std::string::npos) << e;
}

TEST(GgufMalformed, ArrayLengthHuge) {
  Bytes img = base_image();
  const KvFields f = kv_fields(img, "test.ints");
  poke<uint64_t>(img, f.value + 4, 1ull << 62);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(f.value + 4) + " array length 4611686018427387904 does not fit"),
            std::string::npos)
      << e;
  img = base_image();
  const KvFields s = kv_fields(img, "test.strings");
  poke<uint64_t>(img, s.value + 4, 1000);
  e = parse_error(img);
  EXPECT_NE(e.find("array length 1000 does not fit"), std::string::npos) << e;
}

TEST(GgufMalformed, UnknownValueTypes) {
  Bytes img = base_image();
  const KvFields f = kv_fields(img, "test.count");
  poke<uint32_t>(img, f.type, 13);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(f.type) + " unknown value type 13 for key 'test.count'"), std::string::npos)
      << e;
  img = base_image();
  const KvFields a = kv_fields(img, "test.ints");
  poke<uint32_t>(img, a.value, 0xdeadbeef);
  e = parse_error(img);
  EXPECT_NE(e.find(at(a.value) + " unknown array element type 3735928559"), std::string::npos) << e;
}

TEST(GgufMalformed, NestedArraysAndBadBool) {
  Bytes img = base_image();
  const KvFields a = kv_fields(img, "test.ints");
  poke<uint32_t>(img, a.value, static_cast<uint32_t>(GgufType::kArray));
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(a.value) + " nested arrays are not supported"), std::string::npos) << e;
  img = base_image();
  const KvFields b = kv_fields(img, "test.flag");
  img[b.value] = 2;
  e = parse_error(img);
  EXPECT_NE(e.find(at(b.value) + " bool value 2 is not 0 or 1"), std::string::npos) << e;
}

TEST(GgufMalformed, DuplicateKeysAndTensorNames) {
  Bytes img = base_image();
  const KvFields k = kv_fields(img, "test.bbbb");
  std::memcpy(img.data() + k.key_len + 8, "test.aaaa", 9);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(k.key_len) + " duplicate metadata key 'test.aaaa'"), std::string::npos) << e;
  img = base_image();
  const TensorFields t = tensor_fields(img, "tensor_b", 1);
  img[t.name_len + 8 + 7] = 'a';
  e = parse_error(img);
  EXPECT_NE(e.find(at(t.name_len) + " duplicate tensor name 'tensor_a'"), std::string::npos) << e;
}

TEST(GgufMalformed, UnknownTensorType) {
  for (uint32_t type : {4u, 5u, 31u, 0xffffffffu}) {
    Bytes img = base_image();
    const TensorFields t = tensor_fields(img, "tensor_a", 2);
    poke<uint32_t>(img, t.type, type);
    std::string e = parse_error(img);
    EXPECT_NE(e.find(at(t.type) + " tensor 'tensor_a' has unknown type id " + std::to_string(type)),
              std::string::npos)
        << e;
  }
}

TEST(GgufMalformed, BadRank) {
  for (uint32_t rank : {0u, 5u, 1000u}) {
    Bytes img = base_image();
    const TensorFields t = tensor_fields(img, "tensor_a", 2);
    poke<uint32_t>(img, t.rank, rank);
    std::string e = parse_error(img);
    EXPECT_NE(e.find(at(t.rank) + " tensor 'tensor_a' has rank " + std::to_string(rank)),
              std::string::npos)
        << e;
  }
}

TEST(GgufMalformed, BadDimensions) {
  Bytes img = base_image();
  TensorFields t = tensor_fields(img, "tensor_a", 2);
  poke<uint64_t>(img, t.dim0 + 8, 0);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(t.dim0 + 8) + " tensor 'tensor_a' dimension 1 = 0 is zero"),
            std::string::npos)
      << e;
  img = base_image();
  poke<uint64_t>(img, t.dim0, 1ull << 63);
  e = parse_error(img);
  EXPECT_NE(e.find(at(t.dim0) + " tensor 'tensor_a' dimension 0 = 9223372036854775808 is out"),
            std::string::npos)
      << e;

  // Four dimensions of 2^32 each: the element count overflows 64 bits at the second one.
  GgufWriter w;
  std::vector<float> v(4);
  w.add_tensor("tensor_4d", DType::kF32, {1, 1, 2, 2}, v.data());
  img = w.serialize();
  t = tensor_fields(img, "tensor_4d", 4);
  for (int d = 0; d < 4; ++d) poke<uint64_t>(img, t.dim0 + 8 * d, 1ull << 32);
  e = parse_error(img);
  EXPECT_NE(e.find(at(t.dim0 + 8) + " tensor 'tensor_4d' dimension 1 = 4294967296 makes the " +
                   "element count overflow"),
            std::string::npos)
      << e;
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlockSize) {
  GgufWriter w;
  std::vector<uint8_t> q(34);
  w.add_tensor("tensor_q", DType::kQ8_0, {1, 32}, q.data());
  Bytes img = w.serialize();
  const TensorFields t = tensor_fields(img, "tensor_q", 2);
  poke<uint64_t>(img, t.dim0, 16);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(t.type) + " tensor 'tensor_q' row of 16 is not a multiple of the Q8_0 " +
                   "block size 32"),
            std::string::npos)
      << e;
}

TEST(GgufMalformed, TensorOffsets) {
  Bytes img = base_image();
  const TensorFields t = tensor_fields(img, "tensor_b", 1);
  poke<uint64_t>(img, t.offset, 4);
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(t.offset) + " tensor 'tensor_b' offset 4 is not aligned to 32"),
            std::string::npos)
      << e;
  poke<uint64_t>(img, t.offset, 1ull << 40);
  e = parse_error(img);
  EXPECT_NE(e.find(at(t.name_len) + " tensor 'tensor_b' data"), std::string::npos) << e;
  EXPECT_NE(e.find("runs past the end of the file (" + std::to_string(img.size()) + " bytes)"),
            std::string::npos)
      << e;
  // Starts inside the file but runs past its end: 16 floats from the second 32-byte slot.
  img = base_image();
  poke<uint64_t>(img, t.dim0, 16);
  e = parse_error(img);
  EXPECT_NE(e.find("tensor 'tensor_b' data"), std::string::npos) << e;
  EXPECT_NE(e.find("+64) runs past the end"), std::string::npos) << e;
  // Overlapping tensors.
  img = base_image();
  poke<uint64_t>(img, t.offset, 0);
  e = parse_error(img);
  EXPECT_NE(e.find(at(t.name_len) + " tensor 'tensor_b' data at data offset 0 overlaps tensor " +
                   "'tensor_a' [0, +32)"),
            std::string::npos)
      << e;
}

TEST(GgufMalformed, BadAlignment) {
  GgufWriter w;
  w.set_alignment(64);
  w.set_string("general.alignmenX", "x");
  std::vector<float> v(16);
  w.add_tensor("tensor_a", DType::kF32, {16}, v.data());
  const Bytes good = w.serialize();
  ASSERT_TRUE(GgufFile::parse(good, nullptr, "img"));
  EXPECT_EQ(GgufFile::parse(good, nullptr, "img")->alignment(), 64u);
  const KvFields f = kv_fields(good, "general.alignment");
  for (uint32_t a : {0u, 48u, 1u << 21}) {
    Bytes img = good;
    poke<uint32_t>(img, f.value, a);
    std::string e = parse_error(img);
    EXPECT_NE(
        e.find(at(f.value) + " general.alignment " + std::to_string(a) + " is not a power of two"),
        std::string::npos)
        << e;
  }
  // general.alignment holding a string: rename the other key and drop the real one's name.
  Bytes img = good;
  img[f.type - 1] = 'Y';
  const KvFields s = kv_fields(img, "general.alignmenX");
  img[s.type - 1] = 't';
  std::string e = parse_error(img);
  EXPECT_NE(e.find(at(s.value) + " general.alignment has type str, expected an integer"),
            std::string::npos)
      << e;
}

// A 100-byte file that claims 2^60 of something must fail at once, without allocating for it.
TEST(GgufMalformed, HugeCountsFailFastWithoutAllocating) {
  auto hostile = [](uint64_t n_tensors, uint64_t n_kv, uint32_t elem_type, uint64_t n_elems) {
    Bytes img;
    auto put = [&](auto v) {
      const size_t n = img.size();
      img.resize(n + sizeof(v));
      std::memcpy(img.data() + n, &v, sizeof(v));
    };
    put(uint32_t{0x46554747});
    put(uint32_t{3});
    put(n_tensors);
    put(n_kv);
    put(uint64_t{1});
    img.push_back('k');
    put(static_cast<uint32_t>(GgufType::kArray));
    put(elem_type);
    put(n_elems);
    img.resize(100, 'x');
    return img;
  };
  const uint64_t huge = 1ull << 60;
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = parse_error(hostile(0, 1, static_cast<uint32_t>(GgufType::kString), huge));
  EXPECT_NE(e.find(at(41) + " array length 1152921504606846976 does not fit"), std::string::npos)
      << e;
  e = parse_error(hostile(0, 1, static_cast<uint32_t>(GgufType::kU8), huge));
  EXPECT_NE(e.find("array length 1152921504606846976 does not fit"), std::string::npos) << e;
  e = parse_error(hostile(0, huge, 0, 0));
  EXPECT_NE(e.find("metadata count 1152921504606846976 is impossible"), std::string::npos) << e;
  e = parse_error(hostile(huge, 1, 0, 0));
  EXPECT_NE(e.find("tensor count 1152921504606846976 is impossible"), std::string::npos) << e;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 1000.0);
}

// Every byte of the image overwritten with a few values: parsing must not crash or throw, and a
// failure must name an offset.
TEST(GgufMalformed, EveryByteCorruptedNeverCrashes) {
  const Bytes base = base_image();
  for (size_t i = 0; i < base.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7f}, uint8_t{0xff}}) {
      Bytes img = base;
      img[i] = v;
      Result<GgufFile> r = Status::error("not run");
      ASSERT_NO_THROW(r = GgufFile::parse(img, nullptr, "img")) << "byte " << i;
      if (!r) {
        EXPECT_NE(r.status().message().find("at offset "), std::string::npos)
            << r.status().message();
      }
    }
  }
}

// The writer lays tensors out with the alignment a copied general.alignment key asks for, and u64
// array elements above INT64_MAX survive a read/write round trip.
TEST(GgufMalformed, RoundTripKeepsAlignmentAndU64Arrays) {
  GgufWriter w;
  w.set_alignment(64);
  GgufValue big;
  big.type = GgufType::kArray;
  big.array_type = GgufType::kU64;
  big.ai = {1, -1};  // -1 is the bit pattern of 2^64 - 1
  w.set("test.u64s", big);
  std::vector<float> v(3);
  w.add_tensor("a", DType::kF32, {3}, v.data());
  w.add_tensor("b", DType::kF32, {3}, v.data());
  const Bytes img = w.serialize();
  auto g = GgufFile::parse(img, nullptr, "img");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->find_tensor("b")->offset, 64u);
  GgufWriter w2;
  w2.copy_metadata(g.value());
  for (const auto& t : g->tensors()) w2.add_tensor(t.name, t.dtype, t.shape, t.data);
  EXPECT_EQ(w2.alignment(), 64u);
  EXPECT_EQ(w2.serialize(), img);
  EXPECT_EQ(static_cast<uint64_t>(g->get_int_array("test.u64s")->at(1)), ~0ull);
}

}  // namespace
}  // namespace nexus
