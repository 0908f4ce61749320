// Regex matching: character classes and the backtracking interpreter, which keeps its stack on
// the heap so long inputs cannot overflow the C stack.
#include "tokenizer/regex.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

constexpr int kMaxLookDepth = 16;

bool is_word(char32_t cp) { return in_gc(cp, kGcWord); }

struct Frame {
  int32_t pc;
  int32_t count;  // -1: plain backtrack point; otherwise a repeat's next count to try
  uint32_t pos;   // position (plain) or where the repeat started
};

}  // namespace

bool CharClass::matches_slow(char32_t cp) const {
  bool in = (gc_mask & gc_bit(category(cp))) != 0;
  if (!in && (space || not_space)) {
    const bool ws = is_whitespace(cp);
    in = (space && ws) || (not_space && !ws);
  }
  for (size_t i = 0; !in && i < ranges.size(); ++i)
    in = cp >= ranges[i].first && cp <= ranges[i].second;
  for (size_t i = 0; !in && i < not_gc_masks.size(); ++i)
    in = (not_gc_masks[i] & gc_bit(category(cp))) == 0;
  return in != negated;
}

void CharClass::finalize() {
  ascii[0] = ascii[1] = 0;
  for (char32_t cp = 0; cp < 128; ++cp)
    if (matches_slow(cp)) ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
}

// Parses a pattern into a Node tree and emits the program.
bool Regex::run(int32_t pc, std::span<const char32_t> text, size_t pos, size_t* end,
                int depth) const {
  if (depth > kMaxLookDepth) return false;
  // One backtrack stack per lookahead depth, sized once so references into it stay valid.
  thread_local std::vector<std::vector<Frame>> scratch(kMaxLookDepth + 1);
  std::vector<Frame>& stack = scratch[depth];
  stack.clear();
  const size_t n = text.size();
  while (true) {
    const Inst& in = prog_[pc];
    bool ok = true;
    switch (in.op) {
      case Op::kClass:
        ok = pos < n && classes_[in.x].matches(text[pos]);
        if (ok) {
          ++pos;
          ++pc;
        }
        break;
      case Op::kSplit:
        stack.push_back({in.y, -1, static_cast<uint32_t>(pos)});
        pc = in.x;
        break;
      case Op::kJmp:
        pc = in.x;
        break;
      case Op::kLook: {
        size_t e = 0;
        ok = run(in.x, text, pos, &e, depth + 1) != (in.y != 0);
        if (ok) ++pc;
        break;
      }
      case Op::kBol:
        ok = pos == 0;
        if (ok) ++pc;
        break;
      case Op::kEol:
        ok = pos == n;
        if (ok) ++pc;
        break;
      case Op::kWordB:
      case Op::kNotWordB: {
        const bool before = pos > 0 && is_word(text[pos - 1]);
        const bool after = pos < n && is_word(text[pos]);
        ok = (before != after) == (in.op == Op::kWordB);
        if (ok) ++pc;
        break;
      }
      case Op::kRepeat: {
        const CharClass& cls = classes_[in.x];
        const size_t limit = in.max < 0 ? n - pos : std::min<size_t>(in.max, n - pos);
        if (in.greedy) {
          size_t k = 0;
          while (k < limit && cls.matches(text[pos + k])) ++k;
          ok = k >= static_cast<size_t>(in.min);
          if (ok) {
            if (k > static_cast<size_t>(in.min))
              stack.push_back({pc, static_cast<int32_t>(k - 1), static_cast<uint32_t>(pos)});
            pos += k;
            ++pc;
          }
        } else {
          size_t k = 0;
          while (k < static_cast<size_t>(in.min) && k < limit && cls.matches(text[pos + k])) ++k;
          ok = k >= static_cast<size_t>(in.min);
          if (ok) {
            if (k < limit)
              stack.push_back({pc, static_cast<int32_t>(k + 1), static_cast<uint32_t>(pos)});
            pos += k;
            ++pc;
          }
        }
        break;
      }
      case Op::kMatch:
        *end = pos;
        return true;
    }
    if (ok) continue;
    // Backtrack.
    while (true) {
      if (stack.empty()) return false;
      const Frame f = stack.back();
      stack.pop_back();
      if (f.count < 0) {
        pc = f.pc;
        pos = f.pos;
        break;
      }
      const Inst& rep = prog_[f.pc];
      const size_t k = static_cast<size_t>(f.count);
      if (rep.greedy) {
        if (k > static_cast<size_t>(rep.min))
          stack.push_back({f.pc, static_cast<int32_t>(k - 1), f.pos});
      } else {
        // Lazy: k more characters are only allowed if the k-th one matches.
        if (!classes_[rep.x].matches(text[f.pos + k - 1])) continue;
        const size_t limit = rep.max < 0 ? n - f.pos : std::min<size_t>(rep.max, n - f.pos);
        if (k < limit) stack.push_back({f.pc, static_cast<int32_t>(k + 1), f.pos});
      }
      pos = f.pos + k;
      pc = f.pc + 1;
      break;
    }
  }
}

int64_t Regex::match_at(std::span<const char32_t> text, size_t pos) const {
  size_t end = 0;
  return run(0, text, pos, &end, 0) ? static_cast<int64_t>(end) : -1;
}

bool Regex::find(std::span<const char32_t> text, size_t from, size_t* begin, size_t* end) const {
  for (size_t pos = from; pos <= text.size(); ++pos) {
    const int64_t e = match_at(text, pos);
    if (e >= 0) {
      *begin = pos;
      *end = static_cast<size_t>(e);
      return true;
    }
  }
  return false;
}

}  // namespace nexus::tok