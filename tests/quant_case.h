// A tests/data/fixtures-quant case by name ("llama-gqa-8da4w-g32-emb8w-hqq"):
// the fixture it quantizes and the export flags of its recipe.
#pragma once

#include <string>

#include "export/export_config.h"

namespace hf2pte::test {

struct QuantCase {
  std::string name;    ///< the case's folder under tests/data/fixtures-quant
  std::string preset;  ///< the tests/data/fixtures checkpoint it quantizes
  exp::QuantConfig quant;
  bool bf16_scales = false;  ///< group scales rounded to bf16 (XNNPACK's qbint4 form)
};

/// Reads the case's recipe.json ("8da4w-g32-emb8w-hqq" -> --qlinear 8da4w
/// --qlinear-group-size 32 --qembedding 8w --qparams hqq).
QuantCase parse_quant_case(const std::string& name);

}  // namespace hf2pte::test
