// Pre-tokenizers for byte-level BPE: a list of regexes applied in turn, each splitting every piece
// into its matches and the gaps between them (Hugging Face "Split" with behavior "Isolated").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nexus/status.h"
#include "tokenizer/regex.h"

namespace nexus::tok {

// A half-open byte range of the input.
struct Piece {
  uint32_t begin = 0;
  uint32_t end = 0;
};

class PreTokenizer {
 public:
  // A configuration known by its tokenizer.ggml.pre name (gpt-2, llama-bpe, qwen2, deepseek-llm,
  // deepseek-coder, falcon, starcoder, refact, mpt, ...).
  static Result<PreTokenizer> from_name(std::string_view name);
  // Any list of patterns (e.g. from a tokenizer.json); `name` is what name() reports.
  static Result<PreTokenizer> from_patterns(std::string name, std::vector<std::string> patterns);
  // The known name whose patterns are exactly `patterns`, or "" when none is.
  static std::string identify(std::span<const std::string> patterns);
  // The known names, for error messages and docs.
  static std::vector<std::string> known_names();

  // Appends the pieces of `text`, in order; together they cover all of it.
  void split(std::string_view text, std::vector<Piece>* pieces) const;
  // The pieces as strings (tests, debugging).
  std::vector<std::string> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  // llama.cpp settings that come with some names: use a word as a whole when it is in the vocab
  // (Llama 3, Tekken), and add BOS by default.
  bool ignore_merges() const { return ignore_merges_; }
  bool add_bos() const { return add_bos_; }

 private:
  std::string name_;
  std::vector<Regex> regexes_;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
};

}  // namespace nexus::tok
