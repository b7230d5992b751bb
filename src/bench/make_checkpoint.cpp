// hf2pte_make_bench_checkpoint: writes a deterministic random-weight Llama
// checkpoint in Hugging Face layout (config.json + model.safetensors) with the
// shape of a real model, so decode/prefill speed can be measured without
// downloading weights. Presets: bench-110m (stories110M shape, fp32, tied) and
// bench-1b (TinyLlama-1.1B shape, bf16 on disk, untied). Not used in CI (the
// files are 0.4-2.2 GB); see docs/performance.md and
// scripts/make_bench_checkpoints.sh.
//
// Weights are small-magnitude pseudo-normal values (mean 0, std 0.02: the sum
// of four uniforms from a fixed-seed xorshift, scaled), RMSNorm weights are 1,
// so the logits stay finite through every layer.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace {

struct Preset {
  const char* name;
  int hidden, layers, heads, kv_heads, ffn, vocab;
  bool tied, bf16;
};

constexpr Preset kPresets[] = {
    {"bench-110m", 768, 12, 12, 12, 2048, 32000, true, false},
    {"bench-1b", 2048, 22, 32, 4, 5632, 32000, false, true},
    // 71 MB: big enough that an export takes a noticeable fraction of a second
    // (the SIGINT test in tests/robustness_test.cpp interrupts one mid-way).
    {"bench-small", 256, 2, 4, 4, 512, 32000, false, false},
};

struct TensorSpec {
  std::string name;
  int64_t rows, cols;  // cols = 0: a vector
  bool ones;           // norm weights
};

/// xorshift64*: fast, fixed, identical on every platform.
struct Rng {
  uint64_t s;
  uint32_t next() {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return uint32_t((s * 0x2545F4914F6CDD1DULL) >> 32);
  }
  /// Irwin-Hall(4) centred: mean 0, variance 4/12; scaled to std `sd`.
  float normalish(float sd) {
    float u = 0;
    for (int i = 0; i < 4; ++i) u += float(next()) * (1.0f / 4294967296.0f);
    return (u - 2.0f) * sd * 1.7320508f;
  }
};

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (no NaNs here)
  return uint16_t(u >> 16);
}

int write_checkpoint(const Preset& p, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  const int head_dim = p.hidden / p.heads;
  std::vector<TensorSpec> ts;
  ts.push_back({"model.embed_tokens.weight", p.vocab, p.hidden, false});
  for (int l = 0; l < p.layers; ++l) {
    auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", l, s); };
    ts.push_back({n("input_layernorm.weight"), p.hidden, 0, true});
    ts.push_back({n("self_attn.q_proj.weight"), p.heads * head_dim, p.hidden, false});
    ts.push_back({n("self_attn.k_proj.weight"), p.kv_heads * head_dim, p.hidden, false});
    ts.push_back({n("self_attn.v_proj.weight"), p.kv_heads * head_dim, p.hidden, false});
    ts.push_back({n("self_attn.o_proj.weight"), p.hidden, p.heads * head_dim, false});
    ts.push_back({n("post_attention_layernorm.weight"), p.hidden, 0, true});
    ts.push_back({n("mlp.gate_proj.weight"), p.ffn, p.hidden, false});
    ts.push_back({n("mlp.up_proj.weight"), p.ffn, p.hidden, false});
    ts.push_back({n("mlp.down_proj.weight"), p.hidden, p.ffn, false});
  }
  ts.push_back({"model.norm.weight", p.hidden, 0, true});
  if (!p.tied) ts.push_back({"lm_head.weight", p.vocab, p.hidden, false});

  const size_t esize = p.bf16 ? 2 : 4;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const auto& t : ts) {
    uint64_t n = uint64_t(t.rows) * uint64_t(t.cols ? t.cols : 1);
    std::string shape = t.cols ? fmt::format("[{},{}]", t.rows, t.cols) : fmt::format("[{}]", t.rows);
    header += fmt::format(",\"{}\":{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}", t.name,
                          p.bf16 ? "BF16" : "F32", shape, offset, offset + n * esize);
    offset += n * esize;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';

  std::string path = dir + "/model.safetensors";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  uint64_t hlen = header.size();
  std::fwrite(&hlen, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  Rng rng{0x9E3779B97F4A7C15ULL};
  std::vector<float> row;
  std::vector<uint16_t> row16;
  for (const auto& t : ts) {
    int64_t rows = t.cols ? t.rows : 1, cols = t.cols ? t.cols : t.rows;
    row.resize(size_t(cols));
    row16.resize(size_t(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = t.ones ? 1.0f : rng.normalish(0.02f);
      if (p.bf16) {
        for (size_t i = 0; i < row.size(); ++i) row16[i] = to_bf16(row[i]);
        std::fwrite(row16.data(), 2, row16.size(), f);
      } else {
        std::fwrite(row.data(), 4, row.size(), f);
      }
    }
  }
  bool ok = std::fclose(f) == 0;

  std::string config = fmt::format(R"({{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": {},
  "intermediate_size": {},
  "num_hidden_layers": {},
  "num_attention_heads": {},
  "num_key_value_heads": {},
  "vocab_size": {},
  "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "tie_word_embeddings": {},
  "torch_dtype": "{}",
  "bos_token_id": 1,
  "eos_token_id": 2
}}
)",
                                    p.hidden, p.ffn, p.layers, p.heads, p.kv_heads, p.vocab, p.tied ? "true" : "false",
                                    p.bf16 ? "bfloat16" : "float32");
  FILE* c = std::fopen((dir + "/config.json").c_str(), "w");
  if (c == nullptr) return 1;
  std::fwrite(config.data(), 1, config.size(), c);
  ok = std::fclose(c) == 0 && ok;
  std::printf("%s: %s (%.1f MB of weights)\n", p.name, dir.c_str(), double(offset) / 1e6);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s bench-110m|bench-1b|bench-small OUT_DIR\n", argv[0]);
    return 2;
  }
  for (const auto& p : kPresets) {
    if (std::string(argv[1]) == p.name) return write_checkpoint(p, argv[2]);
  }
  std::fprintf(stderr, "unknown preset %s (bench-110m, bench-1b, bench-small)\n", argv[1]);
  return 2;
}
