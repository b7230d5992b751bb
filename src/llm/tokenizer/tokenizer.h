// Tokenizers for text generation: Hugging Face tokenizer.json (BPE,
// WordPiece, Unigram with their normalizers, pre-tokenizers, post-processors
// and decoders, matching the `tokenizers` library id for id) and
// SentencePiece tokenizer.model files. Loads from a checkpoint folder or from
// the tokenizer files a .pte embeds as named data ("tokenizer/<file>").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf2pte::pte {
class PteFile;
}

namespace hf2pte::llm {

/// Key prefix of tokenizer files embedded in a .pte's named data.
inline constexpr std::string_view kEmbeddedTokenizerPrefix = "tokenizer/";

/// The tokenizer files a checkpoint folder may hold, in the order they are tried.
const std::vector<std::string>& tokenizer_file_names();

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Loads from a folder (tokenizer.json [+ tokenizer_config.json], else
  /// tokenizer.model), a *.json or *.model file, or a .pte with embedded files.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);
  /// Parses tokenizer.json text; `config_json` (tokenizer_config.json) may be empty.
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view tokenizer_json, std::string_view config_json = {});
  /// Loads a serialized SentencePiece model (tokenizer.model bytes).
  static Result<std::unique_ptr<Tokenizer>> from_sentencepiece(std::string_view model_bytes,
                                                               std::string_view config_json = {});
  /// Loads the tokenizer files embedded in `file` (kNotFound when there are none).
  static Result<std::unique_ptr<Tokenizer>> from_pte(const pte::PteFile& file);

  /// Text -> ids. Added tokens written in the text are always matched;
  /// `add_special_tokens` only controls the post-processor (BOS/EOS templates).
  virtual Result<std::vector<int64_t>> encode(std::string_view text, bool add_special_tokens = true) const = 0;
  /// Ids -> text; ids outside the vocabulary are skipped, as HF does.
  virtual std::string decode(std::span<const int64_t> ids, bool skip_special_tokens = false) const = 0;
  /// Number of ids (model vocabulary plus added tokens).
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int64_t> token_to_id(std::string_view token) const = 0;

  /// BOS id from tokenizer_config.json (bos_token), when known.
  std::optional<int64_t> bos_id() const { return bos_id_; }
  /// EOS ids from tokenizer_config.json (eos_token), possibly empty.
  const std::vector<int64_t>& eos_ids() const { return eos_ids_; }
  /// tokenizer_config.json's chat_template ("" when there is none); see chat_template.h.
  const std::string& chat_template() const { return chat_template_; }
  /// The bos_token / eos_token strings of tokenizer_config.json ("" when absent).
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 protected:
  /// Reads bos_token / eos_token / add_bos_token from tokenizer_config.json text.
  Status read_config(std::string_view config_json);
  std::optional<int64_t> bos_id_;
  std::vector<int64_t> eos_ids_;
  std::optional<bool> add_bos_;  ///< add_bos_token, when the config says
  std::string chat_template_, bos_token_, eos_token_;
};

/// Streams decoded text token by token without ever emitting half a UTF-8
/// character or a partial byte-fallback sequence: text is withheld while it
/// ends in U+FFFD (bytes that may still complete), and flushed at the end.
///
/// Each step decodes only a short window (the ids of the last emitted step as
/// context, plus the ids not emitted yet), so a whole generation costs time
/// linear in its length. The context is what keeps decoder effects that depend
/// on position (Metaspace / Strip dropping the first space) right.
class TextStreamer {
 public:
  /// `anchor` is the last prompt id: it is the first context, so the leading
  /// space of the first generated token survives.
  TextStreamer(const Tokenizer& tok, std::optional<int64_t> anchor);
  /// Adds one id; returns the text that became final.
  std::string push(int64_t id);
  /// Returns whatever is still withheld.
  std::string flush();

 private:
  std::string step(bool final);
  std::string decode_range(size_t begin, size_t end) const;
  const Tokenizer& tok_;  // not owned; outlives the streamer
  std::vector<int64_t> ids_;
  size_t prefix_ = 0;       ///< first id of the context window
  size_t read_ = 0;         ///< first id whose text has not been emitted
  std::string prefix_text_; ///< decode(ids_[prefix_, read_))
};

}  // namespace hf2pte::llm
