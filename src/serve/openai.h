// OpenAI's HTTP API as data: request bodies parsed and checked into ApiRequest
// (every bad field an ApiError naming it), and the JSON of responses, stream
// chunks and error objects. No I/O here: serve/server.cpp wires it to HTTP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "llm/tokenizer/chat_template.h"

namespace hf2pte::serve {

/// An error response: HTTP status and OpenAI's error object
/// {"error": {"message", "type", "param", "code"}} (param/code null when empty).
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};
std::string error_body(const ApiError& e);

enum class Endpoint { kCompletions, kChatCompletions };

/// A checked request of either endpoint.
struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                      ///< "" when the client sent none
  std::vector<llm::ChatMessage> messages; ///< chat
  std::string prompt;                     ///< completions: text ...
  std::optional<std::vector<int64_t>> prompt_ids;  ///< ... or token ids
  std::optional<int64_t> max_tokens;      ///< max_tokens / max_completion_tokens (>= 1)
  std::string max_tokens_param = "max_tokens";  ///< which of the two the client sent (for errors)
  double temperature = 1.0;               ///< OpenAI's default; 0 is greedy
  double top_p = 1.0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;             ///< stream_options.include_usage
};

/// Parses and checks a request body. Unknown fields are ignored, as OpenAI's
/// clients send fields a server may not use; a known field of the wrong type
/// or range is an error naming it.
std::variant<ApiRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint);

/// What the response builders need to know of a finished (or running) job.
struct ResponseHead {
  Endpoint endpoint;
  std::string id;     ///< "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;  ///< Unix seconds
};
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

/// The whole (non-streamed) response.
std::string response_body(const ResponseHead& h, const std::string& text, const char* finish_reason, const Usage& u);
/// One Server-Sent Event ("data: {...}\n\n") of a stream: `text` (the chat
/// stream's first chunk carries role "assistant"), or the final chunk with
/// `finish_reason`.
std::string stream_event(const ResponseHead& h, const std::string& text, const char* finish_reason, bool first);
/// The usage chunk of stream_options.include_usage (empty choices).
std::string stream_usage_event(const ResponseHead& h, const Usage& u);
inline constexpr std::string_view kStreamDone = "data: [DONE]\n\n";

/// GET /v1/models.
std::string models_body(const std::string& model, int64_t created);

}  // namespace hf2pte::serve
