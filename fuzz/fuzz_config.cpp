// libFuzzer target: config.json parsing into the typed Llama-family config.
#include <cstdint>
#include <string_view>

#include "checkpoint/config.h"
#include "checkpoint/json_fields.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = hf2pte::parse_json(text, "config.json");
  if (json) (void)hf2pte::parse_llama_family_config(*json, "config.json");
  return 0;
}
