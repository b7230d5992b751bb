#include "serve/server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>

#include <fmt/format.h>
#include <httplib.h>

#include "serve/openai.h"

namespace hf2pte::serve {

const char* const kChatMlTemplate =
    "{{ bos_token }}{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

namespace {

/// SIGINT/SIGTERM reach serve_http's waiter thread through this pipe: the
/// handler (any thread: libraries such as OpenBLAS start threads of their own
/// before main, so blocking signals per thread cannot cover them) only writes
/// one byte, which is async-signal-safe.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_shutdown_signal(int sig) {
  const char c = sig == SIGINT ? 'I' : 'T';
  const int saved = errno;
  if (write(g_signal_pipe[1], &c, 1) < 0) {}  // a full pipe already holds a signal
  errno = saved;
}

}  // namespace

Status install_shutdown_handlers() {
  if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    return make_error(ErrorCode::kIoError, "cannot create the shutdown pipe: {}", std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &sa, nullptr) != 0 || sigaction(SIGTERM, &sa, nullptr) != 0) {
    return make_error(ErrorCode::kIoError, "cannot install the SIGINT/SIGTERM handlers: {}", std::strerror(errno));
  }
  return Status::ok();
}

namespace {

using httplib::Request;
using httplib::Response;

constexpr const char* kJson = "application/json";

/// What the request's handler wants logged; the logger runs on the same
/// thread after the response (streams included) is written.
thread_local std::string t_log_detail;

int64_t unix_now() { return int64_t(std::time(nullptr)); }

class Server {
 public:
  Server(Engine& engine, const llm::Tokenizer& tok, const ServerOptions& opt) : engine_(engine), tok_(tok), opt_(opt) {}
  int run();

 private:
  void routes();
  void reply_error(Response& res, const ApiError& e);
  void completion(const Request& req, Response& res, Endpoint endpoint);
  /// The prompt's ids, or the error that refuses it.
  std::variant<std::vector<int64_t>, ApiError> prompt_ids(const ApiRequest& r);
  void stream_job(Response& res, std::shared_ptr<Job> job, ResponseHead head, bool stream, bool include_usage);
  std::string metrics_text();
  void count(const Request& req, const Response& res);

  Engine& engine_;
  const llm::Tokenizer& tok_;
  const ServerOptions& opt_;
  httplib::Server http_;
  std::atomic<uint64_t> next_id_{1};   ///< response ids
  std::atomic<uint64_t> next_log_{1};  ///< log line numbers
  const int64_t started_ = unix_now();
  std::mutex counts_mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;  ///< (endpoint, status) -> requests
};

void Server::reply_error(Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), kJson);
  t_log_detail = fmt::format("{}: {}", e.code.empty() ? e.type : e.code, e.message);
}

std::variant<std::vector<int64_t>, ApiError> Server::prompt_ids(const ApiRequest& r) {
  std::vector<int64_t> ids;
  if (r.endpoint == Endpoint::kChatCompletions) {
    auto text = llm::render_chat_template(opt_.chat_template, r.messages, /*add_generation_prompt=*/true,
                                          tok_.bos_token(), tok_.eos_token());
    if (!text) return ApiError{400, text.status().message(), "invalid_request_error", "messages", ""};
    auto enc = tok_.encode(*text, /*add_special_tokens=*/false);  // the template holds its special tokens
    if (!enc) return ApiError{400, enc.status().message(), "invalid_request_error", "messages", ""};
    ids = std::move(*enc);
  } else if (r.prompt_ids) {
    ids = *r.prompt_ids;
    const int64_t vocab = engine_.vocab_size();
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab) {
        return ApiError{400, fmt::format("prompt token id {} is outside the vocabulary [0, {})", id, vocab),
                        "invalid_request_error", "prompt", ""};
      }
    }
  } else {
    auto enc = tok_.encode(r.prompt, /*add_special_tokens=*/true);
    if (!enc) return ApiError{400, enc.status().message(), "invalid_request_error", "prompt", ""};
    ids = std::move(*enc);
  }
  const char* param = r.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
  if (ids.empty()) return ApiError{400, "the prompt has no tokens", "invalid_request_error", param, ""};
  const int64_t ctx = engine_.max_seq_len();
  if (int64_t(ids.size()) >= ctx) {
    return ApiError{400,
                    fmt::format("the prompt has {} tokens; the model's context holds {}, with at least one left for the "
                                "completion",
                                ids.size(), ctx),
                    "invalid_request_error", param, "context_length_exceeded"};
  }
  return ids;
}

void Server::completion(const Request& req, Response& res, Endpoint endpoint) {
  auto parsed = parse_request(req.body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, *e);
  ApiRequest& r = std::get<ApiRequest>(parsed);
  if (!r.model.empty() && r.model != opt_.model) {
    return reply_error(res, ApiError{404, fmt::format("the model '{}' does not exist; this server has '{}'", r.model, opt_.model),
                                     "invalid_request_error", "model", "model_not_found"});
  }
  auto ids = prompt_ids(r);
  if (auto* e = std::get_if<ApiError>(&ids)) return reply_error(res, *e);
  JobSpec spec;
  spec.prompt = std::move(std::get<std::vector<int64_t>>(ids));
  const int64_t room = engine_.max_seq_len() - int64_t(spec.prompt.size());
  if (r.max_tokens && *r.max_tokens > room) {
    return reply_error(res, ApiError{400,
                                     fmt::format("{} {} does not fit: the prompt has {} tokens and the context "
                                                 "holds {}, so at most {} can follow",
                                                 r.max_tokens_param, *r.max_tokens, spec.prompt.size(), engine_.max_seq_len(), room),
                                     "invalid_request_error", r.max_tokens_param, "context_length_exceeded"});
  }
  // OpenAI's defaults: 16 tokens for completions, the rest of the context for chat.
  spec.max_tokens = r.max_tokens.value_or(endpoint == Endpoint::kCompletions ? std::min<int64_t>(16, room) : room);
  spec.sampling.temperature = r.temperature;
  spec.sampling.top_p = r.top_p;
  spec.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  spec.stop = r.stop;
  auto job = engine_.submit(std::move(spec));
  if (!job) {
    const bool busy = job.status().code() == ErrorCode::kOutOfRange;
    res.set_header("Retry-After", "1");
    return reply_error(res, ApiError{503, job.status().message(), "server_error", "", busy ? "server_busy" : "shutting_down"});
  }
  ResponseHead head{endpoint, fmt::format("{}-{}", endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl", next_id_++),
                    opt_.model, unix_now()};
  stream_job(res, std::move(*job), std::move(head), r.stream, r.include_usage);
}

// Both kinds of response are written by a chunked content provider, so a
// client that goes away is noticed while its job runs (sink.is_writable
// checks the socket) and its slot is freed: a stream as Server-Sent Events,
// a plain response as one JSON body at the end.
void Server::stream_job(Response& res, std::shared_ptr<Job> job, ResponseHead head, bool stream, bool include_usage) {
  auto provider = [this, job, head, stream, include_usage, first = true, all = std::string()](
                      size_t, httplib::DataSink& sink) mutable {
    while (true) {
      bool done = false;
      std::string text = job->take_text(engine_.poll_interval(), &done);
      if (!sink.is_writable()) {
        job->cancel();
        t_log_detail = fmt::format("client disconnected after {} completion tokens", job->timings().completion_tokens);
        return false;
      }
      if (stream && (!text.empty() || first)) {
        const std::string ev = stream_event(head, text, nullptr, first);
        if (!sink.write(ev.data(), ev.size())) {
          job->cancel();
          return false;
        }
        first = false;
      } else if (!stream) {
        all += text;
      }
      if (!done) continue;
      const FinishReason fr = job->finish_reason();
      const JobTimings t = job->timings();
      const Usage usage{t.prompt_tokens, t.completion_tokens};
      std::string tail;
      if (fr == FinishReason::kError) {
        tail = error_body(ApiError{500, job->error().message(), "server_error", "", "generation_failed"});
        if (stream) tail = "data: " + tail + "\n\n";
      } else {
        // A job ended by the server (shutdown) was cut short: "length".
        const char* reason = fr == FinishReason::kStop ? "stop" : "length";
        if (stream) {
          tail = stream_event(head, "", reason, false);
          if (include_usage) tail += stream_usage_event(head, usage);
        } else {
          tail = response_body(head, all, reason, usage);
        }
      }
      if (stream) tail += kStreamDone;
      sink.write(tail.data(), tail.size());
      sink.done();
      t_log_detail = fmt::format(
          "{} prompt {} (reused {}) completion {} finish {} | slot {} queue {:.3f} s ttft {:.3f} s prefill {:.1f} tok/s "
          "decode {:.1f} tok/s",
          stream ? "stream" : "json", t.prompt_tokens, t.reused_tokens, t.completion_tokens, finish_reason_name(fr),
          t.slot, t.queue_seconds, t.time_to_first_token, t.prefill_tokens_per_second(), t.decode_tokens_per_second());
      return true;
    }
  };
  res.set_chunked_content_provider(stream ? "text/event-stream" : kJson, std::move(provider), [job](bool success) {
    if (!success) job->cancel();  // the connection failed: free the slot
  });
  if (stream) res.set_header("Cache-Control", "no-cache");
}

std::string Server::metrics_text() {
  const EngineMetrics m = engine_.metrics();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  out += "# HELP hf2pte_requests_total HTTP requests answered, by endpoint and status.\n"
         "# TYPE hf2pte_requests_total counter\n";
  {
    std::lock_guard lk(counts_mu_);
    for (const auto& [key, n] : counts_) {
      out += fmt::format("hf2pte_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
    }
  }
  metric("hf2pte_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", m.prompt_tokens);
  metric("hf2pte_prompt_tokens_reused_total", "counter", "Prompt tokens served from a slot's cached prefix.", m.reused_tokens);
  metric("hf2pte_completion_tokens_total", "counter", "Tokens generated for finished requests.", m.completion_tokens);
  metric("hf2pte_decode_steps_total", "counter", "Decode steps run.", m.decode_steps);
  metric("hf2pte_jobs_finished_total", "counter", "Generations ended (any reason).", m.jobs_finished);
  metric("hf2pte_jobs_cancelled_total", "counter", "Generations ended because the client left or the server stopped.",
         m.jobs_cancelled);
  metric("hf2pte_slots", "gauge", "Slots (sequences decoded together).", m.slots);
  metric("hf2pte_slots_active", "gauge", "Slots with a running generation.", m.active);
  metric("hf2pte_queue_length", "gauge", "Requests waiting for a slot.", m.queued);
  metric("hf2pte_decode_step_seconds", "gauge", "Moving average of one decode step.", m.decode_step_seconds);
  return out;
}

void Server::count(const Request& req, const Response& res) {
  static const char* const kKnown[] = {"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"};
  std::string endpoint = "other";  // unknown paths share one label: clients cannot grow the map
  for (const char* k : kKnown) {
    if (req.path == k) endpoint = k;
  }
  std::lock_guard lk(counts_mu_);
  ++counts_[{endpoint, res.status}];
}

void Server::routes() {
  http_.Get("/health", [](const Request&, Response& res) { res.set_content(R"({"status":"ok"})", kJson); });
  http_.Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  http_.Get("/v1/models", [this](const Request&, Response& res) { res.set_content(models_body(opt_.model, started_), kJson); });
  http_.Post("/v1/completions", [this](const Request& req, Response& res) { completion(req, res, Endpoint::kCompletions); });
  http_.Post("/v1/chat/completions",
             [this](const Request& req, Response& res) { completion(req, res, Endpoint::kChatCompletions); });
  http_.set_pre_routing_handler([this](const Request& req, Response& res) {
    t_log_detail.clear();
    if (!opt_.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + opt_.api_key) {
      reply_error(res, ApiError{401, "invalid or missing API key (send Authorization: Bearer <key>)",
                                "invalid_request_error", "", "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib answers itself (unknown path, body too large, malformed
  // HTTP) get OpenAI's error object too.
  http_.set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    ApiError e{res.status, "", "invalid_request_error", "", ""};
    if (res.status == 404) e.message = fmt::format("no endpoint {} {}", req.method, req.path), e.code = "not_found";
    else if (res.status == 413) e.message = fmt::format("the request body is larger than {} bytes", opt_.max_body_bytes), e.code = "request_too_large";
    else e.message = fmt::format("HTTP status {}", res.status);
    reply_error(res, e);
  });
  http_.set_logger([this](const Request& req, const Response& res) {
    count(req, res);
    std::fprintf(stderr, "hf2pte: serve: #%llu %s %s %d%s%s\n", static_cast<unsigned long long>(next_log_++),
                 req.method.c_str(), req.path.c_str(), res.status, t_log_detail.empty() ? "" : " ", t_log_detail.c_str());
  });
}

int Server::run() {
  routes();
  http_.set_payload_max_length(opt_.max_body_bytes);
  // An idle keep-alive connection holds an HTTP thread, and shutdown waits for
  // it: 1 s instead of httplib's 5.
  http_.set_keep_alive_timeout(1);
  const int threads = opt_.http_threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  // httplib 0.11 listens with a backlog of 5: a burst of clients (32 at once
  // in the load test) would see SYNs dropped and retried a second later. The
  // socket-options hook sees the listening socket; listen() again raises it.
  int listen_fd = -1;
  http_.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  int port = opt_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(opt_.host);
    if (port < 0) port = 0;
  } else if (!http_.bind_to_port(opt_.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::fprintf(stderr, "hf2pte: error: cannot listen on %s:%d (--host, --port)\n", opt_.host.c_str(), opt_.port);
    return 2;
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  for (const auto& w : opt_.warnings) std::fprintf(stderr, "hf2pte: warning: %s\n", w.c_str());
  std::fprintf(stderr, "hf2pte: serve: listening on http://%s:%d (model '%s')\n", opt_.host.c_str(), port,
               opt_.model.c_str());
  // Shutdown: a thread waits for the signal handlers' bytes ('Q' from us: stop waiting).
  std::thread drainer;
  std::thread signals([&] {
    for (int n = 0;;) {
      char c = 0;
      const ssize_t got = read(g_signal_pipe[0], &c, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got != 1 || c == 'Q') return;
      if (++n == 1) {
        std::fprintf(stderr, "hf2pte: serve: %s: finishing running requests (again to cut them short)\n",
                     c == 'I' ? "SIGINT" : "SIGTERM");
        drainer = std::thread([&] {
          engine_.drain();
          http_.stop();
        });
      } else {
        engine_.cancel_all();
      }
    }
  });
  const bool ok = http_.listen_after_bind();
  const char quit = 'Q';
  if (write(g_signal_pipe[1], &quit, 1) < 0) {}  // only fails if the pipe is gone: the waiter has returned
  signals.join();
  if (drainer.joinable()) drainer.join();
  std::fprintf(stderr, "hf2pte: serve: stopped\n");
  return ok ? 0 : 1;
}

}  // namespace

int serve_http(Engine& engine, const llm::Tokenizer& tok, const ServerOptions& options) {
  Server s(engine, tok, options);
  return s.run();
}

}  // namespace hf2pte::serve
