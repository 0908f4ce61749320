// llama.cpp's tokenizer test vectors from ../shared/vocab: every string must encode to exactly the
// reference ids and decode back to itself (GGUF and tokenizer.json loaders).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus {
namespace {

struct Vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> outputs;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// X.inp holds each test string followed by "\n__ggml_vocab_test__\n" (strings may be empty or
// contain newlines); X.out holds one line of space-separated ids per string.
Vectors read_vectors(const std::string& base) {
  Vectors v;
  const std::string inp = slurp(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    v.inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(slurp(base + ".out"));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    v.outputs.push_back(std::move(ids));
  }
  return v;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// Checks every vector; returns the number that matched exactly.
size_t check_vectors(const Tokenizer& tok, const std::string& vocab_base) {
  const Vectors v = read_vectors(vocab_base);
  EXPECT_EQ(v.inputs.size(), 46u);
  EXPECT_EQ(v.inputs.size(), v.outputs.size());
  size_t ok = 0;
  for (size_t i = 0; i < v.inputs.size() && i < v.outputs.size(); ++i) {
    SCOPED_TRACE("vector " + std::to_string(i) + ": '" + v.inputs[i] + "'");
    const std::vector<int32_t> ids = tok.encode(v.inputs[i], false, false);
    EXPECT_EQ(show(ids), show(v.outputs[i]));
    // Nothing in the vectors is a special token, so parsing specials changes nothing.
    EXPECT_EQ(tok.encode(v.inputs[i], false, true), ids);
    EXPECT_EQ(tok.decode(ids), v.inputs[i]);
    ok += ids == v.outputs[i] && tok.decode(ids) == v.inputs[i];
  }
  return ok;
}

std::unique_ptr<Tokenizer> load_shared(const std::string& rel) {
  auto r = Tokenizer::load(test::shared_path(rel));
  EXPECT_TRUE(r) << r.status().message();
  return r ? std::move(r.value()) : nullptr;
}

TEST(TokenizerVectors, LlamaSpmGguf) {
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  auto tok = load_shared("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), TokenizerKind::kSpm);
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(check_vectors(*tok, test::shared_path("vocab/ggml-vocab-llama-spm.gguf")), 46u);
}

TEST(TokenizerVectors, Gpt2Gguf) {
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  auto tok = load_shared("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), TokenizerKind::kBpe);
  EXPECT_EQ(tok->pre_name(), "gpt-2");
  EXPECT_EQ(check_vectors(*tok, test::shared_path("vocab/ggml-vocab-gpt-2.gguf")), 46u);
}

TEST(TokenizerVectors, Gpt2TokenizerJson) {
  NEXUS_REQUIRE_SHARED("vocab/gpt2-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf.inp");
  auto tok = load_shared("vocab/gpt2-hf/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->pre_name(), "gpt-2");
  EXPECT_EQ(tok->bos_id(), 50256);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(check_vectors(*tok, test::shared_path("vocab/ggml-vocab-gpt-2.gguf")), 46u);
}

TEST(TokenizerVectors, Qwen2TokenizerJson) {
  NEXUS_REQUIRE_SHARED("vocab/qwen3-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-qwen2.gguf.inp");
  auto tok = load_shared("vocab/qwen3-hf/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->pre_name(), "qwen2");
  EXPECT_EQ(check_vectors(*tok, test::shared_path("vocab/ggml-vocab-qwen2.gguf")), 46u);
}

// The GGUF and tokenizer.json GPT-2 tokenizers agree on the whole of tinyshakespeare's opening.
TEST(TokenizerVectors, Gpt2GgufMatchesTokenizerJson) {
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  NEXUS_REQUIRE_SHARED("vocab/gpt2-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("data/tinyshakespeare.txt");
  auto a = load_shared("vocab/ggml-vocab-gpt-2.gguf");
  auto b = load_shared("vocab/gpt2-hf/tokenizer.json");
  ASSERT_TRUE(a && b);
  const std::string text = slurp(test::shared_path("data/tinyshakespeare.txt")).substr(0, 100000);
  const auto ids = a->encode(text, false);
  EXPECT_EQ(ids, b->encode(text, false));
  EXPECT_EQ(a->decode(ids), text);
}

}  // namespace
}  // namespace nexus
