// tokenizer.json loading and the encode/decode pipeline: added tokens are
// split out first (on the raw text for normalized=false tokens, then on the
// normalized text for the others), the rest goes through pre-tokenizer and
// model, and the post-processor adds the template's special tokens.
#include "llm/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "llm/tokenizer/components.h"
#include "llm/tokenizer/sp_tokenizer.h"
#include "llm/tokenizer/unicode.h"
#include "pte/pte_file.h"

namespace hf2pte::llm {
namespace fs = std::filesystem;
using tok::Json;

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"};
  return names;
}

namespace {

Result<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIoError, "cannot read {}", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct AddedToken {
  std::string content;   // as matched (normalized when `normalized`)
  std::string original;  // as written in tokenizer.json (what decode prints)
  int64_t id = 0;
  bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
};

// Leftmost-longest matching of added tokens (HF uses Aho-Corasick with the
// same semantics). Tokens are bucketed by first byte, longest first.
class AddedMatcher {
 public:
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    auto& b = buckets_[static_cast<unsigned char>(t->content[0])];
    b.push_back(t);
    std::stable_sort(b.begin(), b.end(), [](auto* x, auto* y) { return x->content.size() > y->content.size(); });
  }
  bool empty() const { return buckets_.empty(); }

  /// Splits `p` (an unmatched piece) into added-token pieces and the text between them.
  void split(const tok::Piece& p, std::vector<tok::Piece>& out) const {
    const std::string& s = p.text;
    size_t prev = 0, i = 0;
    auto emit_text = [&](size_t b, size_t e) {
      if (e > b) out.push_back(tok::Piece{s.substr(b, e - b), -1, p.at_start && b == 0});
    };
    while (i < s.size()) {
      auto it = buckets_.find(static_cast<unsigned char>(s[i]));
      const AddedToken* hit = nullptr;
      if (it != buckets_.end()) {
        for (const auto* t : it->second) {
          if (s.compare(i, t->content.size(), t->content) == 0) { hit = t; break; }
        }
      }
      if (!hit) { ++i; continue; }
      size_t start = i, stop = i + hit->content.size();
      i = stop;
      if (hit->single_word) {
        auto before = tok::utf8_decode(s.substr(0, start));
        auto after = tok::utf8_decode(s.substr(stop, 4));
        bool ok_start = before.empty() || !tok::is_word_char(before.back());
        bool ok_stop = after.empty() || !tok::is_word_char(after.front());
        if (!ok_start || !ok_stop) continue;
      }
      if (hit->lstrip) {
        auto cps = tok::utf8_decode(s.substr(prev, start - prev));
        size_t nb = start;
        for (size_t k = cps.size(); k-- > 0 && tok::is_whitespace(cps[k]);) {
          std::string enc;
          tok::utf8_append(enc, cps[k]);
          nb -= enc.size();
        }
        start = nb;
      }
      if (hit->rstrip) {
        while (stop < s.size()) {
          size_t n = std::min<size_t>(tok::utf8_len(static_cast<unsigned char>(s[stop])), s.size() - stop);
          auto c = tok::utf8_decode(s.substr(stop, n));
          if (c.empty() || !tok::is_whitespace(c[0])) break;
          stop += n;
        }
        i = stop;
      }
      emit_text(prev, start);
      out.push_back(tok::Piece{s.substr(start, stop - start), hit->id, false});
      prev = stop;
    }
    emit_text(prev, s.size());
  }

 private:
  std::map<unsigned char, std::vector<const AddedToken*>> buckets_;
};

class HfTokenizer : public Tokenizer {
 public:
  Status init(const Json& j) {
    if (!j.is_object()) return tok::json_error("top level must be an object");
    HF2PTE_ASSIGN_OR_RETURN(normalizer_, tok::make_normalizer(j.value("normalizer", Json())));
    HF2PTE_ASSIGN_OR_RETURN(pre_, tok::make_pre_tokenizer(j.value("pre_tokenizer", Json())));
    HF2PTE_ASSIGN_OR_RETURN(model_, tok::make_model(j.value("model", Json())));
    HF2PTE_ASSIGN_OR_RETURN(post_, tok::make_post_processor(j.value("post_processor", Json())));
    HF2PTE_ASSIGN_OR_RETURN(decoder_, tok::make_decoder(j.value("decoder", Json())));
    const Json& added = j.value("added_tokens", Json::array());
    added_.reserve(added.size());  // pointers into added_ must stay valid
    for (const auto& a : added) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string()) {
        return tok::json_error("added_tokens entry {} lacks id or content", a.dump());
      }
      AddedToken t;
      t.content = a["content"].get<std::string>();
      t.original = t.content;
      t.id = a["id"].get<int64_t>();
      t.special = tok::bool_or(a, "special", false);
      t.lstrip = tok::bool_or(a, "lstrip", false);
      t.rstrip = tok::bool_or(a, "rstrip", false);
      t.single_word = tok::bool_or(a, "single_word", false);
      t.normalized = tok::bool_or(a, "normalized", !t.special);
      by_id_[t.id] = added_.size();
      by_content_[t.content] = t.id;
      if (t.normalized && normalizer_) t.content = normalizer_->normalize(t.content);
      added_.push_back(t);
    }
    for (const auto& t : added_) (t.normalized ? norm_match_ : raw_match_).add(&t);
    return Status::ok();
  }

  Result<std::vector<int64_t>> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<tok::Piece> raw, pieces;
    raw_match_.split(tok::Piece{std::string(text), -1, true}, raw);
    for (auto& p : raw) {
      if (p.added_id >= 0) { pieces.push_back(std::move(p)); continue; }
      if (normalizer_) p.text = normalizer_->normalize(std::move(p.text));
      norm_match_.split(p, pieces);
    }
    std::vector<int64_t> ids;
    std::vector<tok::Piece> words;
    for (const auto& p : pieces) {
      if (p.added_id >= 0) { ids.push_back(p.added_id); continue; }
      words.clear();
      if (pre_) pre_->split(p, words);
      else words.push_back(p);
      for (const auto& w : words) model_->tokenize(w.text, ids);
    }
    if (add_special_tokens && post_) ids = post_->process(std::move(ids));
    return ids;
  }

  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens) const override {
    std::vector<std::string> tokens;
    for (int64_t id : ids) {
      if (auto it = by_id_.find(id); it != by_id_.end()) {
        const AddedToken& t = added_[it->second];
        if (skip_special_tokens && t.special) continue;
        tokens.push_back(t.original);
        continue;
      }
      if (auto t = model_->id_to_token(id)) tokens.push_back(std::move(*t));
    }
    if (!decoder_) {
      std::string out;
      for (size_t k = 0; k < tokens.size(); ++k) out += (k ? " " : "") + tokens[k];
      return out;
    }
    std::string out;
    for (auto& t : decoder_->decode_chain(std::move(tokens))) out += t;
    return out;
  }

  int64_t vocab_size() const override {
    int64_t n = model_->vocab_size();
    for (const auto& t : added_) n = std::max(n, t.id + 1);
    return n;
  }

  std::optional<int64_t> token_to_id(std::string_view token) const override {
    if (auto it = by_content_.find(std::string(token)); it != by_content_.end()) return it->second;
    return model_->token_to_id(token);
  }

 private:
  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_;
  std::unique_ptr<tok::Model> model_;
  std::unique_ptr<tok::PostProcessor> post_;
  std::unique_ptr<tok::Decoder> decoder_;
  std::vector<AddedToken> added_;
  std::unordered_map<int64_t, size_t> by_id_;
  std::unordered_map<std::string, int64_t> by_content_;
  AddedMatcher raw_match_, norm_match_;
};

// tokenizer_config.json names tokens either as strings or {"content": ...}.
std::optional<std::string> token_name(const Json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Status Tokenizer::read_config(std::string_view config_json) {
  if (config_json.empty()) return Status::ok();
  Json cfg = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) {
    return make_error(ErrorCode::kInvalidInput, "malformed JSON (tokenizer_config.json)");
  }
  if (auto b = token_name(cfg, "bos_token")) bos_id_ = token_to_id(*b), bos_token_ = *b;
  if (auto e = token_name(cfg, "eos_token")) {
    eos_token_ = *e;
    if (auto id = token_to_id(*e)) eos_ids_ = {*id};
  }
  if (auto it = cfg.find("chat_template"); it != cfg.end()) {
    if (it->is_string()) {
      chat_template_ = it->get<std::string>();
    } else if (it->is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const auto& t : *it) {
        if (!t.is_object() || !t.contains("template") || !t["template"].is_string()) continue;
        if (chat_template_.empty() || tok::str_or(t, "name", "") == "default") chat_template_ = t["template"].get<std::string>();
      }
    }
  }
  if (auto it = cfg.find("add_bos_token"); it != cfg.end() && it->is_boolean()) add_bos_ = it->get<bool>();
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  Json j = Json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(ErrorCode::kInvalidInput, "malformed JSON (tokenizer.json)");
  auto t = std::make_unique<HfTokenizer>();
  HF2PTE_RETURN_IF_ERROR(t->init(j));
  HF2PTE_RETURN_IF_ERROR(t->read_config(config_json));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_sentencepiece(std::string_view model_bytes, std::string_view config_json) {
  bool add_bos = true;  // SentencePiece Llama tokenizers add BOS unless the config says otherwise
  if (!config_json.empty()) {
    Json cfg = Json::parse(config_json, nullptr, false);
    if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) add_bos = cfg["add_bos_token"].get<bool>();
  }
  HF2PTE_ASSIGN_OR_RETURN(auto t, tok::make_sentencepiece_tokenizer(model_bytes, add_bos));
  HF2PTE_RETURN_IF_ERROR(t->read_config(config_json));
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_pte(const pte::PteFile& file) {
  auto get = [&](const std::string& name) -> std::optional<std::string> {
    auto d = file.named_data(std::string(kEmbeddedTokenizerPrefix) + name);
    if (!d) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(d->data()), d->size());
  };
  auto cfg = get("tokenizer_config.json");
  if (auto j = get("tokenizer.json")) return from_json(*j, cfg.value_or(""));
  if (auto m = get("tokenizer.model")) return from_sentencepiece(*m, cfg.value_or(""));
  return make_error(ErrorCode::kNotFound, "no embedded tokenizer (export with --embed-tokenizer, or pass --tokenizer DIR) ({})",
                    file.path());
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) {
    std::string cfg;
    if (fs::exists(p / "tokenizer_config.json", ec)) {
      HF2PTE_ASSIGN_OR_RETURN(cfg, read_text(p / "tokenizer_config.json"));
    }
    if (fs::exists(p / "tokenizer.json", ec)) {
      HF2PTE_ASSIGN_OR_RETURN(std::string j, read_text(p / "tokenizer.json"));
      auto t = from_json(j, cfg);
      if (!t) return t.status().with_context(path);
      return t;
    }
    if (fs::exists(p / "tokenizer.model", ec)) {
      HF2PTE_ASSIGN_OR_RETURN(std::string m, read_text(p / "tokenizer.model"));
      auto t = from_sentencepiece(m, cfg);
      if (!t) return t.status().with_context(path);
      return t;
    }
    return make_error(ErrorCode::kNotFound, "no tokenizer.json or tokenizer.model in {}", path);
  }
  if (!fs::exists(p, ec)) return make_error(ErrorCode::kNotFound, "tokenizer path does not exist ({})", path);
  if (p.extension() == ".json") {
    HF2PTE_ASSIGN_OR_RETURN(std::string j, read_text(p));
    return from_json(j);
  }
  if (p.extension() == ".model") {
    HF2PTE_ASSIGN_OR_RETURN(std::string m, read_text(p));
    return from_sentencepiece(m);
  }
  HF2PTE_ASSIGN_OR_RETURN(auto f, pte::PteFile::open(path));
  return from_pte(*f);
}

}  // namespace hf2pte::llm
