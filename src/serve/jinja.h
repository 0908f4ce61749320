// A Jinja subset for chat templates (tokenizer.chat_template): text, {{ expressions }},
// {% if/elif/else %}, {% for x in xs %} (with `loop` and an optional `if` filter),
// {% set x = ... %} (namespace attributes too), {% macro name(a, b=1) %}...{% endmacro %} and
// its calls, comments and whitespace control ({%- -%}),
// rendered as Hugging Face renders chat templates (trim_blocks and lstrip_blocks on).
// Expressions: literals (strings, numbers, true/false/none, lists, dicts), variables, .attr,
// [index], [a:b] slices, calls of the usual string and dict methods, filters (trim, length,
// upper, lower, tojson, string, default, first, last, join, list), tests (defined, none, string,
// number, mapping, iterable, sequence, true, false, even, odd), `in`, comparisons, and/or/not,
// + - * / // % ~, the conditional `a if c else b`, namespace(), raise_exception() and range().
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>

#include "nexus/status.h"

namespace nexus::serve::jinja {

using Value = nlohmann::ordered_json;

class Template {
 public:
  // Parses `source`; an error names the line and the problem.
  static Result<std::shared_ptr<const Template>> parse(std::string_view source);
  // Renders with `context`'s keys as variables; an error names the problem (an undefined
  // function, a type error, raise_exception's message).
  Result<std::string> render(const Value& context) const;

  struct Node;
  ~Template();

 private:
  Template();
  std::unique_ptr<Node> root_;
};

}  // namespace nexus::serve::jinja
