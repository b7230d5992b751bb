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

// generate --chat --system --template-var: the fixture is stories260K's tokenizer with a chat
// template written here; --print-prompt shows the rendered prompt. Expected strings derived by
// reading that template: the system loop prints <<SYS>>content<</SYS>> for each system message or,
// with none, its else block <<NOSYS>>; then [U]content per user message; then, for the generation
// prompt, [A], '\u2205' (U+2205, E2 88 85) when enable_thinking is the boolean false, n * 2 when n
// is defined, and style.tone.
TEST_F(TextCli, ChatSystemAndTemplateVars) {
  const std::string tok = dir_ + "/chat_tok";
  fs::create_directories(tok);
  fs::copy_file(stories_ + "/tokenizer.json", tok + "/tokenizer.json", fs::copy_options::overwrite_existing);
  auto cfg = nlohmann::json::parse(slurp(stories_ + "/tokenizer_config.json"));
  cfg["chat_template"] =
      "{% for m in messages if m.role == 'system' %}<<SYS>>{{ m.content }}<</SYS>>{% else %}<<NOSYS>>{% endfor %}"
      "{% for m in messages if m.role == 'user' %}[U]{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}[A]{% if enable_thinking is false %}{{ '\\u2205' }}{% endif %}"
      "{{ n * 2 if n is defined }}{{ style.tone }}{% endif %}";
  std::ofstream(tok + "/tokenizer_config.json") << cfg.dump();
  const std::string base = "generate " + dir_ + "/s.pte --tokenizer " + tok + " --prompt Hi --chat";

  auto r = cli(base + " --system 'Be brief.' --template-var enable_thinking=false --template-var n=21"
                      " --template-var 'style={\"tone\": \"dry\"}' --print-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<<SYS>>Be brief.<</SYS>>[U]Hi[A]\xE2\x88\x85" "42dry");
  r = cli(base + " --print-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<<NOSYS>>[U]Hi[A]");
  // A value that is not JSON is a string; "false" as a JSON string is not the boolean.
  r = cli(base + " --template-var style=dry --template-var n=1 --template-var 'enable_thinking=\"false\"' --print-prompt");
  EXPECT_EQ(r.out, "<<NOSYS>>[U]Hi[A]2") << r.err;
  // An empty system message is still a system message.
  r = cli(base + " --system '' --print-prompt");
  EXPECT_EQ(r.out, "<<SYS>><</SYS>>[U]Hi[A]") << r.err;

  // The same flags drive a real generation.
  r = cli(base + " --system 'Be brief.' --template-var enable_thinking=false --max-new-tokens 3");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Hi", 0), 0u) << r.out;

  // Errors: one line, exit 2.
  r = cli(base + " --template-var enable_thinking --print-prompt");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hf2pte: error: expected NAME=VALUE (--template-var enable_thinking)\n");
  r = cli(base + " --template-var messages=[] --print-prompt");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("hf2pte: error: 'messages' is built from --system and --prompt", 0), 0u) << r.err;
  r = cli("generate " + dir_ + "/s.pte --tokenizer " + tok + " --prompt Hi --system x");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hf2pte: error: --system needs --chat (command line)\n");
  r = cli("generate " + dir_ + "/s.pte --tokenizer " + tok + " --prompt Hi --template-var a=1");
  EXPECT_EQ(r.err, "hf2pte: error: --template-var needs --chat (command line)\n");
  cfg["chat_template"] = "{{ 'x\\u12' }}";
  std::ofstream(tok + "/tokenizer_config.json") << cfg.dump();
  r = cli(base + " --print-prompt");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "hf2pte: error: chat template: truncated \\u escape (needs 4 hex digits) in a string literal at line 1, "
            "column 6 (tokenizer_config.json)\n");
}

// Qwen3's own template (../shared/tokenizers, skipped when absent) with enable_thinking=false:
// '<|im_start|>system\n' + system + '<|im_end|>\n', the user turn, '<|im_start|>assistant\n', then
// '<think>\n\n</think>\n\n' (read from the template's text).
TEST_F(TextCli, ChatQwen3ThinkingOff) {
  const std::string qwen3 = "/work/shared/tokenizers/qwen3";
  if (!fs::exists(qwen3 + "/tokenizer_config.json")) GTEST_SKIP() << "reference data not found: " << qwen3;
  auto r = cli("generate " + dir_ + "/s.pte --tokenizer " + qwen3 +
               " --prompt Hi --chat --system 'You are helpful.' --template-var enable_thinking=false --print-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
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
