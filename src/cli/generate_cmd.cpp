// hf2pte generate: prompt (text through a tokenizer, or ids) -> streamed text
// or ids, greedy or sampled, with a stats line on stderr.
#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "runtime/weight_store.h"
#include "cli/commands.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "llm/tokenizer/chat_template.h"
#include "llm/tokenizer/tokenizer.h"
#include "runtime/program.h"

namespace hf2pte::cli {
namespace {

// Ctrl-C stops generation cleanly (stats still printed); a second one kills.
std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) {
  g_cancel.store(true);
  std::signal(SIGINT, SIG_DFL);
}

void write_out(const std::string& s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

CLI::App* add_generate_command(CLI::App& app, GenerateArgs& a) {
  auto* gen = app.add_subcommand("generate", "generate text from a prompt with an exported LLM");
  gen->add_option("pte", a.pte, ".pte file")->required();
  a.prompt_opt = gen->add_option("--prompt", a.prompt, "prompt text (needs a tokenizer: embedded or --tokenizer)");
  auto* ids = gen->add_option("--prompt-ids", a.prompt_ids, "comma-separated prompt token ids");
  a.prompt_opt->excludes(ids);
  gen->add_option("--tokenizer", a.tokenizer, "tokenizer folder or file (default: the one embedded in the .pte)");
  gen->add_option("--max-new-tokens", a.max_new_tokens, "tokens to generate (default 32)");
  gen->add_option("--temperature", a.temperature, "0 = greedy (default); > 0 samples");
  gen->add_option("--top-k", a.top_k, "sample from the k most likely tokens (0 = off)");
  gen->add_option("--top-p", a.top_p, "nucleus sampling mass (1 = off)");
  gen->add_option("--min-p", a.min_p, "drop tokens below min-p times the top probability (0 = off)");
  gen->add_option("--repetition-penalty", a.repetition_penalty, "penalty on ids already seen (1 = off)");
  gen->add_option("--seed", a.seed, "PRNG seed (std::mt19937_64); same seed, same output");
  gen->add_flag("--print-ids", a.print_ids, "print the generated token ids instead of text");
  gen->add_flag("--chat", a.chat, "format --prompt as a user turn with the tokenizer's chat_template");
  a.system_opt = gen->add_option("--system", a.system, "with --chat: a system message before the user turn");
  gen->add_option("--template-var", a.template_vars,
                  "with --chat: NAME=VALUE passed to the chat template, as apply_chat_template(**kwargs) (repeatable; "
                  "VALUE is JSON when it parses, else a string), e.g. enable_thinking=false")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);  // one NAME=VALUE per flag: a following positional stays positional
  gen->add_option("--chat-template", a.chat_template,
                  "with --chat: a Jinja file, or 'chatml', instead of the tokenizer's chat_template");
  gen->add_flag("--print-prompt", a.print_prompt, "print the prompt text (the rendered chat template with --chat) and exit");
  gen->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  gen->add_flag("--huge-pages", a.huge_pages, kHugePagesHelp);
  return gen;
}

Status refuse_encoder(const rt::Program& program, const char* command, const std::string& path) {
  // Encoder programs (docs/llm-contract.md, "Encoder programs") have no next-token logits.
  auto names = program.method_names();
  if (std::find(names.begin(), names.end(), "is_encoder") == names.end()) return Status::ok();
  auto m = program.load_method("is_encoder", portable_registry());
  if (m && (*m)->execute() && (*m)->num_outputs() > 0 && (*m)->output(0).is_bool() && (*m)->output(0).i != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "this program is an encoder (forward(input_ids, attention_mask) -> hidden states), not a causal "
                      "LM; {} cannot run it, use hf2pte run ({})",
                      command, path);
  }
  return Status::ok();
}

void apply_huge_pages(bool on) {
  if (on) rt::set_weight_placement(rt::WeightPlacement::kHugePages);
}

int run_generate(const GenerateArgs& a) {
  apply_huge_pages(a.huge_pages);
  const bool text_prompt = a.prompt_opt != nullptr && a.prompt_opt->count() > 0;
  if (!text_prompt && a.prompt_ids.empty()) {
    return fail(make_error(ErrorCode::kInvalidArgument, "generate needs --prompt TEXT or --prompt-ids 1,2,3 (command line)"));
  }
  if (a.temperature < 0 || a.top_p <= 0 || a.top_p > 1 || a.top_k < 0 || a.min_p < 0 || a.min_p > 1 ||
      a.repetition_penalty <= 0 || a.max_new_tokens < 0) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "sampling flags out of range: need --temperature >= 0, 0 < --top-p <= 1, --top-k >= 0, "
                           "0 <= --min-p <= 1, --repetition-penalty > 0, --max-new-tokens >= 0 (command line)"));
  }
  // The tokenizer: --tokenizer, else the one embedded in the .pte. Needed for
  // --prompt; optional with --prompt-ids (text output when present).
  std::unique_ptr<llm::Tokenizer> tok;
  if (!a.tokenizer.empty()) {
    auto t = llm::Tokenizer::load(a.tokenizer);
    if (!t) return fail(t.status());
    tok = std::move(*t);
  } else if (text_prompt || !a.print_ids) {
    auto t = llm::Tokenizer::load(a.pte);
    if (t) tok = std::move(*t);
    else if (text_prompt) return fail(t.status());
  }
  std::vector<int64_t> prompt;
  if (a.chat && !text_prompt) return fail(make_error(ErrorCode::kInvalidArgument, "--chat needs --prompt (command line)"));
  const bool has_system = a.system_opt != nullptr && a.system_opt->count() > 0;
  if (!a.chat && (has_system || !a.template_vars.empty() || !a.chat_template.empty())) {
    return fail(make_error(ErrorCode::kInvalidArgument, "{} needs --chat (command line)",
                           has_system ? "--system" : !a.template_vars.empty() ? "--template-var" : "--chat-template"));
  }
  if (a.print_prompt && !text_prompt) {
    return fail(make_error(ErrorCode::kInvalidArgument, "--print-prompt needs --prompt (command line)"));
  }
  std::string prompt_text = a.prompt;
  if (a.chat) {
    // As transformers' apply_chat_template(messages, add_generation_prompt=True, **kwargs).
    auto vars = llm::template_vars_json(a.template_vars);
    if (!vars) return fail(vars.status());
    if (tok->chat_template().empty() && a.chat_template.empty()) {
      return fail(make_error(ErrorCode::kNotSupported,
                             "the tokenizer has no chat_template (tokenizer_config.json); give one with --chat-template "
                             "FILE|chatml"));
    }
    bool fallback = false;
    auto tmpl = resolve_chat_template(a.chat_template, tok->chat_template(), &fallback);
    if (!tmpl) return fail(tmpl.status());
    std::vector<llm::ChatMessage> messages;
    if (has_system) messages.push_back({"system", a.system});
    messages.push_back({"user", a.prompt});
    auto r = llm::render_chat_template(*tmpl, messages, /*add_generation_prompt=*/true,
                                       tok->bos_token(), tok->eos_token(), *vars);
    if (!r) return fail(r.status());
    prompt_text = std::move(*r);
  }
  if (a.print_prompt) {  // exactly the text that would be encoded, nothing added
    write_out(prompt_text);
    return 0;
  }
  if (text_prompt) {
    // A rendered chat template already holds its special tokens (BOS included).
    auto ids = tok->encode(prompt_text, /*add_special_tokens=*/!a.chat);
    if (!ids) return fail(ids.status());
    prompt = std::move(*ids);
  } else {
    auto ids = parse_id_list(a.prompt_ids, "--prompt-ids");
    if (!ids) return fail(ids.status());
    prompt = std::move(*ids);
  }
  if (prompt.empty()) return fail(make_error(ErrorCode::kInvalidArgument, "the prompt has no tokens (command line)"));

  auto program = rt::Program::load(a.pte);
  if (!program) return fail(program.status());
  if (auto st = refuse_encoder(**program, "generate", a.pte); !st) return fail(st);
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  auto gen = llm::TextGenerator::create(*program, optimized_registry());
  if (!gen) return fail(gen.status());
  if (!(*gen)->has_kv_cache()) {
    std::fprintf(stderr, "hf2pte: warning: the program has no KV cache (use_kv_cache = false); every step recomputes "
                         "the whole prefix, so generation slows down as the text grows (%s)\n", a.pte.c_str());
  }
  for (auto id : prompt) {
    if (id < 0 || id >= (*gen)->vocab_size()) {
      return fail(make_error(ErrorCode::kInvalidArgument, "prompt id {} is outside the vocabulary [0, {})", id, (*gen)->vocab_size()));
    }
  }
  llm::GenerationConfig cfg;
  cfg.max_new_tokens = a.max_new_tokens;
  cfg.sampling.temperature = a.temperature;
  cfg.sampling.top_k = a.top_k;
  cfg.sampling.top_p = a.top_p;
  cfg.sampling.min_p = a.min_p;
  cfg.sampling.repetition_penalty = a.repetition_penalty;
  cfg.sampling.seed = a.seed;
  cfg.cancel = &g_cancel;
  std::signal(SIGINT, on_sigint);

  const bool ids_out = a.print_ids || tok == nullptr;
  std::optional<llm::TextStreamer> streamer;
  const auto& eos = (*gen)->eos_ids();
  if (!ids_out) {
    // Echo the prompt, then stream the continuation after it.
    write_out(text_prompt ? a.prompt : tok->decode(prompt, /*skip_special_tokens=*/true));
    streamer.emplace(*tok, prompt.back());
  }
  llm::GenerationStats stats;
  auto ids = (*gen)->generate(prompt, cfg, [&](int64_t id) {
    if (ids_out) {
      std::printf("%lld ", static_cast<long long>(id));
      std::fflush(stdout);
    } else if (std::find(eos.begin(), eos.end(), id) == eos.end()) {  // EOS ends the text, it is not part of it
      write_out(streamer->push(id));
    }
    return true;
  }, &stats);
  if (streamer) write_out(streamer->flush());
  std::printf("\n");
  std::fflush(stdout);
  std::signal(SIGINT, SIG_DFL);
  if (!ids) return fail(ids.status());
  std::fprintf(stderr, "%s\n", stats.summary().c_str());
  return 0;
}

}  // namespace hf2pte::cli
