// Unicode support for the tokenizers: UTF-8 decoding that keeps invalid bytes, general categories,
// White_Space, simple lowercase, and NFD/NFC normalization (tables in unicode_tables_*.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nexus::tok {

// Unicode general categories; the order matches scripts/gen_unicode_tables.py.
enum class Gc : uint8_t {
  kCn,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
};

constexpr uint32_t gc_bit(Gc g) { return 1u << static_cast<unsigned>(g); }
constexpr uint32_t kGcLetter =
    gc_bit(Gc::kLu) | gc_bit(Gc::kLl) | gc_bit(Gc::kLt) | gc_bit(Gc::kLm) | gc_bit(Gc::kLo);
constexpr uint32_t kGcMark = gc_bit(Gc::kMn) | gc_bit(Gc::kMc) | gc_bit(Gc::kMe);
constexpr uint32_t kGcNumber = gc_bit(Gc::kNd) | gc_bit(Gc::kNl) | gc_bit(Gc::kNo);
constexpr uint32_t kGcPunct = gc_bit(Gc::kPc) | gc_bit(Gc::kPd) | gc_bit(Gc::kPs) |
                              gc_bit(Gc::kPe) | gc_bit(Gc::kPi) | gc_bit(Gc::kPf) | gc_bit(Gc::kPo);
constexpr uint32_t kGcSymbol =
    gc_bit(Gc::kSm) | gc_bit(Gc::kSc) | gc_bit(Gc::kSk) | gc_bit(Gc::kSo);
constexpr uint32_t kGcSeparator = gc_bit(Gc::kZs) | gc_bit(Gc::kZl) | gc_bit(Gc::kZp);
// What \w matches: letters, marks, decimal digits and connector punctuation.
constexpr uint32_t kGcWord = kGcLetter | kGcMark | gc_bit(Gc::kNd) | gc_bit(Gc::kPc);
constexpr uint32_t kGcOther =
    gc_bit(Gc::kCn) | gc_bit(Gc::kCc) | gc_bit(Gc::kCf) | gc_bit(Gc::kCs) | gc_bit(Gc::kCo);

// An invalid UTF-8 byte b decodes to kInvalidBase + b so that it survives a decode/encode round
// trip; such values have category Cn and no other property.
constexpr char32_t kInvalidBase = 0x110000;

// General category of a code point (Cn for unassigned and for invalid-byte values).
Gc category(char32_t cp);
inline bool in_gc(char32_t cp, uint32_t mask) { return (mask & gc_bit(category(cp))) != 0; }
// The White_Space property (what \s matches in Oniguruma and Rust).
bool is_whitespace(char32_t cp);
// Simple (one code point) lowercase mapping.
char32_t to_lower(char32_t cp);
// Canonical combining class.
uint8_t combining_class(char32_t cp);

// Length of the UTF-8 sequence introduced by lead byte `c` (1 for continuation/invalid bytes).
inline size_t utf8_len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
}
// Decodes the code point at s[*pos] and advances *pos; malformed input yields kInvalidBase + byte
// and advances by one byte.
char32_t decode_utf8(std::string_view s, size_t* pos);
// Appends the UTF-8 encoding of `cp` (or the raw byte for an invalid-byte value).
void append_utf8(char32_t cp, std::string* out);
std::string to_utf8(char32_t cp);

// Text split into code points, with the byte offset of each (offsets.back() == byte size).
struct CodePoints {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
};
CodePoints decode_all(std::string_view s);

// Canonical decomposition (NFD) and canonical composition (NFC) of UTF-8 text; invalid bytes pass
// through untouched. Pure-ASCII input is returned unchanged without table lookups.
std::string nfd(std::string_view s);
std::string nfc(std::string_view s);
// Appends the full canonical decomposition of `cp` (Hangul included) to `out`.
void decompose(char32_t cp, std::vector<char32_t>* out);

}  // namespace nexus::tok
