#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint/config.h"
#include "test_util.h"

namespace hf2pte {
namespace {

namespace fs = std::filesystem;
using testing::build_safetensors;
using testing::f32_bytes;
using testing::fixture_dir;
using testing::TempDir;
using testing::write_bytes;
using testing::write_text;

constexpr const char* kTinyConfig = R"({"model_type": "llama", "hidden_size": 4, "intermediate_size": 8,
  "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10})";

// The tensors a Llama-family decoder with untied or tied embeddings stores.
std::vector<std::string> llama_names(int layers, bool tied) {
  std::vector<std::string> names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!tied) names.push_back("lm_head.weight");
  for (int i = 0; i < layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* s : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
                          "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
      names.push_back(p + s);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Checkpoint, OpensEveryFixture) {
  for (const char* name : {"llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral", "qwen2", "phi3"}) {
    auto ckpt = Checkpoint::open(fixture_dir(name));
    ASSERT_TRUE(ckpt.is_ok()) << name << ": " << ckpt.status().message();
    EXPECT_EQ(ckpt->layout(), Checkpoint::Layout::kSingle);
    EXPECT_EQ(ckpt->weight_files(), std::vector<std::string>{"model.safetensors"});
    EXPECT_EQ(ckpt->config_path(), fixture_dir(name) + "/config.json");
    EXPECT_TRUE(ckpt->config().contains("model_type"));
    EXPECT_EQ(ckpt->generation_config(), nullptr);
    EXPECT_TRUE(ckpt->has("model.embed_tokens.weight")) << name;
    EXPECT_TRUE(ckpt->find_file("config.json").has_value());
    EXPECT_FALSE(ckpt->find_file("tokenizer.json").has_value());
  }
}

TEST(Checkpoint, LlamaFixturesListExactlyTheLlamaTensors) {
  auto mha = Checkpoint::open(fixture_dir("llama-mha"));
  ASSERT_TRUE(mha.is_ok()) << mha.status().message();
  EXPECT_EQ(mha->tensor_names(), llama_names(2, /*tied=*/false));
  auto w = mha->tensor("model.layers.1.self_attn.k_proj.weight");
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ((*w)->dtype, ScalarType::kFloat);
  EXPECT_EQ((*w)->shape, (std::vector<int64_t>{64, 64}));

  // The tied bf16 case stores BF16 weights and no lm_head.weight.
  auto tied = Checkpoint::open(fixture_dir("llama-gqa-tied-bf16"));
  ASSERT_TRUE(tied.is_ok()) << tied.status().message();
  EXPECT_EQ(tied->tensor_names(), llama_names(2, /*tied=*/true));
  EXPECT_FALSE(tied->has("lm_head.weight"));
  for (const auto& name : tied->tensor_names()) EXPECT_EQ((*tied->tensor(name))->dtype, ScalarType::kBFloat16);
  auto k = tied->tensor("model.layers.0.self_attn.k_proj.weight");
  ASSERT_TRUE(k.is_ok());
  EXPECT_EQ((*k)->shape, (std::vector<int64_t>{16, 64}));  // 2 kv heads * head_dim 8
  auto cfg = parse_llama_family_config(*tied);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  EXPECT_TRUE(cfg->tie_word_embeddings);
  EXPECT_EQ(cfg->torch_dtype, "bfloat16");
}

TEST(Checkpoint, Phi3AndQwen2StoreTheirOwnLayouts) {
  auto phi3 = Checkpoint::open(fixture_dir("phi3"));
  ASSERT_TRUE(phi3.is_ok()) << phi3.status().message();
  // Fused projections: qkv rows = (6 + 2 + 2) heads * 16, gate_up rows = 2 * 192.
  auto qkv = phi3->tensor("model.layers.0.self_attn.qkv_proj.weight");
  ASSERT_TRUE(qkv.is_ok()) << qkv.status().message();
  EXPECT_EQ((*qkv)->shape, (std::vector<int64_t>{160, 96}));
  auto gate_up = phi3->tensor("model.layers.0.mlp.gate_up_proj.weight");
  ASSERT_TRUE(gate_up.is_ok());
  EXPECT_EQ((*gate_up)->shape, (std::vector<int64_t>{384, 96}));

  auto qwen2 = Checkpoint::open(fixture_dir("qwen2"));
  ASSERT_TRUE(qwen2.is_ok()) << qwen2.status().message();
  EXPECT_TRUE(qwen2->has("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(qwen2->has("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(qwen2->has("lm_head.weight"));  // tied
}

TEST(Checkpoint, ExpectChecksShapeAndDtypeWithExactMessages) {
  auto ckpt = Checkpoint::open(fixture_dir("llama-mha"));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().message();
  const std::string q = "model.layers.0.self_attn.q_proj.weight";

  auto bad_shape = ckpt->expect(q, DTypeSet::float_weights(), {64, 32});
  ASSERT_FALSE(bad_shape.is_ok());
  EXPECT_EQ(bad_shape.status().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(bad_shape.status().message(),
            "tensor model.layers.0.self_attn.q_proj.weight has wrong shape; expected [64, 32], got [64, 64] "
            "(model.safetensors)");
  auto bad_rank = ckpt->expect(q, DTypeSet::float_weights(), {4096});
  ASSERT_FALSE(bad_rank.is_ok());
  EXPECT_NE(bad_rank.status().message().find("expected [4096], got [64, 64]"), std::string::npos);

  auto bad_dtype = ckpt->expect(q, DTypeSet{ScalarType::kLong, ScalarType::kInt}, {64, 64});
  ASSERT_FALSE(bad_dtype.is_ok());
  EXPECT_EQ(bad_dtype.status().message(),
            "tensor model.layers.0.self_attn.q_proj.weight has wrong dtype; expected I64|I32, got F32 "
            "(model.safetensors)");
  EXPECT_FALSE(ckpt->is_consumed(q));  // failed expectations consume nothing

  auto missing = ckpt->expect("lm_head.bias", DTypeSet::float_weights(), {320});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "missing tensor lm_head.bias (" + fixture_dir("llama-mha") + ")");
  EXPECT_EQ(ckpt->tensor("nope").status().code(), ErrorCode::kNotFound);

  auto ok = ckpt->expect(q, DTypeSet::float_weights(), {64, -1});  // -1: any size
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->bytes.size(), 64u * 64u * 4u);
  EXPECT_TRUE(ckpt->is_consumed(q));

  auto optional = ckpt->expect_optional("model.layers.0.self_attn.q_proj.bias", DTypeSet::float_weights(), {64});
  ASSERT_TRUE(optional.is_ok());
  EXPECT_FALSE(optional->has_value());
  EXPECT_EQ(DTypeSet::float_weights().to_string(), "F32|F16|BF16");
  EXPECT_EQ(format_shape({2, -1}), "[2, ?]");
}

TEST(Checkpoint, ConsumptionTracking) {
  auto ckpt = Checkpoint::open(fixture_dir("llama-mha"));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().message();
  const auto names = ckpt->tensor_names();
  ASSERT_EQ(names.size(), 21u);

  auto st = ckpt->check_all_consumed();
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidInput);
  // The first ten names, sorted, then the count.
  std::string expected = "checkpoint tensors not used by the model: ";
  for (size_t i = 0; i < 10; ++i) expected += (i ? ", " : "") + names[i];
  expected += ", ... (21 in total) (" + fixture_dir("llama-mha") + ")";
  EXPECT_EQ(st.message(), expected);

  // Consume everything except the layer-1 MLP; ignore the final norm.
  for (const auto& n : names) {
    if (n.find("layers.1.mlp") == std::string::npos && n != "model.norm.weight") {
      ASSERT_TRUE(ckpt->mark_consumed(n).is_ok());
    }
  }
  EXPECT_TRUE(ckpt->mark_ignored("model.norm.weight"));
  EXPECT_FALSE(ckpt->mark_ignored("model.layers.0.self_attn.rotary_emb.inv_freq"));  // absent: fine
  EXPECT_EQ(ckpt->mark_consumed("nope").code(), ErrorCode::kNotFound);
  EXPECT_EQ(ckpt->check_all_consumed().message(),
            "checkpoint tensors not used by the model: model.layers.1.mlp.down_proj.weight, "
            "model.layers.1.mlp.gate_proj.weight, model.layers.1.mlp.up_proj.weight (3 in total) (" +
                fixture_dir("llama-mha") + ")");

  EXPECT_EQ(ckpt->mark_ignored_if([](std::string_view n) { return n.find("gate_proj") != std::string_view::npos; }),
            1u);
  EXPECT_EQ(ckpt->unconsumed().size(), 2u);
  // Ignoring never un-consumes a tensor the model used.
  EXPECT_TRUE(ckpt->mark_ignored("model.embed_tokens.weight"));
  EXPECT_TRUE(ckpt->is_consumed("model.embed_tokens.weight"));
  ASSERT_TRUE(ckpt->mark_consumed("model.layers.1.mlp.down_proj.weight").is_ok());
  ASSERT_TRUE(ckpt->mark_consumed("model.layers.1.mlp.up_proj.weight").is_ok());
  EXPECT_TRUE(ckpt->check_all_consumed().is_ok());
}

// Splits the llama-mha fixture into two shards plus an index in `dir`.
void write_sharded_llama(const std::string& dir, nlohmann::json* index_out = nullptr) {
  fs::copy_file(fixture_dir("llama-mha") + "/config.json", dir + "/config.json");
  auto single = SafetensorsFile::open(fixture_dir("llama-mha") + "/model.safetensors");
  ASSERT_TRUE(single.is_ok()) << single.status().message();
  std::vector<testing::TensorSpec> first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const TensorRef& t : single->tensors()) {
    bool in_first = t.name.find("layers.1.") == std::string::npos;
    (in_first ? first : second).push_back(testing::spec_of(t));
    weight_map[t.name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_bytes(dir + "/model-00001-of-00002.safetensors", build_safetensors(first, {{"format", "pt"}}));
  write_bytes(dir + "/model-00002-of-00002.safetensors", build_safetensors(second, {{"format", "pt"}}));
  nlohmann::json index = {{"metadata", {{"total_size", 544096}}}, {"weight_map", weight_map}};
  write_text(dir + "/model.safetensors.index.json", index.dump(2));
  if (index_out) *index_out = index;
}

TEST(Checkpoint, ShardedIndexMatchesTheSingleFile) {
  TempDir dir;
  write_sharded_llama(dir.path());
  auto sharded = Checkpoint::open(dir.path());
  ASSERT_TRUE(sharded.is_ok()) << sharded.status().message();
  EXPECT_EQ(sharded->layout(), Checkpoint::Layout::kSharded);
  EXPECT_EQ(sharded->weight_files(),
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  auto single = Checkpoint::open(fixture_dir("llama-mha"));
  ASSERT_TRUE(single.is_ok());
  ASSERT_EQ(sharded->tensor_names(), single->tensor_names());
  for (const auto& name : single->tensor_names()) {
    const TensorRef* a = *sharded->tensor(name);
    const TensorRef* b = *single->tensor(name);
    EXPECT_EQ(a->shape, b->shape) << name;
    ASSERT_EQ(a->bytes.size(), b->bytes.size()) << name;
    EXPECT_EQ(std::memcmp(a->bytes.data(), b->bytes.data(), a->bytes.size()), 0) << name;
  }
  // Errors name the shard the tensor lives in.
  auto bad = sharded->expect("model.layers.1.mlp.up_proj.weight", DTypeSet::float_weights(), {1, 1});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("(model-00002-of-00002.safetensors)"), std::string::npos)
      << bad.status().message();
}

TEST(Checkpoint, ShardedIndexErrors) {
  auto open_with_index = [](const std::function<void(nlohmann::json&)>& edit) {
    TempDir dir;
    nlohmann::json index;
    write_sharded_llama(dir.path(), &index);
    edit(index);
    write_text(dir.path() + "/model.safetensors.index.json", index.dump());
    auto r = Checkpoint::open(dir.path());
    return r.is_ok() ? Status::ok() : r.status();
  };

  auto escape = open_with_index([](nlohmann::json& i) { i["weight_map"]["model.norm.weight"] = "../x.safetensors"; });
  EXPECT_EQ(escape.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(escape.message().find("shard name must stay inside the checkpoint folder; expected a relative file "
                                  "name, got '../x.safetensors' (tensor model.norm.weight)"),
            std::string::npos)
      << escape.message();
  auto absolute = open_with_index([](nlohmann::json& i) { i["weight_map"]["model.norm.weight"] = "/etc/passwd"; });
  EXPECT_NE(absolute.message().find("must stay inside"), std::string::npos) << absolute.message();

  auto missing_shard =
      open_with_index([](nlohmann::json& i) { i["weight_map"]["model.norm.weight"] = "model-3.safetensors"; });
  EXPECT_EQ(missing_shard.code(), ErrorCode::kNotFound);
  EXPECT_NE(missing_shard.message().find("missing shard model-3.safetensors listed in model.safetensors.index.json"),
            std::string::npos)
      << missing_shard.message();

  auto wrong_shard = open_with_index(
      [](nlohmann::json& i) { i["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors"; });
  EXPECT_EQ(wrong_shard.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(wrong_shard.message().find("tensor model.norm.weight listed in model.safetensors.index.json is missing "
                                       "from its shard; expected it in model-00002-of-00002.safetensors"),
            std::string::npos)
      << wrong_shard.message();

  auto phantom = open_with_index([](nlohmann::json& i) { i["weight_map"]["ghost"] = "model-00001-of-00002.safetensors"; });
  EXPECT_NE(phantom.message().find("tensor ghost listed"), std::string::npos) << phantom.message();

  auto no_map = open_with_index([](nlohmann::json& i) { i.erase("weight_map"); });
  EXPECT_NE(no_map.message().find("missing required field 'weight_map'"), std::string::npos) << no_map.message();
  auto bad_type = open_with_index([](nlohmann::json& i) { i["weight_map"]["model.norm.weight"] = 3; });
  EXPECT_NE(bad_type.message().find("expected string, got integer"), std::string::npos) << bad_type.message();
}

TEST(Checkpoint, TensorStoredInTwoShardsIsRejected) {
  TempDir dir;
  write_text(dir.file("config.json"), kTinyConfig);
  write_bytes(dir.file("a.safetensors"), build_safetensors({{"w", "F32", {1}, f32_bytes({1})}}));
  write_bytes(dir.file("b.safetensors"), build_safetensors({{"w", "F32", {1}, f32_bytes({2})}}));
  write_text(dir.file("model.safetensors.index.json"), R"({"weight_map": {"w": "a.safetensors"}})");
  // b.safetensors is not referenced by the index, so it is not opened at all.
  auto ok = Checkpoint::open(dir.path());
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->weight_files(), std::vector<std::string>{"a.safetensors"});

  write_bytes(dir.file("b.safetensors"), build_safetensors({{"v", "F32", {1}, f32_bytes({2})},
                                                            {"w", "F32", {1}, f32_bytes({3})}}));
  write_text(dir.file("model.safetensors.index.json"),
             R"({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})");
  auto twice = Checkpoint::open(dir.path());
  ASSERT_FALSE(twice.is_ok());
  EXPECT_EQ(twice.status().message(), "tensor w is stored twice; expected one file, got a.safetensors and "
                                      "b.safetensors (" + dir.path() + ")");

  write_text(dir.file("model.safetensors.index.json"), R"({"weight_map": {"w": "a.safetensors", "w": "a.safetensors"}})");
  auto dup = Checkpoint::open(dir.path());
  ASSERT_FALSE(dup.is_ok());
  EXPECT_NE(dup.status().message().find("duplicate key 'w'"), std::string::npos) << dup.status().message();
}

TEST(Checkpoint, FindsWeightsLikeFromPretrained) {
  TempDir dir;
  // No config.json.
  auto no_config = Checkpoint::open(dir.path());
  EXPECT_EQ(no_config.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(no_config.status().message(), "missing config.json (" + dir.path() + ")");

  write_text(dir.file("config.json"), kTinyConfig);
  auto none = Checkpoint::open(dir.path());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.status().message().find("no weights found"), std::string::npos);

  write_bytes(dir.file("pytorch_model.bin"), {1, 2, 3});
  EXPECT_EQ(Checkpoint::open(dir.path()).status().code(), ErrorCode::kNotSupported);

  // One file with a non-standard name is taken.
  write_bytes(dir.file("weights.safetensors"), build_safetensors({{"w", "F32", {1}, f32_bytes({1})}}));
  auto one = Checkpoint::open(dir.path());
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  EXPECT_EQ(one->weight_files(), std::vector<std::string>{"weights.safetensors"});

  // Two are ambiguous without an index...
  write_bytes(dir.file("other.safetensors"), build_safetensors({{"v", "F32", {1}, f32_bytes({1})}}));
  auto two = Checkpoint::open(dir.path());
  EXPECT_EQ(two.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(two.status().message().find("got other.safetensors, weights.safetensors"), std::string::npos)
      << two.status().message();

  // ... and model.safetensors wins over everything else.
  write_bytes(dir.file("model.safetensors"), build_safetensors({{"m", "F32", {1}, f32_bytes({1})}}));
  auto standard = Checkpoint::open(dir.path());
  ASSERT_TRUE(standard.is_ok()) << standard.status().message();
  EXPECT_EQ(standard->tensor_names(), std::vector<std::string>{"m"});
}

TEST(Checkpoint, ConfigAndGenerationConfigErrors) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors"), build_safetensors({{"w", "F32", {1}, f32_bytes({1})}}));
  write_text(dir.file("config.json"), "{\"model_type\": ");
  auto broken = Checkpoint::open(dir.path());
  EXPECT_EQ(broken.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(broken.status().message().find("config.json: invalid JSON at byte"), std::string::npos)
      << broken.status().message();

  write_text(dir.file("config.json"), "[]");
  EXPECT_NE(Checkpoint::open(dir.path()).status().message().find("config.json: expected a JSON object, got array"),
            std::string::npos);

  write_text(dir.file("config.json"), kTinyConfig);
  write_text(dir.file("generation_config.json"), R"({"eos_token_id": [2, 7], "max_new_tokens": 5})");
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().message();
  ASSERT_NE(ckpt->generation_config(), nullptr);
  EXPECT_EQ((*ckpt->generation_config())["eos_token_id"], nlohmann::json({2, 7}));

  write_text(dir.file("generation_config.json"), "{,}");
  EXPECT_NE(Checkpoint::open(dir.path()).status().message().find("generation_config.json: invalid JSON"),
            std::string::npos);

  EXPECT_EQ(Checkpoint::open(dir.file("nope")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Checkpoint::open(dir.file("model.safetensors")).status().code(), ErrorCode::kInvalidArgument);
}

TEST(Checkpoint, BadWeightFileFailsOpen) {
  TempDir dir;
  write_text(dir.file("config.json"), kTinyConfig);
  write_bytes(dir.file("model.safetensors"), {1, 2, 3});
  auto r = Checkpoint::open(dir.path());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.status().message().find(dir.file("model.safetensors")), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hf2pte
