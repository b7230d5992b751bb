#include "serve/openai.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hf2pte::serve {

namespace {

using nlohmann::json;

/// Invalid UTF-8 that a byte-level model may produce is replaced (U+FFFD), never thrown on.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError bad(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

/// Content of a message: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> message_content(const json& c, size_t i, std::string* out) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad(param, param + " must be a string or an array of text parts");
  for (const auto& part : c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string()) {
      return bad(param, param + ": only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& m, std::vector<llm::ChatMessage>* out) {
  if (!m.is_array() || m.empty()) return bad("messages", "messages must be a non-empty array");
  for (size_t i = 0; i < m.size(); ++i) {
    const json& msg = m[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!msg.is_object()) return bad(param, param + " must be an object");
    if (!msg.contains("role") || !msg["role"].is_string()) return bad(param + ".role", param + ".role must be a string");
    std::string role = msg["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant") {
      return bad(param + ".role", fmt::format("{}.role '{}' is not one of system, developer, user, assistant", param, role));
    }
    llm::ChatMessage cm{role, ""};
    if (msg.contains("content") && !msg["content"].is_null()) {
      if (auto e = message_content(msg["content"], i, &cm.content)) return e;
    } else if (role != "assistant") {
      return bad(param + ".content", param + ".content is required");
    }
    out->push_back(std::move(cm));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& p, ApiRequest* r) {
  auto ids = [&](const json& a) -> std::optional<ApiError> {
    std::vector<int64_t> v;
    for (const auto& x : a) {
      if (!x.is_number_integer()) return bad("prompt", "prompt must be a string, an array of one string, or an array of token ids");
      v.push_back(x.get<int64_t>());
    }
    r->prompt_ids = std::move(v);
    return std::nullopt;
  };
  if (p.is_string()) {
    r->prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r->prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    return ids(p);
  } else if (p.is_array() && p.size() == 1 && p[0].is_array() && !p[0].empty()) {
    return ids(p[0]);
  } else if (p.is_array() && p.size() > 1) {
    return bad("prompt", "one prompt per request (n = 1); got an array of several");
  } else {
    return bad("prompt", "prompt must be a string, an array of one string, or an array of token ids");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& s, std::vector<std::string>* out) {
  if (s.is_null()) return std::nullopt;
  if (s.is_string()) {
    out->push_back(s.get<std::string>());
    return std::nullopt;
  }
  if (!s.is_array() || s.size() > 4) return bad("stop", "stop must be a string or an array of up to 4 strings");
  for (const auto& x : s) {
    if (!x.is_string()) return bad("stop", "stop must be a string or an array of up to 4 strings");
    out->push_back(x.get<std::string>());
  }
  return std::nullopt;
}

/// A number field within [lo, hi] (null = absent).
std::optional<ApiError> number_in(const json& j, const char* name, double lo, double hi, double* out) {
  if (!j.contains(name) || j[name].is_null()) return std::nullopt;
  if (!j[name].is_number()) return bad(name, fmt::format("{} must be a number", name));
  const double v = j[name].get<double>();
  if (!(v >= lo && v <= hi)) return bad(name, fmt::format("{} must be between {} and {}; got {}", name, lo, hi, v));
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> parse_fields(const json& j, ApiRequest* r) {
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) return bad("model", "model must be a string");
    r->model = j["model"].get<std::string>();
  }
  if (r->endpoint == Endpoint::kChatCompletions) {
    if (!j.contains("messages")) return bad("messages", "messages is required");
    if (auto e = parse_messages(j["messages"], &r->messages)) return e;
  } else {
    if (!j.contains("prompt")) return bad("prompt", "prompt is required");
    if (auto e = parse_prompt(j["prompt"], r)) return e;
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (!j.contains(name) || j[name].is_null()) continue;
    if (!j[name].is_number_integer()) return bad(name, fmt::format("{} must be an integer", name));
    const int64_t v = j[name].get<int64_t>();
    if (v <= 0) return bad(name, fmt::format("{} must be at least 1; got {}", name, v));
    r->max_tokens = v;
    r->max_tokens_param = name;
  }
  if (auto e = number_in(j, "temperature", 0, 2, &r->temperature)) return e;
  if (auto e = number_in(j, "top_p", 0, 1, &r->top_p)) return e;
  if (r->top_p <= 0) return bad("top_p", "top_p must be greater than 0");
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("seed", "seed must be an integer");
    r->seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>() : uint64_t(j["seed"].get<int64_t>());
  }
  if (j.contains("stop")) {
    if (auto e = parse_stop(j["stop"], &r->stop)) return e;
  }
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_integer() || j["n"].get<int64_t>() != 1) return bad("n", "n must be 1 (one choice per request)");
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return bad("stream", "stream must be a boolean");
    r->stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) return bad("stream_options", "stream_options must be an object");
    if (so.contains("include_usage")) {
      if (!so["include_usage"].is_boolean()) return bad("stream_options.include_usage", "stream_options.include_usage must be a boolean");
      r->include_usage = so["include_usage"].get<bool>();
    }
  }
  return std::nullopt;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json head_json(const ResponseHead& h, bool chunk) {
  return json{{"id", h.id}, {"object", object_name(h.endpoint, chunk)}, {"created", h.created}, {"model", h.model}};
}

json usage_json(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json finish_json(const char* finish_reason) { return finish_reason ? json(finish_reason) : json(nullptr); }

}  // namespace

std::string error_body(const ApiError& e) {
  return dump(json{{"error",
                    {{"message", e.message},
                     {"type", e.type},
                     {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

std::variant<ApiRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint) {
  // Strings must be valid UTF-8: the parser rejects anything else.
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Say why: the parser's message when it throws.
    std::string why = "the body is not valid JSON";
    try {
      const json unused = json::parse(body);
      (void)unused;
    } catch (const json::parse_error& e) {
      why += fmt::format(" ({})", e.what());
    }
    return bad("", why);
  }
  if (!j.is_object()) return bad("", "the body must be a JSON object");
  ApiRequest r;
  r.endpoint = endpoint;
  if (auto e = parse_fields(j, &r)) return *e;
  return r;
}

std::string response_body(const ResponseHead& h, const std::string& text, const char* finish_reason, const Usage& u) {
  json choice{{"index", 0}, {"finish_reason", finish_json(finish_reason)}, {"logprobs", nullptr}};
  if (h.endpoint == Endpoint::kChatCompletions) {
    choice["message"] = json{{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  json j = head_json(h, false);
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string stream_event(const ResponseHead& h, const std::string& text, const char* finish_reason, bool first) {
  json choice{{"index", 0}, {"finish_reason", finish_json(finish_reason)}, {"logprobs", nullptr}};
  if (h.endpoint == Endpoint::kChatCompletions) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason == nullptr)) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json j = head_json(h, true);
  j["choices"] = json::array({choice});
  return "data: " + dump(j) + "\n\n";
}

std::string stream_usage_event(const ResponseHead& h, const Usage& u) {
  json j = head_json(h, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return "data: " + dump(j) + "\n\n";
}

std::string models_body(const std::string& model, int64_t created) {
  return dump(json{{"object", "list"},
                   {"data", json::array({json{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "hf2pte"}}})}});
}

}  // namespace hf2pte::serve
