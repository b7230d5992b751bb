// RoPE frequencies (plain and scaled) and the architecture table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <set>

#include "models/arch.h"
#include "models/rope.h"

namespace hf2pte::models {
namespace {

RopeSpec spec(int64_t dim, double theta, nlohmann::json scaling = nullptr) {
  return RopeSpec{dim, theta, std::move(scaling), 256, std::nullopt};
}

TEST(RopeInvFreq, PlainIsThetaPower) {
  auto f = rope_inv_freq(spec(8, 10000.0), 16);
  ASSERT_TRUE(f.is_ok());
  ASSERT_EQ(f->size(), 4u);
  for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ((*f)[size_t(j)], std::pow(10000.0, -2.0 * j / 8));
  // {"rope_type": "default"} is plain RoPE too.
  auto d = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "default"}}), 16);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(*d, *f);
}

TEST(RopeInvFreq, LinearDividesByFactor) {
  auto f = rope_inv_freq(spec(8, 10000.0, {{"type", "linear"}, {"factor", 4.0}}), 16);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_DOUBLE_EQ((*f)[1], std::pow(10000.0, -2.0 / 8) / 4);
}

TEST(RopeInvFreq, Llama3KeepsHighScalesLowSmoothsMiddle) {
  // The llama3-rope fixture's scaling (original context 32, factors 8 / 1 / 4)
  // with theta 1e4, so that dims 16 have one frequency in each band.
  nlohmann::json s = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 32}};
  auto f = rope_inv_freq(spec(16, 10000.0, s), 64);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  bool high = false, low = false, mid = false;
  for (int j = 0; j < 8; ++j) {
    const double base = std::pow(10000.0, -2.0 * j / 16), wavelen = 2 * std::numbers::pi / base;
    const double got = (*f)[size_t(j)];
    if (wavelen < 8) {  // 32 / high_freq_factor
      EXPECT_DOUBLE_EQ(got, base);
      high = true;
    } else if (wavelen > 32) {  // 32 / low_freq_factor
      EXPECT_DOUBLE_EQ(got, base / 8);
      low = true;
    } else {
      const double smooth = (32 / wavelen - 1) / 3;
      EXPECT_DOUBLE_EQ(got, (1 - smooth) * base / 8 + smooth * base);
      mid = true;
    }
  }
  EXPECT_TRUE(high && low && mid);
}

TEST(RopeInvFreq, UnsupportedTypesAndFieldsAreNamed) {
  auto y = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "ntk-by-parts"}, {"factor", 4.0}}), 16);
  ASSERT_FALSE(y.is_ok());
  EXPECT_EQ(y.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(y.status().message().find("'ntk-by-parts'"), std::string::npos) << y.status().message();
  // A field the type does not read would be silently ignored: refused by name.
  auto extra = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1.0}}), 16);
  ASSERT_FALSE(extra.is_ok());
  EXPECT_EQ(extra.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(extra.status().message().find("'low_freq_factor'"), std::string::npos) << extra.status().message();
  // A llama3 dict without its numbers is an input error naming the key.
  auto bad = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "llama3"}, {"factor", 8.0}}), 16);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(bad.status().message().find("low_freq_factor"), std::string::npos);
  // longrope factor lists must have rotary_dim / 2 entries.
  auto short_list = rope_inv_freq(
      spec(8, 10000.0, {{"rope_type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0, 1.0, 1.0, 1.0}}, {"factor", 2.0}}), 16);
  ASSERT_FALSE(short_list.is_ok());
  EXPECT_NE(short_list.status().message().find("short_factor"), std::string::npos);
}

// The expected values below are the published formulas (transformers'
// modeling_rope_utils, the YaRN and LongRoPE papers) written out directly in
// double, independently of rope.cpp.
double plain(int64_t j, int64_t d, double theta) { return 1.0 / std::pow(theta, double(2 * j) / double(d)); }

TEST(RopeInvFreq, DynamicNtkRescalesBaseForMaxSeqLen) {
  const nlohmann::json s = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  // Within max_position_embeddings (256): plain RoPE.
  auto within = rope_frequencies(spec(8, 10000.0, s), 256);
  ASSERT_TRUE(within.is_ok()) << within.status().message();
  for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(within->inv_freq[size_t(j)], plain(j, 8, 10000.0));
  // Beyond: base' = base * (factor * L / max - (factor - 1)) ^ (d / (d - 2)) with L = 1024.
  auto beyond = rope_frequencies(spec(8, 10000.0, s), 1024);
  ASSERT_TRUE(beyond.is_ok()) << beyond.status().message();
  const double base = 10000.0 * std::pow(2.0 * 1024 / 256 - 1, 8.0 / 6.0);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(beyond->inv_freq[size_t(j)], plain(j, 8, base), 1e-15);
  EXPECT_EQ(beyond->attention_factor, 1.0);
}

TEST(RopeInvFreq, YarnRampsBetweenInterpolationAndExtrapolation) {
  // Qwen2.5-style: factor 4 over an original context of 32768, theta 1e6, d = 128.
  const int64_t d = 128;
  const double theta = 1e6, factor = 4, ctx = 32768;
  RopeSpec sp{d, theta, {{"type", "yarn"}, {"factor", factor}, {"original_max_position_embeddings", 32768}}, 131072, std::nullopt};
  auto f = rope_frequencies(sp, 64);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  // Correction range: dims that turn beta_fast = 32 / beta_slow = 1 times over ctx, floored / ceiled.
  const double pi = 3.14159265358979323846;
  const double low = std::max(0.0, std::floor(d * std::log(ctx / (32 * 2 * pi)) / (2 * std::log(theta))));
  const double high = std::min(double(d - 1), std::ceil(d * std::log(ctx / (1 * 2 * pi)) / (2 * std::log(theta))));
  int interpolated = 0, extrapolated = 0, ramped = 0;
  for (int64_t j = 0; j < d / 2; ++j) {
    double r = (double(j) - low) / (high - low);
    r = r < 0 ? 0 : (r > 1 ? 1 : r);
    const double expected = plain(j, d, theta) / factor * r + plain(j, d, theta) * (1 - r);
    EXPECT_NEAR(f->inv_freq[size_t(j)], expected, 1e-15 * plain(j, d, theta)) << j;
    (r == 0 ? extrapolated : r == 1 ? interpolated : ramped)++;
  }
  EXPECT_GT(interpolated, 0);
  EXPECT_GT(extrapolated, 0);
  EXPECT_GT(ramped, 0);
  EXPECT_DOUBLE_EQ(f->attention_factor, 0.1 * std::log(factor) + 1);

  // transformers 5.x: a null factor is max_position_embeddings / original = 131072 / 32768 = 4.
  RopeSpec implicit = sp;
  implicit.scaling["factor"] = nullptr;
  auto fi = rope_frequencies(implicit, 64);
  ASSERT_TRUE(fi.is_ok()) << fi.status().message();
  EXPECT_EQ(fi->inv_freq, f->inv_freq);
  EXPECT_EQ(fi->attention_factor, f->attention_factor);

  // mscale / mscale_all_dim (DeepSeek): ratio of the two mscales; explicit attention_factor wins.
  sp.scaling["mscale"] = 0.707;
  sp.scaling["mscale_all_dim"] = 1.0;
  auto m = rope_frequencies(sp, 64);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->attention_factor, (0.1 * 0.707 * std::log(factor) + 1) / (0.1 * std::log(factor) + 1));
  sp.scaling["attention_factor"] = 1.25;
  EXPECT_DOUBLE_EQ(rope_frequencies(sp, 64)->attention_factor, 1.25);

  // truncate false: the unrounded correction range; original context defaults to max_position_embeddings.
  RopeSpec un{d, theta, {{"rope_type", "yarn"}, {"factor", factor}, {"truncate", false}, {"beta_fast", 16.0}}, 32768, std::nullopt};
  auto u = rope_frequencies(un, 64);
  ASSERT_TRUE(u.is_ok()) << u.status().message();
  const double ulow = std::max(0.0, d * std::log(ctx / (16 * 2 * pi)) / (2 * std::log(theta)));
  const double uhigh = std::min(double(d - 1), d * std::log(ctx / (2 * pi)) / (2 * std::log(theta)));
  for (int64_t j = 0; j < d / 2; ++j) {
    double r = (double(j) - ulow) / (uhigh - ulow);
    r = r < 0 ? 0 : (r > 1 ? 1 : r);
    EXPECT_NEAR(u->inv_freq[size_t(j)], plain(j, d, theta) * (r / factor + 1 - r), 1e-15 * plain(j, d, theta)) << j;
  }
}

TEST(RopeInvFreq, LongRopePicksFactorsByMaxSeqLen) {
  // Phi-3.5-style: original 4096 (top-level key), extended 131072, d = 8 for brevity.
  const std::vector<double> short_f = {1.0, 1.5, 2.0, 3.0}, long_f = {1.1, 2.5, 7.0, 40.0};
  RopeSpec sp{8, 10000.0, {{"type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}}, 131072, 4096};
  const double attn = std::sqrt(1 + std::log(131072.0 / 4096.0) / std::log(4096.0));
  auto within = rope_frequencies(sp, 4096);
  ASSERT_TRUE(within.is_ok()) << within.status().message();
  auto beyond = rope_frequencies(sp, 4097);
  ASSERT_TRUE(beyond.is_ok());
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(within->inv_freq[size_t(j)], 1.0 / (short_f[size_t(j)] * std::pow(10000.0, 2.0 * j / 8)), 1e-16);
    EXPECT_NEAR(beyond->inv_freq[size_t(j)], 1.0 / (long_f[size_t(j)] * std::pow(10000.0, 2.0 * j / 8)), 1e-16);
  }
  EXPECT_DOUBLE_EQ(within->attention_factor, attn);
  EXPECT_DOUBLE_EQ(beyond->attention_factor, attn);
  // Without original_max_position_embeddings the dict's factor sets the attention factor.
  RopeSpec nf{8, 10000.0, {{"rope_type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}, {"factor", 8.0}}, 4096, std::nullopt};
  EXPECT_DOUBLE_EQ(rope_frequencies(nf, 16)->attention_factor, std::sqrt(1 + std::log(8.0) / std::log(4096.0)));
}

TEST(RopeTables, ScaledTablesAreCosSinTimesAttentionFactor) {
  const std::vector<double> short_f = {1.0, 1.5, 2.0, 3.0}, long_f = {1.1, 2.5, 7.0, 40.0};
  RopeSpec sp{8, 10000.0, {{"type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}}, 64, 16};
  auto t = rope_tables(sp, 32);  // 32 > 16: long factors
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const double attn = std::sqrt(1 + std::log(64.0 / 16.0) / std::log(16.0));
  auto read = [](const graph::ConstantData& c) {
    std::vector<uint8_t> b;
    EXPECT_TRUE(c.write([&](const void* data, size_t size) {
                  auto p = static_cast<const uint8_t*>(data);
                  b.insert(b.end(), p, p + size);
                  return Status::ok();
                }).is_ok());
    std::vector<float> v(b.size() / 4);
    if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  auto cos_v = read(t->cos), sin_v = read(t->sin);
  ASSERT_EQ(cos_v.size(), 32u * 8);
  ASSERT_EQ(sin_v.size(), 32u * 8);
  for (int p : {0, 1, 17, 31}) {
    for (int i = 0; i < 8; ++i) {
      const double angle = p / (long_f[size_t(i % 4)] * std::pow(10000.0, 2.0 * (i % 4) / 8));
      EXPECT_FLOAT_EQ(cos_v[size_t(p * 8 + i)], float(std::cos(angle) * attn)) << p << " " << i;
      EXPECT_FLOAT_EQ(sin_v[size_t(p * 8 + i)], float(std::sin(angle) * attn)) << p << " " << i;
    }
  }
}

TEST(ArchTable, RowsAreUniqueAndFindable) {
  std::set<std::string_view> types;
  for (const auto& a : all_architectures()) {
    EXPECT_TRUE(types.insert(a.model_type).second) << a.model_type;
    EXPECT_EQ(find_architecture(a.model_type), &a);
    EXPECT_FALSE(a.architecture.empty());
    // A MoE row names all expert tensors (per expert, or fused gate_up + down);
    // a fused qkv per head needs a fused tensor.
    if (!a.names.router.empty()) {
      const bool per_expert = !a.names.expert_gate.empty() && !a.names.expert_up.empty() && !a.names.expert_down.empty();
      const bool fused = !a.names.fused_expert_gate_up.empty() && !a.names.fused_expert_down.empty();
      EXPECT_TRUE(per_expert != fused) << a.model_type;
    }
    // Latent attention names all its tensors; a clamped SwiGLU belongs to a MoE row.
    if (!a.names.kv_a.empty()) {
      EXPECT_FALSE(a.names.kv_a_norm.empty() || a.names.kv_b.empty() || a.names.q_a.empty() || a.names.q_b.empty())
          << a.model_type;
    }
    if (a.clamped_swiglu) {
      EXPECT_FALSE(a.names.router.empty()) << a.model_type;
    }
    if (a.qkv_per_head) {
      EXPECT_FALSE(a.names.qkv.empty());
    }
    // A shared expert names its three tensors and belongs to a MoE row (the
    // sigmoid gate is optional: Qwen2-MoE has one, DeepSeek-V3 does not).
    if (!a.names.shared_gate.empty()) {
      EXPECT_FALSE(a.names.router.empty() || a.names.shared_up.empty() || a.names.shared_down.empty());
    }
  }
  for (auto t : {"llama", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo2", "phi", "gpt_neox", "mixtral", "qwen3_moe",
                 "granite", "smollm3", "stablelm", "starcoder2", "qwen2_moe", "gpt_oss", "deepseek_v3", "mamba"}) {
    EXPECT_NE(find_architecture(t), nullptr) << t;
  }
  EXPECT_NE(find_architecture("gpt2"), nullptr);
  EXPECT_EQ(find_architecture("bert"), nullptr);  // encoders are not decoder rows
  EXPECT_NE(supported_model_types().find("gemma3_text"), std::string::npos);
}

}  // namespace
}  // namespace hf2pte::models
