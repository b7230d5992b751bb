// Whisper speech recognition programs (docs/speech.md): encoder and
// text_decoder methods, the LLM metadata plus decoder_start_token_id and the
// feature-extractor / generation settings as constant methods.
#pragma once

#include "models/model_builder.h"

namespace hf2pte::models {

bool is_whisper_checkpoint(const Checkpoint& ckpt);
Result<BuiltModel> build_whisper(Checkpoint& ckpt, const BuildOptions& opt);

}  // namespace hf2pte::models
