#include "export/stages.h"

#include <fmt/format.h>

#include "backends/cuda/export/partition.h"
#include "backends/xnnpack/export/partition.h"

namespace hf2pte::exp {

namespace {

// As upstream's CudaPartitioner: each method's whole graph is one delegate when
// the delegate runs every op; otherwise the ops it lacks stay on the portable
// kernels, named in a warning.
Status partition_cuda(graph::Program& p, StageLog& log) {
  for (auto& g : p.methods) {
    auto r = cuda::partition_for_cuda(g);
    if (!r) return r.status().with_context(g.name());
    std::string left;
    for (const auto& [op, n] : r->unsupported) left += fmt::format("{}{} x{}", left.empty() ? "" : ", ", op, n);
    log.notes.push_back(fmt::format("{}: {} cuda partition(s), {} nodes delegated, arena {} bytes{}", g.name(),
                                    r->partitions, r->claimed_nodes, r->arena_bytes,
                                    left.empty() ? "" : "; left on portable kernels: " + left));
    if (!left.empty()) {
      log.warnings.push_back(fmt::format("--backend cuda: method {} keeps ops the CUDA delegate does not run on the "
                                         "portable CPU kernels: {}",
                                         g.name(), left));
    }
  }
  return Status::ok();
}

}  // namespace

Status run_partitioner(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // The portable backend delegates nothing: every node stays a KernelCall.
  if (c.backend == Backend::kPortable) {
    log.notes.push_back("portable backend: nothing to partition (stage empty)");
    return Status::ok();
  }
  if (c.backend == Backend::kCuda) return partition_cuda(p, log);
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
