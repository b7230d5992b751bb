#include "models/arch.h"

#include <array>

namespace hf2pte::models {

namespace {

constexpr TensorNames kPhi3Names = [] {
  TensorNames n;
  n.qkv = "model.layers.{}.self_attn.qkv_proj";
  n.gate_up = "model.layers.{}.mlp.gate_up_proj";
  return n;
}();

// model_type, HF class, tensor names, q/k/v bias always.
constexpr std::array kArchitectures = {
    ArchTraits{"llama", "LlamaForCausalLM", {}, false},
    ArchTraits{"mistral", "MistralForCausalLM", {}, false},
    ArchTraits{"qwen2", "Qwen2ForCausalLM", {}, true},
    ArchTraits{"phi3", "Phi3ForCausalLM", kPhi3Names, false},
};

}  // namespace

std::span<const ArchTraits> all_architectures() { return kArchitectures; }

const ArchTraits* find_architecture(std::string_view model_type) {
  for (const auto& a : kArchitectures) {
    if (a.model_type == model_type) return &a;
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string s;
  for (const auto& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.model_type);
  return s;
}

}  // namespace hf2pte::models
