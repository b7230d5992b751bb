#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/tokenizer/chat_template.h"

namespace hf2pte::llm {
namespace {

// Llama 3.1's template as shipped in its tokenizer_config.json.
const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

TEST(ChatTemplate, Llama3) {
  auto r = render_chat_template(kLlama3, {{"system", "Be brief."}, {"user", "  Hi!  "}}, true, "<|begin_of_text|>", "");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, IfElifElseWhitespaceControlAndErrors) {
  const char* t =
      "{%- for m in messages -%}\n  {%- if m.role == 'user' -%}[U:{{ m.content }}]"
      "{%- elif m.role == 'assistant' and not loop.first -%}[A:{{ m.content ~ eos_token }}]"
      "{%- else -%}{{ raise_exception('roles must alternate') }}{%- endif -%}\n{%- endfor -%}"
      "{% if messages | length > 1 %}!{% endif %}{# comment #}";
  auto r = render_chat_template(t, {{"user", "a"}, {"assistant", "b"}}, false, "<s>", "</s>");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "[U:a][A:b</s>]!");
  auto bad = render_chat_template(t, {{"assistant", "b"}}, false, "<s>", "</s>");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("roles must alternate"), std::string::npos);
  auto unsupported = render_chat_template("{{ messages | tojson }}", {}, false, "", "");
  ASSERT_FALSE(unsupported.is_ok());
  EXPECT_EQ(unsupported.status().code(), ErrorCode::kNotSupported);
}

}  // namespace
}  // namespace hf2pte::llm
