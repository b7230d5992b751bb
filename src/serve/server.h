// hf2pte serve's HTTP side: OpenAI's endpoints over an Engine, on cpp-httplib
// (docs/serve.md says why that library). The server owns the listening
// socket, authentication, body limits, logging (one line per request on
// stderr) and /metrics; requests become Jobs of the engine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/tokenizer/tokenizer.h"
#include "serve/engine.h"

namespace hf2pte::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            ///< 0: any free port (printed when listening)
  std::string api_key;        ///< non-empty: every request needs "Authorization: Bearer <key>"
  std::string model;          ///< the id /v1/models lists and requests may name
  std::string chat_template;  ///< Jinja text for /v1/chat/completions
  size_t max_body_bytes = size_t(1) << 20;
  int http_threads = 16;      ///< connections served at once (the CLI sizes it from slots and queue)
  /// Warnings to print once the socket is bound (so a failed start stays one error line).
  std::vector<std::string> warnings;
};

/// The ChatML template used when a program's tokenizer has none (documented
/// in docs/serve.md; llama.cpp's server falls back to the same format).
extern const char* const kChatMlTemplate;

/// Serves until SIGINT or SIGTERM (install_shutdown_handlers first). The first
/// signal stops taking requests and lets the running ones finish; a second
/// ends them at once. Returns the process exit code.
int serve_http(Engine& engine, const llm::Tokenizer& tok, const ServerOptions& options);

/// Routes SIGINT and SIGTERM, whichever thread they hit, to serve_http.
Status install_shutdown_handlers();

}  // namespace hf2pte::serve
