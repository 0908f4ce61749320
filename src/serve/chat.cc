// The chat formats' renderings, as the families' templates write them (the Llama 3 template trims
// each message; Llama 2 folds the system message into the first user turn).
#include "nexus/serve/chat.h"

namespace nexus::serve {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

ChatFormat detect_chat_format(std::string_view jinja) {
  if (jinja.find("<|im_start|>") != std::string_view::npos) return ChatFormat::kChatML;
  if (jinja.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::kLlama3;
  if (jinja.find("[INST]") != std::string_view::npos) return ChatFormat::kLlama2;
  if (jinja.find("<|user|>") != std::string_view::npos) return ChatFormat::kZephyr;
  return ChatFormat::kChatML;
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kLlama2:
      return "llama2";
    case ChatFormat::kLlama3:
      return "llama3";
    case ChatFormat::kZephyr:
      return "zephyr";
    default:
      return "chatml";
  }
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos,
                        const std::string& eos) {
  std::string out;
  switch (f) {
    case ChatFormat::kChatML:
      for (const ChatMessage& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatFormat::kLlama3:
      out = bos;
      for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFormat::kZephyr:
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + eos + "\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case ChatFormat::kLlama2: {
      std::string system;
      bool first_user = true;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system = m.content;
        } else if (m.role == "assistant") {
          out += " " + trim(m.content) + " " + eos;
        } else {
          std::string content = trim(m.content);
          if (first_user && !system.empty())
            content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
          first_user = false;
          out += bos + "[INST] " + content + " [/INST]";
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace nexus::serve
