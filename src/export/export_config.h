// ExportConfig: how a program is made (mirrors transformers' ExecutorchConfig).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte::exp {

enum class Backend { kPortable, kXnnpack, kCuda };

const char* backend_name(Backend b);
Result<Backend> parse_backend(const std::string& s);
/// "fp32" | "fp16" | "bf16" <-> ScalarType.
Result<ScalarType> parse_dtype(const std::string& s);
/// "fp32" | "fp16" (--linear-weights).
Result<ScalarType> parse_linear_weights(const std::string& s);
const char* dtype_name(ScalarType t);

/// Which KV-cache positions a decoder layer attends over (docs/pipeline.md,
/// "Attention span"): kFull = all max_seq_len (masked), kWritten = [0, end) with
/// end = max(cache_position) + 1, a data-dependent width.
enum class AttentionSpan { kFull, kWritten };
const char* attention_span_name(AttentionSpan s);
/// "full" | "written".
Result<AttentionSpan> parse_attention_span(const std::string& s);

/// "all" (false) | "last" (true): --logits.
Result<bool> parse_logits(const std::string& s);

struct DimBound {
  int64_t min = 1;
  std::optional<int64_t> max;  ///< nullopt: unbounded ("seq=1:"), capped by the program fixes
};

/// The quantization recipe (docs/quantization.md), named as optimum-executorch
/// names it. Empty recipes mean float.
struct QuantConfig {
  std::string qlinear;                ///< "", "8da4w", "8da8w", "4w", "8w" or "8da4w,8da8w"
  int64_t qlinear_group_size = 32;    ///< along in_features; 0 = per channel
  std::string qembedding;             ///< "", "8w" or "4w"
  int64_t qembedding_group_size = 0;  ///< 0 = per row
  std::vector<std::string> qlinear_skip;  ///< layers kept float (substring, or a glob with * ? [)
  std::string qparams = "hqq";        ///< "hqq" (optimum-executorch's default) or "affine"
  bool active() const { return !qlinear.empty() || !qembedding.empty(); }
};
/// Checks names and sizes; errors name the flag.
Status check_quant_config(const QuantConfig& q);

struct ExportConfig {
  Backend backend = Backend::kXnnpack;
  ScalarType dtype = ScalarType::kFloat;
  std::optional<int64_t> max_seq_len;
  bool alloc_graph_input = true;
  bool alloc_graph_output = true;
  bool alloc_mutable_buffers = true;
  /// Unset: written for decoders that attend over a KV cache on the portable
  /// and xnnpack backends, full elsewhere (docs/decisions.md, "Attention over
  /// the written cache"); the export records the span it used.
  std::optional<AttentionSpan> attention_span;
  /// Decoders: false = no KV cache (--no-kv-cache): forward(input_ids[1, S]) ->
  /// logits[1, S, V] over positions 0..S-1, every call independent.
  bool use_kv_cache = true;
  /// Decoders: upstream's llama::update_cache / llama::custom_sdpa over
  /// [1, max_seq_len, kv_heads, head_dim] caches, attention reading only the
  /// written rows in place (optimum-executorch's --use_custom_sdpa with its
  /// custom KV cache). The upstream runtime needs extension/llm/custom_ops.
  bool use_custom_sdpa = false;
  /// Decoders: forward returns the logits of the call's last position only,
  /// [1, 1, V], instead of [1, S, V] (--logits last; upstream's llama export
  /// without generate_full_logits). The lm_head then runs on one row per
  /// prefill and the planned logits buffer is one row. Generation needs no
  /// more; scoring every position needs the default.
  bool last_logits = false;
  /// Element type of the XNNPACK FullyConnected filters (the linear layers'
  /// weights): fp32, or fp16 (half the bytes per decoded token; activations
  /// stay fp32: XNNPACK's fp32 x fp16 -> fp32 combination). xnnpack only.
  ScalarType linear_weights = ScalarType::kFloat;
  QuantConfig quant;
  std::map<std::string, DimBound> dims;  ///< --dim NAME=MIN:MAX overrides
  std::string dump_graph_stage;          ///< print the graph after this stage ("all" = every stage)
  bool verbose = false;
  /// Compare the written program with the reference interpreter (validate.h).
  /// kAuto validates programs whose constants total at most kAutoValidateBytes.
  enum class Validate { kAuto, kAlways, kNever } validate = Validate::kAuto;
  static constexpr uint64_t kAutoValidateBytes = 256ull << 20;
};

/// --backend cuda programs are bf16, as the seed's prepare_for_cuda makes
/// them: another dtype becomes bf16 and the seed's warning is returned
/// ("ExecuTorch CUDA backend requires bfloat16; upcasting model from
/// torch.float32."). Other backends are left as they are (nullopt).
std::optional<std::string> resolve_backend_dtype(ExportConfig& c);

/// The effective config as JSON (stable key order; stored in every .pte as the
/// constant method `get_export_config`). Presentation-only fields (dump, verbose)
/// are not part of it.
nlohmann::ordered_json config_to_json(const ExportConfig& c);
/// Reads a config written by config_to_json (or by hand). Unknown keys and
/// wrong types are errors naming the key; absent keys keep their defaults.
Result<ExportConfig> config_from_json(const nlohmann::json& j, const std::string& where);
/// config_from_json of a file (--config FILE).
Result<ExportConfig> load_config_file(const std::string& path);

}  // namespace hf2pte::exp
