// The CLI contract for bad input: one line "hf2pte: error: <what> (<where>)",
// exit code 2, and no output file (an existing one is left untouched).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/npy.h"
#include "test_util.h"

namespace hf2pte {
namespace {

namespace fs = std::filesystem;

using test::CliResult;
CliResult run_cli(const std::string& args, const std::string& dir) { return test::run_cli(HF2PTE_CLI, args, dir); }

/// A copy of a fixture checkpoint that a test may damage.
std::string copy_fixture(const std::string& name, const std::string& dir) {
  auto dst = dir + "/" + name;
  fs::copy(test::repo_path("tests/data/fixtures/" + name), dst, fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(dst)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dst;
}

void rewrite_config(const std::string& model, const std::string& from, const std::string& to) {
  std::ifstream in(model + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  auto p = s.find(from);
  ASSERT_NE(p, std::string::npos) << from;
  s.replace(p, from.size(), to);
  std::ofstream(model + "/config.json") << s;
}

void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("hf2pte: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(Cli, MissingConfigField) {
  auto dir = test::temp_dir("t");
  auto model = copy_fixture("llama-mha", dir);
  rewrite_config(model, "\"hidden_size\": 64,", "");
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte", dir);
  expect_one_line_error(r, "hidden_size");
  EXPECT_FALSE(fs::exists(dir + "/m.pte"));
}

TEST(Cli, UnsupportedModelTypeListsSupportedOnes) {
  auto dir = test::temp_dir("t");
  auto model = copy_fixture("llama-mha", dir);
  rewrite_config(model, "\"model_type\": \"llama\"", "\"model_type\": \"rwkv\"");
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte", dir);
  expect_one_line_error(r, "unsupported model_type 'rwkv'; supported: llama, mistral, qwen2, phi3");
  EXPECT_FALSE(fs::exists(dir + "/m.pte"));
}

TEST(Cli, TensorWithWrongShape) {
  auto dir = test::temp_dir("t");
  auto model = copy_fixture("llama-mha", dir);
  rewrite_config(model, "\"intermediate_size\": 160", "\"intermediate_size\": 128");
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte", dir);
  expect_one_line_error(r, "expected [128, 64], got [160, 64]");
  EXPECT_FALSE(fs::exists(dir + "/m.pte"));
}

TEST(Cli, TruncatedSafetensorsKeepsExistingOutput) {
  auto dir = test::temp_dir("t");
  auto model = copy_fixture("llama-mha", dir);
  auto st = model + "/model.safetensors";
  fs::resize_file(st, fs::file_size(st) / 2);
  std::ofstream(dir + "/m.pte") << "previous";
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte", dir);
  expect_one_line_error(r, "model.safetensors");
  std::ifstream in(dir + "/m.pte");
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "previous");
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Cli, ExportRunInspectRoundTrip) {
  auto dir = test::temp_dir("t");
  auto r = run_cli("export " + test::repo_path("tests/data/fixtures/llama-mha") + " -o " + dir + "/m.pte --quiet", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // --quiet
  auto ins = run_cli("inspect " + dir + "/m.pte --json", dir);
  EXPECT_EQ(ins.exit_code, 0) << ins.err;
  auto bad = run_cli("run " + dir + "/m.pte --input " + dir + "/missing.npy --input x.npy --output-dir " + dir + "/out", dir);
  expect_one_line_error(bad, "missing.npy");
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// bench prints its rates and byte counts, and its peak RSS is the program's:
// the bandwidth probe's 1 GiB buffer is measured before the program loads
// and the peak mark is reset after it (a count including it is > 1024 MiB).
TEST(Cli, BenchReportsRatesBytesAndTheProgramsPeakMemory) {
  auto dir = test::temp_dir("t");
  auto ex = run_cli("export " + test::repo_path("tests/data/fixtures/llama-mha") + " -o " + dir + "/m.pte --quiet", dir);
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  auto r = run_cli("bench " + dir + "/m.pte --prompt-len 4 --gen 4 --threads 1", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"first step", "prefill: 4 tokens", "decode:  4 tokens", "decode share of the bandwidth limit",
                           "decode share, block by block"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  double mb = -1, rss = -1;
  auto at = [&](const std::string& key) { auto p = r.out.find(key); return p == std::string::npos ? p : p + key.size(); };
  ASSERT_NE(at("weights read per decode step: "), std::string::npos) << r.out;
  ASSERT_NE(at("peak RSS: "), std::string::npos) << r.out;
  mb = std::stod(r.out.substr(at("weights read per decode step: ")));
  rss = std::stod(r.out.substr(at("peak RSS: ")));
  EXPECT_GT(mb, 0.0);
  EXPECT_LE(mb * 1e6, double(fs::file_size(dir + "/m.pte")));  // no weight counted twice
  EXPECT_GT(rss, 1.0);
  EXPECT_LT(rss, 512.0) << "the probe's buffer counted as the program's memory";
}

// --linear-weights fp16 halves the bytes bench counts per token (the linear
// layers dominate) while the work it counts stays that of the same elements;
// only the xnnpack backend takes it, and a bad value is one line.
TEST(Cli, HalfLinearWeightsHalveTheBytesPerToken) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-mha");
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/f32.pte --quiet", dir).exit_code, 0);
  auto ex = run_cli("export " + model + " -o " + dir + "/f16.pte --quiet --linear-weights fp16", dir);
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_NE(slurp(dir + "/f16.pte").find(R"("linear_weights":"fp16")"), std::string::npos);
  auto mb_of = [&](const std::string& pte) {
    auto r = run_cli("bench " + dir + "/" + pte + " --prompt-len 4 --gen 2 --threads 1", dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string key = "weights read per decode step: ";
    auto p = r.out.find(key);
    return p == std::string::npos ? -1.0 : std::stod(r.out.substr(p + key.size()));
  };
  const double f32 = mb_of("f32.pte"), f16 = mb_of("f16.pte");
  EXPECT_GT(f16, 0.0);
  EXPECT_LT(f16, 0.6 * f32) << "fp16 linears should be about half: " << f16 << " vs " << f32 << " MB";
  auto portable = run_cli("export " + model + " -o " + dir + "/p.pte --backend portable --linear-weights fp16", dir);
  expect_one_line_error(portable, "--linear-weights fp16 needs the xnnpack backend");
  EXPECT_FALSE(fs::exists(dir + "/p.pte"));
  auto bad = run_cli("export " + model + " -o " + dir + "/b.pte --linear-weights int3", dir);
  expect_one_line_error(bad, "unknown linear weight type 'int3'; expected fp32 or fp16");
}

TEST(Cli, ExportIsByteReproducible) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa-tied-bf16");
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/a.pte --quiet", dir).exit_code, 0);
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/b.pte --quiet", dir).exit_code, 0);
  auto a = slurp(dir + "/a.pte"), b = slurp(dir + "/b.pte");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "two exports of the same checkpoint differ";
}

TEST(Cli, ConfigFileIsValidatedAndStoredInTheProgram) {
  auto dir = test::temp_dir("t");
  std::ofstream(dir + "/bad.json") << R"({"backend": "portable", "max_seq_len": "long"})";
  auto model = test::repo_path("tests/data/fixtures/llama-mha");
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte --config " + dir + "/bad.json", dir);
  expect_one_line_error(r, "field 'max_seq_len' has wrong type; expected integer or null, got string");
  EXPECT_FALSE(fs::exists(dir + "/m.pte"));
  std::ofstream(dir + "/good.json") << R"({"max_seq_len": 48})";
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/m.pte --quiet --config " + dir + "/good.json", dir).exit_code, 0);
  EXPECT_NE(slurp(dir + "/m.pte").find(R"("max_seq_len":48)"), std::string::npos);
}

// Every causal-LM fixture through the CLI: `generate --prompt-ids <input_ids>
// --max-new-tokens 12 --print-ids` prints exactly greedy.npy (prefill once, then
// one token per call through the KV cache).
TEST(Cli, GenerateReproducesGreedyForEveryFixture) {
  auto dir = test::temp_dir("t");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(test::repo_path("tests/data/fixtures"))) {
    // Causal LMs (speech models have no input_ids: their greedy path is tests/speech_test.cpp).
    if (!fs::exists(entry.path() / "greedy.npy") || !fs::exists(entry.path() / "input_ids.npy")) continue;
    std::string name = entry.path().filename().string();
    auto ids = test::as_longs(test::load_npy((entry.path() / "input_ids.npy").string()));
    auto greedy = test::as_longs(test::load_npy((entry.path() / "greedy.npy").string()));
    std::string prompt, want;
    for (size_t i = 0; i < ids.size(); ++i) prompt += (i ? "," : "") + std::to_string(ids[i]);
    for (size_t i = 0; i < greedy.size(); ++i) want += (i ? " " : "") + std::to_string(greedy[i]);
    std::string pte = dir + "/" + name + ".pte";
    ASSERT_EQ(run_cli("export " + entry.path().string() + " -o " + pte + " --quiet", dir).exit_code, 0) << name;
    std::string out_path = dir + "/" + name + ".out";
    std::string cmd = std::string(HF2PTE_CLI) + " generate " + pte + " --prompt-ids " + prompt +
                      " --max-new-tokens " + std::to_string(greedy.size()) + " --print-ids >" + out_path + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << name;
    std::string got = slurp(out_path);
    while (!got.empty() && (got.back() == '\n' || got.back() == ' ')) got.pop_back();
    EXPECT_EQ(got, want) << name;
    ++checked;
  }
  EXPECT_GE(checked, 18);
}

// Prefills input_ids[0..L) at positions 0..L-1 with `hf2pte run` (one fresh
// program per call, so each is a prefill into an empty KV cache) and returns
// the worst |logits - logits.npy| over those L rows.
double prefill_logits_diff(const std::string& pte, const std::string& fixture, int64_t L, const std::string& dir) {
  auto ids = test::as_longs(test::load_npy(fixture + "/input_ids.npy"));
  auto ref = test::as_floats(test::load_npy(fixture + "/logits.npy"));
  EXPECT_LE(size_t(L), ids.size());
  std::vector<int64_t> head(ids.begin(), ids.begin() + L), pos(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) pos[size_t(i)] = i;
  std::string tag = dir + "/L" + std::to_string(L);
  EXPECT_TRUE(write_npy(tag + "_ids.npy", HostTensor::from(ScalarType::kLong, {1, L}, head)).is_ok());
  EXPECT_TRUE(write_npy(tag + "_pos.npy", HostTensor::from(ScalarType::kLong, {L}, pos)).is_ok());
  auto r = run_cli("run " + pte + " --input " + tag + "_ids.npy --input " + tag + "_pos.npy --output-dir " + tag + "_out", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return 1e9;
  auto got = test::as_floats(test::load_npy(tag + "_out/output_0.npy"));
  size_t V = ref.size() / ids.size();
  EXPECT_EQ(got.size(), size_t(L) * V);
  if (got.size() != size_t(L) * V) return 1e9;
  return test::max_abs_diff(got, std::vector<float>(ref.begin(), ref.begin() + L * int64_t(V)));
}

// `--dim seq=1:` on an LLM: the seed's cap (item 33) with N = 1 unbounded dim is
// max(lower*4, hint*4, floor) = max(2*4, 5*4, clamp(round(2^24), 64, 1024)) = 1024;
// the KV cache (--max-seq-len, default min(max_position_embeddings, 2048) = 256
// here) bounds it further. Either way the program runs at lengths 1, 5 and 10.
TEST(Cli, UnboundedSeqIsCappedAndRunsAtSeveralLengths) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa");
  const std::string advice = "; pass --dim NAME=MIN:MAX to choose the bounds\n";
  struct Case {
    std::string extra, warning;
  } cases[] = {
      {"", "hf2pte: warning: unbounded dims capped: seq -> [1, 1024] (limited to 256 by the model's buffers)" + advice},
      {" --max-seq-len 2048", "hf2pte: warning: unbounded dims capped: seq -> [1, 1024]" + advice},
  };
  for (const auto& c : cases) {
    std::string pte = dir + "/m.pte";
    auto r = run_cli("export " + model + " -o " + pte + " --dim seq=1:" + c.extra, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The warning, the size/arena line before the weights stream, the summary line.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
    EXPECT_EQ(r.err.rfind(c.warning, 0), 0u) << r.err;
    const std::string sizes = fmt::format("hf2pte: max_seq_len {}: output file ", c.extra.empty() ? 256 : 2048);
    const size_t at = r.err.find(sizes);
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_LT(at, r.err.find("hf2pte: wrote ")) << r.err;
    EXPECT_NE(r.err.find(fmt::format("({} bytes), arena ", std::filesystem::file_size(pte)), at), std::string::npos) << r.err;
    for (int64_t L : {1, 5, 10}) {
      double d = prefill_logits_diff(pte, model, L, dir);
      EXPECT_LE(d, 1e-4) << "prefill length " << L << c.extra;
      RecordProperty("max_abs_diff_L" + std::to_string(L) + (c.extra.empty() ? "" : "_msl2048"), std::to_string(d));
    }
    // The cap is what the program holds: seq = cap runs, cap + 1 is rejected.
    const int64_t cap = c.extra.empty() ? 256 : 1024;
    for (int64_t L : {cap, cap + 1}) {
      std::vector<int64_t> ids(static_cast<size_t>(L), 7), pos(static_cast<size_t>(L));
      for (int64_t i = 0; i < L; ++i) pos[size_t(i)] = i;
      ASSERT_TRUE(write_npy(dir + "/cap_ids.npy", HostTensor::from(ScalarType::kLong, {1, L}, ids)).is_ok());
      ASSERT_TRUE(write_npy(dir + "/cap_pos.npy", HostTensor::from(ScalarType::kLong, {L}, pos)).is_ok());
      auto run = run_cli("run " + pte + " --input " + dir + "/cap_ids.npy --input " + dir + "/cap_pos.npy --output-dir " + dir + "/cap_out", dir);
      if (L == cap) {
        EXPECT_EQ(run.exit_code, 0) << run.err;
      } else {
        EXPECT_NE(run.exit_code, 0);
        EXPECT_NE(run.err.find("exceeds the planned bound"), std::string::npos) << run.err;
      }
    }
  }
  // An explicit bound above what the KV cache holds stays an error (exit 2).
  expect_one_line_error(run_cli("export " + model + " -o " + dir + "/x.pte --dim seq=1:300", dir), "exceeds the model's bound 256");
  expect_one_line_error(run_cli("export " + model + " -o " + dir + "/x.pte --dim seq=300:", dir),
                        "--dim seq=300: minimum exceeds the model's bound 256");
  EXPECT_FALSE(fs::exists(dir + "/x.pte"));
}

// Reproducibility across thread settings. `export` has no --threads flag (the
// pipeline and the writer are single-threaded; validation uses the portable
// kernels), so the settings a thread pool or BLAS could read from the
// environment are varied instead: the files must be byte-identical.
TEST(Cli, ExportIsByteIdenticalUnderDifferentThreadSettings) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa");
  // --threads sets the kernel pool that validation runs the (XNNPACK-delegated)
  // program on; the thread variables of OpenMP/OpenBLAS must not matter either.
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/a.pte --quiet --threads 1", dir).exit_code, 0);
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/b.pte --quiet --threads 2", dir).exit_code, 0);
  std::string env = "OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 ";
  std::string cmd = env + HF2PTE_CLI + " export " + model + " -o " + dir + "/c.pte --quiet 2>" + dir + "/err.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir + "/err.txt");
  auto a = slurp(dir + "/a.pte"), b = slurp(dir + "/b.pte"), c = slurp(dir + "/c.pte");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "exports with --threads 1 and --threads 2 differ";
  EXPECT_TRUE(a == c) << "exports under different thread variables differ";
}

// `--report` is written for every fixture, and every method output's max abs
// difference against the reference interpreter is recorded and <= 1e-4.
TEST(Cli, ReportIsWrittenForEveryFixture) {
  auto dir = test::temp_dir("t");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(test::repo_path("tests/data/fixtures"))) {
    // Model fixtures only (preprocessing cases have no config.json).
    if (!entry.is_directory() || !fs::exists(entry.path() / "config.json")) continue;
    std::string name = entry.path().filename().string();
    std::string report = dir + "/" + name + ".json";
    auto r = run_cli("export " + entry.path().string() + " -o " + dir + "/" + name + ".pte --quiet --report " + report, dir);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    auto j = nlohmann::json::parse(slurp(report), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << name;
    ASSERT_TRUE(j.contains("validation") && j["validation"].is_object()) << name;
    const auto& v = j["validation"];
    EXPECT_FALSE(v.contains("skipped")) << name << ": " << v.dump();
    int outputs = 0;
    for (const auto& [method, m] : v.items()) {
      ASSERT_TRUE(m.contains("outputs")) << name << "." << method;
      for (const auto& o : m["outputs"]) {
        ASSERT_TRUE(o.contains("max_abs_diff") && o["max_abs_diff"].is_number()) << name << "." << method << ": " << o.dump();
        double d = o["max_abs_diff"].get<double>();
        EXPECT_LE(d, 1e-4) << name << "." << method << " output " << o.value("output", -1);
        RecordProperty(name + "." + method + "." + std::to_string(o.value("output", -1)), std::to_string(d));
        ++outputs;
      }
    }
    EXPECT_GE(outputs, 1) << name;
    ++checked;
  }
  EXPECT_GE(checked, 19);
}

TEST(Cli, PromptLongerThanTheContextIsRefusedWithBothLengths) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-mha");
  ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/m.pte --max-seq-len 8 --quiet", dir).exit_code, 0);
  auto r = run_cli("generate " + dir + "/m.pte --prompt-ids 1,2,3,4,5,6,7,8,9,10 --max-new-tokens 2", dir);
  expect_one_line_error(r, "the prompt has 10 tokens; the program's context holds at most 8");
}


// Quantized exports (docs/quantization.md): HQQ sums in one fixed order and the
// work split never changes a block, so --threads does not change the bytes.
TEST(Cli, QuantizedExportIsByteIdenticalAcrossThreadCounts) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa");
  for (const char* backend : {"xnnpack", "portable"}) {
    const std::string q = std::string(" --quiet --qlinear 8da4w --qembedding 8w --backend ") + backend;
    ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/a.pte --threads 1" + q, dir).exit_code, 0);
    ASSERT_EQ(run_cli("export " + model + " -o " + dir + "/b.pte --threads 2" + q, dir).exit_code, 0);
    auto a = slurp(dir + "/a.pte"), b = slurp(dir + "/b.pte");
    EXPECT_GT(a.size(), 1000u);
    EXPECT_TRUE(a == b) << backend << ": quantized exports with --threads 1 and --threads 2 differ";
  }
}

// A recipe that cannot apply is one line naming the flag (and the layer), and no file.
TEST(Cli, QuantizationRecipesThatCannotApplyAreOneLineErrors) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa");
  const std::string out = " -o " + dir + "/q.pte";
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--qlinear 3w", "unknown --qlinear recipe '3w'"},
      {"--qembedding 2w", "unknown --qembedding recipe '2w'"},
      {"--qlinear 8da4w --qparams gptq", "unknown --qparams 'gptq'"},
      {"--qlinear 8da4w --qlinear-group-size 3", "--qlinear-group-size 3: expected 0 (per channel) or a positive even number"},
      {"--qlinear 8da4w --qlinear-group-size 64", "layer layers.0.attn.q_proj has 96 input features, not a multiple of --qlinear-group-size 64"},
      {"--qlinear 8w --qlinear-skip '*'", "the model has no linear layer to quantize"},
      {"--qlinear-skip lm_head", "--qlinear-skip needs --qlinear"},
  };
  for (const auto& c : cases) {
    auto r = run_cli("export " + model + out + " " + c.flags, dir);
    expect_one_line_error(r, c.message);
    EXPECT_FALSE(fs::exists(dir + "/q.pte")) << c.flags;
  }
}

// 8da4w,8da8w: 8da4w where the group divides in_features, 8da8w per channel elsewhere.
TEST(Cli, MixedRecipeFallsBackToPerChannelWhereTheGroupDoesNotDivide) {
  auto dir = test::temp_dir("t");
  auto model = test::repo_path("tests/data/fixtures/llama-gqa");
  auto r = run_cli("export " + model + " -o " + dir + "/q.pte --quiet --qlinear 8da4w,8da8w --qlinear-group-size 64", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto i = run_cli("inspect " + dir + "/q.pte --json", dir);
  ASSERT_EQ(i.exit_code, 0) << i.err;
  // hidden 96 (not divisible by 64) -> qcint8 per channel; the MLP's down (in 256) -> qbint4.
  EXPECT_NE(i.out.find("qcint8"), std::string::npos);
  EXPECT_NE(i.out.find("qbint4"), std::string::npos);
}

// hf2pte serve refuses what it cannot serve with one line, before listening.
TEST(Cli, ServeRefusesBadInputWithOneLine) {
  auto dir = test::temp_dir("serve-cli");
  expect_one_line_error(run_cli("serve " + dir + "/missing.pte", dir), "missing.pte");
  const std::string stories = test::repo_path("models/stories260K");
  ASSERT_EQ(run_cli("export " + stories + " -o " + dir + "/m.pte --quiet", dir).exit_code, 0);
  expect_one_line_error(run_cli("serve " + dir + "/m.pte --slots 0", dir), "--slots");
  expect_one_line_error(run_cli("serve " + dir + "/m.pte --max-queue -1", dir), "--max-queue");
  expect_one_line_error(run_cli("serve " + dir + "/m.pte --host 256.1.1.1 --port 0", dir), "cannot listen on 256.1.1.1");
  expect_one_line_error(run_cli("serve " + dir + "/m.pte --chat-template " + dir + "/none.jinja", dir), "--chat-template");
  ASSERT_EQ(run_cli("export " + stories + " -o " + dir + "/nokv.pte --no-kv-cache --quiet", dir).exit_code, 0);
  expect_one_line_error(run_cli("serve " + dir + "/nokv.pte", dir), "no KV cache");
  ASSERT_EQ(run_cli("export " + test::repo_path("tests/data/fixtures/bert") + " -o " + dir + "/bert.pte --quiet", dir).exit_code, 0);
  expect_one_line_error(run_cli("serve " + dir + "/bert.pte", dir), "encoder");
}

// classify labels an image through the processor stored in the program;
// preprocess writes exactly the fixture's pixel_values; bad input is one line.
TEST(Cli, ClassifyAndPreprocessImages) {
  auto dir = test::temp_dir("classify-cli");
  const std::string vit = test::repo_path("tests/data/fixtures/vit");
  const std::string pre = test::repo_path("tests/data/fixtures/vit-preprocess");
  // The model folder with the processor next to it, as on the Hub.
  fs::create_directories(dir + "/model");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(vit + "/" + f, dir + "/model/" + f);
  fs::copy_file(pre + "/preprocessor_config.json", dir + "/model/preprocessor_config.json");
  ASSERT_EQ(run_cli("export " + dir + "/model -o " + dir + "/vit.pte --quiet", dir).exit_code, 0);
  auto r = run_cli("classify " + dir + "/vit.pte --image " + pre + "/image.png --json --top-k 3", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["labels"].size(), 3u);
  double last = 1.0;
  for (const auto& l : j["labels"]) {
    EXPECT_LE(l["probability"].get<double>(), last);
    last = l["probability"].get<double>();
  }
  r = run_cli("preprocess --image " + pre + "/image.png --processor " + dir + "/vit.pte -o " + dir + "/px.npy", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ours = test::as_floats(test::load_npy(dir + "/px.npy"));
  auto ref = test::as_floats(test::load_npy(pre + "/pixel_values.npy"));
  EXPECT_LE(test::max_abs_diff(ours, ref), 1e-6);
  // The folder form of --processor gives the same tensor.
  r = run_cli("preprocess --image " + pre + "/image.png --processor " + pre + " -o " + dir + "/px2.npy", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::as_floats(test::load_npy(dir + "/px2.npy")), ours);

  {
    std::ofstream(dir + "/truncated.png", std::ios::binary) << std::string(20, 'x');
    std::ofstream(dir + "/text.png") << "not an image";
  }
  expect_one_line_error(run_cli("classify " + dir + "/vit.pte --image " + dir + "/text.png", dir), "not a PNG or JPEG");
  expect_one_line_error(run_cli("classify " + dir + "/vit.pte --image " + dir + "/missing.png", dir), "missing.png");
  expect_one_line_error(run_cli("classify " + dir + "/vit.pte --image " + pre + "/image.png --top-k 0", dir), "--top-k");
  ASSERT_EQ(run_cli("export " + test::repo_path("models/stories260K") + " -o " + dir + "/lm.pte --quiet", dir).exit_code, 0);
  expect_one_line_error(run_cli("classify " + dir + "/lm.pte --image " + pre + "/image.png", dir), "not an image classifier");
  expect_one_line_error(run_cli("preprocess --image " + pre + "/image.png --processor " + dir + " -o " + dir + "/x.npy", dir),
                        "preprocessor_config.json");
  EXPECT_FALSE(fs::exists(dir + "/x.npy"));
}

// transcribe runs a WAV file through the program's stored feature extractor,
// the encoder once and greedy decoding; preprocess --audio writes the
// features; bad input is one line.
TEST(Cli, TranscribeAndPreprocessAudio) {
  auto dir = test::temp_dir("transcribe-cli");
  const std::string whisper = test::repo_path("tests/data/fixtures/whisper");
  const std::string logmel = test::repo_path("tests/data/fixtures/whisper-logmel");
  fs::create_directories(dir + "/model");
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) {
    fs::copy_file(whisper + "/" + f, dir + "/model/" + f);
  }
  fs::copy_file(logmel + "/preprocessor_config.json", dir + "/model/preprocessor_config.json");
  ASSERT_EQ(run_cli("export " + dir + "/model -o " + dir + "/w.pte --quiet", dir).exit_code, 0);
  auto r = run_cli("transcribe " + dir + "/w.pte --audio " + logmel + "/audio.wav --max-new-tokens 8 --json", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json::array({380}));  // decoder_start_token_id
  EXPECT_EQ(j["ids"].size(), 8u);
  EXPECT_GT(j["encoder_ms"].get<double>(), 0.0);
  // A multilingual generation config: --language and --task build transformers'
  // prompt (start, language, task, <|notimestamps|>); --task alone detects the
  // language from the first step; unknown names and English-only models are one line.
  {
    auto gen = nlohmann::json::parse(std::ifstream(whisper + "/generation_config.json"));
    gen["lang_to_id"] = {{"<|en|>", 370}, {"<|de|>", 371}};
    gen["task_to_id"] = {{"transcribe", 375}, {"translate", 376}};
    gen["no_timestamps_token_id"] = 377;
    gen["is_multilingual"] = true;
    fs::create_directories(dir + "/multi");
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(whisper + "/" + f, dir + "/multi/" + f);
    fs::copy_file(logmel + "/preprocessor_config.json", dir + "/multi/preprocessor_config.json");
    std::ofstream(dir + "/multi/generation_config.json") << gen.dump();
  }
  ASSERT_EQ(run_cli("export " + dir + "/multi -o " + dir + "/m.pte --quiet", dir).exit_code, 0);
  const std::string audio = " --audio " + logmel + "/audio.wav --max-new-tokens 2 --json";
  r = run_cli("transcribe " + dir + "/m.pte --language de --task translate" + audio, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["prompt_ids"], nlohmann::json::array({380, 371, 376, 377}));
  r = run_cli("transcribe " + dir + "/m.pte --language '<|en|>'" + audio, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["prompt_ids"], nlohmann::json::array({380, 370, 375, 377}));
  r = run_cli("transcribe " + dir + "/m.pte --task transcribe" + audio, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto detected = nlohmann::json::parse(r.out)["prompt_ids"];
  ASSERT_EQ(detected.size(), 4u);
  EXPECT_TRUE(detected[1] == 370 || detected[1] == 371) << detected;
  expect_one_line_error(run_cli("transcribe " + dir + "/m.pte --language fr" + audio, dir), "<|de|>, <|en|>");
  expect_one_line_error(run_cli("transcribe " + dir + "/m.pte --task summarize" + audio, dir), "transcribe, translate");
  expect_one_line_error(run_cli("transcribe " + dir + "/w.pte --language en" + audio, dir), "multilingual");
  // The features are the fixture's 32-frame log-mel of the clip.
  r = run_cli("preprocess --audio " + logmel + "/audio.wav --processor " + dir + "/w.pte -o " + dir + "/f.npy", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(test::max_abs_diff(test::as_floats(test::load_npy(dir + "/f.npy")),
                               test::as_floats(test::load_npy(logmel + "/input_features.npy"))),
            1e-4);
  // One line for each bad input.
  { std::ofstream(dir + "/bad.wav") << "RIFF0000WAVEjunk"; }
  expect_one_line_error(run_cli("transcribe " + dir + "/w.pte --audio " + dir + "/bad.wav", dir), "bad WAV");
  expect_one_line_error(run_cli("transcribe " + dir + "/w.pte --audio " + dir + "/none.wav", dir), "none.wav");
  ASSERT_EQ(run_cli("export " + test::repo_path("models/stories260K") + " -o " + dir + "/lm.pte --quiet", dir).exit_code, 0);
  expect_one_line_error(run_cli("transcribe " + dir + "/lm.pte --audio " + logmel + "/audio.wav", dir), "not a speech model");
  expect_one_line_error(run_cli("preprocess --processor " + dir + "/w.pte -o " + dir + "/x.npy", dir), "--image F or --audio F");
  EXPECT_FALSE(fs::exists(dir + "/x.npy"));
}

}  // namespace
}  // namespace hf2pte
