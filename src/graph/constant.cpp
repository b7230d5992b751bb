#include "graph/constant.h"

#include <algorithm>
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

}  // namespace

ConstantData make_constant(const ConstantRecipe& r) {
  ConstantData c;
  c.dtype = r.dtype;
  int64_t rows = r.source.shape.empty() ? 1 : r.source.shape[0];
  int64_t row_begin = r.row_begin;
  int64_t row_end = r.row_end < 0 ? rows : r.row_end;
  int64_t cols = 1;  // elements per row
  for (size_t i = 1; i < r.source.shape.size(); ++i) cols *= r.source.shape[i];
  int64_t nrows = row_end - row_begin;
  if (r.source.shape.empty()) {
    c.sizes = {};
  } else if (r.transpose) {
    c.sizes = {cols, nrows};
  } else {
    c.sizes = r.source.shape;
    c.sizes[0] = nrows;
  }
  c.origin = r.source.name;
  c.source_dtype = r.source.dtype;
  if (r.row_begin != 0 || r.row_end >= 0) c.origin += fmt::format("[{}:{}]", row_begin, row_end);
  if (r.transpose) c.origin += ".T";
  if (r.dtype != r.source.dtype) c.origin += fmt::format(" as {}", scalar_type_name(r.dtype));
  c.dedup_key = fmt::format("{}:{}:{}:{}:{}", static_cast<const void*>(r.source.bytes.data()), row_begin, row_end,
                            r.transpose, int(r.dtype));

  if (c.sizes.size() == 2) {
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
  bool transpose = r.transpose;
  ScalarType dst = r.dtype;
  c.write = [=](const ConstantData::Sink& sink) -> Status {
    const uint8_t* base = src.bytes.data() + size_t(row_begin) * size_t(cols) * in_size;
    const size_t src_bytes = size_t(nrows) * size_t(cols) * in_size;
    constexpr size_t kChunkBytes = 1 << 20;
    if (!transpose && src.dtype == dst) {
      // Straight from the mapping, releasing pages behind us to keep RSS flat.
      constexpr size_t kCopyChunk = 16u << 20;
      for (size_t off = 0; off < src_bytes; off += kCopyChunk) {
        size_t n = std::min(kCopyChunk, src_bytes - off);
        HF2PTE_RETURN_IF_ERROR(sink(base + off, n));
        MappedFile::release_pages(base + off, n);
      }
      return Status::ok();
    }
    std::vector<uint8_t> buf;
    if (!transpose) {
      size_t total = size_t(nrows) * size_t(cols);
      size_t per_chunk = std::max<size_t>(1, kChunkBytes / out_size);
      buf.resize(std::min(total, per_chunk) * out_size);
      for (size_t i = 0; i < total; i += per_chunk) {
        size_t n = std::min(per_chunk, total - i);
        for (size_t j = 0; j < n; ++j) store_element(&buf[j * out_size], dst, load_element(base + (i + j) * in_size, src.dtype));
        HF2PTE_RETURN_IF_ERROR(sink(buf.data(), n * out_size));
        MappedFile::release_pages(base + i * in_size, n * in_size);
      }
      return Status::ok();
    }
    // Transpose in column blocks: each block reads a strip of every source row
    // once and writes `block` complete output rows, so memory stays bounded.
    size_t block = std::max<size_t>(1, std::min<size_t>(64, kChunkBytes * 8 / std::max<size_t>(1, size_t(nrows) * out_size)));
    buf.resize(block * size_t(nrows) * out_size);
    for (int64_t c0 = 0; c0 < cols; c0 += int64_t(block)) {
      int64_t bc = std::min<int64_t>(int64_t(block), cols - c0);
      for (int64_t row = 0; row < nrows; ++row) {
        const uint8_t* in = base + (size_t(row) * size_t(cols) + size_t(c0)) * in_size;
        for (int64_t j = 0; j < bc; ++j) {
          store_element(&buf[(size_t(j) * size_t(nrows) + size_t(row)) * out_size], dst, load_element(in + size_t(j) * in_size, src.dtype));
        }
      }
      HF2PTE_RETURN_IF_ERROR(sink(buf.data(), size_t(bc) * size_t(nrows) * out_size));
    }
    // Every column block reads every row, so pages are released once at the end:
    // the peak is one source matrix, not the checkpoint.
    MappedFile::release_pages(base, src_bytes);
    return Status::ok();
  };
  return c;
}

}  // namespace hf2pte::graph
