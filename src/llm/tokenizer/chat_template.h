// Chat templates (tokenizer_config.json "chat_template"): a Jinja subset
// large enough for the Llama-3.x, Qwen2.5/Qwen3, DeepSeek-V3 and
// Mistral-style templates, rendered the way transformers' apply_chat_template
// does (trim_blocks and lstrip_blocks on, `-`/`+` whitespace control).
//
// Supported: text, {{ }}, {# #}, {% if/elif/else %}, {% for x in xs %} and
// {% for a, b in pairs %} with loop.index/index0/revindex/revindex0/first/
// last/length/previtem/nextitem and an optional {% else %} (rendered when
// nothing was iterated), {% set x = e %} and {% set ns.x = e %},
// namespace(...); literals (string with Python escapes \n \t \\ \' \" \xhh
// \uXXXX \UXXXXXXXX octal, int, list, dict, true/false/none);
// + - * // % ~, comparisons, in / not in, and/or/not (short-circuit),
// `a if c else b`; subscripts, slices ([::-1]), attributes; string methods
// startswith/endswith/split/strip/lstrip/rstrip/upper/lower/replace/title,
// mapping methods get/items/keys/values; filters trim/length/count/upper/
// lower/tojson/string/int/first/last/reverse/join/default/list/items/
// capitalize/title; tests defined/undefined/none/string/number/integer/
// boolean/true/false/mapping/sequence/iterable; raise_exception(msg).
// Anything else is a kNotSupported error that names the construct.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf2pte::llm {

struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant", "tool"
  std::string content;
  std::optional<std::string> reasoning_content = std::nullopt;  ///< Qwen3-style thinking of an assistant turn
};

/// Renders `tmpl` with `messages`, `add_generation_prompt`, `bos_token` and
/// `eos_token` bound. `extra_vars_json`, when not empty, is a JSON object whose
/// members become further template variables (e.g. {"enable_thinking": false},
/// {"tools": [...]}); messages may also be given there as "messages".
Result<std::string> render_chat_template(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, std::string_view extra_vars_json = {});

/// Builds the `extra_vars_json` object of render_chat_template from command-line
/// assignments `NAME=VALUE` (`generate --template-var`), as transformers'
/// apply_chat_template(..., **kwargs) passes keyword arguments to the template.
/// VALUE is taken as JSON when it parses as JSON (`false`, `3`, `"s"`, `{"a": 1}`),
/// otherwise as the plain string. A later assignment of a name replaces an earlier
/// one. `messages` and `add_generation_prompt` are refused (the caller sets them).
/// Errors read `... (--template-var NAME=VALUE)`.
Result<std::string> template_vars_json(const std::vector<std::string>& assignments);

}  // namespace hf2pte::llm
