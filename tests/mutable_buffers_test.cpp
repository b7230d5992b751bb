// alloc_mutable_buffers=false end to end (issue 3, item 8): the KV caches are
// left out of the memory plan, `inspect` says so, the runtime refuses to run
// until the caller binds memory to each, and with caller memory the program
// reproduces the fixture's reference logits (independent float64 references
// in tests/data/fixtures) while its K/V state visibly lives in that memory.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/npy.h"
#include "export/exporter.h"
#include "kernels/portable/kernels.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "decode_check.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol
const char* const kFixture = "llama-gqa";  // 2 layers, 2 KV heads, head_dim 16, context 256

std::string export_fixture(const std::string& dir, const std::string& name, exp::Backend backend, bool alloc_buffers) {
  exp::ExportRequest req;
  req.config.backend = backend;
  req.config.alloc_mutable_buffers = alloc_buffers;
  req.model_dir = dir;
  req.output_path = test::temp_dir(name) + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

nlohmann::json forward_json(const std::string& pte) {
  auto file = pte::PteFile::open(pte);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return {};
  const nlohmann::json j = pte::inspect_json(**file);
  for (const auto& m : j["methods"]) {
    if (m["name"] == "forward") return m;
  }
  ADD_FAILURE() << "no forward in " << pte;
  return {};
}

/// One forward call at positions [start, start + ids.size()): logits row-major [S, V].
std::vector<float> forward(rt::Method& m, const std::vector<int64_t>& ids, int64_t start) {
  const int64_t n = int64_t(ids.size());
  std::vector<int64_t> pos(ids.size());
  for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = start + i;
  EXPECT_TRUE(m.set_input(0, HostTensor::from(ScalarType::kLong, {1, n}, ids)).is_ok());
  EXPECT_TRUE(m.set_input(1, HostTensor::from(ScalarType::kLong, {n}, pos)).is_ok());
  auto st = m.execute();
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st.is_ok()) return {};
  auto out = m.output_tensor(0);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return out.is_ok() ? test::as_floats(*out) : std::vector<float>{};
}

/// Caller memory for every mutable buffer of `m`, bound to it (zero-filled).
std::vector<std::vector<float>> bind_caller_buffers(rt::Method& m) {
  std::vector<std::vector<float>> mem;
  for (size_t i = 0; i < m.num_mutable_buffers(); ++i) {
    const auto meta = m.mutable_buffer_meta(i);
    EXPECT_EQ(meta.dtype, ScalarType::kFloat);
    mem.emplace_back(meta.nbytes / sizeof(float), 0.0f);
  }
  for (size_t i = 0; i < mem.size(); ++i) {
    auto st = m.set_mutable_buffer(i, mem[i].data(), mem[i].size() * sizeof(float));
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return mem;
}

std::vector<float> row(const std::vector<float>& all, size_t r, size_t width) {
  return {all.begin() + int64_t(r * width), all.begin() + int64_t((r + 1) * width)};
}

class UnplannedMutableBuffers : public ::testing::TestWithParam<exp::Backend> {};

TEST_P(UnplannedMutableBuffers, InspectShowsThemUnplannedAndTheArenaShrinks) {
  const std::string dir = test::repo_path(std::string("tests/data/fixtures/") + kFixture);
  const auto planned = forward_json(export_fixture(dir, "mb_planned", GetParam(), true));
  const auto unplanned = forward_json(export_fixture(dir, "mb_unplanned", GetParam(), false));
  ASSERT_EQ(planned["mutable_buffers"].size(), 4u);  // k and v caches of 2 layers
  ASSERT_EQ(unplanned["mutable_buffers"].size(), 4u);
  uint64_t kv_bytes = 0;
  for (const auto& b : unplanned["mutable_buffers"]) {
    EXPECT_EQ(b["planned"], false) << b.dump();
    EXPECT_EQ(b["data"], "unplanned") << b.dump();
    EXPECT_EQ(b["sizes"], nlohmann::json({2, 256, 16})) << b.dump();  // [kv heads, context, head_dim]
    kv_bytes += b["nbytes"].get<uint64_t>();
  }
  for (const auto& b : planned["mutable_buffers"]) EXPECT_EQ(b["planned"], true) << b.dump();
  EXPECT_EQ(kv_bytes, 4u * 2 * 256 * 16 * 4);
  const auto arena = [](const nlohmann::json& m) { return m["non_const_buffer_sizes"][1].get<uint64_t>(); };
  const auto unshared = [](const nlohmann::json& m) { return m["planned_tensor_bytes_without_reuse"].get<uint64_t>(); };
  EXPECT_LT(arena(unplanned), arena(planned));
  EXPECT_LE(arena(unplanned) + kv_bytes, arena(planned));  // the caches were live for the whole call
  EXPECT_EQ(unshared(unplanned) + kv_bytes, unshared(planned));
  RecordProperty("arena_planned", std::to_string(arena(planned)));
  RecordProperty("arena_unplanned", std::to_string(arena(unplanned)));
}

TEST_P(UnplannedMutableBuffers, CallerMemoryHoldsTheKvCacheAndReproducesReference) {
  const std::string dir = test::repo_path(std::string("tests/data/fixtures/") + kFixture);
  const std::string pte = export_fixture(dir, "mb_caller", GetParam(), false);
  auto program = rt::Program::load(pte);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto loaded = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  rt::Method& m = **loaded;

  // Metadata: names, shapes and the bytes a caller must supply.
  ASSERT_EQ(m.num_mutable_buffers(), 4u);
  const char* names[] = {"layers.0.attn.k_cache", "layers.0.attn.v_cache", "layers.1.attn.k_cache",
                         "layers.1.attn.v_cache"};
  for (size_t i = 0; i < 4; ++i) {
    const auto meta = m.mutable_buffer_meta(i);
    EXPECT_FALSE(m.buffer_planned(i));
    EXPECT_FALSE(meta.planned);
    EXPECT_FALSE(meta.bound);
    EXPECT_EQ(meta.name, names[i]);
    EXPECT_EQ(meta.sizes, (std::vector<int64_t>{2, 256, 16}));
    EXPECT_EQ(meta.nbytes, size_t(2 * 256 * 16 * 4));
  }
  EXPECT_FALSE(m.buffer_planned(4));

  const auto ids = test::as_longs(test::load_npy(dir + "/input_ids.npy"));
  const auto greedy = test::as_longs(test::load_npy(dir + "/greedy.npy"));
  const auto full_ref = test::as_floats(test::load_npy(dir + "/logits.npy"));
  const auto step_ref = test::as_floats(test::load_npy(dir + "/greedy_step_logits.npy"));
  const int64_t T = int64_t(ids.size());
  const size_t V = full_ref.size() / ids.size();
  ASSERT_EQ(step_ref.size(), greedy.size() * V);
  ASSERT_GE(greedy.size(), 3u);

  // Unbound: execute refuses, naming the buffer, and runs nothing.
  std::vector<int64_t> pos(ids.size());
  for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = i;
  ASSERT_TRUE(m.set_input(0, HostTensor::from(ScalarType::kLong, {1, T}, ids)).is_ok());
  ASSERT_TRUE(m.set_input(1, HostTensor::from(ScalarType::kLong, {T}, pos)).is_ok());
  auto st = m.execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "mutable buffer 0 (layers.0.attn.k_cache) is unplanned and has no memory; bind 32768 bytes with "
            "set_mutable_buffer before execute (method forward)");

  // Bad bindings are refused with what was needed.
  alignas(64) static float small[8192];
  st = m.set_mutable_buffer(0, small, 32767);
  EXPECT_EQ(st.message(), "mutable buffer 0 (layers.0.attn.k_cache) needs a buffer of 32768 bytes, got 32767 (method forward)");
  EXPECT_FALSE(m.set_mutable_buffer(0, nullptr, 32768).is_ok());
  EXPECT_FALSE(m.set_mutable_buffer(0, reinterpret_cast<uint8_t*>(small) + 1, 32767).is_ok());  // misaligned
  std::vector<float> big(8193);
  st = m.set_mutable_buffer(1, reinterpret_cast<uint8_t*>(big.data()) + 2, 32768);
  EXPECT_EQ(st.message(), "mutable buffer 1 (layers.0.attn.v_cache) needs memory aligned to 4 bytes; the address is not (method forward)");
  EXPECT_FALSE(m.set_mutable_buffer(4, big.data(), 32768).is_ok());  // out of range
  // One of four bound is not enough.
  ASSERT_TRUE(m.set_mutable_buffer(0, small, sizeof small).is_ok());
  st = m.execute();
  EXPECT_NE(st.message().find("mutable buffer 1 (layers.0.attn.v_cache) is unplanned and has no memory"), std::string::npos)
      << st.message();

  // Caller memory, zero-filled: prefill reproduces the reference at every position.
  auto kv = bind_caller_buffers(m);
  const auto prefill = forward(m, ids, 0);
  ASSERT_EQ(prefill.size(), full_ref.size());
  EXPECT_LE(test::max_abs_diff(prefill, full_ref), kLogitsAtol);

  // The K/V state is in the caller's memory: rows 0..T-1 written, the rest zero.
  auto expect_written_up_to = [&](int64_t n) {
    for (size_t b = 0; b < kv.size(); ++b) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t p = 0; p < 256; ++p) {
          const float* r = kv[b].data() + (h * 256 + p) * 16;
          const bool nonzero = std::any_of(r, r + 16, [](float x) { return x != 0.0f; });
          if (nonzero != (p < n)) {
            ADD_FAILURE() << names[b] << " head " << h << " position " << p << (nonzero ? " written" : " empty")
                          << " after " << n << " tokens";
            return;
          }
        }
      }
    }
  };
  expect_written_up_to(T);

  // Greedy decode through the caller's cache: logits within 1e-4, ids exact.
  std::vector<int64_t> produced;
  double worst = 0;
  std::vector<float> last(prefill.end() - int64_t(V), prefill.end());
  for (size_t k = 0; k < greedy.size(); ++k) {
    worst = std::max(worst, test::max_abs_diff(last, row(step_ref, k, V)));
    produced.push_back(int64_t(std::max_element(last.begin(), last.end()) - last.begin()));
    if (k + 1 == greedy.size()) break;
    last = forward(m, {produced.back()}, T + int64_t(k));
    ASSERT_EQ(last.size(), V);
  }
  EXPECT_EQ(produced, greedy);
  EXPECT_LE(worst, kLogitsAtol);
  expect_written_up_to(T + int64_t(greedy.size()) - 1);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(worst));

  // The state outlives the method: a freshly loaded method given the same
  // caller memory continues the decode where the first one stopped.
  const int64_t at = T + int64_t(greedy.size()) - 1;  // next free position
  auto reloaded = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(reloaded.is_ok()) << reloaded.status().message();
  for (size_t i = 0; i < kv.size(); ++i) {
    ASSERT_TRUE((*reloaded)->set_mutable_buffer(i, kv[i].data(), kv[i].size() * sizeof(float)).is_ok());
  }
  // Rewind both methods to the state before the last greedy step: rows past
  // `at - 1` are rewritten by the call, so re-running step k = size-2 must
  // give the reference's last row again.
  const size_t k = greedy.size() - 2;
  const auto again = forward(**reloaded, {greedy[k]}, at - 1);
  EXPECT_LE(test::max_abs_diff(again, row(step_ref, k + 1, V)), kLogitsAtol);

  // Control: the same step on an empty cache is far from the reference, so
  // the check above depends on the state held in the caller's memory.
  for (auto& b : kv) std::fill(b.begin(), b.end(), 0.0f);
  const auto cold = forward(**reloaded, {greedy[k]}, at - 1);
  EXPECT_GT(test::max_abs_diff(cold, row(step_ref, k + 1, V)), 1e-3);
}

// The decode-check helper (TextGenerator, which binds zeroed memory itself)
// and the full-sequence check also run such programs unchanged.
TEST_P(UnplannedMutableBuffers, RunnerBindsZeroedMemoryAndReproducesGreedy) {
  const std::string dir = test::repo_path(std::string("tests/data/fixtures/") + kFixture);
  const std::string pte = export_fixture(dir, "mb_runner", GetParam(), false);
  test::expect_full_sequence_logits(dir, pte, portable_registry(), kLogitsAtol);
  double worst = test::expect_decode_reproduces_greedy(dir, pte, portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(worst));
}

INSTANTIATE_TEST_SUITE_P(Backends, UnplannedMutableBuffers,
                         ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack),
                         [](const auto& info) { return info.param == exp::Backend::kPortable ? "portable" : "xnnpack"; });

// Our planner gives every buffer bytes of its own, so a planned cache can be
// moved to caller memory (one cache per sequence: hf2pte serve's slots).
TEST(PlannedMutableBuffers, AreRebindable) {
  const std::string dir = test::repo_path(std::string("tests/data/fixtures/") + kFixture);
  auto program = rt::Program::load(export_fixture(dir, "mb_planned_bind", exp::Backend::kPortable, true));
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto m = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_EQ((*m)->num_mutable_buffers(), 4u);
  EXPECT_TRUE((*m)->buffer_planned(0));
  for (size_t i = 0; i < (*m)->num_mutable_buffers(); ++i) {
    const auto meta = (*m)->mutable_buffer_meta(i);
    EXPECT_TRUE(meta.rebindable) << meta.name;
    std::vector<float> mem(meta.nbytes / sizeof(float));
    EXPECT_TRUE((*m)->set_mutable_buffer(i, mem.data(), meta.nbytes).is_ok()) << meta.name;
    EXPECT_EQ((*m)->set_mutable_buffer(i, mem.data(), meta.nbytes - 1).message(),
              fmt::format("mutable buffer {} ({}) needs a buffer of {} bytes, got {} (method forward)", i, meta.name,
                          meta.nbytes, meta.nbytes - 1));
  }
  auto owned = rt::bind_zeroed_mutable_buffers(**m);
  ASSERT_TRUE(owned.is_ok());
  EXPECT_TRUE(owned->empty());
}

// The CLI: export accepts the flag, inspect lists the caches as unplanned,
// and `run` (prefill) and `generate` (greedy through the KV cache) bind zeroed
// memory themselves and reproduce the reference.
TEST(MutableBuffersCli, ExportInspectRunGenerate) {
  const std::string dir = test::temp_dir("mb_cli");
  const std::string fixture = test::repo_path(std::string("tests/data/fixtures/") + kFixture);
  const std::string pte = dir + "/m.pte";
  auto r = test::run_cli(HF2PTE_CLI, "export " + fixture + " -o " + pte + " --alloc-mutable-buffers=false --quiet", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = test::run_cli(HF2PTE_CLI, "inspect " + pte, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("    mutable buffers: 4 (0 planned, 4 unplanned: the caller supplies 131072 bytes)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("      layers.1.attn.v_cache #"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" f32[2, 256, 16] (unplanned)\n"), std::string::npos) << r.out;
  r = test::run_cli(HF2PTE_CLI, "inspect --json " + pte, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  size_t unplanned = 0;
  for (const auto& m : j["methods"]) {
    for (const auto& b : m.value("mutable_buffers", nlohmann::json::array())) unplanned += b["planned"] == false;
  }
  EXPECT_EQ(unplanned, 4u);

  const auto ids = test::as_longs(test::load_npy(fixture + "/input_ids.npy"));
  const auto ref = test::as_floats(test::load_npy(fixture + "/logits.npy"));
  const auto greedy = test::as_longs(test::load_npy(fixture + "/greedy.npy"));
  const int64_t T = int64_t(ids.size());
  std::vector<int64_t> pos(ids.size());
  for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = i;
  ASSERT_TRUE(write_npy(dir + "/ids.npy", HostTensor::from(ScalarType::kLong, {1, T}, ids)).is_ok());
  ASSERT_TRUE(write_npy(dir + "/pos.npy", HostTensor::from(ScalarType::kLong, {T}, pos)).is_ok());
  r = test::run_cli(HF2PTE_CLI, "run " + pte + " --input " + dir + "/ids.npy --input " + dir + "/pos.npy --output-dir " +
                                    dir + "/out", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(test::max_abs_diff(test::as_floats(test::load_npy(dir + "/out/output_0.npy")), ref), kLogitsAtol);

  std::string prompt, want;
  for (size_t i = 0; i < ids.size(); ++i) prompt += (i ? "," : "") + std::to_string(ids[i]);
  for (size_t i = 0; i < greedy.size(); ++i) want += (i ? " " : "") + std::to_string(greedy[i]);
  r = test::run_cli(HF2PTE_CLI, "generate " + pte + " --prompt-ids " + prompt + " --max-new-tokens " +
                                    std::to_string(greedy.size()) + " --print-ids", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string got = r.out;
  while (!got.empty() && (got.back() == '\n' || got.back() == ' ')) got.pop_back();
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace hf2pte
