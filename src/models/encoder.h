// BERT-style encoders as data: one EncoderTraits row per Hugging Face
// model_type (bert, roberta, xlm-roberta, distilbert) and one builder
// (encoder.cpp). The program contract is in docs/llm-contract.md ("Encoder
// programs"): forward(input_ids [1, S], attention_mask [1, S]) ->
// (MLM logits [1, S, vocab] when the checkpoint has the head,) last_hidden_state [1, S, hidden].
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "models/model_builder.h"

namespace hf2pte::models {

/// Tensor names with the model prefix ("bert.", "roberta.", "distilbert."),
/// which bare BertModel-style checkpoints omit (looked up with it, then
/// without). "{}" is the layer index; linear names get ".weight" / ".bias".
struct EncoderNames {
  std::string_view word_embed;
  std::string_view pos_embed;
  std::string_view type_embed;  ///< "" = no token type embeddings (DistilBERT)
  std::string_view embed_norm;  ///< LayerNorm ".weight" (".bias" next to it)
  std::string_view q, k, v, o;
  std::string_view attn_norm;
  std::string_view up, down;
  std::string_view ffn_norm;
  // The MLM head (no model prefix): dense -> act -> LayerNorm -> decoder (tied).
  std::string_view head_dense;
  std::string_view head_norm;
  std::string_view head_decoder;    ///< ".weight" [vocab, hidden]; absent when tied
  std::string_view head_bias;       ///< [vocab]
  std::string_view head_bias_alias; ///< the same parameter saved a second time ("" = none)
};

/// How position ids are formed from the S input ids.
enum class PositionIds : uint8_t {
  kArange,        ///< 0..S-1 (BERT, DistilBERT)
  kAfterPadding,  ///< HF create_position_ids_from_input_ids: pad ids get padding_idx, others
                  ///< padding_idx + (count of non-pad ids up to and including them) (RoBERTa)
};

struct EncoderTraits {
  std::string_view model_type;  ///< config.json "model_type"
  std::string_view base_class;  ///< bare encoder (last_hidden_state only)
  std::string_view mlm_class;   ///< with the masked-LM head
  std::string_view prefix;      ///< optional prefix of the encoder's names
  EncoderNames names;
  PositionIds positions = PositionIds::kArange;
  /// The head's activation: "" = the config's (BERT hidden_act, DistilBERT activation);
  /// RoBERTa's LM head always applies exact GELU.
  std::string_view head_act;
};

std::span<const EncoderTraits> all_encoder_architectures();
/// The row for `model_type`, or nullptr.
const EncoderTraits* find_encoder_architecture(std::string_view model_type);
/// Whether the checkpoint's config.json names an encoder model_type.
bool is_encoder_checkpoint(const Checkpoint& ckpt);

/// Builds the encoder program (see the file comment); every checkpoint tensor
/// must be consumed or declared ignorable (pooler, next-sentence head, buffers).
Result<BuiltModel> build_encoder(Checkpoint& ckpt, const BuildOptions& options);

}  // namespace hf2pte::models
