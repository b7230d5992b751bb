// The reference interpreter: runs a graph node by node, kernel ops through a
// kernel registry (the portable reference kernels) and graph-only ops
// (linear, rms_norm, silu, scaled_dot_product_attention and the sources of the
// decomposition rules: split, topk, pools, bucketize, cummax, views...) through
// the direct implementations in interpreter.cpp, written from each op's
// documented semantics. Values with a strided dim order are stored in that
// layout; graph ops see row-major copies and run() returns row-major outputs. It is the
// independent side of rule tests and of the validation that every export
// runs: the unlowered graph here versus the written .pte in the runtime.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <memory>
#include <vector>

#include "core/host_tensor.h"
#include "graph/graph.h"
#include "runtime/kernel.h"

namespace hf2pte::exp {

class GraphInterpreter {
 public:
  /// `g` and `kernels` must outlive the interpreter. Buffers start as zeros and
  /// keep their contents across run() calls, like mutable buffers in a Method.
  GraphInterpreter(const graph::Graph& g, const rt::KernelRegistry& kernels);
  ~GraphInterpreter();

  /// Runs the graph on `inputs` (one per graph input, exact dtypes) and returns
  /// the outputs. Constants are materialised when first used and dropped after
  /// their last use, so peak memory is about one layer's weights.
  Result<std::vector<HostTensor>> run(const std::vector<HostTensor>& inputs);

 private:
  struct Slot;
  Result<Slot*> slot(graph::ValueId v);
  Status run_node(size_t index);
  /// Binds the unbacked symbols in `n`'s output sizes ("u3") to the sizes its
  /// kernel resized the outputs to, so later nodes' sizes evaluate.
  Status bind_unbacked(const graph::Node& n);
  /// The direct implementation of a graph-only op on row-major tensors.
  Status run_reference(const graph::Node& n, const std::function<Result<rt::Tensor*>(size_t)>& input,
                       std::span<rt::Tensor*> outs);

  const graph::Graph& g_;
  const rt::KernelRegistry& kernels_;
  std::map<std::string, int64_t> env_;
  std::map<graph::ValueId, std::unique_ptr<Slot>> slots_;
  std::map<graph::ValueId, size_t> last_use_;
};

}  // namespace hf2pte::exp
