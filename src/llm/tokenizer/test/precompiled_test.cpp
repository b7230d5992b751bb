// The Precompiled normalizer against an independent reference: SentencePiece
// itself (Debian's libsentencepiece + libsentencepiece_train). A tiny model is
// trained at test time with the builtin `nmt_nfkc` rule; its serialized
// ModelProto carries the precompiled_charsmap we parse, and the same model's
// Encode() pieces, concatenated, are SentencePiece's own normalization of the
// input (with dummy prefix, whitespace folding and whitespace escaping off).
//
// SentencePiece applies the map by longest byte-prefix match; HF `tokenizers`
// (which we follow, see precompiled.h) applies it per grapheme cluster with
// the shortest match. The two agree except on a few inputs, listed below with
// the result derived by hand from HF's rule.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "llm/tokenizer/precompiled.h"
#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm::tok {
namespace {

// ---- protobuf wire format, just enough to find ModelProto.normalizer_spec (3) ----

uint64_t read_varint(const std::string& s, size_t& p) {
  uint64_t r = 0;
  for (int shift = 0; p < s.size() && shift < 64; shift += 7) {
    auto b = static_cast<uint8_t>(s[p++]);
    r |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) break;
  }
  return r;
}

void write_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

struct Field { int number; int wire; std::string bytes; uint64_t varint = 0; };

std::vector<Field> parse_message(const std::string& s) {
  std::vector<Field> out;
  size_t p = 0;
  while (p < s.size()) {
    uint64_t key = read_varint(s, p);
    Field f{static_cast<int>(key >> 3), static_cast<int>(key & 7), {}};
    if (f.wire == 0) f.varint = read_varint(s, p);
    else if (f.wire == 2) { size_t n = read_varint(s, p); f.bytes = s.substr(p, n); p += n; }
    else if (f.wire == 5) { f.bytes = s.substr(p, 4); p += 4; }
    else if (f.wire == 1) { f.bytes = s.substr(p, 8); p += 8; }
    else break;
    out.push_back(std::move(f));
  }
  return out;
}

std::string serialize(const std::vector<Field>& fields) {
  std::string out;
  for (const auto& f : fields) {
    write_varint(out, uint64_t(f.number) << 3 | uint64_t(f.wire));
    if (f.wire == 0) write_varint(out, f.varint);
    else if (f.wire == 2) { write_varint(out, f.bytes.size()); out += f.bytes; }
    else out += f.bytes;
  }
  return out;
}

class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(std::vector<std::string> v) : v_(std::move(v)) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> v_;
  size_t i_ = 0;
};

struct SpmReference {
  sentencepiece::SentencePieceProcessor sp;
  std::string charsmap;
  std::string error;
};

// Trains once: a unigram model whose normalizer is the builtin nmt_nfkc rule.
SpmReference& reference() {
  static SpmReference* ref = [] {
    auto* r = new SpmReference;
    std::vector<std::string> corpus;
    for (int k = 0; k < 64; ++k) corpus.push_back("the quick brown fox jumps over the lazy dog " + std::to_string(k));
    Sentences it(corpus);
    std::string model;
    auto st = sentencepiece::SentencePieceTrainer::Train(
        "--model_type=unigram --vocab_size=40 --hard_vocab_limit=false --normalization_rule_name=nmt_nfkc "
        "--add_dummy_prefix=false --remove_extra_whitespaces=false --minloglevel=3",
        &it, &model);
    if (!st.ok()) { r->error = "training failed: " + st.ToString(); return r; }
    // Turn whitespace escaping (NormalizerSpec.escape_whitespaces = 5) off after training (the
    // trainers insist on it) so the normalized text is the charsmap's output and nothing else.
    auto fields = parse_message(model);
    for (auto& f : fields) {
      if (f.number != 3 || f.wire != 2) continue;
      auto spec = parse_message(f.bytes);
      for (const auto& g : spec) if (g.number == 2 && g.wire == 2) r->charsmap = g.bytes;
      spec.push_back(Field{5, 0, {}, 0});
      f.bytes = serialize(spec);
    }
    if (r->charsmap.empty()) { r->error = "no precompiled_charsmap in the trained model"; return r; }
    st = r->sp.LoadFromSerializedProto(serialize(fields));
    if (!st.ok()) r->error = "load failed: " + st.ToString();
    return r;
  }();
  return *ref;
}

std::string spm_normalize(const std::string& text) {
  std::vector<std::string> pieces;
  auto st = reference().sp.Encode(text, &pieces);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::string out;
  for (const auto& p : pieces) out += p;
  return out;
}

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x} ", c);
  return out;
}

// Inputs where SentencePiece and HF agree: compatibility forms, full-width and
// halfwidth forms, ligatures, combining sequences, spaces and control characters.
const std::vector<std::string>& agreeing_corpus() {
  static const std::vector<std::string> v = {
      "",
      "plain ASCII text, with punctuation! (and digits 0123456789)",
      "ｈｅｌｌｏ　ｗｏｒｌｄ！ ＡＢＣ１２３",
      "ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ",
      "① ② ⑽ ⒜ ㈱ ㎏ ™ ½ ² ³ ℌ ℃ № ℡",
      "e\u0301 a\u0308 n\u0303 o\u0302",  // NFD sequences NFKC composes
      "é ä ñ",
      "\u212B \u2126 \u212A \u00B5 \u017F",    // angstrom, ohm, kelvin, micro, long s
      "a\tb\nc\rd\u00A0e\u2002f\u2003g\u3000h\u200Bi\u202Fj",
      std::string("A\0B", 3),
      "\x01\x02\x1b\x7f \u0085 \u200E\u200F \uFEFF x",
      "ｱｲｳｴｵ ｶ ﾞ ﾟ",
      "ﾡﾢﾣ ㄱ",
      "\uFEFC \uFE8D \uFB01",  // Arabic presentation forms, ligature
      "𝐀𝐁𝐂 𝔸𝔹 𝟘𝟙",
      "Ⅻ ⅷ … ‥ ′″",
      "豈 更 車",  // CJK compatibility ideographs
      "क्षि हिन्दी",
      "日本語のテキスト、中文，한국어",
      "👍🏽 👨‍👩‍👧 🇫🇷 1️⃣",
      "x² H₂O ⁿ",
      "Ǆ ǅ ǆ Ĳ ĳ Ŀ",
      "\uFFFD \uE000 \U0010FFFD",
  };
  return v;
}

TEST(Precompiled, MatchesSentencePieceNmtNfkc) {
  auto& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  auto map = PrecompiledCharsMap::parse(ref.charsmap);
  ASSERT_TRUE(map.is_ok()) << map.status().message();
  int changed = 0;
  for (const auto& text : agreeing_corpus()) {
    std::string want = spm_normalize(text);
    std::string got = map->normalize(text);
    EXPECT_EQ(got, want) << "input " << nlohmann::json(text).dump() << "\n  want " << hex(want) << "\n  got  " << hex(got);
    changed += want != text;
  }
  // The corpus must exercise the map, not just pass text through.
  EXPECT_GE(changed, 15);
}

// Where HF's per-grapheme, shortest-match rule departs from SentencePiece's
// longest match. Expected values derived by hand from HF's rule.
TEST(Precompiled, FollowsHuggingFaceWhereSentencePieceDiffers) {
  auto& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  auto map = PrecompiledCharsMap::parse(ref.charsmap);
  ASSERT_TRUE(map.is_ok()) << map.status().message();
  struct Case { std::string in, hf; };
  const std::vector<Case> cases = {
      // Halfwidth KA + halfwidth voiced mark: one 6-byte grapheme, so HF maps each code
      // point (U+30AB, U+3099); SentencePiece matches the pair and gives U+30AC.
      {"\uFF76\uFF9E", "\u30AB\u3099"},
      // "fi" ligature + combining acute: one 5-byte grapheme whose shortest matching key is
      // the ligature alone; HF replaces the WHOLE grapheme by that key's value (the accent
      // is lost); SentencePiece keeps the accent.
      {"\uFB01\u0301", "fi"},
      // Same rule: o + circumflex + dot below is one grapheme; its shortest key is "o\u0302"
      // (-> U+00F4), so HF drops the dot below; SentencePiece keeps it.
      {"o\u0302\u0323", "\u00F4"},
      // Shortest, not longest: "A\u0302\u0300" is a key (-> U+1EA6) and so is its prefix "A\u0302"
      // (-> U+00C2); HF takes the first key met and replaces the whole 5-byte cluster with it.
      {"A\u0302\u0300", "\u00C2"},
      // CR LF is ONE grapheme cluster; its shortest key is "\r" (-> " "), so HF turns the pair into a
      // single space; SentencePiece maps both characters (two spaces).
      {"c\r\nd", "c d"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(map->normalize(c.in), c.hf) << nlohmann::json(c.in).dump();
    EXPECT_NE(spm_normalize(c.in), c.hf) << "SentencePiece agrees now; move the case to the corpus";
  }
}

std::string base64_encode(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

TEST(Precompiled, Base64RoundTrip) {
  for (std::string s : {std::string(""), std::string("a"), std::string("ab"), std::string("abc"), std::string("\0\xff\x10z", 4)}) {
    auto d = base64_decode(base64_encode(s));
    ASSERT_TRUE(d.is_ok()) << d.status().message();
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(*base64_decode("aGk="), "hi");
  EXPECT_FALSE(base64_decode("a$==").is_ok());
  EXPECT_FALSE(base64_decode("abcde").is_ok());
}

// A Unigram tokenizer.json whose normalizer is Precompiled (T5-style): full-width
// input must give the ids of its ASCII form, as the charsmap folds it.
TEST(Precompiled, LoadsInTokenizerJson) {
  auto& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  nlohmann::json vocab = nlohmann::json::array({{"<unk>", 0.0}});
  for (std::string p : {"h", "e", "l", "o", "▁", "hello", "▁w", "r", "d", "w", "fi", "▁hello", "▁fi"}) vocab.push_back({p, -1.0});
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(ref.charsmap)}}}}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}}},
      {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", false}}},
  };
  auto tok = Tokenizer::from_json(j.dump());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto a = (*tok)->encode("ｈｅｌｌｏ ｗｏｒｌｄ ﬁ", false);
  auto b = (*tok)->encode("hello world fi", false);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *((*tok)->encode("ｈ", false)));
}

// The charsmap comes from an untrusted file: malformed blobs are errors or no-ops, never crashes.
TEST(Precompiled, MalformedCharsMapsAreCleanErrors) {
  EXPECT_FALSE(PrecompiledCharsMap::parse("").is_ok());
  EXPECT_FALSE(PrecompiledCharsMap::parse(std::string("\x08\x00\x00", 3)).is_ok());
  EXPECT_FALSE(PrecompiledCharsMap::parse(std::string("\x00\x00\x00\x00", 4)).is_ok());          // empty trie
  EXPECT_FALSE(PrecompiledCharsMap::parse(std::string("\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00", 10)).is_ok());  // not /4
  EXPECT_FALSE(PrecompiledCharsMap::parse(std::string("\x10\x00\x00\x00\x00\x00\x00\x00", 8)).is_ok());  // too long
  EXPECT_FALSE(PrecompiledCharsMap::parse(std::string("\x04\x00\x00\x00\x00\x00\x00\x00\xff\x00", 10)).is_ok());  // bad UTF-8

  auto status = Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]},
      "normalizer": {"type": "Precompiled", "precompiled_charsmap": "not base64!"}})");
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.status().message().find("Precompiled"), std::string::npos) << status.status().message();
  status = Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]},
      "normalizer": {"type": "Precompiled"}})");
  EXPECT_FALSE(status.is_ok());

  // Corrupt units of a real map: parsing may succeed, normalizing must stay in bounds.
  auto& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  std::mt19937 rng(1234);
  const std::string probe = "ｈｅｌｌｏ ﬁ ① e\u0301 \u3000 ｶﾞ 👍🏽 abc";
  for (int round = 0; round < 200; ++round) {
    std::string blob = ref.charsmap;
    for (int k = 0; k < 64; ++k) blob[4 + rng() % (blob.size() - 4)] = static_cast<char>(rng());
    auto m = PrecompiledCharsMap::parse(blob);
    if (m.is_ok()) (void)m->normalize(probe);
  }
  // A one-unit trie whose root offset points far outside the array.
  auto tiny = PrecompiledCharsMap::parse(std::string("\x04\x00\x00\x00\xff\xff\xff\xff", 8));
  ASSERT_TRUE(tiny.is_ok());
  EXPECT_EQ(tiny->normalize("abc"), "abc");
}

}  // namespace
}  // namespace hf2pte::llm::tok
