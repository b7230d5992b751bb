#include "decode_check.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "llm/generator.h"
#include "test_util.h"

namespace hf2pte::test {

std::optional<HostTensor> run_full_sequence(const std::string& pte_path, const std::vector<int64_t>& ids,
                                            const rt::KernelRegistry& kernels) {
  auto program = rt::Program::load(pte_path);
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return std::nullopt;
  auto method = (*program)->load_method("forward", kernels);
  EXPECT_TRUE(method.is_ok()) << method.status().message();
  if (!method.is_ok()) return std::nullopt;
  auto kv = rt::bind_zeroed_mutable_buffers(**method);  // alloc_mutable_buffers=false programs
  EXPECT_TRUE(kv.is_ok()) << kv.status().message();
  if (!kv.is_ok()) return std::nullopt;
  const int64_t T = int64_t(ids.size());
  std::vector<int64_t> pos(ids.size());
  for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = i;
  EXPECT_TRUE((*method)->set_input(0, HostTensor::from(ScalarType::kLong, {1, T}, ids)).is_ok());
  // A program without a KV cache (--no-kv-cache) takes input_ids only.
  if ((*method)->num_inputs() > 1) {
    EXPECT_TRUE((*method)->set_input(1, HostTensor::from(ScalarType::kLong, {T}, pos)).is_ok());
  }
  auto st = (*method)->execute();
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st.is_ok()) return std::nullopt;
  auto out = (*method)->output_tensor(0);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  if (!out.is_ok()) return std::nullopt;
  return std::move(out).value();
}

double expect_full_sequence_logits(const std::string& dir, const std::string& pte_path,
                                   const rt::KernelRegistry& kernels, double atol) {
  auto ids = as_longs(load_npy(dir + "/input_ids.npy"));
  auto ref = load_npy(dir + "/logits.npy");
  const int64_t T = int64_t(ids.size());
  auto out = run_full_sequence(pte_path, ids, kernels);
  if (!out) return -1;
  EXPECT_EQ(out->sizes, (std::vector<int64_t>{1, T, ref.sizes[1]}));
  double diff = max_abs_diff(as_floats(*out), as_floats(ref));
  EXPECT_LE(diff, atol) << dir;
  return diff;
}

double expect_decode_reproduces_greedy(const std::string& dir, const std::string& pte_path,
                                       const rt::KernelRegistry& kernels, double atol) {
  auto program = rt::Program::load(pte_path);
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return -1;
  auto gen = llm::TextGenerator::create(*program, kernels);
  EXPECT_TRUE(gen.is_ok()) << gen.status().message();
  if (!gen.is_ok()) return -1;

  auto ids = as_longs(load_npy(dir + "/input_ids.npy"));
  auto greedy = as_longs(load_npy(dir + "/greedy.npy"));
  auto step_ref = as_floats(load_npy(dir + "/greedy_step_logits.npy"));
  const int64_t V = (*gen)->vocab_size();
  EXPECT_EQ(step_ref.size(), greedy.size() * size_t(V));
  if (step_ref.size() != greedy.size() * size_t(V)) return -1;

  std::vector<int64_t> produced;
  double worst = 0;
  auto logits = (*gen)->forward(ids, 0);
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  if (!logits.is_ok()) return -1;
  std::vector<float> last(logits->end() - V, logits->end());
  for (size_t k = 0; k < greedy.size(); ++k) {
    std::vector<float> ref_row(step_ref.begin() + int64_t(k) * V, step_ref.begin() + int64_t(k + 1) * V);
    worst = std::max(worst, max_abs_diff(last, ref_row));
    int64_t next = int64_t(std::max_element(last.begin(), last.end()) - last.begin());
    produced.push_back(next);
    if (k + 1 == greedy.size()) break;
    auto step = (*gen)->forward({next}, int64_t(ids.size() + k));
    EXPECT_TRUE(step.is_ok()) << step.status().message();
    if (!step.is_ok()) return -1;
    last = *step;
  }
  EXPECT_EQ(produced, greedy) << dir;
  EXPECT_LE(worst, atol) << dir;
  return worst;
}

}  // namespace hf2pte::test
