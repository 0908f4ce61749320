// Dummy vocabularies: unique, well-formed token strings plus the ids and flags llama.cpp reads.
// Byte-level BPE tokens use only GPT-2's byte-to-unicode alphabet, because llama.cpp decodes every
// normal token through that table when it builds its token-to-piece cache.
#include "harness/random_model_vocab.h"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "io/gguf_stream_writer.h"

namespace nexus {
namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;  // llama_token_type

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 upwards.
std::array<std::string, 256> byte_alphabet() {
  std::array<std::string, 256> a;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    a[b] = utf8(printable ? b : next++);
  }
  return a;
}

// Lower-case letters in bijective base 26: 0 -> "a", 25 -> "z", 26 -> "aa", ...
std::string letters(int64_t k) {
  std::string s;
  for (++k; k > 0; k = (k - 1) / 26) s.insert(s.begin(), static_cast<char>('a' + (k - 1) % 26));
  return s;
}

void add_spm_vocab(int64_t n, GgufStreamWriter* w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int64_t> types = {kUnknown, kControl, kControl};
  std::vector<double> scores = {0, 0, 0};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.emplace_back(buf);
    types.push_back(kByte);
    scores.push_back(0);
  }
  // Word pieces, every other one with the SentencePiece word-start marker U+2581.
  for (int64_t k = 0; static_cast<int64_t>(tokens.size()) < n; ++k) {
    tokens.push_back((k % 2 ? "\xE2\x96\x81" : "") + letters(k));
    types.push_back(kNormal);
    scores.push_back(-static_cast<double>(k));
  }
  w->set("tokenizer.ggml.model", gguf_str("llama"));
  w->set("tokenizer.ggml.tokens", gguf_str_array(std::move(tokens)));
  w->set("tokenizer.ggml.scores", gguf_f32_array(std::move(scores)));
  w->set("tokenizer.ggml.token_type", gguf_i32_array(std::move(types)));
  w->set("tokenizer.ggml.bos_token_id", gguf_u32(1));
  w->set("tokenizer.ggml.eos_token_id", gguf_u32(2));
  w->set("tokenizer.ggml.unknown_token_id", gguf_u32(0));
  w->set("tokenizer.ggml.padding_token_id", gguf_u32(0));
  w->set("tokenizer.ggml.add_bos_token", gguf_bool(true));
  w->set("tokenizer.ggml.add_eos_token", gguf_bool(false));
}

void add_bpe_vocab(int64_t n, GgufStreamWriter* w) {
  const std::array<std::string, 256> alpha = byte_alphabet();
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const int64_t n_plain = n - static_cast<int64_t>(specials.size());
  std::vector<std::string> tokens(alpha.begin(), alpha.end());
  std::vector<int64_t> types(256, kNormal);
  std::vector<std::string> merges;
  // Two-symbol tokens "xy" (merge "x y"), then three-symbol tokens "xyz" (merge "xy z").
  for (int64_t k = 0; static_cast<int64_t>(tokens.size()) < n_plain; ++k) {
    if (k < 256 * 256) {
      const std::string& x = alpha[k / 256];
      const std::string& y = alpha[k % 256];
      tokens.push_back(x + y);
      merges.push_back(x + " " + y);
    } else {
      const int64_t j = k - 256 * 256;
      const std::string xy = alpha[(j / 256) / 256 % 256] + alpha[(j / 256) % 256];
      const std::string& z = alpha[j % 256];
      tokens.push_back(xy + z);
      merges.push_back(xy + " " + z);
    }
    types.push_back(kNormal);
  }
  for (const std::string& s : specials) {
    tokens.push_back(s);
    types.push_back(kControl);
  }
  const uint32_t eot = static_cast<uint32_t>(n_plain), im_end = static_cast<uint32_t>(n_plain + 2);
  w->set("tokenizer.ggml.model", gguf_str("gpt2"));
  w->set("tokenizer.ggml.pre", gguf_str("qwen2"));
  w->set("tokenizer.ggml.tokens", gguf_str_array(std::move(tokens)));
  w->set("tokenizer.ggml.token_type", gguf_i32_array(std::move(types)));
  w->set("tokenizer.ggml.merges", gguf_str_array(std::move(merges)));
  w->set("tokenizer.ggml.bos_token_id", gguf_u32(eot));
  w->set("tokenizer.ggml.eos_token_id", gguf_u32(im_end));
  w->set("tokenizer.ggml.padding_token_id", gguf_u32(eot));
  w->set("tokenizer.ggml.add_bos_token", gguf_bool(false));
}

}  // namespace

void add_dummy_vocab(const ModelShape& shape, GgufStreamWriter* w) {
  if (shape.arch == "qwen3") {
    add_bpe_vocab(shape.n_vocab, w);
  } else {
    add_spm_vocab(shape.n_vocab, w);
  }
}

}  // namespace nexus
