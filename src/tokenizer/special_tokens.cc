// Special-token splitting: one left-to-right scan, a first-byte bucket lookup per position.
#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace nexus::tok {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

void SpecialMatcher::add(int32_t id, std::string text, bool always, bool lstrip, bool rstrip) {
  if (text.empty()) return;
  auto& bucket = by_first_[static_cast<unsigned char>(text[0])];
  for (Entry& e : bucket) {
    if (e.text != text) continue;
    // Registered twice (e.g. control in the vocab and added in tokenizer.json): the lowest id wins.
    if (id < e.id) e = {std::move(text), id, always, lstrip, rstrip};
    return;
  }
  bucket.push_back({std::move(text), id, always, lstrip, rstrip});
  std::stable_sort(bucket.begin(), bucket.end(),
                   [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  ++n_;
}

void SpecialMatcher::split(std::string_view text, bool parse_special,
                           std::vector<Fragment>* out) const {
  const uint32_t n = static_cast<uint32_t>(text.size());
  uint32_t plain = 0;  // start of the pending plain-text fragment
  auto flush = [&](uint32_t end) {
    if (end > plain) out->push_back({-1, plain, end});
  };
  for (uint32_t i = 0; i < n;) {
    const Entry* hit = nullptr;
    for (const Entry& e : by_first_[static_cast<unsigned char>(text[i])]) {
      if (!parse_special && !e.always) continue;
      if (text.compare(i, e.text.size(), e.text) == 0) {
        hit = &e;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    uint32_t end = i;
    if (hit->lstrip)
      while (end > plain && is_space(text[end - 1])) --end;
    flush(end);
    out->push_back({hit->id, i, static_cast<uint32_t>(i + hit->text.size())});
    i += static_cast<uint32_t>(hit->text.size());
    if (hit->rstrip)
      while (i < n && is_space(text[i])) ++i;
    plain = i;
  }
  flush(n);
}

}  // namespace nexus::tok
