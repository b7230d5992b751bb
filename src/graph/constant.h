// Constants derived from checkpoint tensors without copying them: a recipe
// (row slice, row/column picks, 2-D transpose, dtype conversion) applied while
// streaming the bytes of an mmapped tensor to the output.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::graph {

/// Raw bytes of a tensor in some dtype, kept alive by `owner` (e.g. the mapping).
struct TensorSource {
  std::string name;
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
  /// The bytes are a read-only file mapping: streaming gives each page back
  /// once written (MappedFile::release_pages), and a later stream reads it
  /// from the file again. False for bytes in memory, which that would zero.
  bool file_mapped = false;
};

/// What to write, as a 2-D view of the source: the source is read as rows of
/// `row_width` elements; the block [row_begin, row_end) of those rows is cut,
/// optionally some of its rows and columns are picked (in the given order),
/// then optionally transposed; `sizes` reshapes the result. The picks express
/// what checkpoints fuse: gpt-oss's interleaved gate/up columns, DeepSeek's
/// per-head [k_nope | v] rows and its interleaved RoPE dims.
struct ConstantRecipe {
  TensorSource source;
  int64_t row_width = 0;  ///< elements per source row; 0: the product of shape[1:]
  int64_t row_begin = 0;  ///< rows [row_begin, row_end) of the 2-D view
  int64_t row_end = -1;   ///< -1: all rows
  std::vector<int64_t> rows;  ///< indices into the block's rows, in output order; empty: all
  std::vector<int64_t> cols;  ///< indices into the source columns, in output order; empty: all
  bool transpose = false; ///< write the [cols, rows] transpose of the picked block
  std::vector<int64_t> sizes;  ///< the result's shape (same element count); empty: the natural one
  /// A per-element map applied while streaming, computed in double: kNegExp
  /// writes -exp(w) (Mamba's A = -exp(A_log), a constant of the checkpoint).
  enum class Map : uint8_t { kIdentity, kNegExp } map = Map::kIdentity;
  ScalarType dtype = ScalarType::kFloat;  ///< element type written (F32/F16/BF16 sources)
};

/// Builds streaming ConstantData for a recipe (sizes, origin text, dedup key and
/// a write function that converts in bounded chunks).
ConstantData make_constant(const ConstantRecipe& recipe);

}  // namespace hf2pte::graph
