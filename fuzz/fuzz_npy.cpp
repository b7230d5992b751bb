// libFuzzer target: .npy parsing (hf2pte run reads user-provided arrays).
#include <cstdint>
#include <span>

#include "checkpoint/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)hf2pte::parse_npy(std::span<const uint8_t>(data, size), "fuzz.npy");
  return 0;
}
