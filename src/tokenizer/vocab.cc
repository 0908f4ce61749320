// Vocabulary storage and the string -> id index.
#include "tokenizer/vocab.h"

#include <algorithm>

namespace nexus::tok {

void Vocab::assign(std::vector<std::string> text, std::vector<float> scores,
                   std::vector<TokenType> types) {
  text_ = std::move(text);
  scores_ = std::move(scores);
  types_ = std::move(types);
  scores_.resize(text_.size(), 0.0f);
  types_.resize(text_.size(), TokenType::kNormal);
  index_.clear();
  index_.reserve(text_.size());
  max_len_ = 0;
  // The views point into text_'s strings, which stay put until the next assign().
  for (size_t i = 0; i < text_.size(); ++i) {
    index_.emplace(std::string_view(text_[i]), static_cast<int32_t>(i));
    max_len_ = std::max(max_len_, text_[i].size());
  }
}

}  // namespace nexus::tok
