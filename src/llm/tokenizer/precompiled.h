// SentencePiece's precompiled normalization map ("precompiled_charsmap"), the
// `Precompiled` normalizer of tokenizer.json (T5, XLM-R, ALBERT, mBART...).
//
// Blob layout: a little-endian uint32 holding the byte size of a darts-clone
// double-array trie, the trie itself (uint32 units), then the replacement
// strings, each NUL-terminated; a trie value is the byte offset of its string.
// The blob comes from an untrusted file: parsing validates the layout and
// every lookup is bounds-checked, so a corrupt map is an error or a no-op,
// never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf2pte::llm::tok {

/// Strict RFC 4648 base64 (padding optional, no whitespace).
Result<std::string> base64_decode(std::string_view text);

class PrecompiledCharsMap {
 public:
  /// Parses the raw (already base64-decoded) blob.
  static Result<PrecompiledCharsMap> parse(std::string_view blob);

  /// The replacement of the SHORTEST key that is a prefix of `chunk` (what
  /// HF's spm_precompiled uses), or nullopt when no key is. A NUL byte ends
  /// the search, as in HF.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  /// HF `tokenizers` semantics: for each extended grapheme cluster shorter
  /// than 6 bytes, a transform of the whole cluster replaces it; otherwise
  /// (or when none applies) each code point is transformed on its own.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<uint32_t> units_;
  std::string normalized_;
};

}  // namespace hf2pte::llm::tok
