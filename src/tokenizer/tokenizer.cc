// nexus::Tokenizer: loading by path, the encode driver (special tokens, SPM space prefix, BOS/EOS)
// and decoding through the per-token piece table.
#include "nexus/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nexus/io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"

namespace nexus {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Control tokens that end a turn in the common chat formats.
constexpr const char* kEogTexts[] = {
    "<|endoftext|>",      "<|im_end|>",      "<|eot_id|>", "<|eom_id|>", "<|end|>",
    "<end_of_turn>",      "<|end_of_text|>", "<EOT>",      "_<EOT>",     "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::error("[tokenizer] cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::error("[tokenizer] cannot read '" + path + "'");
  return ss.str();
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

bool is_special_type(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined;
}

}  // namespace

void Tokenizer::Impl::finish() {
  const size_t n = vocab.size();
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const TokenType t = vocab.type(id);
    if (is_special_type(t)) specials.add(id, vocab.text(id), t == TokenType::kUserDefined);
  }

  pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& text = vocab.text(id);
    const TokenType t = vocab.type(id);
    std::string& piece = pieces[i];
    if (is_special_type(t)) {
      // WordPiece writes words apart, specials included: "[CLS] hello world [SEP]".
      piece = kind == TokenizerKind::kWordPiece ? " " + text : text;
    } else if (t == TokenType::kByte && tok::parse_byte_token(text) >= 0) {
      piece.assign(1, static_cast<char>(tok::parse_byte_token(text)));
    } else if (kind == TokenizerKind::kSpm) {
      piece = replace_all(text, kSpmSpace, " ");
    } else if (kind == TokenizerKind::kBpe) {
      piece = tok::byte_level_decode(text);
    } else if (!wp_word_prefix.empty()) {
      piece = text.starts_with(wp_word_prefix) ? " " + text.substr(wp_word_prefix.size()) : text;
    } else {
      piece = !wp_continuation_prefix.empty() && text.starts_with(wp_continuation_prefix)
                  ? text.substr(wp_continuation_prefix.size())
                  : " " + text;
    }
  }

  eog.assign(n, 0);
  for (int32_t id : {eos, eot, eom})
    if (id >= 0) eog[id] = 1;
  for (const char* t : kEogTexts) {
    const int32_t id = vocab.find(t);
    if (id >= 0 && vocab.type(id) == TokenType::kControl) eog[id] = 1;
  }
  // WordPiece's "EOS" is [SEP], which separates segments rather than ending generation.
  if (kind == TokenizerKind::kWordPiece && eos >= 0 && eos == sep) eog[eos] = 0;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.json";
  if (!std::filesystem::exists(p, ec))
    return Status::error("[tokenizer] no such file: '" + p.string() + "'");
  if (p.extension() == ".json") {
    auto json = read_file(p.string());
    if (!json) return json.status();
    std::string config;
    const auto config_path = p.parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config_path, ec)) {
      auto c = read_file(config_path.string());
      if (!c) return c.status();
      config = std::move(c.value());
    }
    return from_hf_json(json.value(), config, p.string());
  }
  auto g = GgufFile::open(p.string());
  if (!g) return g.status();
  return from_gguf(g.value());
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->vocab.size())
    throw Error("[tokenizer] token id " + std::to_string(id) + " out of range (vocab size " +
                std::to_string(impl_->vocab.size()) + ")");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (add_bos && m.add_bos && m.bos >= 0) out.push_back(m.bos);
  std::vector<tok::Fragment> fragments;
  if (!text.empty()) m.specials.split(text, parse_special, &fragments);
  bool after_special = true;  // SPM adds its leading space at the start and after specials
  std::string buf;
  for (const tok::Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    std::string_view run = text.substr(f.begin, f.end - f.begin);
    if (m.kind == TokenizerKind::kSpm && m.add_space_prefix && after_special) {
      buf.assign(" ");
      buf.append(run);
      run = buf;
    }
    m.model->encode(run, &out);
    after_special = false;
  }
  if (add_bos && m.add_eos && m.eos >= 0) out.push_back(m.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  const bool spm_prefix = m.kind == TokenizerKind::kSpm && m.add_space_prefix;
  std::string out;
  bool strip_space = spm_prefix;  // SPM: drop the space encode() put at the start of a run
  for (int32_t id : ids) {
    check_id(id);
    const TokenType t = m.vocab.type(id);
    std::string_view piece = m.pieces[id];
    if (is_special_type(t)) {
      strip_space = spm_prefix;
      if (skip_special && t != TokenType::kUserDefined) continue;
    } else {
      if (strip_space && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
      strip_space = false;
    }
    // WordPiece pieces carry a leading space to separate words; the first needs none.
    if (m.kind == TokenizerKind::kWordPiece && out.empty() && !piece.empty() && piece[0] == ' ')
      piece.remove_prefix(1);
    out += piece;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  check_id(id);
  return impl_->pieces[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return impl_->vocab.text(id);
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return impl_->vocab.type(id);
}

float Tokenizer::token_score(int32_t id) const {
  check_id(id);
  return impl_->vocab.score(id);
}

int32_t Tokenizer::token_id(std::string_view text) const { return impl_->vocab.find(text); }
int64_t Tokenizer::n_vocab() const { return static_cast<int64_t>(impl_->vocab.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::unk_id() const { return impl_->unk; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos && impl_->bos >= 0; }
bool Tokenizer::add_eos() const { return impl_->add_eos && impl_->eos >= 0; }
TokenizerKind Tokenizer::kind() const { return impl_->kind; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->eog.size() && impl_->eog[id] != 0;
}

std::string Tokenizer::type_name() const {
  switch (impl_->kind) {
    case TokenizerKind::kSpm:
      return impl_->model_name + " (SPM)";
    case TokenizerKind::kBpe:
      return impl_->model_name + " (byte-level BPE, pre-tokenizer " + impl_->pre_name + ")";
    case TokenizerKind::kWordPiece:
      return impl_->model_name + " (WordPiece)";
  }
  return impl_->model_name;
}

}  // namespace nexus
