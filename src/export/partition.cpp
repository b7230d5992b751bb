#include "export/stages.h"

#include <fmt/format.h>

#include "backends/xnnpack/export/partition.h"

namespace hf2pte::exp {

Status run_partitioner(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // The portable backend delegates nothing: every node stays a KernelCall.
  if (c.backend == Backend::kPortable) {
    log.notes.push_back("portable backend: nothing to partition (stage empty)");
    return Status::ok();
  }
  if (c.backend != Backend::kXnnpack) {
    return make_error(ErrorCode::kNotSupported, "backend '{}' has no partitioner", backend_name(c.backend));
  }
  // Each backend is one folder: src/backends/xnnpack/export/partition.cpp decides what it claims.
  for (auto& g : p.methods) {
    xnn::PartitionOptions options;
    options.fc_filter_dtype = c.linear_weights;
    auto r = xnn::partition_for_xnnpack(g, options);
    if (!r) return r.status().with_context(g.name());
    const auto& stats = *r;
    std::string kinds;
    for (const auto& [k, n] : stats.xnn_nodes) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", k, n);
    log.notes.push_back(fmt::format("{}: {} xnnpack partitions, {} nodes delegated ({})", g.name(), stats.partitions,
                                    stats.claimed_nodes, kinds.empty() ? "none" : kinds));
  }
  return Status::ok();
}

}  // namespace hf2pte::exp
