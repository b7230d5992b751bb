// libFuzzer target: chat templates (the Jinja subset of chat_template.cpp) as
// they arrive in a checkpoint's tokenizer_config.json, rendered with a fixed
// multi-turn conversation so parsed statements, filters and methods all run.
#include <cstdint>
#include <string_view>
#include <vector>

#include "llm/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view tmpl(reinterpret_cast<const char*>(data), size);
  static const std::vector<hf2pte::llm::ChatMessage> messages = {
      {"system", "You are terse."},
      {"user", "Hi <think>x</think> there"},
      {"assistant", "Hello.", std::string("thinking")},
      {"tool", "{\"ok\": true}"},
      {"user", "caf\xc3\xa9 \xf0\x9f\x98\x80"},
  };
  (void)hf2pte::llm::render_chat_template(tmpl, messages, true, "<s>", "</s>",
                                          R"({"enable_thinking": false, "tools": [{"name": "f"}]})");
  return 0;
}
