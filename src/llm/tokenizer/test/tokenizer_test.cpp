// Hand-made tokenizer.json files covering the core paths without the large
// shared reference data, plus the bundled stories260K tokenizer.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/tokenizer/components.h"
#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm {
namespace {

const std::string kStories = std::string(HF2PTE_SOURCE_DIR) + "/models/stories260K";

std::unique_ptr<Tokenizer> must(Result<std::unique_ptr<Tokenizer>> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

std::vector<int64_t> enc(const Tokenizer& t, const std::string& s, bool special = false) {
  auto r = t.encode(s, special);
  EXPECT_TRUE(r.is_ok());
  return r.is_ok() ? *r : std::vector<int64_t>{};
}

TEST(Stories260K, PromptMatchesReference) {
  auto t = must(Tokenizer::load(kStories));
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "Once upon a time", true), (std::vector<int64_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_ids(), std::vector<int64_t>{2});
  std::ifstream in(kStories + "/reference.json");
  auto ref = nlohmann::json::parse(in);
  int n = 0;
  for (const auto& c : ref["tokenizer_cases"]) {
    std::string text = c["text"];
    auto want = c["ids_no_bos"].get<std::vector<int64_t>>();
    EXPECT_EQ(enc(*t, text), want) << text;
    ++n;
  }
  EXPECT_GT(n, 0);
  auto ids = enc(*t, "Once upon a time", true);
  EXPECT_EQ(t->decode(ids, /*skip_special_tokens=*/true), "Once upon a time");
  EXPECT_EQ(ref["greedy_text"].get<std::string>(), t->decode(ref["greedy_ids"].get<std::vector<int64_t>>(), true));
}

TEST(Stories260K, SentencePieceModelAgrees) {
  std::ifstream in(kStories + "/tokenizer.model", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto sp = must(Tokenizer::from_sentencepiece(ss.str()));
  auto hf = must(Tokenizer::load(kStories));
  ASSERT_TRUE(sp && hf);
  for (std::string s : {"Once upon a time", "Hello  world 123 café!", "Lily's mom said"}) {
    EXPECT_EQ(enc(*sp, s, true), enc(*hf, s, true)) << s;
    EXPECT_EQ(sp->decode(enc(*sp, s, false)), s);
  }
}

TEST(Stories260K, StreamerNeverSplitsCharacters) {
  auto t = must(Tokenizer::load(kStories));
  ASSERT_TRUE(t);
  const std::string text = "Once café 日本 ok";
  auto ids = enc(*t, text);
  TextStreamer st(*t, 1);
  std::string out;
  for (auto id : ids) {
    std::string piece = st.push(id);
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "partial character streamed";
    out += piece;
  }
  out += st.flush();
  EXPECT_EQ(out, " " + text);  // the anchor (<s>) keeps the leading space of the first word
}

// A byte-level BPE in the GPT-2 style: vocab of single byte-chars and a few merges.
std::string byte_level_json(const std::string& merges, bool ignore_merges) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (std::string t : {"h", "e", "l", "o", "w", "r", "d", "Ġ", "!", "he", "ll", "hell", "hello", "Ġw", "Ġwo", "or",
                        "Ġworld", "ld", "rld", "orld", "Ġwor", "<|end|>"}) {
    vocab[t] = id++;
  }
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 21}, {"content", "<|end|>"}, {"special", true}, {"normalized", false},
                          {"lstrip", false}, {"rstrip", false}, {"single_word", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::parse(merges)},
                 {"ignore_merges", ignore_merges}}}};
  return j.dump();
}

TEST(ByteLevelBpe, MergesAsStringsAndPairs) {
  const std::string str = R"(["h e","l l","he ll","hell o","Ġ w","o r","Ġw or","l d","Ġwor ld"])";
  const std::string pairs = R"([["h","e"],["l","l"],["he","ll"],["hell","o"],["Ġ","w"],["o","r"],["Ġw","or"],["l","d"],["Ġwor","ld"]])";
  for (const auto& m : {str, pairs}) {
    auto t = must(Tokenizer::from_json(byte_level_json(m, false)));
    ASSERT_TRUE(t);
    // "hello" -> h e l l o -> he ll -> hell -> hello; " world" -> Ġw or ld -> Ġwor ld -> Ġworld (id 16)
    EXPECT_EQ(enc(*t, "hello world!<|end|>"), (std::vector<int64_t>{12, 16, 8, 21}));
    EXPECT_EQ(t->decode(enc(*t, "hello world!<|end|>")), "hello world!<|end|>");
    EXPECT_EQ(t->decode(enc(*t, "hello world!<|end|>"), true), "hello world!");
  }
}

TEST(ByteLevelBpe, IgnoreMergesTakesWholeWords) {
  // With no merges at all, only ignore_merges can produce the "hello" token.
  auto t = must(Tokenizer::from_json(byte_level_json("[]", true)));
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "hello"), (std::vector<int64_t>{12}));
  EXPECT_EQ(enc(*t, "he"), (std::vector<int64_t>{9}));
  EXPECT_EQ(enc(*t, "hel"), (std::vector<int64_t>{0, 1, 2}));
}

TEST(WordPiece, BertPipeline) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (std::string t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", ",", "world", "!", "un", "##aff", "##able", "cafe"}) {
    vocab[t] = id++;
  }
  nlohmann::json j = {
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}, {"strip_accents", nullptr}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor", {{"type", "BertProcessing"}, {"cls", {"[CLS]", 2}}, {"sep", {"[SEP]", 3}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}}};
  auto t = must(Tokenizer::from_json(j.dump()));
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "Hello, WORLD! unaffable Café xyz", true), (std::vector<int64_t>{2, 4, 5, 6, 7, 8, 9, 10, 11, 1, 3}));
  EXPECT_EQ(t->decode(std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10}), "hello, world! unaffable");
}

TEST(Unigram, ViterbiWithMetaspace) {
  nlohmann::json j = {
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}}},
      {"model", {{"type", "Unigram"}, {"unk_id", 0},
                 {"vocab", nlohmann::json::parse(
                               R"([["<unk>",0.0],["▁",-2.0],["▁ab",-1.0],["▁a",-1.5],["b",-1.5],["c",-3.0],["abc",-0.5]])")}}}};
  auto t = must(Tokenizer::from_json(j.dump()));
  ASSERT_TRUE(t);
  // "▁" (-2) + "abc" (-0.5) = -2.5 beats "▁ab" (-1) + "c" (-3) = -4.
  EXPECT_EQ(enc(*t, "abc"), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(enc(*t, "ab"), (std::vector<int64_t>{2}));
  // Unknown characters fuse into one <unk>.
  EXPECT_EQ(enc(*t, "ab  xyz"), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(t->decode(std::vector<int64_t>{2, 1, 6}), "ab abc");
}

TEST(Errors, UnknownTypesAndBadInputAreNamed) {
  auto bad = [](const std::string& js, const std::string& needle) {
    auto r = Tokenizer::from_json(js);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("(tokenizer.json)"), std::string::npos) << r.status().message();
  };
  const std::string model = R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]})";
  bad(R"({"model":{"type":"Foo"}})", "Foo");
  bad(R"({"normalizer":{"type":"Precompiled"},)" + model + "}", "Precompiled");
  bad(R"({"pre_tokenizer":{"type":"Bar"},)" + model + "}", "Bar");
  bad(R"({"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(unclosed"},"behavior":"Isolated"},)" + model + "}", "regex");
  bad(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a b c"]}})", "malformed merge");
  bad(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a q"]}})", "malformed merge");
  bad("{not json", "malformed JSON");
}

TEST(Split, Behaviors) {
  using tok::Piece;
  using tok::SplitBehavior;
  auto run = [](SplitBehavior b, bool invert) {
    std::vector<Piece> out;
    Piece p{"a-b--c", -1, true};
    tok::Pattern pat;
    pat.literal = "-";
    tok::split_piece(p, pat.find_all(p.text), b, invert, out);
    std::string s;
    for (auto& q : out) s += "[" + q.text + "]";
    return s;
  };
  EXPECT_EQ(run(SplitBehavior::kRemoved, false), "[a][b][c]");
  EXPECT_EQ(run(SplitBehavior::kIsolated, false), "[a][-][b][-][-][c]");
  EXPECT_EQ(run(SplitBehavior::kMergedWithPrevious, false), "[a-][b-][-][c]");
  EXPECT_EQ(run(SplitBehavior::kMergedWithNext, false), "[a][-b][-][-c]");
  EXPECT_EQ(run(SplitBehavior::kContiguous, false), "[a][-][b][--][c]");
  EXPECT_EQ(run(SplitBehavior::kRemoved, true), "[-][-][-]");
}

}  // namespace
}  // namespace hf2pte::llm

namespace hf2pte::llm {
namespace {

TEST(Load, FilesFoldersAndMissing) {
  auto m = Tokenizer::load(kStories + "/tokenizer.model");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(*(*m)->encode("Once upon a time"), (std::vector<int64_t>{1, 403, 407, 261, 378}));
  auto j = Tokenizer::load(kStories + "/tokenizer.json");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  auto missing = Tokenizer::load(kStories + "/no-such-dir");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace hf2pte::llm
