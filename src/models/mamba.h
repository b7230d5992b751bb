// Mamba (v1) causal LMs: the selective state-space block instead of
// attention, through the same forward(input_ids, cache_position) contract.
#pragma once

#include "models/arch.h"
#include "models/model_builder.h"

namespace hf2pte::models {

Result<BuiltModel> build_mamba(const ArchTraits& arch, Checkpoint& ckpt, const BuildOptions& opt);

}  // namespace hf2pte::models
