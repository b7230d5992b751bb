#include "checkpoint/config.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"
#include "test_util.h"

namespace hf2pte {
namespace {

using nlohmann::json;
using testing::fixture_dir;

const std::string kWhere = "/models/tiny/config.json";

LlamaFamilyConfig fixture_config(const std::string& name) {
  auto doc = read_json_object_file(fixture_dir(name) + "/config.json");
  EXPECT_TRUE(doc.is_ok()) << doc.status().message();
  auto c = parse_llama_family_config(*doc, fixture_dir(name) + "/config.json");
  EXPECT_TRUE(c.is_ok()) << name << ": " << c.status().message();
  return c.is_ok() ? *c : LlamaFamilyConfig{};
}

json minimal(const std::string& model_type) {
  return {{"model_type", model_type}, {"hidden_size", 64},       {"intermediate_size", 128},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4}, {"vocab_size", 100}};
}

Status parse_error(const json& config) {
  auto c = parse_llama_family_config(config, kWhere);
  return c.is_ok() ? Status::ok() : c.status();
}

TEST(LlamaFamilyConfig, LlamaFixtures) {
  auto mha = fixture_config("llama-mha");
  EXPECT_EQ(mha.model_type, "llama");
  EXPECT_EQ(mha.hidden_size, 64);
  EXPECT_EQ(mha.intermediate_size, 160);
  EXPECT_EQ(mha.num_hidden_layers, 2);
  EXPECT_EQ(mha.num_attention_heads, 4);
  EXPECT_EQ(mha.num_key_value_heads, 4);
  EXPECT_EQ(mha.head_dim, 16);
  EXPECT_EQ(mha.vocab_size, 320);
  EXPECT_EQ(mha.max_position_embeddings, 128);
  EXPECT_DOUBLE_EQ(mha.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(mha.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(mha.partial_rotary_factor, 1.0);
  EXPECT_FALSE(mha.tie_word_embeddings);
  EXPECT_FALSE(mha.attention_bias);
  EXPECT_FALSE(mha.mlp_bias);
  EXPECT_EQ(mha.hidden_act, "silu");
  EXPECT_FALSE(mha.sliding_window.has_value());
  EXPECT_EQ(mha.layer_types, (std::vector<AttentionKind>{AttentionKind::kFull, AttentionKind::kFull}));
  EXPECT_EQ(mha.bos_token_id, 1);
  EXPECT_EQ(mha.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(mha.torch_dtype, "float32");
  EXPECT_TRUE(mha.rope_scaling.is_null());

  auto gqa = fixture_config("llama-gqa");
  EXPECT_EQ(gqa.num_attention_heads, 6);
  EXPECT_EQ(gqa.num_key_value_heads, 2);
  EXPECT_EQ(gqa.head_dim, 16);
  EXPECT_DOUBLE_EQ(gqa.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(gqa.rms_norm_eps, 1e-5);

  auto tied = fixture_config("llama-gqa-tied-bf16");
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_EQ(tied.head_dim, 8);
  EXPECT_EQ(tied.num_key_value_heads, 2);
  EXPECT_EQ(tied.torch_dtype, "bfloat16");
  EXPECT_DOUBLE_EQ(tied.rope_theta, 1e6);
}

TEST(LlamaFamilyConfig, MistralQwen2Phi3Fixtures) {
  auto mistral = fixture_config("mistral");
  EXPECT_EQ(mistral.model_type, "mistral");
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_EQ(mistral.layer_types, (std::vector<AttentionKind>{AttentionKind::kSliding, AttentionKind::kSliding}));
  EXPECT_EQ(mistral.num_key_value_heads, 2);
  EXPECT_EQ(mistral.head_dim, 16);
  EXPECT_DOUBLE_EQ(mistral.rms_norm_eps, 1e-5);
  EXPECT_FALSE(mistral.tie_word_embeddings);

  auto qwen2 = fixture_config("qwen2");
  EXPECT_EQ(qwen2.model_type, "qwen2");
  EXPECT_TRUE(qwen2.tie_word_embeddings);
  EXPECT_EQ(qwen2.head_dim, 16);  // no head_dim key: 64 / 4
  EXPECT_FALSE(qwen2.sliding_window.has_value());  // use_sliding_window is false
  EXPECT_EQ(qwen2.layer_types, (std::vector<AttentionKind>{AttentionKind::kFull, AttentionKind::kFull}));
  EXPECT_EQ(qwen2.bos_token_id, 445);
  EXPECT_EQ(qwen2.eos_token_ids, std::vector<int64_t>{445});
  EXPECT_DOUBLE_EQ(qwen2.rope_theta, 1e6);

  auto phi3 = fixture_config("phi3");
  EXPECT_EQ(phi3.model_type, "phi3");
  EXPECT_EQ(phi3.head_dim, 16);  // 96 / 6
  EXPECT_EQ(phi3.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(phi3.rms_norm_eps, 1e-5);
  EXPECT_EQ(phi3.sliding_window, 255);
  EXPECT_EQ(phi3.original_max_position_embeddings, 256);
  EXPECT_EQ(phi3.eos_token_ids, std::vector<int64_t>{256});
  EXPECT_EQ(phi3.pad_token_id, 256);
  EXPECT_FALSE(phi3.tie_word_embeddings);
}

TEST(LlamaFamilyConfig, NewerFamilyFixtures) {
  using K = AttentionKind;
  auto gemma = fixture_config("gemma");
  EXPECT_EQ(gemma.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(gemma.tie_word_embeddings);  // key absent: Gemma's class default
  EXPECT_EQ(gemma.head_dim, 32);

  auto gemma2 = fixture_config("gemma2");
  EXPECT_EQ(gemma2.query_pre_attn_scalar, 24.0);
  EXPECT_EQ(gemma2.attn_logit_softcapping, 8.0);
  EXPECT_EQ(gemma2.final_logit_softcapping, 6.0);
  EXPECT_EQ(gemma2.sliding_window, 8);
  EXPECT_EQ(gemma2.layer_types, (std::vector<K>{K::kSliding, K::kFull}));  // even layers slide

  auto gemma3 = fixture_config("gemma3");
  EXPECT_EQ(gemma3.model_type, "gemma3_text");
  EXPECT_FALSE(gemma3.attn_logit_softcapping.has_value());  // explicit null
  EXPECT_EQ(gemma3.rope_local_base_freq, 1e4);
  EXPECT_DOUBLE_EQ(gemma3.rope_theta, 1e6);
  EXPECT_EQ(gemma3.layer_types, (std::vector<K>{K::kSliding, K::kFull}));  // pattern 2

  auto neox = fixture_config("gpt_neox");
  EXPECT_DOUBLE_EQ(neox.rope_theta, 1e4);  // rotary_emb_base
  EXPECT_DOUBLE_EQ(neox.partial_rotary_factor, 0.25);  // rotary_pct
  EXPECT_DOUBLE_EQ(neox.rms_norm_eps, 1e-5);  // layer_norm_eps
  EXPECT_TRUE(neox.attention_bias);
  EXPECT_EQ(neox.hidden_act, "gelu");

  auto phi = fixture_config("phi");
  EXPECT_DOUBLE_EQ(phi.partial_rotary_factor, 0.4);
  EXPECT_EQ(phi.hidden_act, "gelu_new");

  auto mixtral = fixture_config("mixtral");
  EXPECT_EQ(mixtral.num_experts, 4);  // num_local_experts
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_TRUE(mixtral.norm_topk_prob);

  auto moe = fixture_config("qwen3_moe");
  EXPECT_EQ(moe.num_experts, 8);
  EXPECT_EQ(moe.moe_intermediate_size, 48);
  EXPECT_TRUE(moe.norm_topk_prob);
  EXPECT_EQ(moe.head_dim, 16);

  // GPT-2 spellings go through transformers' attribute_map; n_inner null is 4 * n_embd.
  auto gpt2 = fixture_config("gpt2");
  EXPECT_EQ(gpt2.hidden_size, 64);
  EXPECT_EQ(gpt2.num_attention_heads, 4);
  EXPECT_EQ(gpt2.num_hidden_layers, 2);
  EXPECT_EQ(gpt2.intermediate_size, 256);
  EXPECT_EQ(gpt2.max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(gpt2.rms_norm_eps, 1e-5);  // layer_norm_epsilon
  EXPECT_EQ(gpt2.hidden_act, "gelu_new");
  EXPECT_TRUE(gpt2.tie_word_embeddings);

  // Explicit layer_types (newer transformers) override the class rule.
  json g = minimal("gemma3_text");
  g["sliding_window"] = 4;
  g["layer_types"] = {"full_attention", "sliding_attention"};
  auto c = parse_llama_family_config(g, kWhere);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->layer_types, (std::vector<K>{K::kFull, K::kSliding}));
  // Absent keys take the class defaults (Gemma 2 soft-capping 50 / 30, head_dim 256).
  json g2_config = minimal("gemma2");
  g2_config["num_key_value_heads"] = 2;  // the class default (16) does not divide 4 heads
  auto g2 = parse_llama_family_config(g2_config, kWhere);
  ASSERT_TRUE(g2.is_ok());
  EXPECT_EQ(g2->attn_logit_softcapping, 50.0);
  EXPECT_EQ(g2->final_logit_softcapping, 30.0);
  EXPECT_EQ(g2->head_dim, 256);
}

TEST(LlamaFamilyConfig, ClassDefaultsPerModelType) {
  auto llama = parse_llama_family_config(minimal("llama"), kWhere);
  ASSERT_TRUE(llama.is_ok()) << llama.status().message();
  EXPECT_EQ(llama->num_key_value_heads, 4);
  EXPECT_EQ(llama->head_dim, 16);
  EXPECT_EQ(llama->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(llama->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(llama->rope_theta, 10000.0);
  EXPECT_FALSE(llama->tie_word_embeddings);
  EXPECT_EQ(llama->hidden_act, "silu");
  EXPECT_EQ(llama->bos_token_id, 1);
  EXPECT_EQ(llama->eos_token_ids, std::vector<int64_t>{2});
  EXPECT_FALSE(llama->pad_token_id.has_value());
  EXPECT_FALSE(llama->sliding_window.has_value());
  EXPECT_EQ(llama->torch_dtype, "");

  json m = minimal("mistral");
  m["num_attention_heads"] = 16;
  auto mistral = parse_llama_family_config(m, kWhere);
  ASSERT_TRUE(mistral.is_ok()) << mistral.status().message();
  EXPECT_EQ(mistral->num_key_value_heads, 8);  // MistralConfig's default, not num_attention_heads
  EXPECT_EQ(mistral->max_position_embeddings, 131072);
  EXPECT_EQ(mistral->sliding_window, 4096);
  EXPECT_DOUBLE_EQ(mistral->rms_norm_eps, 1e-6);
  EXPECT_FALSE(mistral->tie_word_embeddings);

  json q = minimal("qwen2");
  q["num_attention_heads"] = 32;
  q["hidden_size"] = 128;
  auto qwen2 = parse_llama_family_config(q, kWhere);
  ASSERT_TRUE(qwen2.is_ok()) << qwen2.status().message();
  EXPECT_EQ(qwen2->num_key_value_heads, 32);
  EXPECT_EQ(qwen2->max_position_embeddings, 32768);
  EXPECT_FALSE(qwen2->sliding_window.has_value());
  EXPECT_FALSE(qwen2->bos_token_id.has_value());
  EXPECT_TRUE(qwen2->eos_token_ids.empty());
  // An absent key takes Qwen2Config's 32, which 4 heads cannot divide.
  EXPECT_NE(parse_error(minimal("qwen2")).message().find("num_attention_heads must be a multiple of"),
            std::string::npos);

  auto phi3 = parse_llama_family_config(minimal("phi3"), kWhere);
  ASSERT_TRUE(phi3.is_ok()) << phi3.status().message();
  EXPECT_EQ(phi3->num_key_value_heads, 4);
  EXPECT_EQ(phi3->max_position_embeddings, 4096);
  EXPECT_EQ(phi3->original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(phi3->rms_norm_eps, 1e-5);
  EXPECT_EQ(phi3->bos_token_id, 1);
  EXPECT_EQ(phi3->eos_token_ids, std::vector<int64_t>{32000});
  EXPECT_EQ(phi3->pad_token_id, 32000);
  EXPECT_FALSE(phi3->sliding_window.has_value());

  // An explicit null means "same as num_attention_heads" for every class.
  json n = minimal("mistral");
  n["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parse_llama_family_config(n, kWhere)->num_key_value_heads, 4);

  // Unknown types parse with LlamaConfig's defaults; the builder rejects them.
  auto other = parse_llama_family_config(minimal("falcon"), kWhere);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(other->model_type, "falcon");
  EXPECT_FALSE(is_llama_family_model_type("falcon"));
  EXPECT_TRUE(is_llama_family_model_type("olmo2"));
  EXPECT_TRUE(is_llama_family_model_type("phi3"));
}

TEST(LlamaFamilyConfig, Qwen2SlidingLayers) {
  json q = minimal("qwen2");
  q["num_key_value_heads"] = 2;
  q["num_hidden_layers"] = 4;
  q["use_sliding_window"] = true;
  q["sliding_window"] = 32;
  q["max_window_layers"] = 2;
  auto c = parse_llama_family_config(q, kWhere);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->sliding_window, 32);
  EXPECT_EQ(c->layer_types, (std::vector<AttentionKind>{AttentionKind::kFull, AttentionKind::kFull,
                                                        AttentionKind::kSliding, AttentionKind::kSliding}));
  q["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "full_attention"};
  c = parse_llama_family_config(q, kWhere);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->layer_types[0], AttentionKind::kSliding);
  EXPECT_EQ(c->layer_types[3], AttentionKind::kFull);
  q["layer_types"] = {"sliding_attention"};
  EXPECT_NE(parse_error(q).message().find("field 'layer_types' has wrong length; expected 4"), std::string::npos);
  q["layer_types"] = {"local", "full_attention", "full_attention", "full_attention"};
  EXPECT_NE(parse_error(q).message().find("bad layer_types[0]"), std::string::npos);
}

TEST(LlamaFamilyConfig, RopeAndDtypeSpellings) {
  // transformers 4.x: rope_theta + rope_scaling.
  json a = minimal("llama");
  a["rope_theta"] = 500000;  // an integer is fine for a float field
  a["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 32}};
  auto ca = parse_llama_family_config(a, kWhere);
  ASSERT_TRUE(ca.is_ok()) << ca.status().message();
  EXPECT_DOUBLE_EQ(ca->rope_theta, 500000.0);
  EXPECT_EQ(ca->rope_scaling, a["rope_scaling"]);

  // transformers 5.x: dtype + rope_parameters holding rope_theta.
  json b = minimal("llama");
  b["dtype"] = "bfloat16";
  b["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  auto cb = parse_llama_family_config(b, kWhere);
  ASSERT_TRUE(cb.is_ok()) << cb.status().message();
  EXPECT_EQ(cb->torch_dtype, "bfloat16");
  EXPECT_DOUBLE_EQ(cb->rope_theta, 1e6);
  EXPECT_TRUE(cb->rope_scaling.is_null());  // plain RoPE written as a dict

  b["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1000.0}};
  cb = parse_llama_family_config(b, kWhere);
  ASSERT_TRUE(cb.is_ok());
  EXPECT_EQ(cb->rope_scaling["rope_type"], "linear");
  EXPECT_DOUBLE_EQ(cb->rope_theta, 1000.0);

  json p = minimal("phi3");
  p["partial_rotary_factor"] = 0.75;
  EXPECT_DOUBLE_EQ(parse_llama_family_config(p, kWhere)->partial_rotary_factor, 0.75);
  p["partial_rotary_factor"] = 1.5;
  EXPECT_NE(parse_error(p).message().find("partial_rotary_factor' out of range"), std::string::npos);

  json bad = minimal("llama");
  bad["rope_scaling"] = "yes";
  EXPECT_EQ(parse_error(bad).message(),
            "config.json: field 'rope_scaling' has wrong type; expected object or null, got string (" + kWhere + ")");
  bad["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", "big"}};
  EXPECT_NE(parse_error(bad).message().find("field 'rope_theta' has wrong type; expected number, got string (" +
                                            kWhere + ", rope_scaling)"),
            std::string::npos)
      << parse_error(bad).message();
}

TEST(LlamaFamilyConfig, TokenIds) {
  json c = minimal("llama");
  c["eos_token_id"] = {128001, 128009};
  c["bos_token_id"] = nullptr;
  auto r = parse_llama_family_config(c, kWhere);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{128001, 128009}));
  EXPECT_FALSE(r->bos_token_id.has_value());
  c["eos_token_id"] = nullptr;
  EXPECT_TRUE(parse_llama_family_config(c, kWhere)->eos_token_ids.empty());
  c["eos_token_id"] = {1, "2"};
  EXPECT_NE(parse_error(c).message().find("field 'eos_token_id' has wrong type; expected integer or list of "
                                          "integers, got string"),
            std::string::npos);
}

TEST(LlamaFamilyConfig, ValidationErrors) {
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                          "intermediate_size", "model_type"}) {
    json c = minimal("llama");
    c.erase(key);
    auto st = parse_error(c);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidInput);
    EXPECT_EQ(st.message(), fmt::format("config.json: missing required field '{}' ({})", key, kWhere));
  }
  json c = minimal("llama");
  c["hidden_size"] = "64";
  EXPECT_EQ(parse_error(c).message(),
            "config.json: field 'hidden_size' has wrong type; expected integer, got string (" + kWhere + ")");
  c["hidden_size"] = 64.0;
  EXPECT_EQ(parse_error(c).message(),
            "config.json: field 'hidden_size' has wrong type; expected integer, got float (" + kWhere + ")");
  c["hidden_size"] = 0;
  EXPECT_EQ(parse_error(c).message(),
            "config.json: field 'hidden_size' must be positive; expected > 0, got 0 (" + kWhere + ")");
  // A layer count sizes per-layer tables before any weight is read: bounded,
  // under GPT-2's name too (fuzz_config found n_layer 322222222222222).
  c["hidden_size"] = 64;
  c["num_hidden_layers"] = int64_t(322222222222222);
  EXPECT_EQ(parse_error(c).message(),
            "config.json: field 'num_hidden_layers' is too large; expected <= 4096, got 322222222222222 (" + kWhere + ")");
  json g = {{"model_type", "gpt2"}, {"n_embd", 64}, {"n_head", 4}, {"n_layer", int64_t(322222222222222)},
            {"vocab_size", 300}, {"n_positions", 64}};
  EXPECT_NE(parse_error(g).message().find("'num_hidden_layers' is too large"), std::string::npos) << parse_error(g).message();
  c["num_hidden_layers"] = 4096;
  EXPECT_TRUE(parse_error(c).is_ok());
  c["num_hidden_layers"] = 2;
  c["hidden_size"] = 66;  // 66 / 4 heads
  EXPECT_EQ(parse_error(c).message(),
            "config.json: hidden_size must be a multiple of num_attention_heads when head_dim is absent; expected a "
            "multiple of 4, got 66 (" + kWhere + ")");
  c["head_dim"] = 16;  // an explicit head_dim need not divide hidden_size
  EXPECT_TRUE(parse_error(c).is_ok());
  c["num_key_value_heads"] = 3;
  EXPECT_EQ(parse_error(c).message(),
            "config.json: num_attention_heads must be a multiple of num_key_value_heads; expected a multiple of 3, "
            "got 4 (" + kWhere + ")");
  c["num_key_value_heads"] = -2;
  EXPECT_NE(parse_error(c).message().find("'num_key_value_heads' must be positive"), std::string::npos);
  c["num_key_value_heads"] = 2;
  c["tie_word_embeddings"] = 1;
  EXPECT_EQ(parse_error(c).message(),
            "config.json: field 'tie_word_embeddings' has wrong type; expected boolean, got integer (" + kWhere + ")");
  c["tie_word_embeddings"] = true;
  c["rms_norm_eps"] = -1e-6;
  EXPECT_NE(parse_error(c).message().find("'rms_norm_eps' must be positive"), std::string::npos);
  c["rms_norm_eps"] = 1e-6;
  c["num_hidden_layers"] = 18446744073709551615ull;
  EXPECT_NE(parse_error(c).message().find("out of range"), std::string::npos);
  EXPECT_NE(parse_error(json::array()).message().find("expected a JSON object, got array"), std::string::npos);
}

// gpt-oss, DeepSeek-V3 and Mamba: the 4.55 class defaults and the new keys.
TEST(LlamaFamilyConfig, SecondWaveDefaults) {
  json oss_config = minimal("gpt_oss");
  oss_config["num_attention_heads"] = 16;  // the class default is 8 kv heads
  auto oss = parse_llama_family_config(oss_config, kWhere);
  ASSERT_TRUE(oss.is_ok()) << oss.status().message();
  EXPECT_EQ(oss->head_dim, 64);
  EXPECT_EQ(oss->num_experts, 128);
  EXPECT_EQ(oss->num_experts_per_tok, 4);
  ASSERT_TRUE(oss->swiglu_limit.has_value());
  EXPECT_EQ(*oss->swiglu_limit, 7.0);
  EXPECT_TRUE(oss->attention_bias);
  // No rope_scaling key: GptOssConfig's own yarn dict; layers alternate, sliding first.
  EXPECT_EQ(oss->rope_scaling.value("rope_type", ""), "yarn");
  EXPECT_EQ(oss->rope_scaling.value("factor", 0.0), 32.0);
  EXPECT_FALSE(oss->rope_scaling.value("truncate", true));
  ASSERT_EQ(oss->layer_types.size(), 2u);
  EXPECT_EQ(oss->layer_types[0], AttentionKind::kSliding);
  EXPECT_EQ(oss->layer_types[1], AttentionKind::kFull);
  EXPECT_EQ(oss->sliding_window, 128);
  // An explicit null means no scaling at all.
  json plain = oss_config;
  plain["rope_scaling"] = nullptr;
  EXPECT_TRUE(parse_llama_family_config(plain, kWhere)->rope_scaling.is_null());

  json ds = minimal("deepseek_v3");
  ds["num_attention_heads"] = 128;  // the class default is 128 kv heads (MLA has no GQA)
  auto v3 = parse_llama_family_config(ds, kWhere);
  ASSERT_TRUE(v3.is_ok()) << v3.status().message();
  ASSERT_TRUE(v3->mla.has_value());
  EXPECT_EQ(v3->mla->q_lora_rank, 1536);
  EXPECT_EQ(v3->mla->kv_lora_rank, 512);
  EXPECT_EQ(v3->head_dim, 64);  // HF's head_dim is the rope width
  EXPECT_EQ(v3->num_experts, 256);
  EXPECT_EQ(v3->n_group, 8);
  EXPECT_EQ(v3->topk_group, 4);
  EXPECT_EQ(v3->routed_scaling_factor, 2.5);
  EXPECT_EQ(v3->first_k_dense_replace, 3);
  EXPECT_EQ(v3->num_key_value_heads, 128);
  ds["q_lora_rank"] = nullptr;  // V2-Lite: a plain q_proj
  EXPECT_EQ(parse_llama_family_config(ds, kWhere)->mla->q_lora_rank, 0);
  ds["n_routed_experts"] = 12;  // not a multiple of 8 groups
  EXPECT_NE(parse_error(ds).message().find("n_routed_experts must be a multiple of n_group"), std::string::npos)
      << parse_error(ds).message();
  ds["n_routed_experts"] = 8;  // groups of 1: no best two
  EXPECT_NE(parse_error(ds).message().find("at least 2 experts"), std::string::npos) << parse_error(ds).message();
  ds["n_routed_experts"] = 16;
  ds["qk_rope_head_dim"] = 7;
  EXPECT_NE(parse_error(ds).message().find("'qk_rope_head_dim' must be even"), std::string::npos);

  auto mamba = parse_mamba_config(json{{"model_type", "mamba"}, {"hidden_size", 40}}, kWhere);
  ASSERT_TRUE(mamba.is_ok()) << mamba.status().message();
  EXPECT_EQ(mamba->intermediate_size, 80);  // expand 2
  EXPECT_EQ(mamba->time_step_rank, 3);      // "auto": ceil(40 / 16)
  EXPECT_EQ(mamba->state_size, 16);
  EXPECT_TRUE(mamba->tie_word_embeddings);
  auto gelu = parse_mamba_config(json{{"model_type", "mamba"}, {"hidden_act", "gelu"}}, kWhere);
  EXPECT_EQ(gelu.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(gelu.status().message().find("'gelu'"), std::string::npos);
}

}  // namespace
}  // namespace hf2pte
