// hf2pte command line: export | run | inspect | generate | tokenize | bench | serve. Each command is a
// thin layer over a library API; errors are printed as one line
// "hf2pte: error: <what> (<where>)" with exit code 2 (bad input) or 1 (ours).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backends/builtin/builtin.h"
#include "checkpoint/npy.h"
#include "core/peak_memory.h"
#include "kernels/optimized/kernels.h"
#include "cli/commands.h"
#include "export/exporter.h"
#include "kernels/portable/kernels.h"
#include "models/arch.h"
#include "models/encoder.h"
#include "models/vision.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/method.h"
#include "runtime/program.h"

namespace hf2pte {
namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "hf2pte: error: %s\n", st.message().c_str());
  if (st.code() == ErrorCode::kCancelled) return 130;  // as a shell reports SIGINT
  return is_input_error(st.code()) ? 2 : 1;
}

/// Set by SIGINT/SIGTERM; long-running commands poll it and clean up.
std::atomic<bool> g_interrupted{false};

void on_interrupt(int) { g_interrupted.store(true); }

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.1f} {}", b, units[u]);
}

// ---- export ----

struct ExportArgs {
  std::string model_dir, output, config_file, report_file;
  /// Which options were given on the command line (they override --config).
  std::function<bool(const char*)> given = [](const char*) { return true; };
  std::string backend = "xnnpack", dtype = "fp32", dump_graph, attention_span, linear_weights = "fp32", logits;
  int64_t max_seq_len = 0;
  int threads = 0;  // validation's kernel threads; never part of the program
  bool no_kv_cache = false, quiet = false, verbose = false, use_custom_sdpa = false;
  bool embed_tokenizer = true;  // --no-embed-tokenizer turns it off
  bool validate = false, no_validate = false;  // --validate / --no-validate
  bool alloc_input = true, alloc_output = true, alloc_buffers = true;
  std::vector<std::string> dims;
  exp::QuantConfig quant;  // --qlinear ... (docs/quantization.md)
};

Result<exp::DimBound> parse_dim(const std::string& spec, std::string* name) {
  auto eq = spec.find('=');
  auto colon = spec.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || colon == std::string::npos || eq == 0) {
    return make_error(ErrorCode::kInvalidArgument, "--dim expects NAME=MIN:MAX (MAX may be empty); got '{}'", spec);
  }
  *name = spec.substr(0, eq);
  exp::DimBound b;
  try {
    b.min = std::stoll(spec.substr(eq + 1, colon - eq - 1));
    if (colon + 1 < spec.size()) b.max = std::stoll(spec.substr(colon + 1));
  } catch (...) {
    return make_error(ErrorCode::kInvalidArgument, "--dim expects integers in NAME=MIN:MAX; got '{}'", spec);
  }
  return b;
}

int run_export(const ExportArgs& a) {
  exp::ExportRequest req;
  req.model_dir = a.model_dir;
  req.output_path = a.output;
  if (!a.config_file.empty()) {
    auto c = exp::load_config_file(a.config_file);
    if (!c) return fail(c.status());
    req.config = *c;
  }
  if (a.given("--backend")) {
    auto backend = exp::parse_backend(a.backend);
    if (!backend) return fail(backend.status());
    req.config.backend = *backend;
  }
  if (a.given("--dtype")) {
    auto dtype = exp::parse_dtype(a.dtype);
    if (!dtype) return fail(dtype.status());
    req.config.dtype = *dtype;
  }
  if (a.no_kv_cache) req.config.use_kv_cache = false;
  if (a.use_custom_sdpa) req.config.use_custom_sdpa = true;
  if (a.given("--max-seq-len")) req.config.max_seq_len = a.max_seq_len;
  if (a.given("--logits")) {
    auto last = exp::parse_logits(a.logits);
    if (!last) return fail(last.status());
    req.config.last_logits = *last;
  }
  if (a.given("--attention-span")) {
    auto span = exp::parse_attention_span(a.attention_span);
    if (!span) return fail(span.status());
    req.config.attention_span = *span;
  }
  {
    // Quantization flags override the --config file's one by one.
    exp::QuantConfig& q = req.config.quant;
    if (a.given("--qlinear")) q.qlinear = a.quant.qlinear;
    if (a.given("--qlinear-group-size")) q.qlinear_group_size = a.quant.qlinear_group_size;
    if (a.given("--qembedding")) q.qembedding = a.quant.qembedding;
    if (a.given("--qembedding-group-size")) q.qembedding_group_size = a.quant.qembedding_group_size;
    if (a.given("--qlinear-skip")) q.qlinear_skip = a.quant.qlinear_skip;
    if (a.given("--qparams")) q.qparams = a.quant.qparams;
    if (auto st = exp::check_quant_config(q); !st) return fail(st);
  }
  if (a.given("--linear-weights")) {
    auto w = exp::parse_linear_weights(a.linear_weights);
    if (!w) return fail(w.status());
    req.config.linear_weights = *w;
  }
  if (a.given("--alloc-graph-input")) req.config.alloc_graph_input = a.alloc_input;
  if (a.given("--alloc-graph-output")) req.config.alloc_graph_output = a.alloc_output;
  if (a.given("--alloc-mutable-buffers")) req.config.alloc_mutable_buffers = a.alloc_buffers;
  for (const auto& d : a.dims) {
    std::string name;
    auto b = parse_dim(d, &name);
    if (!b) return fail(b.status());
    req.config.dims[name] = *b;
  }
  if (!a.dump_graph.empty() && a.dump_graph != "all") {
    const auto& names = exp::pipeline_stage_names();
    if (std::find(names.begin(), names.end(), a.dump_graph) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return fail(make_error(ErrorCode::kInvalidArgument, "unknown --dump-graph stage '{}'; expected all or one of: {}", a.dump_graph, list));
    }
  }
  req.config.dump_graph_stage = a.dump_graph;
  if (a.validate && a.no_validate) return fail(make_error(ErrorCode::kInvalidArgument, "--validate and --no-validate exclude each other"));
  if (a.validate) req.config.validate = exp::ExportConfig::Validate::kAlways;
  if (a.no_validate) req.config.validate = exp::ExportConfig::Validate::kNever;
  req.config.verbose = a.verbose;
  req.embed_tokenizer = a.embed_tokenizer;
  req.on_text = [](const std::string& s) { std::fputs(s.c_str(), stdout); };
  req.cancel = &g_interrupted;
  install_interrupt_handlers();
  req.on_warning = [&](const std::string& s) {
    if (!a.quiet) std::fprintf(stderr, "hf2pte: warning: %s\n", s.c_str());
  };
  // Progress only for humans: a terminal on stderr, and not --quiet.
  const bool show_progress = !a.quiet && isatty(STDERR_FILENO);
  auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  req.on_progress = [&](const exp::ExportProgress& p) {
    if (!show_progress) return;
    auto now = std::chrono::steady_clock::now();
    double dt = std::chrono::duration<double>(now - t0).count();
    if (p.stage == "write") {
      if (now - last < std::chrono::milliseconds(100) && p.bytes_written < p.bytes_total) return;
      last = now;
      double rate = dt > 0 ? double(p.bytes_written) / dt : 0;
      double eta = rate > 0 ? double(p.bytes_total - p.bytes_written) / rate : 0;
      std::fprintf(stderr, "\r\033[K[write] %s / %s  %s/s  ETA %.0fs", human_bytes(double(p.bytes_written)).c_str(),
                   human_bytes(double(p.bytes_total)).c_str(), human_bytes(rate).c_str(), eta);
    } else {
      std::fprintf(stderr, "\r\033[K[%s] %.1fs", p.stage.c_str(), dt);
    }
  };
  // A non-default context or dim range changes the KV cache, the tables and the
  // arena: say what that costs before the weights stream (issue #14).
  if (!a.quiet && (req.config.max_seq_len || !req.config.dims.empty())) {
    req.on_estimate = [&](const exp::ExportEstimate& e) {
      if (show_progress) std::fputs("\r\033[K", stderr);
      std::fprintf(stderr, "hf2pte: max_seq_len %lld: output file %s (%llu bytes), arena %s (%llu bytes) at run time\n",
                   static_cast<long long>(e.max_seq_len), human_bytes(double(e.file_bytes)).c_str(),
                   static_cast<unsigned long long>(e.file_bytes), human_bytes(double(e.arena_bytes)).c_str(),
                   static_cast<unsigned long long>(e.arena_bytes));
    };
  }
  // Threads only change how fast validation runs: the file is the same bytes.
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  auto s = exp::export_model(req);
  if (show_progress) std::fputs("\r\033[K", stderr);
  if (!s) return fail(s.status());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.report_file.empty()) {
    auto report = s->report;
    report["seconds"] = secs;
    report["peak_rss_bytes"] = uint64_t(peak_rss_mib() * 1024 * 1024);
    std::string tmp = a.report_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    std::string text = report.dump(2) + "\n";
    bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (f != nullptr && std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), a.report_file.c_str()) != 0) {
      std::remove(tmp.c_str());
      return fail(make_error(ErrorCode::kIoError, "cannot write the report ({})", a.report_file));
    }
  }
  if (!a.quiet) {
    std::fprintf(stderr, "hf2pte: wrote %s: %s, %zu method (+%zu constant), %zu instructions, %zu ops, arena %s, %.2f s, peak RSS %s\n",
                 a.output.c_str(), human_bytes(double(s->file_size)).c_str(), s->methods, s->constant_methods,
                 s->instructions, s->operators, human_bytes(double(s->arena_bytes)).c_str(), secs,
                 human_bytes(peak_rss_mib() * 1024 * 1024).c_str());
  }
  return 0;
}

// ---- run ----

struct RunArgs {
  std::string pte, method = "forward", output_dir;
  std::vector<std::string> inputs;
  int64_t max_instructions = rt::kMaxInstructions;
};

int run_run(const RunArgs& a) {
  if (a.max_instructions < 1) {
    return fail(make_error(ErrorCode::kInvalidArgument, "--max-instructions must be at least 1; got {} (command line)",
                           a.max_instructions));
  }
  rt::set_max_instructions(a.max_instructions);
  auto program = rt::Program::load(a.pte);
  if (!program) return fail(program.status());
  auto method = (*program)->load_method(a.method, optimized_registry());
  if (!method) return fail(method.status());
  auto& m = **method;
  // alloc_mutable_buffers=false: the KV caches start as zeros in our memory.
  auto kv = rt::bind_zeroed_mutable_buffers(m);
  if (!kv) return fail(kv.status());
  if (a.inputs.size() != m.num_inputs()) {
    return fail(make_error(ErrorCode::kInvalidArgument, "method {} takes {} inputs; got {} --input files (command line)",
                           a.method, m.num_inputs(), a.inputs.size()));
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    auto t = read_npy(a.inputs[i]);
    if (!t) return fail(t.status());
    if (auto st = m.set_input(i, *t); !st) return fail(st.with_context(a.inputs[i]));
  }
  if (auto st = m.execute(); !st) return fail(st);
  std::error_code ec;
  std::filesystem::create_directories(a.output_dir, ec);
  if (ec) return fail(make_error(ErrorCode::kIoError, "cannot create output directory: {} ({})", ec.message(), a.output_dir));
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    HostTensor out;
    const auto& v = m.output(i);
    if (v.is_tensor()) {
      auto t = m.output_tensor(i);
      if (!t) return fail(t.status());
      out = std::move(*t);
    } else if (v.is_int() || v.is_bool()) {
      out = HostTensor::from(v.is_bool() ? ScalarType::kBool : ScalarType::kLong, {}, std::vector<int64_t>{v.i});
      if (v.is_bool()) out.bytes.resize(1);
    } else if (v.is_double()) {
      out = HostTensor::from(ScalarType::kDouble, {}, std::vector<double>{v.d});
    } else {
      return fail(make_error(ErrorCode::kNotSupported, "output {} is a {} and cannot be written as .npy", i, rt::tag_name(v.tag)));
    }
    auto path = (std::filesystem::path(a.output_dir) / fmt::format("output_{}.npy", i)).string();
    if (auto st = write_npy(path, out); !st) return fail(st);
  }
  return 0;
}

// ---- inspect ----

int run_inspect(const std::string& path, bool json) {
  auto f = pte::PteFile::open(path);
  if (!f) return fail(f.status());
  // Delegates we can decode also show their node counts.
  pte::InspectOptions opts;
  opts.describe_delegate = [](std::string_view id, std::span<const uint8_t> payload, const pte::PteFile& file) {
    return backends::describe_payload(id, payload, file);
  };
  const auto j = pte::inspect_json(**f, opts);
  std::fputs(json ? (j.dump(2) + "\n").c_str() : pte::inspect_text(**f, opts).c_str(), stdout);
  // The description covers broken files too, but a delegate whose data or
  // payload does not validate makes the file bad input: the exit says so.
  for (const auto& m : j["methods"]) {
    if (!m.contains("delegates")) continue;
    for (const auto& d : m["delegates"]) {
      // Payloads of backends we do not know are shown as opaque, not refused.
      const bool known = backends::is_builtin_backend(d["id"].get<std::string>());
      for (const char* key : {"error", "nodes_error"}) {
        if (!d.contains(key) || (!known && std::string_view(key) == "nodes_error")) continue;
        return fail(make_error(ErrorCode::kInvalidProgram, "delegate payload is invalid: {}", d[key].get<std::string>())
                        .with_context(fmt::format("{}, method {}, delegate {}", path, m["name"].get<std::string>(),
                                                  d["index"].dump())));
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace hf2pte

int main(int argc, char** argv) {
  using namespace hf2pte;
  // Explicit, so static linking cannot drop the backend (xnnpack_backend.h).
  if (auto st = backends::register_builtin_backends(); !st) return fail(st);
  CLI::App app{"hf2pte: Hugging Face checkpoints to ExecuTorch programs, and a runtime for them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hf2pte " HF2PTE_VERSION);

  ExportArgs ea;
  auto* ex = app.add_subcommand("export", "export a checkpoint folder to a .pte file");
  ex->add_option("model_dir", ea.model_dir, "Hugging Face checkpoint folder")->required();
  ex->add_option("-o,--output", ea.output, "output .pte file")->required();
  ex->add_option("--backend", ea.backend,
                 "xnnpack (default) | portable | cuda (bf16, exported without a GPU; runs on a GPU, or on the CPU "
                 "reference executor with a warning; docs/cuda.md)");
  ex->add_option("--dtype", ea.dtype,
                 "fp32 (default; bf16 for --backend cuda) | bf16 | fp16: the program's float type (weights, activations, "
                 "KV cache); norms, softmax and MoE routing compute in f32, inputs and outputs stay f32 (decoders, "
                 "encoders, ViT/ResNet, Whisper); with xnnpack, fp16 programs are XNNPACK fp16 graphs and bf16 ones "
                 "delegate only their f32 parts");
  ex->add_option("--max-seq-len", ea.max_seq_len, "maximum sequence length (KV cache size)");
  ex->add_option("--attention-span", ea.attention_span,
                 "written (default for decoders with a KV cache, except --backend cuda and --use-custom-sdpa): attend "
                 "only over positions [0, last written + 1) | full: over the whole static KV cache, masked");
  ex->add_option("--logits", ea.logits,
                 "all (default): forward returns logits[1, S, V] | last: logits[1, 1, V] of the last position only "
                 "(decoders: the lm_head runs on one row per prefill; enough to generate, not to score every position)");
  ex->add_option("--linear-weights", ea.linear_weights,
                 "fp32 (default) | fp16: store the linear layers' weights (XNNPACK FullyConnected filters) as fp16, "
                 "half the bytes read per token; activations stay fp32 (xnnpack backend)");
  ex->add_option("--qlinear", ea.quant.qlinear,
                 "quantize linear layers: 8da4w (int8 dynamic activations x int4 weights) | 8da8w | 4w | 8w (weight-only) | "
                 "8da4w,8da8w (8da8w where the group size does not divide in_features)");
  ex->add_option("--qlinear-group-size", ea.quant.qlinear_group_size, "weights per scale along in_features (default 32; 0 = per channel)");
  ex->add_option("--qembedding", ea.quant.qembedding, "quantize embeddings: 8w | 4w (weight-only)");
  ex->add_option("--qembedding-group-size", ea.quant.qembedding_group_size, "weights per scale along a row (default 0 = per row)");
  ex->add_option("--qlinear-skip", ea.quant.qlinear_skip, "keep linear layers matching PATTERN in float (substring, or a glob), e.g. lm_head");
  ex->add_option("--qparams", ea.quant.qparams,
                 "how scales are chosen: hqq (default; deterministic on every machine) | affine (torchao's max-abs)");
  ex->add_option("--threads", ea.threads, "kernel threads for quantization and validation (default: all cores; the file does not change)");
  ex->add_flag("--use-custom-sdpa", ea.use_custom_sdpa,
               "decoders: upstream's llama::update_cache + llama::custom_sdpa (optimum-executorch's --use_custom_sdpa "
               "--use_custom_kv_cache): attention reads only the written cache rows, in place; the upstream runtime "
               "needs extension/llm/custom_ops linked");
  ex->add_flag("--no-kv-cache", ea.no_kv_cache,
               "export without a KV cache: forward(input_ids[1, S]) -> logits[1, S, V] at positions 0..S-1 (scoring, "
               "perplexity); generate then recomputes the whole prefix every step");
  ex->add_option("--alloc-graph-input", ea.alloc_input, "plan memory for inputs (true|false)");
  ex->add_option("--alloc-graph-output", ea.alloc_output, "plan memory for outputs (true|false)");
  ex->add_option("--alloc-mutable-buffers", ea.alloc_buffers, "plan memory for mutable buffers (true|false); false leaves the KV caches to the caller (Method::set_mutable_buffer; run/generate bind zeroed memory)");
  ex->add_option("--dim", ea.dims, "dynamic dim bounds NAME=MIN:MAX (MAX may be empty)");
  ex->add_option("--config", ea.config_file, "export config JSON (flags given on the command line override it)");
  ex->add_flag("--validate", ea.validate, "always compare the program with the reference interpreter");
  ex->add_flag("--no-validate", ea.no_validate, "skip the comparison with the reference interpreter");
  ex->add_option("--report", ea.report_file, "write what every stage did, timings and operator counts as JSON");
  ex->add_option("--dump-graph", ea.dump_graph, "print the graph after STAGE (or all)");
  ex->add_flag("--quiet", ea.quiet, "no progress, warnings or summary");
  ex->add_flag("--verbose", ea.verbose, "print what every stage did");
  ex->add_flag("--embed-tokenizer,!--no-embed-tokenizer", ea.embed_tokenizer,
               "store the checkpoint's tokenizer files in the .pte (default on)");
  // Runs while parsing, before the required model_dir/-o are checked, so it works on its own.
  ex->add_flag_callback(
      "--list-architectures",
      [] {
        for (const auto& arch : models::all_architectures()) {
          std::printf("%-14s %-24s %s\n", std::string(arch.model_type).c_str(), std::string(arch.architecture).c_str(),
                      std::string(models::arch_status_name(arch.status)).c_str());
        }
        for (const auto& enc : models::all_encoder_architectures()) {  // encoder programs (docs/llm-contract.md)
          std::printf("%-14s %s, %s (encoder)\n", std::string(enc.model_type).c_str(), std::string(enc.mlm_class).c_str(),
                      std::string(enc.base_class).c_str());
        }
        for (const auto& v : models::all_vision_architectures()) {  // image classifiers (docs/vision.md)
          std::printf("%-14s %-24s verified against reference fixture (image classifier)\n",
                      std::string(v.model_type).c_str(), std::string(v.architecture).c_str());
        }
        throw CLI::Success();
      },
      "print every supported model_type and its Hugging Face class, then exit");

  RunArgs ra;
  auto* run = app.add_subcommand("run", "execute a method on .npy inputs");
  run->add_option("pte", ra.pte, ".pte file")->required();
  run->add_option("--method", ra.method, "method name (default forward)");
  run->add_option("--input", ra.inputs, "input .npy file, once per input in order");
  run->add_option("--output-dir", ra.output_dir, "where output_<i>.npy are written")->required();
  run->add_option("--max-instructions", ra.max_instructions,
                  "stop the method with an error after this many instructions (default 10000000): a program "
                  "whose jumps never end cannot hang the caller");

  std::string inspect_path;
  bool inspect_json = false;
  auto* ins = app.add_subcommand("inspect", "show what a .pte file holds");
  ins->add_option("pte", inspect_path, ".pte file")->required();
  ins->add_flag("--json", inspect_json, "machine-readable output");

  cli::GenerateArgs ga;
  auto* gen = cli::add_generate_command(app, ga);
  cli::TokenizeArgs ta;
  auto* tokenize = cli::add_tokenize_command(app, ta);
  cli::BenchArgs ba;
  auto* bench = cli::add_bench_command(app, ba);
  cli::ServeArgs sa;
  auto* serve = cli::add_serve_command(app, sa);
  cli::ClassifyArgs ca;
  auto* classify = cli::add_classify_command(app, ca);
  cli::PreprocessArgs pa;
  auto* preprocess = cli::add_preprocess_command(app, pa);
  cli::TranscribeArgs tra;
  auto* transcribe = cli::add_transcribe_command(app, tra);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // also --help and --help-all (CallForHelp derives from Success)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hf2pte: error: %s (command line)\n", e.what());
    return 2;
  }
  ea.given = [ex](const char* flag) { return ex->count(flag) > 0; };
  if (*ex) return run_export(ea);
  if (*run) return run_run(ra);
  if (*ins) return run_inspect(inspect_path, inspect_json);
  if (*gen) return cli::run_generate(ga);
  if (*tokenize) return cli::run_tokenize(ta);
  if (*bench) return cli::run_bench(ba);
  if (*serve) return cli::run_serve(sa);
  if (*classify) return cli::run_classify(ca);
  if (*preprocess) return cli::run_preprocess(pa);
  if (*transcribe) return cli::run_transcribe(tra);
  return 2;
}
