// libFuzzer target: request bodies as hf2pte serve reads them from the
// network. Both endpoints parse the bytes; a parsed chat request is rendered
// with the ChatML template, and its stop strings run over the rendered text
// cut into pieces, as the engine feeds decoded tokens.
#include <cstdint>
#include <string_view>

#include "llm/tokenizer/chat_template.h"
#include "serve/openai.h"
#include "serve/server.h"
#include "serve/stop_matcher.h"

using namespace hf2pte::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChatCompletions}) {
    auto parsed = parse_request(body, e);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
      (void)error_body(*err);
      continue;
    }
    const ApiRequest& r = std::get<ApiRequest>(parsed);
    std::string text = r.prompt;
    if (e == Endpoint::kChatCompletions) {
      auto rendered = hf2pte::llm::render_chat_template(kChatMlTemplate, r.messages, true, "<s>", "</s>");
      if (rendered) text = *rendered;
    }
    StopMatcher m(r.stop);
    std::string out;
    for (size_t i = 0; i < text.size(); i += 3) out += m.feed(text.substr(i, 3));
    out += m.flush();
    if (!m.matched() && out != text) __builtin_trap();  // without a match every byte comes out, in order
    (void)response_body(ResponseHead{e, "id", "m", 0}, out, "stop", Usage{1, 1});
    (void)stream_event(ResponseHead{e, "id", "m", 0}, out, nullptr, true);
  }
  return 0;
}
