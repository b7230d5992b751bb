// SentencePiece-backed tokenizer. Kept in its own translation unit because
// sentencepiece_processor.h declares `namespace absl` names that clash with
// real abseil headers (deps.md).
#pragma once

#include <memory>
#include <string_view>

#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm::tok {

/// Builds a Tokenizer from serialized SentencePiece model bytes; `add_bos` prepends bos_id on encode.
Result<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(std::string_view model_bytes, bool add_bos);

}  // namespace hf2pte::llm::tok
