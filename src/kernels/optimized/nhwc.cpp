// NHWC convolution and pooling (nhwc.h). A convolution is a GEMM over
// gathered patches: each output pixel's window is one row of
// kernel_h * kernel_w * cin_g floats, laid out exactly like a filter row
// [kernel_h, kernel_w, cin_g], so rows x filter^T is the output block [pixels,
// cout_g] and the filter is read in place. Patches are gathered for a block of
// pixels at a time (a bounded buffer, whatever the image size).
#include "kernels/optimized/nhwc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/optimized/gemm.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::kernels {

namespace {

/// Floats of gathered patches per block (8 MiB): big enough for the GEMM to
/// run at speed, small enough to stay near the caches. A block holds at least
/// one row, so the buffer is never larger than max(8 MiB, the filter).
constexpr int64_t kPatchBlockFloats = int64_t(2) << 20;

bool clamps(float lo, float hi) { return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity(); }

void clamp_range(float* y, int64_t count, float lo, float hi) {
  for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(y[i], lo), hi);
}

/// fn(t, pixel) for every in-bounds tap of output pixel p (flat over n, oh,
/// ow): t = i * kernel_w + j, pixel = the input pixel's flat index.
template <typename F>
inline void for_each_tap(const Window2d& w, int64_t p, F&& fn) {
  const int64_t ox = p % w.ow, oy = (p / w.ow) % w.oh, n = p / (w.ow * w.oh);
  for (int64_t i = 0; i < w.kernel_h; ++i) {
    const int64_t iy = oy * w.stride_h - w.pad_top + i * w.dilation_h;
    if (iy < 0 || iy >= w.ih) continue;
    for (int64_t j = 0; j < w.kernel_w; ++j) {
      const int64_t ix = ox * w.stride_w - w.pad_left + j * w.dilation_w;
      if (ix >= 0 && ix < w.iw) fn(i * w.kernel_w + j, (n * w.ih + iy) * w.iw + ix);
    }
  }
}

/// Rows [p0, p1) of the patch matrix of channels [c0, c0 + cg) of an input
/// with `ctot` channels: row (p - p0) = [kernel_h][kernel_w][cg], 0 for
/// padding. On the calling thread.
void gather_rows(const Window2d& w, int64_t ctot, int64_t c0, int64_t cg, const float* x, int64_t p0, int64_t p1,
                 float* rows) {
  const int64_t row_len = w.kernel_h * w.kernel_w * cg;
  // With unit dilation and all channels, a window row's taps are one contiguous run.
  const bool runs = w.dilation_w == 1 && cg == ctot;
  {
    const int64_t b = 0, e = p1 - p0;
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = p0 + r;
      const int64_t ox = p % w.ow, oy = (p / w.ow) % w.oh, n = p / (w.ow * w.oh);
      float* dst = rows + r * row_len;
      for (int64_t i = 0; i < w.kernel_h; ++i) {
        const int64_t iy = oy * w.stride_h - w.pad_top + i * w.dilation_h;
        float* drow = dst + i * w.kernel_w * cg;
        if (iy < 0 || iy >= w.ih) {
          std::memset(drow, 0, size_t(w.kernel_w * cg) * sizeof(float));
          continue;
        }
        const float* srow = x + (n * w.ih + iy) * w.iw * ctot + c0;
        const int64_t ix0 = ox * w.stride_w - w.pad_left;
        if (runs && ix0 >= 0 && ix0 + w.kernel_w <= w.iw) {
          std::memcpy(drow, srow + ix0 * ctot, size_t(w.kernel_w * cg) * sizeof(float));
          continue;
        }
        for (int64_t j = 0; j < w.kernel_w; ++j) {
          const int64_t ix = ix0 + j * w.dilation_w;
          float* d = drow + j * cg;
          if (ix < 0 || ix >= w.iw) {
            std::memset(d, 0, size_t(cg) * sizeof(float));
          } else {
            std::memcpy(d, srow + ix * ctot, size_t(cg) * sizeof(float));
          }
        }
      }
    }
  }
}

/// gather_rows with the pixels split across the pool.
void gather_patches(const Window2d& w, int64_t ctot, int64_t c0, int64_t cg, const float* x, int64_t p0, int64_t p1,
                    float* rows) {
  const int64_t row_len = w.kernel_h * w.kernel_w * cg;
  parallel_for(p1 - p0, 16, [&](int64_t b, int64_t e) {
    gather_rows(w, ctot, c0, cg, x, p0 + b, p0 + e, rows + b * row_len);
  });
}

/// y[p] = clamp(y[p] (+ residual[p]), lo, hi) over `count` floats.
void finish_rows(float* y, const float* residual, int64_t count, float lo, float hi) {
  if (residual != nullptr) {
    for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(y[i] + residual[i], lo), hi);
  } else {
    clamp_range(y, count, lo, hi);
  }
}

}  // namespace

int64_t window_output_size(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t stride,
                           int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t padded = in + pad_before + pad_after;
  if (stride <= 0 || kernel <= 0 || padded < span) return 0;
  return (padded - span) / stride + 1;
}

void conv2d_nhwc_f32(const Window2d& win, int64_t groups, int64_t cin_g, int64_t cout_g, const float* x,
                     const float* w, const float* bias, const float* residual, float lo, float hi, float* y) {
  const int64_t pixels = win.n * win.oh * win.ow;
  const int64_t cin = groups * cin_g, cout = groups * cout_g;
  const int64_t row_len = win.kernel_h * win.kernel_w * cin_g;
  if (pixels == 0 || cout == 0) return;
  const bool in_place = groups == 1 && win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 &&
                        win.stride_w == 1 && win.pad_top == 0 && win.pad_left == 0 && win.oh == win.ih &&
                        win.ow == win.iw;
  const bool epilogue = residual != nullptr || clamps(lo, hi);
  if (groups == 1 && pixels >= 64 * int64_t(pool_threads())) {
    // At least 64 pixels per thread: each thread gathers and multiplies
    // its own rows (one single-threaded GEMM per block, the whole filter
    // width), then adds and clamps them while they are in its cache.
    parallel_for(pixels, 16, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> own;
      const int64_t blk = std::clamp<int64_t>(kPatchBlockFloats / 2 / std::max<int64_t>(row_len, 1), 1, e - b);
      if (!in_place) own.resize(size_t(blk * row_len));
      for (int64_t q0 = b; q0 < e; q0 += blk) {
        const int64_t q1 = std::min(e, q0 + blk);
        const float* a = x + q0 * cin;
        if (!in_place) {
          gather_rows(win, cin, 0, cin, x, q0, q1, own.data());
          a = own.data();
        }
        gemm_f32_nt_1t(q1 - q0, cout, row_len, a, row_len, w, y + q0 * cout, cout, bias);
        if (epilogue) finish_rows(y + q0 * cout, residual == nullptr ? nullptr : residual + q0 * cout, (q1 - q0) * cout, lo, hi);
      }
    });
    return;
  }
  const int64_t block = std::clamp<int64_t>(kPatchBlockFloats / std::max<int64_t>(row_len, 1), 1, pixels);
  thread_local std::vector<float> rows, part;
  if (!in_place) rows.resize(size_t(block * row_len));
  if (groups > 1) part.resize(size_t(block * cout_g));
  for (int64_t p0 = 0; p0 < pixels; p0 += block) {
    const int64_t p1 = std::min(pixels, p0 + block), m = p1 - p0;
    float* out = y + p0 * cout;
    for (int64_t g = 0; g < groups; ++g) {
      const float* a = x + p0 * cin;
      if (!in_place) {
        gather_patches(win, cin, g * cin_g, cin_g, x, p0, p1, rows.data());
        a = rows.data();
      }
      const float* wg = w + g * cout_g * row_len;
      const float* bg = bias == nullptr ? nullptr : bias + g * cout_g;
      if (groups == 1) {
        gemm_f32_nt(m, cout, row_len, a, wg, out, bg);
        continue;
      }
      gemm_f32_nt(m, cout_g, row_len, a, wg, part.data(), bg);
      for (int64_t r = 0; r < m; ++r) {
        std::memcpy(out + r * cout + g * cout_g, part.data() + r * cout_g, size_t(cout_g) * sizeof(float));
      }
    }
    if (!epilogue) continue;
    const float* res = residual == nullptr ? nullptr : residual + p0 * cout;
    parallel_for(m, 16, [&](int64_t b, int64_t e) {
      finish_rows(out + b * cout, res == nullptr ? nullptr : res + b * cout, (e - b) * cout, lo, hi);
    });
  }
}

int64_t PackedConvFilter::panels() const { return (cout + width - 1) / width; }

const float* PackedConvFilter::panel(int64_t p) const { return storage.data() + offset + p * row_len() * width; }

bool packed_conv_available() { return simd().conv_tile != nullptr; }

PackedConvFilter pack_conv_filter(const float* w, const float* bias, int64_t cout, int64_t kernel_h, int64_t kernel_w,
                                  int64_t cin) {
  PackedConvFilter f;
  f.cout = cout;
  f.kernel_h = kernel_h;
  f.kernel_w = kernel_w;
  f.cin = cin;
  f.width = conv_panel_width(cout);
  const int64_t len = f.row_len(), panels = f.panels(), width = f.width;
  constexpr int64_t kAlignFloats = 64 / sizeof(float);
  f.storage.assign(size_t(panels * len * width + kAlignFloats), 0.0f);
  const auto addr = reinterpret_cast<uintptr_t>(f.storage.data());
  f.offset = size_t((64 - addr % 64) % 64 / sizeof(float));
  float* dst = f.storage.data() + f.offset;
  for (int64_t o = 0; o < cout; ++o) {
    float* col = dst + (o / width) * len * width + o % width;
    const float* src = w + o * len;
    for (int64_t r = 0; r < len; ++r) col[r * width] = src[r];
  }
  f.bias.assign(size_t(panels * width), 0.0f);
  if (bias != nullptr) std::copy(bias, bias + cout, f.bias.begin());
  return f;
}

namespace {

/// The row pointers a conv_tile reads for output pixel m of a tile of mr:
/// per window row (or per tap with dilation) a pointer into the NHWC input,
/// the zero row for padding, or a gathered copy of a window row cut by the
/// image edge.
struct WindowRows {
  const Window2d& win;
  const float* x;
  int64_t cin;
  bool row_runs;  ///< one pointer per window row (kernel_w * cin floats) rather than per tap
  int64_t taps, klen;
  const float* zeros;
  float* cut;          ///< kConvTileRows * taps * klen floats
  const float** rows;  ///< [taps][mr]

  void set(int64_t m, int64_t mr, int64_t ox, int64_t oy, int64_t n) const {
    const int64_t ix0 = ox * win.stride_w - win.pad_left;
    for (int64_t i = 0; i < win.kernel_h; ++i) {
      const int64_t iy = oy * win.stride_h - win.pad_top + i * win.dilation_h;
      const bool row_in = iy >= 0 && iy < win.ih;
      const float* src = row_in ? x + (n * win.ih + iy) * win.iw * cin : nullptr;
      if (!row_runs) {
        for (int64_t j = 0; j < win.kernel_w; ++j) {
          const int64_t ix = ix0 + j * win.dilation_w;
          rows[(i * win.kernel_w + j) * mr + m] = row_in && ix >= 0 && ix < win.iw ? src + ix * cin : zeros;
        }
        continue;
      }
      const float*& slot = rows[i * mr + m];
      if (!row_in) {
        slot = zeros;
      } else if (ix0 >= 0 && ix0 + win.kernel_w <= win.iw) {
        slot = src + ix0 * cin;
      } else {
        float* d = cut + (m * taps + i) * klen;
        for (int64_t j = 0; j < win.kernel_w; ++j) {
          const int64_t ix = ix0 + j;
          if (ix < 0 || ix >= win.iw) {
            std::memset(d + j * cin, 0, size_t(cin) * sizeof(float));
          } else {
            std::memcpy(d + j * cin, src + ix * cin, size_t(cin) * sizeof(float));
          }
        }
        slot = d;
      }
    }
  }
};

}  // namespace

void conv2d_packed_nhwc_f32(const Window2d& win, const PackedConvFilter& f, const float* x, const float* residual,
                            float lo, float hi, float* y) {
  const auto tile = simd().conv_tile;
  const int64_t pixels = win.n * win.oh * win.ow, cout = f.cout, cin = f.cin;
  if (pixels == 0 || cout == 0) return;
  // A window row is one run of kernel_w * cin floats in NHWC when its taps
  // are adjacent; with dilation each tap is its own run.
  const bool row_runs = win.dilation_w == 1;
  const int64_t taps = row_runs ? win.kernel_h : win.kernel_h * win.kernel_w;
  const int64_t klen = row_runs ? win.kernel_w * cin : cin;
  // 1x1, stride 1, no padding: pixel p's window is input pixel p.
  const bool pointwise = win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 && win.stride_w == 1 &&
                         win.pad_top == 0 && win.pad_left == 0 && win.ih == win.oh && win.iw == win.ow;
  // Work items: (panel, chunk of 16 tiles), panel-major, so a thread's
  // contiguous share of items keeps one panel in cache across its chunks.
  constexpr int64_t kChunk = 16 * kConvTileRows;
  const int64_t chunks = (pixels + kChunk - 1) / kChunk;
  parallel_for(f.panels() * chunks, 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> zeros, cut;  // a padding row; window rows cut by the edge
    thread_local std::vector<const float*> rows;
    if (int64_t(zeros.size()) < klen) zeros.assign(size_t(klen), 0.0f);
    cut.resize(size_t(kConvTileRows * taps * klen));
    rows.resize(size_t(kConvTileRows * taps));
    const WindowRows window{win, x, cin, row_runs, taps, klen, zeros.data(), cut.data(), rows.data()};
    for (int64_t it = b; it < e; ++it) {
      const int64_t pnl = it / chunks, c0 = (it % chunks) * kChunk, c1 = std::min(pixels, c0 + kChunk);
      const int64_t col = pnl * f.width, nr = std::min(f.width, cout - col);
      // The first pixel's coordinates, then stepped: no divisions per pixel
      // (they cost as much as the tile on layers of a few channels).
      int64_t ox = c0 % win.ow, oy = (c0 / win.ow) % win.oh, n = c0 / (win.ow * win.oh);
      for (int64_t p0 = c0; p0 < c1; p0 += kConvTileRows) {
        const int64_t mr = std::min(kConvTileRows, c1 - p0);
        for (int64_t m = 0; m < mr; ++m) {
          if (pointwise) {
            rows[size_t(m)] = x + (p0 + m) * cin;
            continue;
          }
          window.set(m, mr, ox, oy, n);
          if (++ox == win.ow) {
            ox = 0;
            if (++oy == win.oh) oy = 0, ++n;
          }
        }
        const int64_t at = p0 * cout + col;
        tile(mr, rows.data(), taps, klen, f.panel(pnl), f.width, f.bias.data() + col,
             residual == nullptr ? nullptr : residual + at, cout, nr, lo, hi, y + at);
      }
    }
  });
}

void gemm_packed_panel_1t(int64_t r0, int64_t r1, const float* a, int64_t lda, const PackedConvFilter& f,
                          int64_t panel, float* c, int64_t ldc) {
  const auto tile = simd().conv_tile;
  const int64_t col = panel * f.width, nr = std::min(f.width, f.cout - col);
  const float* rows[kConvTileRows];
  for (int64_t p0 = r0; p0 < r1; p0 += kConvTileRows) {
    const int64_t mr = std::min(kConvTileRows, r1 - p0);
    for (int64_t m = 0; m < mr; ++m) rows[m] = a + (p0 + m) * lda;
    tile(mr, rows, 1, f.cin, f.panel(panel), f.width, f.bias.data() + col, nullptr, ldc, nr,
         -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(), c + p0 * ldc + col);
  }
}

void depthwise_conv2d_nhwc_f32(const Window2d& win, int64_t c_in, int64_t multiplier, const float* x, const float* w,
                               const float* bias, float lo, float hi, float* y) {
  const int64_t pixels = win.n * win.oh * win.ow, c = c_in * multiplier;
  parallel_for(pixels, 8, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* out = y + p * c;
      for (int64_t k = 0; k < c; ++k) out[k] = bias == nullptr ? 0.0f : bias[k];
      for_each_tap(win, p, [&](int64_t t, int64_t pixel) {
        const float* in = x + pixel * c_in;
        const float* tap = w + t * c;
        if (multiplier == 1) {
          for (int64_t k = 0; k < c; ++k) out[k] += in[k] * tap[k];
        } else {
          for (int64_t k = 0; k < c; ++k) out[k] += in[k / multiplier] * tap[k];
        }
      });
      if (clamps(lo, hi)) clamp_range(out, c, lo, hi);
    }
  });
}

void max_pool2d_nhwc_f32(const Window2d& win, int64_t c, const float* x, float lo, float hi, float* y) {
  const int64_t pixels = win.n * win.oh * win.ow;
  // Channels 16 at a time in four 4-float vector values (GCC's vector
  // extension, the baseline SSE width): max instructions, where a loop over
  // out[] stayed scalar, the compiler unable to rule out aliasing with the
  // input. (m < v ? v : m) is std::max(m, v), NaN handling included.
  using Quad = float __attribute__((vector_size(4 * sizeof(float))));
  constexpr int64_t kQuads = 4, kBlock = 4 * kQuads;
  parallel_for(pixels, 16, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* out = y + p * c;
      for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
        const int64_t n = std::min(kBlock, c - c0);
        constexpr float kLowest = -std::numeric_limits<float>::infinity();
        Quad m[kQuads];
        for (auto& q : m) q = Quad{kLowest, kLowest, kLowest, kLowest};
        for_each_tap(win, p, [&](int64_t, int64_t pixel) {
          const float* in = x + pixel * c + c0;
          if (n == kBlock) {
            for (int64_t q = 0; q < kQuads; ++q) {
              Quad v;
              std::memcpy(&v, in + 4 * q, sizeof v);
              m[q] = m[q] < v ? v : m[q];
            }
          } else {
            for (int64_t k = 0; k < n; ++k) m[k / 4][k % 4] = std::max(float(m[k / 4][k % 4]), in[k]);
          }
        });
        for (int64_t k = 0; k < n; ++k) out[c0 + k] = m[k / 4][k % 4];
      }
      if (clamps(lo, hi)) clamp_range(out, c, lo, hi);
    }
  });
}

void global_avg_pool_nhwc_f32(int64_t n, int64_t hw, int64_t c, const float* x, float lo, float hi, float* y) {
  const float count = float(hw);  // 0 pixels: 0 / 0 = NaN, as a mean of nothing is
  for (int64_t b = 0; b < n; ++b) {
    const float* img = x + b * hw * c;
    float* out = y + b * c;
    parallel_for(c, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t k = c0; k < c1; ++k) out[k] = 0.0f;
      for (int64_t p = 0; p < hw; ++p) {
        const float* in = img + p * c;
        for (int64_t k = c0; k < c1; ++k) out[k] += in[k];
      }
      for (int64_t k = c0; k < c1; ++k) out[k] = std::min(std::max(out[k] / count, lo), hi);
    });
  }
}

}  // namespace hf2pte::kernels
