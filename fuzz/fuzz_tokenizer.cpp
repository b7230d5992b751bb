// libFuzzer target: tokenizer.json parsing (models, normalizers,
// pre-tokenizers with PCRE2 patterns, post-processors, decoders, added
// tokens), then an encode/decode round of fixed text so the parsed stages run.
#include <cstdint>
#include <string_view>

#include "llm/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = hf2pte::llm::Tokenizer::from_json(text);
  if (!tok) return 0;
  auto ids = (*tok)->encode("Once upon a time, 12 caf\xc3\xa9s <s> \xf0\x9f\x98\x80  x\n");
  if (ids) (void)(*tok)->decode(*ids);
  return 0;
}
