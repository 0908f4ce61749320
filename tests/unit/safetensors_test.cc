// The safetensors reader: F32/F16/BF16 tensors read in place, and every malformed file (truncated,
// bad header, offsets out of range, overlapping or mis-sized ranges, unknown dtypes, bad shard
// indexes) refused with an error naming the file and tensor, never a crash.
#include "nexus/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace nexus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A safetensors image from a header object and raw data, written the way the format defines it
// (u64 little-endian length, JSON padded with spaces to 8 bytes, data).
std::vector<uint8_t> image(const json& header, const std::vector<uint8_t>& data) {
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
void append(std::vector<uint8_t>& out, const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(T));
}

// Three tensors: a 2x3 F32 matrix, a 4-element F16 vector, a 2x2 BF16 matrix.
struct Sample {
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  std::vector<uint16_t> f16, bf16;
  json header;
  std::vector<uint8_t> data;
  Sample() {
    for (float x : {0.5f, 1.0f, -3.0f, 65504.0f}) f16.push_back(f32_to_f16(x));
    for (float x : {1.0f, -1.5f, 2.5e10f, 1e-3f}) bf16.push_back(f32_to_bf16(x));
    append(data, f32);
    append(data, f16);
    append(data, bf16);
    header = {{"__metadata__", {{"format", "pt"}}},
              {"w", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}},
              {"h", {{"dtype", "F16"}, {"shape", {4}}, {"data_offsets", {24, 32}}}},
              {"b", {{"dtype", "BF16"}, {"shape", {2, 2}}, {"data_offsets", {32, 40}}}}};
  }
  std::vector<uint8_t> bytes() const { return image(header, data); }
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
  auto r = SafetensorsFile::parse(bytes, nullptr, "bad.safetensors");
  return r ? std::string("parsed") : r.status().message();
}

TEST(Safetensors, ReadsF32F16Bf16InPlace) {
  Sample s;
  const std::vector<uint8_t> bytes = s.bytes();
  auto r = SafetensorsFile::parse(bytes, nullptr, "ok.safetensors");
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->metadata().at("format"), "pt");
  const SafetensorsTensor* w = r->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->numel(), 6);
  ASSERT_EQ(w->bytes.size(), 24u);
  EXPECT_EQ(std::memcmp(w->bytes.data(), s.f32.data(), 24), 0);
  // Zero-copy: the span points into the image.
  EXPECT_GE(w->bytes.data(), bytes.data());
  EXPECT_LT(w->bytes.data(), bytes.data() + bytes.size());
  const SafetensorsTensor* h = r->find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(std::memcmp(h->bytes.data(), s.f16.data(), 8), 0);
  const SafetensorsTensor* b = r->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  uint16_t v;
  std::memcpy(&v, b->bytes.data() + 2, 2);
  EXPECT_EQ(bf16_to_f32(v), -1.5f);
  EXPECT_EQ(r->find("missing"), nullptr);
  // Tensors come in data order.
  EXPECT_EQ(r->tensors()[0].name, "w");
  EXPECT_EQ(r->tensors()[2].name, "b");
}

TEST(Safetensors, ScalarAndEmptyTensors) {
  std::vector<uint8_t> data(4);
  const float x = -1e4f;
  std::memcpy(data.data(), &x, 4);
  json h = {{"s", {{"dtype", "F32"}, {"shape", json::array()}, {"data_offsets", {0, 4}}}},
            {"e", {{"dtype", "F16"}, {"shape", {0, 5}}, {"data_offsets", {4, 4}}}}};
  auto r = SafetensorsFile::parse(image(h, data), nullptr, "x");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->find("s")->numel(), 1);
  EXPECT_EQ(r->find("e")->numel(), 0);
}

TEST(Safetensors, RejectsTruncatedFiles) {
  EXPECT_NE(parse_error({}).find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(parse_error({1, 2, 3}).find("shorter than"), std::string::npos);
  const std::vector<uint8_t> good = Sample().bytes();
  // Every prefix of a valid file is refused (or, for the full length, read): never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_NE(parse_error(cut), "parsed") << "prefix of " << n << " bytes";
  }
  std::vector<uint8_t> cut(good.begin(), good.end() - 1);
  EXPECT_NE(parse_error(cut).find("tensor 'b': data_offsets [32, 40) lie outside"),
            std::string::npos)
      << parse_error(cut);
}

TEST(Safetensors, RejectsBadHeaders) {
  std::vector<uint8_t> huge = Sample().bytes();
  huge[6] = 0xff;  // header length far past the end
  EXPECT_NE(parse_error(huge).find("runs past the end"), std::string::npos) << parse_error(huge);
  std::vector<uint8_t> notjson = image(json::object(), {});
  notjson.resize(8);
  const std::string junk = "{\"a\": [1, 2";
  notjson[0] = static_cast<uint8_t>(junk.size());
  notjson.insert(notjson.end(), junk.begin(), junk.end());
  EXPECT_NE(parse_error(notjson).find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(image(json::array({1, 2}), {})).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(parse_error(image({{"t", 5}}, {})).find("tensor 't': entry is not an object"),
            std::string::npos);
}

TEST(Safetensors, RejectsBadEntries) {
  auto with = [](const std::string& key, json value) {
    Sample s;
    s.header["w"][key] = std::move(value);
    return parse_error(s.bytes());
  };
  std::string e = with("dtype", "I8");
  EXPECT_NE(e.find("bad.safetensors: tensor 'w': dtype I8 is not supported"), std::string::npos)
      << e;
  EXPECT_NE(with("dtype", "F64").find("dtype F64"), std::string::npos);
  EXPECT_NE(with("shape", "2x3").find("no shape array"), std::string::npos);
  EXPECT_NE(with("shape", {2, -3}).find("not a count"), std::string::npos);
  EXPECT_NE(with("shape", {1ll << 40, 1ll << 40}).find("larger than the file"), std::string::npos);
  EXPECT_NE(with("data_offsets", {0}).find("data_offsets is not a pair"), std::string::npos);
  EXPECT_NE(with("data_offsets", {16, 8}).find("lie outside"), std::string::npos);
  e = with("data_offsets", {0, 4000});
  EXPECT_NE(e.find("[0, 4000) lie outside the 40 data bytes"), std::string::npos) << e;
  e = with("data_offsets", {0, 20});
  EXPECT_NE(e.find("hold 20 bytes but F32 of this shape needs 24"), std::string::npos) << e;
  e = with("shape", {3, 3});
  EXPECT_NE(e.find("needs 36"), std::string::npos) << e;
  Sample s;
  s.header["h"]["data_offsets"] = {16, 24};  // inside w's range
  e = parse_error(s.bytes());
  EXPECT_NE(e.find("tensors 'w' and 'h' overlap"), std::string::npos) << e;
  s = Sample();
  s.header["__metadata__"] = 3;
  EXPECT_NE(parse_error(s.bytes()).find("__metadata__ is not an object"), std::string::npos);
}

class SafetensorsDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("nexus_st_" + std::to_string(getpid()) + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  void write(const std::string& name, const json& j) { std::ofstream(dir_ / name) << j.dump(); }
  // Two shards: "w" in the first, "h" and "b" in the second.
  void write_shards() {
    Sample s;
    json h1 = {{"w", s.header["w"]}};
    write("a.safetensors", image(h1, std::vector<uint8_t>(s.data.begin(), s.data.begin() + 24)));
    json h2 = {{"h", {{"dtype", "F16"}, {"shape", {4}}, {"data_offsets", {0, 8}}}},
               {"b", {{"dtype", "BF16"}, {"shape", {2, 2}}, {"data_offsets", {8, 16}}}}};
    write("b.safetensors", image(h2, std::vector<uint8_t>(s.data.begin() + 24, s.data.end())));
  }
  std::string error() {
    auto r = SafetensorsCheckpoint::open(dir_.string());
    return r ? std::string("opened") : r.status().message();
  }
  fs::path dir_;
};

TEST_F(SafetensorsDir, SingleFile) {
  write("model.safetensors", Sample().bytes());
  auto r = SafetensorsCheckpoint::open(dir_.string());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->files().size(), 1u);
  ASSERT_NE(r->find("b"), nullptr);
  EXPECT_EQ(r->find("b")->dtype, DType::kBF16);
}

TEST_F(SafetensorsDir, ShardsThroughTheIndex) {
  write_shards();
  write("model.safetensors.index.json",
        json{{"metadata", {{"total_size", 40}}},
             {"weight_map",
              {{"w", "a.safetensors"}, {"h", "b.safetensors"}, {"b", "b.safetensors"}}}});
  auto r = SafetensorsCheckpoint::open(dir_.string());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->files().size(), 2u);
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->tensors()[0]->name, "b");  // sorted by name
  EXPECT_EQ(r->find("w")->numel(), 6);
}

TEST_F(SafetensorsDir, RejectsBadIndexes) {
  EXPECT_NE(error().find("no model.safetensors or model.safetensors.index.json"),
            std::string::npos);
  write_shards();
  write("model.safetensors.index.json",
        json{{"weight_map",
              {{"w", "b.safetensors"}, {"h", "b.safetensors"}, {"b", "b.safetensors"}}}});
  EXPECT_NE(error().find("tensor 'w' is not in b.safetensors"), std::string::npos) << error();
  write("model.safetensors.index.json",
        json{{"weight_map", {{"w", "a.safetensors"}, {"h", "b.safetensors"}}}});
  EXPECT_NE(error().find("tensor 'b' of"), std::string::npos) << error();
  write("model.safetensors.index.json", json{{"weight_map", {{"w", "../a.safetensors"}}}});
  EXPECT_NE(error().find("is not a file in the folder"), std::string::npos) << error();
  write("model.safetensors.index.json", json{{"weight_map", {{"w", "c.safetensors"}}}});
  EXPECT_NE(error().find("c.safetensors"), std::string::npos) << error();
  write("model.safetensors.index.json", json{{"metadata", {}}});
  EXPECT_NE(error().find("no weight_map"), std::string::npos) << error();
  write("model.safetensors.index.json", std::vector<uint8_t>{'{', '['});
  EXPECT_NE(error().find("not valid JSON"), std::string::npos) << error();
  // A corrupt shard is named.
  write("model.safetensors.index.json",
        json{{"weight_map",
              {{"w", "a.safetensors"}, {"h", "b.safetensors"}, {"b", "b.safetensors"}}}});
  write("b.safetensors", std::vector<uint8_t>{1, 2, 3});
  EXPECT_NE(error().find("b.safetensors: file is 3 bytes"), std::string::npos) << error();
}

}  // namespace
}  // namespace nexus
