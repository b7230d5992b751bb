// Image classifiers (ViT; docs/vision.md): forward(pixel_values f32[1, C, H, W])
// -> (logits [1, num_labels], last_hidden_state), the labels and the
// preprocessing settings as constant methods, so a deployed .pte carries them.
#pragma once

#include <span>
#include <string_view>

#include "models/model_builder.h"

namespace hf2pte::models {

struct VisionTraits {
  std::string_view model_type;
  std::string_view architecture;
  Result<BuiltModel> (*build)(Checkpoint& ckpt, const BuildOptions& opt);
};

std::span<const VisionTraits> all_vision_architectures();
/// Whether the checkpoint's config.json names an image model_type.
bool is_vision_checkpoint(const Checkpoint& ckpt);
Result<BuiltModel> build_vision(Checkpoint& ckpt, const BuildOptions& opt);

}  // namespace hf2pte::models
