// SHA-256, streaming. The XNNPACK writer keys weights in Program.named_data by
// the lowercase hex digest of their bytes, as upstream's serializer does
// (docs/xnnpack-payload.md §5, §10.7). A solved problem: OpenSSL's libcrypto
// computes it (with the CPU's SHA extensions where it has them: hashing was
// 67 % of a bench-110m export with our own implementation).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hf2pte::xnn {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t size);
  /// The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();
  /// finish() as 64 lowercase hex characters.
  std::string hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// Lowercase hex SHA-256 of `size` bytes.
std::string sha256_hex(const void* data, size_t size);

}  // namespace hf2pte::xnn
