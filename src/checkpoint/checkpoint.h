// A Hugging Face checkpoint folder: config.json, optional
// generation_config.json, and the weights in one or more safetensors files.
//
// Every tensor in the folder must be used by the model or explicitly ignored
// (docs/STYLE.md rule 4, after llama.cpp's done_getting_tensors()): builders
// take weights with expect(), ignore known non-weights with mark_ignored(),
// and call check_all_consumed() at the end, so a tensor that a builder forgot
// (or a checkpoint variant it does not know) is an error, never silently dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte {

/// A set of ScalarTypes a tensor may be stored as.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<ScalarType> types) {
    for (ScalarType t : types) bits_ |= bit(t);
  }
  /// The floating types weights are published in: F32, F16, BF16. (F64 is
  /// left out: no checkpoint we target ships it and no backend computes in it.)
  static constexpr DTypeSet float_weights() {
    return {ScalarType::kFloat, ScalarType::kHalf, ScalarType::kBFloat16};
  }
  constexpr bool contains(ScalarType t) const { return (bits_ & bit(t)) != 0; }
  /// "F32|F16|BF16", in safetensors spelling, for error messages.
  std::string to_string() const;

 private:
  // c10 codes are < 32 (see core/scalar_type.h).
  static constexpr uint32_t bit(ScalarType t) { return uint32_t{1} << (uint32_t(t) & 31); }
  uint32_t bits_ = 0;
};

/// Formats a shape as "[64, 64]"; negative dims (wildcards) print as "?".
std::string format_shape(const std::vector<int64_t>& shape);

/// An opened checkpoint folder. Movable; TensorRef pointers it hands out stay
/// valid across moves (they live in map nodes) and until it is destroyed.
class Checkpoint {
 public:
  /// How the weights were found.
  enum class Layout {
    kSingle,   ///< model.safetensors, or the folder's only *.safetensors file
    kSharded,  ///< model.safetensors.index.json + shards
  };

  /// Opens `dir`: reads config.json (required) and generation_config.json
  /// (optional), then finds the weights, in the order transformers'
  /// from_pretrained looks for them: model.safetensors, else
  /// model.safetensors.index.json and its shards, else the single *.safetensors
  /// file in the folder. Every file is validated (see SafetensorsFile).
  static Result<Checkpoint> open(const std::string& dir);

  /// The folder, as given to open().
  const std::string& dir() const { return dir_; }
  /// config.json as parsed, unmodified; typed views come from config.h.
  const nlohmann::json& config() const { return config_; }
  const std::string& config_path() const { return config_path_; }
  /// generation_config.json, or nullptr when the folder has none.
  const nlohmann::json* generation_config() const {
    return generation_config_ ? &*generation_config_ : nullptr;
  }
  /// Path of a file in the folder when it exists as a regular file
  /// (tokenizer.json, tokenizer_config.json, ...), else nullopt.
  std::optional<std::string> find_file(std::string_view name) const;

  Layout layout() const { return layout_; }
  /// The weight files, relative to dir(), in the order they were opened.
  const std::vector<std::string>& weight_files() const { return weight_files_; }

  // ---- lookup ----
  bool has(std::string_view name) const;
  /// The tensor, or kNotFound "missing tensor NAME (DIR)". Does not mark it consumed.
  Result<const TensorRef*> tensor(std::string_view name) const;
  /// All tensor names, sorted.
  std::vector<std::string> tensor_names() const;
  size_t num_tensors() const { return tensors_.size(); }

  // ---- typed access ----
  /// The tensor `name`, checked and marked consumed. Its dtype must be in
  /// `dtypes` and its shape equal `shape` (a negative entry matches any size).
  /// Errors: kNotFound when absent; kInvalidInput
  /// "tensor NAME has wrong shape; expected [64, 64], got [64, 32] (model.safetensors)"
  /// or "... has wrong dtype; expected F32|F16|BF16, got I64 (...)".
  Result<TensorRef> expect(std::string_view name, DTypeSet dtypes, const std::vector<int64_t>& shape);
  /// As expect(), but an absent tensor gives nullopt instead of an error
  /// (optional biases, tied output projections).
  Result<std::optional<TensorRef>> expect_optional(std::string_view name, DTypeSet dtypes,
                                                   const std::vector<int64_t>& shape);

  // ---- consumption tracking ----
  /// Marks `name` as used by the model; kNotFound when there is no such tensor.
  Status mark_consumed(std::string_view name);
  /// Marks `name` as deliberately unused (e.g. rotary_emb.inv_freq buffers).
  /// Returns false when there is no such tensor, which is not an error:
  /// callers ignore names that only some checkpoints carry.
  bool mark_ignored(std::string_view name);
  /// Marks every not-yet-consumed tensor whose name satisfies `pred` as
  /// ignored; returns how many it marked.
  size_t mark_ignored_if(const std::function<bool(std::string_view)>& pred);
  bool is_consumed(std::string_view name) const;
  /// Names neither consumed nor ignored, sorted.
  std::vector<std::string> unconsumed() const;
  /// Ok when every tensor is consumed or ignored, else kInvalidInput
  /// "checkpoint tensors not used by the model: a, b, ... (N in total) (DIR)"
  /// naming the first kMaxListedUnconsumed.
  Status check_all_consumed() const;
  static constexpr size_t kMaxListedUnconsumed = 10;

 private:
  enum class Use : uint8_t { kUnused, kConsumed, kIgnored };
  struct Entry {
    TensorRef ref;
    size_t file_idx = 0;  ///< into weight_files_
    Use use = Use::kUnused;
  };

  Checkpoint() = default;
  Status add_file(const std::string& relative_name, SafetensorsFile file);
  Status load_single(const std::string& relative_name);
  Status load_sharded(const std::string& index_name);
  Result<Entry*> entry_or_error(std::string_view name);
  Status check_tensor(const Entry& e, DTypeSet dtypes, const std::vector<int64_t>& shape) const;

  std::string dir_;
  std::string config_path_;
  nlohmann::json config_;
  std::optional<nlohmann::json> generation_config_;
  Layout layout_ = Layout::kSingle;
  std::vector<std::string> weight_files_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

}  // namespace hf2pte
