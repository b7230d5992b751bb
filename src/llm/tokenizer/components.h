// Internal stages of a tokenizer.json pipeline (normalizer -> pre-tokenizer ->
// model -> post-processor; decoder for the way back). Each stage is a small
// class built from its JSON object by a factory; unknown types are errors
// naming the type, so an unsupported tokenizer fails at load, not at encode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hf2pte::llm::tok {

using Json = nlohmann::json;

/// A compiled PCRE2 pattern (UTF + UCP, JIT when available).
class Regex {
 public:
  static Result<std::shared_ptr<Regex>> compile(const std::string& pattern);
  ~Regex();
  /// Non-overlapping matches as [begin, end) byte ranges, left to right.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque to keep pcre2.h out of headers
};

/// A `{"String": ...}` or `{"Regex": ...}` pattern of Split and Replace.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;
  static Result<Pattern> parse(const Json& j);
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;
};

/// Replaces every match of `p` in `s` by `content`.
std::string replace_all(std::string_view s, const Pattern& p, std::string_view content);

/// One piece of text between pre-tokenization steps. `added_id` >= 0 marks an
/// added token that no later stage may touch.
struct Piece {
  std::string text;
  int64_t added_id = -1;
  bool at_start = false;  ///< begins at offset 0 of the input (Metaspace "first")
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
Result<SplitBehavior> parse_behavior(const std::string& s);
/// Splits `p` at `matches` the way HF's NormalizedString::split does; empty pieces are dropped.
void split_piece(const Piece& p, const std::vector<std::pair<size_t, size_t>>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Appends the pieces `p` splits into.
  virtual void split(const Piece& p, std::vector<Piece>& out) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  /// Appends the ids of one pre-tokenized piece.
  virtual void tokenize(std::string_view piece, std::vector<int64_t>& ids) const = 0;
  virtual std::optional<std::string> id_to_token(int64_t id) const = 0;
  virtual std::optional<int64_t> token_to_id(std::string_view token) const = 0;
  virtual int64_t vocab_size() const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  /// Adds the special tokens around a single sequence (only called with add_special_tokens).
  virtual std::vector<int64_t> process(std::vector<int64_t> ids) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// Factories: `j` is the stage's JSON object; null JSON yields a null stage.
Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j);
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j);
Result<std::unique_ptr<Model>> make_model(const Json& j);
/// `token_id` resolves the token names a processor refers to (BertProcessing carries ids too).
Result<std::unique_ptr<PostProcessor>> make_post_processor(const Json& j);
Result<std::unique_ptr<Decoder>> make_decoder(const Json& j);

/// "(tokenizer.json)"-suffixed input error.
template <typename... Args>
Status json_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status(ErrorCode::kInvalidInput, fmt::format(f, std::forward<Args>(args)...) + " (tokenizer.json)");
}

/// Reads an optional string member; `def` when absent or null.
std::string str_or(const Json& j, const char* key, const std::string& def);
bool bool_or(const Json& j, const char* key, bool def);

}  // namespace hf2pte::llm::tok
