// One safetensors file, mapped and validated. Tensors are zero-copy views into
// the mapping: a 7B checkpoint is never read into the heap.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian
// header length N, N bytes of JSON, then the data section. The JSON maps each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" string map.
// The file is untrusted input: every field is checked before a view is made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte {

/// A tensor stored in a safetensors file: metadata plus a view of its bytes.
///
/// The view is little-endian, row-major and possibly unaligned (safetensors
/// does not align tensor data), so read elements with memcpy. `storage` keeps
/// the mapping alive, so a copied TensorRef stays valid after the file or the
/// Checkpoint that produced it is gone.
struct TensorRef {
  std::string name;
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;        ///< numel() * element_size(dtype) bytes
  std::string file;                      ///< path of the safetensors file holding it
  std::shared_ptr<const MappedFile> storage;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;  // validated at open: cannot overflow
    return n;
  }
};

/// A validated, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  /// Largest header accepted. The reference implementation uses the same cap
  /// (safetensors MAX_HEADER_SIZE = 100'000'000); it bounds the JSON we parse.
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;
  /// Largest tensor rank accepted; real checkpoints stay far below it.
  static constexpr size_t kMaxRank = 16;

  /// Maps `path` and validates header and offsets. Errors: kIoError when the
  /// file cannot be read, kInvalidInput when it is not a valid safetensors
  /// file ("what; expected X, got Y (file, tensor NAME)").
  static Result<SafetensorsFile> open(const std::string& path);

  /// Validates an already mapped file (the fuzz and unit tests' entry point).
  static Result<SafetensorsFile> parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return path_; }
  /// Tensors ordered by their data offset (the order they sit in the file).
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const TensorRef* find(std::string_view name) const;
  /// The optional "__metadata__" map (e.g. {"format": "pt"}); empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Size in bytes of the JSON header (without the 8-byte length prefix).
  uint64_t header_size() const { return header_size_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  uint64_t header_size_ = 0;
};

/// Maps a safetensors dtype string ("F32", "BF16", ...) to our ScalarType;
/// nullopt for dtypes we do not load (F8_E4M3, U16, ...).
std::optional<ScalarType> safetensors_dtype(std::string_view name);
/// The safetensors spelling of a ScalarType ("F32"), or "?" when it has none.
std::string_view safetensors_dtype_name(ScalarType t);

}  // namespace hf2pte
