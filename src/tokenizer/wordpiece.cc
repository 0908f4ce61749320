// WordPiece encoding with Hugging Face's BertNormalizer / BertPreTokenizer character rules.
#include "tokenizer/wordpiece.h"

#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

// The CJK ranges BERT pads with spaces (as Hugging Face's BertNormalizer lists them).
bool is_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_bert_whitespace(char32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || is_whitespace(cp);
}

bool is_bert_control(char32_t cp) {
  return cp != '\t' && cp != '\n' && cp != '\r' && in_gc(cp, kGcOther);
}

bool is_bert_punct(char32_t cp) {
  if (cp < 128)
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  return in_gc(cp, kGcPunct);
}

}  // namespace

std::vector<std::string> WordPieceModel::words(std::string_view text) const {
  std::vector<std::string> words(1);
  auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  std::vector<char32_t> parts;
  for (size_t pos = 0; pos < text.size();) {
    const char32_t cp = decode_utf8(text, &pos);
    if (options_.clean_text && (cp == 0 || cp == 0xFFFD || is_bert_control(cp))) continue;
    if (is_bert_whitespace(cp)) {
      end_word();
      continue;
    }
    parts.clear();
    if (options_.strip_accents) {
      decompose(cp, &parts);
      std::erase_if(parts, [](char32_t c) { return category(c) == Gc::kMn; });
    } else {
      parts.push_back(cp);
    }
    for (char32_t c : parts) {
      if (options_.lowercase) c = to_lower(c);
      if (is_bert_punct(c) || (options_.handle_chinese_chars && is_chinese_char(c))) {
        end_word();
        append_utf8(c, &words.back());
        words.emplace_back();
      } else {
        append_utf8(c, &words.back());
      }
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WordPieceModel::encode_word(const std::string& word, std::vector<int32_t>* out) const {
  size_t n_chars = 0;
  for (unsigned char c : word) n_chars += (c & 0xC0) != 0x80;
  const size_t mark = out->size();
  bool ok = n_chars <= options_.max_chars_per_word;
  std::string candidate;
  for (size_t start = 0; ok && start < word.size();) {
    int32_t found = -1;
    size_t end = word.size();
    while (end > start) {
      candidate = start == 0 ? options_.word_prefix : options_.continuation_prefix;
      candidate.append(word, start, end - start);
      found = vocab_.find(candidate);
      if (found >= 0) break;
      do --end;
      while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      ok = false;
      break;
    }
    out->push_back(found);
    start = end;
  }
  if (!ok) {
    out->resize(mark);
    if (unk_ >= 0) out->push_back(unk_);
  }
}

void WordPieceModel::encode(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& w : words(text)) encode_word(w, out);
}

}  // namespace nexus::tok
