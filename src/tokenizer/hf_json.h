// Helpers shared by the readers of Hugging Face tokenizer.json files (Tokenizer::from_hf_json and
// the GGUF vocabulary import): tolerant member access, and the BPE pre-tokenizer's regexes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nexus::tok::hf_json {

using nlohmann::json;

// What bad() throws; callers turn it into a Status naming the file.
struct JsonError {
  std::string what;
};

[[noreturn]] void bad(const std::string& what);
// The member `key` of an object, or null when `j` is no object or the member is absent or null.
const json* member(const json& j, const char* key);
// A boolean member, or `fallback`.
bool flag(const json& j, const char* key, bool fallback);
// The "type" string of a component, or "".
std::string type_of(const json& j);
// A token named in tokenizer_config.json: a string or {"content": ...}; "" otherwise.
std::string token_content(const json& j);
// Collects the regexes of a BPE pre-tokenizer (Sequence, ByteLevel, Split, Digits), whether it is
// byte-level and whether ByteLevel adds a prefix space; bad() on anything else.
void collect_pre(const json& p, std::vector<std::string>* patterns, bool* byte_level,
                 bool* prefix_space);

}  // namespace nexus::tok::hf_json
