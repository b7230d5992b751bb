#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/tokenizer/chat_template.h"
#include "llm/tokenizer/tokenizer.h"

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
  auto unsupported = render_chat_template("{{ messages | wordcount }}", {}, false, "", "");
  ASSERT_FALSE(unsupported.is_ok());
  EXPECT_EQ(unsupported.status().code(), ErrorCode::kNotSupported);
}

// Unknown constructs fail with an error that names them.
TEST(ChatTemplate, UnknownConstructsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{% macro f() %}x{% endmacro %}", "macro"},
      {"{{ messages | wordcount }}", "filter 'wordcount'"},
      {"{{ 'a'.zfill(3) }}", "method '.zfill()'"},
      {"{{ 3 is divisibleby(3) }}", "test 'is divisibleby'"},
      {"{{ strftime_now('%Y') }}", "function 'strftime_now()'"},
      {"{{ 1.5 }}", "float literal"},
      {"{% for m in messages recursive %}{% endfor %}", "recursive"},
      {"{% set a, b = 1, 2 %}", "several names"},
      {"{% set x %}y{% endset %}", "block {% set %}"},
      {"{% set d = {'a': 1} %}{% set d.a = 2 %}", "non-namespace"},
  };
  for (const auto& [tmpl, name] : cases) {
    auto r = render_chat_template(tmpl, {{"user", "hi"}}, false, "", "");
    ASSERT_FALSE(r.is_ok()) << tmpl;
    EXPECT_EQ(r.status().code(), ErrorCode::kNotSupported) << tmpl;
    EXPECT_NE(r.status().message().find(name), std::string::npos) << tmpl << " -> " << r.status().message();
  }
  EXPECT_FALSE(render_chat_template("{% if true %}x", {}, false, "", "").is_ok());
  // Hostile nesting is an error, not a stack overflow.
  std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_FALSE(render_chat_template(deep, {}, false, "", "").is_ok());
  std::string chain = "{{ 1";
  for (int k = 0; k < 100000; ++k) chain += " + 1";
  EXPECT_FALSE(render_chat_template(chain + " }}", {}, false, "", "").is_ok());
  std::string nots = "{{ ";
  for (int k = 0; k < 100000; ++k) nots += "not ";
  EXPECT_FALSE(render_chat_template(nots + "1 }}", {}, false, "", "").is_ok());
  EXPECT_FALSE(render_chat_template("{{ 'x' ", {}, false, "", "").is_ok());
}

// Expected strings follow Jinja's documented semantics (Python str methods, slices, tests, filters).
TEST(ChatTemplate, ExpressionsMethodsSlicesFiltersTests) {
  struct Case { const char* tmpl; const char* want; };
  const Case cases[] = {
      {"{{ [1, 2, 3][::-1] }}", "[3, 2, 1]"},
      {"{{ 'abc'[::-1] }}|{{ 'hello'[1:3] }}|{{ 'hello'[-2:] }}|{{ 'hello'[:-1:2] }}", "cba|el|lo|hl"},
      {"{{ messages[::-1][0].content }}", "b"},
      {"{{ '<a>x</a>'.startswith('<a>') }} {{ 'x'.endswith('y') }}", "True False"},
      {"{{ 'a</t>b</t>c'.split('</t>')[-1] }}|{{ ' a  b '.split() | length }}|{{ 'a,b,c'.split(',', 1)[1] }}", "c|2|b,c"},
      {"[{{ '\n\nx\n'.lstrip('\n') }}][{{ '\n\nx\n'.rstrip('\n') }}][{{ '  x  '.strip() }}][{{ 'xyx'.strip('x') }}]",
       "[x\n][\n\nx][x][y]"},
      {"{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}{{ ns.s }}",
       "2ua"},
      {"{% for m in messages %}{% set inner = 1 %}{% endfor %}{{ inner is defined }}", "False"},
      {"{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is string }} {{ false is false }} {{ 0 is false }} {{ x is not defined }}",
       "False True True False True False True"},
      {"{{ {'b': [1, 'x'], 'a': none} | tojson }}", "{\"b\": [1, \"x\"], \"a\": null}"},
      {"{{ 'q\"\n' | tojson }}", "\"q\\\"\\n\""},
      {"{{ '  t  ' | trim }}{{ messages | length }}{{ 'héllo' | length }}{{ [1,2] | reverse | join('-') }}", "t252-1"},
      {"{{ {'k': 'v'}.get('k') }}{{ {'k': 'v'}.get('z', 'd') }}{{ {'k': 'v'}.get('z') }}", "vdNone"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for m in messages %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}",
       "112,202"},
      {"{{ 'y' if messages | length > 1 else 'n' }}{{ 'y' if false else 'n' }}", "yn"},
      {"{{ 7 // 2 }}{{ -7 // 2 }}{{ 7 % 3 }}{{ 'ab' * 2 }}{{ 'a' ~ 1 }}", "3-41ababa1"},
      {"{{ 'x' in 'xyz' }}{{ 'q' not in ['q'] }}{{ 'role' in messages[0] }}", "TrueFalseTrue"},
      {"{{ x | default('dflt') }}{{ '' | default('e', true) }}", "dflte"},
      {"{% for m in messages if m.role == 'assistant' %}{{ m.content }}{{ loop.length }}{% endfor %}", "b1"},
      {"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", "02"},
      // and/or short-circuit: the right operand is not evaluated (it would be an error).
      {"{{ false and 'a'.zfill(1) }}{{ true or 'a'.zfill(1) }}", "FalseTrue"},
  };
  for (const auto& c : cases) {
    auto r = render_chat_template(c.tmpl, {{"user", "a"}, {"assistant", "b"}}, false, "", "");
    ASSERT_TRUE(r.is_ok()) << c.tmpl << ": " << r.status().message();
    EXPECT_EQ(*r, c.want) << c.tmpl;
  }
}

// transformers renders with trim_blocks and lstrip_blocks: a block tag alone on its line leaves no trace.
TEST(ChatTemplate, TrimBlocksAndLstripBlocks) {
  const char* t =
      "{% for m in messages %}\n"
      "  {% if m.role == 'user' %}\n"
      "[{{ m.content }}]\n"
      "  {% endif %}\n"
      "{% endfor %}\n"
      "end {% if true %} x {% endif %} {{ 'y' }}\n"
      "  {%+ if true %}kept{% endif +%}\n"
      "{# comment #}\n"
      "  {{- ' trimmed' -}}  \n  !";
  auto r = render_chat_template(t, {{"user", "a"}, {"assistant", "z"}, {"user", "b"}}, false, "", "");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "[a]\n[b]\nend  x  y\n  kept\n trimmed!");
}

// ---- the real templates of ../shared/tokenizers (skipped when absent) ----
// Every expected string below was derived by reading the template, not from our output.

std::optional<std::string> shared_template(const std::string& name) {
  std::filesystem::path dir = std::getenv("HF2PTE_SHARED_TOKENIZERS") ? std::getenv("HF2PTE_SHARED_TOKENIZERS")
                                                                      : "/work/shared/tokenizers";
  std::ifstream in(dir / name / "tokenizer_config.json");
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in);
  return j.at("chat_template").get<std::string>();
}

#define LOAD_TEMPLATE(var, name)                                                          \
  auto var##_opt = shared_template(name);                                                 \
  if (!var##_opt) GTEST_SKIP() << "reference data not found: ../shared/tokenizers/" name; \
  const std::string& var = *var##_opt

std::string render_ok(const std::string& t, const std::vector<ChatMessage>& m, bool gen, const std::string& bos,
                      const std::string& extra = "") {
  auto r = render_chat_template(t, m, gen, bos, "", extra);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : "";
}

TEST(ChatTemplate, Qwen3) {
  LOAD_TEMPLATE(t, "qwen3");
  // System + user: the system turn is printed once (before the loop), the loop skips it (loop.first).
  EXPECT_EQ(render_ok(t, {{"system", "You are helpful."}, {"user", "Hi"}}, true, ""),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_ok(t, {{"system", "You are helpful."}, {"user", "Hi"}}, false, ""),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // enable_thinking=false appends an empty think block to the generation prompt.
  EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, true, "", R"({"enable_thinking": false})"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, true, "", R"({"enable_thinking": true})"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Multi-turn: the assistant turn precedes the last user query, so its <think> part is dropped
  // (content = text after </think>, left-stripped of newlines).
  EXPECT_EQ(render_ok(t, {{"user", "What is 2+2?"}, {"assistant", "<think>\nsimple math\n</think>\n\nIt is 4."}, {"user", "And 3+3?"}},
                      true, ""),
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nIt is 4.<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n");
  // An assistant turn after the last query keeps its reasoning_content in a think block.
  ChatMessage a{"assistant", "\nHello!", "think hard"};
  EXPECT_EQ(render_ok(t, {{"user", "Hi"}, a}, false, ""),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nthink hard\n</think>\n\nHello!<|im_end|>\n");
  // Consecutive tool results share one user turn.
  EXPECT_EQ(render_ok(t, {{"user", "Q"}, {"assistant", "A"}, {"tool", "R1"}, {"tool", "R2"}}, true, ""),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\n<tool_response>\nR1\n"
            "</tool_response>\n<tool_response>\nR2\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // Tools (given as a template variable) are listed with tojson in a system turn.
  EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, true, "", R"({"tools": [{"type": "function", "function": {"name": "f"}}]})"),
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
            "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, DeepSeekV3) {
  LOAD_TEMPLATE(t, "deepseek_v3");
  const std::string bos = "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>";
  const std::string user = "<\uFF5CUser\uFF5C>", assistant = "<\uFF5CAssistant\uFF5C>";
  const std::string eos = "<\uFF5Cend\u2581of\u2581sentence\uFF5C>";
  // BOS, then the system prompt with no marker, then the turns.
  EXPECT_EQ(render_ok(t, {{"system", "You are helpful."}, {"user", "Hi"}}, true, bos),
            bos + "You are helpful." + user + "Hi" + assistant);
  EXPECT_EQ(render_ok(t, {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}, false, bos),
            bos + user + "Hi" + assistant + "Hello!" + eos + user + "Bye");
  // Several system messages are joined with a blank line.
  EXPECT_EQ(render_ok(t, {{"system", "A"}, {"system", "B"}, {"user", "Hi"}}, true, bos), bos + "A\n\nB" + user + "Hi" + assistant);
  // A tool output closes the outputs block and suppresses the generation prompt.
  EXPECT_EQ(render_ok(t, {{"user", "Q"}, {"tool", "R"}}, true, bos),
            bos + user + "Q<\uFF5Ctool\u2581outputs\u2581begin\uFF5C><\uFF5Ctool\u2581output\u2581begin\uFF5C>R"
                  "<\uFF5Ctool\u2581output\u2581end\uFF5C><\uFF5Ctool\u2581outputs\u2581end\uFF5C>");
}

// What `generate --chat` does: render with the tokenizer's own template and BOS string, then
// encode without post-processing. The special-token ids come from tokenizer.json's added_tokens.
TEST(ChatTemplate, RenderedPromptEncodesToSpecialTokens) {
  std::filesystem::path dir = std::getenv("HF2PTE_SHARED_TOKENIZERS") ? std::getenv("HF2PTE_SHARED_TOKENIZERS")
                                                                      : "/work/shared/tokenizers";
  if (!std::filesystem::exists(dir / "qwen3" / "tokenizer.json")) GTEST_SKIP() << "reference data not found: " << dir;
  auto added_id = [&](const std::string& name, const std::string& content) -> int64_t {
    std::ifstream in(dir / name / "tokenizer.json");
    auto j = nlohmann::json::parse(in);
    for (const auto& a : j["added_tokens"]) if (a["content"] == content) return a["id"].get<int64_t>();
    ADD_FAILURE() << "no added token " << content;
    return -1;
  };
  struct Case { std::string name, first, last; int64_t count_first; };
  for (const Case& c : {Case{"qwen3", "<|im_start|>", "<|im_start|>", 2},
                        Case{"deepseek_v3", "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>", "<\uFF5CAssistant\uFF5C>", 1}}) {
    auto tok = Tokenizer::load((dir / c.name).string());
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    auto text = render_chat_template((*tok)->chat_template(), {{"user", "Hi"}}, true, (*tok)->bos_token(), (*tok)->eos_token());
    ASSERT_TRUE(text.is_ok()) << text.status().message();
    auto ids = (*tok)->encode(*text, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.is_ok() && !ids->empty());
    int64_t first = added_id(c.name, c.first);
    EXPECT_EQ(ids->front(), first) << c.name;
    EXPECT_EQ(std::count(ids->begin(), ids->end(), first), c.count_first) << c.name;
    if (c.name == "deepseek_v3") EXPECT_EQ(ids->back(), added_id(c.name, c.last));
    else EXPECT_EQ((*tok)->decode(*ids), *text);
  }
}

}  // namespace
}  // namespace hf2pte::llm
