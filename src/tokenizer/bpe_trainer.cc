// Byte-level BPE trainer. Pair counts are kept incrementally: an index from each pair to the
// words holding it means a merge only rewrites the words that contain the merged pair, and a
// lazily validated max-heap finds the next best pair without a recount.
#include "nexus/tokenizer/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <thread>
#include <unordered_map>

#include "nexus/io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t pair_left(uint64_t k) { return static_cast<int32_t>(k >> 32); }
int32_t pair_right(uint64_t k) { return static_cast<int32_t>(k & 0xFFFFFFFFu); }

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) append_utf8(byte_to_cp(c), &out);
  return out;
}

struct Word {
  std::vector<int32_t> syms;
  int64_t count = 0;
};

// Counts the pre-tokenized pieces of `text`, skipping the special tokens' text.
void count_words(std::string_view text, const PreTokenizer& pre,
                 const std::vector<std::string>& specials,
                 std::unordered_map<std::string, int64_t>* counts, int64_t* n_words) {
  std::vector<Piece> pieces;
  auto count_segment = [&](std::string_view seg) {
    pieces.clear();
    pre.split(seg, &pieces);
    for (const Piece& p : pieces) ++(*counts)[std::string(seg.substr(p.begin, p.end - p.begin))];
    *n_words += static_cast<int64_t>(pieces.size());
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = text.size(), best_len = 0;
    for (const std::string& s : specials) {
      const size_t at = text.find(s, pos);
      if (at < best || (at == best && s.size() > best_len)) best = at, best_len = s.size();
    }
    count_segment(text.substr(pos, best - pos));
    pos = best + best_len;
  }
}

// The merge loop over the counted words.
class Merger {
 public:
  explicit Merger(std::vector<Word> words) : words_(std::move(words)) {
    for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
    stamp_.assign(words_.size(), -1);
    for (size_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].syms;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = pair_key(s[i], s[i + 1]);
        counts_[k] += words_[w].count;
        index_word(k, static_cast<int32_t>(w));
      }
    }
    for (const auto& [k, c] : counts_) heap_.push({c, k});
  }

  // Performs the next merge; false when no pair occurs at least `min_frequency` times.
  bool merge_next(int64_t min_frequency) {
    while (!heap_.empty()) {
      const Entry top = heap_.top();
      heap_.pop();
      const auto it = counts_.find(top.pair);
      const int64_t cur = it == counts_.end() ? 0 : it->second;
      if (cur != top.count) {
        if (cur > 0) heap_.push({cur, top.pair});
        continue;
      }
      if (cur < min_frequency || cur <= 0) return false;
      apply(top.pair);
      return true;
    }
    return false;
  }

  const std::vector<std::string>& token_bytes() const { return bytes_; }
  int64_t n_corpus_tokens() const {
    int64_t n = 0;
    for (const Word& w : words_) n += w.count * static_cast<int64_t>(w.syms.size());
    return n;
  }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  struct Entry {
    int64_t count;
    uint64_t pair;
  };
  // Heap order: higher count first, then the smaller (left bytes, right bytes).
  struct Less {
    const Merger* m;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const std::string& xl = m->bytes_[pair_left(x.pair)];
      const std::string& yl = m->bytes_[pair_left(y.pair)];
      if (xl != yl) return xl > yl;
      return m->bytes_[pair_right(x.pair)] > m->bytes_[pair_right(y.pair)];
    }
  };

  int32_t add_token(std::string bytes) {
    const auto it = ids_.find(bytes);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<int32_t>(bytes_.size());
    ids_.emplace(bytes, id);
    bytes_.push_back(std::move(bytes));
    return id;
  }

  void index_word(uint64_t k, int32_t w) {
    auto& v = where_[k];
    if (v.empty() || v.back() != w) v.push_back(w);
  }

  void apply(uint64_t pair) {
    const int32_t a = pair_left(pair), b = pair_right(pair);
    const int32_t c = add_token(bytes_[a] + bytes_[b]);
    merges_.emplace_back(a, b);
    const int32_t merge_no = static_cast<int32_t>(merges_.size());
    std::vector<int32_t> holders = std::move(where_[pair]);
    where_.erase(pair);
    std::vector<uint64_t> grown;
    std::vector<int32_t> out;
    for (int32_t w : holders) {
      if (stamp_[w] == merge_no) continue;  // listed twice
      stamp_[w] = merge_no;
      Word& word = words_[w];
      const auto& s = word.syms;
      out.clear();
      bool found = false;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          out.push_back(c);
          i += 2;
          found = true;
        } else {
          out.push_back(s[i++]);
        }
      }
      if (!found) continue;  // stale index entry
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        auto it = counts_.find(pair_key(s[i], s[i + 1]));
        if ((it->second -= word.count) == 0) counts_.erase(it);
      }
      for (size_t i = 0; i + 1 < out.size(); ++i) {
        const uint64_t k = pair_key(out[i], out[i + 1]);
        counts_[k] += word.count;
        // Only pairs with the new symbol are new to this word.
        if (out[i] == c || out[i + 1] == c) {
          index_word(k, w);
          grown.push_back(k);
        }
      }
      word.syms.swap(out);
    }
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (uint64_t k : grown) heap_.push({counts_[k], k});
  }

  std::vector<Word> words_;
  std::vector<std::string> bytes_;  // raw bytes of each token
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::vector<int32_t> stamp_;  // last merge that rewrote each word
  std::priority_queue<Entry, std::vector<Entry>, Less> heap_{Less{this}};
};

}  // namespace

std::vector<size_t> safe_chunk_ends(std::string_view text, size_t target) {
  target = std::max<size_t>(target, 1);
  std::vector<size_t> ends;
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    if (n - pos <= target) break;
    size_t cut = 0;
    const size_t limit = std::min(n, pos + 4 * target);
    for (size_t i = pos + target; i + 1 < limit && cut == 0; ++i) {
      if (text[i] != '\n' || is_space_byte(text[i - 1])) continue;
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x21 && next <= 0x7E) cut = i + 1;
    }
    if (cut == 0) {
      if (limit == n) break;
      cut = pos + target;
      while (cut < n && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
    }
    ends.push_back(cut);
    pos = cut;
  }
  ends.push_back(n);
  return ends;
}

Result<BpeVocab> train_bpe(std::string_view text, const BpeTrainerOptions& options) {
  return train_bpe(std::span<const std::string_view>(&text, 1), options);
}

Result<BpeVocab> train_bpe(std::span<const std::string_view> documents,
                           const BpeTrainerOptions& options) {
  std::vector<std::string> specials{kEndOfText};
  for (const std::string& s : options.specials) {
    if (s.empty()) return Status::error("[train-tokenizer] empty special token");
    if (std::find(specials.begin(), specials.end(), s) == specials.end()) specials.push_back(s);
  }
  const auto n_fixed = static_cast<int64_t>(256 + specials.size());
  if (options.vocab_size < n_fixed)
    return Status::error("[train-tokenizer] vocab size " + std::to_string(options.vocab_size) +
                         " is below the " + std::to_string(n_fixed) +
                         " tokens it must hold (256 bytes + " + std::to_string(specials.size()) +
                         " specials)");
  const std::string pre_name = options.pre == "gpt2" ? "gpt-2" : options.pre;
  auto pre = PreTokenizer::from_name(pre_name);
  if (!pre) return Status::error("[train-tokenizer] " + pre.status().message());

  // Word counts: chunks (never spanning documents) dealt round-robin to the threads, each with
  // its own table, summed at the end; sums do not depend on the order.
  std::vector<std::string_view> chunks;
  for (std::string_view doc : documents) {
    size_t begin = 0;
    for (size_t end : safe_chunk_ends(doc, size_t{1} << 20)) {
      chunks.push_back(doc.substr(begin, end - begin));
      begin = end;
    }
  }
  const size_t n_threads = std::clamp<size_t>(static_cast<size_t>(std::max(options.threads, 1)), 1,
                                              std::max<size_t>(chunks.size(), 1));
  std::vector<std::unordered_map<std::string, int64_t>> tables(n_threads);
  std::vector<int64_t> n_words(n_threads, 0);
  auto work = [&](size_t t) {
    for (size_t i = t; i < chunks.size(); i += n_threads)
      count_words(chunks[i], *pre, specials, &tables[t], &n_words[t]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n_threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  BpeVocab v;
  std::unordered_map<std::string, int64_t>& counts = tables[0];
  v.n_words = n_words[0];
  for (size_t t = 1; t < n_threads; ++t) {
    for (auto& [w, c] : tables[t]) counts[w] += c;
    tables[t].clear();
    v.n_words += n_words[t];
  }
  v.n_unique_words = static_cast<int64_t>(counts.size());
  // Words in byte order, so every container below is filled in the same order on every run.
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  counts.clear();
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    Word word;
    word.count = c;
    for (unsigned char ch : w) word.syms.push_back(ch);
    words.push_back(std::move(word));
  }
  sorted.clear();

  Merger merger(std::move(words));
  const int64_t max_tokens = options.vocab_size - static_cast<int64_t>(specials.size());
  while (static_cast<int64_t>(merger.token_bytes().size()) < max_tokens &&
         merger.merge_next(std::max<int64_t>(options.min_frequency, 1))) {
  }

  v.n_corpus_tokens = merger.n_corpus_tokens();
  for (const std::string& b : merger.token_bytes()) {
    v.tokens.push_back(to_byte_level(b));
    v.types.push_back(TokenType::kNormal);
  }
  for (const auto& [a, b] : merger.merges()) v.merges.push_back(v.tokens[a] + " " + v.tokens[b]);
  v.eos_id = static_cast<int32_t>(v.tokens.size());
  for (const std::string& s : specials) {
    v.tokens.push_back(s);
    v.types.push_back(TokenType::kControl);
  }
  v.pre = pre_name;
  return v;
}

std::vector<uint8_t> bpe_vocab_to_gguf(const BpeVocab& v) {
  GgufWriter w;
  w.set_string("general.architecture", "gpt2");
  w.set_string("general.name", "nexus-bpe");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  std::vector<int64_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int64_t>(t));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.eos_id));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  return w.serialize();
}

}  // namespace nexus::tok
