// llama2.c checkpoint and tokenizer import. The tensor bytes are copied unchanged: llama2.c's
// row-major (out, in) fp32 matrices are exactly GGUF's {out, in} F32 layout, and its RoPE pairs
// adjacent elements like llama.cpp's "Meta AI original pth" layout, so nothing is permuted.
#include "nexus/io/llama2c.h"

#include <cstring>
#include <filesystem>

#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);
constexpr uint32_t kVersionedMagic = 0x616b3432;  // "ak42": llama2.c's newer export versions
constexpr uint32_t kGgufMagic = 0x46554747;

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The checkpoint's fp32 arrays in file order, each as a pointer to its first byte.
struct Weights {
  const uint8_t *embedding, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final,
      *wcls;
};

Weights locate(const Llama2cConfig& c, const uint8_t* base) {
  const uint64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, kv = c.kv_dim();
  const uint8_t* p = base + kHeaderBytes;
  auto take = [&p](uint64_t n) {
    const uint8_t* at = p;
    p += n * sizeof(float);
    return at;
  };
  Weights w{};
  w.embedding = take(c.vocab_size * dim);
  w.rms_att = take(layers * dim);
  w.wq = take(layers * dim * dim);
  w.wk = take(layers * dim * kv);
  w.wv = take(layers * dim * kv);
  w.wo = take(layers * dim * dim);
  w.rms_ffn = take(layers * dim);
  w.w1 = take(layers * dim * hidden);
  w.w2 = take(layers * hidden * dim);
  w.w3 = take(layers * dim * hidden);
  w.rms_final = take(dim);
  take(static_cast<uint64_t>(c.seq_len) * c.head_dim());  // freq_cis_real + freq_cis_imag
  w.wcls = c.shared_classifier ? w.embedding : take(c.vocab_size * dim);
  return w;
}

// llama2.c exports strip SentencePiece's U+2581 word marker back to a space; GGUF keeps it.
std::string escape_spaces(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == ' ')
      out += "\xe2\x96\x81";
    else
      out += ch;
  }
  return out;
}

bool is_byte_token(std::string_view t) {
  auto hex = [](char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'F') || (ch >= 'a' && ch <= 'f');
  };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

}  // namespace

uint64_t Llama2cConfig::float_count() const {
  // Every factor is below 2^31 and no product has more than three, so 128 bits cannot overflow.
  using U128 = unsigned __int128;
  const U128 d = dim, h = hidden_dim, l = n_layers, v = vocab_size, kv = kv_dim();
  const U128 n = v * d + l * (d + d * d + 2 * d * kv + d * d + d + 3 * d * h) + d +
                 static_cast<U128>(seq_len) * head_dim() + (shared_classifier ? 0 : v * d);
  return n > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(n);
}

std::string Llama2cConfig::to_string() const {
  return "dim=" + std::to_string(dim) + ", hidden_dim=" + std::to_string(hidden_dim) +
         ", n_layers=" + std::to_string(n_layers) + ", n_heads=" + std::to_string(n_heads) +
         ", n_kv_heads=" + std::to_string(n_kv_heads) +
         ", vocab_size=" + std::to_string(vocab_size) +
         (shared_classifier ? " (shared" : " (separate") +
         " classifier), seq_len=" + std::to_string(seq_len);
}

Result<Llama2cConfig> parse_llama2c_config(std::span<const uint8_t> bytes,
                                           const std::string& name) {
  auto fail = [&name](const std::string& what) {
    return Status::error("llama2c: " + name + ": " + what);
  };
  if (bytes.size() < kHeaderBytes)
    return fail("file is " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                std::to_string(kHeaderBytes) + "-byte llama2.c header");
  uint32_t magic;
  std::memcpy(&magic, bytes.data(), sizeof(magic));
  if (magic == kVersionedMagic)
    return fail("this is a versioned llama2.c export (magic 'ak42'); only the legacy format " +
                std::string("(export.py --version 0) is supported"));
  if (magic == kGgufMagic) return fail("this is a GGUF file, not a llama2.c checkpoint");

  const char* kFields[] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                           "n_kv_heads", "vocab_size", "seq_len"};
  int32_t h[7];
  for (int i = 0; i < 7; ++i) {
    h[i] = load_i32(bytes.data() + 4 * i);
    const bool ok = i == 5 ? h[i] != 0 && h[i] != INT32_MIN : h[i] > 0;
    if (!ok)
      return fail("header at offset " + std::to_string(4 * i) + ": " + kFields[i] + " = " +
                  std::to_string(h[i]) + " is not a positive count");
  }
  Llama2cConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = h[6];
  if (c.dim % c.n_heads != 0)
    return fail("header: n_heads " + std::to_string(c.n_heads) + " does not divide dim " +
                std::to_string(c.dim));
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    return fail("header: n_kv_heads " + std::to_string(c.n_kv_heads) + " does not divide n_heads " +
                std::to_string(c.n_heads));
  if (c.head_dim() % 2 != 0)
    return fail("header: head dimension " + std::to_string(c.head_dim()) +
                " is odd (RoPE rotates pairs)");
  if (c.vocab_size < 3)
    return fail("header: vocab_size " + std::to_string(c.vocab_size) +
                " is too small (ids 0-2 are <unk>, <s>, </s>)");
  const uint64_t floats = c.float_count();
  if (floats > (1ull << 60))
    return fail("header (" + c.to_string() + ") implies more than 2^60 floats");
  const uint64_t expected = kHeaderBytes + floats * sizeof(float);
  if (bytes.size() != expected)
    return fail("file is " + std::to_string(bytes.size()) + " bytes but the header (" +
                c.to_string() + ") implies " + std::to_string(expected) + " (" +
                std::to_string(kHeaderBytes) + "-byte header + " + std::to_string(floats) +
                " floats)");
  return c;
}

Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, int32_t vocab_size,
                                             const std::string& name) {
  size_t pos = 0;
  auto fail = [&](size_t at, const std::string& what) {
    return Status::error("llama2c tokenizer: " + name + ": at offset " + std::to_string(at) + ": " +
                         what);
  };
  if (bytes.size() < 4) return fail(0, "file truncated while reading max_token_length");
  const int32_t max_len = load_i32(bytes.data());
  if (max_len <= 0)
    return fail(0, "max_token_length " + std::to_string(max_len) + " is not positive");
  pos = 4;
  Llama2cVocab v;
  v.tokens.reserve(vocab_size);
  v.scores.reserve(vocab_size);
  v.types.reserve(vocab_size);
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (bytes.size() - pos < 8)
      return fail(pos, "file truncated while reading token " + std::to_string(id) + " of " +
                           std::to_string(vocab_size));
    float score;
    std::memcpy(&score, bytes.data() + pos, sizeof(score));
    const int32_t len = load_i32(bytes.data() + pos + 4);
    if (len < 0 || len > max_len)
      return fail(pos + 4, "token " + std::to_string(id) + " length " + std::to_string(len) +
                               " is outside 0.." + std::to_string(max_len) + " (max_token_length)");
    pos += 8;
    if (bytes.size() - pos < static_cast<size_t>(len))
      return fail(pos, "file truncated inside token " + std::to_string(id) + " (" +
                           std::to_string(len) + " bytes, " + std::to_string(bytes.size() - pos) +
                           " left)");
    std::string_view text(reinterpret_cast<const char*>(bytes.data() + pos), len);
    pos += len;
    TokenType type = TokenType::kNormal;
    if (id == 0) {
      text = "<unk>";
      type = TokenType::kUnknown;
    } else if (id == 1 || id == 2) {
      text = id == 1 ? "<s>" : "</s>";  // llama2.c stores them as "\n<s>\n", "\n</s>\n"
      type = TokenType::kControl;
    } else if (text.empty()) {
      type = TokenType::kControl;
    } else if (is_byte_token(text)) {
      type = TokenType::kByte;
    }
    v.tokens.push_back(escape_spaces(text));
    v.scores.push_back(score);
    v.types.push_back(static_cast<int64_t>(type));
  }
  if (pos != bytes.size())
    return fail(pos, std::to_string(bytes.size() - pos) + " bytes left after the last of " +
                         std::to_string(vocab_size) + " tokens (tokenizer of another model?)");
  return v;
}

Result<GgufWriter> import_llama2c(std::span<const uint8_t> checkpoint,
                                  std::span<const uint8_t> tokenizer,
                                  const std::string& checkpoint_name,
                                  const std::string& tokenizer_name,
                                  const std::string& model_name) {
  auto cr = parse_llama2c_config(checkpoint, checkpoint_name);
  if (!cr) return cr.status();
  const Llama2cConfig c = cr.value();
  auto vr = parse_llama2c_tokenizer(tokenizer, c.vocab_size, tokenizer_name);
  if (!vr) return vr.status();
  Llama2cVocab vocab = std::move(vr).value();

  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", model_name);
  w.set_u32("general.file_type", 0);  // llama.cpp's LLAMA_FTYPE_ALL_F32
  w.set_u32("llama.context_length", c.seq_len);
  w.set_u32("llama.embedding_length", c.dim);
  w.set_u32("llama.block_count", c.n_layers);
  w.set_u32("llama.feed_forward_length", c.hidden_dim);
  w.set_u32("llama.rope.dimension_count", c.head_dim());
  w.set_f32("llama.rope.freq_base", 10000.0f);  // fixed in llama2.c's run.c
  w.set_u32("llama.attention.head_count", c.n_heads);
  w.set_u32("llama.attention.head_count_kv", c.n_kv_heads);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(vocab.tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::move(vocab.scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(vocab.types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);

  const Weights wt = locate(c, checkpoint.data());
  const int64_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim();
  auto layer = [](const uint8_t* base, int64_t l, int64_t floats_per_layer) {
    return base + static_cast<size_t>(l * floats_per_layer) * sizeof(float);
  };
  w.add_tensor("token_embd.weight", DType::kF32, {c.vocab_size, dim}, wt.embedding);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_q.weight", DType::kF32, {dim, dim}, layer(wt.wq, l, dim * dim));
    w.add_tensor(p + "attn_k.weight", DType::kF32, {kv, dim}, layer(wt.wk, l, kv * dim));
    w.add_tensor(p + "attn_v.weight", DType::kF32, {kv, dim}, layer(wt.wv, l, kv * dim));
    w.add_tensor(p + "attn_output.weight", DType::kF32, {dim, dim}, layer(wt.wo, l, dim * dim));
    w.add_tensor(p + "ffn_gate.weight", DType::kF32, {hidden, dim}, layer(wt.w1, l, hidden * dim));
    w.add_tensor(p + "ffn_down.weight", DType::kF32, {dim, hidden}, layer(wt.w2, l, dim * hidden));
    w.add_tensor(p + "ffn_up.weight", DType::kF32, {hidden, dim}, layer(wt.w3, l, hidden * dim));
    w.add_tensor(p + "attn_norm.weight", DType::kF32, {dim}, layer(wt.rms_att, l, dim));
    w.add_tensor(p + "ffn_norm.weight", DType::kF32, {dim}, layer(wt.rms_ffn, l, dim));
  }
  w.add_tensor("output_norm.weight", DType::kF32, {dim}, wt.rms_final);
  if (!c.shared_classifier)
    w.add_tensor("output.weight", DType::kF32, {c.vocab_size, dim}, wt.wcls);
  return w;
}

Result<GgufWriter> import_llama2c(const std::string& checkpoint_path,
                                  const std::string& tokenizer_path) {
  auto model = MappedFile::open(checkpoint_path);
  if (!model) return model.status();
  const MappedFile& m = *model.value();
  // Report a bad checkpoint before a missing tokenizer (the order the user gave them in).
  if (auto c = parse_llama2c_config({m.data(), m.size()}, checkpoint_path); !c) return c.status();
  auto tok = MappedFile::open(tokenizer_path);
  if (!tok) return tok.status();
  const MappedFile& t = *tok.value();
  return import_llama2c({m.data(), m.size()}, {t.data(), t.size()}, checkpoint_path, tokenizer_path,
                        std::filesystem::path(checkpoint_path).stem().string());
}

}  // namespace nexus
