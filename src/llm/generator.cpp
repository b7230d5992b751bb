#include "llm/generator.h"

#include "runtime/method.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

namespace hf2pte::llm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// All Int outputs of a constant method (empty when the method is absent).
Result<std::vector<int64_t>> int_outputs(const rt::Program& program, const rt::KernelRegistry& registry,
                                         const std::string& name) {
  auto names = program.method_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return std::vector<int64_t>{};
  HF2PTE_ASSIGN_OR_RETURN(auto m, program.load_method(name, registry));
  HF2PTE_RETURN_IF_ERROR(m->execute());
  std::vector<int64_t> out;
  for (size_t i = 0; i < m->num_outputs(); ++i) {
    const auto& v = m->output(i);
    if (v.is_int()) out.push_back(v.i);
  }
  return out;
}

/// The Bool output of a constant method (nullopt when the method is absent or not a Bool).
Result<std::optional<bool>> bool_output(const rt::Program& program, const rt::KernelRegistry& registry,
                                        const std::string& name) {
  auto names = program.method_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return std::optional<bool>{};
  HF2PTE_ASSIGN_OR_RETURN(auto m, program.load_method(name, registry));
  HF2PTE_RETURN_IF_ERROR(m->execute());
  if (m->num_outputs() == 0 || !m->output(0).is_bool()) return std::optional<bool>{};
  return std::optional<bool>{m->output(0).i != 0};
}

}  // namespace

Result<std::unique_ptr<TextGenerator>> TextGenerator::create(std::shared_ptr<rt::Program> program,
                                                             const rt::KernelRegistry& registry) {
  auto gen = std::unique_ptr<TextGenerator>(new TextGenerator());
  gen->program_ = program;
  HF2PTE_ASSIGN_OR_RETURN(gen->forward_, program->load_method("forward", registry));
  HF2PTE_ASSIGN_OR_RETURN(gen->kv_storage_, rt::bind_zeroed_mutable_buffers(*gen->forward_));
  HF2PTE_ASSIGN_OR_RETURN(auto max_len, int_outputs(*program, registry, "get_max_seq_len"));
  HF2PTE_ASSIGN_OR_RETURN(auto vocab, int_outputs(*program, registry, "get_vocab_size"));
  HF2PTE_ASSIGN_OR_RETURN(gen->eos_ids_, int_outputs(*program, registry, "get_eos_ids"));
  HF2PTE_ASSIGN_OR_RETURN(auto use_kv_cache, bool_output(*program, registry, "use_kv_cache"));
  // Programs without the metadata: a forward without cache_position has no cache.
  gen->kv_cache_ = use_kv_cache.value_or(gen->forward_->num_inputs() >= 2);
  HF2PTE_ASSIGN_OR_RETURN(auto recurrent, bool_output(*program, registry, "use_recurrent_state"));
  gen->recurrent_state_ = recurrent.value_or(false);
  HF2PTE_CHECK_OR_RETURN(gen->forward_->num_inputs() == (gen->kv_cache_ ? 2u : 1u), kInvalidProgram,
                         "forward takes {} inputs; expected {} for a program with use_kv_cache = {}",
                         gen->forward_->num_inputs(), gen->kv_cache_ ? 2 : 1, gen->kv_cache_);
  if (max_len.empty()) {
    // Programs without metadata: the planned bound of input_ids' sequence dim.
    auto meta = gen->forward_->input_meta(0);
    if (meta.sizes.size() == 2) max_len.push_back(meta.sizes[1]);
  }
  HF2PTE_CHECK_OR_RETURN(!max_len.empty(), kInvalidProgram, "program has no get_max_seq_len and no [1, S] input_ids");
  gen->max_seq_len_ = max_len[0];
  auto out_meta = gen->forward_->output_meta(0);
  gen->vocab_size_ = !vocab.empty() ? vocab[0] : (out_meta.sizes.empty() ? 0 : out_meta.sizes.back());
  return gen;
}

Result<std::vector<float>> TextGenerator::forward(const std::vector<int64_t>& ids, int64_t start) {
  int64_t n = int64_t(ids.size());
  HF2PTE_CHECK_OR_RETURN(n >= 1, kInvalidArgument, "no tokens to run");
  HF2PTE_CHECK_OR_RETURN(start + n <= max_seq_len_, kOutOfRange,
                         "sequence of {} tokens exceeds the program's maximum length {}", start + n, max_seq_len_);
  HF2PTE_CHECK_OR_RETURN(kv_cache_ || start == 0, kInvalidArgument,
                         "a program without a KV cache runs whole sequences from position 0; got start {}", start);
  HF2PTE_RETURN_IF_ERROR(forward_->set_input(0, HostTensor::from(ScalarType::kLong, {1, n}, ids)));
  if (kv_cache_) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = start + i;
    HF2PTE_RETURN_IF_ERROR(forward_->set_input(1, HostTensor::from(ScalarType::kLong, {n}, pos)));
  }
  HF2PTE_RETURN_IF_ERROR(forward_->execute());
  HF2PTE_ASSIGN_OR_RETURN(HostTensor logits, forward_->output_tensor(0));
  // n rows, or the last position's row only (--logits last).
  HF2PTE_CHECK_OR_RETURN(logits.dtype == ScalarType::kFloat && (logits.numel() == n * vocab_size_ || logits.numel() == vocab_size_),
                         kInvalidProgram, "forward returned logits of {} values; expected {} x {} float32 (or the last row's {})",
                         logits.numel(), n, vocab_size_, vocab_size_);
  std::vector<float> out(size_t(logits.numel()));
  std::memcpy(out.data(), logits.bytes.data(), out.size() * sizeof(float));
  return out;
}

Result<TextGenerator::KvState> TextGenerator::new_state() const {
  KvState state;
  for (size_t i = 0; i < forward_->num_mutable_buffers(); ++i) {
    const rt::MutableBufferMeta meta = forward_->mutable_buffer_meta(i);
    HF2PTE_CHECK_OR_RETURN(meta.rebindable, kNotSupported,
                           "mutable buffer {} ({}) shares planned memory with other values, so the program holds one "
                           "sequence only (re-export it with --alloc-mutable-buffers false)",
                           i, meta.name);
    HF2PTE_CHECK_OR_RETURN(meta.nbytes <= rt::max_planned_bytes(), kOutOfRange,
                           "mutable buffer {} ({}) needs {} bytes; more than the {} bytes allowed", i, meta.name,
                           meta.nbytes, rt::max_planned_bytes());
    HF2PTE_ASSIGN_OR_RETURN(rt::AlignedBuffer buf, rt::AlignedBuffer::allocate(meta.nbytes));  // zero-filled
    state.push_back(std::move(buf));
  }
  return state;
}

Status TextGenerator::use_state(KvState& state) {
  HF2PTE_CHECK_OR_RETURN(state.size() == forward_->num_mutable_buffers(), kInvalidArgument,
                         "a KV state of {} buffers for a forward with {} mutable buffers", state.size(),
                         forward_->num_mutable_buffers());
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].size() == 0) continue;  // an empty buffer has nothing to move
    HF2PTE_RETURN_IF_ERROR(forward_->set_mutable_buffer(i, state[i].data(), state[i].size()));
  }
  return Status::ok();
}

std::string GenerationStats::summary() const {
  return fmt::format("prompt tokens {}, prefill {:.1f} tok/s, generated tokens {}, decode {:.1f} tok/s, time to first token {:.3f} s",
                     prompt_tokens, prefill_tokens_per_second(), generated_tokens, decode_tokens_per_second(),
                     time_to_first_token);
}

Result<std::vector<int64_t>> TextGenerator::generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                                     const std::function<bool(int64_t)>& on_token,
                                                     GenerationStats* stats) {
  HF2PTE_CHECK_OR_RETURN(!prompt.empty(), kInvalidArgument, "the prompt is empty");
  HF2PTE_CHECK_OR_RETURN(int64_t(prompt.size()) <= max_seq_len_, kOutOfRange,
                         "the prompt has {} tokens; the program's context holds at most {} (export with a larger --max-seq-len)",
                         prompt.size(), max_seq_len_);
  GenerationStats st;
  st.prompt_tokens = int64_t(prompt.size());
  Sampler sampler(config.sampling);
  std::vector<int64_t> history = prompt;  // for the repetition penalty; without a cache, every step's input
  auto pick = [&](const std::vector<float>& logits, int64_t row) {
    return sampler.sample(std::span<const float>(logits.data() + row * vocab_size_, size_t(vocab_size_)), history);
  };
  auto cancelled = [&] { return config.cancel != nullptr && config.cancel->load(std::memory_order_relaxed); };
  std::vector<int64_t> out;
  auto finish = [&](const char* reason, std::chrono::steady_clock::time_point t1) {
    st.decode_seconds = seconds_since(t1);
    st.generated_tokens = int64_t(out.size());
    st.stop_reason = reason;
    if (stats) *stats = st;
    return out;
  };
  auto t0 = std::chrono::steady_clock::now();
  if (config.max_new_tokens <= 0 || cancelled()) return finish(config.max_new_tokens <= 0 ? "max_new_tokens" : "cancelled", t0);
  HF2PTE_ASSIGN_OR_RETURN(auto logits, forward(prompt, 0));
  st.prefill_seconds = seconds_since(t0);
  int64_t next = pick(logits, int64_t(logits.size()) / vocab_size_ - 1);  // the last row
  int64_t pos = int64_t(prompt.size());
  auto t1 = std::chrono::steady_clock::now();
  while (true) {
    out.push_back(next);
    history.push_back(next);
    if (out.size() == 1) st.time_to_first_token = seconds_since(t0);
    if (on_token && !on_token(next)) return finish("callback", t1);
    bool eos = std::find(eos_ids_.begin(), eos_ids_.end(), next) != eos_ids_.end();
    if (config.stop_at_eos && eos) return finish("eos", t1);
    if (int64_t(out.size()) >= config.max_new_tokens) return finish("max_new_tokens", t1);
    if (pos >= max_seq_len_) return finish("context", t1);
    if (cancelled()) return finish("cancelled", t1);
    if (kv_cache_) {
      HF2PTE_ASSIGN_OR_RETURN(logits, forward({next}, pos));
      next = pick(logits, 0);
    } else {  // no cache: the whole sequence again, the last row is the next token's
      HF2PTE_ASSIGN_OR_RETURN(logits, forward(history, 0));
      next = pick(logits, int64_t(logits.size()) / vocab_size_ - 1);
    }
    ++pos;
  }
}

}  // namespace hf2pte::llm
