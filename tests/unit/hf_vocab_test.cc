// add_hf_vocab: real Hugging Face tokenizer.json files (Qwen3's and GPT-2's, from ../shared) turned
// into GGUF vocabularies must tokenize llama.cpp's test vectors exactly; malformed or unsupported
// tokenizer.json files are refused by name.
#include "nexus/tokenizer/hf_vocab.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nexus/io/gguf.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The GGUF vocabulary of a tokenizer.json (+ tokenizer_config.json), parsed back.
struct Converted {
  std::shared_ptr<std::vector<uint8_t>> image;
  std::optional<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

Converted convert(const std::string& tokenizer_json, const std::string& config_json) {
  Converted c;
  GgufWriter w;
  w.set_string("general.architecture", "test");
  auto r = add_hf_vocab(tokenizer_json, config_json, "", "", 0, "tokenizer.json", w);
  EXPECT_TRUE(r) << r.status().message();
  if (!r) return c;
  c.image = std::make_shared<std::vector<uint8_t>>(w.serialize());
  auto g = GgufFile::parse(*c.image, c.image, "converted");
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return c;
  c.file = std::move(g).value();
  auto t = Tokenizer::from_gguf(*c.file);
  EXPECT_TRUE(t) << t.status().message();
  if (t) c.tok = std::move(t).value();
  return c;
}

// llama.cpp's vectors: X.inp holds strings separated by "\n__ggml_vocab_test__\n", X.out one
// line of ids per string. Returns how many of the 46 encode exactly.
size_t check_vectors(const Tokenizer& tok, const std::string& base) {
  const std::string inp = slurp(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(slurp(base + ".out"));
  std::vector<std::vector<int32_t>> outputs;
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    outputs.push_back(std::move(ids));
  }
  EXPECT_EQ(inputs.size(), 46u);
  EXPECT_EQ(inputs.size(), outputs.size());
  size_t ok = 0;
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    SCOPED_TRACE("vector " + std::to_string(i) + ": '" + inputs[i] + "'");
    const std::vector<int32_t> ids = tok.encode(inputs[i], false, false);
    EXPECT_EQ(ids, outputs[i]);
    ok += ids == outputs[i];
  }
  return ok;
}

TEST(HfVocab, Qwen3TokenizerJsonMatchesLlamaCppVectors) {
  NEXUS_REQUIRE_SHARED("vocab/qwen3-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-qwen2.gguf.inp");
  Converted c = convert(slurp(test::shared_path("vocab/qwen3-hf/tokenizer.json")),
                        slurp(test::shared_path("vocab/qwen3-hf/tokenizer_config.json")));
  ASSERT_NE(c.tok, nullptr);
  const GgufFile& g = *c.file;
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(c.tok->pre_name(), "qwen2");
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 151645);  // <|im_end|>
  EXPECT_EQ(g.get_int("tokenizer.ggml.padding_token_id"), 151643);
  EXPECT_FALSE(g.get_int("tokenizer.ggml.bos_token_id").has_value());  // bos_token is null
  EXPECT_EQ(g.get_int("tokenizer.ggml.add_bos_token"), 0);
  EXPECT_NE(g.get_string("tokenizer.chat_template").value_or("").find("<|im_start|>"),
            std::string::npos);
  const auto* types = g.get_int_array("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ((*types)[151643], 3);  // <|endoftext|>: control
  EXPECT_EQ(check_vectors(*c.tok, test::shared_path("vocab/ggml-vocab-qwen2.gguf")), 46u);
}

TEST(HfVocab, Gpt2TokenizerJsonMatchesLlamaCppVectors) {
  NEXUS_REQUIRE_SHARED("vocab/gpt2-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf.inp");
  Converted c = convert(slurp(test::shared_path("vocab/gpt2-hf/tokenizer.json")),
                        slurp(test::shared_path("vocab/gpt2-hf/tokenizer_config.json")));
  ASSERT_NE(c.tok, nullptr);
  const GgufFile& g = *c.file;
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->size(), 50257u);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.merges")->size(), 50000u);
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 50256);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 50256);
  EXPECT_EQ(check_vectors(*c.tok, test::shared_path("vocab/ggml-vocab-gpt-2.gguf")), 46u);
}

TEST(HfVocab, RefusesWhatItCannotConvert) {
  auto error = [](const std::string& tj) {
    GgufWriter w;
    auto r = add_hf_vocab(tj, "", "", "", 0, "t.json", w);
    return r ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(error("{").find("t.json: invalid JSON"), std::string::npos);
  EXPECT_NE(
      error(R"({"model": {"type": "Unigram", "vocab": []}})").find("'Unigram' is not supported"),
      std::string::npos);
  EXPECT_NE(error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})")
                .find("without a ByteLevel pre-tokenizer"),
            std::string::npos);
  const std::string unknown_pre =
      R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split",
          "pattern": {"Regex": "[a-z]+"}, "behavior": "Isolated"}, {"type": "ByteLevel",
          "use_regex": false}]}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
  EXPECT_NE(error(unknown_pre).find("match none that nexus knows"), std::string::npos)
      << error(unknown_pre);
  EXPECT_NE(
      error(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})").find("out of range"),
      std::string::npos);
  GgufWriter w;
  auto r = add_hf_vocab(
      R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 5}, "merges": []}})",
      "", "", "", 3, "t.json", w);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("6 ids but config.json's vocab_size is 3"),
            std::string::npos);
}

}  // namespace
}  // namespace nexus
