// Chat templates (tokenizer_config.json "chat_template"): a Jinja subset
// large enough for the common Llama/Mistral-style templates: text, {{ }},
// {% if/elif/else %}, {% for x in xs %} with loop.index0/index/first/last,
// {% set %}, whitespace control (-), string/int literals, + and ~, comparisons,
// and/or/not, subscripts and attributes, filters trim/length/upper/lower,
// tests `is defined` / `is none`, and raise_exception(msg). Anything else is
// a kNotSupported error naming the construct.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf2pte::llm {

struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant"
  std::string content;
};

/// Renders `tmpl` with `messages`, `add_generation_prompt`, `bos_token` and `eos_token` bound.
Result<std::string> render_chat_template(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token);

}  // namespace hf2pte::llm
