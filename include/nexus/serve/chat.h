// Built-in chat formats, for models whose tokenizer.chat_template is absent or outside the Jinja
// subset the server interprets (serve/jinja.h): recognised by the markers each family's template
// writes; a model without a template, or with one not recognised, gets ChatML.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nexus::serve {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" (others are rendered by name)
  std::string content;
};

enum class ChatFormat { kChatML, kLlama2, kLlama3, kZephyr };

// The format `jinja` (tokenizer.chat_template; may be empty) writes: <|im_start|> ChatML
// (Qwen, SmolLM, ...), <|start_header_id|> Llama 3, [INST] Llama 2, <|user|> Zephyr; else ChatML.
ChatFormat detect_chat_format(std::string_view jinja);
const char* chat_format_name(ChatFormat f);

// The prompt text, ending with the assistant's turn opened when add_generation_prompt. `bos` and
// `eos` are the vocabulary's texts of those tokens (Llama 2 and 3 write them into the prompt).
// The result is tokenized with special tokens parsed and without adding BOS.
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos,
                        const std::string& eos);

}  // namespace nexus::serve
