// A small backtracking regex engine over code points, covering what tokenizer pre-tokenizer
// patterns use: alternation, groups, classes with \p{..}, \s \d \w, counted repeats, lookahead,
// (?i:).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nexus/status.h"

namespace nexus::tok {

// A set of code points: ranges, general-category masks and the White_Space property, optionally
// negated. Code points below 128 are answered from a precomputed bitmap.
struct CharClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  uint32_t gc_mask = 0;                // categories in the set
  std::vector<uint32_t> not_gc_masks;  // \P{..}, \D, \W items: "category not in mask"
  bool space = false;                  // \s
  bool not_space = false;              // \S
  bool negated = false;
  uint64_t ascii[2] = {0, 0};

  bool matches(char32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    return matches_slow(cp);
  }
  bool matches_slow(char32_t cp) const;
  // Fills `ascii` from the other members; call after building.
  void finalize();
};

// Leftmost-first (Perl/Oniguruma) semantics: alternatives are tried in order, quantifiers are
// greedy unless followed by '?'. '$' matches only at the end of the text, '.' anything but '\n'.
// Not supported (compile error): backreferences, lookbehind, possessive quantifiers, scripts
// such as \p{Han}, and unbounded repeats of groups that can match the empty string.
class Regex {
 public:
  static Result<Regex> compile(std::string_view pattern);

  // End of the match that starts exactly at `pos`, or -1 when none does.
  int64_t match_at(std::span<const char32_t> text, size_t pos) const;
  // First match starting at or after `from`: sets [*begin, *end) and returns true.
  bool find(std::span<const char32_t> text, size_t from, size_t* begin, size_t* end) const;
  const std::string& pattern() const { return pattern_; }

  enum class Op : uint8_t {
    kClass,
    kSplit,
    kJmp,
    kLook,
    kBol,
    kEol,
    kWordB,
    kNotWordB,
    kRepeat,
    kMatch
  };
  struct Inst {
    Op op = Op::kMatch;
    int32_t x = 0;    // class index, jump target or lookahead program start
    int32_t y = 0;    // second split target; for kLook 1 when negative
    int32_t min = 0;  // kRepeat bounds (max -1 = unbounded)
    int32_t max = 0;
    bool greedy = true;
  };

 private:
  friend class RegexCompiler;
  bool run(int32_t pc, std::span<const char32_t> text, size_t pos, size_t* end, int depth) const;

  std::string pattern_;
  std::vector<Inst> prog_;
  std::vector<CharClass> classes_;
};

}  // namespace nexus::tok
