#include <fstream>
#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <span>
#include <set>
#include <thread>
#include <vector>

#include "backends/xnnpack/runtime/xnn_payload.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "core/peak_memory.h"
#include "kernels/optimized/simd_kernels.h"
#include "ops/op_table.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "runtime/weight_store.h"

namespace hf2pte::bench {

namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

/// Two float 1.0s: the probe buffers hold normal floats (denormals would slow the sums down).
constexpr uint64_t kProbeFill = 0x3F8000003F800000ull;

std::string cpu_model() {
  // "model name" alone does not tell CPUs apart ("AMD EPYC" is Zen 3 and Zen 4
  // here): add the family / model numbers and the vector extensions the
  // kernels pick between.
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family, model, flags;
  auto value = [&](const std::string& l) {
    const size_t colon = l.find(':');
    return colon == std::string::npos || colon + 2 > l.size() ? std::string() : l.substr(colon + 2);
  };
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model", 0) == 0 && model.empty()) model = value(line);
  }
  if (line.rfind("flags", 0) == 0) flags = " " + value(line) + " ";
  std::string isa;
  for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile"}) {
    if (flags.find(" " + std::string(f) + " ") != std::string::npos) isa += (isa.empty() ? "" : " ") + std::string(f);
  }
  std::string out = name;
  if (!family.empty()) out += " (family " + family + ", model " + model + (isa.empty() ? "" : "; " + isa) + ")";
  return out;
}

ProbeBuffer::ProbeBuffer(size_t bytes) {
  words_ = std::max<size_t>(bytes / sizeof(uint64_t), 1);
  auto m = rt::map_huge_pages(words_ * sizeof(uint64_t));
  if (m.is_ok()) {
    memory_ = std::move(m->owner);
    data_ = static_cast<uint64_t*>(m->data);
  } else {  // ordinary heap memory then
    fallback_.resize(words_);
    data_ = fallback_.data();
  }
  std::fill(data_, data_ + words_, kProbeFill);  // every page touched before timing
}

double measure_read_bandwidth(int threads, size_t bytes) {
  ProbeBuffer buf(bytes);
  return measure_read_bandwidth(threads, buf.words(), 5);
}

namespace {

/// Sum of a thread's `n` floats read as `streams` interleaved sequential
/// streams (16 KiB from each in turn). Kernels that read two panel streams at
/// once get more misses in flight than one stream does (on an AMD Zen 3 the
/// quantized GEMVs read 24 GB/s where one stream summed 21.5), so the probe
/// tries 1, 2 and 4 and keeps the best: no kernel may read faster than it.
float sum_streams(const float* p, int64_t n, int streams) {
  constexpr int64_t kBlock = 4096;
  const int64_t per = n / streams;
  float total = 0;
  for (int64_t b = 0; b < per; b += kBlock) {
    for (int s = 0; s < streams; ++s) {
      total += kernels::simd().sum_row(p + s * per + b, std::min(kBlock, per - b));
    }
  }
  return total;
}

}  // namespace

double measure_read_bandwidth(int threads, std::span<const uint64_t> buf, int reps) {
  threads = std::max(threads, 1);
  double best = 0;
  std::vector<uint64_t> sums(size_t(threads) * 8);
  constexpr int kStreams[] = {1, 2, 4};
  for (int rep = 0; rep < std::max(reps, 3); ++rep) {
    const int streams = kStreams[rep % 3];
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    size_t chunk = buf.size() / size_t(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        // The widest loads the CPU has (the kernel table's streaming sum).
        const auto* p = reinterpret_cast<const float*>(buf.data() + size_t(t) * chunk);
        sums[size_t(t) * 8] = uint64_t(sum_streams(p, int64_t(chunk * 2), streams));  // padded: no false sharing
      });
    }
    for (auto& th : pool) th.join();
    best = std::max(best, double(chunk * size_t(threads) * sizeof(uint64_t)) / seconds(t0) / 1e9);
  }
  return best;
}

namespace {

/// Named-data key -> element count, from the XNNPACK payloads' constant values.
Result<std::map<std::string, uint64_t>> named_weight_elements(const pte::PteFile& file,
                                                              const executorch_flatbuffer::ExecutionPlan& plan) {
  std::map<std::string, uint64_t> elements;
  if (plan.delegates() == nullptr) return elements;
  for (const auto* d : *plan.delegates()) {
    if (d->id() == nullptr || d->id()->str() != xnn::kXnnpackBackendId || d->processed() == nullptr) continue;
    HF2PTE_ASSIGN_OR_RETURN(auto payload, file.delegate_data(*d->processed()));
    HF2PTE_ASSIGN_OR_RETURN(auto v, xnn::verify_payload(payload));
    const auto* values = v.graph->xvalues();
    const auto* table = v.graph->constant_data();
    if (values == nullptr || table == nullptr) continue;
    for (const auto* xv : *values) {
      // Quantized filters (qcint8 / qcint4 / qbint4) count their logical
      // elements; their scale buffers ("scale_...") are bytes read, not weights.
      const auto* t = xv->xvalue_union_as_XNNTensorValue();
      if (const auto* q = xv->xvalue_union_as_XNNQuantizedTensorValue(); q != nullptr) {
        t = q->tensor_value();
        if (const auto* pc = q->quant_params_as_PerChannelQuant(); pc != nullptr && table != nullptr &&
                                                                   pc->scale_buffer_idx() < table->size() &&
                                                                   table->Get(pc->scale_buffer_idx())->named_key()) {
          elements[table->Get(pc->scale_buffer_idx())->named_key()->str()] = 0;
        }
        if (const auto* pg = q->quant_params_as_PerChannelGroupQuant(); pg != nullptr && table != nullptr &&
                                                                        pg->scale_buffer_idx() < table->size() &&
                                                                        table->Get(pg->scale_buffer_idx())->named_key()) {
          elements[table->Get(pg->scale_buffer_idx())->named_key()->str()] = 0;
        }
      }
      if (t == nullptr || t->constant_buffer_idx() == 0 || t->constant_buffer_idx() >= table->size() || t->dims() == nullptr) continue;
      const auto* entry = table->Get(t->constant_buffer_idx());
      if (entry->named_key() == nullptr) continue;
      uint64_t n = 1;
      for (uint32_t dim : *t->dims()) n *= dim;
      elements[entry->named_key()->str()] = n;
    }
  }
  return elements;
}

}  // namespace

Result<WeightTraffic> weights_per_token(const std::string& pte_path) {
  namespace fb = executorch_flatbuffer;
  HF2PTE_ASSIGN_OR_RETURN(auto file, pte::PteFile::open(pte_path));
  const fb::ExecutionPlan* forward = nullptr;
  for (const auto* ep : *file->program().execution_plan()) {
    if (ep->name() && ep->name()->str() == "forward") forward = ep;
  }
  HF2PTE_CHECK_OR_RETURN(forward != nullptr, kNotFound, "no forward method ({})", pte_path);
  std::set<int> seen;
  WeightTraffic total;
  bool delegated = false;
  for (const auto* chain : *forward->chains()) {
    for (const auto* ins : *chain->instructions()) {
      if (ins->instr_args_as_DelegateCall() != nullptr) delegated = true;
      const auto* call = ins->instr_args_as_KernelCall();
      if (call == nullptr || call->args() == nullptr) continue;
      std::string op;
      if (call->op_index() >= 0 && uint32_t(call->op_index()) < forward->operators()->size()) {
        op = forward->operators()->Get(uint32_t(call->op_index()))->name()->str();
      }
      for (int a : *call->args()) {
        if (a < 0 || uint32_t(a) >= forward->values()->size() || !seen.insert(a).second) continue;
        const auto* t = forward->values()->Get(uint32_t(a))->val_as_Tensor();
        if (t == nullptr || t->data_buffer_idx() == 0 || t->allocation_info() != nullptr || t->sizes() == nullptr) continue;
        uint64_t n = 1;
        for (auto s : *t->sizes()) n *= uint64_t(std::max(s, 0));
        // Lookups read one row per token, not the whole table.
        bool lookup = op == "aten::embedding" || op == "aten::index_select" ||
                      op == "quantized_decomposed::embedding_byte" || op == "quantized_decomposed::embedding_4bit";
        if (lookup && t->sizes()->size() >= 1 && t->sizes()->Get(0) > 0) n /= uint64_t(t->sizes()->Get(0));
        total.elements += n;
        total.bytes += n * element_size(ScalarType(t->scalar_type()));
      }
    }
  }
  // Delegates (XNNPACK) keep their weights in named_data, one segment per
  // distinct key (deduplicated by content hash): a delegated forward reads
  // every one of them per step. Embedding tables stay portable constants.
  // Embedded tokenizer files ("tokenizer/...") are named data too, not weights.
  if (const auto* named = file->program().named_data(); delegated && named != nullptr) {
    HF2PTE_ASSIGN_OR_RETURN(auto elements, named_weight_elements(*file, *forward));
    std::set<uint32_t> segments;
    for (const auto* entry : *named) {
      if (entry->key() == nullptr || entry->key()->str().rfind("tokenizer/", 0) == 0) continue;
      if (!segments.insert(entry->segment_index()).second) continue;
      HF2PTE_ASSIGN_OR_RETURN(auto bytes, file->segment(entry->segment_index()));
      total.bytes += bytes.size();
      auto it = elements.find(entry->key()->str());
      total.elements += it != elements.end() ? it->second : bytes.size() / sizeof(float);
    }
  }
  return total;
}

Result<BenchResult> run_llm_bench(const std::string& pte_path, const BenchOptions& o, const rt::KernelRegistry& kernels) {
  BenchResult r;
  r.threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  // The bandwidth is measured before and after the timed steps and the higher
  // figure kept: the share of the limit is never flattered by a slow probe.
  // The first probe runs before the program is loaded, and the peak-RSS mark
  // is reset after it, so the peak reported is the program's, not the probe's.
  double bandwidth = measure_read_bandwidth(r.threads);
  reset_peak_rss();
  HF2PTE_ASSIGN_OR_RETURN(auto program, rt::Program::load(pte_path));
  HF2PTE_ASSIGN_OR_RETURN(auto method, program->load_method("forward", kernels));
  HF2PTE_ASSIGN_OR_RETURN(auto kv_buffers, rt::bind_zeroed_mutable_buffers(*method));  // unplanned KV caches
  auto meta = method->input_meta(0);
  HF2PTE_CHECK_OR_RETURN(meta.sizes.size() == 2 && method->num_inputs() == 2, kInvalidProgram,
                         "bench needs an LLM program with a KV cache: forward(input_ids[1, S], cache_position[S]); "
                         "a --no-kv-cache program has no decode step to measure ({})",
                         pte_path);
  const int64_t max_len = meta.sizes[1];
  r.prompt_len = int(std::min<int64_t>(o.prompt_len, max_len - 1));
  r.gen = int(std::min<int64_t>(o.gen, max_len - r.prompt_len));
  HF2PTE_CHECK_OR_RETURN(r.prompt_len >= 1 && r.gen >= 1, kInvalidArgument, "prompt length and generated tokens must be at least 1");
  auto step = [&](int64_t start, int64_t n) { return run_llm_step(*method, start, n); };
  // First step, untimed in the rates: it pages the mapped weights in and sizes
  // every buffer. The prefill then rewrites position 0 of the cache.
  auto tw = std::chrono::steady_clock::now();
  HF2PTE_RETURN_IF_ERROR(step(0, 1));
  r.first_step_seconds = seconds(tw);
  // The first prefill also faults in its buffers (the scratch arena grows to
  // the prompt's activations, the planned logits are touched): reported on
  // its own. The rate is the mean of warm prefills after it, as llama-bench
  // times its repetitions after a warm-up run.
  auto t0 = std::chrono::steady_clock::now();
  HF2PTE_RETURN_IF_ERROR(step(0, r.prompt_len));
  r.cold_prefill_seconds = seconds(t0);
  r.prefill_runs = 2;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < r.prefill_runs; ++i) HF2PTE_RETURN_IF_ERROR(step(0, r.prompt_len));
  r.prefill_seconds = seconds(t0) / r.prefill_runs;
  HF2PTE_ASSIGN_OR_RETURN(WeightTraffic w, weights_per_token(pte_path));
  r.weight_bytes_per_token = w.bytes;
  r.weight_elements_per_token = w.elements;
  // Peak memory of load, prefill and a decode step; later steps reuse that
  // memory, and the probe buffer below is the benchmark's, not the program's.
  r.peak_rss_mib = peak_rss_mib();
  // Decode in blocks, each right after a short probe (256 MiB, 8x this L3,
  // best of 3): on a shared host the bandwidth moves within seconds, so each
  // block's share is taken against the bandwidth of its own moment.
  ProbeBuffer probe(size_t(256) << 20);
  const int blocks = r.gen >= 8 ? 4 : 1;
  std::vector<double> shares;
  for (int b = 0, done = 0; b < blocks; ++b) {
    const int n = (r.gen - done) / (blocks - b);
    const double bw = measure_read_bandwidth(r.threads, probe.words(), 3);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) HF2PTE_RETURN_IF_ERROR(step(r.prompt_len + done + i, 1));
    const double s = seconds(t1);
    r.decode_seconds += s;
    shares.push_back(double(r.weight_bytes_per_token) * n / s / (bw * 1e9));
    done += n;
  }
  std::sort(shares.begin(), shares.end());
  r.decode_share_blocks = int(shares.size());
  r.decode_bandwidth_share_per_block = shares[shares.size() / 2];
  if (shares.size() % 2 == 0) r.decode_bandwidth_share_per_block = (shares[shares.size() / 2 - 1] + shares[shares.size() / 2]) / 2;
  r.prefill_tok_s = r.prompt_len / r.prefill_seconds;
  r.decode_tok_s = r.gen / r.decode_seconds;
  r.bandwidth_gb_s = std::max(bandwidth, measure_read_bandwidth(r.threads));
  r.decode_bandwidth_share = double(r.weight_bytes_per_token) * r.decode_tok_s / (r.bandwidth_gb_s * 1e9);
  return r;
}

Status run_llm_step(rt::Method& method, int64_t start, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n)), pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = (start + i) % 2 + 1, pos[size_t(i)] = start + i;
  HF2PTE_RETURN_IF_ERROR(method.set_input(0, HostTensor::from(ScalarType::kLong, {1, n}, ids)));
  HF2PTE_RETURN_IF_ERROR(method.set_input(1, HostTensor::from(ScalarType::kLong, {n}, pos)));
  return method.execute();
}

}  // namespace hf2pte::bench
