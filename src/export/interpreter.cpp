#include "export/interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "runtime/evalue.h"
#include "runtime/tensor.h"

namespace hf2pte::exp {

using graph::Arg;
using graph::ValueId;

/// A value's storage: exactly-sized host bytes and the runtime view over them.
struct GraphInterpreter::Slot {
  HostTensor host;
  rt::Tensor tensor;
  bool is_int = false;  // kSymInt values
  int64_t int_value = 0;

  void bind(ScalarType dtype, std::vector<int64_t> sizes) {
    host.dtype = dtype;
    host.sizes = sizes;
    host.bytes.assign(size_t(std::max<int64_t>(host.numel(), 0)) * element_size(dtype), 0);
    std::vector<uint8_t> order(sizes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = uint8_t(i);
    tensor = rt::Tensor(dtype, std::move(sizes), std::move(order), host.bytes.data(), host.bytes.size(),
                        rt::ShapeDynamism::kDynamicBound);
  }
  /// The host copy with the tensor's current (possibly resized) shape.
  HostTensor current() const {
    HostTensor t{host.dtype, std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()), {}};
    t.bytes.assign(host.bytes.begin(), host.bytes.begin() + long(tensor.nbytes()));
    return t;
  }
};

namespace {

template <typename F>
void for_each_value(const graph::Node& n, F&& f) {
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<ValueId>(&a)) f(*id);
    if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) f(v);
    if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto v : *l) if (v) f(*v);
  }
}

const float* fdata(const rt::Tensor& t) { return t.data<float>(); }

/// Index of `out_index` (a multi-index of `out_sizes`) in a tensor of `sizes`
/// broadcast against it (right-aligned, size-1 dims repeat).
int64_t broadcast_offset(const std::vector<int64_t>& out_index, std::span<const int64_t> sizes) {
  int64_t off = 0, stride = 1;
  size_t r = sizes.size(), n = out_index.size();
  for (size_t i = 0; i < r; ++i) {
    size_t d = r - 1 - i;
    int64_t idx = sizes[d] == 1 ? 0 : out_index[n - 1 - i];
    off += idx * stride;
    stride *= sizes[d];
  }
  return off;
}

Status require_f32(const rt::Tensor& t, const char* what) {
  HF2PTE_CHECK_OR_RETURN(t.dtype() == ScalarType::kFloat, kNotSupported,
                         "reference interpreter: {} must be f32, got {}", what, scalar_type_name(t.dtype()));
  return Status::ok();
}

// y[m, n] = sum_k x[m, k] w[n, k] + b[n]
Status ref_linear(const rt::Tensor& x, const rt::Tensor& w, const rt::Tensor* b, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "linear input"));
  HF2PTE_RETURN_IF_ERROR(require_f32(w, "linear weight"));
  int64_t K = w.size(1), N = w.size(0), M = x.numel() / std::max<int64_t>(K, 1);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = b ? double(fdata(*b)[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(fdata(x)[m * K + k]) * double(fdata(w)[n * K + k]);
      y.data<float>()[m * N + n] = float(acc);
    }
  }
  return Status::ok();
}

// y = x / sqrt(mean(x^2) + eps) * w over the last dim
Status ref_rms_norm(const rt::Tensor& x, const rt::Tensor* w, double eps, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "rms_norm input"));
  int64_t D = x.size(-1), rows = x.numel() / std::max<int64_t>(D, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = fdata(x) + r * D;
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(in[i]) * double(in[i]);
    double inv = 1.0 / std::sqrt(ss / double(D) + eps);
    for (int64_t i = 0; i < D; ++i) {
      double v = double(in[i]) * inv;
      y.data<float>()[r * D + i] = float(w ? v * double(fdata(*w)[i]) : v);
    }
  }
  return Status::ok();
}

Status ref_silu(const rt::Tensor& x, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "silu input"));
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = fdata(x)[i];
    y.data<float>()[i] = float(v / (1.0 + std::exp(-v)));
  }
  return Status::ok();
}

// softmax(q k^T * scale + mask) v with GQA (query head h uses kv head h / group).
Status ref_sdpa(const rt::Tensor& q, const rt::Tensor& k, const rt::Tensor& v, const rt::Tensor* mask, bool causal,
                double scale, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(q, "sdpa query"));
  int r = q.dim();
  int64_t Hq = q.size(r - 3), L = q.size(r - 2), D = q.size(r - 1);
  int64_t Hkv = k.size(r - 3), S = k.size(r - 2), Dv = v.size(r - 1);
  int64_t B = q.numel() / (Hq * L * D);
  int64_t group = Hq / std::max<int64_t>(Hkv, 1);
  std::vector<double> p(static_cast<size_t>(S));
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / group;
      for (int64_t i = 0; i < L; ++i) {
        const float* qi = fdata(q) + ((b * Hq + h) * L + i) * D;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          const float* kj = fdata(k) + ((b * Hkv + hk) * S + j) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(qi[d]) * double(kj[d]);
          s *= scale;
          if (causal && j > i) s = -std::numeric_limits<double>::infinity();
          if (mask) {
            // Mask broadcast against [B..., Hq, L, S]; the leading dims are flattened into b.
            idx[size_t(r - 3)] = h, idx[size_t(r - 2)] = i, idx[size_t(r - 1)] = j;
            int64_t off = broadcast_offset(idx, mask->sizes());
            if (mask->dtype() == ScalarType::kBool) {
              if (!mask->data<bool>()[off]) s = -std::numeric_limits<double>::infinity();
            } else {
              s += double(mask->data<float>()[off]);
            }
          }
          p[size_t(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - mx));
        float* out = y.data<float>() + ((b * Hq + h) * L + i) * Dv;
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += p[size_t(j)] * double(fdata(v)[((b * Hkv + hk) * S + j) * Dv + d]);
          out[d] = float(acc / sum);
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace

GraphInterpreter::GraphInterpreter(const graph::Graph& g, const rt::KernelRegistry& kernels) : g_(g), kernels_(kernels) {
  for (size_t i = 0; i < g.nodes().size(); ++i) for_each_value(g.nodes()[i], [&](ValueId v) { last_use_[v] = i; });
  for (auto v : g.outputs()) last_use_[v] = SIZE_MAX;
}

GraphInterpreter::~GraphInterpreter() = default;

Result<GraphInterpreter::Slot*> GraphInterpreter::slot(ValueId v) {
  if (auto it = slots_.find(v); it != slots_.end()) return it->second.get();
  const auto& val = g_.value(v);
  auto s = std::make_unique<Slot>();
  if (val.role == graph::ValueRole::kConstant) {
    const auto& c = g_.constant(v);
    s->bind(c.dtype, c.sizes);
    size_t at = 0;
    HF2PTE_RETURN_IF_ERROR(c.write([&](const void* d, size_t n) -> Status {
      HF2PTE_CHECK_OR_RETURN(at + n <= s->host.bytes.size(), kInternal, "constant %{} wrote too many bytes", val.name);
      std::memcpy(s->host.bytes.data() + at, d, n);
      at += n;
      return Status::ok();
    }));
  } else if (val.role == graph::ValueRole::kBuffer) {
    std::vector<int64_t> sizes;
    for (const auto& d : val.type.sizes) sizes.push_back(d.upper_bound(g_.dims()));
    s->bind(val.type.dtype, sizes);  // zeros
  } else {
    return make_error(ErrorCode::kInternal, "reference interpreter: %{} is used before it is computed", val.name);
  }
  return (slots_[v] = std::move(s)).get();
}

Result<std::vector<HostTensor>> GraphInterpreter::run(const std::vector<HostTensor>& inputs) {
  HF2PTE_CHECK_OR_RETURN(inputs.size() == g_.inputs().size(), kInvalidArgument, "graph {} takes {} inputs; got {}",
                         g_.name(), g_.inputs().size(), inputs.size());
  // Drop everything but persistent buffers from the previous call.
  for (auto it = slots_.begin(); it != slots_.end();) {
    it = g_.value(it->first).role == graph::ValueRole::kBuffer ? std::next(it) : slots_.erase(it);
  }
  env_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId v = g_.inputs()[i];
    const auto& t = g_.type(v);
    HF2PTE_CHECK_OR_RETURN(inputs[i].dtype == t.dtype && int(inputs[i].sizes.size()) == t.rank(), kInvalidArgument,
                           "input {} must be {}", i, t.str());
    for (int d = 0; d < t.rank(); ++d) {
      const auto& s = t.sizes[size_t(d)];
      if (s.kind() == graph::SymInt::Kind::kDim) env_[s.dim_name()] = inputs[i].sizes[size_t(d)];
    }
    auto s = std::make_unique<Slot>();
    s->bind(inputs[i].dtype, inputs[i].sizes);
    s->host.bytes = inputs[i].bytes;
    s->tensor.set_data(s->host.bytes.data(), s->host.bytes.size());
    slots_[v] = std::move(s);
  }
  for (size_t i = 0; i < g_.nodes().size(); ++i) {
    HF2PTE_RETURN_IF_ERROR(run_node(i).with_context(fmt::format("node {}", g_.nodes()[i].name)));
    // Free values (constants included) after their last use to bound memory.
    for_each_value(g_.nodes()[i], [&](ValueId v) {
      auto role = g_.value(v).role;
      if (role != graph::ValueRole::kBuffer && last_use_[v] == i) slots_.erase(v);
    });
  }
  std::vector<HostTensor> outs;
  for (auto v : g_.outputs()) {
    HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(v));
    outs.push_back(s->current());
  }
  return outs;
}

Status GraphInterpreter::run_node(size_t index) {
  const graph::Node& n = g_.nodes()[index];
  // Outputs at their concrete sizes under the current dims.
  for (ValueId out : n.outputs) {
    const auto& val = g_.value(out);
    auto s = std::make_unique<Slot>();
    if (val.role == graph::ValueRole::kSymInt) {
      s->is_int = true;
    } else {
      std::vector<int64_t> sizes;
      for (const auto& d : val.type.sizes) {
        auto e = d.evaluate(env_);
        HF2PTE_CHECK_OR_RETURN(e.has_value(), kInternal, "size {} of %{} cannot be evaluated", d.str(), val.name);
        sizes.push_back(*e);
      }
      s->bind(val.type.dtype, std::move(sizes));
    }
    slots_[out] = std::move(s);
  }
  auto tensor_of = [&](const Arg& a) -> Result<rt::Tensor*> {
    const auto* id = std::get_if<ValueId>(&a);
    if (id == nullptr) return static_cast<rt::Tensor*>(nullptr);
    HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*id));
    return &s->tensor;
  };

  if (!op_info(n.op).has_kernel) {
    HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, tensor_of(n.args[0]));
    rt::Tensor& y = slots_[n.outputs[0]]->tensor;
    switch (n.op) {
      case OpId::Linear: {
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, tensor_of(n.args[1]));
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, tensor_of(n.args[2]));
        return ref_linear(*x, *w, b, y);
      }
      case OpId::RmsNorm: {
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, tensor_of(n.args[2]));
        double eps = std::holds_alternative<double>(n.args[3]) ? std::get<double>(n.args[3])
                                                               : double(std::numeric_limits<float>::epsilon());
        return ref_rms_norm(*x, w, eps, y);
      }
      case OpId::Silu:
        return ref_silu(*x, y);
      case OpId::ScaledDotProductAttention: {
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * k, tensor_of(n.args[1]));
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * v, tensor_of(n.args[2]));
        HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * mask, tensor_of(n.args[3]));
        double scale = std::holds_alternative<double>(n.args[6]) ? std::get<double>(n.args[6])
                                                                 : 1.0 / std::sqrt(double(x->size(-1)));
        return ref_sdpa(*x, *k, *v, mask, std::get<bool>(n.args[5]), scale, y);
      }
      default:
        return make_error(ErrorCode::kNotSupported, "reference interpreter has no implementation of {}",
                          op_info(n.op).kernel_key());
    }
  }

  // Kernel ops: build KernelCall-style args exactly as the emitter lays them out.
  const auto& schema = op_schema(n.op);
  std::vector<std::unique_ptr<rt::EValue>> storage;
  auto make = [&](rt::EValue v) {
    storage.push_back(std::make_unique<rt::EValue>(std::move(v)));
    return storage.back().get();
  };
  auto int_value = [&](const graph::SymInt& s) -> Result<rt::EValue*> {
    auto e = s.evaluate(env_);
    HF2PTE_CHECK_OR_RETURN(e.has_value(), kInternal, "size {} cannot be evaluated", s.str());
    return make(rt::EValue::from_int(*e));
  };
  std::vector<rt::EValue*> args;
  size_t arg_i = 0, out_i = 0;
  for (const auto& a : schema.args) {
    if (a.is_out) {
      rt::EValue e;
      e.tag = rt::Tag::kTensor;
      e.tensor = &slots_[n.outputs[out_i++]]->tensor;
      args.push_back(make(std::move(e)));
      continue;
    }
    const Arg& arg = n.args[arg_i++];
    rt::EValue e;
    if (std::holds_alternative<graph::None>(arg)) {
      args.push_back(make(e));
    } else if (const auto* id = std::get_if<ValueId>(&arg)) {
      HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*id));
      if (s->is_int) {
        args.push_back(make(rt::EValue::from_int(s->int_value)));
      } else {
        e.tag = rt::Tag::kTensor;
        e.tensor = &s->tensor;
        args.push_back(make(std::move(e)));
      }
    } else if (const auto* i = std::get_if<int64_t>(&arg)) {
      args.push_back(make(rt::EValue::from_int(*i)));
    } else if (const auto* d = std::get_if<double>(&arg)) {
      args.push_back(make(rt::EValue::from_double(*d)));
    } else if (const auto* b = std::get_if<bool>(&arg)) {
      args.push_back(make(rt::EValue::from_bool(*b)));
    } else if (const auto* s = std::get_if<graph::SymInt>(&arg)) {
      HF2PTE_ASSIGN_OR_RETURN(rt::EValue * iv, int_value(*s));
      args.push_back(iv);
    } else if (const auto* st = std::get_if<ScalarType>(&arg)) {
      args.push_back(make(rt::EValue::from_int(int64_t(*st))));
    } else if (const auto* l = std::get_if<graph::IntList>(&arg)) {
      e.tag = rt::Tag::kIntList;
      for (const auto& s : *l) {
        HF2PTE_ASSIGN_OR_RETURN(rt::EValue * iv, int_value(s));
        e.items.push_back(iv);
      }
      args.push_back(make(std::move(e)));
    } else if (const auto* l = std::get_if<graph::TensorList>(&arg)) {
      e.tag = rt::Tag::kTensorList;
      for (auto v : *l) {
        HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(v));
        rt::EValue t;
        t.tag = rt::Tag::kTensor;
        t.tensor = &s->tensor;
        e.items.push_back(make(std::move(t)));
      }
      args.push_back(make(std::move(e)));
    } else if (const auto* l = std::get_if<graph::OptTensorList>(&arg)) {
      e.tag = rt::Tag::kOptionalTensorList;
      for (const auto& v : *l) {
        if (!v) {
          e.items.push_back(nullptr);
          continue;
        }
        HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*v));
        rt::EValue t;
        t.tag = rt::Tag::kTensor;
        t.tensor = &s->tensor;
        e.items.push_back(make(std::move(t)));
      }
      args.push_back(make(std::move(e)));
    } else {
      return make_error(ErrorCode::kInternal, "argument '{}' cannot be interpreted", a.name);
    }
  }
  // Return slot: the out for out variants, a fresh value for functional ops, self in place.
  if (schema.num_outs() >= 1) {
    args.push_back(args[schema.args.size() - 1]);
  } else {
    args.push_back(n.outputs.empty() ? args[0] : make(rt::EValue{}));
  }
  const rt::KernelFn* fn = kernels_.find(op_info(n.op).kernel_key());
  HF2PTE_CHECK_OR_RETURN(fn != nullptr, kNotFound, "no kernel for {}", op_info(n.op).kernel_key());
  rt::KernelContext ctx{op_info(n.op).kernel_key()};
  HF2PTE_RETURN_IF_ERROR((*fn)(ctx, args));
  if (schema.num_outs() == 0 && !n.outputs.empty()) {
    Slot* out = slots_[n.outputs[0]].get();
    if (out->is_int) {
      out->int_value = args.back()->i;
      if (g_.value(n.outputs[0]).role == graph::ValueRole::kSymInt) {
        // Keep symbolic names that are plain dims consistent with the value.
        const auto& sym = g_.value(n.outputs[0]).sym;
        if (sym.kind() == graph::SymInt::Kind::kDim) env_[sym.dim_name()] = out->int_value;
      }
    }
  }
  return Status::ok();
}

}  // namespace hf2pte::exp
