#include "models/rope.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include <fmt/format.h>

namespace hf2pte::models {

namespace {

Result<double> scaling_number(const nlohmann::json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number()) {
    return make_error(ErrorCode::kInvalidInput, "config.json: rope_scaling needs a number '{}'; got {}", key,
                      it == s.end() ? std::string("nothing") : it->dump());
  }
  return it->get<double>();
}

}  // namespace

Result<std::vector<double>> rope_inv_freq(const RopeSpec& spec, int64_t max_seq_len) {
  const int64_t d = spec.rotary_dim;
  std::vector<double> inv(size_t(d / 2));
  for (int64_t j = 0; j < d / 2; ++j) inv[size_t(j)] = std::pow(spec.theta, -double(2 * j) / double(d));
  if (spec.scaling.is_null()) return inv;

  // Older files say "type", newer ones "rope_type".
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    auto it = spec.scaling.find(key);
    if (it != spec.scaling.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  if (type == "default") return inv;
  if (type == "linear") {
    // Positions divided by factor == inv_freq divided by factor.
    HF2PTE_ASSIGN_OR_RETURN(double factor, scaling_number(spec.scaling, "factor"));
    for (double& f : inv) f /= factor;
    return inv;
  }
  if (type == "dynamic") {
    // Dynamic NTK only rescales once a sequence exceeds max_position_embeddings;
    // within that context it is plain RoPE, so exact only there.
    HF2PTE_CHECK_OR_RETURN(max_seq_len <= spec.max_position_embeddings, kNotSupported,
                           "rope_scaling type 'dynamic' beyond max_position_embeddings is not supported; expected "
                           "--max-seq-len <= {}, got {}",
                           spec.max_position_embeddings, max_seq_len);
    return inv;
  }
  if (type == "llama3") {
    HF2PTE_ASSIGN_OR_RETURN(double factor, scaling_number(spec.scaling, "factor"));
    HF2PTE_ASSIGN_OR_RETURN(double low, scaling_number(spec.scaling, "low_freq_factor"));
    HF2PTE_ASSIGN_OR_RETURN(double high, scaling_number(spec.scaling, "high_freq_factor"));
    HF2PTE_ASSIGN_OR_RETURN(double old_ctx, scaling_number(spec.scaling, "original_max_position_embeddings"));
    HF2PTE_CHECK_OR_RETURN(high > low && factor > 0, kInvalidInput,
                           "config.json: rope_scaling llama3 needs high_freq_factor > low_freq_factor and factor > 0; "
                           "got {}",
                           spec.scaling.dump());
    const double low_wl = old_ctx / low, high_wl = old_ctx / high;
    for (double& f : inv) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen < high_wl) continue;  // high frequencies: unchanged
      if (wavelen > low_wl) {
        f /= factor;  // low frequencies: scaled
        continue;
      }
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
    return inv;
  }
  return make_error(ErrorCode::kNotSupported,
                    "config.json: rope_scaling type '{}' is not supported; expected default, linear, dynamic or llama3",
                    type.empty() ? spec.scaling.dump() : type);
}

Result<RopeTables> rope_tables(const RopeSpec& spec, int64_t max_seq_len) {
  HF2PTE_ASSIGN_OR_RETURN(std::vector<double> inv, rope_inv_freq(spec, max_seq_len));
  const int64_t d = spec.rotary_dim, half = d / 2;
  std::vector<float> cos_t(size_t(max_seq_len * d)), sin_t(cos_t.size());
  for (int64_t p = 0; p < max_seq_len; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      const double angle = double(p) * inv[size_t(j % half)];
      cos_t[size_t(p * d + j)] = float(std::cos(angle));
      sin_t[size_t(p * d + j)] = float(std::sin(angle));
    }
  }
  auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  auto origin = fmt::format("rope theta={} dim={}{}", spec.theta, d, spec.scaling.is_null() ? "" : " scaled");
  return RopeTables{graph::ConstantData::from_bytes(ScalarType::kFloat, {max_seq_len, d}, bytes(cos_t), origin + " cos"),
                    graph::ConstantData::from_bytes(ScalarType::kFloat, {max_seq_len, d}, bytes(sin_t), origin + " sin")};
}

}  // namespace hf2pte::models
