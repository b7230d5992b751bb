// Constants derived from checkpoint tensors without copying them: a recipe
// (row slice, 2-D transpose, dtype conversion) applied while streaming the
// bytes of an mmapped tensor to the output.
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
};

struct ConstantRecipe {
  TensorSource source;
  int64_t row_begin = 0;  ///< rows [row_begin, row_end) of dim 0
  int64_t row_end = -1;   ///< -1: all rows
  bool transpose = false; ///< 2-D only: write the [cols, rows] transpose of the sliced rows
  ScalarType dtype = ScalarType::kFloat;  ///< element type written (F32/F16/BF16 sources)
};

/// Builds streaming ConstantData for a recipe (sizes, origin text, dedup key and
/// a write function that converts in bounded chunks).
ConstantData make_constant(const ConstantRecipe& recipe);

}  // namespace hf2pte::graph
