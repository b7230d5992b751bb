#include "serve/openai.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace hf2pte::serve {
namespace {

using nlohmann::json;

ApiError error_of(const std::string& body, Endpoint e = Endpoint::kChatCompletions) {
  auto r = parse_request(body, e);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ApiRequest request_of(const std::string& body, Endpoint e = Endpoint::kChatCompletions) {
  auto r = parse_request(body, e);
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(r)) << (std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).message : "");
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
}

TEST(OpenAiRequest, ChatFieldsAndDefaults) {
  auto r = request_of(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
    {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"!"}]}],
    "max_completion_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["\n","END"],"stream":true,
    "stream_options":{"include_usage":true},"n":1,"logprobs":false,"user":"x"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "Hi!");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  auto d = request_of(R"({"messages":[{"role":"developer","content":"x"}]})");
  EXPECT_EQ(d.messages[0].role, "system");
  EXPECT_EQ(d.temperature, 1.0);  // OpenAI's default
  EXPECT_FALSE(d.max_tokens.has_value());
}

TEST(OpenAiRequest, CompletionPrompts) {
  EXPECT_EQ(request_of(R"({"prompt":"Once"})", Endpoint::kCompletions).prompt, "Once");
  EXPECT_EQ(request_of(R"({"prompt":["Once"]})", Endpoint::kCompletions).prompt, "Once");
  EXPECT_EQ(request_of(R"({"prompt":[1,403]})", Endpoint::kCompletions).prompt_ids, (std::vector<int64_t>{1, 403}));
  EXPECT_EQ(error_of(R"({"prompt":["a","b"]})", Endpoint::kCompletions).param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt":7})", Endpoint::kCompletions).param, "prompt");
  EXPECT_EQ(error_of(R"({})", Endpoint::kCompletions).message, "prompt is required");
}

TEST(OpenAiRequest, BadFieldsNameTheirParam) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"messages":[]})", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-3})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"5"})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":3})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":2})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"seed":"1"})", "seed"},
      {R"({"messages":[{"role":"user","content":"x"}],"model":5})", "model"},
  };
  for (const auto& c : cases) {
    ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
  }
}

TEST(OpenAiRequest, MalformedBodies) {
  EXPECT_NE(error_of("{\"messages\": [").message.find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").message.find("JSON object"), std::string::npos);
  // Invalid UTF-8 inside a string.
  EXPECT_NE(error_of("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}").message.find("not valid JSON"),
            std::string::npos);
}

TEST(OpenAiResponse, ShapesFollowOpenAi) {
  ResponseHead chat{Endpoint::kChatCompletions, "chatcmpl-1", "m", 100};
  auto j = json::parse(response_body(chat, "Hi", "stop", Usage{3, 2}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
  ResponseHead cmpl{Endpoint::kCompletions, "cmpl-1", "m", 100};
  auto c = json::parse(response_body(cmpl, "x", "length", Usage{1, 1}));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "x");
  const std::string ev = stream_event(chat, "a", nullptr, true);
  ASSERT_EQ(ev.rfind("data: ", 0), 0u);
  ASSERT_EQ(ev.substr(ev.size() - 2), "\n\n");
  auto e = json::parse(ev.substr(6));
  EXPECT_EQ(e["object"], "chat.completion.chunk");
  EXPECT_EQ(e["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(e["choices"][0]["delta"]["content"], "a");
  EXPECT_TRUE(e["choices"][0]["finish_reason"].is_null());
  auto last = json::parse(stream_event(chat, "", "length", false).substr(6));
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  auto usage = json::parse(stream_usage_event(chat, Usage{4, 5}).substr(6));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  // Bytes that are not UTF-8 (a byte-level model mid-character) never throw.
  auto bad = json::parse(response_body(chat, "\xff", "stop", Usage{}));
  EXPECT_EQ(bad["choices"][0]["message"]["content"], "\xEF\xBF\xBD");
  auto err = json::parse(error_body(ApiError{404, "no such model", "invalid_request_error", "model", "model_not_found"}));
  EXPECT_EQ(err["error"]["message"], "no such model");
  EXPECT_EQ(err["error"]["code"], "model_not_found");
  ApiError no_param;
  no_param.message = "m";
  EXPECT_TRUE(json::parse(error_body(no_param))["error"]["param"].is_null());
}

}  // namespace
}  // namespace hf2pte::serve
