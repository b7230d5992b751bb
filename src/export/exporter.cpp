#include "export/exporter.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "export/validate.h"
#include "models/encoder.h"
#include "models/vision.h"
#include "models/whisper.h"
#include "models/model_builder.h"

namespace hf2pte::exp {

namespace {

// Tokenizer files travel inside the .pte as named data under the key prefix
// llm::kEmbeddedTokenizerPrefix ("tokenizer/"), read back by llm::Tokenizer::from_pte.
Status embed_tokenizer_files(const std::string& model_dir, pte::PteContents& contents) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"}) {
    auto path = std::filesystem::path(model_dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    if (!(in && (ss << in.rdbuf()))) return make_error(ErrorCode::kIoError, "cannot read {}", path.string());
    auto bytes = std::make_shared<std::string>(ss.str());
    pte::Blob blob;
    blob.size = bytes->size();
    blob.write = [bytes](pte::ByteSink& sink) { return sink.write(bytes->data(), bytes->size()); };
    contents.named.push_back({std::string("tokenizer/") + name, std::move(blob)});
  }
  return Status::ok();
}

Status apply_dim_overrides(graph::Program& p, const ExportConfig& c) {
  for (const auto& [name, bound] : c.dims) {
    bool found = false;
    for (auto& g : p.methods) {
      auto it = g.dims().find(name);
      if (it == g.dims().end()) continue;
      found = true;
      int64_t max = bound.max.value_or(graph::DimRange::kUnbounded);
      // The builder sized buffers (KV cache) for its own bound: a dim may shrink, never grow.
      if (max != graph::DimRange::kUnbounded && max > it->second.max) {
        return make_error(ErrorCode::kInvalidArgument, "--dim {}={}:{} exceeds the model's bound {}; raise --max-seq-len instead",
                          name, bound.min, max, it->second.max);
      }
      if (bound.min > it->second.max) {
        return make_error(ErrorCode::kInvalidArgument, "--dim {}={}: minimum exceeds the model's bound {}; raise --max-seq-len instead",
                          name, bound.min, it->second.max);
      }
      if (bound.min < 1 || (max != graph::DimRange::kUnbounded && bound.min > max)) {
        return make_error(ErrorCode::kInvalidArgument, "--dim {}: invalid range [{}, {}]", name, bound.min, max);
      }
      // Unbounded ("seq=1:") stays unbounded here so the program fixes apply the
      // seed's cap (and warn); `limit` keeps the builder's bound, which the cap
      // never exceeds (docs/pipeline.md, "Unbounded dims and the KV cache").
      graph::DimRange r = it->second;
      r.limit = std::min(r.limit, it->second.max);
      r.min = bound.min;
      r.max = max == graph::DimRange::kUnbounded ? max : std::min(max, it->second.max);
      it->second = r;
    }
    if (!found) return make_error(ErrorCode::kInvalidArgument, "--dim {}: the model has no dim of that name", name);
  }
  return Status::ok();
}

}  // namespace

Result<ExportSummary> export_model(const ExportRequest& req) {
  // The config as the program is made: --backend cuda settles the dtype first.
  ExportConfig config = req.config;
  if (auto w = resolve_backend_dtype(config); w && req.on_warning) req.on_warning(*w);
  auto progress = [&](const ExportProgress& p) {
    if (req.on_progress) req.on_progress(p);
  };
  progress({"build", 0, 0});
  HF2PTE_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(req.model_dir));
  models::BuildOptions bo;
  bo.max_seq_len = config.max_seq_len;
  bo.dtype = config.dtype;
  // The span asked for; by default a CUDA program keeps the full static span
  // (the written one's nonzero count would leave the delegate), the builders
  // choose for the other backends (BuildOptions::attend_written_only).
  if (config.attention_span) {
    bo.attend_written_only = *config.attention_span == AttentionSpan::kWritten;
  } else if (config.backend == Backend::kCuda) {
    bo.attend_written_only = false;
  }
  bo.kv_cache = config.use_kv_cache;
  bo.custom_sdpa = config.use_custom_sdpa;
  bo.last_logits = config.last_logits;
  bo.exporter_version = fmt::format("hf2pte {}", HF2PTE_VERSION);
  // Encoders (bert, roberta, xlm-roberta, distilbert) and image models have their own builders and contracts.
  auto build = models::is_encoder_checkpoint(ckpt)   ? &models::build_encoder
               : models::is_vision_checkpoint(ckpt)  ? &models::build_vision
               : models::is_whisper_checkpoint(ckpt) ? &models::build_whisper
                                                     : &models::build_model;
  HF2PTE_CHECK_OR_RETURN(!bo.custom_sdpa || build == &models::build_model, kInvalidArgument,
                         "--use-custom-sdpa applies to decoder LLMs (llama::custom_sdpa over their KV cache); {} is not one",
                         req.model_dir);
  HF2PTE_ASSIGN_OR_RETURN(models::BuiltModel built, build(ckpt, bo));
  HF2PTE_CHECK_OR_RETURN(!bo.last_logits || built.last_logits_only, kInvalidArgument,
                         "--logits last applies to decoder LLMs (forward's logits of the last position); {} is not one",
                         req.model_dir);
  for (const auto& w : built.warnings) if (req.on_warning) req.on_warning(w);
  HF2PTE_RETURN_IF_ERROR(apply_dim_overrides(built.program, config));
  // A 16-bit program is validated against the fp32 model too (its constants
  // are streaming recipes, so the second build holds no weights).
  const bool half = config.dtype == ScalarType::kHalf || config.dtype == ScalarType::kBFloat16;
  std::optional<graph::Program> fp32_model;
  if (half) {
    models::BuildOptions bo32 = bo;
    bo32.dtype = ScalarType::kFloat;
    HF2PTE_ASSIGN_OR_RETURN(models::BuiltModel m32, build(ckpt, bo32));
    HF2PTE_RETURN_IF_ERROR(apply_dim_overrides(m32.program, config));
    fp32_model = std::move(m32.program);
  }
  // Every program says how it was made, the span it was built with included.
  config.attention_span = built.attends_written_only ? AttentionSpan::kWritten : AttentionSpan::kFull;
  built.program.constant_methods["get_export_config"] = config_to_json(config).dump();

  progress({"pipeline", 0, 0});
  StageLog log;
  PipelineHooks hooks;
  const std::string& dump = config.dump_graph_stage;
  size_t printed = 0;
  auto stage_t0 = std::chrono::steady_clock::now();
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  std::optional<graph::Program> quantized_reference;
  hooks.after_stage = [&](std::string_view stage, const graph::Program& p, const StageLog& l) {
    auto now = std::chrono::steady_clock::now();
    nlohmann::ordered_json entry{{"stage", stage}, {"seconds", std::chrono::duration<double>(now - stage_t0).count()},
                                 {"notes", std::vector<std::string>(l.notes.begin() + long(printed), l.notes.end())}};
    stages.push_back(std::move(entry));
    stage_t0 = now;
    if (req.on_text && config.verbose) {
      for (size_t i = printed; i < l.notes.size(); ++i) req.on_text(fmt::format("[{}] {}\n", stage, l.notes[i]));
    }
    printed = l.notes.size();
    // Quantized exports are validated against the fake-quantized graph (and
    // compared with the float model built before it), taken once decomposed:
    // its float ops are then the program's, so the per-token rounding sees the
    // same activations wherever the program runs portable kernels.
    // 16-bit programs likewise: the decomposed graph holds the casts the program runs.
    if (stage == "decompose" && (config.quant.active() || half)) quantized_reference = p;
    if (req.on_text && (dump == "all" || dump == stage)) {
      for (const auto& g : p.methods) req.on_text(fmt::format("// after stage {}\n{}", stage, g.to_string()));
    }
  };
  // The unlowered graph is the reference side of validation (constants are
  // streaming recipes, so this copy holds no weights).
  graph::Program unlowered = built.program;
  HF2PTE_ASSIGN_OR_RETURN(pte::PteContents contents, run_pipeline(built.program, config, log, hooks));
  for (const auto& w : log.warnings) if (req.on_warning) req.on_warning(w);

  ExportSummary s;
  s.model_type = built.model_type;
  s.max_seq_len = built.max_seq_len;
  for (const auto& ep : contents.program.execution_plan) {
    if (ep->chains.empty() || ep->chains[0]->instructions.empty()) {
      ++s.constant_methods;
      continue;
    }
    ++s.methods;
    s.operators += ep->operators.size();
    for (const auto& ch : ep->chains) s.instructions += ch->instructions.size();
    if (ep->non_const_buffer_sizes.size() > 1) s.arena_bytes += uint64_t(ep->non_const_buffer_sizes[1]);
  }
  for (const auto& b : contents.constants) s.constant_bytes += b.size;
  for (const auto& n : contents.named) s.constant_bytes += n.blob.size;  // delegate weights (before the tokenizer)

  // Operator counts per method, for the report.
  nlohmann::ordered_json methods = nlohmann::ordered_json::object();
  for (const auto& ep : contents.program.execution_plan) {
    if (ep->chains.empty() || ep->chains[0]->instructions.empty()) continue;
    std::map<std::string, int> ops;
    for (const auto& in : ep->chains[0]->instructions) {
      if (const auto* k = in->instr_args.AsKernelCall()) {
        const auto& op = ep->operators[size_t(k->op_index)];
        ++ops[op->name + (op->overload.empty() ? "" : "." + op->overload)];
      }
    }
    methods[ep->name] = {{"instructions", ep->chains[0]->instructions.size()},
                         {"arena_bytes", ep->non_const_buffer_sizes.size() > 1 ? ep->non_const_buffer_sizes[1] : 0},
                         {"operators", ops}};
  }

  if (req.embed_tokenizer) HF2PTE_RETURN_IF_ERROR(embed_tokenizer_files(req.model_dir, contents));
  pte::WriteOptions wo;
  wo.on_layout = [&](const pte::WriteSummary& w) {
    if (req.on_estimate) req.on_estimate(ExportEstimate{w.file_size, s.arena_bytes, built.max_seq_len});
  };
  wo.on_progress = [&](const pte::WriteProgress& p) { progress({"write", p.bytes_written, p.bytes_total}); };
  wo.cancel = req.cancel;
  auto cancelled = [&] { return req.cancel != nullptr && req.cancel->load(); };
  auto write_t0 = std::chrono::steady_clock::now();
  // Written under a temporary name and renamed only once validated: a program
  // that disagrees with the reference never appears under the output name.
  const std::string staged = req.output_path + ".unvalidated";
  HF2PTE_ASSIGN_OR_RETURN(pte::WriteSummary ws, pte::write_pte(staged, std::move(contents), wo));
  s.file_size = ws.file_size;
  stages.push_back({{"stage", "write"}, {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - write_t0).count()},
                    {"notes", {fmt::format("{} bytes", ws.file_size)}}});
  auto discard = [&](Status st) {
    std::remove(staged.c_str());
    return st;
  };
  nlohmann::ordered_json validation;
  bool validate = config.validate == ExportConfig::Validate::kAlways ||
                  (config.validate == ExportConfig::Validate::kAuto && s.constant_bytes <= ExportConfig::kAutoValidateBytes);
  if (validate) {
    progress({"validate", 0, 0});
    const graph::Program* float_model = fp32_model ? &*fp32_model : quantized_reference ? &unlowered : nullptr;
    std::optional<double> float_tolerance;
    // Expert routing is discrete: a near tie may go the other way at 16 bits, which
    // no tolerance bounds, so MoE programs report their distance to fp32 instead.
    // A quantized 16-bit program moves away from fp32 by its recipe, which the
    // report states (max |delta|, top-1 agreement), as for fp32 quantized programs.
    if (half && !built.routed_experts && !built.recurrent_state && !config.quant.active()) {
      float_tolerance = config.dtype == ScalarType::kHalf ? kFp16ModelTolerance : kBf16ModelTolerance;
    }
    double tolerance = config.linear_weights == ScalarType::kHalf ? kFp16WeightsTolerance : kFp32Tolerance;
    if (half && config.backend == Backend::kXnnpack) {
      tolerance = config.dtype == ScalarType::kHalf ? kFp16KernelTolerance : kBf16KernelTolerance;
    }
    auto v = validate_export(quantized_reference ? *quantized_reference : unlowered, staged, tolerance, float_model,
                             float_tolerance);
    if (!v) return discard(v.status().with_context("validation"));
    validation = v->report;
    if (!v->ok) return discard(make_error(ErrorCode::kInternal, "validation failed: {}", v->message));
  } else {
    validation = {{"skipped", config.validate == ExportConfig::Validate::kNever
                                  ? "--no-validate"
                                  : fmt::format("constants exceed {} MiB; pass --validate to force", ExportConfig::kAutoValidateBytes >> 20)}};
  }
  if (cancelled()) return discard(make_error(ErrorCode::kCancelled, "interrupted; nothing was written ({})", req.output_path));
  if (std::rename(staged.c_str(), req.output_path.c_str()) != 0) {
    return discard(make_error(ErrorCode::kIoError, "cannot rename the written program into place ({})", req.output_path));
  }
  s.report = {{"model_dir", req.model_dir},
              {"output", req.output_path},
              {"model_type", built.model_type},
              {"architecture", built.architecture},
              {"max_seq_len", built.max_seq_len},
              {"config", config_to_json(config)},
              {"file_bytes", ws.file_size},
              {"constant_bytes", s.constant_bytes},
              {"warnings", log.warnings},
              {"stages", stages},
              {"validation", validation},
              {"methods", methods}};
  return s;
}

}  // namespace hf2pte::exp
