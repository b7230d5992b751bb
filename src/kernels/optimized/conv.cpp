// aten::convolution.out (2-D, f32, contiguous NCHW) as im2col + sgemm: per
// image and group, the patches become a [C/g * kh * kw, OH * OW] matrix (a 1x1
// stride-1 unpadded conv reads the input as it is) and W [O/g, C/g * kh * kw]
// times it is the output plane block, bias added per channel. The GEMM is
// gemm_f32 (one thread pool, oneDNN or OpenBLAS blocks). Anything else is
// the portable kernel's (transposed, other dtypes, strided tensors).
#include <cstring>
#include <vector>

#include "kernels/optimized/gemm.h"
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// col[(c * KH + i) * KW + j][y * OW + x] = in[c][y * sh - ph + i * dh][x * sw - pw + j * dw] (0 outside).
void im2col(const float* in, int64_t C, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t sh, int64_t sw,
            int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t OH, int64_t OW, float* col) {
  parallel_for(C * KH * KW, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r / (KH * KW), i = (r / KW) % KH, j = r % KW;
      float* dst = col + r * OH * OW;
      for (int64_t y = 0; y < OH; ++y) {
        const int64_t iy = y * sh - ph + i * dh;
        float* row = dst + y * OW;
        if (iy < 0 || iy >= H) {
          std::memset(row, 0, size_t(OW) * sizeof(float));
          continue;
        }
        const float* src = in + (c * H + iy) * W;
        for (int64_t x = 0; x < OW; ++x) {
          const int64_t ix = x * sw - pw + j * dw;
          row[x] = ix >= 0 && ix < W ? src[ix] : 0.0f;
        }
      }
    }
  });
}

}  // namespace

// [input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out, ret]
Status convolution_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ConvolutionOut;
  auto r = ArgReader::make(op, args);
  if (!r) return kernels::ConvolutionOut(ctx, args);
  auto in = r->tensor(0), w = r->tensor(1), out = r->tensor(9);
  auto bias = r->opt_tensor(2);
  auto transposed = r->bool_arg(6);
  auto groups = r->int_arg(8);
  std::vector<int64_t> stride, padding, dilation;
  if (!in || !w || !out || !bias || !transposed || !groups || *transposed || !r->int_list(3, &stride) ||
      !r->int_list(4, &padding) || !r->int_list(5, &dilation) || stride.size() != 2 || padding.size() != 2 ||
      dilation.size() != 2) {
    return kernels::ConvolutionOut(ctx, args);
  }
  const rt::Tensor &x = **in, &k = **w;
  const rt::Tensor* b = *bias;
  rt::Tensor& y = **out;
  const int64_t g = *groups;
  if (x.dtype() != ScalarType::kFloat || k.dtype() != ScalarType::kFloat || y.dtype() != ScalarType::kFloat || x.dim() != 4 ||
      k.dim() != 4 || !x.is_contiguous() || !k.is_contiguous() || (b && (b->dtype() != ScalarType::kFloat || b->dim() != 1 ||
      !b->is_contiguous())) || g < 1) {
    return kernels::ConvolutionOut(ctx, args);
  }
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = k.size(0), Cg = k.size(1), KH = k.size(2), KW = k.size(3);
  const int64_t sh = stride[0], sw = stride[1], ph = padding[0], pw = padding[1], dh = dilation[0], dw = dilation[1];
  if (C != Cg * g || O % g != 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0 || (b && b->size(0) != O)) {
    return kernels::ConvolutionOut(ctx, args);  // its error
  }
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  if (OH <= 0 || OW <= 0 || !y.resize(std::vector<int64_t>{N, O, OH, OW}) || !y.is_contiguous()) {
    return kernels::ConvolutionOut(ctx, args);
  }
  const int64_t Og = O / g, K = Cg * KH * KW, P = OH * OW;
  const bool direct = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  thread_local std::vector<float> col;
  if (!direct) col.resize(size_t(K * P));
  const float* px = x.data<float>();
  const float* pk = k.data<float>();
  float* py = y.data<float>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t gi = 0; gi < g; ++gi) {
      const float* src = px + (n * C + gi * Cg) * H * W;
      const float* B = src;
      if (!direct) {
        im2col(src, Cg, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW, col.data());
        B = col.data();
      }
      float* dst = py + (n * O + gi * Og) * P;
      gemm_f32(Og, P, K, 1.0f, pk + gi * Og * K, B, 0.0f, dst);
      if (b) {
        const float* pb = b->data<float>() + gi * Og;
        for (int64_t o = 0; o < Og; ++o) {
          float* row = dst + o * P;
          for (int64_t p = 0; p < P; ++p) row[p] += pb[o];
        }
      }
    }
  }
  if (args[10] != args[9]) *args[10] = *args[9];
  return Status::ok();
}

}  // namespace hf2pte::kernels
