#include "runtime/program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pte/pte_file.h"
#include "pte/program_generated.h"
#include "runtime/method.h"

namespace hf2pte::rt {

Result<std::shared_ptr<Program>> Program::load(const std::string& path) {
  HF2PTE_ASSIGN_OR_RETURN(auto file, pte::PteFile::open(path));
  return from_file(std::move(file));
}

Result<std::shared_ptr<Program>> Program::from_file(std::shared_ptr<pte::PteFile> file) {
  HF2PTE_CHECK_OR_RETURN(file != nullptr, kInvalidArgument, "no program file");
  const auto* plans = file->program().execution_plan();
  HF2PTE_CHECK_OR_RETURN(plans != nullptr, kInvalidProgram, "program has no execution_plan vector ({})",
                         file->path());
  for (uint32_t i = 0; i < plans->size(); ++i) {
    const auto* plan = plans->Get(i);
    HF2PTE_CHECK_OR_RETURN(plan != nullptr && plan->name() != nullptr, kInvalidProgram,
                           "execution plan {} has no name ({})", i, file->path());
  }
  auto program = std::shared_ptr<Program>(new Program());
  program->file_ = std::move(file);
  return program;
}

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> names;
  for (const auto* plan : *file_->program().execution_plan()) names.push_back(plan->name()->str());
  return names;
}

Result<std::unique_ptr<Method>> Program::load_method(std::string_view name, const KernelRegistry& registry) const {
  for (const auto* plan : *file_->program().execution_plan()) {
    if (plan->name()->string_view() != name) continue;
    HF2PTE_ASSIGN_OR_RETURN(auto method, PlanMethod::load(file_, *plan, registry));
    return std::unique_ptr<Method>(std::move(method));
  }
  return make_error(ErrorCode::kNotFound, "method '{}' not found; the program has: {}", name,
                    fmt::join(method_names(), ", "));
}

}  // namespace hf2pte::rt
