// Tokenizer::from_hf_json: Hugging Face tokenizer.json with a byte-level BPE or WordPiece model,
// plus bos/eos/add_bos_token from tokenizer_config.json when given.
#include <nlohmann/json.hpp>
#include <string>

#include "nexus/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/wordpiece.h"

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

// The normalizers byte-level BPE can use: none, NFC or NFD (alone or in a Sequence).
tok::Normalization bpe_normalization(const json* n) {
  if (n == nullptr) return tok::Normalization::kNone;
  const std::string t = type_of(*n);
  if (t == "NFC") return tok::Normalization::kNfc;
  if (t == "NFD") return tok::Normalization::kNfd;
  if (t == "Sequence") {
    const json* list = member(*n, "normalizers");
    if (list == nullptr || !list->is_array()) bad("normalizer Sequence without normalizers");
    if (list->empty()) return tok::Normalization::kNone;
    if (list->size() == 1) return bpe_normalization(&(*list)[0]);
  }
  bad("unsupported normalizer '" + t + "' for BPE (supported: NFC, NFD)");
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json(std::string_view tokenizer_json,
                                                           std::string_view config_json,
                                                           const std::string& name) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  try {
    const json j = json::parse(tokenizer_json);
    const json config = config_json.empty() ? json::object() : json::parse(config_json);
    const json* model = member(j, "model");
    if (model == nullptr) bad("no \"model\"");
    const json* vocab = member(*model, "vocab");
    if (vocab == nullptr || !vocab->is_object()) bad("model without a vocab object");
    std::string mtype = type_of(*model);
    if (mtype.empty()) mtype = member(*model, "merges") != nullptr ? "BPE" : "WordPiece";

    // Vocabulary: model vocab plus added tokens; ids not named anywhere become unused fillers.
    int64_t n = 0;
    auto id_of = [](const json& v) {
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= (1 << 24)) bad("token id " + std::to_string(id) + " out of range");
      return id;
    };
    for (const auto& [text, id] : vocab->items()) n = std::max<int64_t>(n, id_of(id) + 1);
    const json* added = member(j, "added_tokens");
    if (added != nullptr)
      for (const json& a : *added) n = std::max<int64_t>(n, id_of(a.at("id")) + 1);
    if (n == 0) bad("empty vocabulary");
    std::vector<std::string> texts(n);
    std::vector<TokenType> types(n, TokenType::kUnused);
    for (const auto& [text, id] : vocab->items()) {
      texts[id.get<int64_t>()] = text;
      types[id.get<int64_t>()] = TokenType::kNormal;
    }
    if (added != nullptr)
      for (const json& a : *added) {
        const int64_t id = a.at("id").get<int64_t>();
        texts[id] = a.at("content").get<std::string>();
        types[id] = flag(a, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
      }
    for (int64_t i = 0; i < n; ++i)
      if (types[i] == TokenType::kUnused) texts[i] = "[PAD" + std::to_string(i) + "]";
    m.vocab.assign(std::move(texts), {}, std::move(types));
    if (added != nullptr)
      for (const json& a : *added) {
        const auto id = static_cast<int32_t>(a.at("id").get<int64_t>());
        m.specials.add(id, a.at("content").get<std::string>(), !flag(a, "special", false),
                       flag(a, "lstrip", false), flag(a, "rstrip", false));
      }

    const json* normalizer = member(j, "normalizer");
    const json* pre = member(j, "pre_tokenizer");
    if (mtype == "BPE") {
      m.kind = TokenizerKind::kBpe;
      m.model_name = "gpt2";
      if (flag(*model, "byte_fallback", false))
        bad("BPE with byte_fallback (SentencePiece-style tokenizer.json) is not supported");
      std::vector<std::string> patterns;
      bool byte_level = false, prefix_space = false;
      if (pre != nullptr) collect_pre(*pre, &patterns, &byte_level, &prefix_space);
      if (!byte_level) bad("only byte-level BPE is supported (no ByteLevel pre-tokenizer)");
      m.pre_name = tok::PreTokenizer::identify(patterns);
      if (m.pre_name.empty()) m.pre_name = "custom";
      auto pt = tok::PreTokenizer::from_patterns(m.pre_name, patterns);
      if (!pt) return Status::error("[tokenizer] " + name + ": " + pt.status().message());
      const json* merges = member(*model, "merges");
      if (merges == nullptr || !merges->is_array()) bad("BPE model without merges");
      std::vector<std::pair<std::string_view, std::string_view>> pairs;
      pairs.reserve(merges->size());
      for (const json& mj : *merges) {
        if (mj.is_array() && mj.size() == 2) {
          pairs.emplace_back(mj[0].get_ref<const std::string&>(),
                             mj[1].get_ref<const std::string&>());
        } else if (mj.is_string()) {
          const std::string& s = mj.get_ref<const std::string&>();
          const size_t sp = s.find(' ', 1);
          if (sp == std::string::npos) bad("bad merge '" + s + "'");
          pairs.emplace_back(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
        } else {
          bad("bad merge entry");
        }
      }
      tok::BpeOptions opt;
      opt.ignore_merges = flag(*model, "ignore_merges", false);
      opt.add_prefix_space = prefix_space;
      opt.normalization = bpe_normalization(normalizer);
      auto bpe = tok::BpeModel::create(m.vocab, pairs, std::move(pt.value()), opt);
      if (!bpe) return Status::error("[tokenizer] " + name + ": " + bpe.status().message());
      m.model = std::move(bpe.value());
    } else if (mtype == "WordPiece") {
      m.kind = TokenizerKind::kWordPiece;
      m.model_name = "bert";
      tok::WordPieceOptions opt;
      if (const json* p = member(*model, "continuing_subword_prefix"))
        opt.continuation_prefix = p->get<std::string>();
      if (const json* p = member(*model, "max_input_chars_per_word"))
        opt.max_chars_per_word = p->get<size_t>();
      if (normalizer != nullptr) {
        if (type_of(*normalizer) != "BertNormalizer")
          bad("unsupported normalizer '" + type_of(*normalizer) + "' for WordPiece");
        opt.clean_text = flag(*normalizer, "clean_text", true);
        opt.handle_chinese_chars = flag(*normalizer, "handle_chinese_chars", true);
        opt.lowercase = flag(*normalizer, "lowercase", true);
        opt.strip_accents = flag(*normalizer, "strip_accents", opt.lowercase);
      }
      if (pre != nullptr && type_of(*pre) != "BertPreTokenizer")
        bad("unsupported pre_tokenizer '" + type_of(*pre) + "' for WordPiece");
      if (const json* u = member(*model, "unk_token")) m.unk = m.vocab.find(u->get<std::string>());
      m.wp_continuation_prefix = opt.continuation_prefix;
      m.model = std::make_unique<tok::WordPieceModel>(m.vocab, m.unk, std::move(opt));
      m.bos = m.vocab.find("[CLS]");
      m.sep = m.eos = m.vocab.find("[SEP]");
      m.pad = m.vocab.find("[PAD]");
    } else {
      bad("unsupported model type '" + mtype + "' (supported: BPE, WordPiece)");
    }

    // Which specials to add: the post-processor's template, overridden by the config's flags.
    if (const json* post = member(j, "post_processor")) {
      const std::string pt = type_of(*post);
      if (pt == "BertProcessing" || pt == "RobertaProcessing") {
        m.add_bos = m.add_eos = true;
      } else if (pt == "TemplateProcessing") {
        const json* single = member(*post, "single");
        if (single != nullptr && single->is_array() && !single->empty()) {
          m.add_bos = member(single->front(), "SpecialToken") != nullptr;
          m.add_eos = single->size() > 1 && member(single->back(), "SpecialToken") != nullptr;
          if (m.add_bos)
            m.bos = m.vocab.find(single->front()["SpecialToken"]["id"].get<std::string>());
          if (m.add_eos)
            m.eos = m.vocab.find(single->back()["SpecialToken"]["id"].get<std::string>());
        }
      }
    }
    for (auto [key, id] : {std::pair{"bos_token", &m.bos}, std::pair{"eos_token", &m.eos},
                           std::pair{"unk_token", &m.unk}, std::pair{"pad_token", &m.pad}}) {
      const json* v = member(config, key);
      if (v != nullptr && !token_content(*v).empty()) *id = m.vocab.find(token_content(*v));
    }
    m.add_bos = flag(config, "add_bos_token", m.add_bos);
    m.add_eos = flag(config, "add_eos_token", m.add_eos);
  } catch (const JsonError& e) {
    return Status::error("[tokenizer] " + name + ": " + e.what);
  } catch (const json::exception& e) {
    return Status::error("[tokenizer] " + name + ": invalid tokenizer JSON: " + e.what());
  }
  m.finish();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

}  // namespace nexus
