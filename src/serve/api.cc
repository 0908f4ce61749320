// Field-by-field checks of the OpenAI request bodies.
#include "serve/api.h"

#include <cmath>
#include <limits>
#include <random>

namespace nexus::serve {
namespace {

[[noreturn]] void bad(const std::string& message) { throw ApiError(400, message); }

const char* type_name(const json& v) {
  return v.is_null() ? "null" : v.is_boolean() ? "a boolean" : v.is_number() ? "a number"
       : v.is_string() ? "a string" : v.is_array() ? "an array" : "an object";
}

double number(const json& body, const char* key, double def, double lo, double hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_number()) bad(std::string("'") + key + "' must be a number, got " + type_name(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    bad(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() +
        "], got " + it->dump());
  return v;
}

int64_t integer(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_number_integer())
    bad(std::string("'") + key + "' must be an integer, got " +
        (it->is_number() ? it->dump() : type_name(*it)));
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(std::string("'") + key + "' must be at most " + std::to_string(hi) + ", got " + it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    bad(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "], got " + it->dump());
  return v;
}

}  // namespace

bool get_bool(const json& body, const char* key, bool def) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_boolean()) bad(std::string("'") + key + "' must be a boolean, got " + type_name(*it));
  return it->get<bool>();
}

namespace {

std::vector<int32_t> id_list(const json& a, const char* what) {
  std::vector<int32_t> ids;
  for (const json& v : a) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(std::string(what) + " must hold token ids (non-negative integers), got " + v.dump());
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

}  // namespace

json error_body(const std::string& message, const std::string& type, const std::string& code) {
  return {{"error", {{"message", message}, {"type", type}, {"code", code.empty() ? json() : json(code)}}}};
}

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // syntax errors, and numbers beyond double's range
    bad(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(std::string("the body must be a JSON object, got ") + type_name(j));
  return j;
}

Sampling parse_sampling(const json& body, int64_t default_max_tokens) {
  Sampling s;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) bad(std::string("'model' must be a string, got ") + type_name(*it));
    s.model = it->get<std::string>();
  }
  const int64_t kMax = int64_t{1} << 31;
  s.max_tokens = integer(body, "max_tokens", default_max_tokens, 0, kMax);
  s.max_tokens = integer(body, "max_completion_tokens", s.max_tokens, 0, kMax);
  SamplerParams& p = s.sampler;
  p.temperature = static_cast<float>(number(body, "temperature", 1.0, 0.0, 2.0));
  p.top_p = static_cast<float>(number(body, "top_p", 1.0, 0.0, 1.0));
  if (p.top_p == 0.0f) bad("'top_p' must be greater than 0");
  p.min_p = static_cast<float>(number(body, "min_p", 0.0, 0.0, 1.0));
  p.top_k = static_cast<int>(integer(body, "top_k", 0, 0, 1 << 20));
  p.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  p.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  p.repeat_penalty = 1.0f;
  p.repeat_last_n = 4096;  // OpenAI's penalties count every token so far
  const int64_t seed = integer(body, "seed", -1, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max());
  p.seed = seed == -1 ? std::random_device{}() : static_cast<uint64_t>(seed);
  s.n = static_cast<int>(integer(body, "n", 1, 1, 16));
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      s.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 4) bad("'stop' holds at most 4 strings, got " + std::to_string(it->size()));
      for (const json& v : *it) {
        if (!v.is_string()) bad("'stop' must hold strings, got " + std::string(type_name(v)));
        s.stop.push_back(v.get<std::string>());
      }
    } else {
      bad(std::string("'stop' must be a string or an array of strings, got ") + type_name(*it));
    }
  }
  s.stream = get_bool(body, "stream", false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad("'stream_options' must be an object");
    if (!s.stream) bad("'stream_options' is only allowed with 'stream': true");
    s.include_usage = get_bool(*it, "include_usage", false);
  }
  return s;
}

Prompts parse_prompts(const json& body) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) bad("'prompt' is required");
  Prompts p;
  const json& v = *it;
  if (v.is_string()) {
    p.texts.push_back(v.get<std::string>());
    p.is_text.push_back(true);
  } else if (v.is_array() && !v.empty() && v[0].is_number()) {
    p.ids.push_back(id_list(v, "'prompt'"));
    p.is_text.push_back(false);
  } else if (v.is_array() && !v.empty()) {
    for (const json& e : v) {
      if (e.is_string()) {
        p.texts.push_back(e.get<std::string>());
        p.is_text.push_back(true);
      } else if (e.is_array()) {
        p.ids.push_back(id_list(e, "'prompt'"));
        p.is_text.push_back(false);
      } else {
        bad(std::string("'prompt' must be a string, an array of token ids, or an array of those; "
                        "got an element that is ") + type_name(e));
      }
    }
  } else {
    bad(std::string("'prompt' must be a string, an array of token ids, or an array of those; got ") +
        (v.is_array() ? "an empty array" : type_name(v)));
  }
  return p;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    bad("'messages' must be a non-empty array");
  std::vector<ChatMessage> out;
  for (const json& m : *it) {
    if (!m.is_object()) bad("each message must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad("each message needs a string 'role'");
    ChatMessage cm{role->get<std::string>(), ""};
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      // an assistant turn with tool calls only: empty content
    } else if (content->is_string()) {
      cm.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          bad("message content parts must be {\"type\": \"text\", \"text\": ...}");
        cm.content += part["text"].get<std::string>();
      }
    } else {
      bad(std::string("message 'content' must be a string or an array of text parts, got ") +
          type_name(*content));
    }
    out.push_back(std::move(cm));
  }
  return out;
}

}  // namespace nexus::serve
