#include <cctype>
#include <optional>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "export/stages.h"
#include "graph/shapes.h"

namespace hf2pte::exp {

namespace {

/// The model layer a node came from: builders name nodes "layers.3.attn.q" (the
/// checkpoint's own prefix), so the layer is the "layers.N" part; "" for nodes
/// outside the layer stack (embedding, final norm, lm_head).
std::string layer_of(const std::string& node_name) {
  for (size_t at = node_name.find("layers."); at != std::string::npos; at = node_name.find("layers.", at + 1)) {
    if (at != 0 && node_name[at - 1] != '.') continue;
    size_t end = at + 7;
    while (end < node_name.size() && std::isdigit(static_cast<unsigned char>(node_name[end]))) ++end;
    if (end > at + 7 && (end == node_name.size() || node_name[end] == '.')) return node_name.substr(0, end);
  }
  return "";
}

/// Ops whose tensor operands upstream's kernels expect in one float dtype
/// (they reject or promote mixed f32/f16/bf16): builders must cast explicitly.
bool needs_one_float_dtype(OpId op) {
  switch (op) {
    case OpId::AddOut: case OpId::SubOut: case OpId::MulOut: case OpId::DivOut: case OpId::MaximumOut:
    case OpId::WhereSelfOut: case OpId::MmOut: case OpId::BmmOut: case OpId::AddmmOut: case OpId::CatOut:
    case OpId::IndexPut_: case OpId::LeTensorOut: case OpId::LtTensorOut: case OpId::GtTensorOut:
    case OpId::GeTensorOut: case OpId::EqTensorOut:
      return true;
    default:
      return false;
  }
}

/// The float dtype shared by the float tensor operands of `n`, or an error naming both.
Status check_one_float_dtype(const graph::Graph& g, const graph::Node& n) {
  std::optional<ScalarType> seen;
  auto visit = [&](graph::ValueId v) -> Status {
    const ScalarType t = g.type(v).dtype;
    if (!is_floating(t)) return Status::ok();
    if (seen && *seen != t) {
      return make_error(ErrorCode::kInternal, "mixes {} and {} operands (%{}); cast one explicitly",
                        scalar_type_name(*seen), scalar_type_name(t), g.value(v).name);
    }
    seen = t;
    return Status::ok();
  };
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<graph::ValueId>(&a)) HF2PTE_RETURN_IF_ERROR(visit(*id));
    if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) HF2PTE_RETURN_IF_ERROR(visit(v));
  }
  return Status::ok();
}

}  // namespace

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
      // Item 41: every violation names the op, the node, the layer and the backend.
      auto where = [&] {
        std::string layer = layer_of(n.name);
        return fmt::format("method {}, node {}, op {}, layer {}, backend {}", g.name(), n.name, op_info(n.op).kernel_key(),
                           layer.empty() ? "none (outside the layer stack)" : layer, backend_name(c.backend));
      };
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
      if (needs_one_float_dtype(n.op)) {
        if (auto st = check_one_float_dtype(g, n); !st) return st.with_context(where());
      }
      // Shapes recorded on the outputs must still be what the op computes.
      // (Given the node's first output, data-dependent sizes get the same names.)
      auto outs = graph::infer_outputs(g, n.op, n.args,
                                       n.outputs.empty() ? std::nullopt : std::optional<graph::ValueId>(n.outputs[0]));
      if (!outs) return outs.status().with_context(where());
      if (outs->size() != n.outputs.size()) return make_error(ErrorCode::kInternal, "output count changed ({})", where());
      for (size_t i = 0; i < outs->size(); ++i) {
        const auto* t = std::get_if<graph::TensorType>(&(*outs)[i]);
        const auto& v = g.value(n.outputs[i]);
        if (t && (t->dtype != v.type.dtype || !(t->sizes == v.type.sizes))) {
          return make_error(ErrorCode::kInternal, "output %{} is {} but the op computes {} ({})", v.name, v.type.str(), t->str(), where());
        }
        // Item 3 of the issue: a data-dependent size is planned at its declared
        // upper bound; without one there is nothing to plan.
        for (const auto& size : v.type.sizes) {
          if (auto u = size.unbounded_unbacked()) {
            return make_error(ErrorCode::kInternal,
                              "output %{} has the data-dependent size {} ({} is only known at runtime) and no declared "
                              "upper bound, so it cannot be planned; give SymInt::unbacked an upper bound ({})",
                              v.name, size.str(), *u, where());
          }
        }
        defined.insert(n.outputs[i]);
      }
    }
    for (auto v : g.outputs()) {
      if (!defined.count(v)) return make_error(ErrorCode::kInternal, "method output %{} is never computed", g.value(v).name);
    }
    log.notes.push_back(fmt::format("{}: {} nodes verified", g.name(), g.nodes().size()));
  }
  return Status::ok();
}

}  // namespace hf2pte::exp
