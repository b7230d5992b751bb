// Normalizers. Only the normalized text matters for ids, so unlike HF we do
// not track alignments back to the original string.
#include "llm/tokenizer/components.h"
#include "llm/tokenizer/precompiled.h"
#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm::tok {
namespace {

class UnicodeNorm : public Normalizer {
 public:
  explicit UnicodeNorm(std::string form) : form_(std::move(form)) {}
  std::string normalize(std::string s) const override { return unicode_normalize(s, form_); }

 private:
  std::string form_;
};

class Lowercase : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return lowercase(s); }
};

class StripAccents : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    for (char32_t c : utf8_decode(s)) {
      if (!is_combining_mark(c)) utf8_append(out, c);
    }
    return out;
  }
};

class ReplaceNorm : public Normalizer {
 public:
  Pattern pattern;
  std::string content;
  std::string normalize(std::string s) const override { return replace_all(s, pattern, content); }
};

class Prepend : public Normalizer {
 public:
  std::string prefix;
  std::string normalize(std::string s) const override { return s.empty() ? s : prefix + s; }
};

class Strip : public Normalizer {
 public:
  bool left = true, right = true;
  std::string normalize(std::string s) const override {
    auto cps = utf8_decode(s);
    size_t b = 0, e = cps.size();
    if (left) while (b < e && is_whitespace(cps[b])) ++b;
    if (right) while (e > b && is_whitespace(cps[e - 1])) --e;
    return utf8_encode(std::vector<char32_t>(cps.begin() + long(b), cps.begin() + long(e)));
  }
};

class BertNorm : public Normalizer {
 public:
  bool clean_text = true, chinese = true, strip_accents = true, lower = true;
  std::string normalize(std::string s) const override {
    std::vector<char32_t> cps;
    for (char32_t c : utf8_decode(s)) {
      if (clean_text) {
        bool control = c != '\t' && c != '\n' && c != '\r' && is_other(c);
        if (c == 0 || c == 0xFFFD || control) continue;
        if (c == '\t' || c == '\n' || c == '\r' || is_whitespace(c)) c = ' ';
      }
      if (chinese && is_chinese_char(c)) {
        cps.push_back(' ');
        cps.push_back(c);
        cps.push_back(' ');
      } else {
        cps.push_back(c);
      }
    }
    std::string out = utf8_encode(cps);
    if (strip_accents) {
      std::string nfd = unicode_normalize(out, "NFD");
      out.clear();
      for (char32_t c : utf8_decode(nfd)) {
        if (!is_mark_nonspacing(c)) utf8_append(out, c);
      }
    }
    if (lower) out = lowercase(out);
    return out;
  }
};

class Precompiled : public Normalizer {
 public:
  explicit Precompiled(PrecompiledCharsMap map) : map_(std::move(map)) {}
  std::string normalize(std::string s) const override { return map_.normalize(s); }

 private:
  PrecompiledCharsMap map_;
};

class SequenceNorm : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  std::string normalize(std::string s) const override {
    for (const auto& n : steps) s = n->normalize(std::move(s));
    return s;
  }
};

}  // namespace

Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  std::string type = str_or(j, "type", "");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    return std::unique_ptr<Normalizer>(std::make_unique<UnicodeNorm>(type));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(std::make_unique<Lowercase>());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(std::make_unique<StripAccents>());
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceNorm>();
    HF2PTE_ASSIGN_OR_RETURN(r->pattern, Pattern::parse(j.value("pattern", Json())));
    r->content = str_or(j, "content", "");
    return std::unique_ptr<Normalizer>(std::move(r));
  }
  if (type == "Prepend") {
    auto p = std::make_unique<Prepend>();
    p->prefix = str_or(j, "prepend", "");
    return std::unique_ptr<Normalizer>(std::move(p));
  }
  if (type == "Strip") {
    auto s = std::make_unique<Strip>();
    s->left = bool_or(j, "strip_left", true);
    s->right = bool_or(j, "strip_right", true);
    return std::unique_ptr<Normalizer>(std::move(s));
  }
  if (type == "BertNormalizer") {
    auto b = std::make_unique<BertNorm>();
    b->clean_text = bool_or(j, "clean_text", true);
    b->chinese = bool_or(j, "handle_chinese_chars", true);
    b->lower = bool_or(j, "lowercase", true);
    // strip_accents: null means "follow lowercase", as in HF.
    b->strip_accents = bool_or(j, "strip_accents", b->lower);
    return std::unique_ptr<Normalizer>(std::move(b));
  }
  if (type == "Precompiled") {
    const Json& b64 = j.value("precompiled_charsmap", Json());
    if (!b64.is_string()) return json_error("Precompiled normalizer without a precompiled_charsmap string");
    HF2PTE_ASSIGN_OR_RETURN(std::string blob, base64_decode(b64.get<std::string>()));
    HF2PTE_ASSIGN_OR_RETURN(auto map, PrecompiledCharsMap::parse(blob));
    return std::unique_ptr<Normalizer>(std::make_unique<Precompiled>(std::move(map)));
  }
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceNorm>();
    for (const auto& s : j.value("normalizers", Json::array())) {
      HF2PTE_ASSIGN_OR_RETURN(auto step, make_normalizer(s));
      if (step) seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(std::move(seq));
  }
  return json_error("unknown normalizer type '{}'", type);
}

}  // namespace hf2pte::llm::tok
