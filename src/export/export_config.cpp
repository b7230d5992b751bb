#include "export/export_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace hf2pte::exp {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kPortable: return "portable";
    case Backend::kXnnpack: return "xnnpack";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

Result<Backend> parse_backend(const std::string& s) {
  if (s == "portable") return Backend::kPortable;
  if (s == "xnnpack") return Backend::kXnnpack;
  if (s == "cuda") return Backend::kCuda;
  return make_error(ErrorCode::kInvalidArgument, "unknown backend '{}'; expected portable, xnnpack or cuda", s);
}

Result<ScalarType> parse_dtype(const std::string& s) {
  if (s == "fp32") return ScalarType::kFloat;
  if (s == "fp16") return ScalarType::kHalf;
  if (s == "bf16") return ScalarType::kBFloat16;
  return make_error(ErrorCode::kInvalidArgument, "unknown dtype '{}'; expected fp32, fp16 or bf16", s);
}

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::kHalf: return "fp16";
    case ScalarType::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

std::optional<std::string> resolve_backend_dtype(ExportConfig& c) {
  if (c.backend != Backend::kCuda || c.dtype == ScalarType::kBFloat16) return std::nullopt;
  const char* torch_name = c.dtype == ScalarType::kHalf ? "torch.float16" : "torch.float32";
  c.dtype = ScalarType::kBFloat16;
  return fmt::format("ExecuTorch CUDA backend requires bfloat16; upcasting model from {}.", torch_name);
}

Result<ScalarType> parse_linear_weights(const std::string& s) {
  if (s == "fp32") return ScalarType::kFloat;
  if (s == "fp16") return ScalarType::kHalf;
  return make_error(ErrorCode::kInvalidArgument, "unknown linear weight type '{}'; expected fp32 or fp16", s);
}

const char* attention_span_name(AttentionSpan s) { return s == AttentionSpan::kWritten ? "written" : "full"; }

Result<AttentionSpan> parse_attention_span(const std::string& s) {
  if (s == "full") return AttentionSpan::kFull;
  if (s == "written") return AttentionSpan::kWritten;
  return make_error(ErrorCode::kInvalidArgument, "unknown attention span '{}'; expected full or written", s);
}

Result<bool> parse_logits(const std::string& s) {
  if (s == "all") return false;
  if (s == "last") return true;
  return make_error(ErrorCode::kInvalidArgument, "unknown logits choice '{}'; expected all or last", s);
}

nlohmann::ordered_json config_to_json(const ExportConfig& c) {
  nlohmann::ordered_json j;
  j["backend"] = backend_name(c.backend);
  j["dtype"] = dtype_name(c.dtype);
  j["max_seq_len"] = c.max_seq_len ? nlohmann::ordered_json(*c.max_seq_len) : nlohmann::ordered_json(nullptr);
  j["dynamic_shapes"] = nlohmann::ordered_json::object();
  for (const auto& [name, b] : c.dims) {  // std::map: sorted, so the text is reproducible
    j["dynamic_shapes"][name] = {{"min", b.min}, {"max", b.max ? nlohmann::ordered_json(*b.max) : nlohmann::ordered_json(nullptr)}};
  }
  j["alloc_graph_input"] = c.alloc_graph_input;
  j["alloc_graph_output"] = c.alloc_graph_output;
  j["alloc_mutable_buffers"] = c.alloc_mutable_buffers;
  if (c.attention_span) j["attention_span"] = attention_span_name(*c.attention_span);
  j["use_kv_cache"] = c.use_kv_cache;
  if (c.use_custom_sdpa) j["use_custom_sdpa"] = true;  // programs without it keep the keys they always had
  if (c.last_logits) j["logits"] = "last";               // likewise
  j["linear_weights"] = dtype_name(c.linear_weights);
  if (c.quant.active()) {  // float programs keep the keys they always had
    j["qlinear"] = c.quant.qlinear;
    j["qlinear_group_size"] = c.quant.qlinear_group_size;
    j["qembedding"] = c.quant.qembedding;
    j["qembedding_group_size"] = c.quant.qembedding_group_size;
    j["qlinear_skip"] = c.quant.qlinear_skip;
    j["qparams"] = c.quant.qparams;
  }
  return j;
}

Status check_quant_config(const QuantConfig& q) {
  static const std::vector<std::string> kLinear = {"", "8da4w", "8da8w", "4w", "8w", "8da4w,8da8w"};
  static const std::vector<std::string> kEmbedding = {"", "8w", "4w"};
  if (std::find(kLinear.begin(), kLinear.end(), q.qlinear) == kLinear.end()) {
    return make_error(ErrorCode::kInvalidArgument, "unknown --qlinear recipe '{}'; expected 8da4w, 8da8w, 4w, 8w or 8da4w,8da8w",
                      q.qlinear);
  }
  if (std::find(kEmbedding.begin(), kEmbedding.end(), q.qembedding) == kEmbedding.end()) {
    return make_error(ErrorCode::kInvalidArgument, "unknown --qembedding recipe '{}'; expected 8w or 4w", q.qembedding);
  }
  if (q.qparams != "hqq" && q.qparams != "affine") {
    return make_error(ErrorCode::kInvalidArgument, "unknown --qparams '{}'; expected hqq or affine", q.qparams);
  }
  for (auto [flag, g] : {std::pair{"--qlinear-group-size", q.qlinear_group_size},
                         std::pair{"--qembedding-group-size", q.qembedding_group_size}}) {
    if (g < 0 || g % 2 != 0 || g > (int64_t(1) << 20)) {
      return make_error(ErrorCode::kInvalidArgument, "{} {}: expected 0 (per channel) or a positive even number", flag, g);
    }
  }
  if (!q.active() && !q.qlinear_skip.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "--qlinear-skip needs --qlinear");
  }
  return Status::ok();
}

namespace {

Status expect_type(const nlohmann::json& v, bool ok, const char* key, const char* expected, const std::string& where) {
  if (ok) return Status::ok();
  return make_error(ErrorCode::kInvalidArgument, "export config: field '{}' has wrong type; expected {}, got {} ({})", key,
                    expected, v.type_name(), where);
}

}  // namespace

Result<ExportConfig> config_from_json(const nlohmann::json& j, const std::string& where) {
  ExportConfig c;
  if (!j.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "export config: expected a JSON object, got {} ({})", j.type_name(), where);
  }
  for (const auto& [key, v] : j.items()) {
    if (key == "backend" || key == "dtype") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_string(), key.c_str(), "string", where));
      if (key == "backend") {
        auto b = parse_backend(v.get<std::string>());
        if (!b) return b.status().with_context(where);
        c.backend = *b;
      } else {
        auto d = parse_dtype(v.get<std::string>());
        if (!d) return d.status().with_context(where);
        c.dtype = *d;
      }
    } else if (key == "max_seq_len") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_null() || v.is_number_integer(), "max_seq_len", "integer or null", where));
      if (v.is_number_integer()) c.max_seq_len = v.get<int64_t>();
    } else if (key == "alloc_graph_input" || key == "alloc_graph_output" || key == "alloc_mutable_buffers") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_boolean(), key.c_str(), "boolean", where));
      bool b = v.get<bool>();
      (key == "alloc_graph_input" ? c.alloc_graph_input : key == "alloc_graph_output" ? c.alloc_graph_output : c.alloc_mutable_buffers) = b;
    } else if (key == "use_kv_cache") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_boolean(), "use_kv_cache", "boolean", where));
      c.use_kv_cache = v.get<bool>();
    } else if (key == "use_custom_sdpa") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_boolean(), "use_custom_sdpa", "boolean", where));
      c.use_custom_sdpa = v.get<bool>();
    } else if (key == "logits") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_string(), "logits", "string", where));
      auto last = parse_logits(v.get<std::string>());
      if (!last) return last.status().with_context(where);
      c.last_logits = *last;
    } else if (key == "attention_span") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_string(), "attention_span", "string", where));
      auto s = parse_attention_span(v.get<std::string>());
      if (!s) return s.status().with_context(where);
      c.attention_span = *s;
    } else if (key == "linear_weights") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_string(), "linear_weights", "string", where));
      auto d = parse_linear_weights(v.get<std::string>());
      if (!d) return d.status().with_context(where);
      c.linear_weights = *d;
    } else if (key == "qlinear" || key == "qembedding" || key == "qparams") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_string(), key.c_str(), "string", where));
      (key == "qlinear" ? c.quant.qlinear : key == "qembedding" ? c.quant.qembedding : c.quant.qparams) = v.get<std::string>();
    } else if (key == "qlinear_group_size" || key == "qembedding_group_size") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_number_integer(), key.c_str(), "integer", where));
      (key == "qlinear_group_size" ? c.quant.qlinear_group_size : c.quant.qembedding_group_size) = v.get<int64_t>();
    } else if (key == "qlinear_skip") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_array(), "qlinear_skip", "array of strings", where));
      c.quant.qlinear_skip.clear();
      for (const auto& e : v) {
        HF2PTE_RETURN_IF_ERROR(expect_type(e, e.is_string(), "qlinear_skip[]", "string", where));
        c.quant.qlinear_skip.push_back(e.get<std::string>());
      }
    } else if (key == "dynamic_shapes") {
      HF2PTE_RETURN_IF_ERROR(expect_type(v, v.is_object(), "dynamic_shapes", "object", where));
      for (const auto& [name, range] : v.items()) {
        HF2PTE_RETURN_IF_ERROR(expect_type(range, range.is_object(), name.c_str(), "object {min, max}", where));
        DimBound b;
        for (const auto& [k, x] : range.items()) {
          if (k == "min") {
            HF2PTE_RETURN_IF_ERROR(expect_type(x, x.is_number_integer(), "min", "integer", where));
            b.min = x.get<int64_t>();
          } else if (k == "max") {
            HF2PTE_RETURN_IF_ERROR(expect_type(x, x.is_null() || x.is_number_integer(), "max", "integer or null", where));
            if (x.is_number_integer()) b.max = x.get<int64_t>();
          } else {
            return make_error(ErrorCode::kInvalidArgument, "export config: unknown field 'dynamic_shapes.{}.{}' ({})", name, k, where);
          }
        }
        if (b.min < 1 || (b.max && *b.max < b.min)) {
          return make_error(ErrorCode::kInvalidArgument, "export config: dim {} has an empty range ({})", name, where);
        }
        c.dims[name] = b;
      }
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        "export config: unknown field '{}'; expected backend, dtype, max_seq_len, dynamic_shapes, "
                        "alloc_graph_input, alloc_graph_output, alloc_mutable_buffers, attention_span, use_kv_cache, "
                        "use_custom_sdpa, logits, "
                        "linear_weights, qlinear, qlinear_group_size, qembedding, qembedding_group_size, qlinear_skip or "
                        "qparams ({})", key,
                        where);
    }
  }
  if (auto st = check_quant_config(c.quant); !st.ok()) return st.with_context(where);
  return c;
}

Result<ExportConfig> load_config_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::kIoError, "cannot read export config ({})", path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return make_error(ErrorCode::kInvalidArgument, "export config is not valid JSON ({})", path);
  return config_from_json(j, path);
}

}  // namespace hf2pte::exp
