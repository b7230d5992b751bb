#include "graph/constant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/mapped_file.h"

namespace hf2pte::graph {

namespace {

float load_element(const uint8_t* p, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat: { float f; std::memcpy(&f, p, 4); return f; }
    case ScalarType::kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case ScalarType::kHalf: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case ScalarType::kDouble: { double d; std::memcpy(&d, p, 8); return float(d); }
    default: return 0.0f;
  }
}

void store_element(uint8_t* p, ScalarType t, float f) {
  switch (t) {
    case ScalarType::kBFloat16: { uint16_t v = float_to_bf16(f); std::memcpy(p, &v, 2); break; }
    case ScalarType::kHalf: { uint16_t v = float_to_half(f); std::memcpy(p, &v, 2); break; }
    default: std::memcpy(p, &f, 4); break;
  }
}

/// n contiguous elements of type In to fp16 through `widen` and float_to_half
/// (the same rounding as store_element, without its per-element switch).
template <typename In, float (*widen)(In)>
void run_to_half(const uint8_t* in, uint8_t* out, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    In v;
    std::memcpy(&v, in + sizeof(In) * j, sizeof(In));
    const uint16_t h = float_to_half(widen(v));
    std::memcpy(out + 2 * j, &h, 2);
  }
}

float float_identity(float f) { return f; }

/// Converts n contiguous elements in one tight loop where the pair has one
/// (bf16 -> f32 is a 16-bit shift, which the compiler vectorizes; bf16 or f32
/// -> f16 is `--linear-weights fp16`); false for other pairs, which go element
/// by element. bf16 -> f32 per element through load_element was 45 % of a
/// bench-1b export, bf16 -> f16 ~45 % of its fp16-weights export.
bool convert_run(const uint8_t* in, ScalarType from, uint8_t* out, ScalarType to, size_t n) {
  if (from == to) {
    std::memcpy(out, in, n * element_size(to));
    return true;
  }
  if (from == ScalarType::kBFloat16 && to == ScalarType::kFloat) {
    for (size_t j = 0; j < n; ++j) {
      uint16_t v;
      std::memcpy(&v, in + 2 * j, 2);
      const uint32_t bits = uint32_t(v) << 16;
      std::memcpy(out + 4 * j, &bits, 4);
    }
    return true;
  }
  if (to == ScalarType::kHalf && from == ScalarType::kBFloat16) {
    run_to_half<uint16_t, bf16_to_float>(in, out, n);
    return true;
  }
  if (to == ScalarType::kHalf && from == ScalarType::kFloat) {
    run_to_half<float, float_identity>(in, out, n);
    return true;
  }
  return false;
}

/// Element j of the strip (n elements of `size` bytes) to out + j * stride.
void scatter_strip(const uint8_t* strip, size_t n, size_t size, uint8_t* out, size_t stride) {
  auto scatter = [&]<size_t kSize>() {
    for (size_t j = 0; j < n; ++j) std::memcpy(out + j * stride, strip + j * kSize, kSize);
  };
  if (size == 2) {
    scatter.template operator()<2>();
  } else if (size == 4) {
    scatter.template operator()<4>();
  } else {
    for (size_t j = 0; j < n; ++j) std::memcpy(out + j * stride, strip + j * size, size);
  }
}

std::string picks_text(const std::vector<int64_t>& v) {
  if (v.empty()) return "";
  std::string s = fmt::format("{}", v[0]);
  for (size_t i = 1; i < v.size() && i < 4; ++i) s += fmt::format(",{}", v[i]);
  return v.size() > 4 ? s + fmt::format(",...({})", v.size()) : s;
}

}  // namespace

ConstantData make_constant(const ConstantRecipe& r) {
  ConstantData c;
  c.dtype = r.dtype;
  int64_t numel = 1;
  for (int64_t d : r.source.shape) numel *= d;
  // The 2-D view: rows of `cols` elements.
  int64_t cols = r.row_width;
  if (cols <= 0) {
    cols = 1;
    for (size_t i = 1; i < r.source.shape.size(); ++i) cols *= r.source.shape[i];
  }
  const int64_t rows = cols == 0 ? 0 : (r.source.shape.empty() ? 1 : numel / cols);
  const int64_t row_begin = r.row_begin;
  const int64_t row_end = r.row_end < 0 ? rows : r.row_end;
  const int64_t nrows = r.rows.empty() ? row_end - row_begin : int64_t(r.rows.size());
  const int64_t ncols = r.cols.empty() ? cols : int64_t(r.cols.size());
  const bool picked = r.row_width > 0 || !r.rows.empty() || !r.cols.empty();
  if (!r.sizes.empty()) {
    c.sizes = r.sizes;
  } else if (r.source.shape.empty()) {
    c.sizes = {};
  } else if (r.transpose) {
    c.sizes = {ncols, nrows};
  } else if (picked) {
    c.sizes = {nrows, ncols};
  } else {
    c.sizes = r.source.shape;
    c.sizes[0] = nrows;
  }
  c.origin = r.source.name;
  c.source_dtype = r.source.dtype;
  if (r.row_width > 0) c.origin += fmt::format(".view(-1,{})", r.row_width);
  if (r.row_begin != 0 || r.row_end >= 0) c.origin += fmt::format("[{}:{}]", row_begin, row_end);
  if (!r.rows.empty()) c.origin += fmt::format(".rows[{}]", picks_text(r.rows));
  if (!r.cols.empty()) c.origin += fmt::format(".cols[{}]", picks_text(r.cols));
  if (r.transpose) c.origin += ".T";
  if (r.map == ConstantRecipe::Map::kNegExp) c.origin = "-exp(" + c.origin + ")";
  if (r.dtype != r.source.dtype) c.origin += fmt::format(" as {}", scalar_type_name(r.dtype));
  // Picks are part of the identity: the full lists, not the abbreviated origin text.
  std::string picks;
  for (int64_t i : r.rows) picks += fmt::format("{},", i);
  picks += "|";
  for (int64_t i : r.cols) picks += fmt::format("{},", i);
  c.dedup_key = fmt::format("{}:{}:{}:{}:{}:{}:{}:{}", static_cast<const void*>(r.source.bytes.data()), r.row_width,
                            row_begin, row_end, picks, r.transpose, int(r.dtype), int(r.map));

  if (c.sizes.size() == 2 && r.sizes.empty()) {
    ConstantRecipe t = r;
    t.transpose = !r.transpose;
    c.transposed = [t] { return make_constant(t); };
  }
  c.converted = [r](ScalarType dtype) {
    ConstantRecipe t = r;
    t.dtype = dtype;
    return make_constant(t);
  };
  const size_t in_size = element_size(r.source.dtype);
  const size_t out_size = element_size(r.dtype);
  TensorSource src = r.source;
  const bool transpose = r.transpose;
  const ScalarType dst = r.dtype;
  const std::vector<int64_t> row_pick = r.rows, col_pick = r.cols;
  const bool neg_exp = r.map == ConstantRecipe::Map::kNegExp;
  c.write = [=](const ConstantData::Sink& sink) -> Status {
    auto release = [&](const void* p, size_t n) {
      if (src.file_mapped) MappedFile::release_pages(p, n);
    };
    const uint8_t* base = src.bytes.data() + size_t(row_begin) * size_t(cols) * in_size;
    const size_t block_bytes = size_t(row_end - row_begin) * size_t(cols) * in_size;
    constexpr size_t kChunkBytes = 1 << 20;
    auto src_row = [&](int64_t i) { return row_pick.empty() ? i : row_pick[size_t(i)]; };
    auto src_col = [&](int64_t j) { return col_pick.empty() ? j : col_pick[size_t(j)]; };
    auto load = [&](const uint8_t* p) {
      const float v = load_element(p, src.dtype);
      return neg_exp ? float(-std::exp(double(v))) : v;
    };
    auto element = [&](int64_t i, int64_t j) {
      return load(base + (size_t(src_row(i)) * size_t(cols) + size_t(src_col(j))) * in_size);
    };
    if (!transpose && row_pick.empty() && col_pick.empty()) {
      if (src.dtype == dst && !neg_exp) {
        // Straight from the mapping, releasing pages behind us to keep RSS flat.
        constexpr size_t kCopyChunk = 16u << 20;
        for (size_t off = 0; off < block_bytes; off += kCopyChunk) {
          size_t n = std::min(kCopyChunk, block_bytes - off);
          HF2PTE_RETURN_IF_ERROR(sink(base + off, n));
          release(base + off, n);
        }
        return Status::ok();
      }
      std::vector<uint8_t> buf;
      size_t total = size_t(nrows) * size_t(cols);
      size_t per_chunk = std::max<size_t>(1, kChunkBytes / out_size);
      buf.resize(std::min(total, per_chunk) * out_size);
      for (size_t i = 0; i < total; i += per_chunk) {
        size_t n = std::min(per_chunk, total - i);
        if (neg_exp || !convert_run(base + i * in_size, src.dtype, buf.data(), dst, n)) {
          for (size_t j = 0; j < n; ++j) store_element(&buf[j * out_size], dst, load(base + (i + j) * in_size));
        }
        HF2PTE_RETURN_IF_ERROR(sink(buf.data(), n * out_size));
        release(base + i * in_size, n * in_size);
      }
      return Status::ok();
    }
    std::vector<uint8_t> buf;
    if (!transpose) {
      // Picked rows and columns, a bounded number of output rows at a time.
      const size_t per_chunk = std::max<size_t>(1, kChunkBytes / std::max<size_t>(1, size_t(ncols) * out_size));
      buf.resize(std::min(size_t(nrows), per_chunk) * size_t(ncols) * out_size);
      for (int64_t i0 = 0; i0 < nrows; i0 += int64_t(per_chunk)) {
        const int64_t n = std::min<int64_t>(int64_t(per_chunk), nrows - i0);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < ncols; ++j) {
            store_element(&buf[(size_t(i) * size_t(ncols) + size_t(j)) * out_size], dst, element(i0 + i, j));
          }
        }
        HF2PTE_RETURN_IF_ERROR(sink(buf.data(), size_t(n) * size_t(ncols) * out_size));
      }
      release(base, block_bytes);
      return Status::ok();
    }
    // Transpose in column blocks: each block reads a strip of every source row
    // once and writes `block` complete output rows, so memory stays bounded.
    // Without picks or a map, each row's strip is one contiguous run:
    // converted in one loop, then scattered to the output rows (the element
    // path took 20 s of bench-1b's export for its 22 [5632, 2048] filters).
    size_t block = std::max<size_t>(1, std::min<size_t>(64, kChunkBytes * 8 / std::max<size_t>(1, size_t(nrows) * out_size)));
    buf.resize(block * size_t(nrows) * out_size);
    std::vector<uint8_t> strip(block * out_size);
    const bool runs = row_pick.empty() && col_pick.empty() && !neg_exp;
    for (int64_t c0 = 0; c0 < ncols; c0 += int64_t(block)) {
      int64_t bc = std::min<int64_t>(int64_t(block), ncols - c0);
      for (int64_t row = 0; row < nrows; ++row) {
        const uint8_t* in = base + (size_t(row) * size_t(cols) + size_t(c0)) * in_size;
        if (runs && convert_run(in, src.dtype, strip.data(), dst, size_t(bc))) {
          scatter_strip(strip.data(), size_t(bc), out_size, &buf[size_t(row) * out_size], size_t(nrows) * out_size);
          continue;
        }
        for (int64_t j = 0; j < bc; ++j) {
          store_element(&buf[(size_t(j) * size_t(nrows) + size_t(row)) * out_size], dst, element(row, c0 + j));
        }
      }
      HF2PTE_RETURN_IF_ERROR(sink(buf.data(), size_t(bc) * size_t(nrows) * out_size));
    }
    // Every column block reads every row, so pages are released once at the end:
    // the peak is one source matrix, not the checkpoint.
    release(base, block_bytes);
    return Status::ok();
  };
  return c;
}

}  // namespace hf2pte::graph
