// Regex and pattern matching (PCRE2) and the pre-tokenizers. Splitting
// follows HF's NormalizedString::split: the text is cut into matches and the
// gaps between them, the behavior decides how the two are combined, and
// empty pieces are dropped.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "llm/tokenizer/components.h"
#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm::tok {

Result<std::shared_ptr<Regex>> Regex::compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  // MATCH_INVALID_UTF: command-line text may be malformed; PCRE2 then skips
  // invalid bytes instead of refusing the subject.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return json_error("regex '{}' does not compile at offset {}: {}", pattern, off, reinterpret_cast<char*>(buf));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  auto r = std::shared_ptr<Regex>(new Regex());
  r->code_ = code;
  return r;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, 0, md, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e == b) {
      // Empty match: step over one character so the search makes progress.
      if (e >= s.size()) break;
      pos = e + utf8_len(static_cast<unsigned char>(s[e]));
    } else {
      pos = e;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

Result<Pattern> Pattern::parse(const Json& j) {
  Pattern p;
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    p.literal = j["String"].get<std::string>();
    return p;
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    HF2PTE_ASSIGN_OR_RETURN(p.regex, Regex::compile(j["Regex"].get<std::string>()));
    return p;
  }
  return json_error("pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}; got {}", j.dump());
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view s) const {
  if (regex) return regex->find_all(s);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal.empty()) return out;
  for (size_t pos = s.find(literal); pos != std::string_view::npos; pos = s.find(literal, pos + literal.size())) {
    out.emplace_back(pos, pos + literal.size());
  }
  return out;
}

std::string replace_all(std::string_view s, const Pattern& p, std::string_view content) {
  std::string out;
  size_t prev = 0;
  for (auto [b, e] : p.find_all(s)) {
    out.append(s.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(s.substr(prev));
  return out;
}

Result<SplitBehavior> parse_behavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return json_error("unknown split behavior '{}'", s);
}

void split_piece(const Piece& p, const std::vector<std::pair<size_t, size_t>>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out) {
  struct Span { size_t b, e; bool match; };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != p.text.size() || spans.empty()) spans.push_back({prev, p.text.size(), false});
  if (invert) for (auto& s : spans) s.match = !s.match;

  struct Cut { size_t b, e; bool remove; };
  std::vector<Cut> cuts;
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto& s : spans) cuts.push_back({s.b, s.e, false});
      break;
    case SplitBehavior::kRemoved:
      for (auto& s : spans) cuts.push_back({s.b, s.e, s.match});
      break;
    case SplitBehavior::kContiguous:
      for (auto& s : spans) {
        if (s.match == prev_match && !cuts.empty()) cuts.back().e = s.e;
        else cuts.push_back({s.b, s.e, false});
        prev_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto& s : spans) {
        if (s.match && !prev_match && !cuts.empty()) cuts.back().e = s.e;
        else cuts.push_back({s.b, s.e, false});
        prev_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev_match && !cuts.empty()) cuts.back().b = it->b;
        else cuts.push_back({it->b, it->e, false});
        prev_match = it->match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  for (auto& c : cuts) {
    if (c.remove || c.e == c.b) continue;
    out.push_back(Piece{p.text.substr(c.b, c.e - c.b), -1, p.at_start && c.b == 0});
  }
}

std::string str_or(const Json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

bool bool_or(const Json& j, const char* key, bool def) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

namespace {

// Matches of a per-character predicate: each matching char is its own match,
// as HF's `impl Pattern for Fn(char) -> bool` reports them.
template <typename Pred>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view s, Pred pred) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min<size_t>(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    auto cps = utf8_decode(s.substr(i, n));
    if (!cps.empty() && pred(cps[0])) out.emplace_back(i, i + n);
    i += n;
  }
  return out;
}

class SplitPre : public PreTokenizer {
 public:
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  void split(const Piece& p, std::vector<Piece>& out) const override {
    split_piece(p, pattern.find_all(p.text), behavior, invert, out);
  }
};

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre : public PreTokenizer {
 public:
  bool add_prefix_space = false;
  std::shared_ptr<Regex> regex;  // null when use_regex is false
  void split(const Piece& p, std::vector<Piece>& out) const override {
    Piece q = p;
    if (add_prefix_space && (q.text.empty() || q.text[0] != ' ')) q.text.insert(0, " ");
    std::vector<Piece> parts;
    if (regex) split_piece(q, regex->find_all(q.text), SplitBehavior::kIsolated, false, parts);
    else if (!q.text.empty()) parts.push_back(q);
    const auto& table = byte_to_unicode();
    for (auto& part : parts) {
      std::string mapped;
      for (unsigned char b : part.text) utf8_append(mapped, table[b]);
      part.text = std::move(mapped);
      out.push_back(std::move(part));
    }
  }
};

class MetaspacePre : public PreTokenizer {
 public:
  std::string replacement = "\xE2\x96\x81";
  std::string scheme = "always";
  bool split_ = true;
  void split(const Piece& p, std::vector<Piece>& out) const override {
    Piece q = p;
    std::string t;
    for (char c : q.text) {
      if (c == ' ') t += replacement;
      else t += c;
    }
    bool starts = t.compare(0, replacement.size(), replacement) == 0;
    if (!starts && (scheme == "always" || (scheme == "first" && q.at_start))) t.insert(0, replacement);
    q.text = std::move(t);
    if (!split_) {
      if (!q.text.empty()) out.push_back(std::move(q));
      return;
    }
    Pattern pat;
    pat.literal = replacement;
    split_piece(q, pat.find_all(q.text), SplitBehavior::kMergedWithNext, false, out);
  }
};

template <typename Pred>
class CharSplitPre : public PreTokenizer {
 public:
  CharSplitPre(Pred pred, SplitBehavior b) : pred_(pred), behavior_(b) {}
  void split(const Piece& p, std::vector<Piece>& out) const override {
    split_piece(p, char_matches(p.text, pred_), behavior_, false, out);
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};
template <typename Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplitPre<Pred>>(pred, b);
}

class SequencePre : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void split(const Piece& p, std::vector<Piece>& out) const override {
    std::vector<Piece> cur{p}, next;
    for (const auto& s : steps) {
      next.clear();
      for (const auto& c : cur) s->split(c, next);
      std::swap(cur, next);
    }
    for (auto& c : cur) out.push_back(std::move(c));
  }
};

}  // namespace

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  std::string type = str_or(j, "type", "");
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePre>();
    for (const auto& s : j.value("pretokenizers", Json::array())) {
      HF2PTE_ASSIGN_OR_RETURN(auto step, make_pre_tokenizer(s));
      if (step) seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (type == "Split") {
    auto sp = std::make_unique<SplitPre>();
    HF2PTE_ASSIGN_OR_RETURN(sp->pattern, Pattern::parse(j.value("pattern", Json())));
    HF2PTE_ASSIGN_OR_RETURN(sp->behavior, parse_behavior(str_or(j, "behavior", "Isolated")));
    sp->invert = bool_or(j, "invert", false);
    return std::unique_ptr<PreTokenizer>(std::move(sp));
  }
  if (type == "ByteLevel") {
    auto bl = std::make_unique<ByteLevelPre>();
    bl->add_prefix_space = bool_or(j, "add_prefix_space", true);
    if (bool_or(j, "use_regex", true)) {
      HF2PTE_ASSIGN_OR_RETURN(bl->regex, Regex::compile(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(std::move(bl));
  }
  if (type == "Metaspace") {
    auto ms = std::make_unique<MetaspacePre>();
    ms->replacement = str_or(j, "replacement", ms->replacement);
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      ms->scheme = j["prepend_scheme"].get<std::string>();
    } else {
      ms->scheme = bool_or(j, "add_prefix_space", true) ? "always" : "never";  // legacy files
    }
    if (ms->scheme != "always" && ms->scheme != "first" && ms->scheme != "never") {
      return json_error("unknown Metaspace prepend_scheme '{}'", ms->scheme);
    }
    ms->split_ = bool_or(j, "split", true);
    return std::unique_ptr<PreTokenizer>(std::move(ms));
  }
  if (type == "Whitespace") {
    auto sp = std::make_unique<SplitPre>();
    HF2PTE_ASSIGN_OR_RETURN(sp->pattern.regex, Regex::compile(R"(\w+|[^\w\s]+)"));
    sp->behavior = SplitBehavior::kRemoved;
    sp->invert = true;
    return std::unique_ptr<PreTokenizer>(std::move(sp));
  }
  if (type == "WhitespaceSplit") return char_split(is_whitespace, SplitBehavior::kRemoved);
  if (type == "BertPreTokenizer") {
    auto seq = std::make_unique<SequencePre>();
    seq->steps.push_back(char_split(is_whitespace, SplitBehavior::kRemoved));
    seq->steps.push_back(char_split(is_bert_punctuation, SplitBehavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (type == "Punctuation") {
    HF2PTE_ASSIGN_OR_RETURN(auto b, parse_behavior(str_or(j, "behavior", "Isolated")));
    return char_split(is_bert_punctuation, b);
  }
  if (type == "Digits") {
    bool individual = bool_or(j, "individual_digits", false);
    return char_split(is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  return json_error("unknown pre-tokenizer type '{}'", type);
}

}  // namespace hf2pte::llm::tok
