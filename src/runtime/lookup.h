// Prompt lookup, the draft-free speculation of `nexus run` and the server: the tokens that
// followed the most recent earlier occurrence of the last n tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace nexus {

// Up to `limit` tokens that followed the most recent earlier occurrence of tokens' last n (none
// when n <= 0, the n-gram has not occurred before, or limit <= 0).
inline std::vector<int32_t> lookup_draft(const std::vector<int32_t>& tokens, int64_t n,
                                         int64_t limit) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> draft;
  if (n <= 0 || len <= n || limit <= 0) return draft;
  const int32_t* t = tokens.data();
  for (int64_t start = len - n - 1; start >= 0; --start) {
    if (!std::equal(t + start, t + start + n, t + len - n)) continue;
    for (int64_t j = start + n; j < len && static_cast<int64_t>(draft.size()) < limit; ++j)
      draft.push_back(t[j]);
    break;
  }
  return draft;
}

}  // namespace nexus
