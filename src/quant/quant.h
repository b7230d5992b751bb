// Weight and activation quantization math, in one place for the exporter (which
// computes the integers and scales), the runtime kernels (which unpack them) and
// the tests. The formulas are torchao's, computed in float32 in torchao's
// operation order so the integers come out as torchao's
// (docs/quantization.md; shared/fixtures-quant/README.md, "Formulas").
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "core/scalar_type.h"  // float_to_bf16 / bf16_to_float (scales upstream rounds to bf16)

namespace hf2pte::quant {

/// How the scales of a weight are chosen.
enum class QParams {
  kHqq,     ///< HQQ scale-only: up to 20 least-squares steps (optimum-executorch's default)
  kAffine,  ///< torchao's max-abs rule: scale = max|w| / ((qmax - qmin) / 2)
};
std::string_view qparams_name(QParams p);

/// A symmetric integer grid: bits 4 -> [-8, 7], 8 -> [-128, 127].
struct IntRange {
  int32_t qmin, qmax;
};
IntRange int_range(int bits);

/// Blocks of one weight matrix [rows, cols]: `group` consecutive elements of a
/// row share one scale; group 0 = the whole row (per channel).
struct BlockShape {
  int64_t rows = 0, cols = 0, group = 0;
  int64_t block() const { return group == 0 ? cols : group; }
  int64_t blocks_per_row() const { return cols / block(); }
  int64_t num_blocks() const { return rows * blocks_per_row(); }
};

/// Runs f(begin, end) over [0, count) in chunks, possibly in parallel. Results
/// never depend on how the range is split (every block is computed alone).
using ParallelFor = std::function<void(int64_t count, const std::function<void(int64_t, int64_t)>& f)>;
void serial_for(int64_t count, const std::function<void(int64_t, int64_t)>& f);

/// q[rows * cols] (int8 holding values in [qmin, qmax]) and scales[num_blocks]
/// (float32, row-major [rows, blocks_per_row]); zero points are 0.
struct QuantizedWeight {
  std::vector<int8_t> q;
  std::vector<float> scales;
};

/// Quantizes w[rows * cols] (row-major float32). cols % block == 0 is the
/// caller's check. HQQ sums Σ(W·Q) left to right within each block in float32
/// (numpy's "float32_sequential" realization), a fixed order: the bytes are the
/// same on every machine and for every split of the work.
QuantizedWeight quantize_weight(std::span<const float> w, const BlockShape& shape, int bits, QParams algo,
                                const ParallelFor& pf = serial_for);
/// The same without a copy of the weights: `w` is used as scratch (its
/// contents are unspecified afterwards). One layer in memory, not two.
QuantizedWeight quantize_weight_in_place(std::span<float> w, const BlockShape& shape, int bits, QParams algo,
                                         const ParallelFor& pf = serial_for);
/// The same for a bf16 checkpoint's weights held as their bf16 bits (half the
/// memory; widened to float32 exactly, so the result equals quantize_weight of
/// the widened values).
QuantizedWeight quantize_bf16_weight_in_place(std::span<uint16_t> w, const BlockShape& shape, int bits, QParams algo,
                                              const ParallelFor& pf = serial_for);

/// XNNPACK's 4-bit filter packing (qcint4 / qbint4): value + 8 per nibble, the
/// even column in the low nibble; an odd count is padded with 0 (value -8 + 8).
/// out gets ceil(n / 2) bytes per row.
void pack_int4_xnnpack(std::span<const int8_t> row, uint8_t* out);
/// Upstream's 4-bit embedding packing (embedding_4bit): the even column in the
/// HIGH nibble, each + 8.
void pack_int4_embedding(std::span<const int8_t> row, uint8_t* out);
/// Element c of a row packed by pack_int4_xnnpack / pack_int4_embedding.
inline int32_t xnnpack_int4_at(const uint8_t* row, int64_t c) {
  const uint8_t b = row[c / 2];
  return int32_t(c % 2 == 0 ? b & 0xF : b >> 4) - 8;
}
inline int32_t embedding_int4_at(const uint8_t* row, int64_t c) {
  const uint8_t b = row[c / 2];
  return int32_t(c % 2 == 0 ? b >> 4 : b & 0xF) - 8;
}

}  // namespace hf2pte::quant
