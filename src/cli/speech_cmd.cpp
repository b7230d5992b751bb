// hf2pte transcribe: a WAV file through the program's feature-extractor
// settings to log-mel features, the encoder once, then greedy decoding from
// the forced start tokens (generation_config.json: decoder_start_token_id,
// forced_decoder_ids, else <|notimestamps|> when it has one; with --language /
// --task on a multilingual model, as transformers' Whisper generate builds
// it: start, language, task, <|notimestamps|>, the language detected from the
// first step when only --task is given), streaming the text; encoder ms and
// decode tokens/s on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "backends/builtin/builtin.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "checkpoint/json_fields.h"
#include "cli/commands.h"
#include "kernels/optimized/kernels.h"
#include "llm/tokenizer/tokenizer.h"
#include "preprocess/audio.h"

namespace hf2pte::cli {

namespace {

Result<int64_t> constant_int(const rt::Program& p, const char* name, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(auto v, constant_output(p, name));
  HF2PTE_CHECK_OR_RETURN(v && v->is_int(), kInvalidProgram, "the program has no {} constant method ({})", name, where);
  return v->i;
}

/// The decoder prompt: decoder_start_token_id, then forced_decoder_ids [[index, id], ...] in index order,
/// or <|notimestamps|> when the generation config names one and forces nothing.
std::vector<int64_t> forced_prompt(int64_t start, const nlohmann::json& gen) {
  std::vector<int64_t> prompt{start};
  auto forced = gen.find("forced_decoder_ids");
  if (forced != gen.end() && forced->is_array() && !forced->empty()) {
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (const auto& p : *forced) {
      if (p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number_integer()) {
        pairs.emplace_back(p[0].get<int64_t>(), p[1].get<int64_t>());
      }
    }
    std::sort(pairs.begin(), pairs.end());
    for (const auto& [index, id] : pairs) {
      if (index == int64_t(prompt.size())) prompt.push_back(id);  // forced positions follow the start token
    }
    return prompt;
  }
  if (auto nt = gen.find("no_timestamps_token_id"); nt != gen.end() && nt->is_number_integer()) prompt.push_back(nt->get<int64_t>());
  return prompt;
}

/// A generation-config map {token: id} (lang_to_id, task_to_id), or an error
/// saying the model has none (English-only checkpoints).
Result<std::map<std::string, int64_t>> token_map(const nlohmann::json& gen, const char* field, const char* flag,
                                                 const std::string& where) {
  auto it = gen.find(field);
  HF2PTE_CHECK_OR_RETURN(it != gen.end() && it->is_object() && !it->empty(), kInvalidArgument,
                         "{} needs a multilingual Whisper: the program's generation config has no {} ({})", flag, field,
                         where);
  std::map<std::string, int64_t> m;
  for (const auto& [k, v] : it->items()) {
    if (v.is_number_integer()) m[k] = v.get<int64_t>();
  }
  return m;
}

/// The id of `want` in `m`, also as "<|want|>"; else an error listing the choices.
Result<int64_t> pick_token(const std::map<std::string, int64_t>& m, const std::string& want, const char* flag,
                           const std::string& where) {
  for (const std::string& key : {want, "<|" + want + "|>"}) {
    if (auto it = m.find(key); it != m.end()) return it->second;
  }
  std::string names;
  for (const auto& [k, v] : m) names += (names.empty() ? "" : ", ") + k;
  return make_error(ErrorCode::kInvalidArgument, "{} '{}' is not one of the model's: {} ({})", flag, want, names, where);
}

}  // namespace

Result<pre::FeatureExtractorConfig> feature_extractor_for(const std::string& path, const rt::Program* program) {
  HF2PTE_ASSIGN_OR_RETURN(ProcessorSource src, processor_config(path, program));
  // A program that stores none gets WhisperFeatureExtractor's defaults.
  if (src.config.is_null()) src.config = nlohmann::json::object();
  HF2PTE_ASSIGN_OR_RETURN(pre::FeatureExtractorConfig c, pre::parse_feature_extractor(src.config, src.where));
  if (program == nullptr || std::filesystem::is_directory(path)) return c;
  // The program's own input size wins: the audio is padded / trimmed to its frames.
  HF2PTE_ASSIGN_OR_RETURN(int64_t frames, constant_int(*program, "get_n_frames", path));
  HF2PTE_ASSIGN_OR_RETURN(c.feature_size, constant_int(*program, "get_num_mel_bins", path));
  c.n_samples = frames * c.hop_length;
  return c;
}

CLI::App* add_transcribe_command(CLI::App& app, TranscribeArgs& a) {
  auto* c = app.add_subcommand("transcribe", "speech to text with a Whisper program");
  c->add_option("pte", a.pte, ".pte file (Whisper)")->required();
  c->add_option("--audio", a.audio, "16 kHz WAV file (PCM int16 or float32)")->required();
  c->add_option("--language", a.language, "spoken language of a multilingual model (a code such as en, or <|en|>; default: "
                                           "as the stored generation config forces, or detected with --task)");
  c->add_option("--task", a.task, "transcribe or translate (multilingual models; default: as stored)");
  c->add_option("--max-new-tokens", a.max_new_tokens, "tokens to generate at most (default: up to the decoder's length)");
  c->add_option("--tokenizer", a.tokenizer, "tokenizer folder (default: the one embedded in the program; none: print ids)");
  c->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  c->add_flag("--json", a.json, "machine-readable output");
  return c;
}

int run_transcribe(const TranscribeArgs& a) {
  if (auto st = backends::register_builtin_backends(); !st) return fail(st);
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  auto program = rt::Program::load(a.pte);
  if (!program) return fail(program.status());
  auto ed = constant_output(**program, "is_encoder_decoder");
  if (!ed) return fail(ed.status());
  if (!*ed || !(*ed)->is_bool() || (*ed)->i == 0) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "this program is not a speech model (no is_encoder_decoder); transcribe runs programs exported "
                           "from WhisperForConditionalGeneration checkpoints ({})",
                           a.pte));
  }
  auto fe = feature_extractor_for(a.pte, program->get());
  if (!fe) return fail(fe.status());
  auto start = constant_int(**program, "decoder_start_token_id", a.pte);
  if (!start) return fail(start.status());
  auto max_len = constant_int(**program, "get_max_seq_len", a.pte);
  if (!max_len) return fail(max_len.status());
  auto gen_config = constant_json(**program, "get_generation_config", a.pte);
  if (!gen_config) return fail(gen_config.status());
  std::vector<int64_t> eos;
  if (auto e = constant_output(**program, "get_eos_ids"); e && *e && (*e)->is_int()) eos.push_back((*e)->i);
  // The embedded tokenizer, or --tokenizer; a program without one prints ids.
  std::unique_ptr<llm::Tokenizer> tok;
  if (auto t = llm::Tokenizer::load(a.tokenizer.empty() ? a.pte : a.tokenizer); t) {
    tok = std::move(*t);
  } else if (!a.tokenizer.empty()) {
    return fail(t.status());
  }
  auto wav = pre::read_wav(a.audio);
  if (!wav) return fail(wav.status());
  auto features = pre::log_mel_features(*wav, *fe, a.audio);
  if (!features) return fail(features.status());

  auto encoder = (*program)->load_method("encoder", optimized_registry());
  auto decoder = (*program)->load_method("text_decoder", optimized_registry());
  if (!encoder) return fail(encoder.status());
  if (!decoder) return fail(decoder.status());
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = (*encoder)->set_input(0, *features); !st) return fail(st);
  if (auto st = (*encoder)->execute(); !st) return fail(st);
  auto states = (*encoder)->output_tensor(0);
  if (!states) return fail(states.status());
  const auto t1 = std::chrono::steady_clock::now();

  std::vector<int64_t> prompt = forced_prompt(*start, *gen_config);
  std::optional<int64_t> lang_id, task_id;
  std::map<std::string, int64_t> langs;
  if (!a.language.empty() || !a.task.empty()) {
    auto l = token_map(*gen_config, "lang_to_id", a.language.empty() ? "--task" : "--language", a.pte);
    auto t = token_map(*gen_config, "task_to_id", a.task.empty() ? "--language" : "--task", a.pte);
    if (!l) return fail(l.status());
    if (!t) return fail(t.status());
    langs = *l;
    if (!a.language.empty()) {
      auto id = pick_token(langs, a.language, "--language", a.pte);
      if (!id) return fail(id.status());
      lang_id = *id;
    }
    auto id = pick_token(*t, a.task.empty() ? "transcribe" : a.task, "--task", a.pte);
    if (!id) return fail(id.status());
    task_id = *id;
  }
  std::vector<int64_t> out_ids;
  std::string text;
  auto step = [&](const std::vector<int64_t>& ids, int64_t pos) -> Result<int64_t> {
    const int64_t n = int64_t(ids.size());
    std::vector<int64_t> positions(ids.size());
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = pos + i;
    HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(0, HostTensor::from(ScalarType::kLong, {1, n}, ids)));
    HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(1, *states));
    HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(2, HostTensor::from(ScalarType::kLong, {n}, positions)));
    HF2PTE_RETURN_IF_ERROR((*decoder)->execute());
    HF2PTE_ASSIGN_OR_RETURN(HostTensor logits, (*decoder)->output_tensor(0));
    const int64_t V = logits.sizes.back();
    const float* last = logits.data<float>() + (n - 1) * V;
    return int64_t(std::max_element(last, last + V) - last);
  };
  if (task_id) {
    // transformers' order: start, language (given, or the likeliest language
    // token after the start token), task, <|notimestamps|>.
    if (!lang_id) {
      auto detected = [&]() -> Result<int64_t> {
        HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(0, HostTensor::from(ScalarType::kLong, {1, 1}, std::vector<int64_t>{*start})));
        HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(1, *states));
        HF2PTE_RETURN_IF_ERROR((*decoder)->set_input(2, HostTensor::from(ScalarType::kLong, {1}, std::vector<int64_t>{0})));
        HF2PTE_RETURN_IF_ERROR((*decoder)->execute());
        HF2PTE_ASSIGN_OR_RETURN(HostTensor logits, (*decoder)->output_tensor(0));
        const int64_t V = logits.sizes.back();
        int64_t best = -1;
        for (const auto& [name, id] : langs) {
          if (id >= 0 && id < V && (best < 0 || logits.data<float>()[id] > logits.data<float>()[best])) best = id;
        }
        HF2PTE_CHECK_OR_RETURN(best >= 0, kInvalidProgram, "lang_to_id names no token of the {}-token vocabulary ({})", V, a.pte);
        return best;
      }();
      if (!detected) return fail(detected.status());
      lang_id = *detected;
    }
    prompt = {*start, *lang_id, *task_id};
    if (auto nt = gen_config->find("no_timestamps_token_id"); nt != gen_config->end() && nt->is_number_integer()) {
      prompt.push_back(nt->get<int64_t>());
    }
  }
  const int64_t budget = std::min<int64_t>(a.max_new_tokens > 0 ? a.max_new_tokens : *max_len, *max_len - int64_t(prompt.size()));
  int64_t pos = 0;
  auto next = step(prompt, pos);
  pos += int64_t(prompt.size());
  const auto t2 = std::chrono::steady_clock::now();
  while (next && int64_t(out_ids.size()) < budget && std::find(eos.begin(), eos.end(), *next) == eos.end()) {
    out_ids.push_back(*next);
    if (tok && !a.json) {  // stream: print what the new token adds to the decoded text
      const std::string now = tok->decode(out_ids, /*skip_special_tokens=*/true);
      if (now.size() > text.size() && now.compare(0, text.size(), text) == 0) std::fputs(now.c_str() + text.size(), stdout);
      std::fflush(stdout);
      text = now;
    }
    if (pos >= *max_len) break;
    next = step({*next}, pos++);
  }
  if (!next) return fail(next.status());
  const auto t3 = std::chrono::steady_clock::now();
  const double enc_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t3 - t2).count();
  const double tok_s = out_ids.size() > 1 && dec_s > 0 ? double(out_ids.size() - 1) / dec_s : 0.0;
  if (tok) text = tok->decode(out_ids, true);
  if (a.json) {
    nlohmann::ordered_json j;
    j["audio"] = a.audio;
    j["prompt_ids"] = prompt;
    j["ids"] = out_ids;
    if (tok) j["text"] = text;
    j["encoder_ms"] = enc_ms;
    j["decode_tok_s"] = tok_s;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (!tok) {
    for (size_t i = 0; i < out_ids.size(); ++i) std::printf("%s%lld", i ? " " : "", static_cast<long long>(out_ids[i]));
  }
  std::printf("\n");
  std::fprintf(stderr, "encoder %.1f ms, %zu tokens, decode %.1f tok/s%s\n", enc_ms, out_ids.size(), tok_s,
               tok ? "" : " (no tokenizer in the program: ids printed; --tokenizer DIR for text)");
  return 0;
}

}  // namespace hf2pte::cli
