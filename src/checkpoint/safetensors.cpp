#include "checkpoint/safetensors.h"

#include <algorithm>
#include <limits>

#include "checkpoint/json_fields.h"

namespace hf2pte {

using nlohmann::json;

namespace {

struct DtypeName {
  std::string_view name;
  ScalarType type;
};

// The safetensors dtypes we load. Others (F8_*, U16/U32/U64, ...) are valid
// safetensors but no Hugging Face checkpoint we target stores weights in them.
constexpr DtypeName kDtypes[] = {
    {"F32", ScalarType::kFloat}, {"F16", ScalarType::kHalf},  {"BF16", ScalarType::kBFloat16},
    {"F64", ScalarType::kDouble}, {"I64", ScalarType::kLong}, {"I32", ScalarType::kInt},
    {"I16", ScalarType::kShort},  {"I8", ScalarType::kChar},  {"U8", ScalarType::kByte},
    {"BOOL", ScalarType::kBool},
};

std::string supported_dtype_list() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads a JSON integer that must be a non-negative int64 (shape dims, offsets).
bool non_negative_int(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = int64_t(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = i;
    return true;
  }
  return false;
}

// One entry of the header, validated. `where` is "(file, tensor NAME)".
Status parse_entry(const std::string& name, const json& entry, uint64_t data_size, const std::string& where,
                   TensorRef* out, uint64_t* begin_out, uint64_t* end_out) {
  HF2PTE_CHECK_OR_RETURN(entry.is_object(), kInvalidInput, "tensor entry is not an object; expected object, got {} {}",
                         json_type_name(entry), where);
  // Unknown extra keys are ignored, as the reference implementation's serde
  // struct ignores them; the three below are required.
  auto dtype_it = entry.find("dtype");
  HF2PTE_CHECK_OR_RETURN(dtype_it != entry.end(), kInvalidInput,
                         "tensor entry lacks 'dtype'; expected keys dtype, shape, data_offsets {}", where);
  HF2PTE_CHECK_OR_RETURN(dtype_it->is_string(), kInvalidInput, "bad 'dtype'; expected string, got {} {}",
                         json_type_name(*dtype_it), where);
  const auto& dtype_name = dtype_it->get_ref<const std::string&>();
  auto dtype = safetensors_dtype(dtype_name);
  HF2PTE_CHECK_OR_RETURN(dtype.has_value(), kInvalidInput, "unsupported dtype; expected one of {}, got '{}' {}",
                         supported_dtype_list(), dtype_name, where);

  auto shape_it = entry.find("shape");
  HF2PTE_CHECK_OR_RETURN(shape_it != entry.end(), kInvalidInput,
                         "tensor entry lacks 'shape'; expected keys dtype, shape, data_offsets {}", where);
  HF2PTE_CHECK_OR_RETURN(shape_it->is_array(), kInvalidInput, "bad 'shape'; expected array, got {} {}",
                         json_type_name(*shape_it), where);
  HF2PTE_CHECK_OR_RETURN(shape_it->size() <= SafetensorsFile::kMaxRank, kInvalidInput,
                         "bad 'shape'; expected rank <= {}, got rank {} {}", SafetensorsFile::kMaxRank,
                         shape_it->size(), where);
  std::vector<int64_t> shape;
  bool has_zero = false;
  for (const json& d : *shape_it) {
    int64_t dim = 0;
    HF2PTE_CHECK_OR_RETURN(non_negative_int(d, &dim), kInvalidInput,
                           "bad 'shape'; expected non-negative integers, got {} {}", d.dump(), where);
    shape.push_back(dim);
    has_zero = has_zero || dim == 0;
  }
  // Checked arithmetic: a hostile shape must not wrap around to a small size
  // that happens to match data_offsets. A zero dim makes the tensor empty
  // whatever the other dims are.
  uint64_t numel = 1;
  bool overflow = false;
  if (has_zero) {
    numel = 0;
  } else {
    for (int64_t dim : shape) overflow = overflow || __builtin_mul_overflow(numel, uint64_t(dim), &numel);
  }
  uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, uint64_t(element_size(*dtype)), &nbytes);
  HF2PTE_CHECK_OR_RETURN(!overflow, kInvalidInput,
                         "tensor shape too large; expected a byte size below 2^64, got shape {} of {} {}",
                         shape_it->dump(), dtype_name, where);

  auto off_it = entry.find("data_offsets");
  HF2PTE_CHECK_OR_RETURN(off_it != entry.end(), kInvalidInput,
                         "tensor entry lacks 'data_offsets'; expected keys dtype, shape, data_offsets {}", where);
  int64_t begin = 0, end = 0;
  HF2PTE_CHECK_OR_RETURN(off_it->is_array() && off_it->size() == 2 && non_negative_int((*off_it)[0], &begin) &&
                             non_negative_int((*off_it)[1], &end),
                         kInvalidInput, "bad 'data_offsets'; expected [begin, end] of non-negative integers, got {} {}",
                         off_it->dump(), where);
  HF2PTE_CHECK_OR_RETURN(begin <= end, kInvalidInput, "bad 'data_offsets'; expected begin <= end, got [{}, {}] {}",
                         begin, end, where);
  HF2PTE_CHECK_OR_RETURN(uint64_t(end) <= data_size, kInvalidInput,
                         "data_offsets past the end of the file; expected end <= {}, got {} {}", data_size, end,
                         where);
  HF2PTE_CHECK_OR_RETURN(uint64_t(end - begin) == nbytes, kInvalidInput,
                         "tensor byte size does not match shape and dtype; expected {} bytes ({} x {}), got {} {}",
                         nbytes, shape_it->dump(), dtype_name, end - begin, where);

  out->name = name;
  out->dtype = *dtype;
  out->shape = std::move(shape);
  *begin_out = uint64_t(begin);
  *end_out = uint64_t(end);
  return Status::ok();
}

}  // namespace

std::optional<ScalarType> safetensors_dtype(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) return d.type;
  }
  return std::nullopt;
}

std::string_view safetensors_dtype_name(ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return "?";
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  HF2PTE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<SafetensorsFile> SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  const uint64_t size = file->size();
  HF2PTE_CHECK_OR_RETURN(size >= 8, kInvalidInput,
                         "not a safetensors file (too small); expected at least 8 bytes, got {} ({})", size, path);
  const uint64_t header_size = read_le64(file->data());
  HF2PTE_CHECK_OR_RETURN(header_size <= kMaxHeaderBytes, kInvalidInput,
                         "safetensors header too large; expected at most {} bytes, got {} ({})", kMaxHeaderBytes,
                         header_size, path);
  HF2PTE_CHECK_OR_RETURN(header_size <= size - 8, kInvalidInput,
                         "safetensors header longer than the file (truncated?); expected at most {} bytes, got {} ({})",
                         size - 8, header_size, path);
  std::string_view header(reinterpret_cast<const char*>(file->data() + 8), header_size);
  const uint64_t data_offset = 8 + header_size;
  const uint64_t data_size = size - data_offset;

  JsonParseOptions options;
  options.reject_duplicate_keys = true;
  // Entries nest at most three levels ({name: {shape: [..]}}); anything
  // deeper is not a safetensors header.
  options.max_depth = 4;
  auto parsed = parse_json(header, path, options);
  if (!parsed.is_ok()) {
    return Status(ErrorCode::kInvalidInput, "safetensors header: " + parsed.status().message());
  }
  const json& doc = *parsed;
  HF2PTE_CHECK_OR_RETURN(doc.is_object(), kInvalidInput, "safetensors header is not a JSON object; expected object, got {} ({})",
                         json_type_name(doc), path);

  SafetensorsFile out;
  out.path_ = path;
  out.file_ = file;
  out.header_size_ = header_size;

  struct Range {
    uint64_t begin, end;
    size_t idx;
  };
  std::vector<Range> ranges;
  ranges.reserve(doc.size());
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      HF2PTE_CHECK_OR_RETURN(entry.is_object(), kInvalidInput, "bad __metadata__; expected object, got {} ({})",
                             json_type_name(entry), path);
      for (const auto& [k, v] : entry.items()) {
        HF2PTE_CHECK_OR_RETURN(v.is_string(), kInvalidInput,
                               "bad __metadata__ value for '{}'; expected string, got {} ({})", k, json_type_name(v),
                               path);
        out.metadata_.emplace(k, v.get<std::string>());
      }
      continue;
    }
    std::string where = fmt::format("({}, tensor {})", path, name);
    HF2PTE_CHECK_OR_RETURN(!name.empty(), kInvalidInput, "empty tensor name; expected a name, got \"\" ({})", path);
    TensorRef ref;
    uint64_t begin = 0, end = 0;
    HF2PTE_RETURN_IF_ERROR(parse_entry(name, entry, data_size, where, &ref, &begin, &end));
    ref.bytes = file->bytes().subspan(data_offset + begin, end - begin);
    ref.file = path;
    ref.storage = file;
    ranges.push_back({begin, end, out.tensors_.size()});
    out.tensors_.push_back(std::move(ref));
  }

  // The reference implementation (safetensors Metadata::validate) requires the
  // tensors, sorted by offset, to tile the data section exactly: no overlap,
  // no gap, nothing left over. A file it rejects cannot come from
  // save_file(), so we reject it too instead of guessing what was meant.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  const std::string* previous = nullptr;
  for (const Range& r : ranges) {
    const std::string& name = out.tensors_[r.idx].name;
    if (r.begin < expected_begin) {
      return make_error(ErrorCode::kInvalidInput,
                        "overlapping data_offsets; expected begin >= {} (end of tensor {}), got {} ({}, tensor {})",
                        expected_begin, previous ? *previous : "", r.begin, path, name);
    }
    HF2PTE_CHECK_OR_RETURN(r.begin == expected_begin, kInvalidInput,
                           "gap in the data section; expected tensor to start at byte {}, got {} ({}, tensor {})",
                           expected_begin, r.begin, path, name);
    expected_begin = r.end;
    previous = &name;
  }
  HF2PTE_CHECK_OR_RETURN(expected_begin == data_size, kInvalidInput,
                         "bytes after the last tensor; expected a data section of {} bytes, got {} ({})",
                         expected_begin, data_size, path);

  // Present tensors in file order, which is also how they are best streamed.
  std::vector<TensorRef> ordered;
  ordered.reserve(ranges.size());
  for (const Range& r : ranges) ordered.push_back(std::move(out.tensors_[r.idx]));
  out.tensors_ = std::move(ordered);
  for (size_t i = 0; i < out.tensors_.size(); ++i) out.index_.emplace(out.tensors_[i].name, i);
  return out;
}

const TensorRef* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace hf2pte
