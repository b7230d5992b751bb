// export_model: checkpoint folder -> .pte file. The CLI's `export` command is a
// thin layer over this.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "export/export_config.h"
#include "export/pipeline.h"

namespace hf2pte::exp {

struct ExportProgress {
  std::string stage;            ///< "build", "pipeline", "write"
  uint64_t bytes_written = 0;   ///< during "write"
  uint64_t bytes_total = 0;
};

/// What the program will need, known before the weights stream: the file
/// layout and the memory plan are decided first.
struct ExportEstimate {
  uint64_t file_bytes = 0;   ///< the size of the .pte about to be written (exact)
  uint64_t arena_bytes = 0;  ///< planned activation arena of the executable methods (exact)
  int64_t max_seq_len = 0;
};

struct ExportRequest {
  std::string model_dir;
  std::string output_path;
  ExportConfig config;
  /// Store the checkpoint's tokenizer files (tokenizer.json, tokenizer_config.json,
  /// tokenizer.model) as named data "tokenizer/<file>", so the .pte is self-contained.
  bool embed_tokenizer = true;
  std::function<void(const ExportProgress&)> on_progress;
  /// Called once before the weights are streamed to the file (see ExportEstimate).
  std::function<void(const ExportEstimate&)> on_estimate;
  /// Receives graph dumps (--dump-graph) and, with config.verbose, stage notes.
  std::function<void(const std::string&)> on_text;
  std::function<void(const std::string&)> on_warning;
  /// When it reads true (e.g. set by a SIGINT handler) the export stops with
  /// kCancelled and leaves no output or temporary file behind.
  const std::atomic<bool>* cancel = nullptr;
};

struct ExportSummary {
  uint64_t file_size = 0;
  size_t methods = 0;           ///< executable methods
  size_t constant_methods = 0;
  size_t instructions = 0;
  size_t operators = 0;         ///< distinct operators
  uint64_t arena_bytes = 0;
  uint64_t constant_bytes = 0;
  std::string model_type;
  int64_t max_seq_len = 0;
  /// What every stage did, timings, operator counts, sizes (--report FILE).
  nlohmann::ordered_json report;
};

Result<ExportSummary> export_model(const ExportRequest& request);

}  // namespace hf2pte::exp
