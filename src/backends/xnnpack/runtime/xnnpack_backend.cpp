#include "backends/xnnpack/runtime/xnnpack_backend.h"

#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "backends/xnnpack/runtime/xnn_graph.h"
#include "runtime/tensor.h"

namespace hf2pte::xnn {

namespace {

struct XnnHandle final : rt::DelegateHandle {
  XnnGraph graph;
  /// Per external: the contiguous copy of a strided-view input that its
  /// readers cannot take in place (bind_view).
  std::vector<std::vector<uint8_t>> compacted;
};

/// The ET dtypes that carry an XNNPACK datatype across the delegate boundary.
bool dtype_matches(XDtype x, ScalarType s) {
  switch (x) {
    case XDtype::kFp32: return s == ScalarType::kFloat;
    case XDtype::kFp16: return s == ScalarType::kHalf;
    case XDtype::kQInt8:
    case XDtype::kQCInt8: return s == ScalarType::kChar || s == ScalarType::kQInt8;
    case XDtype::kQUInt8: return s == ScalarType::kByte || s == ScalarType::kQUInt8;
    case XDtype::kQInt32:
    case XDtype::kQCInt32:
    case XDtype::kInt32: return s == ScalarType::kInt || s == ScalarType::kQInt32;
    case XDtype::kQCInt4:
    case XDtype::kQBInt4:
    case XDtype::kQDInt8: return false;  // never external (refused at init)
  }
  return false;
}

Result<rt::Tensor*> arg_tensor_at(std::span<rt::EValue*> args, uint32_t e) {
  HF2PTE_CHECK_OR_RETURN(e < args.size(), kInvalidProgram,
                         "external id {} is out of range; the DelegateCall has {} args", e, args.size());
  HF2PTE_CHECK_OR_RETURN(args[e] != nullptr && args[e]->is_tensor() && args[e]->tensor != nullptr, kInvalidProgram,
                         "DelegateCall arg {} is not a tensor", e);
  return args[e]->tensor;
}

/// Resizes ET output tensors: XNNPACK shapes are in dim order (memory order),
/// so they are scattered back through the tensor's dim_order.
class TensorOutputBinder final : public OutputBinder {
 public:
  TensorOutputBinder(const XnnGraph& g, std::span<rt::EValue*> args) : g_(g), args_(args) {}

  Result<void*> bind_output(uint32_t e, std::span<const int64_t> shape) override {
    HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * t, arg_tensor_at(args_, e));
    const XValue& v = g_.values[g_.external_values[e]];
    HF2PTE_CHECK_OR_RETURN(dtype_matches(v.dtype, t->dtype()), kInvalidProgram,
                           "output {} is {} in the delegate but {} in the program", e, xdtype_name(v.dtype),
                           scalar_type_name(t->dtype()));
    HF2PTE_CHECK_OR_RETURN(size_t(t->dim()) == shape.size(), kInvalidArgument,
                           "output {} has rank {}; the delegate computed rank {} ([{}])", e, t->dim(), shape.size(),
                           fmt::join(shape, ", "));
    std::vector<int64_t> sizes(shape.size());
    const auto order = t->dim_order();
    for (size_t i = 0; i < shape.size(); ++i) sizes[i < order.size() ? order[i] : i] = shape[i];
    Status st = t->resize(sizes);
    if (!st) return st.with_context(fmt::format("delegate output {}", e));
    HF2PTE_CHECK_OR_RETURN(t->numel() == 0 || t->raw_data() != nullptr, kInvalidProgram,
                           "output {} has no memory", e);
    return t->raw_data();
  }

 private:
  const XnnGraph& g_;
  std::span<rt::EValue*> args_;
};

/// The data input `v` reads for the strided view `t`: the view itself when
/// only its dim-0 stride differs from a contiguous layout and `v` takes a
/// batch stride (XValue::batch_stride set), else a contiguous copy in `copy`.
const void* bind_view(const rt::Tensor& t, XValue& v, std::vector<uint8_t>& copy) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  const size_t rank = sizes.size();
  bool dense_rows = true;  // dims 1.. contiguous
  int64_t want = 1;
  for (size_t d = rank; d-- > 1;) {
    dense_rows = dense_rows && (sizes[d] == 1 || strides[d] == want);
    want *= sizes[d];
  }
  if (v.takes_batch_stride && rank == 3 && dense_rows) {
    v.batch_stride = strides[0];
    return t.raw_data();
  }
  const size_t esize = element_size(t.dtype());
  copy.resize(size_t(t.numel()) * esize);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * strides[d];
    std::memcpy(copy.data() + size_t(i) * esize, src + size_t(off) * esize, esize);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return copy.data();
}

}  // namespace

Result<std::unique_ptr<rt::DelegateHandle>> XnnpackBackend::init(const rt::BackendInitContext& ctx,
                                                                  std::span<const uint8_t> payload,
                                                                  std::span<const rt::CompileSpec>) const {
  // Compile specs are ignored, as the upstream runtime does (§1).
  auto h = std::make_unique<XnnHandle>();
  HF2PTE_ASSIGN_OR_RETURN(h->graph, compile_payload(payload, ctx.file));
  return std::unique_ptr<rt::DelegateHandle>(std::move(h));
}

Status XnnpackBackend::execute(rt::DelegateHandle& handle, std::span<rt::EValue*> args) const {
  XnnGraph& g = static_cast<XnnHandle&>(handle).graph;
  // Bind every external input to its ET tensor at its *current* shape, so
  // bounded-dynamic inputs smaller than the serialized dims just work.
  for (uint32_t e = 0; e < g.external_values.size(); ++e) {
    const uint32_t vi = g.external_values[e];
    if (vi == kInvalidId || !g.values[vi].is_input) continue;
    XValue& v = g.values[vi];
    HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * t, arg_tensor_at(args, e));
    HF2PTE_CHECK_OR_RETURN(dtype_matches(v.dtype, t->dtype()), kInvalidProgram,
                           "input {} is {} in the delegate but {} in the program", e, xdtype_name(v.dtype),
                           scalar_type_name(t->dtype()));
    HF2PTE_CHECK_OR_RETURN(size_t(t->dim()) <= kMaxRank, kNotSupported, "input {} has rank {} > {}", e, t->dim(),
                           kMaxRank);
    HF2PTE_CHECK_OR_RETURN(t->numel() == 0 || t->raw_data() != nullptr, kInvalidArgument, "input {} has no data", e);
    const auto order = t->dim_order();
    v.shape.resize(size_t(t->dim()));
    for (size_t i = 0; i < v.shape.size(); ++i) v.shape[i] = t->size(i < order.size() ? order[i] : int(i));
    v.data = t->raw_data();
    v.batch_stride = 0;
    if (t->is_strided_view()) {
      auto& h = static_cast<XnnHandle&>(handle);
      if (h.compacted.size() < g.external_values.size()) h.compacted.resize(g.external_values.size());
      v.data = const_cast<void*>(bind_view(*t, v, h.compacted[e]));
    }
  }
  TensorOutputBinder binder(g, args);
  return run_graph(g, binder);
}

Status register_xnnpack_backend() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] { result = rt::register_backend(kXnnpackBackendId, std::make_shared<XnnpackBackend>()); });
  return result;
}

Result<std::vector<std::pair<std::string, size_t>>> xnnpack_node_counts(std::span<const uint8_t> payload,
                                                                         const pte::PteFile* file) {
  HF2PTE_ASSIGN_OR_RETURN(XnnGraph g, compile_payload(payload, file, CompileFor::kInspection));
  // Quantized FullyConnected nodes are counted per scheme (input x filter,
  // block size), e.g. "XNNFullyConnected qdint8 x qbint4 g32" (8da4w).
  std::map<std::string, size_t> counts;
  for (const XNode& n : g.nodes) {
    if (n.widening) continue;
    std::string name = n.name;
    if (const auto* fc = std::get_if<FullyConnectedParams>(&n.params)) {
      const XValue* x = &g.values[fc->input];
      if (x->widened_from != kInvalidId) x = &g.values[x->widened_from];  // as the payload has it
      const XValue& w = g.values[fc->filter];
      if (w.dtype != XDtype::kFp32) {
        name += fmt::format(" {} x {}", xdtype_name(x->dtype), xdtype_name(w.dtype));
        if (w.group_size > 0) name += fmt::format(" g{}", w.group_size);
      }
    }
    ++counts[name];
  }
  return std::vector<std::pair<std::string, size_t>>(counts.begin(), counts.end());
}

}  // namespace hf2pte::xnn
