// Finds special and added tokens in raw text before the model sees it, splitting the text into
// fragments that are either plain text or one such token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nexus::tok {

// A plain-text byte range [begin, end) of the input, or (token >= 0) one matched token.
struct Fragment {
  int32_t token = -1;
  uint32_t begin = 0;
  uint32_t end = 0;
};

class SpecialMatcher {
 public:
  // Registers a token. `always`: matched even when parse_special is off (user-defined and
  // Hugging Face non-special added tokens). `lstrip` / `rstrip` swallow the whitespace before /
  // after a match.
  void add(int32_t id, std::string text, bool always, bool lstrip = false, bool rstrip = false);
  bool empty() const { return n_ == 0; }

  // Splits `text` at every occurrence of a registered token, taking at each position the
  // longest token that starts there (leftmost-longest, like Hugging Face's added-token
  // matcher). Plain-text fragments are never empty.
  void split(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;

 private:
  struct Entry {
    std::string text;
    int32_t id;
    bool always;
    bool lstrip;
    bool rstrip;
  };
  // Entries bucketed by first byte, longest first.
  std::array<std::vector<Entry>, 256> by_first_;
  size_t n_ = 0;
};

}  // namespace nexus::tok
