// GGUF writer/reader round trip and reading the real stories260K file.
#include "nexus/io/gguf.h"

#include <gtest/gtest.h>

#include "test_paths.h"

namespace nexus {
namespace {

TEST(Gguf, RoundTripMetadataAndTensors) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("flag", true);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "", "\xff\xfe"});
  w.set_f32_array("scores", {0.5, -1.25});
  w.set_i32_array("types", {1, 2, 3});
  std::vector<float> t0(6);
  for (int i = 0; i < 6; ++i) t0[i] = i * 1.5f;
  w.add_tensor("w", DType::kF32, {2, 3}, t0.data());
  std::vector<uint8_t> img = w.serialize();
  auto r = GgufFile::parse(img, nullptr, "mem");
  ASSERT_TRUE(r) << r.status().message();
  const GgufFile& g = r.value();
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.block_count"), 3);
  EXPECT_EQ(g.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(g.get_int("flag"), 1);
  ASSERT_NE(g.get_string_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->at(2), "\xff\xfe");
  EXPECT_EQ(g.get_float_array("scores")->at(1), -1.25);
  EXPECT_EQ(g.get_int_array("types")->at(2), 3);
  const GgufTensorInfo* ti = g.find_tensor("w");
  ASSERT_NE(ti, nullptr);
  EXPECT_EQ(ti->shape, (std::vector<int64_t>{2, 3}));
  Tensor t = g.tensor(*ti);
  EXPECT_EQ(t.data_as<float>()[5], 7.5f);
  // Serialising what we read reproduces the same bytes.
  GgufWriter w2;
  w2.copy_metadata(g);
  w2.add_tensor("w", DType::kF32, {2, 3}, t.data());
  EXPECT_EQ(w2.serialize(), img);
}

TEST(Gguf, ReadsStories260K) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto r = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->get_string("general.architecture"), "llama");
  EXPECT_EQ(r->tensors().size(), 48u);
  EXPECT_EQ(r->get_int("llama.embedding_length"), 64);
}

}  // namespace
}  // namespace nexus
