// The OpenAI request shapes the server accepts, checked field by field: each wrong type or value
// is an ApiError naming the field (HTTP 400), in OpenAI's error shape.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nexus/serve/chat.h"
#include "nexus/serve/engine.h"

namespace nexus::serve {

using json = nlohmann::json;

// An error answered as {"error": {"message", "type", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)),
        code(std::move(code)) {}
  int status;
  std::string type;
  std::string code;
};

json error_body(const std::string& message, const std::string& type, const std::string& code);

// body[key] as a boolean (`def` when absent or null); ApiError 400 naming the key otherwise.
bool get_bool(const json& body, const char* key, bool def);

// The body as a JSON object; ApiError 400 when it is not one.
json parse_body(const std::string& body);

// What /v1/completions and /v1/chat/completions share, parsed.
struct Sampling {
  SamplerParams sampler;
  int64_t max_tokens = -1;
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = -1;  // -1: no log-probabilities
  std::string model;      // as the client named it (empty: not given)
};

// Reads model, max_tokens (or max_completion_tokens), temperature, top_p, min_p, top_k, seed,
// n, stop, presence/frequency_penalty, stream and stream_options. `default_max_tokens` when absent
// (-1: until the end of text or context). Throws ApiError.
Sampling parse_sampling(const json& body, int64_t default_max_tokens);

// The prompts of a completion request: a string, a list of token ids, a list of strings, or a
// list of lists of ids. Strings are returned in `texts` (to tokenize), id lists in `ids`; the two
// keep their order in `order` (true: text). Throws ApiError.
struct Prompts {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  std::vector<bool> is_text;
};
Prompts parse_prompts(const json& body);

// The messages of a chat request (role and string content, or content as a list of text parts).
std::vector<ChatMessage> parse_messages(const json& body);

}  // namespace nexus::serve
