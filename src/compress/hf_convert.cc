// convert_hf: a Hugging Face checkpoint folder to GGUF. Tensors are renamed to llama.cpp's names
// and reordered where the layouts differ (Llama's q/k rows, GPT-2's Conv1D matrices) in their
// source dtype, so that no value is rounded twice; convert_gguf then applies the weight type
// exactly as `nexus convert -i --type` does.
#include "nexus/compress/hf_convert.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "nexus/compress/gguf_convert.h"
#include "nexus/io/mapped_file.h"
#include "nexus/io/safetensors.h"
#include "nexus/tokenizer/hf_vocab.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How a tensor's bytes are rearranged on the way.
enum class Layout {
  kCopy,
  // HF's Llama q/k rows hold each head as [first halves; second halves] (rotate-half RoPE); GGUF
  // pairs adjacent rows (llama.cpp's NORM RoPE), so row 2i+j of a head is HF's row j*hd/2 + i.
  kUnpermuteHeads,
  // GPT-2's Conv1D stores [in, out]; GGUF wants the linear layer's [out, in].
  kTranspose,
};

struct TensorSpec {
  std::string hf;
  std::string gguf;
  std::vector<int64_t> shape;  // the HF shape config.json implies
  Layout layout = Layout::kCopy;
  int64_t heads = 0;  // for kUnpermuteHeads
};

// The hyper-parameters the tables need, read from config.json.
struct Hparams {
  std::string hf_arch, arch;
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, ctx = 0;
  int64_t head_dim = 0;
  bool head_dim_given = false;
  bool tied = false;
  double eps = 0, rope_theta = 10000.0;
};

struct ConfigError {
  std::string what;
};

int64_t get_int(const json& c, const char* key, std::optional<int64_t> fallback = std::nullopt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw ConfigError{std::string("config.json has no \"") + key + "\""};
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    throw ConfigError{std::string("config.json: \"") + key + "\" is not a positive integer"};
  return it->get<int64_t>();
}

double get_float(const json& c, const char* key, std::optional<double> fallback = std::nullopt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw ConfigError{std::string("config.json has no \"") + key + "\""};
  }
  if (!it->is_number()) throw ConfigError{std::string("config.json: \"") + key + "\" is no number"};
  return it->get<double>();
}

Hparams read_hparams(const json& c) {
  Hparams h;
  auto archs = c.find("architectures");
  if (archs == c.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    throw ConfigError{"config.json has no \"architectures\" list"};
  h.hf_arch = (*archs)[0].get<std::string>();
  if (h.hf_arch == "LlamaForCausalLM") h.arch = "llama";
  if (h.hf_arch == "Qwen2ForCausalLM") h.arch = "qwen2";
  if (h.hf_arch == "Qwen3ForCausalLM") h.arch = "qwen3";
  // GPT2Model is the same network without its head, which GPT2LMHeadModel ties to wte anyway.
  if (h.hf_arch == "GPT2LMHeadModel" || h.hf_arch == "GPT2Model") h.arch = "gpt2";
  if (h.arch.empty())
    throw ConfigError{"architecture '" + h.hf_arch +
                      "' is not supported (supported: LlamaForCausalLM, Qwen2ForCausalLM, "
                      "Qwen3ForCausalLM, GPT2LMHeadModel, GPT2Model)"};
  h.vocab = get_int(c, "vocab_size");
  if (h.arch == "gpt2") {
    h.dim = get_int(c, "n_embd");
    h.layers = get_int(c, "n_layer");
    h.heads = h.kv_heads = get_int(c, "n_head");
    // The converter writes 4 * n_embd and ignores n_inner; nexus honours n_inner when it is set.
    h.ffn = get_int(c, "n_inner", 4 * h.dim);
    h.ctx = get_int(c, "n_positions", get_int(c, "n_ctx", 1024));
    h.eps = get_float(c, "layer_norm_epsilon", 1e-5);
    h.head_dim = h.dim / h.heads;
    h.tied = true;
    return h;
  }
  h.dim = get_int(c, "hidden_size");
  h.layers = get_int(c, "num_hidden_layers");
  h.heads = get_int(c, "num_attention_heads");
  h.kv_heads = get_int(c, "num_key_value_heads", h.heads);
  h.ffn = get_int(c, "intermediate_size");
  h.ctx = get_int(c, "max_position_embeddings");
  h.eps = get_float(c, "rms_norm_eps");
  h.head_dim_given = c.contains("head_dim") && !c["head_dim"].is_null();
  h.head_dim = get_int(c, "head_dim", h.dim / h.heads);
  // Newer transformers keep rope_theta inside rope_parameters.
  const json* rope = &c;
  if (auto rp = c.find("rope_parameters"); rp != c.end() && rp->is_object()) rope = &*rp;
  h.rope_theta = get_float(*rope, "rope_theta", get_float(c, "rope_theta", 10000.0));
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto rs = c.find(key);
    if (rs == c.end() || !rs->is_object()) continue;
    auto type = rs->find("rope_type");
    if (type == rs->end()) type = rs->find("type");
    if (type != rs->end() && type->is_string() && *type != "default")
      throw ConfigError{"RoPE scaling '" + type->get<std::string>() +
                        "' is not supported (nexus implements plain RoPE)"};
  }
  if (h.heads % h.kv_heads != 0)
    throw ConfigError{"num_key_value_heads " + std::to_string(h.kv_heads) +
                      " does not divide num_attention_heads " + std::to_string(h.heads)};
  h.tied = c.value("tie_word_embeddings", false);
  return h;
}

// The tensors of a checkpoint of architecture h, in llama.cpp's order (embedding, blocks, head).
std::vector<TensorSpec> tensor_table(const Hparams& h, const std::string& gpt2_prefix,
                                     bool has_lm_head) {
  std::vector<TensorSpec> t;
  const int64_t D = h.dim, F = h.ffn, V = h.vocab, hd = h.head_dim;
  const int64_t Q = h.heads * hd, KV = h.kv_heads * hd;
  auto add = [&t](std::string hf, std::string gguf, std::vector<int64_t> shape,
                  Layout layout = Layout::kCopy, int64_t heads = 0) {
    t.push_back({std::move(hf), std::move(gguf), std::move(shape), layout, heads});
  };
  if (h.arch == "gpt2") {
    const std::string p = gpt2_prefix;
    add(p + "wte.weight", "token_embd.weight", {V, D});
    add(p + "wpe.weight", "position_embd.weight", {h.ctx, D});
    for (int64_t i = 0; i < h.layers; ++i) {
      const std::string l = p + "h." + std::to_string(i) + ".",
                        b = "blk." + std::to_string(i) + ".";
      add(l + "ln_1.weight", b + "attn_norm.weight", {D});
      add(l + "ln_1.bias", b + "attn_norm.bias", {D});
      add(l + "attn.c_attn.weight", b + "attn_qkv.weight", {D, 3 * D}, Layout::kTranspose);
      add(l + "attn.c_attn.bias", b + "attn_qkv.bias", {3 * D});
      add(l + "attn.c_proj.weight", b + "attn_output.weight", {D, D}, Layout::kTranspose);
      add(l + "attn.c_proj.bias", b + "attn_output.bias", {D});
      add(l + "ln_2.weight", b + "ffn_norm.weight", {D});
      add(l + "ln_2.bias", b + "ffn_norm.bias", {D});
      add(l + "mlp.c_fc.weight", b + "ffn_up.weight", {D, F}, Layout::kTranspose);
      add(l + "mlp.c_fc.bias", b + "ffn_up.bias", {F});
      add(l + "mlp.c_proj.weight", b + "ffn_down.weight", {F, D}, Layout::kTranspose);
      add(l + "mlp.c_proj.bias", b + "ffn_down.bias", {D});
    }
    add(p + "ln_f.weight", "output_norm.weight", {D});
    add(p + "ln_f.bias", "output_norm.bias", {D});
    if (has_lm_head && !h.tied) add("lm_head.weight", "output.weight", {V, D});
    return t;
  }
  const bool llama = h.arch == "llama";
  const Layout qk = llama ? Layout::kUnpermuteHeads : Layout::kCopy;
  add("model.embed_tokens.weight", "token_embd.weight", {V, D});
  for (int64_t i = 0; i < h.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    const std::string b = "blk." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", b + "attn_norm.weight", {D});
    add(l + "self_attn.q_proj.weight", b + "attn_q.weight", {Q, D}, qk, h.heads);
    add(l + "self_attn.k_proj.weight", b + "attn_k.weight", {KV, D}, qk, h.kv_heads);
    add(l + "self_attn.v_proj.weight", b + "attn_v.weight", {KV, D});
    if (h.arch == "qwen2") {
      add(l + "self_attn.q_proj.bias", b + "attn_q.bias", {Q});
      add(l + "self_attn.k_proj.bias", b + "attn_k.bias", {KV});
      add(l + "self_attn.v_proj.bias", b + "attn_v.bias", {KV});
    }
    add(l + "self_attn.o_proj.weight", b + "attn_output.weight", {D, Q});
    if (h.arch == "qwen3") {
      add(l + "self_attn.q_norm.weight", b + "attn_q_norm.weight", {hd});
      add(l + "self_attn.k_norm.weight", b + "attn_k_norm.weight", {hd});
    }
    add(l + "post_attention_layernorm.weight", b + "ffn_norm.weight", {D});
    add(l + "mlp.gate_proj.weight", b + "ffn_gate.weight", {F, D});
    add(l + "mlp.up_proj.weight", b + "ffn_up.weight", {F, D});
    add(l + "mlp.down_proj.weight", b + "ffn_down.weight", {D, F});
  }
  add("model.norm.weight", "output_norm.weight", {D});
  if (!h.tied) add("lm_head.weight", "output.weight", {V, D});
  return t;
}

// Buffers the checkpoint may hold that carry no weights (recomputed at load time).
bool is_dropped(const std::string& name) {
  auto ends = [&name](std::string_view s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.bias") || ends(".attn.masked_bias") || ends("rotary_emb.inv_freq");
}

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The bytes of `t` rearranged as `spec` says, and the GGUF shape (outermost first).
std::vector<uint8_t> rearrange(const SafetensorsTensor& t, const TensorSpec& spec,
                               std::vector<int64_t>* shape) {
  const size_t es = t.dtype == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> out(t.bytes.size());
  const uint8_t* src = t.bytes.data();
  *shape = t.shape;
  if (spec.layout == Layout::kTranspose) {
    const int64_t rows = t.shape[0], cols = t.shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(&out[(c * rows + r) * es], &src[(r * cols + c) * es], es);
    *shape = {cols, rows};
  } else if (spec.layout == Layout::kUnpermuteHeads) {
    const int64_t rows = t.shape[0], hd = rows / spec.heads, half = hd / 2;
    const size_t row_bytes = t.bytes.size() / static_cast<size_t>(rows);
    for (int64_t h = 0; h < spec.heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(&out[(h * hd + 2 * i + j) * row_bytes],
                      &src[(h * hd + j * half + i) * row_bytes], row_bytes);
  } else {
    std::memcpy(out.data(), src, out.size());
  }
  return out;
}

// The text of a file of the checkpoint folder; "" when it is absent and not `required`.
Result<std::string> read_folder_file(const fs::path& p, bool required, const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    if (required) return Status::error("no " + p.filename().string() + " in '" + dir + "'");
    return std::string();
  }
  return read_file(p.string());
}

}  // namespace

Result<HfConvertResult> convert_hf(const std::string& dir, const HfConvertOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::error("'" + dir + "' is not a directory (a Hugging Face checkpoint folder)");
  const fs::path root(dir);
  auto config_text = read_folder_file(root / "config.json", true, dir);
  if (!config_text) return config_text.status();
  json config;
  Hparams h;
  try {
    config = json::parse(config_text.value());
    if (!config.is_object()) throw ConfigError{"config.json is not a JSON object"};
    h = read_hparams(config);
  } catch (const json::exception& e) {
    return Status::error(dir + ": config.json is not valid JSON: " + e.what());
  } catch (const ConfigError& e) {
    return Status::error(dir + ": " + e.what);
  }
  if (h.arch != "gpt2" && h.head_dim % 2 != 0)
    return Status::error(dir + ": head_dim " + std::to_string(h.head_dim) +
                         " is odd (RoPE rotates pairs)");

  auto tok_config = read_folder_file(root / "tokenizer_config.json", false, dir);
  if (!tok_config) return tok_config.status();
  Result<std::string> tok_text = std::string();
  if (!fs::exists(root / "tokenizer.json", ec) && fs::exists(root / "vocab.json", ec) &&
      fs::exists(root / "merges.txt", ec)) {
    // The slow GPT-2 tokenizer's files, as older GPT-2 checkpoints ship them.
    auto vocab = read_file((root / "vocab.json").string());
    if (!vocab) return vocab.status();
    auto merges = read_file((root / "merges.txt").string());
    if (!merges) return merges.status();
    tok_text = gpt2_tokenizer_json(vocab.value(), merges.value(), tok_config.value(),
                                   (root / "vocab.json").string());
  } else {
    tok_text = read_folder_file(root / "tokenizer.json", true, dir);
    if (!tok_text)
      return Status::error(tok_text.status().message() +
                           " (nexus reads the vocabulary from tokenizer.json, or GPT-2's "
                           "vocab.json and merges.txt)");
  }
  if (!tok_text) return tok_text.status();
  auto jinja = read_folder_file(root / "chat_template.jinja", false, dir);
  if (!jinja) return jinja.status();

  auto ckpt = SafetensorsCheckpoint::open(dir);
  if (!ckpt) return ckpt.status();
  const SafetensorsCheckpoint& ck = ckpt.value();
  std::string gpt2_prefix = "transformer.";
  if (h.arch == "gpt2" && ck.find("transformer.wte.weight") == nullptr &&
      ck.find("wte.weight") != nullptr)
    gpt2_prefix = "";  // saved from GPT2Model rather than GPT2LMHeadModel
  const bool has_lm_head = ck.find("lm_head.weight") != nullptr;
  const std::vector<TensorSpec> table = tensor_table(h, gpt2_prefix, has_lm_head);

  // The converter's "auto": the first matrix's 16-bit type, else F16.
  HfConvertResult result;
  result.architecture = h.arch;
  DType target = DType::kF16;
  for (const TensorSpec& s : table)
    if (const SafetensorsTensor* t = ck.find(s.hf); t != nullptr && t->shape.size() >= 2) {
      if (t->dtype == DType::kBF16) target = DType::kBF16;
      break;
    }
  if (options.type) target = *options.type;
  result.type = target;

  GgufWriter w;
  const std::string& a = h.arch;
  w.set_string("general.architecture", a);
  // Like the converter without a model card: the folder's name.
  fs::path folder = fs::path(dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  w.set_string("general.name", folder.filename().string());
  w.set_u32(a + ".block_count", static_cast<uint32_t>(h.layers));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(h.ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(h.dim));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(h.ffn));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(h.heads));
  if (a == "gpt2") {
    w.set_f32(a + ".attention.layer_norm_epsilon", static_cast<float>(h.eps));
  } else {
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(h.kv_heads));
    w.set_f32(a + ".rope.freq_base", static_cast<float>(h.rope_theta));
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(h.eps));
    if (h.head_dim_given) {
      w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(h.head_dim));
      w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(h.head_dim));
    }
    if (a == "llama") {
      w.set_u32(a + ".vocab_size", static_cast<uint32_t>(h.vocab));
      w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(h.head_dim));
    }
  }
  w.set_u32("general.file_type", 0);  // replaced by convert_gguf with the target's

  auto vocab = add_hf_vocab(tok_text.value(), tok_config.value(), config_text.value(),
                            jinja.value(), h.vocab, (root / "tokenizer.json").string(), w);
  if (!vocab) return vocab.status();
  result.vocab = vocab->model + " (pre " + vocab->pre + "), " + std::to_string(vocab->n_tokens) +
                 " tokens, " + std::to_string(vocab->n_merges) + " merges";

  std::set<std::string> used;
  int index = 0;
  for (const TensorSpec& s : table) {
    ++index;
    const SafetensorsTensor* t = ck.find(s.hf);
    if (t == nullptr)
      return Status::error(dir + ": tensor '" + s.hf + "' (" + s.gguf + ") is missing from " +
                           (ck.files().size() == 1 ? ck.files()[0] : "the shards"));
    if (t->shape != s.shape)
      return Status::error(dir + ": tensor '" + s.hf + "' has shape " + shape_string(t->shape) +
                           " but config.json implies " + shape_string(s.shape));
    used.insert(s.hf);
    std::vector<int64_t> shape;
    const std::vector<uint8_t> bytes = rearrange(*t, s, &shape);
    w.add_tensor(s.gguf, t->dtype, shape, bytes.data());
    if (options.progress) {
      const char* how = s.layout == Layout::kTranspose        ? " (transposed)"
                        : s.layout == Layout::kUnpermuteHeads ? " (rows unpermuted)"
                                                              : "";
      options.progress("[" + std::to_string(index) + "/" + std::to_string(table.size()) + "] " +
                       s.hf + " " + std::string(dtype_name(t->dtype)) + " " +
                       shape_string(t->shape) + " -> " + s.gguf + how);
    }
  }
  for (const SafetensorsTensor* t : ck.tensors())
    if (used.count(t->name) == 0 && !is_dropped(t->name) &&
        !(t->name == "lm_head.weight" && h.tied))
      return Status::error(dir + ": tensor '" + t->name + "' is not part of " + h.hf_arch +
                           " as nexus knows it (a variant it does not convert)");

  // Apply the weight type through the one conversion path `convert -i --type` uses.
  const std::vector<uint8_t> image = w.serialize();
  auto staged = GgufFile::parse(image, nullptr, dir);
  if (!staged) return staged.status();
  auto converted = convert_gguf(staged.value(), target);
  if (!converted) return converted.status();
  result.writer = std::move(converted).value();
  return result;
}

}  // namespace nexus
