#include "checkpoint/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>

#include "core/mapped_file.h"

namespace hf2pte {

namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kArrayAlign = 64;          // numpy ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // numpy GROWTH_AXIS_MAX_DIGITS
constexpr size_t kMaxRank = 64;              // numpy's own limit (NPY_MAXDIMS)
// numpy refuses headers over 10'000 bytes unless asked (max_header_size); we
// allow more (2.0 headers exist) but bound what a hostile file makes us parse.
constexpr size_t kMaxHeaderBytes = 1 << 20;

struct Descr {
  std::string_view kind_size;  // "f4", without the byte-order character
  ScalarType type;
};
constexpr Descr kDescrs[] = {
    {"f4", ScalarType::kFloat}, {"f8", ScalarType::kDouble}, {"f2", ScalarType::kHalf},
    {"i8", ScalarType::kLong},  {"i4", ScalarType::kInt},    {"i2", ScalarType::kShort},
    {"i1", ScalarType::kChar},  {"u1", ScalarType::kByte},   {"b1", ScalarType::kBool},
};

std::optional<std::string_view> descr_kind(ScalarType t) {
  for (const auto& d : kDescrs) {
    if (d.type == t) return d.kind_size;
  }
  return std::nullopt;
}

// A minimal reader for the Python literal numpy writes as the header. It
// accepts exactly what numpy's safe_eval would for the three keys: quoted
// strings, True/False, and tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Status parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    HF2PTE_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key;
      HF2PTE_RETURN_IF_ERROR(string(&key));
      skip_ws();
      HF2PTE_RETURN_IF_ERROR(expect(':'));
      skip_ws();
      if (key == "descr" && !have_descr) {
        HF2PTE_RETURN_IF_ERROR(string(descr));
        have_descr = true;
      } else if (key == "fortran_order" && !have_fortran) {
        HF2PTE_RETURN_IF_ERROR(boolean(fortran));
        have_fortran = true;
      } else if (key == "shape" && !have_shape) {
        HF2PTE_RETURN_IF_ERROR(tuple(shape));
        have_shape = true;
      } else {
        return error(fmt::format("unexpected or repeated key '{}'", key));
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != '}') {
        return error("expected ',' or '}'");
      }
    }
    skip_ws();
    if (i_ != s_.size()) return error("trailing characters after the header dict");
    HF2PTE_CHECK_OR_RETURN(have_descr && have_fortran && have_shape, kInvalidInput,
                           "npy header lacks keys; expected 'descr', 'fortran_order' and 'shape', got {} ({})", s_,
                           where_);
    return Status::ok();
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  Status error(std::string_view what) const {
    return make_error(ErrorCode::kInvalidInput, "bad npy header: {} at character {}; got {} ({})", what, i_, s_,
                      where_);
  }
  Status expect(char c) {
    if (peek() != c) return error(fmt::format("expected '{}'", c));
    ++i_;
    return Status::ok();
  }
  Status string(std::string* out) {
    char q = peek();
    if (q != '\'' && q != '"') return error("expected a quoted string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) return error("unterminated string");
    *out = std::string(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return Status::ok();
  }
  Status boolean(bool* out) {
    if (s_.substr(i_, 4) == "True") {
      *out = true;
      i_ += 4;
    } else if (s_.substr(i_, 5) == "False") {
      *out = false;
      i_ += 5;
    } else {
      return error("expected True or False");
    }
    return Status::ok();
  }
  Status integer(int64_t* out) {
    if (peek() < '0' || peek() > '9') return error("expected a non-negative integer");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      uint64_t digit = uint64_t(peek() - '0');
      if (v > (uint64_t(std::numeric_limits<int64_t>::max()) - digit) / 10) return error("integer too large");
      v = v * 10 + digit;
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2 longs, as old numpy wrote them
    *out = int64_t(v);
    return Status::ok();
  }
  Status tuple(std::vector<int64_t>* out) {
    HF2PTE_RETURN_IF_ERROR(expect('('));
    out->clear();
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        break;
      }
      if (out->size() >= kMaxRank) return error(fmt::format("more than {} dimensions", kMaxRank));
      int64_t dim = 0;
      HF2PTE_RETURN_IF_ERROR(integer(&dim));
      out->push_back(dim);
      skip_ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ')') {
        return error("expected ',' or ')'");
      }
    }
    return Status::ok();
  }

  std::string_view s_;
  const std::string& where_;
  size_t i_ = 0;
};

uint32_t read_le(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_repr(const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return "()";
  if (sizes.size() == 1) return fmt::format("({},)", sizes[0]);
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + ")";
}

Status write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::kIoError, "cannot write file: {} ({})", std::strerror(errno), path);
    }
    data += n;
    size -= size_t(n);
  }
  return Status::ok();
}

}  // namespace

Result<HostTensor> parse_npy(std::span<const uint8_t> bytes, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, 6) == 0, kInvalidInput,
                         "not a .npy file; expected magic \\x93NUMPY, got {} bytes without it ({})", bytes.size(),
                         where);
  const uint8_t major = bytes[6], minor = bytes[7];
  HF2PTE_CHECK_OR_RETURN((major == 1 || major == 2 || major == 3) && minor == 0, kNotSupported,
                         "unsupported .npy version; expected 1.0, 2.0 or 3.0, got {}.{} ({})", major, minor, where);
  const size_t len_bytes = major == 1 ? 2 : 4;
  HF2PTE_CHECK_OR_RETURN(bytes.size() >= 8 + len_bytes, kInvalidInput,
                         "truncated .npy header; expected at least {} bytes, got {} ({})", 8 + len_bytes, bytes.size(),
                         where);
  const size_t header_len = read_le(bytes.data() + 8, int(len_bytes));
  const size_t header_begin = 8 + len_bytes;
  HF2PTE_CHECK_OR_RETURN(header_len <= kMaxHeaderBytes, kInvalidInput,
                         "npy header too large; expected at most {} bytes, got {} ({})", kMaxHeaderBytes, header_len,
                         where);
  HF2PTE_CHECK_OR_RETURN(header_len <= bytes.size() - header_begin, kInvalidInput,
                         "truncated .npy header; expected {} header bytes, got {} ({})", header_len,
                         bytes.size() - header_begin, where);
  std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_begin), header_len);

  std::string descr;
  bool fortran = false;
  HostTensor out;
  HF2PTE_RETURN_IF_ERROR(HeaderParser(header, where).parse(&descr, &fortran, &out.sizes));
  HF2PTE_CHECK_OR_RETURN(!fortran, kNotSupported,
                         "Fortran-order .npy arrays are not supported; expected fortran_order False, got True ({})",
                         where);

  // descr: byte order ('<' little, '|' not applicable, '=' native, which is
  // little on every host we build for) followed by kind and item size.
  std::optional<ScalarType> type;
  if (descr.size() == 3) {
    char order = descr[0];
    std::string_view kind = std::string_view(descr).substr(1);
    for (const auto& d : kDescrs) {
      if (d.kind_size != kind) continue;
      bool one_byte = element_size(d.type) == 1;
      if (order == '<' || order == '=' || order == '|' || (order == '>' && one_byte)) type = d.type;
    }
  }
  HF2PTE_CHECK_OR_RETURN(type.has_value(), kNotSupported,
                         "unsupported .npy dtype; expected one of <f4, <f8, <f2, <i8, <i4, <i2, |i1, |u1, |b1, got "
                         "'{}' ({})",
                         descr, where);
  out.dtype = *type;

  const size_t esize = element_size(out.dtype);
  const size_t data_size = bytes.size() - header_begin - header_len;
  // Checked arithmetic, so that a huge shape cannot wrap to the file's size.
  bool has_zero = false;
  for (int64_t d : out.sizes) has_zero = has_zero || d == 0;
  uint64_t numel = has_zero ? 0 : 1;
  bool overflow = false;
  for (int64_t d : out.sizes) {
    if (!has_zero) overflow = overflow || __builtin_mul_overflow(numel, uint64_t(d), &numel);
  }
  uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, uint64_t(esize), &nbytes);
  HF2PTE_CHECK_OR_RETURN(!overflow, kInvalidInput, "npy shape too large; expected a byte size below 2^64, got {} ({})",
                         shape_repr(out.sizes), where);
  HF2PTE_CHECK_OR_RETURN(nbytes == data_size, kInvalidInput,
                         "npy data size does not match its header; expected {} bytes for shape {} of '{}', got {} ({})",
                         nbytes, shape_repr(out.sizes), descr, data_size, where);
  const uint8_t* data = bytes.data() + header_begin + header_len;
  out.bytes.assign(data, data + data_size);
  if (out.dtype == ScalarType::kBool) {
    // Any other byte is not a valid C++ bool: reject it here, not in a kernel.
    for (size_t i = 0; i < out.bytes.size(); ++i) {
      HF2PTE_CHECK_OR_RETURN(out.bytes[i] <= 1, kInvalidInput,
                             "bad bool in .npy data; expected 0 or 1, got {} at element {} ({})", out.bytes[i], i,
                             where);
    }
  }
  return out;
}

Result<HostTensor> read_npy(const std::string& path) {
  std::error_code ec;
  HF2PTE_CHECK_OR_RETURN(std::filesystem::exists(path, ec), kNotFound, "missing .npy file ({})", path);
  HF2PTE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  return parse_npy(file->bytes(), path);
}

Result<std::vector<uint8_t>> encode_npy(const HostTensor& tensor) {
  auto kind = descr_kind(tensor.dtype);
  HF2PTE_CHECK_OR_RETURN(kind.has_value(), kNotSupported, "cannot write {} tensors to .npy; numpy has no such dtype",
                         scalar_type_name(tensor.dtype));
  uint64_t numel = 1;
  for (int64_t d : tensor.sizes) {
    HF2PTE_CHECK_OR_RETURN(d >= 0, kInvalidArgument, "negative size in tensor shape; got {}", d);
    HF2PTE_CHECK_OR_RETURN(d == 0 || numel <= tensor.bytes.size() / uint64_t(d), kInvalidArgument,
                           "tensor bytes do not match its shape; got {} bytes for shape {}", tensor.bytes.size(),
                           shape_repr(tensor.sizes));
    numel *= uint64_t(d);
  }
  const uint64_t expected = numel * element_size(tensor.dtype);
  HF2PTE_CHECK_OR_RETURN(expected == tensor.bytes.size(), kInvalidArgument,
                         "tensor bytes do not match its shape; expected {} bytes, got {}", expected,
                         tensor.bytes.size());

  const char order = element_size(tensor.dtype) == 1 ? '|' : '<';
  // numpy's _write_array_header: keys in sorted order, repr() values, then
  // spare room to grow axis 0 in place (numpy >= 1.23), then _wrap_header.
  std::string header = fmt::format("{{'descr': '{}{}', 'fortran_order': False, 'shape': {}, }}", order, *kind,
                                   shape_repr(tensor.sizes));
  if (!tensor.sizes.empty()) {
    size_t digits = std::to_string(tensor.sizes[0]).size();
    if (digits < kGrowthAxisMaxDigits) header.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // _wrap_header: hlen counts the final '\n'; the pad makes magic + length +
  // header a multiple of 64 and is a full 64 when it already is one.
  const size_t hlen = header.size() + 1;
  uint8_t major = 1;
  size_t prefix = 10;
  size_t padlen = kArrayAlign - ((prefix + hlen) % kArrayAlign);
  if (hlen + padlen > 0xFFFF) {
    major = 2;
    prefix = 12;
    padlen = kArrayAlign - ((prefix + hlen) % kArrayAlign);
  }
  const size_t total_header = hlen + padlen;

  // Sized once and filled in place (GCC 12 warns falsely on a chain of
  // vector::insert calls after reserve(), -Wstringop-overflow).
  std::vector<uint8_t> out(prefix + total_header + tensor.bytes.size(), uint8_t(' '));
  std::memcpy(out.data(), kMagic, 6);
  out[6] = major;
  out[7] = 0;
  for (size_t i = 0; i < prefix - 8; ++i) out[8 + i] = uint8_t((total_header >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + prefix, header.data(), header.size());
  // bytes [prefix + header.size(), prefix + total_header - 1) stay spaces.
  out[prefix + total_header - 1] = uint8_t('\n');
  if (!tensor.bytes.empty()) {
    std::memcpy(out.data() + prefix + total_header, tensor.bytes.data(), tensor.bytes.size());
  }
  return out;
}

Status write_npy(const std::string& path, const HostTensor& tensor) {
  HF2PTE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encode_npy(tensor));

  // Unique temporary name next to the target, so rename() stays within one
  // filesystem and is atomic. O_EXCL guards against a stale file of that name;
  // mode 0666 lets the umask decide permissions, as for any new file.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return make_error(ErrorCode::kIoError, "cannot create file: {} ({})", std::strerror(errno), tmp);

  Status st = write_all(fd, bytes.data(), bytes.size(), path);
  if (st.is_ok() && ::fsync(fd) != 0) {
    st = make_error(ErrorCode::kIoError, "cannot flush file: {} ({})", std::strerror(errno), path);
  }
  if (::close(fd) != 0 && st.is_ok()) {
    st = make_error(ErrorCode::kIoError, "cannot close file: {} ({})", std::strerror(errno), path);
  }
  if (st.is_ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = make_error(ErrorCode::kIoError, "cannot rename {} to the output: {} ({})", tmp, std::strerror(errno), path);
  }
  if (!st.is_ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace hf2pte
