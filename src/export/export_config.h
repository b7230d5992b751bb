// ExportConfig: how a program is made (mirrors transformers' ExecutorchConfig).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte::exp {

enum class Backend { kPortable, kXnnpack, kCuda };

const char* backend_name(Backend b);
Result<Backend> parse_backend(const std::string& s);

struct DimBound {
  int64_t min = 1;
  std::optional<int64_t> max;  ///< nullopt: unbounded ("seq=1:"), capped by the program fixes
};

struct ExportConfig {
  Backend backend = Backend::kPortable;
  ScalarType dtype = ScalarType::kFloat;
  std::optional<int64_t> max_seq_len;
  bool alloc_graph_input = true;
  bool alloc_graph_output = true;
  bool alloc_mutable_buffers = true;
  std::map<std::string, DimBound> dims;  ///< --dim NAME=MIN:MAX overrides
  std::string dump_graph_stage;          ///< print the graph after this stage ("all" = every stage)
  bool verbose = false;
};

}  // namespace hf2pte::exp
