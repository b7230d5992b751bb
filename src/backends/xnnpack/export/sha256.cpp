#include "backends/xnnpack/export/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <cstdio>

namespace hf2pte::xnn {

// An EVP digest context; OpenSSL picks the SHA-NI / AVX2 / scalar code for this CPU.
struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

namespace {
/// OpenSSL fails here only when it cannot allocate: no partial digest is usable.
void check(int ok) {
  if (ok != 1) {
    std::fputs("hf2pte: error: OpenSSL SHA-256 failed (out of memory?) (sha256)\n", stderr);
    std::abort();
  }
}
}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  check(ctx_->md != nullptr ? 1 : 0);
  check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr));
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t size) {
  if (size > 0) check(EVP_DigestUpdate(ctx_->md, data, size));
}

std::array<uint8_t, 32> Sha256::finish() {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  check(EVP_DigestFinal_ex(ctx_->md, out.data(), &len));
  check(len == out.size() ? 1 : 0);
  return out;
}

std::string Sha256::hex() {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : finish()) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string sha256_hex(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex();
}

}  // namespace hf2pte::xnn
