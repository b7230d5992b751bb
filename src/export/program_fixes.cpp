#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "export/stages.h"

namespace hf2pte::exp {

int64_t unbounded_dim_cap(int64_t lower, int64_t hint, int num_unbounded) {
  double floor_value = std::round(std::pow(double(1 << 24), 1.0 / std::max(num_unbounded, 1)));
  int64_t floor_cap = std::clamp<int64_t>(int64_t(floor_value), 64, 1024);
  return std::max({lower * 4, hint * 4, floor_cap});
}

Status run_program_fixes(graph::Program& p, const ExportConfig& c, StageLog& log) {
  for (auto& g : p.methods) {
    // Range capping: unbounded dims get the seed's cap, with one warning listing them.
    int unbounded = 0;
    for (const auto& [name, r] : g.dims()) unbounded += r.max == graph::DimRange::kUnbounded;
    std::string capped;
    for (auto& [name, r] : g.dims()) {
      if (r.max != graph::DimRange::kUnbounded) continue;
      // The seed's lower default is 2 (torch specialises 0 and 1); the hint is
      // the dim's trace hint, for us the value validation samples (DimRange).
      int64_t cap = unbounded_dim_cap(std::max<int64_t>(r.min, 2), r.hint_or_default(), unbounded);
      capped += fmt::format("{}{} -> [{}, {}]", capped.empty() ? "" : ", ", name, r.min, cap);
      r.max = cap;
      if (r.limit < cap) {  // the builder's buffers (KV cache) hold fewer positions
        capped += fmt::format(" (limited to {} by the model's buffers)", r.limit);
        if (r.limit < r.min) {
          return make_error(ErrorCode::kInvalidArgument,
                            "--dim {}={}: minimum exceeds the model's bound {}; raise --max-seq-len instead", name,
                            r.min, r.limit)
              .with_context("method " + g.name());
        }
        r.max = r.limit;
      }
    }
    if (!capped.empty()) {
      log.warnings.push_back(fmt::format("unbounded dims capped: {}; pass --dim NAME=MIN:MAX to choose the bounds", capped));
    }
    // Runtime asserts: our IR has no assert ops, so there is nothing to drop.
    // Constant metadata: every constant's byte size matches dtype x sizes.
    for (size_t i = 0; i < g.num_values(); ++i) {
      const auto& v = g.value(graph::ValueId(i));
      if (v.role != graph::ValueRole::kConstant) continue;
      const auto& data = g.constant(graph::ValueId(i));
      if (!data.write) return make_error(ErrorCode::kInternal, "constant %{} has no data", v.name);
      std::vector<graph::SymInt> sizes(data.sizes.begin(), data.sizes.end());
      if (!(v.type.sizes == sizes) || v.type.dtype != data.dtype) {
        return make_error(ErrorCode::kInternal, "constant %{} metadata {} does not match its data", v.name, v.type.str());
      }
    }
    log.notes.push_back(fmt::format("{}: {} dims capped, 0 runtime asserts", g.name(), capped.empty() ? 0 : unbounded));
  }
  (void)c;
  return Status::ok();
}

}  // namespace hf2pte::exp
