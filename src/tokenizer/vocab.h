// The vocabulary shared by every tokenizer model: token strings, scores, types and a string index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nexus/tokenizer.h"

namespace nexus::tok {

class Vocab {
 public:
  Vocab() = default;
  Vocab(const Vocab&) = delete;  // the index points into `text`
  Vocab& operator=(const Vocab&) = delete;

  // Replaces the contents; `scores` and `types` may be empty (0 and kNormal). Builds the index;
  // on duplicate strings the lowest id wins.
  void assign(std::vector<std::string> text, std::vector<float> scores,
              std::vector<TokenType> types);

  size_t size() const { return text_.size(); }
  const std::string& text(int32_t id) const { return text_[id]; }
  float score(int32_t id) const { return scores_[id]; }
  TokenType type(int32_t id) const { return types_[id]; }
  void set_type(int32_t id, TokenType t) { types_[id] = t; }
  // Id of the token whose string is `s`, or -1.
  int32_t find(std::string_view s) const {
    auto it = index_.find(s);
    return it == index_.end() ? -1 : it->second;
  }
  size_t max_token_len() const { return max_len_; }

 private:
  std::vector<std::string> text_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, int32_t> index_;
  size_t max_len_ = 0;
};

// A token model turns one run of plain text (no special tokens inside) into ids.
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual void encode(std::string_view text, std::vector<int32_t>* out) const = 0;
};

}  // namespace nexus::tok
