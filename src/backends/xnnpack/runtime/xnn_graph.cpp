// Compiles a verified XNNGraph into an XnnGraph (docs/xnnpack-payload.md §5-§7).
// The flatbuffer is hostile: the verifier only proves it is well-formed, so
// every id, index, dtype and constant reference is checked here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backends/xnnpack/runtime/xnn_graph.h"
#include "backends/xnnpack/runtime/xnn_payload.h"
#include "kernels/optimized/gemm.h"
#include "kernels/optimized/simd_kernels.h"
#include "core/half.h"
#include "core/scalar_type.h"
#include "pte/pte_file.h"
#include "quant/quant.h"

namespace hf2pte::xnn {

namespace fb = fb_xnnpack;

std::string_view xdtype_name(XDtype t) {
  switch (t) {
    case XDtype::kFp32: return "fp32";
    case XDtype::kFp16: return "fp16";
    case XDtype::kQInt8: return "qint8";
    case XDtype::kQUInt8: return "quint8";
    case XDtype::kQInt32: return "qint32";
    case XDtype::kQCInt8: return "qcint8";
    case XDtype::kQCInt32: return "qcint32";
    case XDtype::kQCInt4: return "qcint4";
    case XDtype::kQDInt8: return "qdint8";
    case XDtype::kQBInt4: return "qbint4";
    case XDtype::kInt32: return "int32";
  }
  return "?";
}

size_t xdtype_size(XDtype t) {
  switch (t) {
    case XDtype::kQInt8:
    case XDtype::kQUInt8:
    case XDtype::kQCInt8:
    case XDtype::kQCInt4:  // packed: constant sizes are computed by packed_bytes()
    case XDtype::kQBInt4: return 1;
    case XDtype::kFp16: return 2;
    default: return 4;  // fp32, int32 kinds, and qdint8 (held as float)
  }
}

std::vector<std::pair<std::string, size_t>> XnnGraph::node_counts() const {
  std::map<std::string, size_t> counts;
  for (const XNode& n : nodes) if (!n.widening) ++counts[n.name];
  return {counts.begin(), counts.end()};
}

namespace {

/// Flag bits allowed on an XNNTensorValue (§4.4).
constexpr uint32_t kFlagExternalInput = 1;
constexpr uint32_t kFlagExternalOutput = 2;
/// XNNFullyConnected / BatchMatrixMultiply flag: the filter is [in, out] / B is [N, K].
constexpr uint32_t kFlagTransposeWeights = 1;

Result<XDtype> to_xdtype(fb::XNNDatatype d) {
  switch (d) {
    case fb::XNNDatatype::fp32: return XDtype::kFp32;
    case fb::XNNDatatype::fp16: return XDtype::kFp16;
    case fb::XNNDatatype::qint8: return XDtype::kQInt8;
    case fb::XNNDatatype::quint8: return XDtype::kQUInt8;
    case fb::XNNDatatype::qint32: return XDtype::kQInt32;
    case fb::XNNDatatype::qcint8: return XDtype::kQCInt8;
    case fb::XNNDatatype::qcint32: return XDtype::kQCInt32;
    case fb::XNNDatatype::qcint4: return XDtype::kQCInt4;
    case fb::XNNDatatype::qdint8: return XDtype::kQDInt8;
    case fb::XNNDatatype::qbint4: return XDtype::kQBInt4;
    case fb::XNNDatatype::int32: return XDtype::kInt32;
    default: break;
  }
  const char* name = fb::EnumNameXNNDatatype(d);
  return make_error(ErrorCode::kNotSupported, "XNNPACK datatype {} ({}) is not supported",
                    *name ? name : "unknown", int(d));
}

bool is_float_like(XDtype t) {
  // Elementwise nodes run in float; 8-bit per-tensor values are (de)quantized;
  // fp16 ones reach only Copy and Convert (Compiler::resolve widens the rest).
  return t == XDtype::kFp32 || t == XDtype::kFp16 || t == XDtype::kQInt8 || t == XDtype::kQUInt8;
}

/// Nodes that only move or re-encode elements: they read and write fp16
/// values as they are. Every other node computes in fp32 (Compiler::resolve).
bool moves_elements(fb::XNodeUnion t) {
  using T = fb::XNodeUnion;
  switch (t) {
    case T::XNNStaticTranspose: case T::XNNStaticReshape: case T::XNNStaticSlice: case T::XNNStaticConstantPad:
    case T::XNNConcatenate2: case T::XNNConcatenate3: case T::XNNConcatenate4: case T::XNNConcatenate5:
    case T::XNNCopy: case T::XNNConvert:
      return true;
    default:
      return false;
  }
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}


bool is_int4(XDtype t) { return t == XDtype::kQCInt4 || t == XDtype::kQBInt4; }

/// Bytes a constant of `v` occupies: 4-bit filters are [oc, ceil(ic / 2)] (§6.3).
uint64_t packed_bytes(const XValue& v) {
  if (is_int4(v.dtype)) return uint64_t(v.dims[0]) * uint64_t((v.dims[1] + 1) / 2);
  return uint64_t(numel_of(v.dims)) * xdtype_size(v.dtype);
}

/// Points the float path at an fp32 or fp16 filter's bytes in their layout.
void read_in_place(FullyConnectedParams& p, XDtype dtype, bool transposed, const void* bytes) {
  if (dtype == XDtype::kFp16) {
    (transposed ? p.weights_kn_f16 : p.weights_nk_f16) = static_cast<const uint16_t*>(bytes);
  } else {
    (transposed ? p.weights_kn : p.weights_nk) = static_cast<const float*>(bytes);
  }
}

class Compiler {
 public:
  Compiler(const VerifiedPayload& p, const pte::PteFile* file, CompileFor purpose)
      : p_(p), g_(*p.graph), file_(file), pack_(purpose == CompileFor::kExecution) {}

  Result<XnnGraph> run() {
    out_.num_externs = g_.num_externs();
    HF2PTE_CHECK_OR_RETURN(out_.num_externs <= kMaxExterns, kInvalidProgram,
                           "XNNGraph num_externs too large; expected <= {}, got {}", kMaxExterns, out_.num_externs);
    out_.external_values.assign(out_.num_externs, kInvalidId);
    const auto* values = g_.xvalues();
    out_.values.reserve(values->size());
    for (uint32_t i = 0; i < values->size(); ++i) {
      Status st = add_value(i, values->Get(i));
      if (!st) return st.with_context(fmt::format("xvalue {}", i));
    }
    const auto* nodes = g_.xnodes();
    for (uint32_t i = 0; i < nodes->size(); ++i) {
      Status st = add_node(nodes->Get(i));
      if (!st) return st.with_context(fmt::format("xnode {}", i));
    }
    return std::move(out_);
  }

 private:
  /// Bytes of constant_data[idx] (or legacy constant_buffer[idx]).
  Result<std::span<const uint8_t>> constant_bytes(uint32_t idx, bool* in_file = nullptr) {
    if (in_file) *in_file = false;
    if (!p_.has_header) {
      // Legacy XN00 payload: inline storage, no constant region (§5).
      const auto* bufs = g_.constant_buffer();
      HF2PTE_CHECK_OR_RETURN(bufs != nullptr && idx < bufs->size() && bufs->Get(idx)->storage() != nullptr,
                             kInvalidProgram, "constant_buffer index {} is out of range", idx);
      const auto* s = bufs->Get(idx)->storage();
      return std::span<const uint8_t>(s->data(), s->size());
    }
    const auto* table = g_.constant_data();
    HF2PTE_CHECK_OR_RETURN(table != nullptr && idx < table->size(), kInvalidProgram,
                           "constant_data index {} is out of range; the graph has {} entries", idx,
                           table == nullptr ? 0u : table->size());
    const fb::ConstantDataOffset* e = table->Get(idx);
    if (e->named_key() != nullptr) {
      // A present key (even "") means named data; offset is not consulted.
      HF2PTE_CHECK_OR_RETURN(file_ != nullptr, kInvalidProgram, "constant '{}' needs the program's named data",
                             e->named_key()->str());
      auto bytes = file_->named_data(e->named_key()->string_view());
      if (!bytes) return bytes.status().with_context("XNNPACK constant_data " + std::to_string(idx));
      if (in_file) *in_file = true;
      return *bytes;
    }
    const uint64_t region = p_.constants.size();
    HF2PTE_CHECK_OR_RETURN(e->offset() <= region && e->size() <= region - e->offset(), kInvalidProgram,
                           "constant_data {} [{}, +{}) exceeds the {}-byte constant region", idx, e->offset(),
                           e->size(), region);
    return p_.constants.subspan(size_t(e->offset()), size_t(e->size()));
  }

  Status add_value(uint32_t idx, const fb::XValue* xv) {
    const fb::XNNTensorValue* tv = nullptr;
    const fb::XNNQuantizedTensorValue* qv = nullptr;
    switch (xv->xvalue_union_type()) {
      case fb::XValueUnion::XNNTensorValue: tv = xv->xvalue_union_as_XNNTensorValue(); break;
      case fb::XValueUnion::XNNQuantizedTensorValue:
        qv = xv->xvalue_union_as_XNNQuantizedTensorValue();
        if (qv != nullptr) tv = qv->tensor_value();
        break;
      default: break;
    }
    HF2PTE_CHECK_OR_RETURN(tv != nullptr, kInvalidProgram, "xvalue has no tensor value");
    XValue v;
    HF2PTE_ASSIGN_OR_RETURN(v.dtype, to_xdtype(tv->datatype()));
    HF2PTE_CHECK_OR_RETURN(tv->dq_datatype() == fb::XNNDatatype::invalid, kNotSupported,
                           "legacy dq_datatype is not supported");
    if (tv->dims() != nullptr) {
      HF2PTE_CHECK_OR_RETURN(tv->dims()->size() <= kMaxRank, kInvalidProgram,
                             "rank too large; expected <= {}, got {}", kMaxRank, tv->dims()->size());
      for (uint32_t d : *tv->dims()) v.dims.push_back(d);
    }
    // Bound the element count so later size arithmetic cannot overflow.
    uint64_t elems = 1;
    for (int64_t d : v.dims) {
      HF2PTE_CHECK_OR_RETURN(d == 0 || elems <= (uint64_t(1) << 48) / uint64_t(d), kInvalidProgram,
                             "dims [{}] are too large", fmt::join(v.dims, ", "));
      elems *= uint64_t(d);
    }
    const uint32_t flags = tv->flags();
    HF2PTE_CHECK_OR_RETURN(flags == 0 || flags == kFlagExternalInput || flags == kFlagExternalOutput,
                           kInvalidProgram, "flags must be 0, 1 (input) or 2 (output), got {}", flags);
    if (flags != 0) {
      const uint32_t ext = tv->external_id();
      HF2PTE_CHECK_OR_RETURN(ext < out_.num_externs, kInvalidProgram,
                             "external_id {} is out of range; num_externs is {}", ext, out_.num_externs);
      HF2PTE_CHECK_OR_RETURN(out_.external_values[ext] == kInvalidId, kInvalidProgram,
                             "external_id {} is used twice", ext);
      out_.external_values[ext] = idx;
      v.external_id = ext;
      v.is_input = flags == kFlagExternalInput;
      v.is_output = flags == kFlagExternalOutput;
    }
    if (is_int4(v.dtype)) {
      // Only 2-D constant filters carry 4-bit data (§6.3).
      HF2PTE_CHECK_OR_RETURN(v.dims.size() == 2 && tv->constant_buffer_idx() != 0, kNotSupported,
                             "{} is only supported for 2-D constant filters", xdtype_name(v.dtype));
    }
    HF2PTE_CHECK_OR_RETURN(flags == 0 || !(is_int4(v.dtype) || v.dtype == XDtype::kQDInt8), kNotSupported,
                           "external {} values are not supported", xdtype_name(v.dtype));
    HF2PTE_RETURN_IF_ERROR(add_quant(v, qv));
    if (tv->constant_buffer_idx() != 0) {
      HF2PTE_CHECK_OR_RETURN(flags == 0, kInvalidProgram, "an external value cannot have constant data");
      HF2PTE_CHECK_OR_RETURN(v.dtype != XDtype::kQDInt8, kInvalidProgram, "a qdint8 value cannot have constant data");
      bool in_file = false;
      HF2PTE_ASSIGN_OR_RETURN(auto bytes, constant_bytes(tv->constant_buffer_idx(), &in_file));
      const uint64_t need = packed_bytes(v);
      HF2PTE_CHECK_OR_RETURN(bytes.size() >= need, kInvalidProgram,
                             "constant data too small for {} {}; expected {} bytes, got {}",
                             xdtype_name(v.dtype), fmt::join(v.dims, "x"), need, bytes.size());
      if (in_file && reinterpret_cast<uintptr_t>(bytes.data()) % 8 == 0) {
        v.cptr = bytes.data();  // read in place: named data lives as long as the program
      } else {
        v.constant.resize(size_t((need + 7) / 8));
        if (need != 0) std::memcpy(v.constant.data(), bytes.data(), size_t(need));
        v.cptr = v.constant.data();
      }
      v.is_constant = true;
      v.shape = v.dims;
      v.data = const_cast<void*>(v.cptr);  // never written: node outputs cannot be constants
    }
    HF2PTE_CHECK_OR_RETURN(id_map_.emplace(tv->id_out(), idx).second, kInvalidProgram, "id_out {} is used twice",
                           tv->id_out());
    out_.values.push_back(std::move(v));
    return Status::ok();
  }

  Status add_quant(XValue& v, const fb::XNNQuantizedTensorValue* qv) {
    const bool per_tensor = v.dtype == XDtype::kQInt8 || v.dtype == XDtype::kQUInt8 || v.dtype == XDtype::kQInt32;
    const bool per_channel = v.dtype == XDtype::kQCInt8 || v.dtype == XDtype::kQCInt32 || v.dtype == XDtype::kQCInt4;
    // 4-bit filters store value + 8 in each nibble (§6.2: zero point forced to 8).
    if (is_int4(v.dtype)) v.zero_point = 8;
    if (qv == nullptr) {
      HF2PTE_CHECK_OR_RETURN(!per_tensor && !per_channel && v.dtype != XDtype::kQDInt8 && v.dtype != XDtype::kQBInt4,
                             kInvalidProgram, "{} value has no quantization parameters",
                             xdtype_name(v.dtype));
      return Status::ok();
    }
    if (const auto* q = qv->quant_params_as_PerTensorQuant()) {
      HF2PTE_CHECK_OR_RETURN(per_tensor, kInvalidProgram, "PerTensorQuant on a {} value", xdtype_name(v.dtype));
      v.scale = q->scale();
      v.zero_point = q->zero_point();
      HF2PTE_CHECK_OR_RETURN(std::isfinite(v.scale) && v.scale > 0, kInvalidProgram,
                             "quantization scale must be finite and > 0, got {}", v.scale);
      return Status::ok();
    }
    if (const auto* q = qv->quant_params_as_PerChannelQuant()) {
      HF2PTE_CHECK_OR_RETURN(per_channel, kInvalidProgram, "PerChannelQuant on a {} value", xdtype_name(v.dtype));
      HF2PTE_CHECK_OR_RETURN(q->channel_dim() >= 0 && size_t(q->channel_dim()) < v.dims.size(), kInvalidProgram,
                             "channel_dim {} is out of range for rank {}", q->channel_dim(), v.dims.size());
      v.channel_dim = q->channel_dim();
      const size_t channels = size_t(v.dims[size_t(v.channel_dim)]);
      if (q->scale_buffer_idx() != 0) {
        HF2PTE_ASSIGN_OR_RETURN(auto bytes, constant_bytes(q->scale_buffer_idx()));
        HF2PTE_CHECK_OR_RETURN(bytes.size() >= channels * 4, kInvalidProgram,
                               "scale buffer too small; expected {} bytes, got {}", channels * 4, bytes.size());
        v.channel_scales.resize(channels);
        std::memcpy(v.channel_scales.data(), bytes.data(), channels * 4);
      } else {
        HF2PTE_CHECK_OR_RETURN(q->scale() != nullptr && q->scale()->size() == channels, kInvalidProgram,
                               "per-channel scales; expected {}, got {}", channels,
                               q->scale() == nullptr ? 0u : q->scale()->size());
        v.channel_scales.assign(q->scale()->begin(), q->scale()->end());
      }
      for (float s : v.channel_scales) {
        HF2PTE_CHECK_OR_RETURN(std::isfinite(s) && s > 0, kInvalidProgram, "per-channel scale must be > 0, got {}", s);
      }
      return Status::ok();
    }
    if (const auto* q = qv->quant_params_as_PerTokenDynamicQuant()) {
      HF2PTE_CHECK_OR_RETURN(v.dtype == XDtype::kQDInt8, kInvalidProgram, "PerTokenDynamicQuant on a {} value",
                             xdtype_name(v.dtype));
      HF2PTE_CHECK_OR_RETURN(q->num_nonbatch_dims() >= 1 && size_t(q->num_nonbatch_dims()) <= kMaxRank,
                             kInvalidProgram, "num_nonbatch_dims {} is out of range", q->num_nonbatch_dims());
      v.num_nonbatch_dims = q->num_nonbatch_dims();
      return Status::ok();
    }
    if (const auto* q = qv->quant_params_as_PerChannelGroupQuant()) return add_group_quant(v, *q);
    return make_error(ErrorCode::kNotSupported, "quantization parameters {} are not supported",
                      fb::EnumNameXNNQuantParams(qv->quant_params_type()));
  }

  // qbint4 (§6.2): one scale per [oc, ic / group_size] block, bf16 from
  // scale_buffer_idx, else the fp32 vector rounded the way upstream does.
  Status add_group_quant(XValue& v, const fb::PerChannelGroupQuant& q) {
    HF2PTE_CHECK_OR_RETURN(v.dtype == XDtype::kQBInt4, kNotSupported, "PerChannelGroupQuant on a {} value",
                           xdtype_name(v.dtype));
    HF2PTE_CHECK_OR_RETURN(q.channel_dim() == 0, kNotSupported, "qbint4 channel_dim {}; expected 0", q.channel_dim());
    HF2PTE_CHECK_OR_RETURN(q.group_size() > 0 && v.dims[1] % q.group_size() == 0, kInvalidProgram,
                           "group_size {} does not divide {}", q.group_size(), v.dims[1]);
    v.group_size = q.group_size();
    const uint64_t count = uint64_t(v.dims[0]) * uint64_t(v.dims[1] / v.group_size);
    HF2PTE_CHECK_OR_RETURN(count <= (uint64_t(1) << 32), kInvalidProgram, "{} block scales is too many", count);
    if (q.scale_buffer_idx() != 0) {
      HF2PTE_CHECK_OR_RETURN(q.num_scales() == count, kInvalidProgram, "num_scales; expected {}, got {}", count,
                             q.num_scales());
      HF2PTE_ASSIGN_OR_RETURN(auto bytes, constant_bytes(q.scale_buffer_idx()));
      HF2PTE_CHECK_OR_RETURN(bytes.size() >= count * 2, kInvalidProgram, "bf16 scales; expected {} bytes, got {}",
                             count * 2, bytes.size());
      v.block_scales.resize(size_t(count));
      for (size_t i = 0; i < v.block_scales.size(); ++i) {
        uint16_t u;
        std::memcpy(&u, bytes.data() + 2 * i, 2);
        v.block_scales[i] = bf16_to_float(u);
      }
    } else {
      HF2PTE_CHECK_OR_RETURN(q.scale() != nullptr && q.scale()->size() == count, kInvalidProgram,
                             "block scales; expected {}, got {}", count, q.scale() == nullptr ? 0u : q.scale()->size());
      for (float s : *q.scale()) {
        // Upstream: scale * 1.00389105, keep the top 16 bits (a bf16).
        float f = s * 1.00389105f;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        bits &= 0xFFFF0000u;
        std::memcpy(&f, &bits, 4);
        v.block_scales.push_back(f);
      }
    }
    for (float s : v.block_scales) {
      HF2PTE_CHECK_OR_RETURN(std::isfinite(s) && s > 0, kInvalidProgram, "block scale must be > 0, got {}", s);
    }
    return Status::ok();
  }

  /// Maps a serialized id to a value index; `optional` accepts kInvalidId.
  /// The value a node's `field` names. While a computing node is added
  /// (widen_), an fp16 value is swapped for an fp32 one: an input for its
  /// fp32 copy made by a Convert run before the node, the output for an fp32
  /// value a Convert after the node rounds into it, a constant for its fp32
  /// copy -- except a FullyConnected's fp16 filter and bias, which its GEMM
  /// reads as they are. Each op thus computes in fp32 and rounds its result
  /// once to fp16, as XNNPACK's fp16 operators do on CPUs without fp16 arithmetic.
  Result<uint32_t> resolve(uint32_t id, const char* field, bool optional = false) {
    if (optional && id == kInvalidId) return kInvalidId;
    auto it = id_map_.find(id);
    HF2PTE_CHECK_OR_RETURN(it != id_map_.end(), kInvalidProgram, "{} {} names no xvalue", field, id);
    const uint32_t v = it->second;
    if (widen_ == Widen::kNone || val(v).dtype != XDtype::kFp16) return v;
    const std::string_view f = field;
    if (f == "output_id") {
      HF2PTE_RETURN_IF_ERROR(check_output(v));
      const uint32_t w = add_fp32_twin(v);
      after_.push_back(convert_node(w, v));
      return w;
    }
    if (widen_ == Widen::kFullyConnected && (f == "filter_id" || f == "bias_id")) return v;
    if (auto c = fp32_twin_.find(v); c != fp32_twin_.end()) return c->second;
    const uint32_t w = add_fp32_twin(v);
    if (val(v).is_constant) {
      XValue& t = val(w);
      const XValue& h = val(v);
      const size_t n = size_t(numel_of(h.dims));
      t.constant.resize((n * 4 + 7) / 8);
      kernels::simd().half_to_float_row(static_cast<const uint16_t*>(h.cptr), reinterpret_cast<float*>(t.constant.data()),
                                        int64_t(n));
      t.cptr = t.data = t.constant.data();
      t.is_constant = true;
      t.shape = t.dims;
    } else {
      before_.push_back(convert_node(v, w));
    }
    fp32_twin_[v] = w;
    return w;
  }

  /// A new internal fp32 value with `v`'s dims (references into out_.values
  /// are invalidated).
  uint32_t add_fp32_twin(uint32_t v) {
    XValue t;
    t.dtype = XDtype::kFp32;
    t.dims = val(v).dims;
    t.widened_from = v;
    out_.values.push_back(std::move(t));
    return uint32_t(out_.values.size() - 1);
  }

  XNode convert_node(uint32_t in, uint32_t out) const {
    XNode n;
    n.params = UnaryParams{UnaryKind::kConvert, in, out};
    n.name = "XNNConvert";
    n.debug_handle = handle_;
    n.widening = true;
    return n;
  }

  XValue& val(uint32_t i) { return out_.values[i]; }

  Status check_float_like(uint32_t i, const char* field) {
    HF2PTE_CHECK_OR_RETURN(is_float_like(val(i).dtype), kNotSupported, "{} has datatype {}; expected fp32/qint8/quint8",
                           field, xdtype_name(val(i).dtype));
    return Status::ok();
  }

  Status check_output(uint32_t i) {
    HF2PTE_CHECK_OR_RETURN(!val(i).is_constant && !val(i).is_input, kInvalidProgram,
                           "node output names a constant or external input");
    return Status::ok();
  }

  Status add_unary(XNode& n, UnaryKind kind, const fb::Node1x1* t, float alpha = 0.0f) {
    HF2PTE_CHECK_OR_RETURN(t != nullptr, kInvalidProgram, "node has no parameters");
    UnaryParams p{kind, 0, 0, alpha};
    HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(t->input_id(), "input_id"));
    HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
    HF2PTE_RETURN_IF_ERROR(check_float_like(p.input, "input"));
    if (kind == UnaryKind::kConvert && val(p.output).dtype == XDtype::kQDInt8) {
      // Dynamic quantization (fp32 -> qdint8), computed per row at run time.
      // An fp16 input (upstream's fp16 8da4w graphs) is read through its exact
      // fp32 copy, which the quantized FullyConnected then takes.
      if (val(p.input).dtype == XDtype::kFp16) {
        widen_ = Widen::kCompute;
        HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(t->input_id(), "input_id"));
      }
      HF2PTE_CHECK_OR_RETURN(val(p.input).dtype == XDtype::kFp32, kNotSupported, "qdint8 convert from {}",
                             xdtype_name(val(p.input).dtype));
      n.params = p;
      return check_output(p.output);
    }
    HF2PTE_RETURN_IF_ERROR(check_float_like(p.output, "output"));
    HF2PTE_RETURN_IF_ERROR(check_output(p.output));
    n.params = p;
    return Status::ok();
  }

  Status add_binary(XNode& n, BinaryKind kind, const fb::Node2x1* t) {
    HF2PTE_CHECK_OR_RETURN(t != nullptr, kInvalidProgram, "node has no parameters");
    BinaryParams p{kind, 0, 0, 0};
    HF2PTE_ASSIGN_OR_RETURN(p.input1, resolve(t->input1_id(), "input1_id"));
    HF2PTE_ASSIGN_OR_RETURN(p.input2, resolve(t->input2_id(), "input2_id"));
    HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
    for (uint32_t i : {p.input1, p.input2, p.output}) HF2PTE_RETURN_IF_ERROR(check_float_like(i, "operand"));
    HF2PTE_RETURN_IF_ERROR(check_output(p.output));
    n.params = p;
    return Status::ok();
  }

  Status add_fully_connected(XNode& n, const fb::FullyConnected* t);
  Status add_movement(XNode& n, fb::XNodeUnion type, const void* table);
  Status add_conv(XNode& n, const fb::NodeConv* t, bool depthwise);
  Status add_max_pool(XNode& n, const fb::Pooling2D* t);

  /// fp32 activations (conv and pooling run in float only).
  Status check_fp32(uint32_t i, const char* field) {
    HF2PTE_CHECK_OR_RETURN(val(i).dtype == XDtype::kFp32, kNotSupported, "{} has datatype {}; expected fp32", field,
                           xdtype_name(val(i).dtype));
    return Status::ok();
  }

  /// After resolve's widening, fp16 values are read and written only by nodes
  /// that move elements, and read as FullyConnected filters and biases.
  Status check_fp16_use(const XNode& n, bool moves) const {
    if (moves) return Status::ok();
    const auto* fc = std::get_if<FullyConnectedParams>(&n.params);
    for (uint32_t v : node_inputs(n)) {
      if (v == kInvalidId || out_.values[v].dtype != XDtype::kFp16) continue;
      HF2PTE_CHECK_OR_RETURN(fc != nullptr && (v == fc->filter || v == fc->bias), kInternal,
                             "{} reads fp16 value {} after widening", n.name, v);
    }
    HF2PTE_CHECK_OR_RETURN(out_.values[node_output(n)].dtype != XDtype::kFp16, kInternal,
                           "{} writes an fp16 value after widening", n.name);
    return Status::ok();
  }

  /// Packs a qcint8 / qcint4 / qbint4 filter for the qgemm kernels when they
  /// take it (scales per output channel or per block along k, [n, k] for
  /// 4-bit, int32-safe k for dynamic int8); a qdint8 input produced by a
  /// Convert from fp32 is rewired to that fp32 value. False: the caller
  /// dequantizes instead.
  bool pack_qfilter(FullyConnectedParams& p, const XValue& w, bool transposed);

  /// An fp32/fp16 filter copied, in its layout, into huge-page memory
  /// (weight_store.h); its pages in the mapped file are given back.
  Status copy_to_huge_pages(FullyConnectedParams& p, const XValue& w, bool transposed) {
    const size_t bytes = size_t(packed_bytes(w));
    HF2PTE_ASSIGN_OR_RETURN(p.huge_copy, rt::allocate_weights(bytes));
    std::memcpy(p.huge_copy.data, w.cptr, bytes);
    read_in_place(p, w.dtype, transposed, p.huge_copy.data);
    if (w.constant.empty() && file_ != nullptr) file_->release_pages({static_cast<const uint8_t*>(w.cptr), bytes});
    return Status::ok();
  }

  Status add_node(const fb::XNode* xn) {
    XNode n;
    const fb::XNodeUnion type = xn->xnode_union_type();
    const char* name = fb::EnumNameXNodeUnion(type);
    n.name = *name ? name : fmt::format("tag{}", int(type));
    n.debug_handle = xn->debug_handle();
    if (const auto* om = xn->output_min_max()) {
      n.out_min = om->output_min();
      n.out_max = om->output_max();
      HF2PTE_CHECK_OR_RETURN(!(n.out_min > n.out_max), kInvalidProgram, "output_min {} > output_max {}", n.out_min,
                             n.out_max);
    }
    const void* u = xn->xnode_union();
    HF2PTE_CHECK_OR_RETURN(u != nullptr, kInvalidProgram, "{} has no parameters", n.name);
    const bool moves = moves_elements(type);
    widen_ = moves ? Widen::kNone : type == fb::XNodeUnion::XNNFullyConnected ? Widen::kFullyConnected : Widen::kCompute;
    handle_ = n.debug_handle;
    before_.clear();
    after_.clear();
    auto n1 = static_cast<const fb::Node1x1*>(u);
    auto n2 = static_cast<const fb::Node2x1*>(u);
    Status st;
    using T = fb::XNodeUnion;
    switch (type) {
      case T::XNNAdd: st = add_binary(n, BinaryKind::kAdd, n2); break;
      case T::XNNSubtract: st = add_binary(n, BinaryKind::kSub, n2); break;
      case T::XNNMultiply: st = add_binary(n, BinaryKind::kMul, n2); break;
      case T::XNNDiv: st = add_binary(n, BinaryKind::kDiv, n2); break;
      case T::XNNMinimum: st = add_binary(n, BinaryKind::kMin, n2); break;
      case T::XNNMaximum: st = add_binary(n, BinaryKind::kMax, n2); break;
      case T::XNNSigmoid: st = add_unary(n, UnaryKind::kSigmoid, n1); break;
      case T::XNNTanh: st = add_unary(n, UnaryKind::kTanh, n1); break;
      case T::XNNGelu: st = add_unary(n, UnaryKind::kGelu, n1); break;
      case T::XNNClamp: st = add_unary(n, UnaryKind::kClamp, n1); break;
      case T::XNNNegate: st = add_unary(n, UnaryKind::kNeg, n1); break;
      case T::XNNExp: st = add_unary(n, UnaryKind::kExp, n1); break;
      case T::XNNSquareRoot: st = add_unary(n, UnaryKind::kSqrt, n1); break;
      case T::XNNReciprocalSquareRoot: st = add_unary(n, UnaryKind::kRsqrt, n1); break;
      case T::XNNSquare: st = add_unary(n, UnaryKind::kSquare, n1); break;
      case T::XNNAbs: st = add_unary(n, UnaryKind::kAbs, n1); break;
      case T::XNNFloor: st = add_unary(n, UnaryKind::kFloor, n1); break;
      case T::XNNCeiling: st = add_unary(n, UnaryKind::kCeil, n1); break;
      case T::XNNLog: st = add_unary(n, UnaryKind::kLog, n1); break;
      case T::XNNSin: st = add_unary(n, UnaryKind::kSin, n1); break;
      case T::XNNCos: st = add_unary(n, UnaryKind::kCos, n1); break;
      case T::XNNHardswish: st = add_unary(n, UnaryKind::kHardswish, n1); break;
      case T::XNNCopy: st = add_unary(n, UnaryKind::kCopy, n1); break;
      case T::XNNConvert: st = add_unary(n, UnaryKind::kConvert, n1); break;
      case T::XNNLeakyReLU: {
        // LeakyReLU/ELU tables are {float, input_id, output_id, flags}: read them
        // through their own accessors, not Node1x1.
        auto t = static_cast<const fb::LeakyReLU*>(u);
        st = add_unary_ids(n, UnaryKind::kLeakyRelu, t->input_id(), t->output_id(), t->negative_slope());
        break;
      }
      case T::XNNELU: {
        auto t = static_cast<const fb::ELU*>(u);
        st = add_unary_ids(n, UnaryKind::kElu, t->input_id(), t->output_id(), t->alpha());
        break;
      }
      case T::XNNFullyConnected: st = add_fully_connected(n, static_cast<const fb::FullyConnected*>(u)); break;
      case T::XNNConv2d: st = add_conv(n, static_cast<const fb::NodeConv*>(u), false); break;
      case T::XNNDepthwiseConv2d: st = add_conv(n, static_cast<const fb::NodeConv*>(u), true); break;
      case T::XNNMaxPooling2d: st = add_max_pool(n, static_cast<const fb::Pooling2D*>(u)); break;
      case T::XNNGlobalAvgPooling2d: {
        GlobalPoolParams p{};
        HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(n1->input_id(), "input_id"));
        HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(n1->output_id(), "output_id"));
        st = check_fp32(p.input, "input");
        if (st) st = check_fp32(p.output, "output");
        if (st) st = check_output(p.output);
        n.params = p;
        break;
      }
      default: st = add_movement(n, type, u); break;
    }
    widen_ = Widen::kNone;
    if (!st) return st.with_context(fmt::format("{}, debug_handle {}", n.name, n.debug_handle));
    HF2PTE_RETURN_IF_ERROR(check_fp16_use(n, moves));
    for (XNode& c : before_) out_.nodes.push_back(std::move(c));
    out_.nodes.push_back(std::move(n));
    for (XNode& c : after_) out_.nodes.push_back(std::move(c));
    return Status::ok();
  }

  Status add_unary_ids(XNode& n, UnaryKind kind, uint32_t in, uint32_t out, float alpha) {
    UnaryParams p{kind, 0, 0, alpha};
    HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(in, "input_id"));
    HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(out, "output_id"));
    HF2PTE_RETURN_IF_ERROR(check_float_like(p.input, "input"));
    HF2PTE_RETURN_IF_ERROR(check_float_like(p.output, "output"));
    HF2PTE_RETURN_IF_ERROR(check_output(p.output));
    n.params = p;
    return Status::ok();
  }

  const VerifiedPayload& p_;
  const fb::XNNGraph& g_;
  const pte::PteFile* file_;
  bool pack_;  ///< false: validate only, no float filter is transposed or dequantized
  XnnGraph out_;
  std::unordered_map<uint32_t, uint32_t> id_map_;
  /// fp16 -> fp32 widening of the node being added (resolve).
  enum class Widen { kNone, kCompute, kFullyConnected } widen_ = Widen::kNone;
  uint32_t handle_ = 0;                                ///< its debug handle, for the Converts
  std::vector<XNode> before_, after_;                  ///< Converts to run before / after it
  std::unordered_map<uint32_t, uint32_t> fp32_twin_;   ///< fp16 value -> its fp32 copy (inputs, constants)
};

/// Reads element `i` of a constant as float (dequantizing with channel `c`).
float const_as_float(const XValue& v, size_t i, int64_t c) {
  const auto* b = static_cast<const uint8_t*>(v.cptr);
  switch (v.dtype) {
    case XDtype::kFp32: return reinterpret_cast<const float*>(b)[i];
    case XDtype::kFp16: return half_to_float(reinterpret_cast<const uint16_t*>(b)[i]);
    case XDtype::kQInt8:
    case XDtype::kQCInt8: return float(int32_t(reinterpret_cast<const int8_t*>(b)[i]) - v.zero_point) * v.scale_of(c);
    case XDtype::kQUInt8: return float(int32_t(b[i]) - v.zero_point) * v.scale_of(c);
    case XDtype::kQInt32:
    case XDtype::kQCInt32:
      return float(int64_t(reinterpret_cast<const int32_t*>(b)[i]) - v.zero_point) * v.scale_of(c);
    case XDtype::kInt32: return float(reinterpret_cast<const int32_t*>(b)[i]);
    case XDtype::kQCInt4:
    case XDtype::kQBInt4:  // packed: read through int4_as_float
    case XDtype::kQDInt8: break;  // never constant
  }
  return 0.0f;
}

/// Element (r, c) of a 2-D 4-bit filter: nibble c of row r (low nibble first),
/// minus the implicit zero point 8, times its channel or block scale.
float int4_as_float(const XValue& w, int64_t r, int64_t c) {
  const auto* row = static_cast<const uint8_t*>(w.cptr) + size_t(r * ((w.dims[1] + 1) / 2));
  const int32_t q = quant::xnnpack_int4_at(row, c);
  if (w.dtype == XDtype::kQBInt4) {
    return float(q) * w.block_scales[size_t(r * (w.dims[1] / w.group_size) + c / w.group_size)];
  }
  return float(q) * w.scale_of(w.channel_dim == 0 ? r : c);
}

/// Dequantizes a filter once into p.weights as [n, k] float, the layout
/// gemm_f32_nt streams, whatever the serialized layout.
void pack_float_filter(FullyConnectedParams& p, const XValue& w, bool transposed) {
  p.weights.resize(size_t(p.n * p.k));
  for (int64_t r = 0; r < w.dims[0]; ++r) {
    for (int64_t c = 0; c < w.dims[1]; ++c) {
      // Per-channel scales run along channel_dim of the serialized layout.
      const float f = is_int4(w.dtype) ? int4_as_float(w, r, c)
                                       : const_as_float(w, size_t(r * w.dims[1] + c), w.channel_dim == 0 ? r : c);
      p.weights[size_t(transposed ? c * p.k + r : r * p.k + c)] = f;
    }
  }
}

bool Compiler::pack_qfilter(FullyConnectedParams& p, const XValue& w, bool transposed) {
  const XValue& x = val(p.input);
  const bool dynamic = x.dtype == XDtype::kQDInt8;
  const int32_t out_dim = transposed ? 1 : 0;
  bool ok = false;
  switch (w.dtype) {
    case XDtype::kQCInt8:
      ok = w.channel_dim == out_dim && w.channel_scales.size() == size_t(p.n) && (!dynamic || p.k <= kernels::kQMaxInt8K);
      break;
    case XDtype::kQCInt4: ok = !transposed && w.channel_dim == 0 && w.channel_scales.size() == size_t(p.n); break;
    case XDtype::kQBInt4: ok = !transposed && w.group_size % 8 == 0; break;
    default: break;
  }
  if (!ok) return false;
  uint32_t source = kInvalidId;
  if (dynamic) {
    // The producer: the last node so far writing x (a qdint8 has exactly one).
    for (auto it = out_.nodes.rbegin(); it != out_.nodes.rend(); ++it) {
      if (node_output(*it) != p.input) continue;
      const auto* u = std::get_if<UnaryParams>(&it->params);
      if (u != nullptr && u->kind == UnaryKind::kConvert && val(u->input).dtype == XDtype::kFp32) source = u->input;
      break;
    }
    if (source == kInvalidId) return false;
  }
  kernels::QFilter f;
  if (w.dtype == XDtype::kQCInt8) {
    const auto* src = static_cast<const int8_t*>(w.cptr);
    if (transposed) {
      std::vector<int8_t> nk(size_t(p.n * p.k));
      for (int64_t r = 0; r < p.k; ++r) {
        for (int64_t c = 0; c < p.n; ++c) nk[size_t(c * p.k + r)] = src[r * p.n + c];
      }
      f = kernels::pack_qfilter_int8(nk.data(), p.n, p.k, w.channel_scales.data());
    } else {
      f = kernels::pack_qfilter_int8(src, p.n, p.k, w.channel_scales.data());
    }
  } else if (w.dtype == XDtype::kQCInt4) {
    f = kernels::pack_qfilter_int4(static_cast<const uint8_t*>(w.cptr), p.n, p.k, w.channel_scales.data());
  } else {
    f = kernels::pack_qfilter_int4_block(static_cast<const uint8_t*>(w.cptr), p.n, p.k, w.group_size,
                                         w.block_scales.data());
  }
  p.qfilter = std::make_shared<const kernels::QFilter>(std::move(f));
  if (dynamic) {
    p.dynamic = true;
    p.quant_dims = x.num_nonbatch_dims;
    p.input = source;
  }
  // The packed copy is what runs: the file's pages can leave the resident set.
  if (w.constant.empty() && file_ != nullptr) {
    file_->release_pages({static_cast<const uint8_t*>(w.cptr), size_t(packed_bytes(w))});
  }
  return true;
}

// The filter once: fp32 and fp16 read in place, [n, k] (decode's GEMV reads
// each output's weights as one sequential row) or [k, n] (row-chunk GEMV),
// weight-only quantized filters dequantized to [n, k], int8 (static
// quantization) repacked.
Status Compiler::add_fully_connected(XNode& n, const fb::FullyConnected* t) {
  FullyConnectedParams p;
  HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(t->input1_id(), "input1_id"));
  HF2PTE_ASSIGN_OR_RETURN(p.filter, resolve(t->filter_id(), "filter_id"));
  HF2PTE_ASSIGN_OR_RETURN(p.bias, resolve(t->bias_id(), "bias_id", /*optional=*/true));
  HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
  HF2PTE_RETURN_IF_ERROR(check_output(p.output));
  const XValue& x = val(p.input);
  const XValue& w = val(p.filter);
  const XValue& y = val(p.output);
  HF2PTE_CHECK_OR_RETURN(w.is_constant, kNotSupported, "a non-constant filter is not supported");
  HF2PTE_CHECK_OR_RETURN(w.dims.size() == 2, kInvalidProgram, "filter must be 2-D, got rank {}", w.dims.size());
  const bool transposed = (t->flags() & kFlagTransposeWeights) != 0;
  p.n = transposed ? w.dims[1] : w.dims[0];
  p.k = transposed ? w.dims[0] : w.dims[1];
  const XValue* b = p.bias == kInvalidId ? nullptr : &val(p.bias);
  if (b != nullptr) {
    HF2PTE_CHECK_OR_RETURN(b->is_constant, kNotSupported, "a non-constant bias is not supported");
    HF2PTE_CHECK_OR_RETURN(numel_of(b->dims) == p.n, kInvalidProgram, "bias has {} elements; expected {}",
                           numel_of(b->dims), p.n);
  }
  // qdint8 inputs are held as float on their int8 grid (xnn_graph.h): they
  // take the quantized kernels reading the Convert's fp32 input (the kernel
  // quantizes it the same way), or the float path with dequantized weights.
  p.quantized = x.dtype != XDtype::kFp32 && x.dtype != XDtype::kQDInt8;
  if (!p.quantized) {
    HF2PTE_CHECK_OR_RETURN(y.dtype == XDtype::kFp32, kNotSupported, "fp32 input with {} output",
                           xdtype_name(y.dtype));
    HF2PTE_CHECK_OR_RETURN(w.dtype != XDtype::kQUInt8 && w.dtype != XDtype::kInt32 && w.dtype != XDtype::kQInt32 &&
                               w.dtype != XDtype::kQCInt32,
                           kNotSupported, "filter datatype {} with fp32 input", xdtype_name(w.dtype));
    // fp32 and fp16 filters run from the program's bytes in either layout
    // ([k, n] too: transposing bench-1b at init took 19 s, against 0.6 s to
    // load it in place), or from a huge-page copy of them.
    const bool float_filter = x.dtype == XDtype::kFp32 && (w.dtype == XDtype::kFp32 || w.dtype == XDtype::kFp16);
    if (float_filter && pack_ && rt::weight_placement() == rt::WeightPlacement::kHugePages) {
      HF2PTE_RETURN_IF_ERROR(copy_to_huge_pages(p, w, transposed));
    } else if (float_filter) {
      read_in_place(p, w.dtype, transposed, w.cptr);
    } else if (!pack_) {
      // Inspection: the filter's checks above are all it needs.
    } else if (!pack_qfilter(p, w, transposed)) {
      pack_float_filter(p, w, transposed);
    }
    if (b != nullptr) {
      p.bias_f.resize(size_t(p.n));
      for (int64_t c = 0; c < p.n; ++c) p.bias_f[size_t(c)] = const_as_float(*b, size_t(c), c);
    }
  } else {
    // Static quantization: qint8 x qint8/qcint8 (+ qint32/qcint32) -> qint8.
    HF2PTE_CHECK_OR_RETURN(x.dtype == XDtype::kQInt8 && y.dtype == XDtype::kQInt8, kNotSupported,
                           "quantized fully-connected {} -> {}; expected qint8 -> qint8", xdtype_name(x.dtype),
                           xdtype_name(y.dtype));
    HF2PTE_CHECK_OR_RETURN(w.dtype == XDtype::kQInt8 || w.dtype == XDtype::kQCInt8, kNotSupported,
                           "filter datatype {} with qint8 input", xdtype_name(w.dtype));
    HF2PTE_CHECK_OR_RETURN(b == nullptr || b->dtype == XDtype::kQInt32 || b->dtype == XDtype::kQCInt32,
                           kNotSupported, "bias datatype {} with qint8 input", xdtype_name(b->dtype));
    p.weight_zero_point = w.zero_point;
    p.weights_q.resize(size_t(p.n * p.k));
    p.requant.resize(size_t(p.n));
    const auto* wq = static_cast<const int8_t*>(w.cptr);
    for (int64_t r = 0; r < w.dims[0]; ++r) {
      for (int64_t c = 0; c < w.dims[1]; ++c) {
        p.weights_q[size_t(transposed ? c * p.k + r : r * p.k + c)] = wq[r * w.dims[1] + c];
      }
    }
    for (int64_t c = 0; c < p.n; ++c) {
      const float ws = w.channel_scales.empty() ? w.scale : w.channel_scales[size_t(c)];
      p.requant[size_t(c)] = x.scale * ws / y.scale;
    }
    if (b != nullptr) {
      const auto* bq = static_cast<const int32_t*>(b->cptr);
      p.bias_q.assign(bq, bq + p.n);
    }
  }
  n.params = std::move(p);
  return Status::ok();
}

namespace {

/// Window fields as the kernels take them; every size in [1, 2^16] (pads in
/// [0, 2^16]), so no later product overflows.
Result<WindowParams> window_params(uint32_t pt, uint32_t pr, uint32_t pb, uint32_t pl, uint32_t kh, uint32_t kw,
                                   uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw) {
  constexpr uint32_t kMax = 1u << 16;
  for (uint32_t v : {kh, kw, sh, sw, dh, dw}) {
    HF2PTE_CHECK_OR_RETURN(v >= 1 && v <= kMax, kInvalidProgram,
                           "window {}x{}, stride {}x{}, dilation {}x{}: each must be in 1..{}", kh, kw, sh, sw, dh,
                           dw, kMax);
  }
  for (uint32_t v : {pt, pr, pb, pl}) {
    HF2PTE_CHECK_OR_RETURN(v <= kMax, kInvalidProgram, "padding {} exceeds {}", v, kMax);
  }
  WindowParams w;
  w.window.kernel_h = kh;
  w.window.kernel_w = kw;
  w.window.stride_h = sh;
  w.window.stride_w = sw;
  w.window.dilation_h = dh;
  w.window.dilation_w = dw;
  w.window.pad_top = pt;
  w.window.pad_left = pl;
  w.pad_bottom = pb;
  w.pad_right = pr;
  return w;
}

}  // namespace

// Conv2d: filter [groups * cout_g, KH, KW, cin_g]; DepthwiseConv2d: filter
// [1, KH, KW, groups * multiplier] with multiplier = group_output_channels /
// group_input_channels (§7). Filter and bias fp32 constants, read in place.
Status Compiler::add_conv(XNode& n, const fb::NodeConv* t, bool depthwise) {
  ConvParams p{};
  HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(t->input1_id(), "input1_id"));
  HF2PTE_ASSIGN_OR_RETURN(p.filter, resolve(t->filter_id(), "filter_id"));
  HF2PTE_ASSIGN_OR_RETURN(p.bias, resolve(t->bias_id(), "bias_id", /*optional=*/true));
  HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
  HF2PTE_RETURN_IF_ERROR(check_output(p.output));
  for (uint32_t i : {p.input, p.filter, p.output}) HF2PTE_RETURN_IF_ERROR(check_fp32(i, "operand"));
  HF2PTE_ASSIGN_OR_RETURN(p.win, window_params(t->padding_top(), t->padding_right(), t->padding_bottom(),
                                               t->padding_left(), t->kernel_height(), t->kernel_width(),
                                               t->subsampling_height(), t->subsampling_width(), t->dilation_height(),
                                               t->dilation_width()));
  const uint32_t groups = t->groups(), cin_g = t->group_input_channels(), cout_g = t->group_output_channels();
  HF2PTE_CHECK_OR_RETURN(groups >= 1 && cin_g >= 1 && cout_g >= 1 && uint64_t(groups) * cin_g <= (1u << 20) &&
                             uint64_t(groups) * cout_g <= (1u << 20),
                         kInvalidProgram, "groups {} x channels {} -> {} out of range", groups, cin_g, cout_g);
  p.depthwise = depthwise;
  p.groups = groups;
  p.cin_g = depthwise ? 1 : cin_g;
  p.cout_g = depthwise ? cout_g / cin_g : cout_g;
  HF2PTE_CHECK_OR_RETURN(!depthwise || cout_g % cin_g == 0, kInvalidProgram,
                         "depthwise output channels {} are not a multiple of input channels {}", cout_g, cin_g);
  const int64_t cout = p.groups * p.cout_g;
  const XValue& w = val(p.filter);
  const std::vector<int64_t> want = depthwise ? std::vector<int64_t>{1, p.win.window.kernel_h, p.win.window.kernel_w, cout}
                                              : std::vector<int64_t>{cout, p.win.window.kernel_h, p.win.window.kernel_w, p.cin_g};
  HF2PTE_CHECK_OR_RETURN(w.is_constant, kNotSupported, "a non-constant filter is not supported");
  HF2PTE_CHECK_OR_RETURN(w.dims == want, kInvalidProgram, "filter dims [{}]; the node's fields give [{}]",
                         fmt::join(w.dims, ", "), fmt::join(want, ", "));
  p.weights = static_cast<const float*>(w.cptr);
  if (p.bias != kInvalidId) {
    const XValue& b = val(p.bias);
    HF2PTE_CHECK_OR_RETURN(b.is_constant && b.dtype == XDtype::kFp32, kNotSupported, "the bias must be an fp32 constant");
    HF2PTE_CHECK_OR_RETURN(numel_of(b.dims) == cout, kInvalidProgram, "bias has {} elements; expected {}",
                           numel_of(b.dims), cout);
    p.bias_f = static_cast<const float*>(b.cptr);
  }
  // Transformed once for the convolutions Winograd can pay off on (the output
  // size decides per run: kernels::winograd_pays).
  if (pack_ && !depthwise && kernels::winograd_applies(p.win.window, p.groups) &&
      p.cin_g >= kernels::kWinogradMinInputChannels) {
    p.winograd = std::make_shared<const kernels::WinogradFilter>(kernels::winograd_filter_3x3(p.weights, cout, p.cin_g));
  }
  if (pack_ && !depthwise && p.groups == 1 && kernels::packed_conv_available()) {
    p.packed = std::make_shared<const kernels::PackedConvFilter>(kernels::pack_conv_filter(
        p.weights, p.bias_f, cout, p.win.window.kernel_h, p.win.window.kernel_w, p.cin_g));
  }
  n.params = p;
  return Status::ok();
}

Status Compiler::add_max_pool(XNode& n, const fb::Pooling2D* t) {
  PoolParams p{};
  HF2PTE_ASSIGN_OR_RETURN(p.input, resolve(t->input_id(), "input_id"));
  HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
  HF2PTE_RETURN_IF_ERROR(check_output(p.output));
  for (uint32_t i : {p.input, p.output}) HF2PTE_RETURN_IF_ERROR(check_fp32(i, "operand"));
  HF2PTE_ASSIGN_OR_RETURN(p.win, window_params(t->padding_top(), t->padding_right(), t->padding_bottom(),
                                               t->padding_left(), t->pooling_height(), t->pooling_width(),
                                               t->stride_height(), t->stride_width(), t->dilation_height(),
                                               t->dilation_width()));
  n.params = p;
  return Status::ok();
}

Status Compiler::add_movement(XNode& n, fb::XNodeUnion type, const void* u) {
  using T = fb::XNodeUnion;
  auto ids = [&](uint32_t in, uint32_t out, uint32_t* pin, uint32_t* pout) -> Status {
    HF2PTE_ASSIGN_OR_RETURN(*pin, resolve(in, "input_id"));
    HF2PTE_ASSIGN_OR_RETURN(*pout, resolve(out, "output_id"));
    HF2PTE_CHECK_OR_RETURN(!is_int4(val(*pin).dtype) && !is_int4(val(*pout).dtype), kNotSupported,
                           "4-bit values only feed fully-connected filters");
    HF2PTE_CHECK_OR_RETURN(xdtype_size(val(*pin).dtype) == xdtype_size(val(*pout).dtype), kInvalidProgram,
                           "input {} and output {} datatypes differ", xdtype_name(val(*pin).dtype),
                           xdtype_name(val(*pout).dtype));
    return check_output(*pout);
  };
  auto vec = [](const flatbuffers::Vector<uint32_t>* v) {
    return v == nullptr ? std::vector<uint32_t>{} : std::vector<uint32_t>(v->begin(), v->end());
  };
  switch (type) {
    case T::XNNSoftmax: {
      auto t = static_cast<const fb::Node1x1*>(u);
      SoftmaxParams p{};
      HF2PTE_RETURN_IF_ERROR(ids(t->input_id(), t->output_id(), &p.input, &p.output));
      HF2PTE_CHECK_OR_RETURN(val(p.input).dtype == XDtype::kFp32, kNotSupported, "softmax needs fp32");
      n.params = p;
      return Status::ok();
    }
    case T::XNNBatchMatrixMultiply: {
      auto t = static_cast<const fb::Node2x1*>(u);
      BatchMatMulParams p{};
      HF2PTE_ASSIGN_OR_RETURN(p.input1, resolve(t->input1_id(), "input1_id"));
      HF2PTE_ASSIGN_OR_RETURN(p.input2, resolve(t->input2_id(), "input2_id"));
      HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
      for (uint32_t i : {p.input1, p.input2, p.output}) {
        HF2PTE_CHECK_OR_RETURN(val(i).dtype == XDtype::kFp32, kNotSupported, "batch matmul needs fp32, got {}",
                               xdtype_name(val(i).dtype));
      }
      HF2PTE_RETURN_IF_ERROR(check_output(p.output));
      p.transpose_b = (t->flags() & kFlagTransposeWeights) != 0;
      n.params = p;
      return Status::ok();
    }
    case T::XNNStaticTranspose: {
      auto t = static_cast<const fb::StaticTranspose*>(u);
      TransposeParams p{};
      HF2PTE_RETURN_IF_ERROR(ids(t->input_id(), t->output_id(), &p.input, &p.output));
      HF2PTE_CHECK_OR_RETURN(t->perm() != nullptr, kInvalidProgram, "perm is missing");
      p.perm = vec(t->perm());
      std::vector<bool> seen(p.perm.size());
      for (uint32_t d : p.perm) {
        HF2PTE_CHECK_OR_RETURN(d < p.perm.size() && !seen[d], kInvalidProgram, "perm [{}] is not a permutation",
                               fmt::join(p.perm, ","));
        seen[d] = true;
      }
      n.params = std::move(p);
      return Status::ok();
    }
    case T::XNNStaticReshape: {
      auto t = static_cast<const fb::StaticReshape*>(u);
      ReshapeParams p{};
      HF2PTE_RETURN_IF_ERROR(ids(t->input_id(), t->output_id(), &p.input, &p.output));
      HF2PTE_CHECK_OR_RETURN(t->new_shape() != nullptr, kInvalidProgram, "new_shape is missing");
      p.new_shape = vec(t->new_shape());
      HF2PTE_CHECK_OR_RETURN(p.new_shape.size() <= kMaxRank, kInvalidProgram, "new_shape rank {} > {}",
                             p.new_shape.size(), kMaxRank);
      HF2PTE_CHECK_OR_RETURN(std::count(p.new_shape.begin(), p.new_shape.end(), 0u) <= 1, kInvalidProgram,
                             "new_shape has more than one inferred (0) dim");
      n.params = std::move(p);
      return Status::ok();
    }
    case T::XNNStaticSlice: {
      auto t = static_cast<const fb::StaticSlice*>(u);
      SliceParams p{};
      HF2PTE_RETURN_IF_ERROR(ids(t->input_id(), t->output_id(), &p.input, &p.output));
      HF2PTE_CHECK_OR_RETURN(t->offsets() != nullptr && t->sizes() != nullptr &&
                                 t->offsets()->size() == t->sizes()->size(),
                             kInvalidProgram, "offsets and sizes must be present with equal lengths");
      p.offsets = vec(t->offsets());
      p.sizes = vec(t->sizes());
      n.params = std::move(p);
      return Status::ok();
    }
    case T::XNNStaticConstantPad: {
      auto t = static_cast<const fb::StaticConstantPad*>(u);
      PadParams p{};
      HF2PTE_RETURN_IF_ERROR(ids(t->input_id(), t->output_id(), &p.input, &p.output));
      HF2PTE_CHECK_OR_RETURN(t->pre_paddings() != nullptr && t->post_paddings() != nullptr &&
                                 t->pre_paddings()->size() == t->post_paddings()->size(),
                             kInvalidProgram, "pre/post paddings must be present with equal lengths");
      p.pre = vec(t->pre_paddings());
      p.post = vec(t->post_paddings());
      p.value = t->padding_value();
      HF2PTE_CHECK_OR_RETURN(val(p.input).dtype == XDtype::kFp32 || val(p.input).dtype == XDtype::kFp16,
                             kNotSupported, "constant pad needs fp32 or fp16, got {}", xdtype_name(val(p.input).dtype));
      n.params = std::move(p);
      return Status::ok();
    }
    case T::XNNConcatenate2:
    case T::XNNConcatenate3:
    case T::XNNConcatenate4:
    case T::XNNConcatenate5: {
      auto t = static_cast<const fb::Cat*>(u);
      const int count = type == T::XNNConcatenate2 ? 2 : type == T::XNNConcatenate3 ? 3
                        : type == T::XNNConcatenate4 ? 4 : 5;
      const uint32_t raw[5] = {t->input1_id(), t->input2_id(), t->input3_id(), t->input4_id(), t->input5_id()};
      ConcatParams p{};
      p.axis = t->axis();
      HF2PTE_ASSIGN_OR_RETURN(p.output, resolve(t->output_id(), "output_id"));
      HF2PTE_RETURN_IF_ERROR(check_output(p.output));
      for (int i = 0; i < count; ++i) {
        HF2PTE_ASSIGN_OR_RETURN(uint32_t in, resolve(raw[i], "input_id"));
        HF2PTE_CHECK_OR_RETURN(!is_int4(val(in).dtype), kNotSupported, "4-bit concat input");
        HF2PTE_CHECK_OR_RETURN(xdtype_size(val(in).dtype) == xdtype_size(val(p.output).dtype), kInvalidProgram,
                               "concat input {} datatype {} differs from output {}", i, xdtype_name(val(in).dtype),
                               xdtype_name(val(p.output).dtype));
        p.inputs.push_back(in);
      }
      n.params = std::move(p);
      return Status::ok();
    }
    default: break;
  }
  return make_error(ErrorCode::kNotSupported, "XNNPACK node {} is not supported by hf2pte's XNNPACK backend", n.name);
}

}  // namespace

std::vector<uint32_t> node_inputs(const XNode& n) {
  struct Visit {
    std::vector<uint32_t> operator()(const UnaryParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const BinaryParams& p) const { return {p.input1, p.input2}; }
    std::vector<uint32_t> operator()(const FullyConnectedParams& p) const { return {p.input, p.filter, p.bias}; }
    std::vector<uint32_t> operator()(const BatchMatMulParams& p) const { return {p.input1, p.input2}; }
    std::vector<uint32_t> operator()(const SoftmaxParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const TransposeParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const ReshapeParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const SliceParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const ConcatParams& p) const { return p.inputs; }
    std::vector<uint32_t> operator()(const PadParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const ConvParams& p) const { return {p.input, p.filter, p.bias, p.residual}; }
    std::vector<uint32_t> operator()(const PoolParams& p) const { return {p.input}; }
    std::vector<uint32_t> operator()(const GlobalPoolParams& p) const { return {p.input}; }
  };
  return std::visit(Visit{}, n.params);
}

uint32_t node_output(const XNode& n) {
  return std::visit([](const auto& p) { return p.output; }, n.params);
}

bool is_view(const XnnGraph& g, const XNode& n) {
  const auto* p = std::get_if<ReshapeParams>(&n.params);
  if (p == nullptr) return false;
  const XValue &x = g.values[p->input], &y = g.values[p->output];
  return !y.is_output && !y.is_input && !y.is_constant && y.dtype == x.dtype;
}

Result<std::vector<int64_t>> reshaped(std::span<const int64_t> in, std::span<const uint32_t> new_shape) {
  int64_t count = 1;
  for (int64_t d : in) count *= d;
  std::vector<int64_t> out(new_shape.begin(), new_shape.end());
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      inferred = int(i);
      continue;
    }
    // new_shape is hostile: bound the product before it can overflow.
    HF2PTE_CHECK_OR_RETURN(uint64_t(known) <= kMaxValueBytes / uint64_t(out[i]), kOutOfRange,
                           "new_shape [{}] is too large", fmt::join(out, ", "));
    known *= out[i];
  }
  if (inferred >= 0) {
    HF2PTE_CHECK_OR_RETURN(known != 0 && count % known == 0, kInvalidArgument,
                           "cannot infer a dim of [{}] for {} elements", fmt::join(out, ", "), count);
    out[size_t(inferred)] = count / known;
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  HF2PTE_CHECK_OR_RETURN(total == count, kInvalidArgument, "reshape of [{}] to [{}] changes the element count",
                         fmt::join(in, ", "), fmt::join(out, ", "));
  return out;
}

namespace {

/// Per value: how many node inputs read it, and the index of the node that
/// writes it (-1: none).
struct ValueUses {
  std::vector<uint32_t> readers;
  std::vector<int64_t> produced_at;
};
ValueUses value_uses(const XnnGraph& g) {
  const size_t nv = g.values.size();
  ValueUses u{std::vector<uint32_t>(nv, 0), std::vector<int64_t>(nv, -1)};
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (uint32_t v : node_inputs(g.nodes[i])) {
      if (v < nv) ++u.readers[v];
    }
    if (const uint32_t o = node_output(g.nodes[i]); o < nv) u.produced_at[o] = int64_t(i);
  }
  return u;
}

/// A StaticReshape from an internal value to an external output (a decoder's
/// logits [1, S, V] from the lm_head's [S, V]) would copy the whole value
/// every run: 65 MB for 512 prompt tokens. When the reshape is the value's
/// only reader and the value's producer is a computing node (not another
/// view), the producer writes into the output's memory instead.
void forward_output_reshapes(XnnGraph& g) {
  const size_t nv = g.values.size();
  auto [readers, produced_at] = value_uses(g);
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    auto* r = std::get_if<ReshapeParams>(&g.nodes[j].params);
    if (r == nullptr || r->input >= nv || r->output >= nv) continue;
    XValue &x = g.values[r->input], &y = g.values[r->output];
    const int64_t producer = produced_at[r->input];
    if (!y.is_output || y.is_input || x.is_input || x.is_output || x.is_constant || x.dtype != y.dtype ||
        readers[r->input] != 1 || producer < 0 || size_t(producer) > j ||
        std::holds_alternative<ReshapeParams>(g.nodes[size_t(producer)].params)) {
      continue;
    }
    r->forwarded = true;
    x.forwarded_by = uint32_t(j);
  }
}

/// Marks qdint8 Converts that nothing reads any more (their FullyConnected
/// readers quantize the fp32 input themselves) as fused: not run.
void skip_fused_converts(XnnGraph& g) {
  std::vector<uint32_t> readers(g.values.size(), 0);
  for (const XNode& n : g.nodes) {
    for (uint32_t v : node_inputs(n)) {
      if (v < readers.size()) ++readers[v];
    }
  }
  for (XNode& n : g.nodes) {
    auto* u = std::get_if<UnaryParams>(&n.params);
    if (u != nullptr && u->kind == UnaryKind::kConvert && g.values[u->output].dtype == XDtype::kQDInt8 &&
        readers[u->output] == 0) {
      u->fused = true;
    }
  }
}

/// conv -> Add(conv, r) where the conv's output has no other reader, no
/// output clamp, and r exists before the conv runs (a ResNet block's residual):
/// the Add is dropped and the conv adds r in its epilogue, writing the Add's
/// output with the Add's clamp. Equal serialized dims only (no broadcast).
void fuse_residual_adds(XnnGraph& g) {
  auto [readers, produced_at] = value_uses(g);
  std::vector<bool> dropped(g.nodes.size(), false);
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const auto* add = std::get_if<BinaryParams>(&g.nodes[j].params);
    if (add == nullptr || add->kind != BinaryKind::kAdd) continue;
    for (const auto& [c, r] : {std::pair{add->input1, add->input2}, std::pair{add->input2, add->input1}}) {
      if (c == r || produced_at[c] < 0 || readers[c] != 1 || g.values[c].is_output) continue;
      XNode& conv_node = g.nodes[size_t(produced_at[c])];
      auto* conv = std::get_if<ConvParams>(&conv_node.params);
      if (conv == nullptr || conv->depthwise || conv->residual != kInvalidId || std::isfinite(conv_node.out_min) ||
          std::isfinite(conv_node.out_max)) {
        continue;
      }
      const XValue &cv = g.values[c], &rv = g.values[r], &yv = g.values[add->output];
      if (cv.dims != rv.dims || cv.dims != yv.dims || rv.dtype != XDtype::kFp32 || yv.dtype != XDtype::kFp32) continue;
      if (!(rv.is_input || rv.is_constant || (produced_at[r] >= 0 && produced_at[r] < produced_at[c]))) continue;
      conv->residual = r;
      conv->output = add->output;
      conv_node.out_min = g.nodes[j].out_min;
      conv_node.out_max = g.nodes[j].out_max;
      produced_at[add->output] = produced_at[c];
      dropped[j] = true;
      break;
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dropped[i]) continue;
    if (k != i) g.nodes[k] = std::move(g.nodes[i]);  // never self-move: it would empty the node
    ++k;
  }
  g.nodes.resize(k);
}

/// Fills g.release_after: storage of internal value v (or of what it views)
/// is released after the last node that reads v or any view of it.
void plan_lifetimes(XnnGraph& g) {
  const size_t nv = g.values.size();
  std::vector<uint32_t> root(nv);
  for (uint32_t v = 0; v < nv; ++v) root[v] = v;
  std::vector<int64_t> last(nv, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const XNode& n = g.nodes[i];
    const uint32_t out = node_output(n);
    if (out < nv) last[root[out]] = std::max<int64_t>(last[root[out]], int64_t(i));
    for (uint32_t v : node_inputs(n)) {
      if (v < nv) last[root[v]] = std::max<int64_t>(last[root[v]], int64_t(i));
    }
    if (is_view(g, n) && out < nv) root[out] = root[std::get<ReshapeParams>(n.params).input];
  }
  g.release_after.assign(g.nodes.size(), {});
  for (uint32_t v = 0; v < nv; ++v) {
    const XValue& x = g.values[v];
    if (root[v] != v || x.is_input || x.is_output || x.is_constant || x.forwarded_by != kInvalidId || last[v] < 0) {
      continue;
    }
    g.release_after[size_t(last[v])].push_back(v);
  }
}

/// External inputs read only as the second operand of rank-3 batch matmuls
/// may be bound to views with a batch stride (XValue::takes_batch_stride).
void mark_batch_strided_inputs(XnnGraph& g) {
  const size_t nv = g.values.size();
  std::vector<uint8_t> ok(nv, 1);
  for (const XNode& n : g.nodes) {
    const auto* mm = std::get_if<BatchMatMulParams>(&n.params);
    for (uint32_t v : node_inputs(n)) {
      if (v < nv && (mm == nullptr || v != mm->input2 || v == mm->input1)) ok[v] = 0;
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    XValue& x = g.values[v];
    x.takes_batch_stride = ok[v] && x.is_input && !x.is_output && x.dtype == XDtype::kFp32 && x.dims.size() == 3;
  }
}

}  // namespace

Result<XnnGraph> compile_payload(std::span<const uint8_t> payload, const pte::PteFile* file, CompileFor purpose) {
  HF2PTE_ASSIGN_OR_RETURN(VerifiedPayload p, verify_payload(payload));
  HF2PTE_ASSIGN_OR_RETURN(XnnGraph g, Compiler(p, file, purpose).run());
  skip_fused_converts(g);
  if (purpose == CompileFor::kExecution) {
    fuse_residual_adds(g);
    forward_output_reshapes(g);  // after the fusion: it holds node indices
    mark_batch_strided_inputs(g);
  }
  plan_lifetimes(g);
  return g;
}

}  // namespace hf2pte::xnn
