// Post-processors (special tokens around a sequence) and decoders (tokens
// back to text), following HF `tokenizers` stage by stage.
#include "llm/tokenizer/components.h"
#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm::tok {
namespace {

// ---- post-processors ----

class TemplatePost : public PostProcessor {
 public:
  // One entry per template item: the ids of a special token, or nullopt for $A.
  std::vector<std::optional<std::vector<int64_t>>> items;
  std::vector<int64_t> process(std::vector<int64_t> ids) const override {
    std::vector<int64_t> out;
    for (const auto& it : items) {
      if (it) out.insert(out.end(), it->begin(), it->end());
      else out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }
};

class SequencePost : public PostProcessor {
 public:
  std::vector<std::unique_ptr<PostProcessor>> steps;
  std::vector<int64_t> process(std::vector<int64_t> ids) const override {
    for (const auto& s : steps) ids = s->process(std::move(ids));
    return ids;
  }
};

class IdentityPost : public PostProcessor {
 public:
  std::vector<int64_t> process(std::vector<int64_t> ids) const override { return ids; }
};

Result<std::vector<int64_t>> pair_id(const Json& j, const char* key) {
  // BertProcessing/RobertaProcessing store ["[SEP]", 102].
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer()) {
    return json_error("post-processor field '{}' must be [token, id]", key);
  }
  return std::vector<int64_t>{j[key][1].get<int64_t>()};
}

// ---- decoders ----

class ByteLevelDec : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string tb;
      bool ok = true;
      for (char32_t c : utf8_decode(t)) {
        int b = unicode_to_byte(c);
        if (b < 0) { ok = false; break; }
        tb += static_cast<char>(b);
      }
      bytes += ok ? tb : t;  // tokens outside the byte alphabet (added tokens) pass as they are
    }
    return {utf8_lossy(bytes)};
  }
};

class MetaspaceDec : public Decoder {
 public:
  char32_t replacement = 0x2581;
  bool prepend = true;
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      for (char32_t c : utf8_decode(tokens[i])) {
        if (c == replacement) {
          // HF drops every replacement char of the first token, not only a leading one.
          if (i == 0 && prepend) continue;
          out += ' ';
        } else {
          utf8_append(out, c);
        }
      }
      tokens[i] = std::move(out);
    }
    return tokens;
  }
};

std::string replace_str(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

class WordPieceDec : public Decoder {
 public:
  std::string prefix = "##";
  bool cleanup = true;
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
        else t.insert(0, " ");
      }
      if (cleanup) {
        static const std::pair<const char*, const char*> kRules[] = {
            {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
            {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (auto [from, to] : kRules) t = replace_str(std::move(t), from, to);
      }
    }
    return tokens;
  }
};

class ByteFallbackDec : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_n = 0;
    auto flush = [&] {
      if (pending_n == 0) return;
      if (utf8_valid(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_n; ++k) out.push_back("\xEF\xBF\xBD");  // one U+FFFD per byte, as HF
      }
      pending.clear();
      pending_n = 0;
    };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4]))) {
        pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
        ++pending_n;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    return out;
  }
};

class FuseDec : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    return {all};
  }
};

class StripDec : public Decoder {
 public:
  char32_t content = ' ';
  size_t start = 0, stop = 0;
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) {
      auto cps = utf8_decode(t);
      size_t b = 0, e = cps.size();
      for (size_t k = 0; k < start && b < e && cps[b] == content; ++k) ++b;
      for (size_t k = 0; k < stop && e > b && cps[e - 1] == content; ++k) --e;
      t = utf8_encode(std::vector<char32_t>(cps.begin() + long(b), cps.begin() + long(e)));
    }
    return tokens;
  }
};

class ReplaceDec : public Decoder {
 public:
  Pattern pattern;
  std::string content;
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) t = replace_all(t, pattern, content);
    return tokens;
  }
};

class SequenceDec : public Decoder {
 public:
  std::vector<std::unique_ptr<Decoder>> steps;
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& s : steps) tokens = s->decode_chain(std::move(tokens));
    return tokens;
  }
};

}  // namespace

Result<std::unique_ptr<PostProcessor>> make_post_processor(const Json& j) {
  if (j.is_null()) return std::unique_ptr<PostProcessor>();
  std::string type = str_or(j, "type", "");
  if (type == "TemplateProcessing") {
    auto t = std::make_unique<TemplatePost>();
    const Json& specials = j.value("special_tokens", Json::object());
    for (const auto& item : j.value("single", Json::array())) {
      if (item.contains("Sequence")) {
        t->items.emplace_back(std::nullopt);
      } else if (item.contains("SpecialToken")) {
        std::string name = str_or(item["SpecialToken"], "id", "");
        if (!specials.contains(name) || !specials[name].contains("ids")) {
          return json_error("TemplateProcessing names special token '{}' that special_tokens lacks", name);
        }
        t->items.emplace_back(specials[name]["ids"].get<std::vector<int64_t>>());
      } else {
        return json_error("unknown TemplateProcessing item {}", item.dump());
      }
    }
    return std::unique_ptr<PostProcessor>(std::move(t));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto t = std::make_unique<TemplatePost>();
    HF2PTE_ASSIGN_OR_RETURN(auto cls, pair_id(j, "cls"));
    HF2PTE_ASSIGN_OR_RETURN(auto sep, pair_id(j, "sep"));
    t->items = {cls, std::nullopt, sep};
    return std::unique_ptr<PostProcessor>(std::move(t));
  }
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(std::make_unique<IdentityPost>());
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePost>();
    for (const auto& s : j.value("processors", Json::array())) {
      HF2PTE_ASSIGN_OR_RETURN(auto step, make_post_processor(s));
      if (step) seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<PostProcessor>(std::move(seq));
  }
  return json_error("unknown post-processor type '{}'", type);
}

Result<std::unique_ptr<Decoder>> make_decoder(const Json& j) {
  if (j.is_null()) return std::unique_ptr<Decoder>();
  std::string type = str_or(j, "type", "");
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDec>());
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspaceDec>();
    auto r = utf8_decode(str_or(j, "replacement", "\xE2\x96\x81"));
    if (r.size() != 1) return json_error("Metaspace replacement must be one character");
    m->replacement = r[0];
    std::string scheme = str_or(j, "prepend_scheme", bool_or(j, "add_prefix_space", true) ? "always" : "never");
    m->prepend = scheme != "never";
    return std::unique_ptr<Decoder>(std::move(m));
  }
  if (type == "WordPiece") {
    auto w = std::make_unique<WordPieceDec>();
    w->prefix = str_or(j, "prefix", "##");
    w->cleanup = bool_or(j, "cleanup", true);
    return std::unique_ptr<Decoder>(std::move(w));
  }
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDec>());
  if (type == "Fuse") return std::unique_ptr<Decoder>(std::make_unique<FuseDec>());
  if (type == "Strip") {
    auto s = std::make_unique<StripDec>();
    auto c = utf8_decode(str_or(j, "content", " "));
    if (c.size() != 1) return json_error("Strip decoder content must be one character");
    s->content = c[0];
    s->start = j.value("start", size_t{0});
    s->stop = j.value("stop", size_t{0});
    return std::unique_ptr<Decoder>(std::move(s));
  }
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceDec>();
    HF2PTE_ASSIGN_OR_RETURN(r->pattern, Pattern::parse(j.value("pattern", Json())));
    r->content = str_or(j, "content", "");
    return std::unique_ptr<Decoder>(std::move(r));
  }
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceDec>();
    for (const auto& s : j.value("decoders", Json::array())) {
      HF2PTE_ASSIGN_OR_RETURN(auto step, make_decoder(s));
      if (step) seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<Decoder>(std::move(seq));
  }
  return json_error("unknown decoder type '{}'", type);
}

}  // namespace hf2pte::llm::tok
