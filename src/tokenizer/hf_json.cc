// Shared helpers of the tokenizer.json readers.
#include "tokenizer/hf_json.h"

#include <string_view>

namespace nexus::tok::hf_json {

void bad(const std::string& what) { throw JsonError{what}; }

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& j, const char* key, bool fallback) {
  const json* v = member(j, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

std::string type_of(const json& j) {
  const json* t = member(j, "type");
  return t != nullptr && t->is_string() ? t->get<std::string>() : "";
}

std::string token_content(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (const json* c = member(j, "content"); c != nullptr && c->is_string())
    return c->get<std::string>();
  return "";
}

void collect_pre(const json& p, std::vector<std::string>* patterns, bool* byte_level,
                 bool* prefix_space) {
  const std::string t = type_of(p);
  if (t == "Sequence") {
    const json* list = member(p, "pretokenizers");
    if (list == nullptr || !list->is_array()) bad("pre_tokenizer Sequence without pretokenizers");
    for (const json& item : *list) collect_pre(item, patterns, byte_level, prefix_space);
  } else if (t == "ByteLevel") {
    *byte_level = true;
    *prefix_space = flag(p, "add_prefix_space", false);
    if (flag(p, "use_regex", true))
      patterns->push_back(
          R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re");
  } else if (t == "Split") {
    const json* pat = member(p, "pattern");
    const json* re = pat != nullptr ? member(*pat, "Regex") : nullptr;
    const json* str = pat != nullptr ? member(*pat, "String") : nullptr;
    if (member(p, "behavior") == nullptr || (*member(p, "behavior")) != "Isolated" ||
        flag(p, "invert", false))
      bad("only Split pre-tokenizers with behavior Isolated are supported");
    if (re != nullptr && re->is_string()) {
      patterns->push_back(re->get<std::string>());
    } else if (str != nullptr && str->is_string()) {
      std::string escaped;  // a literal string as a regex
      for (char c : str->get<std::string>()) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
        escaped += c;
      }
      patterns->push_back(escaped);
    } else {
      bad("Split pre-tokenizer without a pattern");
    }
  } else if (t == "Digits") {
    patterns->push_back(flag(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else {
    bad("unsupported pre_tokenizer '" + t + "'");
  }
}

}  // namespace nexus::tok::hf_json
