// Image classifiers. ViT (ViTForImageClassification): patch embedding as a conv2d with stride =
// kernel = patch, the CLS token in front, learned positions, pre-LN encoder
// layers x += attn(LN(x)); x += mlp(LN(x)), final LN, classifier on CLS.
#include "models/vision.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
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

/// The labels of an image classifier's config (required), after checking the options apply.
Result<std::vector<std::string>> classifier_labels(const Checkpoint& ckpt, const BuildOptions& opt) {
  const std::string where = ckpt.config_path();
  HF2PTE_ASSIGN_OR_RETURN(auto label_list, labels(ckpt.config(), where));
  HF2PTE_CHECK_OR_RETURN(!label_list.empty(), kInvalidInput, "{}: an image classifier needs id2label ({})",
                         json_label(where), where);
  return label_list;
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
Result<ValueId> vit_layer(BlockBuilder& b, const VitConfig& c, const VitLayer& w, ValueId x, int64_t i) {
  const auto p = fmt::format("layers.{}", i);
  const int64_t nh = c.num_attention_heads, hd = c.hidden_size / nh;
  const NormOptions ln{NormKind::kLayerNorm, c.layer_norm_eps};
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.before, ln, p + ".layernorm_before"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.heads_of(h, w.q, nh, hd, p + ".attn.q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.heads_of(h, w.k, nh, hd, p + ".attn.k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.heads_of(h, w.v, nh, hd, p + ".attn.v"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention,
                                          {q, k, v, graph::None{}, 0.0, false, 1.0 / std::sqrt(double(hd)), false},
                                          p + ".attn.sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.merge_heads(a, p + ".attn"));
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
  HF2PTE_ASSIGN_OR_RETURN(auto label_list, classifier_labels(ckpt, opt));
  const int64_t H = c.hidden_size, P = c.patch_size, C = c.num_channels, side = c.image_size / P, Np = side * side;
  const int64_t T = Np + 1;
  BuiltModel out;
  out.model_type = "vit";
  out.architecture = "ViTForImageClassification";
  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype);
  ValueId pixels = g.add_input("pixel_values", TensorType{ScalarType::kFloat, {1, C, c.image_size, c.image_size}, {}});
  HF2PTE_ASSIGN_OR_RETURN(pixels, b.cast(pixels, opt.dtype, "pixel_values_cast"));
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
    HF2PTE_ASSIGN_OR_RETURN(x, vit_layer(b, c, w, x, i));
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights final_norm, b.norm_weights("vit.layernorm.weight", H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, final_norm, NormOptions{NormKind::kLayerNorm, c.layer_norm_eps}, "final_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hidden, b.op(OpId::ViewCopyOut, {x, IntList{1, T, H}}, "last_hidden_state"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId first, b.op(OpId::SliceCopyTensorOut, {x, int64_t{0}, SymInt(0), SymInt(1)}, "cls_out"));
  const int64_t L = int64_t(label_list.size());
  HF2PTE_ASSIGN_OR_RETURN(LinearWeights head, b.linear_weights("classifier", L, H, true));
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(first, head, "logits"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.cast(logits, ScalarType::kFloat, "logits_f32"));
  HF2PTE_ASSIGN_OR_RETURN(hidden, b.cast(hidden, ScalarType::kFloat, "last_hidden_state_f32"));
  g.set_outputs({logits, hidden});
  // ViTModel's pooler (not used by the classifier) may be stored.
  ckpt.mark_ignored_if([](std::string_view n) { return n.starts_with("vit.pooler."); });
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());
  out.program.methods.push_back(std::move(g));
  set_vision_metadata(out, ckpt, label_list, c.image_size, C, opt);
  return out;
}

// ---- ResNet (ResNetForImageClassification) ----
// embedder: conv 7x7/2 + BN + ReLU, max-pool 3x3/2 pad 1; stages of basic
// (3x3, 3x3) or bottleneck (1x1, 3x3, 1x1 with out/4 inside) layers,
// out = relu(layers(x) + shortcut(x)) with a 1x1/stride conv + BN shortcut
// where the shape changes; pooler = mean over H, W; classifier on it.
// Every BatchNorm is folded into its conv while the weights load
// (BlockBuilder::conv_bn_folded): the graph has no BatchNorm at all.

constexpr double kBatchNormEps = 1e-5;  // nn.BatchNorm2d's default; not a config key

struct ResNetConfig {
  int64_t num_channels = 3, embedding_size = 64;
  std::vector<int64_t> hidden_sizes{256, 512, 1024, 2048}, depths{3, 4, 6, 3};
  std::string layer_type = "bottleneck", hidden_act = "relu";
  bool downsample_in_first_stage = false, downsample_in_bottleneck = false;
};

Result<ResNetConfig> parse_resnet_config(const nlohmann::json& j, const std::string& where) {
  ResNetConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.num_channels, get_int_or(j, "num_channels", c.num_channels, where));
  HF2PTE_ASSIGN_OR_RETURN(c.embedding_size, get_int_or(j, "embedding_size", c.embedding_size, where));
  HF2PTE_ASSIGN_OR_RETURN(auto hs, get_optional_int_list(j, "hidden_sizes", where));
  HF2PTE_ASSIGN_OR_RETURN(auto ds, get_optional_int_list(j, "depths", where));
  if (hs) c.hidden_sizes = *hs;
  if (ds) c.depths = *ds;
  HF2PTE_ASSIGN_OR_RETURN(c.layer_type, get_string_or(j, "layer_type", c.layer_type, where));
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_act, get_string_or(j, "hidden_act", c.hidden_act, where));
  HF2PTE_ASSIGN_OR_RETURN(c.downsample_in_first_stage, get_bool_or(j, "downsample_in_first_stage", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.downsample_in_bottleneck, get_bool_or(j, "downsample_in_bottleneck", false, where));
  HF2PTE_CHECK_OR_RETURN(c.layer_type == "basic" || c.layer_type == "bottleneck", kInvalidInput,
                         "{}: layer_type '{}' is not a ResNet layer; expected \"basic\" or \"bottleneck\" ({})",
                         json_label(where), c.layer_type, where);
  HF2PTE_CHECK_OR_RETURN(c.hidden_act == "relu", kNotSupported,
                         "{}: activation '{}' is not supported for resnet; expected relu ({})", json_label(where),
                         c.hidden_act, where);
  HF2PTE_CHECK_OR_RETURN(!c.hidden_sizes.empty() && c.hidden_sizes.size() == c.depths.size() && c.hidden_sizes.size() <= 64,
                         kInvalidInput, "{}: hidden_sizes and depths must be non-empty lists of the same length ({})",
                         json_label(where), where);
  for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
    HF2PTE_CHECK_OR_RETURN(c.hidden_sizes[i] > 0 && c.hidden_sizes[i] <= 65536 && c.depths[i] >= 1 && c.depths[i] <= 1024,
                           kInvalidInput, "{}: stage {} has hidden size {} and depth {}; expected 1..65536 and 1..1024 ({})",
                           json_label(where), i, c.hidden_sizes[i], c.depths[i], where);
    HF2PTE_CHECK_OR_RETURN(c.layer_type == "basic" || c.hidden_sizes[i] % 4 == 0, kInvalidInput,
                           "{}: a bottleneck stage needs hidden size divisible by 4; got {} ({})", json_label(where),
                           c.hidden_sizes[i], where);
  }
  for (auto [key, v] : {std::pair{"num_channels", c.num_channels}, std::pair{"embedding_size", c.embedding_size}}) {
    HF2PTE_CHECK_OR_RETURN(v > 0 && v <= 65536, kInvalidInput, "{}: field '{}' out of range; expected 1..65536, got {} ({})",
                           json_label(where), key, v, where);
  }
  return c;
}

/// conv (k x k, stride, padding k / 2, no bias) + folded BN, then ReLU unless `relu` is false.
Result<ValueId> conv_bn(BlockBuilder& b, ValueId x, const std::string& prefix, int64_t in, int64_t out, int64_t k,
                        int64_t stride, bool relu, const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(LinearWeights w, b.conv_bn_folded(prefix + ".convolution", {out, in, k, k}, false,
                                                            prefix + ".normalization", kBatchNormEps));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ConvolutionOut, {x, w.weight, *w.bias, IntList{stride, stride}, IntList{k / 2, k / 2},
                                                         IntList{1, 1}, false, IntList{0, 0}, int64_t{1}},
                                  name));
  if (!relu) return x;
  return b.op(OpId::ClampOut, {x, 0.0, graph::None{}}, name + ".relu");
}

/// max_pool2d(3, stride 2, padding 1) as upstream's core ATen spells it:
/// max_pool2d_with_indices, whose indices nothing reads (the XNNPACK
/// partitioner makes it a MaxPooling2d; the portable kernel fills both).
Result<ValueId> max_pool_3x3_s2(BlockBuilder& b, ValueId x, const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, b.graph().add_node(OpId::MaxPool2dWithIndicesOut,
                                                        {x, IntList{3, 3}, IntList{2, 2}, IntList{1, 1}, IntList{1, 1}, false},
                                                        name));
  return outs[0];
}

Result<ValueId> resnet_layer(BlockBuilder& b, const ResNetConfig& c, ValueId x, const std::string& p, int64_t in,
                             int64_t out, int64_t stride, const std::string& name) {
  ValueId shortcut = x;
  if (in != out || stride != 1) {
    HF2PTE_ASSIGN_OR_RETURN(shortcut, conv_bn(b, x, p + ".shortcut", in, out, 1, stride, false, name + ".shortcut"));
  }
  ValueId h = x;
  if (c.layer_type == "basic") {
    HF2PTE_ASSIGN_OR_RETURN(h, conv_bn(b, h, p + ".layer.0", in, out, 3, stride, true, name + ".conv0"));
    HF2PTE_ASSIGN_OR_RETURN(h, conv_bn(b, h, p + ".layer.1", out, out, 3, 1, false, name + ".conv1"));
  } else {
    const int64_t r = out / 4;
    const int64_t s1 = c.downsample_in_bottleneck ? stride : 1, s3 = c.downsample_in_bottleneck ? 1 : stride;
    HF2PTE_ASSIGN_OR_RETURN(h, conv_bn(b, h, p + ".layer.0", in, r, 1, s1, true, name + ".conv0"));
    HF2PTE_ASSIGN_OR_RETURN(h, conv_bn(b, h, p + ".layer.1", r, r, 3, s3, true, name + ".conv1"));
    HF2PTE_ASSIGN_OR_RETURN(h, conv_bn(b, h, p + ".layer.2", r, out, 1, 1, false, name + ".conv2"));
  }
  HF2PTE_ASSIGN_OR_RETURN(h, b.op(OpId::AddOut, {h, shortcut}, name + ".residual"));
  return b.op(OpId::ClampOut, {h, 0.0, graph::None{}}, name + ".relu");
}

Result<BuiltModel> build_resnet(Checkpoint& ckpt, const BuildOptions& opt) {
  const std::string where = ckpt.config_path();
  HF2PTE_ASSIGN_OR_RETURN(ResNetConfig c, parse_resnet_config(ckpt.config(), where));
  HF2PTE_ASSIGN_OR_RETURN(auto label_list, classifier_labels(ckpt, opt));
  // The input size: the processor's crop (ResNet checkpoints carry no image_size), else 224.
  int64_t side = 224;
  if (auto pre = read_json_object_file(ckpt.dir() + "/preprocessor_config.json"); pre.is_ok()) {
    if (auto s = pre->find("size"); s != pre->end() && s->is_object()) {
      side = s->value("shortest_edge", s->value("height", side));
    }
    if (auto crop = pre->find("crop_size"); crop != pre->end() && crop->is_object()) side = crop->value("height", side);
  }
  if (auto v = ckpt.config().find("image_size"); v != ckpt.config().end() && v->is_number_integer()) side = v->get<int64_t>();
  HF2PTE_CHECK_OR_RETURN(side >= 32 && side <= 8192, kInvalidInput, "image size {} out of range; expected 32..8192 ({})",
                         side, where);
  BuiltModel out;
  out.model_type = "resnet";
  out.architecture = "ResNetForImageClassification";
  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype);
  // Fully convolutional: any height and width up to the processor's size (at least 224).
  const int64_t bound = std::max<int64_t>(side, 224);
  const SymInt height = g.add_dim("height", 1, bound), width = g.add_dim("width", 1, bound);
  ValueId x = g.add_input("pixel_values", TensorType{ScalarType::kFloat, {1, c.num_channels, height, width}, {}});
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, opt.dtype, "pixel_values_cast"));
  HF2PTE_ASSIGN_OR_RETURN(x, conv_bn(b, x, "resnet.embedder.embedder", c.num_channels, c.embedding_size, 7, 2, true, "embedder"));
  HF2PTE_ASSIGN_OR_RETURN(x, max_pool_3x3_s2(b, x, "embedder.pool"));
  int64_t in = c.embedding_size;
  for (size_t st = 0; st < c.hidden_sizes.size(); ++st) {
    const int64_t stage_stride = st > 0 || c.downsample_in_first_stage ? 2 : 1;
    for (int64_t l = 0; l < c.depths[st]; ++l) {
      const auto p = fmt::format("resnet.encoder.stages.{}.layers.{}", st, l);
      HF2PTE_ASSIGN_OR_RETURN(x, resnet_layer(b, c, x, p, in, c.hidden_sizes[st], l == 0 ? stage_stride : 1,
                                              fmt::format("stages.{}.{}", st, l)));
      in = c.hidden_sizes[st];
    }
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId pooled, b.op(OpId::MeanOut, {x, IntList{2, 3}, true, graph::None{}}, "pooler_output"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId flat, b.op(OpId::ViewCopyOut, {pooled, IntList{1, in}}, "pooled"));
  const int64_t L = int64_t(label_list.size());
  HF2PTE_ASSIGN_OR_RETURN(LinearWeights head, b.linear_weights("classifier.1", L, in, true));
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(flat, head, "logits"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.cast(logits, ScalarType::kFloat, "logits_f32"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, ScalarType::kFloat, "last_hidden_state_f32"));
  HF2PTE_ASSIGN_OR_RETURN(pooled, b.cast(pooled, ScalarType::kFloat, "pooler_output_f32"));
  g.set_outputs({logits, x, pooled});
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());
  out.program.methods.push_back(std::move(g));
  set_vision_metadata(out, ckpt, label_list, side, c.num_channels, opt);
  out.program.constant_methods["get_output_names"] = std::string("logits,last_hidden_state,pooler_output");
  return out;
}

constexpr std::array kVision = {
    VisionTraits{"vit", "ViTForImageClassification", &build_vit},
    VisionTraits{"resnet", "ResNetForImageClassification", &build_resnet},
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
