// Unicode lookups over the generated tables, UTF-8 coding, and NFD/NFC (UAX #15, with the Hangul
// syllable arithmetic done in code since the tables leave Hangul out).
#include "tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>

namespace nexus::tok {

extern const uint32_t kCategoryRuns[];
extern const size_t kCategoryRunsSize;
extern const int32_t kLowerRanges[];
extern const size_t kLowerRangesSize;
extern const uint32_t kCombiningRuns[];
extern const size_t kCombiningRunsSize;
extern const uint32_t kDecompositions[];
extern const size_t kDecompositionsSize;

namespace {

// Hangul syllable constants (Unicode chapter 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

// The category of every BMP code point, one byte each (64 KiB), built once from the runs.
const std::vector<uint8_t>& bmp_categories() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(0x10000);
    for (size_t i = 0; i < kCategoryRunsSize; ++i) {
      const uint32_t start = kCategoryRuns[i] >> 5;
      if (start >= 0x10000) break;
      const uint32_t end = i + 1 < kCategoryRunsSize
                               ? std::min<uint32_t>(kCategoryRuns[i + 1] >> 5, 0x10000)
                               : 0x10000;
      std::fill(t.begin() + start, t.begin() + end, static_cast<uint8_t>(kCategoryRuns[i] & 31));
    }
    return t;
  }();
  return table;
}

struct Decomposition {
  char32_t first = 0, second = 0;
};

const std::unordered_map<char32_t, Decomposition>& decomposition_map() {
  static const std::unordered_map<char32_t, Decomposition> map = [] {
    std::unordered_map<char32_t, Decomposition> m;
    for (size_t i = 0; i + 2 < kDecompositionsSize; i += 3)
      m[kDecompositions[i] >> 1] = {kDecompositions[i + 1], kDecompositions[i + 2]};
    return m;
  }();
  return map;
}

// Primary composites keyed by (first << 21 | second).
const std::unordered_map<uint64_t, char32_t>& composition_map() {
  static const std::unordered_map<uint64_t, char32_t> map = [] {
    std::unordered_map<uint64_t, char32_t> m;
    for (size_t i = 0; i + 2 < kDecompositionsSize; i += 3)
      if (kDecompositions[i] & 1)
        m[(uint64_t{kDecompositions[i + 1]} << 21) | kDecompositions[i + 2]] =
            kDecompositions[i] >> 1;
    return m;
  }();
  return map;
}

char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& m = composition_map();
  auto it = m.find((uint64_t{a} << 21) | b);
  return it == m.end() ? 0 : it->second;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
}

// Canonical ordering: stable sort of each run of non-starters by combining class.
void canonical_order(std::vector<char32_t>* cps) {
  auto& v = *cps;
  for (size_t i = 1; i < v.size(); ++i) {
    const uint8_t cc = combining_class(v[i]);
    if (cc == 0) continue;
    size_t j = i;
    while (j > 0 && combining_class(v[j - 1]) > cc) {
      std::swap(v[j - 1], v[j]);
      --j;
    }
  }
}

std::vector<char32_t> nfd_cps(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) decompose(decode_utf8(s, &pos), &out);
  canonical_order(&out);
  return out;
}

}  // namespace

Gc category(char32_t cp) {
  if (cp < 0x10000) return static_cast<Gc>(bmp_categories()[cp]);
  if (cp >= 0x110000) return Gc::kCn;
  const uint32_t key = (static_cast<uint32_t>(cp) << 5) | 31;
  const uint32_t* end = kCategoryRuns + kCategoryRunsSize;
  const uint32_t* it = std::upper_bound(kCategoryRuns, end, key);
  return static_cast<Gc>(it[-1] & 31);
}

bool is_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

char32_t to_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp == 0x130) return 'i';  // the only code point whose full lowercase has two code points
  // Entries are (start, count << 1 | stride - 1, delta); find the last start <= cp.
  size_t lo = 0, hi = kLowerRangesSize / 3;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (static_cast<char32_t>(kLowerRanges[mid * 3]) <= cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return cp;
  const int32_t* r = kLowerRanges + (lo - 1) * 3;
  const char32_t start = r[0], count = r[1] >> 1, stride = (r[1] & 1) + 1;
  const char32_t k = cp - start;
  if (k % stride != 0 || k / stride >= count) return cp;
  return static_cast<char32_t>(static_cast<int64_t>(cp) + r[2]);
}

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300 || cp >= 0x110000) return 0;
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xFF;
  const uint32_t* end = kCombiningRuns + kCombiningRunsSize;
  const uint32_t* it = std::upper_bound(kCombiningRuns, end, key);
  return static_cast<uint8_t>(it[-1] & 0xFF);
}

char32_t decode_utf8(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *pos;
  const size_t avail = s.size() - *pos;
  const unsigned char c = p[0];
  const size_t len = utf8_len(c);
  char32_t cp = c;
  bool ok = len == 1 ? c < 0x80 : len <= avail;
  if (ok && len > 1) {
    cp = c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len && ok; ++i) {
      ok = (p[i] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
  }
  if (!ok) {
    *pos += 1;
    return kInvalidBase + c;
  }
  *pos += len;
  return cp;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x110000) {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(cp - kInvalidBase));
  }
}

std::string to_utf8(char32_t cp) {
  std::string s;
  append_utf8(cp, &s);
  return s;
}

CodePoints decode_all(std::string_view s) {
  CodePoints r;
  r.cps.reserve(s.size());
  r.offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    r.offsets.push_back(static_cast<uint32_t>(pos));
    r.cps.push_back(decode_utf8(s, &pos));
  }
  r.offsets.push_back(static_cast<uint32_t>(s.size()));
  return r;
}

void decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xC0 || cp >= 0x110000) {
    out->push_back(cp);
    return;
  }
  const auto& m = decomposition_map();
  auto it = m.find(cp);
  if (it == m.end()) {
    out->push_back(cp);
    return;
  }
  decompose(it->second.first, out);
  if (it->second.second != 0) decompose(it->second.second, out);
}

std::string nfd(std::string_view s) {
  if (is_ascii(s)) return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : nfd_cps(s)) append_utf8(cp, &out);
  return out;
}

std::string nfc(std::string_view s) {
  if (is_ascii(s)) return std::string(s);
  const std::vector<char32_t> d = nfd_cps(s);
  std::vector<char32_t> out;
  out.reserve(d.size());
  size_t starter = SIZE_MAX;  // index in `out` of the last starter
  uint8_t last_cc = 0;        // combining class of the last character appended after it
  for (char32_t c : d) {
    const uint8_t cc = combining_class(c);
    if (starter != SIZE_MAX) {
      const bool adjacent = out.size() == starter + 1;
      // c is blocked from the starter when something in between has class 0 or >= its own.
      if (adjacent || (last_cc != 0 && last_cc < cc)) {
        if (char32_t composite = compose(out[starter], c)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = out.size();
    last_cc = cc;
    out.push_back(c);
  }
  std::string r;
  r.reserve(s.size());
  for (char32_t cp : out) append_utf8(cp, &r);
  return r;
}

}  // namespace nexus::tok
