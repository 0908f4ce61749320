// add_hf_vocab: a Hugging Face tokenizer.json as GGUF tokenizer.ggml.* keys. The token list is the
// model's vocab plus the added tokens, by id; the pre-tokenizer is named by comparing its regexes
// with the configurations nexus knows (pre_tokenizer.cc), which are llama.cpp's.
#include "nexus/tokenizer/hf_vocab.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "nexus/tokenizer.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/pre_tokenizer.h"

namespace nexus {
namespace {

using nlohmann::json;
using tok::hf_json::bad;
using tok::hf_json::collect_pre;
using tok::hf_json::flag;
using tok::hf_json::JsonError;
using tok::hf_json::member;
using tok::hf_json::token_content;
using tok::hf_json::type_of;

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// llama.cpp treats <|...|> added tokens as control tokens even when not marked special.
bool looks_special(std::string_view t) {
  return t.size() >= 4 && t.substr(0, 2) == "<|" && t.substr(t.size() - 2) == "|>";
}

// A merge as GGUF stores it: "left right". The array form (transformers >= 4.45) may hold spaces
// inside a part; like the converter, they become U+0120 so the one separator stays unambiguous.
std::string merge_string(const json& m) {
  if (m.is_string()) return m.get<std::string>();
  if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string())
    bad("a merge is neither \"a b\" nor [\"a\", \"b\"]");
  auto part = [](const std::string& s) {
    std::string out;
    for (char c : s) out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
    return out;
  };
  return part(m[0].get<std::string>()) + " " + part(m[1].get<std::string>());
}

// Whether a SentencePiece-style tokenizer.json prepends U+2581 to the text: a Prepend normalizer
// (Llama 2's tokenizer.json) or a Metaspace pre-tokenizer that prepends (newer exports).
bool spm_adds_space_prefix(const json* normalizer, const json* pre) {
  bool found = false;
  auto walk = [&found](const json* j, const char* list_key, auto&& self) -> void {
    if (j == nullptr) return;
    const std::string t = type_of(*j);
    if (t == "Sequence") {
      if (const json* l = member(*j, list_key); l != nullptr && l->is_array())
        for (const json& item : *l) self(&item, list_key, self);
    } else if (t == "Prepend") {
      found = true;
    } else if (t == "Metaspace") {
      const json* scheme = member(*j, "prepend_scheme");
      if (scheme != nullptr && scheme->is_string())
        found = found || scheme->get<std::string>() != "never";
      else
        found = found || flag(*j, "add_prefix_space", true);
    }
  };
  walk(normalizer, "normalizers", walk);
  walk(pre, "pretokenizers", walk);
  return found;
}

}  // namespace

Result<HfVocabSummary> add_hf_vocab(std::string_view tokenizer_json, std::string_view config_json,
                                    std::string_view model_config_json,
                                    std::string_view chat_template, int64_t n_vocab,
                                    const std::string& name, GgufWriter& w) {
  HfVocabSummary sum;
  try {
    const json j = json::parse(tokenizer_json);
    const json config = config_json.empty() ? json::object() : json::parse(config_json);
    const json mconfig =
        model_config_json.empty() ? json::object() : json::parse(model_config_json);
    const json* model = member(j, "model");
    if (model == nullptr) bad("no \"model\"");
    if (type_of(*model) != "BPE" && !(type_of(*model).empty() && member(*model, "merges")))
      bad("tokenizer model '" + type_of(*model) + "' is not supported (only BPE)");
    const json* vocab = member(*model, "vocab");
    if (vocab == nullptr || !vocab->is_object()) bad("model without a vocab object");
    const json* merges = member(*model, "merges");
    if (merges == nullptr || !merges->is_array()) bad("BPE model without merges");
    const json* added = member(j, "added_tokens");
    if (added != nullptr && !added->is_array()) bad("added_tokens is not an array");

    // Ids: the vocab and the added tokens, up to the embedding's rows (n_vocab) when larger.
    int64_t n = std::max<int64_t>(n_vocab, 0);
    auto id_of = [](const json& v) {
      if (!v.is_number_integer()) bad("a token id is not an integer");
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= (1 << 24)) bad("token id " + std::to_string(id) + " out of range");
      return id;
    };
    for (const auto& [text, id] : vocab->items()) n = std::max<int64_t>(n, id_of(id) + 1);
    if (added != nullptr)
      for (const json& a : *added) n = std::max<int64_t>(n, id_of(a.at("id")) + 1);
    if (n_vocab > 0 && n > n_vocab)
      bad("the tokenizer has " + std::to_string(n) + " ids but config.json's vocab_size is " +
          std::to_string(n_vocab));
    std::vector<std::string> tokens(n);
    std::vector<int64_t> types(n, static_cast<int64_t>(TokenType::kUnused));
    std::map<std::string, int64_t> added_ids;
    for (const auto& [text, id] : vocab->items()) {
      tokens[id.get<int64_t>()] = text;
      types[id.get<int64_t>()] = static_cast<int64_t>(TokenType::kNormal);
    }
    if (added != nullptr)
      for (const json& a : *added) {
        const int64_t id = a.at("id").get<int64_t>();
        const std::string text = a.at("content").get<std::string>();
        tokens[id] = text;
        added_ids.emplace(text, id);
        const bool control = flag(a, "special", false) || looks_special(text);
        types[id] = static_cast<int64_t>(control ? TokenType::kControl : TokenType::kUserDefined);
      }
    for (int64_t i = 0; i < n; ++i)
      if (types[i] == static_cast<int64_t>(TokenType::kUnused))
        tokens[i] = "[PAD" + std::to_string(i) + "]";

    std::vector<std::string> merge_list;
    merge_list.reserve(merges->size());
    for (const json& m : *merges) merge_list.push_back(merge_string(m));
    sum.n_tokens = n;
    sum.n_merges = static_cast<int64_t>(merge_list.size());

    const json* normalizer = member(j, "normalizer");
    const json* pre = member(j, "pre_tokenizer");
    if (flag(*model, "byte_fallback", false)) {
      // SentencePiece-style BPE (Llama 1/2, Mistral): llama.cpp's "llama" tokenizer, which merges
      // the adjacent pair whose result has the best score; scoring a token by minus its merge's
      // rank makes that the BPE order. Tokens no merge makes rank after every merged one.
      sum.model = "llama";
      sum.pre = "default";
      std::map<std::string, int64_t> id_of_text;
      for (int64_t i = 0; i < n; ++i) id_of_text.emplace(tokens[i], i);
      std::vector<double> scores(n, -static_cast<double>(merge_list.size()) - 1.0);
      std::vector<bool> scored(n, false);
      for (size_t r = 0; r < merge_list.size(); ++r) {
        const std::string& m = merge_list[r];
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) bad("bad merge '" + m + "'");
        auto it = id_of_text.find(m.substr(0, sp) + m.substr(sp + 1));
        if (it != id_of_text.end() && !scored[it->second]) {
          scores[it->second] = -static_cast<double>(r);
          scored[it->second] = true;
        }
      }
      if (const json* u = member(*model, "unk_token"); u != nullptr && u->is_string())
        if (auto it = id_of_text.find(u->get<std::string>()); it != id_of_text.end())
          types[it->second] = static_cast<int64_t>(TokenType::kUnknown);
      for (int64_t i = 0; i < n; ++i)
        if (types[i] == static_cast<int64_t>(TokenType::kNormal) && is_byte_token(tokens[i]))
          types[i] = static_cast<int64_t>(TokenType::kByte);
      w.set_string("tokenizer.ggml.model", "llama");
      w.set_string("tokenizer.ggml.pre", "default");
      w.set_string_array("tokenizer.ggml.tokens", tokens);
      w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
      w.set_i32_array("tokenizer.ggml.token_type", types);
      bool prefix = spm_adds_space_prefix(normalizer, pre);
      prefix = flag(config, "add_prefix_space", prefix);
      w.set_bool("tokenizer.ggml.add_space_prefix", prefix);
    } else {
      std::vector<std::string> patterns;
      bool byte_level = false, prefix_space = false;
      if (pre != nullptr) collect_pre(*pre, &patterns, &byte_level, &prefix_space);
      if (!byte_level)
        bad("BPE without a ByteLevel pre-tokenizer or byte_fallback is not supported");
      sum.model = "gpt2";
      sum.pre = tok::PreTokenizer::identify(patterns);
      if (sum.pre.empty())
        bad("the pre-tokenizer's regexes match none that nexus knows (" +
            std::to_string(patterns.size()) + " pattern(s), the first '" +
            (patterns.empty() ? std::string() : patterns[0]) + "')");
      w.set_string("tokenizer.ggml.model", "gpt2");
      w.set_string("tokenizer.ggml.pre", sum.pre);
      w.set_string_array("tokenizer.ggml.tokens", tokens);
      w.set_i32_array("tokenizer.ggml.token_type", types);
      w.set_string_array("tokenizer.ggml.merges", std::move(merge_list));
    }

    // Special tokens: tokenizer_config.json names them (looked up among the added tokens, then
    // the vocab); config.json's *_token_id fills the rest.
    auto lookup = [&](const std::string& text) -> int64_t {
      if (auto it = added_ids.find(text); it != added_ids.end()) return it->second;
      if (const json* v = member(*vocab, text.c_str()); v != nullptr) return v->get<int64_t>();
      return -1;
    };
    const std::pair<const char*, const char*> kSpecials[] = {
        {"bos", "tokenizer.ggml.bos_token_id"},
        {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"}};
    for (const auto& [typ, key] : kSpecials) {
      int64_t id = -1;
      if (const json* v = member(config, (std::string(typ) + "_token").c_str()))
        if (const std::string text = token_content(*v); !text.empty()) id = lookup(text);
      if (id < 0)
        if (const json* v = member(mconfig, (std::string(typ) + "_token_id").c_str());
            v != nullptr && v->is_number_integer())
          id = v->get<int64_t>();
      if (id >= 0 && id < n) w.set_u32(key, static_cast<uint32_t>(id));
    }

    // Whether BOS / EOS are added: tokenizer_config.json's flags, else the post-processor's
    // template (a special token first / last in its "single" sequence).
    std::optional<bool> add_bos, add_eos;
    if (const json* post = member(j, "post_processor")) {
      std::vector<const json*> procs;
      if (type_of(*post) == "Sequence" && member(*post, "processors") != nullptr)
        for (const json& p : (*post)["processors"]) procs.push_back(&p);
      else
        procs.push_back(post);
      for (const json* p : procs) {
        if (type_of(*p) != "TemplateProcessing") continue;
        const json* single = member(*p, "single");
        if (single == nullptr || !single->is_array() || single->size() < 2) continue;
        add_bos = member(single->front(), "SpecialToken") != nullptr;
        add_eos = member(single->back(), "SpecialToken") != nullptr;
      }
    }
    if (const json* v = member(config, "add_bos_token"); v != nullptr && v->is_boolean())
      add_bos = v->get<bool>();
    if (const json* v = member(config, "add_eos_token"); v != nullptr && v->is_boolean())
      add_eos = v->get<bool>();
    if (add_bos) w.set_bool("tokenizer.ggml.add_bos_token", *add_bos);
    if (add_eos) w.set_bool("tokenizer.ggml.add_eos_token", *add_eos);

    if (const json* t = member(config, "chat_template"); t != nullptr && t->is_string())
      w.set_string("tokenizer.chat_template", t->get<std::string>());
    else if (!chat_template.empty())
      w.set_string("tokenizer.chat_template", std::string(chat_template));
  } catch (const JsonError& e) {
    return Status::error("[tokenizer] " + name + ": " + e.what);
  } catch (const json::exception& e) {
    return Status::error("[tokenizer] " + name + ": invalid JSON: " + e.what());
  }
  return sum;
}

Result<std::string> gpt2_tokenizer_json(std::string_view vocab_json, std::string_view merges_txt,
                                        std::string_view config_json, const std::string& name) {
  try {
    const json config = config_json.empty() ? json::object() : json::parse(config_json);
    const json* cls = member(config, "tokenizer_class");
    const std::string klass = cls != nullptr && cls->is_string() ? cls->get<std::string>() : "";
    if (klass != "GPT2Tokenizer" && klass != "GPT2TokenizerFast")
      bad("vocab.json + merges.txt are read only for tokenizer_class GPT2Tokenizer, not '" + klass +
          "'");
    json vocab = json::parse(vocab_json);
    if (!vocab.is_object()) bad("vocab.json is not an object");
    json merges = json::array();
    size_t pos = 0, line_no = 0;
    while (pos < merges_txt.size()) {
      size_t end = merges_txt.find('\n', pos);
      if (end == std::string_view::npos) end = merges_txt.size();
      std::string_view line = merges_txt.substr(pos, end - pos);
      pos = end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || (line_no++ == 0 && line.substr(0, 8) == "#version")) continue;
      const size_t sp = line.find(' ');
      if (sp == 0 || sp == std::string_view::npos ||
          line.find(' ', sp + 1) != std::string_view::npos)
        bad("merges.txt line " + std::to_string(line_no) + " is not \"a b\"");
      merges.push_back(std::string(line));
    }
    json added = json::array();
    if (const json* dec = member(config, "added_tokens_decoder");
        dec != nullptr && dec->is_object())
      for (const auto& [id, tok] : dec->items()) {
        const json* content = member(tok, "content");
        if (content == nullptr || !content->is_string())
          bad("added token " + id + " has no content");
        added.push_back({{"id", std::stoll(id)},
                         {"content", *content},
                         {"special", flag(tok, "special", false)}});
      }
    const json t = {{"added_tokens", added},
                    {"pre_tokenizer",
                     {{"type", "ByteLevel"},
                      {"add_prefix_space", flag(config, "add_prefix_space", false)},
                      {"use_regex", true}}},
                    {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    return t.dump();
  } catch (const JsonError& e) {
    return Status::error("[tokenizer] " + name + ": " + e.what);
  } catch (const json::exception& e) {
    return Status::error("[tokenizer] " + name + ": invalid JSON: " + e.what());
  } catch (const std::exception& e) {
    return Status::error("[tokenizer] " + name + ": " + e.what());
  }
}

}  // namespace nexus
