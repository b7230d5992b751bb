#include "export/memory_plan.h"

#include "export/stages.h"

#include <algorithm>
#include <vector>

namespace hf2pte::exp {

namespace {

struct Interval {
  graph::ValueId value;
  int begin, end;  // node indices, inclusive
  uint64_t size;
  uint64_t offset = 0;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

Result<MemoryPlan> plan_memory(const graph::Graph& g, const ExportConfig& config) {
  const int n = int(g.nodes().size());
  std::unordered_map<graph::ValueId, Interval> live;
  auto touch = [&](graph::ValueId v, int at) {
    auto it = live.find(v);
    if (it != live.end()) {
      it->second.begin = std::min(it->second.begin, at);
      it->second.end = std::max(it->second.end, at);
    }
  };
  auto add = [&](graph::ValueId v, int begin, int end) -> Status {
    const auto& t = g.type(v);
    uint64_t bytes = element_size(t.dtype);
    for (auto s : t.planning_bounds(g.dims())) {  // item 19: non-finite bounds are clamped
      if (s < 0 || s == graph::DimRange::kUnbounded) {
        return make_error(ErrorCode::kInternal, "value %{} has no upper bound ({})", g.value(v).name, t.str());
      }
      if (s != 0 && bytes > UINT64_MAX / uint64_t(s)) {
        return make_error(ErrorCode::kOutOfRange, "value %{} is too large to plan ({})", g.value(v).name, t.str());
      }
      bytes *= uint64_t(s);
    }
    live[v] = Interval{v, begin, end, align_up(bytes, MemoryPlan::kAlignment)};
    return Status::ok();
  };

  if (config.alloc_graph_input) {
    for (auto v : g.inputs()) HF2PTE_RETURN_IF_ERROR(add(v, -1, -1));
  }
  // alloc_mutable_buffers=false: the KV caches stay out of the arena; the
  // emitter names them and the caller binds their memory (set_mutable_buffer).
  if (config.alloc_mutable_buffers) {
    for (auto v : g.buffers()) HF2PTE_RETURN_IF_ERROR(add(v, -1, n));  // state outlives every call
  }
  for (int i = 0; i < n; ++i) {
    for (auto v : g.nodes()[size_t(i)].outputs) {
      if (g.value(v).role == graph::ValueRole::kSymInt) continue;
      HF2PTE_RETURN_IF_ERROR(add(v, i, i));
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto& node = g.nodes()[size_t(i)];
    for (const auto& a : node.args) {
      if (const auto* id = std::get_if<graph::ValueId>(&a)) touch(*id, i);
      if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) touch(v, i);
      if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto v : *l) if (v) touch(*v, i);
    }
  }
  MemoryPlan plan;
  std::vector<Interval> order;
  for (auto v : g.outputs()) {
    if (!config.alloc_graph_output && g.value(v).role == graph::ValueRole::kActivation) {
      live.erase(v);  // the caller binds output memory
      continue;
    }
    touch(v, n);
  }
  for (auto& [v, iv] : live) order.push_back(iv);
  // Largest first, ties by value id so the plan (and the file) is reproducible.
  std::sort(order.begin(), order.end(), [](const Interval& a, const Interval& b) {
    return a.size != b.size ? a.size > b.size : a.value < b.value;
  });
  std::vector<const Interval*> placed;
  for (auto& iv : order) {
    // Collect the ranges of overlapping-in-time placed intervals and take the
    // lowest gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const auto* p : placed) {
      if (p->begin <= iv.end && iv.begin <= p->end) busy.emplace_back(p->offset, p->offset + p->size);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + iv.size <= b) break;
      offset = std::max(offset, e);
    }
    iv.offset = offset;
    placed.push_back(&iv);
    plan.offsets[iv.value] = offset;
    plan.arena_size = std::max(plan.arena_size, offset + iv.size);
    plan.sum_of_sizes += iv.size;
  }
  return plan;
}

Result<std::vector<MemoryPlan>> run_memory_planning(const graph::Program& p, const ExportConfig& c, StageLog& log) {
  std::vector<MemoryPlan> plans;
  for (const auto& g : p.methods) {
    HF2PTE_ASSIGN_OR_RETURN(MemoryPlan plan, plan_memory(g, c));
    log.notes.push_back(g.name() + ": arena " + std::to_string(plan.arena_size) + " bytes (" +
                        std::to_string(plan.sum_of_sizes) + " without reuse)");
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace hf2pte::exp
