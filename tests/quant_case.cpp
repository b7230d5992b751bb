#include "quant_case.h"

#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace hf2pte::test {

QuantCase parse_quant_case(const std::string& name) {
  QuantCase c;
  c.name = name;
  std::ifstream f(repo_path("tests/data/fixtures-quant/" + name) + "/recipe.json");
  auto j = nlohmann::json::parse(f);
  c.preset = j["preset"].get<std::string>();
  const std::string recipe = j["recipe"]["name"].get<std::string>();
  std::vector<std::string> parts;
  for (size_t b = 0, e; b <= recipe.size(); b = e + 1) {
    e = recipe.find('-', b);
    if (e == std::string::npos) e = recipe.size();
    parts.push_back(recipe.substr(b, e - b));
  }
  c.quant.qlinear = parts.front();
  c.quant.qparams = parts.back();
  c.quant.qlinear_group_size = 0;
  for (const auto& p : parts) {
    if (p == "g32") c.quant.qlinear_group_size = 32;
    if (p == "emb8w") c.quant.qembedding = "8w";
    if (p == "bf16scales") c.bf16_scales = true;
  }
  return c;
}

}  // namespace hf2pte::test
