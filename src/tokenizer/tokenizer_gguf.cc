// Tokenizer::from_gguf: reads tokenizer.ggml.* metadata (the keys and defaults llama.cpp uses).
#include <string>

#include "nexus/io/gguf.h"
#include "nexus/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/wordpiece.h"

namespace nexus {

namespace {

Status gguf_error(const GgufFile& g, const std::string& what) {
  return Status::error("[tokenizer] " + g.path() + ": " + what);
}

// Splits a GGUF merge "left right" at the first space after the first character.
std::pair<std::string_view, std::string_view> split_merge(std::string_view m) {
  const size_t sp = m.find(' ', 1);
  if (sp == std::string_view::npos) return {m, {}};
  return {m.substr(0, sp), m.substr(sp + 1)};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& g) {
  const auto model_name = g.get_string("tokenizer.ggml.model");
  if (!model_name) return gguf_error(g, "no tokenizer.ggml.model key (file has no vocabulary)");
  const std::vector<std::string>* tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty())
    return gguf_error(g, "missing or empty tokenizer.ggml.tokens");
  const size_t n = tokens->size();

  std::vector<float> scores;
  if (const std::vector<double>* s = g.get_float_array("tokenizer.ggml.scores")) {
    if (s->size() < n) return gguf_error(g, "tokenizer.ggml.scores is shorter than the vocab");
    scores.assign(s->begin(), s->begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::vector<TokenType> types;
  if (const std::vector<int64_t>* t = g.get_int_array("tokenizer.ggml.token_type")) {
    if (t->size() < n) return gguf_error(g, "tokenizer.ggml.token_type is shorter than the vocab");
    types.reserve(n);
    for (size_t i = 0; i < n; ++i)
      types.push_back((*t)[i] >= 0 && (*t)[i] <= 6 ? static_cast<TokenType>((*t)[i])
                                                   : TokenType::kUndefined);
  }

  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.model_name = *model_name;
  m.vocab.assign(*tokens, std::move(scores), std::move(types));

  // Per-model defaults (llama.cpp's), then the file's keys, then the model itself.
  int64_t bos = -1, eos = -1, unk = -1, sep = -1, pad = -1;
  if (m.model_name == "llama") {
    m.kind = TokenizerKind::kSpm;
    bos = 1, eos = 2, unk = 0;
    m.add_bos = true;
    m.add_space_prefix = g.get_int("tokenizer.ggml.add_space_prefix").value_or(1) != 0;
  } else if (m.model_name == "gpt2") {
    m.kind = TokenizerKind::kBpe;
  } else if (m.model_name == "bert") {
    m.kind = TokenizerKind::kWordPiece;
    bos = 101, unk = 100, sep = 102, pad = 0;
    m.add_bos = m.add_eos = true;
  } else {
    return gguf_error(
        g, "unsupported tokenizer model '" + m.model_name + "' (supported: llama, gpt2, bert)");
  }
  m.bos = m.checked_id(g.get_int("tokenizer.ggml.bos_token_id").value_or(bos));
  m.eos = m.checked_id(g.get_int("tokenizer.ggml.eos_token_id").value_or(eos));
  m.unk = m.checked_id(g.get_int("tokenizer.ggml.unknown_token_id").value_or(unk));
  m.pad = m.checked_id(g.get_int("tokenizer.ggml.padding_token_id").value_or(pad));
  m.sep = m.checked_id(g.get_int("tokenizer.ggml.seperator_token_id").value_or(sep));
  m.eot = m.checked_id(g.get_int("tokenizer.ggml.eot_token_id").value_or(-1));
  m.eom = m.checked_id(g.get_int("tokenizer.ggml.eom_token_id").value_or(-1));

  if (m.kind == TokenizerKind::kSpm) {
    // Without tokenizer.ggml.token_type, infer what SPM needs: byte, control and unknown tokens.
    if (g.get_int_array("tokenizer.ggml.token_type") == nullptr) {
      for (size_t i = 0; i < n; ++i)
        if (tok::parse_byte_token((*tokens)[i]) >= 0)
          m.vocab.set_type(static_cast<int32_t>(i), TokenType::kByte);
      for (int32_t id : {m.bos, m.eos})
        if (id >= 0) m.vocab.set_type(id, TokenType::kControl);
      if (m.unk >= 0) m.vocab.set_type(m.unk, TokenType::kUnknown);
    }
    m.model = std::make_unique<tok::SpmModel>(m.vocab, m.unk);
  } else if (m.kind == TokenizerKind::kBpe) {
    m.pre_name = g.get_string("tokenizer.ggml.pre").value_or("gpt-2");
    auto pre = tok::PreTokenizer::from_name(m.pre_name);
    if (!pre) return gguf_error(g, pre.status().message());
    const std::vector<std::string>* merges = g.get_string_array("tokenizer.ggml.merges");
    if (merges == nullptr) return gguf_error(g, "BPE vocabulary without tokenizer.ggml.merges");
    std::vector<std::pair<std::string_view, std::string_view>> pairs;
    pairs.reserve(merges->size());
    for (const std::string& s : *merges) pairs.push_back(split_merge(s));
    m.add_bos = pre->add_bos();
    tok::BpeOptions opt;
    opt.ignore_merges = pre->ignore_merges();
    auto bpe = tok::BpeModel::create(m.vocab, pairs, std::move(pre.value()), opt);
    if (!bpe) return gguf_error(g, bpe.status().message());
    m.model = std::move(bpe.value());
  } else {
    tok::WordPieceOptions opt;
    opt.word_prefix = "\xE2\x96\x81";  // llama.cpp's conversion marks word starts with U+2581
    opt.continuation_prefix = "";
    opt.lowercase = g.get_int("tokenizer.ggml.normalizer.lowercase").value_or(1) != 0;
    opt.strip_accents =
        g.get_int("tokenizer.ggml.normalizer.strip_accents").value_or(opt.lowercase) != 0;
    m.wp_word_prefix = opt.word_prefix;
    m.model = std::make_unique<tok::WordPieceModel>(m.vocab, m.unk, std::move(opt));
    // WordPiece appends [SEP] where other models append EOS.
    if (m.sep >= 0) m.eos = m.sep;
  }
  if (auto v = g.get_int("tokenizer.ggml.add_bos_token")) m.add_bos = *v != 0;
  if (auto v = g.get_int("tokenizer.ggml.add_eos_token")) m.add_eos = *v != 0;
  if (auto v = g.get_int("tokenizer.ggml.add_sep_token"); v && m.kind == TokenizerKind::kWordPiece)
    m.add_eos = *v != 0;
  m.finish();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

}  // namespace nexus
