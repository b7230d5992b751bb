// hf2pte serve's engine on the real stories260K program: every slot, chunked
// prefill and prefix reuse give exactly the text `hf2pte generate` prints
// (TextGenerator through the same streamer), jobs interleave, stop strings
// cut, cancelled jobs free their slot, and a full queue refuses.
#include <gtest/gtest.h>

#include <thread>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "llm/generator.h"
#include "llm/tokenizer/tokenizer.h"
#include "serve/engine.h"
#include "test_util.h"

namespace hf2pte::serve {
namespace {

std::string export_stories(bool alloc_mutable_buffers) {
  exp::ExportRequest req;
  req.model_dir = test::repo_path("models/stories260K");
  req.config.alloc_mutable_buffers = alloc_mutable_buffers;
  req.output_path = test::temp_dir(alloc_mutable_buffers ? "serve-planned" : "serve-unplanned") + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

struct Loaded {
  std::shared_ptr<rt::Program> program;
  std::shared_ptr<const llm::Tokenizer> tok;
};

Loaded load(const std::string& pte) {
  EXPECT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto p = rt::Program::load(pte);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  auto t = llm::Tokenizer::load(pte);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return {*p, std::shared_ptr<const llm::Tokenizer>(std::move(*t))};
}

/// What `hf2pte generate` prints after the prompt: greedy ids through TextGenerator, streamed to text.
std::string reference_text(const Loaded& m, const std::vector<int64_t>& prompt, int64_t n) {
  auto gen = llm::TextGenerator::create(m.program, optimized_registry());
  EXPECT_TRUE(gen.is_ok()) << gen.status().message();
  llm::GenerationConfig cfg;
  cfg.max_new_tokens = n;
  llm::TextStreamer streamer(*m.tok, prompt.back());
  const auto& eos = (*gen)->eos_ids();
  std::string text;
  auto ids = (*gen)->generate(prompt, cfg, [&](int64_t id) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) text += streamer.push(id);
    return true;
  }, nullptr);
  EXPECT_TRUE(ids.is_ok()) << ids.status().message();
  return text + streamer.flush();
}

std::vector<int64_t> encode(const Loaded& m, const std::string& s) {
  auto ids = m.tok->encode(s, true);
  EXPECT_TRUE(ids.is_ok());
  return *ids;
}

JobSpec greedy_job(std::vector<int64_t> prompt, int64_t n) {
  JobSpec j;
  j.prompt = std::move(prompt);
  j.max_tokens = n;
  return j;
}

std::string wait_text(Job& j) {
  std::string out;
  bool done = false;
  while (!done) out += j.take_text(std::chrono::milliseconds(50), &done);
  return out;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The cat", "Lily and Tom went", "One day, a little",
                                           "Once upon a time there was"};

class ServeEngine : public ::testing::TestWithParam<bool> {};

TEST_P(ServeEngine, EverySlotMatchesGenerate) {
  Loaded m = load(export_stories(GetParam()));
  constexpr int64_t kN = 40;
  std::vector<std::string> want;
  for (const auto& p : kPrompts) want.push_back(reference_text(m, encode(m, p), kN));
  for (int slots : {1, 3}) {
    for (int64_t chunk : {int64_t(256), int64_t(3)}) {
      auto e = Engine::create(m.program, optimized_registry(), m.tok, EngineOptions{slots, 16, chunk});
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      // Two rounds: the second reuses the prefixes the first left in the slots.
      for (int round = 0; round < 2; ++round) {
        std::vector<std::shared_ptr<Job>> jobs;
        for (const auto& p : kPrompts) {
          auto j = (*e)->submit(greedy_job(encode(m, p), kN));
          ASSERT_TRUE(j.is_ok()) << j.status().message();
          jobs.push_back(*j);
        }
        for (size_t i = 0; i < jobs.size(); ++i) {
          EXPECT_EQ(wait_text(*jobs[i]), want[i]) << "slots " << slots << " chunk " << chunk << " round " << round
                                                  << " prompt '" << kPrompts[i] << "'";
          EXPECT_EQ(jobs[i]->timings().prompt_tokens, int64_t(encode(m, kPrompts[i]).size()));
        }
      }
      const EngineMetrics mt = (*e)->metrics();
      EXPECT_EQ(mt.active, 0);
      EXPECT_EQ(mt.jobs_finished, 2 * kPrompts.size());
      EXPECT_GT(mt.reused_tokens, 0u) << "slots " << slots;  // round 2 found its prompts cached
    }
  }
}

TEST_P(ServeEngine, NextTurnSkipsTheCachedPrefix) {
  Loaded m = load(export_stories(GetParam()));
  auto e = Engine::create(m.program, optimized_registry(), m.tok, EngineOptions{2, 4, 256});
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const auto first = encode(m, "Once upon a time");
  auto a = (*e)->submit(greedy_job(first, 12));
  ASSERT_TRUE(a.is_ok());
  const std::string a_text = wait_text(**a);
  // The next turn: the first prompt, its answer, and more text.
  auto next = encode(m, "Once upon a time" + a_text + " Then");
  ASSERT_GT(next.size(), first.size());
  auto b = (*e)->submit(greedy_job(next, 20));
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(wait_text(**b), reference_text(m, next, 20));
  EXPECT_GE((*b)->timings().reused_tokens, int64_t(first.size()));
  EXPECT_EQ((*b)->timings().slot, (*a)->timings().slot);
}

TEST_P(ServeEngine, StopStringsCancelAndAFullQueue) {
  Loaded m = load(export_stories(GetParam()));
  const auto prompt = encode(m, "Once upon a time");
  const std::string full = reference_text(m, prompt, 40);
  auto e = Engine::create(m.program, optimized_registry(), m.tok, EngineOptions{1, 0, 256});
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  // A stop string from the middle of the reference text cuts it there.
  const size_t at = full.find(' ', full.size() / 2);
  ASSERT_NE(at, std::string::npos);
  JobSpec stop = greedy_job(prompt, 40);
  stop.stop = {full.substr(at, 3), "never appears"};
  auto s = (*e)->submit(stop);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(wait_text(**s), full.substr(0, full.find(full.substr(at, 3))));
  EXPECT_EQ((*s)->finish_reason(), FinishReason::kStop);
  // max_tokens ends with "length".
  auto l = (*e)->submit(greedy_job(prompt, 3));
  ASSERT_TRUE(l.is_ok());
  wait_text(**l);
  EXPECT_EQ((*l)->finish_reason(), FinishReason::kLength);
  EXPECT_EQ((*l)->timings().completion_tokens, 3);
  // One slot, no queue: a second job is refused while the first runs.
  auto running = (*e)->submit(greedy_job(prompt, 200));
  ASSERT_TRUE(running.is_ok());
  auto refused = (*e)->submit(greedy_job(prompt, 5));
  EXPECT_EQ(refused.status().code(), ErrorCode::kOutOfRange);
  // A cancelled job frees the slot.
  (*running)->cancel();
  wait_text(**running);
  EXPECT_EQ((*running)->finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ((*e)->metrics().active, 0);
  EXPECT_EQ((*e)->metrics().jobs_cancelled, 1u);
  auto after = (*e)->submit(greedy_job(prompt, 40));
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  EXPECT_EQ(wait_text(**after), full);
  (*e)->drain();
  EXPECT_EQ((*e)->submit(greedy_job(prompt, 5)).status().code(), ErrorCode::kCancelled);
}

// A recurrent state (Mamba) holds the state after everything the slot ran, so
// a prompt sharing only part of that is prefilled from scratch, and one that
// extends all of it continues from the state; both give generate's text.
TEST(ServeEngineRecurrent, ReusesOnlyTheWholeState) {
  exp::ExportRequest req;
  req.model_dir = test::repo_path("tests/data/fixtures/mamba");
  req.output_path = test::temp_dir("serve-mamba") + "/model.pte";
  ASSERT_TRUE(exp::export_model(req).is_ok());
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto program = rt::Program::load(req.output_path);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  // The fixture has no tokenizer: text through stories260K's (its 512 ids cover the 320).
  auto tok = llm::Tokenizer::load(test::repo_path("models/stories260K"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  Loaded m{*program, std::shared_ptr<const llm::Tokenizer>(std::move(*tok))};
  auto gen = llm::TextGenerator::create(m.program, optimized_registry());
  ASSERT_TRUE(gen.is_ok());
  EXPECT_TRUE((*gen)->has_recurrent_state());

  const auto first = test::as_longs(test::load_npy(req.model_dir + "/input_ids.npy"));
  auto e = Engine::create(m.program, optimized_registry(), m.tok, EngineOptions{1, 4, 256});
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  auto a = (*e)->submit(greedy_job(first, 12));
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(wait_text(**a), reference_text(m, first, 12));
  // Shares 6 tokens with the slot's state: no reuse.
  std::vector<int64_t> partial(first.begin(), first.begin() + 6);
  partial.push_back(7);
  auto b = (*e)->submit(greedy_job(partial, 8));
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(wait_text(**b), reference_text(m, partial, 8));
  EXPECT_EQ((*b)->timings().reused_tokens, 0);
  // Extends everything the slot ran: continues from the state.
  std::vector<int64_t> whole = partial;
  auto b_ids = (*gen)->generate(partial, [] { llm::GenerationConfig c; c.max_new_tokens = 8; return c; }(), nullptr, nullptr);
  ASSERT_TRUE(b_ids.is_ok());
  whole.insert(whole.end(), b_ids->begin(), b_ids->end());
  whole.push_back(9);
  auto c = (*e)->submit(greedy_job(whole, 8));
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(wait_text(**c), reference_text(m, whole, 8));
  EXPECT_GE((*c)->timings().reused_tokens, int64_t(partial.size()));
}

INSTANTIATE_TEST_SUITE_P(Caches, ServeEngine, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "planned" : "caller_owned"; });

}  // namespace
}  // namespace hf2pte::serve
