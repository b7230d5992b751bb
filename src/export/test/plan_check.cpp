#include "export/test/plan_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "core/scalar_type.h"

namespace hf2pte::exp {

void expect_no_live_overlap(const executorch_flatbuffer::ExecutionPlanT& ep) {
  namespace fb = executorch_flatbuffer;
  struct Live { int begin = INT32_MAX, end = -1; uint64_t lo = 0, hi = 0; bool planned = false; };
  std::vector<Live> live(ep.values.size());
  const int n = int(ep.chains[0]->instructions.size());
  for (size_t v = 0; v < ep.values.size(); ++v) {
    const auto* t = ep.values[v]->val.AsTensor();
    if (t == nullptr || !t->allocation_info) continue;
    uint64_t bytes = element_size(ScalarType(int(t->scalar_type)));
    for (auto s : t->sizes) bytes *= uint64_t(s);
    uint64_t off = (uint64_t(t->allocation_info->memory_offset_high) << 32) | t->allocation_info->memory_offset_low;
    live[v] = {INT32_MAX, -1, off, off + bytes, true};
    if (t->data_buffer_idx > 0) live[v].begin = -1, live[v].end = n;  // mutable buffer: always live
  }
  for (auto i : ep.inputs) live[size_t(i)].begin = -1;
  for (auto o : ep.outputs) live[size_t(o)].end = n;
  auto touch = [&](int v, int at) {
    auto& l = live[size_t(v)];
    l.begin = std::min(l.begin, at);
    l.end = std::max(l.end, at);
  };
  for (int i = 0; i < n; ++i) {
    // Kernel calls and delegate calls (the default backend is XNNPACK) both
    // list the values they read and write as args.
    const auto& ia = ep.chains[0]->instructions[size_t(i)]->instr_args;
    const std::vector<int32_t>* args = ia.AsKernelCall() ? &ia.AsKernelCall()->args
                                      : ia.AsDelegateCall() ? &ia.AsDelegateCall()->args
                                                            : nullptr;
    ASSERT_NE(args, nullptr);
    for (auto a : *args) {
      touch(a, i);
      const auto& val = ep.values[size_t(a)]->val;
      if (const auto* l = val.AsTensorList()) for (auto x : l->items) touch(x, i);
      if (const auto* l = val.AsOptionalTensorList()) for (auto x : l->items) if (x >= 0) touch(x, i);
    }
  }
  int checked = 0;
  for (size_t a = 0; a < live.size(); ++a) {
    for (size_t b = a + 1; b < live.size(); ++b) {
      const auto &x = live[a], &y = live[b];
      if (!x.planned || !y.planned || x.end < 0 || y.end < 0 || x.lo == x.hi || y.lo == y.hi) continue;
      bool same_time = x.begin <= y.end && y.begin <= x.end;
      bool same_bytes = x.lo < y.hi && y.lo < x.hi;
      EXPECT_FALSE(same_time && same_bytes) << "values " << a << " and " << b << " overlap";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  ASSERT_GE(ep.non_const_buffer_sizes.size(), 2u);
  for (const auto& l : live) {
    if (l.planned) {
      EXPECT_LE(l.hi, uint64_t(ep.non_const_buffer_sizes[1]));
    }
  }
}

}  // namespace hf2pte::exp
