// The chat-template Jinja subset against the renderings these families' templates are known to
// give (Hugging Face renders them with trim_blocks and lstrip_blocks), and its errors.
#include <gtest/gtest.h>

#include <string>

#include "serve/jinja.h"

namespace nexus::serve::jinja {
namespace {

std::string render(const std::string& tpl, const Value& ctx) {
  auto t = Template::parse(tpl);
  EXPECT_TRUE(t) << t.status().message();
  if (!t) return "";
  auto r = (*t)->render(ctx);
  EXPECT_TRUE(r) << r.status().message();
  return r ? *r : "";
}

Value chat(Value messages) {
  return {{"messages", std::move(messages)},
          {"add_generation_prompt", true},
          {"bos_token", "<s>"},
          {"eos_token", "</s>"}};
}

const Value kUserHi = Value::array({{{"role", "user"}, {"content", "Hi"}}});

TEST(Jinja, ChatMLAndQwen2DefaultSystem) {
  const std::string chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  EXPECT_EQ(render(chatml, chat(kUserHi)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::string qwen2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  EXPECT_EQ(render(qwen2, chat(kUserHi)),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi"
            "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Jinja, Llama3TrimsAndPrependsBos) {
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
      "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
      "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  Value ctx = chat(Value::array({{{"role", "system"}, {"content", " Be brief. "}},
                                 {{"role", "user"}, {"content", "Hi\n"}}}));
  ctx["bos_token"] = "<|begin_of_text|>";
  EXPECT_EQ(render(llama3, ctx),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Jinja, Llama2FoldsTheSystemMessageAndChecksAlternation) {
  const std::string llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
      "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
      "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
      "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
      "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
      "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
      "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
      "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
      "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
      "eos_token }}{% endif %}{% endfor %}";
  const Value msgs = Value::array({{{"role", "system"}, {"content", "S"}},
                                   {{"role", "user"}, {"content", "Hi"}},
                                   {{"role", "assistant"}, {"content", "Hello"}},
                                   {{"role", "user"}, {"content", " Bye "}}});
  EXPECT_EQ(render(llama2, chat(msgs)),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
  auto t = Template::parse(llama2);
  ASSERT_TRUE(t);
  auto r = (*t)->render(chat(Value::array({{{"role", "assistant"}, {"content", "x"}}})));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("roles must alternate"), std::string::npos);
}

TEST(Jinja, ZephyrWithTrimBlocksAndLstripBlocks) {
  const std::string zephyr =
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
      "{{ '<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
      "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n"
      "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
      "{% endfor %}";
  EXPECT_EQ(render(zephyr, chat(Value::array({{{"role", "system"}, {"content", "S"}},
                                              {{"role", "user"}, {"content", "Hi"}}}))),
            "<|system|>\nS</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
}

TEST(Jinja, ExpressionsFiltersTestsAndNamespaces) {
  const Value ctx = {{"xs", Value::array({1, 2, 3})}, {"s", "  Hello  "}, {"d", {{"a", 1}}}};
  EXPECT_EQ(render("{{ xs | length }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[::-1] }}", ctx), "33[2, 3][3, 2, 1]");
  EXPECT_EQ(render("{{ s.strip() | upper }}|{{ s | trim }}|{{ 'a' ~ 1 ~ none }}", ctx),
            "HELLO|Hello|a1None");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 1 if xs else 2 }} {{ 'x' in 'yxz' }}", ctx),
            "3 2 1 True");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}", ctx), "a=1");
  EXPECT_EQ(render("{{ u is defined }} {{ s is string }} {{ d is mapping }} {{ u | default('z') }}", ctx),
            "False True True z");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in xs if x > 1 %}{% set ns.n = ns.n + x %}"
                   "{% endfor %}{{ ns.n }}",
                   ctx),
            "5");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}", ctx), "empty");
  EXPECT_EQ(render("a  {#- gone -#}  b {{- ' c ' -}} d", ctx), "ab c d");
  EXPECT_EQ(render("{{ {'k': [1, 'two']} | tojson }}", ctx), "{\"k\":[1,\"two\"]}");
}

// Macros as tool-calling templates use them: defaults, keyword arguments, a loop's calls, and
// whitespace control inside and around the definition.
TEST(Jinja, Macros) {
  const Value ctx = chat(Value::array({{{"role", "user"}, {"content", "Hi"}},
                                       {{"role", "assistant"}, {"content", "Yo"}}}));
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy') }}",
                   ctx),
            "Hi Ann! Hi Bo? Hi Cy!");
  EXPECT_EQ(render("{%- macro item(m) -%}[{{ m.role }}:{{ m.content }}]{%- endmacro -%}\n"
                   "{%- for m in messages %}{{ item(m) }}{% endfor %}",
                   ctx),
            "[user:Hi][assistant:Yo]");
  // The macro's parameters do not leak out; an unbound one is undefined.
  EXPECT_EQ(render("{% macro f(x, y) %}{{ x }}{{ y is defined }}{% endmacro %}{{ f(1) }}{{ x is defined }}",
                   ctx),
            "1FalseFalse");
  auto t = Template::parse("{% macro f(x) %}{{ x }}{% endmacro %}{{ f(1, 2) }}");
  ASSERT_TRUE(t);
  auto r = (*t)->render(ctx);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("takes 1 arguments, got 2"), std::string::npos);
  t = Template::parse("{% macro f(x) %}{{ x }}{% endmacro %}{{ f(z=2) }}");
  ASSERT_TRUE(t);
  r = (*t)->render(ctx);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("no parameter z"), std::string::npos);
}

TEST(Jinja, ErrorsNameTheProblem) {
  EXPECT_FALSE(Template::parse("{% if x %}never closed"));
  EXPECT_FALSE(Template::parse("{{ 'unterminated }}"));
  EXPECT_FALSE(Template::parse("{% include 'other.jinja' %}"));
  EXPECT_FALSE(Template::parse("{% macro m() %}never closed"));
  EXPECT_FALSE(Template::parse("{{ x"));
  auto t = Template::parse("{{ nothing() }}");
  ASSERT_TRUE(t);
  auto r = (*t)->render(Value::object());
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("unknown function nothing"), std::string::npos);
}

}  // namespace
}  // namespace nexus::serve::jinja
