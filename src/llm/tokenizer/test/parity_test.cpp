// Parity with the Hugging Face `tokenizers` library: every case of
// /work/shared/tokenizers/<name>/cases.jsonl (ids and decoded text produced by
// the Rust library) must come out identical. The data is large and lives
// outside the repository; the tests skip when it is absent.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm {
namespace {

std::filesystem::path shared_dir() {
  if (const char* e = std::getenv("HF2PTE_SHARED_TOKENIZERS")) return e;
  return "/work/shared/tokenizers";
}

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, EncodeAndDecodeMatchHuggingFace) {
  auto dir = shared_dir() / GetParam();
  if (!std::filesystem::exists(dir / "cases.jsonl")) {
    GTEST_SKIP() << "reference data not found: " << (dir / "cases.jsonl").string()
                 << " (set HF2PTE_SHARED_TOKENIZERS to the shared tokenizers folder)";
  }
  auto tok = Tokenizer::load(dir.string());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::ifstream in(dir / "cases.jsonl");
  std::string line;
  int total = 0, ids_ok = 0, dec_ok = 0, reported = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto c = nlohmann::json::parse(line);
    ++total;
    std::string text = c["text"];
    auto want = c["ids"].get<std::vector<int64_t>>();
    auto got = (*tok)->encode(text, c["add_special_tokens"].get<bool>());
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    if (*got == want) {
      ++ids_ok;
    } else if (reported++ < 5) {
      ADD_FAILURE() << GetParam() << ": ids differ for " << nlohmann::json(text).dump() << "\n  want "
                    << nlohmann::json(want).dump() << "\n  got  " << nlohmann::json(*got).dump();
    }
    std::string dec = (*tok)->decode(want);
    if (dec == c["decoded"].get<std::string>()) {
      ++dec_ok;
    } else if (reported++ < 5) {
      ADD_FAILURE() << GetParam() << ": decode differs for " << nlohmann::json(want).dump() << "\n  want "
                    << c["decoded"].dump() << "\n  got  " << nlohmann::json(dec).dump();
    }
  }
  std::printf("[ parity ] %s: ids %d/%d, decode %d/%d\n", GetParam().c_str(), ids_ok, total, dec_ok, total);
  EXPECT_EQ(ids_ok, total);
  EXPECT_EQ(dec_ok, total);
  EXPECT_GT(total, 0);
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerParity,
                         ::testing::Values("stories260K", "mistral7b", "llama3_1", "qwen3", "deepseek_v3", "claude",
                                           "bert-base-uncased", "unigram-t5style"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace hf2pte::llm
