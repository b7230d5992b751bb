// The CLI contract for bad input: one line "hf2pte: error: <what> (<where>)",
// exit code 2, and no output file (an existing one is left untouched).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace hf2pte {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code = -1;
  std::string err;
};

CliResult run_cli(const std::string& args, const std::string& dir) {
  std::string err_path = dir + "/stderr.txt";
  std::string cmd = std::string(HF2PTE_CLI) + " " + args + " >/dev/null 2>" + err_path;
  int rc = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}

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
  rewrite_config(model, "\"model_type\": \"llama\"", "\"model_type\": \"mamba\"");
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte", dir);
  expect_one_line_error(r, "unsupported model_type 'mamba'; supported: llama, mistral, qwen2, phi3");
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
    if (!fs::exists(entry.path() / "greedy.npy")) continue;
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

}  // namespace
}  // namespace hf2pte
