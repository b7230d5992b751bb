// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions over NHWC (nhwc.h).
// Each 2x2 block of output pixels ("tile") is computed from its 4x4 input
// window d as Y = A^T [ (G g G^T) ⊙ (B^T d B) ] A, summed over input channels,
// with the constant matrices
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
// The channel sums are 16 GEMMs, one per position of the 4x4 transformed
// tile: [tiles, cin] x [cin, cout], so 16 multiplies give 4 outputs where
// direct convolution spends 36 (2.25x fewer). Every constant is exact in
// float, so the result differs from direct convolution only by rounding.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/optimized/gemm.h"
#include "kernels/optimized/nhwc.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::kernels {

namespace {

/// Tiles per pass: bounds the transformed input and product buffers
/// (16 x tiles x channels floats each) whatever the image size.
constexpr int64_t kTilesPerPass = 512;

/// t[k][c] = (B^T d B)[k] for channels c < cn, with d [16][cn] (the 4x4
/// window, channels innermost) and t [16] rows of stride `ts`: loops over
/// contiguous channels, which the compiler vectorizes.
inline void input_tiles(const float* d, int64_t cn, float* t, int64_t ts) {
  const float* r0 = d;
  const float* r1 = d + 4 * cn;
  const float* r2 = d + 8 * cn;
  const float* r3 = d + 12 * cn;
  for (int j = 0; j < 4; ++j) {
    // u = B^T d, column j of each row: u0 = r0 - r2, u1 = r1 + r2, u2 = r2 - r1, u3 = r1 - r3.
    float* t0 = t + (0 * 4 + j) * ts;
    float* t1 = t + (1 * 4 + j) * ts;
    float* t2 = t + (2 * 4 + j) * ts;
    float* t3 = t + (3 * 4 + j) * ts;
    const float* a0 = r0 + j * cn;
    const float* a1 = r1 + j * cn;
    const float* a2 = r2 + j * cn;
    const float* a3 = r3 + j * cn;
    for (int64_t c = 0; c < cn; ++c) {
      t0[c] = a0[c] - a2[c];
      t1[c] = a1[c] + a2[c];
      t2[c] = a2[c] - a1[c];
      t3[c] = a1[c] - a3[c];
    }
  }
  // then (B^T d) B along each row i: columns 0..3 -> s0 = u0 - u2, s1 = u1 + u2, s2 = u2 - u1, s3 = u1 - u3.
  for (int i = 0; i < 4; ++i) {
    float* c0 = t + (i * 4 + 0) * ts;
    float* c1 = t + (i * 4 + 1) * ts;
    float* c2 = t + (i * 4 + 2) * ts;
    float* c3 = t + (i * 4 + 3) * ts;
    for (int64_t c = 0; c < cn; ++c) {
      const float u0 = c0[c], u1 = c1[c], u2 = c2[c], u3 = c3[c];
      c0[c] = u0 - u2;
      c1[c] = u1 + u2;
      c2[c] = u2 - u1;
      c3[c] = u1 - u3;
    }
  }
}

}  // namespace

bool winograd_applies(const Window2d& w, int64_t groups) {
  return groups == 1 && w.kernel_h == 3 && w.kernel_w == 3 && w.stride_h == 1 && w.stride_w == 1 &&
         w.dilation_h == 1 && w.dilation_w == 1;
}

bool winograd_pays(const Window2d& w, int64_t cin) {
  const int64_t tiles = w.n * ((w.oh + 1) / 2) * ((w.ow + 1) / 2);
  // The packed tiles (AVX-512) take M = 16 tiles at full speed (7x7 outputs:
  // 1.35x faster than direct at 512 channels, Zen 5, 1 thread); sgemm, which
  // packs its operands per call, wants 32.
  return cin >= kWinogradMinInputChannels && tiles >= (packed_conv_available() ? 16 : 32);
}

WinogradFilter winograd_filter_3x3(const float* w, int64_t cout, int64_t cin) {
  WinogradFilter f;
  f.cout = cout;
  f.cin = cin;
  f.u.assign(size_t(16 * cout * cin), 0.0f);
  for (int64_t o = 0; o < cout; ++o) {
    for (int64_t c = 0; c < cin; ++c) {
      float g[9];
      for (int k = 0; k < 9; ++k) g[k] = w[(o * 9 + k) * cin + c];  // [cout, 3, 3, cin]
      float h[12];  // G g: 4x3
      for (int j = 0; j < 3; ++j) {
        h[0 * 3 + j] = g[0 * 3 + j];
        h[1 * 3 + j] = 0.5f * (g[0 * 3 + j] + g[1 * 3 + j] + g[2 * 3 + j]);
        h[2 * 3 + j] = 0.5f * (g[0 * 3 + j] - g[1 * 3 + j] + g[2 * 3 + j]);
        h[3 * 3 + j] = g[2 * 3 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T
        const float* r = h + i * 3;
        const float t[4] = {r[0], 0.5f * (r[0] + r[1] + r[2]), 0.5f * (r[0] - r[1] + r[2]), r[2]};
        for (int j = 0; j < 4; ++j) f.u[size_t(((i * 4 + j) * cout + o) * cin + c)] = t[j];
      }
    }
  }
  if (packed_conv_available()) {
    for (int k = 0; k < 16; ++k) f.packed.push_back(pack_conv_filter(f.u.data() + k * cout * cin, nullptr, cout, 1, 1, cin));
    f.u = {};
  }
  return f;
}

void conv2d_3x3_winograd_nhwc_f32(const Window2d& win, const WinogradFilter& f, const float* x, const float* bias,
                                  const float* residual, float lo, float hi, float* y) {
  const int64_t cin = f.cin, cout = f.cout;
  const int64_t th = (win.oh + 1) / 2, tw = (win.ow + 1) / 2, tiles = win.n * th * tw;
  if (tiles == 0 || cout == 0) return;
  const int64_t pass = std::min(tiles, kTilesPerPass);
  // The calling thread's buffers; the pool's threads see them through the
  // pointers (a thread_local named inside the lambdas would be their own).
  thread_local std::vector<float> v_buf, m_buf;
  v_buf.resize(size_t(16 * pass * cin));
  m_buf.resize(size_t(16 * pass * cout));
  float* const v = v_buf.data();
  float* const m = m_buf.data();
  for (int64_t t0 = 0; t0 < tiles; t0 += pass) {
    const int64_t nt = std::min(pass, tiles - t0);
    // 1. v[k][t][c] = (B^T d B)[k] of channel c of tile t0 + t.
    parallel_for(nt, 4, [&](int64_t b, int64_t e) {
      std::vector<float> d(size_t(16 * cin));  // [4x4 window][cin]
      for (int64_t t = b; t < e; ++t) {
        const int64_t tile = t0 + t;
        const int64_t tx = tile % tw, ty = (tile / tw) % th, n = tile / (tw * th);
        for (int r = 0; r < 4; ++r) {
          const int64_t iy = 2 * ty - win.pad_top + r;
          for (int s = 0; s < 4; ++s) {
            const int64_t ix = 2 * tx - win.pad_left + s;
            float* dst = d.data() + (r * 4 + s) * cin;
            if (iy < 0 || iy >= win.ih || ix < 0 || ix >= win.iw) {
              std::memset(dst, 0, size_t(cin) * sizeof(float));
            } else {
              std::memcpy(dst, x + ((n * win.ih + iy) * win.iw + ix) * cin, size_t(cin) * sizeof(float));
            }
          }
        }
        input_tiles(d.data(), cin, v + t * cin, pass * cin);
      }
    });
    // 2. m[k] = v[k] u[k]^T: 16 GEMMs [nt, cin] x [cin, cout], across the pool:
    // on the packed filters' tiles, items (k, panel, chunk of rows) ...
    if (!f.packed.empty()) {
      constexpr int64_t kChunk = 16 * kConvTileRows;
      const int64_t chunks = (nt + kChunk - 1) / kChunk, panels = f.packed[0].panels();
      parallel_for(16 * panels * chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t it = b; it < e; ++it) {
          const int64_t k = it / (panels * chunks), pnl = it / chunks % panels, r0 = it % chunks * kChunk;
          gemm_packed_panel_1t(r0, std::min(nt, r0 + kChunk), v + k * pass * cin, cin, f.packed[size_t(k)], pnl,
                               m + k * pass * cout, cout);
        }
      });
    } else {
    // ... else one single-threaded sgemm per position.
    parallel_for(16, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        // [49..512, >= 128] x [>= 128, cout]: below OpenBLAS's size limit, and
        // oneDNN's kernels are 1.5-2x faster here (ResNet-50 on Zen 5: 37.7 ->
        // 35.0 ms end to end).
        gemm_f32_nt_1t(nt, cout, cin, v + k * pass * cin, cin, f.u.data() + k * cout * cin, m + k * pass * cout, cout,
                       nullptr, GemmBlocks::kInLargeProgram);
      }
    });
    }
    // 3. y = A^T m A (+ bias, + residual, clamped) for the tile's in-bounds pixels.
    parallel_for(nt, 4, [&](int64_t b, int64_t e) {
      std::vector<float> rbuf(size_t(8 * cout));
      for (int64_t t = b; t < e; ++t) {
        const int64_t tile = t0 + t;
        const int64_t tx = tile % tw, ty = (tile / tw) % th, n = tile / (tw * th);
        // r = A^T a (2x4), rows over the output channels.
        float* r = rbuf.data();
        const auto a = [&](int k) { return m + (k * pass + t) * cout; };
        for (int j = 0; j < 4; ++j) {
          const float *a0 = a(0 * 4 + j), *a1 = a(1 * 4 + j), *a2 = a(2 * 4 + j), *a3 = a(3 * 4 + j);
          float* r0 = r + (0 * 4 + j) * cout;
          float* r1 = r + (1 * 4 + j) * cout;
          for (int64_t o = 0; o < cout; ++o) {
            r0[o] = a0[o] + a1[o] + a2[o];
            r1[o] = a1[o] - a2[o] - a3[o];
          }
        }
        for (int i = 0; i < 2; ++i) {
          const int64_t oy = 2 * ty + i;
          if (oy >= win.oh) break;
          const float *q0 = r + (i * 4 + 0) * cout, *q1 = r + (i * 4 + 1) * cout, *q2 = r + (i * 4 + 2) * cout,
                      *q3 = r + (i * 4 + 3) * cout;
          for (int j = 0; j < 2; ++j) {
            const int64_t ox = 2 * tx + j;
            if (ox >= win.ow) break;
            const int64_t at = ((n * win.oh + oy) * win.ow + ox) * cout;
            float* yo = y + at;
            const float* res = residual == nullptr ? nullptr : residual + at;
            for (int64_t o = 0; o < cout; ++o) {
              float val = (j == 0 ? q0[o] + q1[o] + q2[o] : q1[o] - q2[o] - q3[o]) + (bias == nullptr ? 0.0f : bias[o]);
              if (res != nullptr) val += res[o];
              yo[o] = std::min(std::max(val, lo), hi);
            }
          }
        }
      }
    });
  }
}

}  // namespace hf2pte::kernels
