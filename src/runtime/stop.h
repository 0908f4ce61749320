// Stop strings over streamed text: decides, token by token, which bytes are safe to show now and
// which must be held back because they may begin a stop string or split a UTF-8 character.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nexus {

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence, i.e. `s` minus a
// trailing lead byte and its continuation bytes when fewer than the lead announces are present.
// Invalid bytes (stray continuations, 0xF8-0xFF) count as complete: waiting cannot fix them.
size_t utf8_complete_prefix_len(std::string_view s);

// What feed() or flush() allows the caller to emit.
struct StopResult {
  std::string_view text;  // bytes to emit now; valid until the next call on the matcher
  bool stopped = false;   // a stop string was hit: `text` is everything before it; generation ends
  int stop_index = -1;    // which stop string was hit (index into the constructor's list), or -1
};

// Matches stop strings in a stream of token texts. Usage per generated token:
//   StopResult r = m.feed(token_bytes); emit(r.text); if (r.stopped) break;
// and at the end of generation without a stop: emit(m.flush().text).
// Holds back only what it must: the longest tail that is a prefix of some stop string, and a
// trailing incomplete UTF-8 character. With no stop strings it only does the UTF-8 hold-back.
class StopMatcher {
 public:
  // Empty stop strings are ignored. When several stops match, the one that starts first wins
  // (ties: the earlier in `stops`); the stop string itself is never emitted.
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Appends the decoded bytes of the next token. After a stop was hit it returns stopped with no
  // text until reset().
  StopResult feed(std::string_view bytes);

  // Ends the stream: returns everything still held back (an incomplete UTF-8 tail included).
  StopResult flush();

  // Forgets held-back text and the stopped state; keeps the stop strings.
  void reset();

  // Bytes currently held back.
  size_t held() const { return pending_.size() - emitted_; }
  bool stopped() const { return stopped_; }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  // Length of the longest tail of pending_ (after the emitted part) that is a proper prefix of a
  // stop string.
  size_t partial_match_len() const;

  std::vector<std::string> stops_;
  std::string pending_;  // bytes not yet emitted, plus the emitted prefix of the last call
  size_t emitted_ = 0;   // pending_[0, emitted_) was returned by the last call; erased on the next
  bool stopped_ = false;
};

}  // namespace nexus
