// ViT (ViTForImageClassification): patch embedding as a conv2d with stride =
// kernel = patch, the CLS token in front, learned positions, pre-LN encoder
// layers x += attn(LN(x)); x += mlp(LN(x)), final LN, classifier on CLS.
#include "models/vision.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"
#include "models/blocks.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::TensorType;

// ViTConfig (transformers 4.46.3) defaults for keys a config.json may omit.
struct VitConfig {
  int64_t hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072;
  int64_t image_size = 224, patch_size = 16, num_channels = 3;
  double layer_norm_eps = 1e-12;
  bool qkv_bias = true;
  std::string hidden_act = "gelu";
};

Result<VitConfig> parse_vit_config(const nlohmann::json& j, const std::string& where) {
  VitConfig c;
  for (auto [key, field] : {std::pair{"hidden_size", &c.hidden_size}, std::pair{"num_hidden_layers", &c.num_hidden_layers},
                            std::pair{"num_attention_heads", &c.num_attention_heads},
                            std::pair{"intermediate_size", &c.intermediate_size}, std::pair{"image_size", &c.image_size},
                            std::pair{"patch_size", &c.patch_size}, std::pair{"num_channels", &c.num_channels}}) {
    HF2PTE_ASSIGN_OR_RETURN(*field, get_int_or(j, key, *field, where));
    HF2PTE_CHECK_OR_RETURN(*field > 0 && *field <= (int64_t(1) << 20), kInvalidInput,
                           "{}: field '{}' out of range; expected 1..{}, got {} ({})", json_label(where), key,
                           int64_t(1) << 20, *field, where);
  }
  HF2PTE_CHECK_OR_RETURN(c.num_hidden_layers <= 4096, kInvalidInput,
                         "{}: field 'num_hidden_layers' is too large; expected <= 4096, got {} ({})", json_label(where),
                         c.num_hidden_layers, where);
  HF2PTE_ASSIGN_OR_RETURN(c.layer_norm_eps, get_double_or(j, "layer_norm_eps", c.layer_norm_eps, where));
  HF2PTE_ASSIGN_OR_RETURN(c.qkv_bias, get_bool_or(j, "qkv_bias", c.qkv_bias, where));
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_act, get_string_or(j, "hidden_act", c.hidden_act, where));
  HF2PTE_CHECK_OR_RETURN(c.hidden_size % c.num_attention_heads == 0, kInvalidInput,
                         "{}: hidden_size must be a multiple of num_attention_heads; expected a multiple of {}, got {} ({})",
                         json_label(where), c.num_attention_heads, c.hidden_size, where);
  HF2PTE_CHECK_OR_RETURN(c.image_size % c.patch_size == 0, kInvalidInput,
                         "{}: image_size must be a multiple of patch_size; expected a multiple of {}, got {} ({})",
                         json_label(where), c.patch_size, c.image_size, where);
  return c;
}

/// id2label as {"0": "cat", ...}: the labels in id order ("LABEL_<i>" for gaps, as HF names them).
Result<std::vector<std::string>> labels(const nlohmann::json& j, const std::string& where) {
  std::vector<std::string> out;
  auto it = j.find("id2label");
  if (it == j.end() || it->is_null()) return out;
  HF2PTE_CHECK_OR_RETURN(it->is_object(), kInvalidInput, "{}: field 'id2label' has wrong type; expected object, got {} ({})",
                         json_label(where), json_type_name(*it), where);
  std::map<int64_t, std::string> by_id;
  for (const auto& [k, v] : it->items()) {
    char* end = nullptr;
    const long long id = std::strtoll(k.c_str(), &end, 10);
    HF2PTE_CHECK_OR_RETURN(!k.empty() && *end == '\0' && id >= 0 && id < (1 << 20) && v.is_string(), kInvalidInput,
                           "{}: bad id2label entry {}: {} ({})", json_label(where), k, v.dump(), where);
    by_id[id] = v.get<std::string>();
  }
  const int64_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  for (int64_t i = 0; i < n; ++i) out.push_back(by_id.count(i) ? by_id[i] : fmt::format("LABEL_{}", i));
  return out;
}

struct VitLayer {
  NormWeights before, after;
  LinearWeights q, k, v, o, up, down;
};

Result<VitLayer> load_vit_layer(BlockBuilder& b, const VitConfig& c, int64_t i) {
  const auto p = fmt::format("vit.encoder.layer.{}.", i);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  VitLayer w;
  HF2PTE_ASSIGN_OR_RETURN(w.before, b.norm_weights(p + "layernorm_before.weight", H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(w.q, b.linear_weights(p + "attention.attention.query", H, H, c.qkv_bias));
  HF2PTE_ASSIGN_OR_RETURN(w.k, b.linear_weights(p + "attention.attention.key", H, H, c.qkv_bias));
  HF2PTE_ASSIGN_OR_RETURN(w.v, b.linear_weights(p + "attention.attention.value", H, H, c.qkv_bias));
  HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(p + "attention.output.dense", H, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.after, b.norm_weights(p + "layernorm_after.weight", H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(w.up, b.linear_weights(p + "intermediate.dense", I, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.down, b.linear_weights(p + "output.dense", H, I, true));
  return w;
}

// x += o(attn(LN(x))); x += down(act(up(LN(x)))) on x [T, hidden], no mask.
Result<ValueId> vit_layer(BlockBuilder& b, const VitConfig& c, const VitLayer& w, int64_t T, ValueId x, int64_t i) {
  const auto p = fmt::format("layers.{}", i);
  const int64_t nh = c.num_attention_heads, hd = c.hidden_size / nh;
  const NormOptions ln{NormKind::kLayerNorm, c.layer_norm_eps};
  const IntList heads_first{1, 0, 2};
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.before, ln, p + ".layernorm_before"));
  ValueId qkv[3];
  const LinearWeights* proj[3] = {&w.q, &w.k, &w.v};
  const char* tag[3] = {"q", "k", "v"};
  for (int j = 0; j < 3; ++j) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId t, b.linear(h, *proj[j], fmt::format("{}.attn.{}_proj", p, tag[j])));
    HF2PTE_ASSIGN_OR_RETURN(t, b.op(OpId::ViewCopyOut, {t, IntList{T, nh, hd}}, fmt::format("{}.attn.{}_heads", p, tag[j])));
    HF2PTE_ASSIGN_OR_RETURN(qkv[j], b.op(OpId::PermuteCopyOut, {t, heads_first}, fmt::format("{}.attn.{}_t", p, tag[j])));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention,
                                          {qkv[0], qkv[1], qkv[2], graph::None{}, 0.0, false, 1.0 / std::sqrt(double(hd)), false},
                                          p + ".attn.sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.op(OpId::PermuteCopyOut, {a, heads_first}, p + ".attn.out_t"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.op(OpId::ViewCopyOut, {a, IntList{T, c.hidden_size}}, p + ".attn.merge"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.linear(a, w.o, p + ".attn.o_proj"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, a}, p + ".attn_residual"));
  HF2PTE_ASSIGN_OR_RETURN(h, b.norm(x, w.after, ln, p + ".layernorm_after"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId m, b.linear(h, w.up, p + ".mlp.up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(m, b.activation(m, c.hidden_act, p + ".mlp.act"));
  HF2PTE_ASSIGN_OR_RETURN(m, b.linear(m, w.down, p + ".mlp.down_proj"));
  return b.op(OpId::AddOut, {x, m}, p + ".mlp_residual");
}

/// The vision metadata every image program carries.
void set_vision_metadata(BuiltModel& out, const Checkpoint& ckpt, const std::vector<std::string>& label_list,
                         int64_t image_size, int64_t channels, const BuildOptions& opt) {
  auto& m = out.program.constant_methods;
  m["is_image_classifier"] = true;
  m["get_output_names"] = std::string("logits,last_hidden_state");
  m["get_image_size"] = image_size;
  m["get_num_channels"] = channels;
  m["get_num_labels"] = int64_t(label_list.size());
  m["get_id2label"] = nlohmann::json(label_list).dump();
  // The processor's settings, so `classify` needs nothing but the .pte.
  const std::string pre = ckpt.dir() + "/preprocessor_config.json";
  if (auto j = read_json_object_file(pre); j.is_ok()) m["get_preprocessor_config"] = j->dump();
  m["get_model_type"] = out.model_type;
  m["get_architecture"] = out.architecture;
  m["get_exporter_version"] = opt.exporter_version;
}

Result<BuiltModel> build_vit(Checkpoint& ckpt, const BuildOptions& opt) {
  const std::string where = ckpt.config_path();
  HF2PTE_ASSIGN_OR_RETURN(VitConfig c, parse_vit_config(ckpt.config(), where));
  HF2PTE_ASSIGN_OR_RETURN(auto label_list, labels(ckpt.config(), where));
  HF2PTE_CHECK_OR_RETURN(opt.dtype == ScalarType::kFloat, kNotSupported,
                         "--dtype {} is not supported for image models yet; expected fp32", scalar_type_name(opt.dtype));
  const int64_t H = c.hidden_size, P = c.patch_size, C = c.num_channels, side = c.image_size / P, Np = side * side;
  const int64_t T = Np + 1;
  BuiltModel out;
  out.model_type = "vit";
  out.architecture = "ViTForImageClassification";
  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype);
  ValueId pixels = g.add_input("pixel_values", TensorType{ScalarType::kFloat, {1, C, c.image_size, c.image_size}, {}});
  // Patches: conv2d [H, C, P, P] with stride P -> [1, H, side, side] -> [Np, H].
  HF2PTE_ASSIGN_OR_RETURN(ValueId pw, b.weight("vit.embeddings.patch_embeddings.projection.weight", {H, C, P, P}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId pb, b.weight("vit.embeddings.patch_embeddings.projection.bias", {H}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::ConvolutionOut, {pixels, pw, pb, IntList{P, P}, IntList{0, 0}, IntList{1, 1},
                                                                 false, IntList{0, 0}, int64_t{1}},
                                          "patch_embed"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ViewCopyOut, {x, IntList{H, Np}}, "patches"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::PermuteCopyOut, {x, IntList{1, 0}}, "patch_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId cls, b.weight("vit.embeddings.cls_token", {1, 1, H}));
  HF2PTE_ASSIGN_OR_RETURN(cls, b.op(OpId::ViewCopyOut, {cls, IntList{1, H}}, "cls"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::CatOut, {graph::TensorList{cls, x}, int64_t{0}}, "tokens"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId pos, b.weight("vit.embeddings.position_embeddings", {1, T, H}));
  HF2PTE_ASSIGN_OR_RETURN(pos, b.op(OpId::ViewCopyOut, {pos, IntList{T, H}}, "positions"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, pos}, "embed"));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    HF2PTE_ASSIGN_OR_RETURN(VitLayer w, load_vit_layer(b, c, i));
    HF2PTE_ASSIGN_OR_RETURN(x, vit_layer(b, c, w, T, x, i));
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights final_norm, b.norm_weights("vit.layernorm.weight", H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, final_norm, NormOptions{NormKind::kLayerNorm, c.layer_norm_eps}, "final_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hidden, b.op(OpId::ViewCopyOut, {x, IntList{1, T, H}}, "last_hidden_state"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId first, b.op(OpId::SliceCopyTensorOut, {x, int64_t{0}, SymInt(0), SymInt(1)}, "cls_out"));
  const int64_t L = int64_t(label_list.size());
  HF2PTE_CHECK_OR_RETURN(L > 0, kInvalidInput, "{}: an image classifier needs id2label ({})", json_label(where), where);
  HF2PTE_ASSIGN_OR_RETURN(LinearWeights head, b.linear_weights("classifier", L, H, true));
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(first, head, "logits"));
  g.set_outputs({logits, hidden});
  // ViTModel's pooler (not used by the classifier) may be stored.
  ckpt.mark_ignored_if([](std::string_view n) { return n.starts_with("vit.pooler."); });
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());
  out.program.methods.push_back(std::move(g));
  set_vision_metadata(out, ckpt, label_list, c.image_size, C, opt);
  return out;
}

constexpr std::array kVision = {
    VisionTraits{"vit", "ViTForImageClassification", &build_vit},
};

const VisionTraits* find_vision(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  auto it = cfg.find("model_type");
  if (it == cfg.end() || !it->is_string()) return nullptr;
  for (const auto& v : kVision) {
    if (v.model_type == it->get<std::string>()) return &v;
  }
  return nullptr;
}

}  // namespace

std::span<const VisionTraits> all_vision_architectures() { return kVision; }

bool is_vision_checkpoint(const Checkpoint& ckpt) { return find_vision(ckpt) != nullptr; }

Result<BuiltModel> build_vision(Checkpoint& ckpt, const BuildOptions& opt) {
  const VisionTraits* v = find_vision(ckpt);
  HF2PTE_CHECK_OR_RETURN(v != nullptr, kNotSupported, "not an image model ({})", ckpt.config_path());
  return v->build(ckpt, opt);
}

}  // namespace hf2pte::models
