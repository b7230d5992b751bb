// RoPE frequencies (plain and scaled) and the architecture table.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>

#include "models/arch.h"
#include "models/rope.h"

namespace hf2pte::models {
namespace {

RopeSpec spec(int64_t dim, double theta, nlohmann::json scaling = nullptr) {
  return RopeSpec{dim, theta, std::move(scaling), 256};
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

TEST(RopeInvFreq, UnsupportedTypesAreNamed) {
  auto y = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "yarn"}, {"factor", 4.0}}), 16);
  ASSERT_FALSE(y.is_ok());
  EXPECT_EQ(y.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(y.status().message().find("'yarn'"), std::string::npos) << y.status().message();
  // Dynamic NTK is plain RoPE only within max_position_embeddings.
  EXPECT_TRUE(rope_inv_freq(spec(8, 10000.0, {{"rope_type", "dynamic"}, {"factor", 2.0}}), 256).is_ok());
  auto dyn = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "dynamic"}, {"factor", 2.0}}), 512);
  ASSERT_FALSE(dyn.is_ok());
  EXPECT_NE(dyn.status().message().find("dynamic"), std::string::npos);
  // A llama3 dict without its numbers is an input error naming the key.
  auto bad = rope_inv_freq(spec(8, 10000.0, {{"rope_type", "llama3"}, {"factor", 8.0}}), 16);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("low_freq_factor"), std::string::npos);
}

TEST(ArchTable, RowsAreUniqueAndFindable) {
  std::set<std::string_view> types;
  for (const auto& a : all_architectures()) {
    EXPECT_TRUE(types.insert(a.model_type).second) << a.model_type;
    EXPECT_EQ(find_architecture(a.model_type), &a);
    EXPECT_FALSE(a.architecture.empty());
    // A MoE row names all expert tensors; a fused qkv per head needs a fused tensor.
    if (!a.names.router.empty()) {
      EXPECT_FALSE(a.names.expert_gate.empty() || a.names.expert_up.empty() || a.names.expert_down.empty());
    }
    if (a.qkv_per_head) {
      EXPECT_FALSE(a.names.qkv.empty());
    }
  }
  for (auto t : {"llama", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo2", "phi", "gpt_neox", "mixtral", "qwen3_moe"}) {
    EXPECT_NE(find_architecture(t), nullptr) << t;
  }
  EXPECT_NE(find_architecture("gpt2"), nullptr);
  EXPECT_EQ(find_architecture("bert"), nullptr);  // encoders are not decoder rows
  EXPECT_NE(supported_model_types().find("gemma3_text"), std::string::npos);
}

}  // namespace
}  // namespace hf2pte::models
