// libFuzzer target: a .pte from untrusted bytes -> verified PteFile -> every
// method loaded (values parsed, kernels resolved, arenas planned), inspect.
#include <cstdint>
#include <vector>

#include "kernels/portable/kernels.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = hf2pte::pte::PteFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.pte");
  if (!file) return 0;
  (void)hf2pte::pte::inspect_text(**file);
  auto program = hf2pte::rt::Program::from_file(*file);
  if (!program) return 0;
  for (const auto& name : (*program)->method_names()) {
    auto m = (*program)->load_method(name, hf2pte::portable_registry());
    (void)m;
  }
  return 0;
}
