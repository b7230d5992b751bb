// SHA-256 (FIPS 180-4), streaming. The XNNPACK writer keys weights in
// Program.named_data by the lowercase hex digest of their bytes, as upstream's
// serializer does (docs/xnnpack-payload.md §5, §10.7).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hf2pte::xnn {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  /// The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();
  /// finish() as 64 lowercase hex characters.
  std::string hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// Lowercase hex SHA-256 of `size` bytes.
std::string sha256_hex(const void* data, size_t size);

}  // namespace hf2pte::xnn
