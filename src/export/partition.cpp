#include "export/stages.h"

namespace hf2pte::exp {

Status run_partitioner(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // The portable backend delegates nothing: every node stays a KernelCall.
  (void)p;
  if (c.backend == Backend::kPortable) log.notes.push_back("portable backend: nothing to partition (stage empty)");
  return Status::ok();
}

}  // namespace hf2pte::exp
