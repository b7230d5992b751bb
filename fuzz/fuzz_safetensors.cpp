// libFuzzer target: safetensors header and layout validation on untrusted bytes.
#include <cstdint>
#include <vector>

#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = hf2pte::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
  auto st = hf2pte::SafetensorsFile::parse(file);
  if (st) {
    for (const auto& t : st->tensors()) (void)t.bytes.size();
  }
  return 0;
}
