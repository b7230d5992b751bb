// The three tokenization models: BPE, WordPiece and Unigram, each mirroring
// the HF `tokenizers` algorithm (including its quirks) so ids match exactly.
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include "llm/tokenizer/components.h"
#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm::tok {
namespace {

// Transparent hashing so lookups by string_view do not allocate.
struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int64_t, SvHash, std::equal_to<>>;

class VocabModel : public Model {
 public:
  std::optional<std::string> id_to_token(int64_t id) const override {
    if (id < 0 || id >= int64_t(tokens_.size()) || !has_[size_t(id)]) return std::nullopt;
    return tokens_[size_t(id)];
  }
  std::optional<int64_t> token_to_id(std::string_view t) const override {
    auto it = vocab_.find(t);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  int64_t vocab_size() const override { return int64_t(vocab_.size()); }

 protected:
  Status load_vocab(const Json& v) {
    if (!v.is_object()) return json_error("model.vocab must be an object of token -> id");
    vocab_.reserve(v.size());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
        return json_error("model.vocab['{}'] is not a non-negative id", it.key());
      }
      add(it.key(), it.value().get<int64_t>());
    }
    return Status::ok();
  }
  void add(const std::string& tok, int64_t id) {
    vocab_[tok] = id;
    if (size_t(id) >= tokens_.size()) tokens_.resize(size_t(id) + 1), has_.resize(size_t(id) + 1);
    tokens_[size_t(id)] = tok;
    has_[size_t(id)] = true;
  }
  Vocab vocab_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_;
};

class Bpe : public VocabModel {
 public:
  static Result<std::unique_ptr<Model>> load(const Json& j) {
    auto m = std::unique_ptr<Bpe>(new Bpe());
    HF2PTE_RETURN_IF_ERROR(m->load_vocab(j.value("vocab", Json())));
    m->unk_ = str_or(j, "unk_token", "");
    m->prefix_ = str_or(j, "continuing_subword_prefix", "");
    m->suffix_ = str_or(j, "end_of_word_suffix", "");
    m->fuse_unk_ = bool_or(j, "fuse_unk", false);
    m->byte_fallback_ = bool_or(j, "byte_fallback", false);
    m->ignore_merges_ = bool_or(j, "ignore_merges", false);
    const Json& merges = j.value("merges", Json::array());
    if (!merges.is_array()) return json_error("model.merges must be an array");
    m->merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const Json& e = merges[rank];
      std::string a, b;
      if (e.is_string()) {
        // "a b": exactly one space, as HF requires.
        const std::string& s = e.get_ref<const std::string&>();
        auto sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return json_error("malformed merge #{} '{}': expected two tokens separated by one space", rank, s);
        }
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>(), b = e[1].get<std::string>();
      } else {
        return json_error("malformed merge #{} {}: expected \"a b\" or [a, b]", rank, e.dump());
      }
      auto ia = m->token_to_id(a), ib = m->token_to_id(b);
      std::string merged = a + (b.compare(0, m->prefix_.size(), m->prefix_) == 0 ? b.substr(m->prefix_.size()) : b);
      auto im = m->token_to_id(merged);
      if (!ia || !ib || !im) {
        return json_error("malformed merge #{} '{} {}': a token is not in the vocabulary", rank, a, b);
      }
      m->merges_.emplace(key(*ia, *ib), std::make_pair(int64_t(rank), *im));
    }
    return std::unique_ptr<Model>(std::move(m));
  }

  void tokenize(std::string_view w, std::vector<int64_t>& ids) const override {
    if (w.empty()) return;
    if (ignore_merges_) {
      if (auto id = token_to_id(w)) { ids.push_back(*id); return; }
    }
    std::vector<int64_t> syms;
    std::optional<int64_t> unk_id = unk_.empty() ? std::nullopt : token_to_id(unk_);
    bool pending_unk = false;
    for (size_t i = 0; i < w.size();) {
      size_t n = std::min<size_t>(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
      std::string s(w.substr(i, n));
      if (i != 0 && !prefix_.empty()) s = prefix_ + s;
      if (i + n == w.size() && !suffix_.empty()) s += suffix_;
      i += n;
      if (auto id = token_to_id(s)) {
        if (pending_unk) syms.push_back(*unk_id), pending_unk = false;
        syms.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        std::vector<int64_t> bytes;
        for (unsigned char b : s) {
          auto id = token_to_id(fmt::format("<0x{:02X}>", b));
          if (!id) { bytes.clear(); break; }
          bytes.push_back(*id);
        }
        // HF appends the byte pieces without flushing a pending unk first.
        if (!bytes.empty()) { syms.insert(syms.end(), bytes.begin(), bytes.end()); continue; }
      }
      if (unk_id) {
        if (pending_unk && !fuse_unk_) syms.push_back(*unk_id);
        pending_unk = true;
      }
    }
    if (pending_unk) syms.push_back(*unk_id);
    merge_all(syms);
    ids.insert(ids.end(), syms.begin(), syms.end());
  }

 private:
  static uint64_t key(int64_t a, int64_t b) { return (uint64_t(a) << 32) | uint64_t(b); }

  // HF's Word::merge_all: a heap of candidate merges ordered by (rank, position).
  void merge_all(std::vector<int64_t>& syms) const {
    const long n = long(syms.size());
    if (n < 2) return;
    std::vector<long> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
    std::vector<bool> alive(size_t(n), true);
    for (long i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
    struct Cand { int64_t rank; long pos; int64_t new_id; };
    auto cmp = [](const Cand& x, const Cand& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
    std::priority_queue<Cand, std::vector<Cand>, decltype(cmp)> q(cmp);
    auto push = [&](long pos) {
      long nx = next[size_t(pos)];
      if (nx < 0) return;
      auto it = merges_.find(key(syms[size_t(pos)], syms[size_t(nx)]));
      if (it != merges_.end()) q.push({it->second.first, pos, it->second.second});
    };
    for (long i = 0; i + 1 < n; ++i) push(i);
    while (!q.empty()) {
      Cand c = q.top();
      q.pop();
      if (!alive[size_t(c.pos)] || next[size_t(c.pos)] < 0) continue;
      long r = next[size_t(c.pos)];
      auto it = merges_.find(key(syms[size_t(c.pos)], syms[size_t(r)]));
      if (it == merges_.end() || it->second.second != c.new_id) continue;  // stale entry
      syms[size_t(c.pos)] = c.new_id;
      alive[size_t(r)] = false;
      next[size_t(c.pos)] = next[size_t(r)];
      if (next[size_t(r)] >= 0) prev[size_t(next[size_t(r)])] = c.pos;
      if (prev[size_t(c.pos)] >= 0) push(prev[size_t(c.pos)]);
      push(c.pos);
    }
    std::vector<int64_t> out;
    for (long i = 0; i < n; ++i) if (alive[size_t(i)]) out.push_back(syms[size_t(i)]);
    syms.swap(out);
  }

  std::string unk_, prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges_;  // pair -> (rank, merged id)
};

class WordPiece : public VocabModel {
 public:
  static Result<std::unique_ptr<Model>> load(const Json& j) {
    auto m = std::unique_ptr<WordPiece>(new WordPiece());
    HF2PTE_RETURN_IF_ERROR(m->load_vocab(j.value("vocab", Json())));
    m->unk_ = str_or(j, "unk_token", "[UNK]");
    m->prefix_ = str_or(j, "continuing_subword_prefix", "##");
    m->max_chars_ = j.value("max_input_chars_per_word", size_t{100});
    if (!m->token_to_id(m->unk_)) return json_error("WordPiece unk_token '{}' is not in the vocabulary", m->unk_);
    return std::unique_ptr<Model>(std::move(m));
  }

  void tokenize(std::string_view w, std::vector<int64_t>& ids) const override {
    int64_t unk = *token_to_id(unk_);
    if (utf8_decode(w).size() > max_chars_) { ids.push_back(unk); return; }
    std::vector<int64_t> subs;
    size_t start = 0;
    while (start < w.size()) {
      size_t end = w.size();
      std::optional<int64_t> found;
      while (start < end) {
        std::string sub = (start > 0 ? prefix_ : std::string()) + std::string(w.substr(start, end - start));
        if ((found = token_to_id(sub))) break;
        // Step back one character.
        do { --end; } while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80);
      }
      if (!found) { ids.push_back(unk); return; }
      subs.push_back(*found);
      start = end;
    }
    ids.insert(ids.end(), subs.begin(), subs.end());
  }

 private:
  std::string unk_, prefix_;
  size_t max_chars_ = 100;
};

class Unigram : public VocabModel {
 public:
  static Result<std::unique_ptr<Model>> load(const Json& j) {
    auto m = std::unique_ptr<Unigram>(new Unigram());
    const Json& v = j.value("vocab", Json());
    if (!v.is_array()) return json_error("Unigram vocab must be an array of [piece, score]");
    m->min_score_ = std::numeric_limits<double>::infinity();
    for (size_t id = 0; id < v.size(); ++id) {
      if (!v[id].is_array() || v[id].size() != 2 || !v[id][0].is_string() || !v[id][1].is_number()) {
        return json_error("Unigram vocab entry #{} is not [piece, score]", id);
      }
      std::string piece = v[id][0].get<std::string>();
      double score = v[id][1].get<double>();
      m->add(piece, int64_t(id));
      m->scores_.push_back(score);
      m->min_score_ = std::min(m->min_score_, score);
      m->max_len_ = std::max(m->max_len_, piece.size());
    }
    if (j.contains("unk_id") && j["unk_id"].is_number_integer()) {
      m->unk_id_ = j["unk_id"].get<int64_t>();
      if (*m->unk_id_ < 0 || size_t(*m->unk_id_) >= v.size()) return json_error("Unigram unk_id is out of range");
    }
    m->byte_fallback_ = bool_or(j, "byte_fallback", false);
    return std::unique_ptr<Model>(std::move(m));
  }

  void tokenize(std::string_view s, std::vector<int64_t>& ids) const override {
    if (s.empty()) return;
    constexpr double kUnkPenalty = 10.0;
    const double unk_score = min_score_ - kUnkPenalty;
    struct Node { int64_t id = -1; double score = 0; long start = -1; };
    std::vector<Node> best(s.size() + 1);
    best[0].start = 0;
    for (size_t pos = 0; pos < s.size();) {
      size_t mblen = std::min<size_t>(utf8_len(static_cast<unsigned char>(s[pos])), s.size() - pos);
      if (best[pos].start < 0) { pos += mblen; continue; }
      double base = best[pos].score;
      bool has_single = false;
      // Every vocabulary piece starting here, shortest first (the trie's prefix order).
      for (size_t end = pos + mblen; end <= s.size() && end - pos <= max_len_;) {
        if (auto id = token_to_id(s.substr(pos, end - pos))) {
          double cand = base + scores_[size_t(*id)];
          Node& t = best[end];
          if (t.start < 0 || cand > t.score) t = {*id, cand, long(pos)};
          if (end - pos == mblen) has_single = true;
        }
        if (end == s.size()) break;
        end += std::min<size_t>(utf8_len(static_cast<unsigned char>(s[end])), s.size() - end);
      }
      if (!has_single) {
        Node& t = best[pos + mblen];
        double cand = base + unk_score;
        if (t.start < 0 || cand > t.score) t = {unk_id_.value_or(-1), cand, long(pos)};
      }
      pos += mblen;
    }
    // Backtrack; consecutive unknown pieces fuse into one (HF's fuse_unk is always on).
    std::vector<std::string> pieces;
    std::vector<bool> is_unk;
    for (long end = long(s.size()); end > 0;) {
      const Node& nd = best[size_t(end)];
      std::string piece(s.substr(size_t(nd.start), size_t(end - nd.start)));
      bool unk = !unk_id_ || nd.id == *unk_id_;
      if (unk && !is_unk.empty() && is_unk.back()) pieces.back() = piece + pieces.back();
      else pieces.push_back(piece), is_unk.push_back(unk);
      end = nd.start;
    }
    for (size_t k = pieces.size(); k-- > 0;) {
      if (auto id = token_to_id(pieces[k])) { ids.push_back(*id); continue; }
      if (byte_fallback_) {
        std::vector<int64_t> bytes;
        for (unsigned char b : pieces[k]) {
          auto id = token_to_id(fmt::format("<0x{:02X}>", b));
          if (!id) { bytes.clear(); break; }
          bytes.push_back(*id);
        }
        if (!bytes.empty()) { ids.insert(ids.end(), bytes.begin(), bytes.end()); continue; }
      }
      if (unk_id_) ids.push_back(*unk_id_);
    }
  }

 private:
  std::vector<double> scores_;
  double min_score_ = 0;
  size_t max_len_ = 0;
  std::optional<int64_t> unk_id_;
  bool byte_fallback_ = false;
};

}  // namespace

Result<std::unique_ptr<Model>> make_model(const Json& j) {
  if (!j.is_object()) return json_error("'model' is missing");
  std::string type = str_or(j, "type", "");
  // Old files omit the type; the fields tell the model apart.
  if (type.empty()) type = j.contains("merges") ? "BPE" : j.contains("unk_id") ? "Unigram" : "WordPiece";
  if (type == "BPE") return Bpe::load(j);
  if (type == "WordPiece") return WordPiece::load(j);
  if (type == "Unigram") return Unigram::load(j);
  return json_error("unknown model type '{}'", type);
}

}  // namespace hf2pte::llm::tok
