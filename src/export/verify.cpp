#include <unordered_set>

#include <fmt/format.h>

#include "export/stages.h"
#include "graph/shapes.h"

namespace hf2pte::exp {

Status verify_program(const graph::Program& p, const ExportConfig& c, StageLog& log) {
  for (const auto& g : p.methods) {
    std::unordered_set<graph::ValueId> defined;
    for (size_t i = 0; i < g.num_values(); ++i) {
      auto role = g.value(graph::ValueId(i)).role;
      if (role == graph::ValueRole::kInput || role == graph::ValueRole::kConstant || role == graph::ValueRole::kBuffer) {
        defined.insert(graph::ValueId(i));
      }
    }
    for (const auto& n : g.nodes()) {
      auto where = [&] { return fmt::format("node {}, op {}", n.name, op_info(n.op).kernel_key()); };
      if (!op_info(n.op).has_kernel) {
        return make_error(ErrorCode::kInternal, "op is not in the kernel op set; a decomposition is missing ({})", where());
      }
      auto check = [&](graph::ValueId v) -> Status {
        if (!defined.count(v)) return make_error(ErrorCode::kInternal, "uses %{} before it is defined ({})", g.value(v).name, where());
        return Status::ok();
      };
      for (const auto& a : n.args) {
        if (const auto* id = std::get_if<graph::ValueId>(&a)) HF2PTE_RETURN_IF_ERROR(check(*id));
        if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) HF2PTE_RETURN_IF_ERROR(check(v));
        if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto v : *l) if (v) HF2PTE_RETURN_IF_ERROR(check(*v));
      }
      // Shapes recorded on the outputs must still be what the op computes.
      auto outs = graph::infer_outputs(g, n.op, n.args);
      if (!outs) return outs.status().with_context(where());
      if (outs->size() != n.outputs.size()) return make_error(ErrorCode::kInternal, "output count changed ({})", where());
      for (size_t i = 0; i < outs->size(); ++i) {
        const auto* t = std::get_if<graph::TensorType>(&(*outs)[i]);
        const auto& v = g.value(n.outputs[i]);
        if (t && (t->dtype != v.type.dtype || !(t->sizes == v.type.sizes))) {
          return make_error(ErrorCode::kInternal, "output %{} is {} but the op computes {} ({})", v.name, v.type.str(), t->str(), where());
        }
        defined.insert(n.outputs[i]);
      }
    }
    for (auto v : g.outputs()) {
      if (!defined.count(v)) return make_error(ErrorCode::kInternal, "method output %{} is never computed", g.value(v).name);
    }
    log.notes.push_back(fmt::format("{}: {} nodes verified", g.name(), g.nodes().size()));
  }
  (void)c;
  return Status::ok();
}

}  // namespace hf2pte::exp
