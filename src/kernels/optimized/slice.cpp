// slice_copy with step 1 of a contiguous tensor into a contiguous out: every
// outer index is one contiguous run of len * inner elements, one memcpy each
// (with --attention-span written, the per-layer K/V cache slices
// [kv, 0:end, head_dim]); where the Method allows it (its readers are
// delegates that take strided views) no copy at all, a view of the rows.
// Anything else, and every error, is the portable
// kernel's; the bounds come from the same slice_bounds (torch's rule).
// Large copies are split across the thread pool.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Copies below this many bytes stay on the calling thread: waking the pool
/// costs more than the copy.
constexpr size_t kParallelCopyBytes = size_t(256) << 10;
/// Byte chunks the pool splits a copy into (a multiple of the cache line).
constexpr int64_t kCopyChunk = 64 << 10;

/// dst[o * run + b] = src[o * src_stride + b] for o < outer, b < run: the
/// runs one after the other, split in byte chunks across the pool when the
/// copy is large (a decode step's K/V cache slices: one core's copy rate is
/// well below what two read).
void copy_runs(const uint8_t* src, size_t src_stride, uint8_t* dst, size_t run, int64_t outer) {
  const size_t total = run * size_t(outer);
  if (total < kParallelCopyBytes || pool_threads() == 1) {
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + size_t(o) * run, src + size_t(o) * src_stride, run);
    return;
  }
  // Chunk c covers output bytes [c * kCopyChunk, (c + 1) * kCopyChunk),
  // possibly across several runs.
  const int64_t chunks = int64_t((total + size_t(kCopyChunk) - 1) / size_t(kCopyChunk));
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    size_t at = size_t(c0) * size_t(kCopyChunk);
    const size_t stop = std::min(total, size_t(c1) * size_t(kCopyChunk));
    while (at < stop) {
      const size_t o = at / run, b = at % run;
      const size_t n = std::min(run - b, stop - at);
      std::memcpy(dst + at, src + o * src_stride + b, n);
      at += n;
    }
  });
}

}  // namespace

// [self, dim, start, end, step, out, ret]
Status slice_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  auto opt_int = [](const rt::EValue* v) { return v != nullptr && (v->is_none() || v->is_int()); };
  if (args.size() != 7 || !args[0]->is_tensor() || !args[5]->is_tensor() || !args[1]->is_int() || !args[4]->is_int() ||
      args[4]->i != 1 || !opt_int(args[2]) || !opt_int(args[3])) {
    return kernels::SliceCopyTensorOut(ctx, args);
  }
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[5]->tensor;
  const int rank = self.dim();
  int64_t dim = args[1]->i;
  if (dim < 0) dim += rank;
  if (rank == 0 || dim < 0 || dim >= rank || self.dtype() != out.dtype() || !self.is_contiguous() ||
      self.raw_data() == nullptr) {
    return kernels::SliceCopyTensorOut(ctx, args);
  }
  const int64_t size = self.size(int(dim));
  auto opt = [](const rt::EValue* v) { return v->is_none() ? std::nullopt : std::optional<int64_t>(v->i); };
  const auto [start, end] = slice_bounds(opt(args[2]), opt(args[3]), size);
  const int64_t len = end - start;
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[size_t(dim)] = len;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(int(d));
  for (int64_t d = dim + 1; d < rank; ++d) inner *= self.size(int(d));
  const size_t elem = element_size(self.dtype());
  bool dense_order = true;  // out's dims in memory order (a view keeps self's strides)
  for (size_t i = 0; i < out.dim_order().size(); ++i) dense_order = dense_order && out.dim_order()[i] == i;
  if (ctx.output_may_view && out.dim() == rank && dense_order && len > 0 &&
      uint64_t(outer) * uint64_t(len) * uint64_t(inner) * elem <= out.own_capacity_bytes()) {
    // Its readers take strided views (the Method checked): the rows in place.
    out.set_strided_view(static_cast<const uint8_t*>(self.raw_data()) + size_t(start * inner) * elem, shape,
                         self.strides());
    if (args[6] != args[5]) *args[6] = *args[5];
    return Status::ok();
  }
  if (!out.resize(shape) || !out.is_contiguous()) return kernels::SliceCopyTensorOut(ctx, args);
  const size_t run = size_t(len * inner) * elem;
  if (run > 0) {
    const auto* src = static_cast<const uint8_t*>(self.raw_data()) + size_t(start * inner) * elem;
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    const size_t src_stride = size_t(size * inner) * elem;
    copy_runs(src, src_stride, dst, run, outer);
  }
  if (args[6] != args[5]) *args[6] = *args[5];
  return Status::ok();
}

}  // namespace hf2pte::kernels
