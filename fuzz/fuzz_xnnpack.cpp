// libFuzzer target: the XNNPACK delegate payload parser and graph builder.
// Input that verifies as a .pte is loaded with XnnpackBackend registered, so
// every delegate payload inside it (seeds: tests/data/conformance/{add,
// dynamic,quantized}.pte) goes through init: XH00 header, flatbuffer verifier,
// value/node ids, constant ranges (inline and named data), filter packing.
// Any other input is taken as a bare payload and initialised directly.
#include <cstdint>
#include <vector>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "kernels/portable/kernels.h"
#include "pte/pte_file.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = hf2pte::xnn::register_xnnpack_backend().is_ok();
  if (!registered) __builtin_trap();
  auto file = hf2pte::pte::PteFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.pte");
  if (file) {
    auto program = hf2pte::rt::Program::from_file(*file);
    if (!program) return 0;
    for (const auto& name : (*program)->method_names()) (void)(*program)->load_method(name, hf2pte::portable_registry());
    return 0;
  }
  std::span<const uint8_t> payload(data, size);
  hf2pte::rt::BackendInitContext ctx;
  ctx.method_name = "forward";
  (void)hf2pte::xnn::XnnpackBackend().init(ctx, payload, {});
  (void)hf2pte::xnn::xnnpack_node_counts(payload, nullptr);
  return 0;
}
