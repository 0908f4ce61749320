// Byte-level BPE encoding: a min-heap of adjacent pairs keyed by (merge rank, position), with
// symbols holding token ids so a pair lookup is one hash probe on two integers.
#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

struct Symbol {
  int32_t id;  // token id; -1 for a byte with no token; kDead once merged into the left
  int32_t prev;
  int32_t next;
};
constexpr int32_t kDead = -3;

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};

// Heap order: lowest rank first, then leftmost (std heaps put the "largest" on top).
bool worse(const Candidate& a, const Candidate& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

struct ByteAlphabet {
  char32_t to_cp[256];
  int16_t to_byte[324];
  ByteAlphabet() {
    std::fill(std::begin(to_byte), std::end(to_byte), int16_t{-1});
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

char32_t byte_to_cp(uint8_t b) { return alphabet().to_cp[b]; }

int cp_to_byte(char32_t cp) { return cp < 324 ? alphabet().to_byte[cp] : -1; }

std::string byte_level_decode(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (size_t pos = 0; pos < token_text.size();) {
    const size_t start = pos;
    const int b = cp_to_byte(decode_utf8(token_text, &pos));
    if (b >= 0)
      out.push_back(static_cast<char>(b));
    else
      out.append(token_text.substr(start, pos - start));
  }
  return out;
}

Result<std::unique_ptr<BpeModel>> BpeModel::create(
    const Vocab& vocab, std::span<const std::pair<std::string_view, std::string_view>> merges,
    PreTokenizer pre, BpeOptions options) {
  std::unique_ptr<BpeModel> m(new BpeModel(vocab, std::move(pre), options));
  for (int b = 0; b < 256; ++b) m->byte_tokens_[b] = vocab.find(to_utf8(byte_to_cp(b)));
  m->merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = vocab.find(a), ib = vocab.find(b);
    joined.assign(a);
    joined.append(b);
    const int32_t ir = vocab.find(joined);
    if (ia < 0 || ib < 0 || ir < 0) continue;
    m->merges_.emplace(key(ia, ib), Merge{static_cast<int32_t>(rank), ir});
  }
  if (m->merges_.empty() && !merges.empty())
    return Status::error("[tokenizer] none of the " + std::to_string(merges.size()) +
                         " BPE merges names tokens of the vocabulary");
  return m;
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>* out) const {
  std::string buf;
  std::string_view t = text;
  if (options_.normalization == Normalization::kNfc) {
    buf = nfc(text);
    t = buf;
  } else if (options_.normalization == Normalization::kNfd) {
    buf = nfd(text);
    t = buf;
  }
  if (options_.add_prefix_space && !t.empty() && t[0] != ' ') {
    buf = " " + std::string(t);
    t = buf;
  }
  std::vector<Piece> pieces;
  pre_.split(t, &pieces);
  for (const Piece& p : pieces) encode_piece(t.substr(p.begin, p.end - p.begin), out);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {
    const int32_t id = byte_tokens_[static_cast<unsigned char>(piece[0])];
    if (id >= 0) out->push_back(id);
    return;
  }
  if (options_.ignore_merges) {
    std::string mapped;
    for (unsigned char c : piece) append_utf8(byte_to_cp(c), &mapped);
    const int32_t id = vocab_.find(mapped);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap;
  syms.clear();
  heap.clear();
  const int32_t n = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < n; ++i)
    syms.push_back(
        {byte_tokens_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1});

  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
    auto it = merges_.find(key(syms[l].id, syms[r].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, r, syms[l].id, syms[r].id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.left];
    if (l.id != c.left_id || l.next != c.right || syms[c.right].id != c.right_id) continue;
    Symbol& r = syms[c.right];
    l.id = c.result;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = kDead;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next)
    if (syms[i].id >= 0) out->push_back(syms[i].id);
}

}  // namespace nexus::tok
