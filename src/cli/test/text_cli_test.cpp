// The text side of the CLI contract (DESIGN.md): `tokenize` output format,
// the embedded tokenizer of an exported .pte, and `generate --prompt` text
// matching the independent greedy reference of models/stories260K.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace hf2pte {
namespace {

namespace fs = std::filesystem;

struct Out {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class TextCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One folder per process: CTest runs each test in its own process, in parallel.
    dir_ = (fs::path(HF2PTE_BINARY_DIR) / ("text_cli_test." + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto r = cli("export " + stories_ + " -o " + dir_ + "/s.pte --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static Out cli(const std::string& args) {
    std::string cmd = std::string(HF2PTE_CLI) + " " + args + " >" + dir_ + "/out.txt 2>" + dir_ + "/err.txt";
    int rc = std::system(cmd.c_str());
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(dir_ + "/out.txt"), slurp(dir_ + "/err.txt")};
  }
  static inline std::string dir_;
  static inline const std::string stories_ = std::string(HF2PTE_SOURCE_DIR) + "/models/stories260K";
};

TEST_F(TextCli, TokenizeTextAndDecode) {
  auto r = cli("tokenize --tokenizer " + stories_ + " --text 'Once upon a time'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
  r = cli("tokenize --tokenizer " + stories_ + " --text 'Once upon a time' --no-special");
  EXPECT_EQ(r.out, "403 407 261 378\n");
  r = cli("tokenize --tokenizer " + stories_ + " --decode 403,407,261,378");
  EXPECT_EQ(r.out, "Once upon a time\n");
}

TEST_F(TextCli, TokenizeTextFileOneLinePerInput) {
  std::ofstream(dir_ + "/in.jsonl") << "\"Once upon a time\"\n\"\"\n\"a\\nb\"\n";
  auto r = cli("tokenize --tokenizer " + stories_ + " --text-file " + dir_ + "/in.jsonl --no-special");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "403 407 261 378\n\n" + cli("tokenize --tokenizer " + stories_ + " --text \"$(printf 'a\\nb')\" --no-special").out);
  std::ofstream(dir_ + "/bad.jsonl") << "not json\n";
  r = cli("tokenize --tokenizer " + stories_ + " --text-file " + dir_ + "/bad.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("hf2pte: error: line 1 is not a JSON string", 0), 0u) << r.err;
}

TEST_F(TextCli, EmbeddedTokenizerMatchesFolder) {
  auto r = cli("tokenize --tokenizer " + dir_ + "/s.pte --text 'Once upon a time'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
}

TEST_F(TextCli, GenerateTextMatchesReference) {
  auto ref = nlohmann::json::parse(slurp(stories_ + "/reference.json"));
  auto r = cli("generate " + dir_ + "/s.pte --prompt 'Once upon a time' --max-new-tokens 40");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  std::string text = r.out.substr(0, r.out.size() - 1);  // the final newline
  std::string want = ref["greedy_text"];
  EXPECT_GT(text.size(), 60u);
  EXPECT_EQ(want.compare(0, text.size(), text), 0) << "got:  " << text << "\nwant: " << want;
  EXPECT_NE(r.err.find("prompt tokens 5, prefill "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("time to first token"), std::string::npos) << r.err;

  // --prompt-ids --print-ids still prints exactly the ids.
  auto ids = ref["greedy_ids"].get<std::vector<int64_t>>();
  std::string want_ids;
  for (size_t i = 5; i < 15; ++i) want_ids += std::to_string(ids[i]) + " ";
  r = cli("generate " + dir_ + "/s.pte --prompt-ids 1,403,407,261,378 --max-new-tokens 10 --print-ids");
  EXPECT_EQ(r.out, want_ids + "\n");
}

TEST_F(TextCli, ChatNeedsATemplate) {
  auto r = cli("generate " + dir_ + "/s.pte --prompt 'Hi' --chat");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no chat_template"), std::string::npos) << r.err;
}

TEST_F(TextCli, SeededSamplingIsReproducible) {
  const std::string args = "generate " + dir_ + "/s.pte --prompt 'Once upon a time' --max-new-tokens 30 --temperature 1.0 --top-k 40 --top-p 0.95 --min-p 0.01 --repetition-penalty 1.1";
  auto a = cli(args + " --seed 7");
  auto b = cli(args + " --seed 7");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(TextCli, RefusesPromptLongerThanContext) {
  ASSERT_EQ(cli("export " + stories_ + " -o " + dir_ + "/short.pte --quiet --max-seq-len 8 --no-embed-tokenizer").code, 0);
  auto r = cli("generate " + dir_ + "/short.pte --prompt-ids 1,2,3,4,5,6,7,8,9,10");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("10 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at most 8"), std::string::npos) << r.err;
  // Without an embedded tokenizer, a text prompt needs --tokenizer.
  r = cli("generate " + dir_ + "/short.pte --prompt 'Once'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no embedded tokenizer"), std::string::npos) << r.err;
  r = cli("generate " + dir_ + "/short.pte --prompt 'Once' --tokenizer " + stories_ + " --max-new-tokens 2");
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace hf2pte
