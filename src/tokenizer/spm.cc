// SentencePiece BPE encoding. Follows SentencePiece's bpe_model: a max-heap of adjacent pairs
// keyed by the merged token's score (ties: leftmost first), stale entries skipped on pop.
#include "tokenizer/spm.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;
  uint32_t len;  // 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                           : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

SpmModel::SpmModel(const Vocab& vocab, int32_t unk_id) : vocab_(vocab), unk_(unk_id) {
  byte_tokens_.fill(-1);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab.type(static_cast<int32_t>(id)) != TokenType::kByte) continue;
    const int b = parse_byte_token(vocab.text(static_cast<int32_t>(id)));
    if (b >= 0 && byte_tokens_[b] < 0) {
      byte_tokens_[b] = static_cast<int32_t>(id);
      has_byte_tokens_ = true;
    }
  }
  // Chunking is exact only if no mergeable token has U+2581 right after another character.
  chunk_at_spaces_ = true;
  for (size_t id = 0; id < vocab.size() && chunk_at_spaces_; ++id) {
    const std::string& t = vocab.text(static_cast<int32_t>(id));
    if (!mergeable(static_cast<int32_t>(id))) continue;
    for (size_t pos = t.find(kSpace, 1); pos != std::string::npos; pos = t.find(kSpace, pos + 1))
      if (pos < kSpace.size() || t.compare(pos - kSpace.size(), kSpace.size(), kSpace) != 0)
        chunk_at_spaces_ = false;
  }
}

bool SpmModel::mergeable(int32_t id) const {
  const TokenType t = vocab_.type(id);
  return t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused ||
         t == TokenType::kUndefined;
}

void SpmModel::encode(std::string_view raw, std::vector<int32_t>* out) const {
  std::string text;
  text.reserve(raw.size() + raw.size() / 2);
  for (char c : raw) {
    if (c == ' ')
      text += kSpace;
    else
      text += c;
  }
  if (!chunk_at_spaces_) {
    encode_escaped(text, out);
    return;
  }
  // No token spans a point where U+2581 follows another character, so the text can be merged
  // chunk by chunk with the same result, and far faster than as one long symbol list.
  size_t start = 0;
  for (size_t pos = text.find(kSpace, 1); pos != std::string::npos;
       pos = text.find(kSpace, pos + kSpace.size())) {
    if (pos >= kSpace.size() && text.compare(pos - kSpace.size(), kSpace.size(), kSpace) == 0)
      continue;
    encode_escaped(std::string_view(text).substr(start, pos - start), out);
    start = pos;
  }
  encode_escaped(std::string_view(text).substr(start), out);
}

void SpmModel::encode_escaped(std::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  thread_local std::vector<Symbol> syms;
  syms.clear();
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                    static_cast<uint32_t>(len)});
    off += len;
  }

  thread_local std::vector<Bigram> heap;  // max-heap under BigramOrder
  heap.clear();
  // Halves of each unused piece formed, to split it back at the end (SentencePiece's rev_merge).
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> halves;
  auto view = [&](const Symbol& s) { return std::string_view(text).substr(s.start, s.len); };
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const std::string_view piece(text.data() + syms[l].start, syms[l].len + syms[r].len);
    const int32_t id = vocab_.find(piece);
    if (id < 0 || !mergeable(id)) return;
    heap.push_back({vocab_.score(id), l, r, static_cast<uint32_t>(piece.size())});
    std::push_heap(heap.begin(), heap.end(), BigramOrder());
    if (vocab_.type(id) == TokenType::kUnused) halves[piece] = {view(syms[l]), view(syms[r])};
  };
  for (size_t i = 1; i < syms.size(); ++i)
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BigramOrder());
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Emits a final symbol: its token, the halves of an unused piece, or byte fallback.
  auto emit = [&](auto&& self, std::string_view piece) -> void {
    const int32_t id = vocab_.find(piece);
    if (id >= 0 && mergeable(id)) {
      if (vocab_.type(id) != TokenType::kUnused) {
        out->push_back(id);
        return;
      }
      auto it = halves.find(piece);
      if (it != halves.end()) {
        self(self, it->second.first);
        self(self, it->second.second);
        return;
      }
    }
    if (!has_byte_tokens_) {
      if (unk_ >= 0) out->push_back(unk_);
      return;
    }
    for (unsigned char c : piece) {
      const int32_t bt = byte_tokens_[c];
      if (bt >= 0)
        out->push_back(bt);
      else if (unk_ >= 0)
        out->push_back(unk_);
    }
  };
  for (int32_t i = 0; i >= 0; i = syms[i].next) emit(emit, view(syms[i]));
}

}  // namespace nexus::tok
