// StopMatcher and the UTF-8 completeness helper used by streamed generation.
#include "runtime/stop.h"

#include <algorithm>
#include <utility>

namespace nexus {

size_t utf8_complete_prefix_len(std::string_view s) {
  const size_t n = s.size();
  // A sequence is at most 4 bytes, so only the last 4 can belong to an unfinished one. Scan back
  // over continuation bytes (10xxxxxx) to the lead byte and compare its announced length.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const size_t i = n - back;
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;
    size_t need = 1;  // ASCII, or an invalid lead byte that no later byte can complete
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return back < need ? i : n;
  }
  return n;  // only continuation bytes: invalid, so nothing to wait for
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
  // Enough for the longest possible hold-back plus a typical token, so feed() rarely reallocates.
  size_t longest = 0;
  for (const std::string& s : stops_) longest = std::max(longest, s.size());
  pending_.reserve(longest + 64);
}

size_t StopMatcher::partial_match_len() const {
  const std::string_view tail = std::string_view(pending_).substr(emitted_);
  size_t best = 0;
  for (const std::string& stop : stops_) {
    // Longest l < stop.size() with tail ending in stop[0, l); longer than best only.
    for (size_t l = std::min(tail.size(), stop.size() - 1); l > best; --l) {
      if (tail.substr(tail.size() - l) == std::string_view(stop).substr(0, l)) {
        best = l;
        break;
      }
    }
  }
  return best;
}

StopResult StopMatcher::feed(std::string_view bytes) {
  pending_.erase(0, emitted_);
  emitted_ = 0;
  if (stopped_) return StopResult{std::string_view(), true, -1};

  const size_t old_len = pending_.size();
  pending_.append(bytes);
  const std::string_view text(pending_);

  // The held-back text had no complete match, so a new match must end inside the new bytes.
  size_t hit_pos = std::string_view::npos;
  int hit_index = -1;
  for (size_t k = 0; k < stops_.size(); ++k) {
    const std::string& stop = stops_[k];
    const size_t from = old_len >= stop.size() ? old_len - stop.size() + 1 : 0;
    const size_t pos = text.find(stop, from);
    if (pos < hit_pos) {
      hit_pos = pos;
      hit_index = static_cast<int>(k);
    }
  }
  if (hit_index >= 0) {
    stopped_ = true;
    emitted_ = pending_.size();  // the stop and anything after it are dropped
    return StopResult{text.substr(0, hit_pos), true, hit_index};
  }

  // Keep back a tail that may grow into a stop string, then any unfinished UTF-8 character.
  // Everything before that can never be part of a match: a match starting there would make the
  // held tail longer.
  size_t safe = pending_.size() - partial_match_len();
  safe = utf8_complete_prefix_len(text.substr(0, safe));
  emitted_ = safe;
  return StopResult{text.substr(0, safe), false, -1};
}

StopResult StopMatcher::flush() {
  pending_.erase(0, emitted_);
  emitted_ = pending_.size();
  if (stopped_) return StopResult{std::string_view(), true, -1};
  return StopResult{std::string_view(pending_), false, -1};
}

void StopMatcher::reset() {
  pending_.clear();
  emitted_ = 0;
  stopped_ = false;
}

}  // namespace nexus
