// An owned, contiguous tensor on the host: what .npy files, method inputs and
// method outputs are exchanged as.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/scalar_type.h"

namespace hf2pte {

struct HostTensor {
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;  ///< numel * element_size(dtype), row-major

  int64_t numel() const {
    int64_t n = 1;
    for (auto s : sizes) n *= s;
    return n;
  }
  template <typename T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }

  template <typename T>
  static HostTensor from(ScalarType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
    HostTensor t{dtype, std::move(sizes), {}};
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
};

}  // namespace hf2pte
