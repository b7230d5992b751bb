#include <map>

#include <gtest/gtest.h>

#include "llm/generator.h"
#include "llm/sampler.h"

namespace hf2pte::llm {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f};

TEST(Sampler, GreedyIsArgmax) {
  Sampler s(SamplingConfig{});
  EXPECT_EQ(s.sample(kLogits, {}), 1);
}

TEST(Sampler, RepetitionPenaltyAppliesToSeenIds) {
  SamplingConfig c;
  c.repetition_penalty = 2.0;
  Sampler s(c);
  EXPECT_EQ(s.sample(kLogits, std::vector<int64_t>{1, 1}), 4);  // 3.0 / 2 = 1.5 < 2.9
}

TEST(Sampler, SeedIsReproducible) {
  SamplingConfig c;
  c.temperature = 1.0;
  c.seed = 42;
  Sampler a(c), b(c);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits, {}), b.sample(kLogits, {}));
}

TEST(Sampler, TopKTopPMinPRestrictCandidates) {
  SamplingConfig c;
  c.temperature = 1.0;
  c.seed = 7;
  c.top_k = 2;
  Sampler k(c);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 200; ++i) ++seen[k.sample(kLogits, {})];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen.count(1) && seen.count(4));

  c.top_k = 0;
  c.top_p = 0.1;  // the top token alone already has more mass
  Sampler p(c);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.sample(kLogits, {}), 1);

  c.top_p = 1.0;
  c.min_p = 0.95;  // only tokens with p >= 0.95 * p(max): ids 1 and 4 (exp(-0.1) = 0.905 < 0.95) -> only 1
  Sampler m(c);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(m.sample(kLogits, {}), 1);
}

TEST(GenerationStats, SummaryNamesEveryNumber) {
  GenerationStats st;
  st.prompt_tokens = 5;
  st.generated_tokens = 11;
  st.prefill_seconds = 0.5;
  st.decode_seconds = 2.0;
  st.time_to_first_token = 0.6;
  EXPECT_EQ(st.summary(),
            "prompt tokens 5, prefill 10.0 tok/s, generated tokens 11, decode 5.0 tok/s, time to first token 0.600 s");
}

}  // namespace
}  // namespace hf2pte::llm
