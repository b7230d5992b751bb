#include "models/rope.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string_view>

#include <fmt/format.h>

namespace hf2pte::models {

namespace {

using nlohmann::json;

/// One rope_scaling dict being read: its type name for errors.
struct Scaling {
  const json& s;
  std::string type;

  bool given(const char* key) const {
    auto it = s.find(key);
    return it != s.end() && !it->is_null();
  }
  Result<double> number(const char* key) const {
    auto it = s.find(key);
    if (it == s.end() || !it->is_number()) {
      return make_error(ErrorCode::kInvalidInput, "config.json: rope_scaling type '{}' needs a number '{}'; got {}",
                        type, key, it == s.end() ? std::string("nothing") : it->dump());
    }
    return it->get<double>();
  }
  /// Absent or null: nullopt (HF's rope_scaling.get(key)).
  Result<std::optional<double>> optional_number(const char* key) const {
    if (!given(key)) return std::optional<double>{};
    HF2PTE_ASSIGN_OR_RETURN(double v, number(key));
    return std::optional<double>{v};
  }
  Result<std::vector<double>> numbers(const char* key, size_t expected) const {
    auto it = s.find(key);
    bool ok = it != s.end() && it->is_array() && it->size() == expected;
    for (size_t i = 0; ok && i < expected; ++i) ok = (*it)[i].is_number();
    if (!ok) {
      return make_error(ErrorCode::kInvalidInput,
                        "config.json: rope_scaling type '{}' needs '{}' as a list of {} numbers (rotary_dim / 2); "
                        "got {}",
                        type, key, expected, it == s.end() ? std::string("nothing") : it->dump());
    }
    return it->get<std::vector<double>>();
  }
};

std::vector<double> plain_inv_freq(int64_t d, double theta) {
  std::vector<double> inv(static_cast<size_t>(d / 2));
  for (int64_t j = 0; j < d / 2; ++j) inv[size_t(j)] = std::pow(theta, -double(2 * j) / double(d));
  return inv;
}

using Compute = Result<RopeFrequencies> (*)(const RopeSpec&, const Scaling&, int64_t max_seq_len);

Result<RopeFrequencies> compute_default(const RopeSpec& spec, const Scaling&, int64_t) {
  return RopeFrequencies{plain_inv_freq(spec.rotary_dim, spec.theta), 1.0};
}

// Positions divided by factor == inv_freq divided by factor.
Result<RopeFrequencies> compute_linear(const RopeSpec& spec, const Scaling& sc, int64_t) {
  HF2PTE_ASSIGN_OR_RETURN(double factor, sc.number("factor"));
  auto inv = plain_inv_freq(spec.rotary_dim, spec.theta);
  for (double& f : inv) f /= factor;
  return RopeFrequencies{inv, 1.0};
}

// Dynamic NTK: HF rescales the base for the current length L once L exceeds
// max_position_embeddings: base * (factor * L / max - (factor - 1))^(d / (d - 2)).
// We evaluate it at L = max_seq_len (plain RoPE when that fits).
Result<RopeFrequencies> compute_dynamic(const RopeSpec& spec, const Scaling& sc, int64_t max_seq_len) {
  HF2PTE_ASSIGN_OR_RETURN(double factor, sc.number("factor"));
  const double d = double(spec.rotary_dim), max_pos = double(spec.max_position_embeddings);
  const double len = std::max(double(max_seq_len), max_pos);
  HF2PTE_CHECK_OR_RETURN(spec.rotary_dim > 2, kInvalidInput,
                         "config.json: rope_scaling type 'dynamic' needs rotary dims > 2; got {}", spec.rotary_dim);
  const double base = spec.theta * std::pow(factor * len / max_pos - (factor - 1), d / (d - 2));
  return RopeFrequencies{plain_inv_freq(spec.rotary_dim, base), 1.0};
}

// YaRN (transformers' _compute_yarn_parameters): a linear ramp between
// extrapolated (plain) and interpolated (plain / factor) frequencies over the
// dims that rotate between beta_slow and beta_fast times in the original context.
Result<RopeFrequencies> compute_yarn(const RopeSpec& spec, const Scaling& sc, int64_t) {
  HF2PTE_ASSIGN_OR_RETURN(auto given_factor, sc.optional_number("factor"));
  HF2PTE_ASSIGN_OR_RETURN(auto attention_factor, sc.optional_number("attention_factor"));
  HF2PTE_ASSIGN_OR_RETURN(auto mscale, sc.optional_number("mscale"));
  HF2PTE_ASSIGN_OR_RETURN(auto mscale_all_dim, sc.optional_number("mscale_all_dim"));
  HF2PTE_ASSIGN_OR_RETURN(auto original, sc.optional_number("original_max_position_embeddings"));
  HF2PTE_ASSIGN_OR_RETURN(auto beta_fast, sc.optional_number("beta_fast"));
  HF2PTE_ASSIGN_OR_RETURN(auto beta_slow, sc.optional_number("beta_slow"));
  bool truncate = true;
  if (sc.given("truncate")) {
    const json& t = sc.s["truncate"];
    HF2PTE_CHECK_OR_RETURN(t.is_boolean(), kInvalidInput,
                           "config.json: rope_scaling type 'yarn' needs 'truncate' as a boolean; got {}", t.dump());
    truncate = t.get<bool>();
  }
  // HF: `x or default`, so 0 means the default too.
  const double ctx = original.value_or(0) != 0 ? *original : double(spec.max_position_embeddings);
  // transformers 5.x: a null factor is max_position_embeddings / original (DeepSeek-V3 style).
  if (!given_factor && !original) HF2PTE_RETURN_IF_ERROR(sc.number("factor").status());
  const double factor = given_factor ? *given_factor : double(spec.max_position_embeddings) / ctx;
  const double fast = beta_fast.value_or(0) != 0 ? *beta_fast : 32.0;
  const double slow = beta_slow.value_or(0) != 0 ? *beta_slow : 1.0;
  auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  double attn = 0;
  if (attention_factor) {
    attn = *attention_factor;
  } else if (mscale.value_or(0) != 0 && mscale_all_dim.value_or(0) != 0) {
    attn = get_mscale(factor, *mscale) / get_mscale(factor, *mscale_all_dim);
  } else {
    attn = get_mscale(factor, 1.0);
  }
  const double d = double(spec.rotary_dim);
  auto correction_dim = [&](double rotations) {
    return d * std::log(ctx / (rotations * 2 * std::numbers::pi)) / (2 * std::log(spec.theta));
  };
  double low = correction_dim(fast), high = correction_dim(slow);
  if (truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, d - 1);
  if (low == high) high += 0.001;  // HF: prevent a zero-width ramp
  auto inv = plain_inv_freq(spec.rotary_dim, spec.theta);
  for (size_t j = 0; j < inv.size(); ++j) {
    const double ramp = std::clamp((double(j) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
    inv[j] = inv[j] / factor * (1 - extrapolation) + inv[j] * extrapolation;
  }
  return RopeFrequencies{inv, attn};
}

// LongRoPE (Phi-3): per-dim divisors, short_factor within the original context
// and long_factor beyond it; cos/sin times sqrt(1 + ln(factor) / ln(original)).
Result<RopeFrequencies> compute_longrope(const RopeSpec& spec, const Scaling& sc, int64_t max_seq_len) {
  const size_t half = size_t(spec.rotary_dim / 2);
  HF2PTE_ASSIGN_OR_RETURN(auto short_factor, sc.numbers("short_factor", half));
  HF2PTE_ASSIGN_OR_RETURN(auto long_factor, sc.numbers("long_factor", half));
  HF2PTE_ASSIGN_OR_RETURN(auto attention_factor, sc.optional_number("attention_factor"));
  HF2PTE_ASSIGN_OR_RETURN(auto dict_original, sc.optional_number("original_max_position_embeddings"));
  const double max_pos = double(spec.max_position_embeddings);
  double original = max_pos, factor = 0;
  if (spec.original_max_position_embeddings || dict_original) {
    // Phi-3 keeps the pretrained context next to the extended one; the ratio is the factor.
    original = spec.original_max_position_embeddings ? double(*spec.original_max_position_embeddings) : *dict_original;
    HF2PTE_CHECK_OR_RETURN(original > 0, kInvalidInput,
                           "config.json: original_max_position_embeddings must be positive; got {}", original);
    factor = max_pos / original;
  } else if (!attention_factor) {
    HF2PTE_ASSIGN_OR_RETURN(factor, sc.number("factor"));
  }
  double attn = 1.0;
  if (attention_factor) {
    attn = *attention_factor;
  } else if (factor > 1) {
    attn = std::sqrt(1 + std::log(factor) / std::log(original));
  }
  const auto& ext = double(max_seq_len) > original ? long_factor : short_factor;
  auto inv = plain_inv_freq(spec.rotary_dim, spec.theta);
  for (size_t j = 0; j < half; ++j) inv[j] /= ext[j];
  return RopeFrequencies{inv, attn};
}

Result<RopeFrequencies> compute_llama3(const RopeSpec& spec, const Scaling& sc, int64_t) {
  HF2PTE_ASSIGN_OR_RETURN(double factor, sc.number("factor"));
  HF2PTE_ASSIGN_OR_RETURN(double low, sc.number("low_freq_factor"));
  HF2PTE_ASSIGN_OR_RETURN(double high, sc.number("high_freq_factor"));
  HF2PTE_ASSIGN_OR_RETURN(double old_ctx, sc.number("original_max_position_embeddings"));
  HF2PTE_CHECK_OR_RETURN(high > low && factor > 0, kInvalidInput,
                         "config.json: rope_scaling llama3 needs high_freq_factor > low_freq_factor and factor > 0; "
                         "got {}",
                         sc.s.dump());
  auto inv = plain_inv_freq(spec.rotary_dim, spec.theta);
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
  return RopeFrequencies{inv, 1.0};
}

/// Every rope type: its name, the fields it reads (besides the common ones) and its math.
struct RopeType {
  std::string_view name;
  std::array<std::string_view, 8> fields;
  Compute compute;
};

constexpr RopeType kRopeTypes[] = {
    // HF's default / linear / dynamic math never reads original_max_position_embeddings.
    {"default", {"original_max_position_embeddings"}, compute_default},
    {"linear", {"factor", "original_max_position_embeddings"}, compute_linear},
    {"dynamic", {"factor", "original_max_position_embeddings"}, compute_dynamic},
    {"yarn",
     {"factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
      "original_max_position_embeddings", "truncate"},
     compute_yarn},
    {"longrope", {"short_factor", "long_factor", "factor", "attention_factor", "original_max_position_embeddings"},
     compute_longrope},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, compute_llama3},
};

// Keys every dict may carry: the type (4.x "type", newer "rope_type") and the
// 5.x rope_parameters copies of rope_theta / partial_rotary_factor (read by config.cpp).
constexpr std::string_view kCommonFields[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};

}  // namespace

Result<RopeFrequencies> rope_frequencies(const RopeSpec& spec, int64_t max_seq_len) {
  if (spec.scaling.is_null()) return RopeFrequencies{plain_inv_freq(spec.rotary_dim, spec.theta), 1.0};
  HF2PTE_CHECK_OR_RETURN(spec.scaling.is_object(), kInvalidInput, "config.json: rope_scaling must be an object; got {}",
                         spec.scaling.dump());
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    auto it = spec.scaling.find(key);
    if (it != spec.scaling.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  const RopeType* rt = nullptr;
  for (const auto& t : kRopeTypes) {
    if (t.name == type) rt = &t;
  }
  if (rt == nullptr) {
    return make_error(ErrorCode::kNotSupported,
                      "config.json: rope_scaling type '{}' is not supported; expected default, linear, dynamic, yarn, "
                      "longrope or llama3",
                      type.empty() ? spec.scaling.dump() : type);
  }
  for (const auto& [key, value] : spec.scaling.items()) {
    const bool known = std::find(std::begin(kCommonFields), std::end(kCommonFields), key) != std::end(kCommonFields) ||
                       std::find(rt->fields.begin(), rt->fields.end(), key) != rt->fields.end();
    HF2PTE_CHECK_OR_RETURN(known, kNotSupported,
                           "config.json: rope_scaling type '{}' does not support field '{}' (its math would be "
                           "ignored)",
                           type, key);
  }
  return rt->compute(spec, Scaling{spec.scaling, type}, max_seq_len);
}

Result<std::vector<double>> rope_inv_freq(const RopeSpec& spec, int64_t max_seq_len) {
  HF2PTE_ASSIGN_OR_RETURN(RopeFrequencies f, rope_frequencies(spec, max_seq_len));
  return std::move(f.inv_freq);
}

Result<RopeTables> rope_tables(const RopeSpec& spec, int64_t max_seq_len, ScalarType dtype) {
  HF2PTE_ASSIGN_OR_RETURN(RopeFrequencies f, rope_frequencies(spec, max_seq_len));
  const auto& inv = f.inv_freq;
  const int64_t d = spec.rotary_dim, half = d / 2;
  // In double, rounded once to f32 (HF computes cos/sin in f32, then casts
  // them to the activation dtype: a 16-bit table rounds through f32 as well).
  std::vector<double> cos_t(static_cast<size_t>(max_seq_len * d)), sin_t(cos_t.size());
  for (int64_t p = 0; p < max_seq_len; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      const double angle = double(p) * inv[size_t(j % half)];
      cos_t[size_t(p * d + j)] = double(float(std::cos(angle) * f.attention_factor));
      sin_t[size_t(p * d + j)] = double(float(std::sin(angle) * f.attention_factor));
    }
  }
  auto origin = fmt::format("rope theta={} dim={}{}", spec.theta, d, spec.scaling.is_null() ? "" : " scaled");
  return RopeTables{graph::ConstantData::from_values(dtype, {max_seq_len, d}, cos_t, origin + " cos"),
                    graph::ConstantData::from_values(dtype, {max_seq_len, d}, sin_t, origin + " sin")};
}

}  // namespace hf2pte::models
