// The PyTorch reference logits of the golden model fixtures (tests/fixtures/models/NAME.logits.bin,
// written by scripts/gen_model_fixtures.py), shared by the golden tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "nexus/status.h"

namespace nexus::test {

// NAME.logits.bin: "NXLG", int32 version 1, n_vocab, n_seq, len[n_seq], the tokens of each
// sequence, then float32 logits[sum(len)][n_vocab] in the same order (little-endian).
struct Reference {
  int32_t n_vocab = 0;
  std::vector<std::vector<int32_t>> tokens;  // per sequence
  std::vector<std::vector<float>> logits;    // per sequence: len rows of n_vocab
  float max_abs = 0;                         // max |logit| over everything

  std::span<const float> row(int seq, int pos) const {
    return std::span<const float>(logits[seq]).subspan(static_cast<size_t>(pos) * n_vocab, n_vocab);
  }
};

inline Result<Reference> read_reference(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open (run scripts/gen_model_fixtures.py)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[4];
  int32_t head[3];  // version, n_vocab, n_seq
  if (!take(magic, 4) || std::memcmp(magic, "NXLG", 4) != 0 || !take(head, sizeof(head)) ||
      head[0] != 1 || head[1] <= 0 || head[2] <= 0 || head[2] > 64)
    return Status::error(path + ": not an NXLG v1 logits file");
  Reference ref;
  ref.n_vocab = head[1];
  std::vector<int32_t> lens(head[2]);
  if (!take(lens.data(), lens.size() * 4)) return Status::error(path + ": truncated header");
  for (int32_t len : lens) {
    if (len <= 0 || len > 4096) return Status::error(path + ": bad sequence length");
    ref.tokens.emplace_back(len);
    if (!take(ref.tokens.back().data(), len * 4u)) return Status::error(path + ": truncated");
  }
  for (int32_t len : lens) {
    ref.logits.emplace_back(static_cast<size_t>(len) * ref.n_vocab);
    if (!take(ref.logits.back().data(), ref.logits.back().size() * 4))
      return Status::error(path + ": truncated logits");
    for (float v : ref.logits.back()) ref.max_abs = std::max(ref.max_abs, std::fabs(v));
  }
  if (at != bytes.size()) return Status::error(path + ": trailing bytes");
  return ref;
}

}  // namespace nexus::test
