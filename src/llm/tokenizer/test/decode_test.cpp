// decode() of every id of each shared tokenizer, against the text the
// published decoder rules give for that id's vocabulary string, computed here
// from tokenizer.json alone (no code of ours):
//  - ByteLevel: each char through the inverse of GPT-2's bytes_to_unicode (a
//    token with a char outside that table keeps its own UTF-8 bytes), then
//    UTF-8 decoding with each maximal invalid subpart replaced by U+FFFD
//    (Rust's String::from_utf8_lossy, as HF does);
//  - SentencePiece-style Sequence [Replace '▁'->' ', ByteFallback, Fuse,
//    Strip(' ', 1, 0)]: '<0xNN>' is byte NN (one U+FFFD when it is not a
//    whole character), then one leading space is dropped;
//  - WordPiece: a first token keeps its '##'; cleanup only touches spaces;
//  - Metaspace (prepend_scheme != never): every '▁' of the first token is dropped.
// Plus streaming: byte-fallback / byte-level pieces of one character split
// across tokens come out once, whole, and streaming a sequence gives the text
// that decoding it at once gives. Skipped when ../shared/tokenizers is absent.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm {
namespace {

using Json = nlohmann::json;

std::filesystem::path shared_dir() {
  if (const char* e = std::getenv("HF2PTE_SHARED_TOKENIZERS")) return e;
  return "/work/shared/tokenizers";
}

// ---- independent helpers ----

// Splits valid-or-not UTF-8 into code points; only used on tokenizer.json strings (valid).
std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n && i + static_cast<size_t>(k) < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    out.push_back(c);
    i += static_cast<size_t>(n);
  }
  return out;
}

// Rust String::from_utf8_lossy: U+FFFD per maximal subpart of an ill-formed sequence (Unicode §3.9).
std::string lossy(const std::string& bytes) {
  static const std::string kRepl = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) { out += static_cast<char>(b); ++i; continue; }
    int need;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b >= 0xE1 && b <= 0xEF) need = 2;
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else { out += kRepl; ++i; continue; }
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < bytes.size()) {
      auto c = static_cast<unsigned char>(bytes[j]);
      bool ok = got == 0 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++j;
      ++got;
    }
    if (got == need) out += bytes.substr(i, j - i);
    else out += kRepl;
    i = j;
  }
  return out;
}

// GPT-2's bytes_to_unicode, inverted: code point -> byte.
const std::map<char32_t, unsigned char>& char_to_byte() {
  static const auto* m = [] {
    auto* r = new std::map<char32_t, unsigned char>;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      (*r)[printable ? char32_t(b) : char32_t(256 + extra++)] = static_cast<unsigned char>(b);
    }
    return r;
  }();
  return *m;
}

std::string byte_level_rule(const std::string& token) {
  std::string bytes;
  for (char32_t c : code_points(token)) {
    auto it = char_to_byte().find(c);
    if (it == char_to_byte().end()) return lossy(token);  // a char outside the table: raw bytes
    bytes += static_cast<char>(it->second);
  }
  return lossy(bytes);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

std::string sentencepiece_rule(const std::string& token) {
  std::string t = replace_all(token, "\u2581", " ");
  if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex_digit(t[3]) >= 0 && hex_digit(t[4]) >= 0) {
    int byte = hex_digit(t[3]) * 16 + hex_digit(t[4]);
    t = byte < 0x80 ? std::string(1, static_cast<char>(byte)) : "\xEF\xBF\xBD";
  }
  if (!t.empty() && t[0] == ' ') t.erase(0, 1);
  return t;
}

std::string wordpiece_rule(const std::string& token) {
  // First (only) token: the prefix stays; cleanup's patterns all start with a space.
  static const std::pair<const char*, const char*> kCleanup[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string t = token;
  for (const auto& [from, to] : kCleanup) t = replace_all(t, from, to);
  return t;
}

std::string metaspace_first_rule(const std::string& token) { return replace_all(token, "\u2581", ""); }

struct Vocab {
  std::vector<std::optional<std::string>> tokens;
  std::string rule;  // which decoder rule applies
};

Vocab read_vocab(const std::filesystem::path& file) {
  std::ifstream in(file);
  Json j = Json::parse(in);
  Vocab v;
  const Json& model = j["model"];
  auto put = [&](size_t id, const std::string& s) {
    if (v.tokens.size() <= id) v.tokens.resize(id + 1);
    v.tokens[id] = s;
  };
  if (model["vocab"].is_array()) {
    for (size_t id = 0; id < model["vocab"].size(); ++id) put(id, model["vocab"][id][0].get<std::string>());
  } else {
    for (const auto& [tok, id] : model["vocab"].items()) put(id.get<size_t>(), tok);
  }
  for (const auto& a : j["added_tokens"]) put(a["id"].get<size_t>(), a["content"].get<std::string>());
  const Json& d = j["decoder"];
  std::string type = d.value("type", "");
  if (type == "ByteLevel") v.rule = "byte_level";
  else if (type == "WordPiece" && d.value("prefix", "") == "##") v.rule = "wordpiece";
  else if (type == "Metaspace" && d.value("replacement", "") == "\u2581" && d.value("prepend_scheme", "") != "never") v.rule = "metaspace";
  else if (type == "Sequence" && d["decoders"].size() == 4 && d["decoders"][0]["type"] == "Replace" &&
           d["decoders"][1]["type"] == "ByteFallback" && d["decoders"][2]["type"] == "Fuse" &&
           d["decoders"][3]["type"] == "Strip" && d["decoders"][3].value("start", 0) == 1) {
    v.rule = "sentencepiece";
  }
  return v;
}

class DecodeEveryId : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeEveryId, MatchesTheDecoderRules) {
  auto dir = shared_dir() / GetParam();
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    GTEST_SKIP() << "reference data not found: " << (dir / "tokenizer.json").string()
                 << " (set HF2PTE_SHARED_TOKENIZERS to the shared tokenizers folder)";
  }
  Vocab v = read_vocab(dir / "tokenizer.json");
  ASSERT_FALSE(v.rule.empty()) << GetParam() << ": no expectation rule for this decoder";
  auto tok = Tokenizer::load(dir.string());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  int64_t checked = 0, ok = 0, reported = 0;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (!v.tokens[id]) continue;
    const std::string& t = *v.tokens[id];
    std::string want = v.rule == "byte_level"      ? byte_level_rule(t)
                       : v.rule == "sentencepiece" ? sentencepiece_rule(t)
                       : v.rule == "wordpiece"     ? wordpiece_rule(t)
                                                   : metaspace_first_rule(t);
    int64_t one = static_cast<int64_t>(id);
    std::string got = (*tok)->decode(std::span<const int64_t>(&one, 1));
    ++checked;
    if (got == want) {
      ++ok;
    } else if (reported++ < 5) {
      ADD_FAILURE() << GetParam() << ": decode([" << id << "]) of " << Json(t).dump() << "\n  want " << Json(want).dump(-1, ' ', false, Json::error_handler_t::replace)
                    << "\n  got  " << Json(got).dump(-1, ' ', false, Json::error_handler_t::replace);
    }
  }
  std::printf("[ decode ] %s: %lld/%lld ids (%s rule)\n", GetParam().c_str(), static_cast<long long>(ok),
              static_cast<long long>(checked), v.rule.c_str());
  EXPECT_EQ(ok, checked);
  EXPECT_EQ(checked, (*tok)->vocab_size());
}

INSTANTIATE_TEST_SUITE_P(Shared, DecodeEveryId,
                         ::testing::Values("stories260K", "mistral7b", "llama3_1", "qwen3", "deepseek_v3", "claude",
                                           "bert-base-uncased", "unigram-t5style"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// ---- streaming ----

struct Stream {
  std::vector<std::string> chunks;
  std::string all() const {
    std::string s;
    for (const auto& c : chunks) s += c;
    return s;
  }
};

Stream stream(const Tokenizer& tok, std::optional<int64_t> anchor, const std::vector<int64_t>& ids) {
  TextStreamer st(tok, anchor);
  Stream out;
  for (int64_t id : ids) out.chunks.push_back(st.push(id));
  out.chunks.push_back(st.flush());
  return out;
}

std::unique_ptr<Tokenizer> load_shared(const std::string& name) {
  auto dir = shared_dir() / name;
  if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
  auto t = Tokenizer::load(dir.string());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(*t) : nullptr;
}

int64_t id_of(const Tokenizer& tok, const std::string& token) {
  auto id = tok.token_to_id(token);
  EXPECT_TRUE(id.has_value()) << "no token " << token;
  return id.value_or(0);
}

// '€' (E2 82 AC) and '𝄞' (F0 9D 84 9E) as one byte token each: nothing until the character is whole.
TEST(TextStreamer, ByteFallbackSplitAcrossTokens) {
  bool ran = false;
  for (const char* name : {"stories260K", "mistral7b"}) {
    auto tok = load_shared(name);
    if (!tok) continue;
    ran = true;
    int64_t anchor = id_of(*tok, "\u2581the");
    std::vector<int64_t> ids = {id_of(*tok, "<0xE2>"), id_of(*tok, "<0x82>"), id_of(*tok, "<0xAC>"),
                                id_of(*tok, "<0xF0>"), id_of(*tok, "<0x9D>"), id_of(*tok, "<0x84>"),
                                id_of(*tok, "<0x9E>"), id_of(*tok, "\u2581the")};
    // Decoded at once, the byte pieces fuse into the characters.
    EXPECT_EQ(tok->decode(std::span<const int64_t>(ids.data(), 7)), "\u20AC\U0001D11E") << name;
    Stream s = stream(*tok, anchor, ids);
    std::vector<std::string> want = {"", "", "\u20AC", "", "", "", "\U0001D11E", " the", ""};
    EXPECT_EQ(s.chunks, want) << name;
    // A lead byte that never completes is emitted as U+FFFD once the next piece arrives.
    s = stream(*tok, anchor, {id_of(*tok, "<0xE2>"), id_of(*tok, "\u2581the")});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"", "\xEF\xBF\xBD the", ""})) << name;
    // ... or at the end.
    s = stream(*tok, anchor, {id_of(*tok, "<0xE2>"), id_of(*tok, "<0x82>")});
    // ByteFallback turns an invalid run of byte pieces into one U+FFFD per piece.
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"", "", "\xEF\xBF\xBD\xEF\xBF\xBD"})) << name;
  }
  if (!ran) GTEST_SKIP() << "reference data not found under " << shared_dir().string();
}

// Byte-level BPE: the bytes of '€' as the GPT-2 characters 'â' (E2), 'Ĥ' (82), '¬' (AC).
TEST(TextStreamer, ByteLevelSplitAcrossTokens) {
  auto tok = load_shared("llama3_1");
  if (!tok) GTEST_SKIP() << "reference data not found under " << shared_dir().string();
  Stream s = stream(*tok, id_of(*tok, "Hello"), {id_of(*tok, "\u00E2"), id_of(*tok, "\u0124"), id_of(*tok, "\u00AC"), id_of(*tok, "\u0120world")});
  EXPECT_EQ(s.chunks, (std::vector<std::string>{"", "", "\u20AC", " world", ""}));
}

// A tokenizer that counts how many ids decode() is asked for: streaming N ids must cost O(N) id
// decodes (a bounded window per step), not O(N^2) as re-decoding everything each step would.
class CountingTokenizer : public Tokenizer {
 public:
  mutable int64_t decoded_ids = 0;
  Result<std::vector<int64_t>> encode(std::string_view, bool) const override { return std::vector<int64_t>{}; }
  std::string decode(std::span<const int64_t> ids, bool = false) const override {
    decoded_ids += static_cast<int64_t>(ids.size());
    std::string s;
    for (int64_t id : ids) s += id == 0 ? "\xE2" : "ab";  // id 0: a lead byte, never completed
    return lossy(s);
  }
  int64_t vocab_size() const override { return 2; }
  std::optional<int64_t> token_to_id(std::string_view) const override { return std::nullopt; }
};

TEST(TextStreamer, CostIsLinearInTheGeneratedLength) {
  CountingTokenizer tok;
  const int n = 5000;
  TextStreamer st(tok, int64_t{1});
  std::string out;
  for (int k = 0; k < n; ++k) out += st.push(1);
  out += st.flush();
  std::string want;
  for (int k = 0; k < n; ++k) want += "ab";
  EXPECT_EQ(out, want);
  EXPECT_LE(tok.decoded_ids, 6 * n) << "decode work grows faster than the generated length";
  // Withheld incomplete bytes keep the window growing only until they resolve.
  CountingTokenizer tok2;
  TextStreamer st2(tok2, std::nullopt);
  EXPECT_EQ(st2.push(0), "");
  EXPECT_EQ(st2.push(1), "\xEF\xBF\xBD" "ab");
  EXPECT_EQ(st2.flush(), "");
}

// Streaming every corpus case (anchor = its first id) gives the text of decoding it at once.
TEST(TextStreamer, StreamingEqualsWholeDecode) {
  bool ran = false;
  for (const char* name : {"stories260K", "mistral7b", "llama3_1", "qwen3", "deepseek_v3", "claude", "unigram-t5style",
                           "bert-base-uncased"}) {
    auto tok = load_shared(name);
    if (!tok) continue;
    ran = true;
    std::ifstream in(shared_dir() / name / "cases.jsonl");
    std::string line;
    int total = 0, same = 0, reported = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto ids = Json::parse(line)["ids"].get<std::vector<int64_t>>();
      if (ids.size() < 2) continue;
      ++total;
      std::string whole = tok->decode(ids), head = tok->decode(std::span<const int64_t>(ids.data(), 1));
      // The text after the anchor's: when the anchor ends in an incomplete character that the
      // next ids complete, its text is not a prefix, and the new text starts after the common part.
      size_t common = 0;
      while (common < head.size() && common < whole.size() && head[common] == whole[common]) ++common;
      if (common < head.size()) {
        while (common > 0 && (static_cast<unsigned char>(whole[common]) & 0xC0) == 0x80) --common;
      }
      std::string want = whole.substr(common);
      std::string got = stream(*tok, ids[0], {ids.begin() + 1, ids.end()}).all();
      if (got == want) ++same;
      else if (reported++ < 3) ADD_FAILURE() << name << ": " << Json(ids).dump() << "\n  want " << Json(want).dump() << "\n  got  " << Json(got).dump();
    }
    std::printf("[ stream ] %s: %d/%d cases\n", name, same, total);
    EXPECT_EQ(same, total) << name;
  }
  if (!ran) GTEST_SKIP() << "reference data not found under " << shared_dir().string();
}

}  // namespace
}  // namespace hf2pte::llm
