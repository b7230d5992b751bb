// hf2pte serve: an OpenAI-compatible HTTP server over one exported LLM
// (docs/serve.md). The engine and the HTTP side live in src/serve.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "kernels/optimized/kernels.h"
#include "runtime/weight_store.h"
#include "serve/engine.h"
#include "serve/server.h"

namespace hf2pte::cli {

CLI::App* add_serve_command(CLI::App& app, ServeArgs& a) {
  auto* s = app.add_subcommand("serve", "serve an exported LLM over an OpenAI-compatible HTTP API");
  s->add_option("pte", a.pte, ".pte file")->required();
  s->add_option("--host", a.host, "address to listen on (default 127.0.0.1: this machine only)");
  s->add_option("--port", a.port, "port (default 8080; 0 picks a free one and prints it)");
  s->add_option("--slots", a.slots, "sequences decoded together, each with its own KV cache (default 1)");
  s->add_option("--max-queue", a.max_queue, "requests that may wait for a slot; more get 503 (default 64)");
  s->add_option("--api-key", a.api_key, "require 'Authorization: Bearer KEY' on every request");
  s->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  s->add_option("--model-name", a.model_name, "the model id /v1/models lists (default: the file name without .pte)");
  s->add_option("--tokenizer", a.tokenizer, "tokenizer folder or file (default: the one embedded in the .pte)");
  s->add_option("--chat-template", a.chat_template,
                "Jinja file for /v1/chat/completions, or 'chatml' (default: the tokenizer's; ChatML when it has none)");
  s->add_option("--prefill-chunk", a.prefill_chunk, "prompt tokens per engine step (default 256)");
  s->add_option("--max-body-bytes", a.max_body_bytes, "largest request body accepted; larger gets 413 (default 1 MiB)");
  s->add_flag("--huge-pages,!--no-huge-pages", a.huge_pages, kServeHugePagesHelp);
  return s;
}

Result<std::string> resolve_chat_template(const std::string& flag, const std::string& tokenizer_template, bool* fallback) {
  *fallback = false;
  if (flag == "chatml") return std::string(serve::kChatMlTemplate);
  if (!flag.empty()) {
    std::ifstream in(flag, std::ios::binary);
    HF2PTE_CHECK_OR_RETURN(in.good(), kNotFound, "cannot read the chat template {} (--chat-template)", flag);
    std::ostringstream ss;
    ss << in.rdbuf();
    HF2PTE_CHECK_OR_RETURN(!ss.str().empty(), kInvalidArgument, "the chat template {} is empty (--chat-template)", flag);
    return ss.str();
  }
  if (!tokenizer_template.empty()) return tokenizer_template;
  *fallback = true;
  return std::string(serve::kChatMlTemplate);
}

int run_serve(const ServeArgs& a) {
  if (a.slots < 1 || a.slots > 256 || a.max_queue < 0 || a.max_queue > 4096 || a.prefill_chunk < 1 ||
      a.port < 0 || a.port > 65535 || a.max_body_bytes < 1024) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "need 1 <= --slots <= 256, 0 <= --max-queue <= 4096, --prefill-chunk >= 1, 0 <= --port <= "
                           "65535, --max-body-bytes >= 1024 (command line)"));
  }
  if (auto st = serve::install_shutdown_handlers(); !st) return fail(st);
  apply_huge_pages(a.huge_pages && rt::transparent_huge_pages_available());
  // The program first: a wrong path or an unservable program is the error to report.
  auto program = rt::Program::load(a.pte);
  if (!program) return fail(program.status());
  if (auto st = refuse_encoder(**program, "serve", a.pte); !st) return fail(st);
  auto tok = llm::Tokenizer::load(a.tokenizer.empty() ? a.pte : a.tokenizer);
  if (!tok) return fail(tok.status());
  bool fallback = false;
  auto tmpl = resolve_chat_template(a.chat_template, (*tok)->chat_template(), &fallback);
  if (!tmpl) return fail(tmpl.status());
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  std::shared_ptr<const llm::Tokenizer> shared_tok = std::move(*tok);
  serve::EngineOptions eo;
  eo.slots = a.slots;
  eo.max_queue = a.max_queue;
  eo.prefill_chunk = a.prefill_chunk;
  auto engine = serve::Engine::create(*program, optimized_registry(), shared_tok, eo);
  if (!engine) return fail(engine.status().with_context(a.pte));
  serve::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.model = a.model_name.empty() ? std::filesystem::path(a.pte).stem().string() : a.model_name;
  so.chat_template = std::move(*tmpl);
  so.max_body_bytes = a.max_body_bytes;
  if (fallback) {
    so.warnings.push_back("the tokenizer has no chat_template; /v1/chat/completions uses ChatML (--chat-template FILE "
                          "to choose)");
  }
  // A connection per slot and per queued request, and a few for /health,
  // /metrics and the quick refusals (503) beyond the queue.
  so.http_threads = a.slots + a.max_queue + 8;
  return serve::serve_http(**engine, *shared_tok, so);
}

}  // namespace hf2pte::cli
