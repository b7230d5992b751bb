// Subcommands that live in their own files; main.cpp registers them and
// dispatches. Each add_* declares the options, each run_* executes and returns
// the process exit code (errors printed as "hf2pte: error: <what> (<where>)").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "preprocess/audio.h"
#include "runtime/program.h"

namespace hf2pte::cli {

/// --huge-pages (generate, bench): the help text, and applying it before a program loads.
inline constexpr const char* kHugePagesHelp =
    "copy the weights (XNNPACK's linear filters, other constants of 1 MiB or more) into huge pages at load: "
    "slower load, faster decode on large models "
    "(default: read them in place from the file)";
/// serve's: on by default, because a server pays the copy once and decodes for
/// hours (docs/decisions.md, "Huge pages by default for serve").
inline constexpr const char* kServeHugePagesHelp =
    "copy the weights into huge pages at load (default where transparent huge pages are enabled: a server loads "
    "once; bench-1b fp32 decodes 1.3-1.4x faster for 2-5 s more load); --no-huge-pages reads them in place";
void apply_huge_pages(bool on);

/// kInvalidArgument naming `command` when `program` is an encoder (constant
/// method is_encoder true): generate and serve need next-token logits.
Status refuse_encoder(const rt::Program& program, const char* command, const std::string& path);
/// Prints `st` as the one-line CLI error and returns its exit code (2 input, 1 ours).
int fail(const Status& st);

struct TokenizeArgs {
  std::string tokenizer, text, text_file, decode;
  bool no_special = false;
  CLI::Option* text_opt = nullptr;  // set by add_tokenize_command: tells "--text ''" from absent
};
/// `hf2pte tokenize --tokenizer DIR|OUT.pte (--text TEXT | --text-file F | --decode 1,2,3) [--no-special]`
CLI::App* add_tokenize_command(CLI::App& app, TokenizeArgs& a);
int run_tokenize(const TokenizeArgs& a);

struct GenerateArgs {
  std::string pte, prompt, prompt_ids, tokenizer;
  int64_t max_new_tokens = 32;
  double temperature = 0.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool print_ids = false;
  bool chat = false;  ///< wrap --prompt as a user message with the tokenizer's chat template
  std::string system;                      ///< --system: a system message before the user turn (--chat)
  std::vector<std::string> template_vars;  ///< --template-var NAME=VALUE, passed to the chat template
  std::string chat_template;               ///< --chat-template FILE|chatml (default: the tokenizer's)
  bool print_prompt = false;               ///< print the (rendered) prompt text and exit
  bool huge_pages = false;                 ///< --huge-pages: XNNPACK filters copied into huge pages
  int threads = 0;    ///< kernel threads (0: all cores)
  CLI::Option* prompt_opt = nullptr;
  CLI::Option* system_opt = nullptr;  // tells "--system ''" from absent
};
/// `hf2pte generate OUT.pte (--prompt TEXT [--tokenizer DIR] [--chat [--system TEXT] [--template-var NAME=VALUE]...]
///  [--print-prompt] | --prompt-ids 1,2,3) [sampling flags] [--print-ids]`
CLI::App* add_generate_command(CLI::App& app, GenerateArgs& a);
int run_generate(const GenerateArgs& a);

/// Parses "1,2,3" (spaces allowed) into ids.
Result<std::vector<int64_t>> parse_id_list(const std::string& s, const char* flag);

struct BenchArgs {
  std::string pte;
  int prompt_len = 128, gen = 64, threads = 0;
  int encoder_runs = 5;     ///< speech programs: timed encoder runs
  bool huge_pages = false;  ///< --huge-pages (as generate)
};
/// `hf2pte bench OUT.pte [--prompt-len 128] [--gen 64] [--threads N] [--huge-pages]`
CLI::App* add_bench_command(CLI::App& app, BenchArgs& a);
int run_bench(const BenchArgs& a);

/// A constant method's one output, or nullopt when the program has no such method.
Result<std::optional<rt::EValue>> constant_output(const rt::Program& p, const char* name);
/// A Whisper feature extractor: a folder's preprocessor_config.json, or a
/// program's stored one with its own frame count and mel bins.
Result<pre::FeatureExtractorConfig> feature_extractor_for(const std::string& path, const rt::Program* program);
/// A string constant method parsed as JSON (get_id2label, get_generation_config); null when the program has none.
Result<nlohmann::json> constant_json(const rt::Program& p, const char* name, const std::string& where);
/// preprocessor_config.json of a folder, or the one a program stores
/// (get_preprocessor_config; null when it stores none), and where it came from.
struct ProcessorSource {
  nlohmann::json config;
  std::string where;
};
Result<ProcessorSource> processor_config(const std::string& path, const rt::Program* program);
/// Whether the program says is_image_classifier (ViT, ResNet programs).
Result<bool> is_image_classifier(const rt::Program& p);

struct ClassifyArgs {
  std::string pte, image, processor;
  int64_t top_k = 5;
  int threads = 0;
  bool json = false;
};
/// `hf2pte classify M.pte --image F [--top-k 5] [--processor DIR] [--json]`
CLI::App* add_classify_command(CLI::App& app, ClassifyArgs& a);
int run_classify(const ClassifyArgs& a);

struct PreprocessArgs {
  std::string image, audio, processor, output;
};
/// `hf2pte preprocess (--image F | --audio F) --processor DIR|M.pte -o OUT.npy`
CLI::App* add_preprocess_command(CLI::App& app, PreprocessArgs& a);
int run_preprocess(const PreprocessArgs& a);

struct TranscribeArgs {
  std::string pte, audio, tokenizer;
  std::string language, task;  ///< multilingual Whisper: "en" / "<|en|>", "transcribe" / "translate"; "" = as stored
  int64_t max_new_tokens = 0;  ///< 0: up to the decoder's length
  int threads = 0;
  bool json = false;
};
/// `hf2pte transcribe M.pte --audio F.wav [--language L] [--task transcribe|translate] [--max-new-tokens N]
/// [--tokenizer DIR] [--json]`
CLI::App* add_transcribe_command(CLI::App& app, TranscribeArgs& a);
int run_transcribe(const TranscribeArgs& a);

struct ServeArgs {
  std::string pte, host = "127.0.0.1", api_key, model_name, tokenizer, chat_template;
  int port = 8080, slots = 1, max_queue = 64, threads = 0;
  int64_t prefill_chunk = 256;
  size_t max_body_bytes = size_t(1) << 20;
  bool huge_pages = true;  ///< --huge-pages / --no-huge-pages (kServeHugePagesHelp)
};
/// `hf2pte serve OUT.pte [--host H] [--port P] [--slots N] [--max-queue Q] [--api-key KEY] [--threads T] ...`
CLI::App* add_serve_command(CLI::App& app, ServeArgs& a);
int run_serve(const ServeArgs& a);

/// The chat template to render: `flag` is a Jinja file, or "chatml" for the
/// built-in ChatML one; empty means the tokenizer's own, else ChatML (with
/// `*fallback` set so the caller can say so).
Result<std::string> resolve_chat_template(const std::string& flag, const std::string& tokenizer_template, bool* fallback);

}  // namespace hf2pte::cli
