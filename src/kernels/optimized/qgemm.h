// Quantized-filter GEMV/GEMM for XNNPACK FullyConnected: int8 / int4 filters
// (qcint8, qcint4, qbint4) against fp32 activations (weight-only: dequantized
// in registers) or against activations quantized per row on the fly (dynamic
// quantization, "8da8w"/"8da4w": XNNPACK's asymmetric int8 row parameters,
// int32 dot products, AVX-512 VNNI where the CPU has it).
//
// Packed layout (built once by pack_*): panels of 16 output columns, each one
// contiguous stream, so decode reads every weight once, sequentially, and a
// 64-byte load feeds one vpdpbusd for 16 columns:
//   int8   panel = [kp/4][16 cols][4 k] bytes                 (kp = k rounded up to 4)
//   int4   panel = [kp/8][16 cols][4 bytes], byte j of a col: low nibble k = 8t+j,
//                  high nibble k = 8t+4+j, stored value+8     (kp = k rounded up to 8)
//   int4 blocks: panel = per block b: the block's int4 [g/8][16][4] bytes, then
//                  its 16 bf16 scales (one stream: scales ride with their weights)
// Padding columns and k are zero weights (nibble 8), so the memory is the
// file's packed bytes plus scales plus one or two words per column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hf2pte::kernels {

enum class QFilterKind : uint8_t {
  kInt8,       ///< qcint8: int8, per-output-channel fp32 scales
  kInt4,       ///< qcint4: int4, per-output-channel fp32 scales
  kInt4Block,  ///< qbint4: int4, bf16 scales per [column, k / group]
};

/// Columns per panel.
inline constexpr int64_t kQPanel = 16;

/// A filter packed for the kernels. W[n, k] = value * scale (of the column or block).
struct QFilter {
  QFilterKind kind = QFilterKind::kInt8;
  int64_t n = 0, k = 0;
  int64_t kp = 0;       ///< k rounded up to the kernel's step (4 int8, 8 int4; = k for blocks)
  int64_t group = 0;    ///< block size along k (kInt4Block)
  int64_t panels = 0;   ///< ceil(n / 16)
  int64_t panel_bytes = 0;
  std::vector<uint8_t> data;    ///< panels * panel_bytes
  std::vector<float> scale;     ///< [panels * 16] per-column scale (channel kinds; 0 in padding)
  std::vector<int32_t> wsum;    ///< [panels * 16] sum_k value (channel kinds)
  std::vector<float> wsumf;     ///< [panels * 16] sum_b scale_b * sum_{k in b} value (kInt4Block)

  int64_t nblocks() const { return kind == QFilterKind::kInt4Block ? k / group : 0; }
  size_t bytes() const {
    return data.size() + 4 * (scale.size() + wsum.size() + wsumf.size());
  }
};

/// Largest k the int32 accumulators take exactly for int8 filters
/// (|sum (q + 128) w| <= 255 * 128 * k < 2^31).
inline constexpr int64_t kQMaxInt8K = 65536;

/// `w` int8 [n, k] row-major, `scales` [n].
QFilter pack_qfilter_int8(const int8_t* w, int64_t n, int64_t k, const float* scales);
/// `w` XNNPACK's 4-bit packing [n, ceil(k/2)] (value + 8, even column in the low nibble), `scales` [n].
QFilter pack_qfilter_int4(const uint8_t* w, int64_t n, int64_t k, const float* scales);
/// Same packing, `block_scales` [n, k / group] (bf16 values held as float: the
/// low 16 bits must be zero), group a multiple of 8 dividing k.
QFilter pack_qfilter_int4_block(const uint8_t* w, int64_t n, int64_t k, int64_t group, const float* block_scales);

/// y[M, n] = dq(x[M, k]) . W^T (+ bias[n]) where dq quantizes every `quant_row`
/// consecutive elements of x (a multiple of k: XNNPACK's PerTokenDynamicQuant
/// rows) to int8 with XNNPACK's asymmetric parameters, exactly as the
/// reference runner does, and the products are summed in int32.
void qgemm_dynamic(int64_t M, const float* x, int64_t quant_row, const QFilter& w, const float* bias, float* y);

/// y[M, n] = x[M, k] . W^T (+ bias[n]), fp32 activations, W dequantized in registers.
void qgemm_weight_only(int64_t M, const float* x, const QFilter& w, const float* bias, float* y);

/// The ISA the quantized kernels run on ("avx512vnni", "avx2" or "generic").
const char* qgemm_isa();
/// Tests and benches: run on the named ISA's kernels ("generic", "avx2",
/// "avx512vnni"), or on the best one for nullptr. False (and no change) when
/// this CPU cannot run it.
bool qgemm_force_isa(const char* isa);

// ---- internals shared by the ISA files ----

/// Activations quantized for one call (the calling thread's workspace).
struct QActs {
  int64_t m = 0, kp = 0, nblocks = 0;
  /// [m][kp]: q + 128 as uint8 for int8 filters, q as int8 for int4 ones; padding encodes q = 0.
  std::vector<uint8_t> q;
  std::vector<float> scale;      ///< [m]
  std::vector<int32_t> zp;       ///< [m]
  std::vector<int32_t> qsum;     ///< [m] sum of q over the row
  std::vector<int32_t> bsum;     ///< [m][nblocks] -8 * sum of q over each block (kInt4Block)
  /// [m][kp] q + 128 widened to uint16, for kernels that multiply int8 filters
  /// in int16 (QGemmKernels::widened_int8_acts; GEMM only, m > 1).
  std::vector<uint16_t> q16;
};

/// XNNPACK's asymmetric row parameters from a row's range (lo = min(0, min x),
/// hi = max(0, max x)), the reference runner's formulas: scale, inverse scale
/// and integer zero point (held as float).
inline void qparams_from_range(float lo, float hi, float* scale, float* inv_scale, float* zp) {
  const float inv = lo == hi ? 1.0f : 255.0f / (hi - lo);
  const float zp_min_err = -128.0f + lo * inv, zp_max_err = 127.0f + hi * inv;
  float z = zp_min_err + zp_max_err > 0 ? -128.0f - lo * inv : 127.0f - hi * inv;
  z = z < -128.0f ? -128.0f : (z > 127.0f ? 127.0f : z);
  *zp = __builtin_nearbyintf(z);
  *inv_scale = inv;
  *scale = 1.0f / inv;
}

struct QGemmKernels {
  const char* isa;
  /// quantize_rows also fills QActs::q16 for int8 filters when m > 1 (the caller sizes it).
  bool widened_int8_acts;
  /// Quantizes rows [r0, r1) of x ([m][k]) into `a`: a.q, a.qsum, a.bsum. With
  /// `inv` null each row is its own quantization row (a.scale, a.zp written
  /// here); else a.scale / a.zp are given and inv[r] is row r's inverse scale.
  void (*quantize_rows)(const float* x, int64_t k, const float* inv, QFilterKind kind, int64_t group, QActs& a,
                        int64_t r0, int64_t r1);
  /// Dynamic quant: outputs of panels [p0, p1) for all a.m rows.
  void (*dynamic_panels)(const QFilter& w, const QActs& a, const float* bias, float* y, int64_t p0, int64_t p1);
  /// Weight-only: x padded to [m][w.kp] floats (zeros beyond k).
  void (*weight_only_panels)(const QFilter& w, const float* xp, int64_t m, const float* bias, float* y, int64_t p0,
                             int64_t p1);
};

namespace generic {
extern const QGemmKernels kQGemm;
}
namespace avx2 {
extern const QGemmKernels kQGemm;
}
namespace avx512vnni {
extern const QGemmKernels kQGemm;
}

}  // namespace hf2pte::kernels
