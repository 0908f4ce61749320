// Model loading errors: unknown architectures, missing or misshapen tensors, bad hyper-parameters.
#include <gtest/gtest.h>

#include <memory>

#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "test_paths.h"

namespace nexus {
namespace {

// Rebuilds the llama fixture with `edit` applied to a writer holding its metadata, dropping the
// tensor named `drop` and reshaping the one named `reshape` (to a 1-D row of its first dim).
Result<std::unique_ptr<Model>> load_edited(void (*edit)(GgufWriter&), const std::string& drop,
                                           const std::string& reshape = "") {
  auto src = GgufFile::open(test::fixtures_dir() + "/models/llama_gqa_tied.gguf");
  if (!src) return src.status();
  GgufWriter w;
  w.copy_metadata(src.value());
  if (edit) edit(w);
  std::vector<float> zeros(1 << 16, 0.0f);
  for (const auto& t : src->tensors()) {
    if (t.name == drop) continue;
    if (t.name == reshape) {
      w.add_tensor(t.name, DType::kF32, {t.shape[0] + 1}, zeros.data());
      continue;
    }
    w.add_tensor(t.name, t.dtype, t.shape, t.data);
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.serialize());
  auto g = GgufFile::parse(*bytes, bytes, "edited.gguf");
  if (!g) return g.status();
  return Model::from_gguf(std::make_shared<const GgufFile>(std::move(g).value()));
}

void expect_error(const Result<std::unique_ptr<Model>>& r, const std::string& needle) {
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ModelLoader, LoadsTheUneditedFixture) {
  auto r = load_edited(nullptr, "");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->config().n_layers, 2);
}

TEST(ModelLoader, UnknownArchitectureIsNamed) {
  expect_error(load_edited([](GgufWriter& w) { w.set_string("general.architecture", "mamba9"); },
                           ""),
               "unsupported architecture 'mamba9' (supported: llama, qwen2, qwen3, gpt2, mamba, mamba2, granitehybrid, nexus-ltm)");
}

TEST(ModelLoader, MissingTensorIsNamed) {
  expect_error(load_edited(nullptr, "blk.1.ffn_up.weight"), "missing tensor 'blk.1.ffn_up.weight'");
  expect_error(load_edited(nullptr, "output_norm.weight"), "missing tensor 'output_norm.weight'");
}

TEST(ModelLoader, WrongShapeIsNamed) {
  expect_error(load_edited(nullptr, "", "blk.0.attn_norm.weight"),
               "tensor 'blk.0.attn_norm.weight' has shape 65, expected 64");
}

TEST(ModelLoader, BadHyperParametersAreNamed) {
  expect_error(load_edited([](GgufWriter& w) { w.set_u32("llama.attention.head_count_kv", 3); },
                           ""),
               "not a multiple of head_count_kv 3");
  expect_error(load_edited([](GgufWriter& w) { w.set_u32("llama.block_count", 0); }, ""),
               "llama.block_count = 0 is out of range");
}

TEST(ModelLoader, MissingFileIsNamed) {
  auto r = Model::load("/nonexistent/model.gguf");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace nexus
