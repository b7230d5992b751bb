// Stage 1b (quantize): see stages.h and docs/quantization.md. Rules rewrite each
// linear / embedding whose weight is a constant into upstream's quantized ops;
// the weights are quantized lazily, when the constant streams (one layer at a
// time, cached for the two back-to-back reads of its integers and scales).
#include <algorithm>
#include <cstring>
#include <fnmatch.h>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "export/rewrite.h"
#include "export/stages.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "quant/quant.h"

namespace hf2pte::exp {

namespace {

using graph::ConstantData;
using graph::IntList;
using graph::None;
using graph::SymInt;
using graph::TensorType;
using Replacement = Result<std::optional<std::vector<ValueId>>>;

Replacement no_match() { return std::optional<std::vector<ValueId>>(); }
Replacement replaced_by(ValueId v) { return std::optional<std::vector<ValueId>>(std::vector<ValueId>{v}); }

/// One layer's recipe: 4- or 8-bit, `group` (0 = per channel), dynamic int8 activations or weight-only.
struct LayerRecipe {
  int bits = 8;
  int64_t group = 0;
  bool dynamic_activations = false;
  /// Scales rounded to bf16 (to nearest even): XNNPACK stores per-block 4-bit
  /// scales so (qbint4), and the graph computes what the delegate computes.
  bool bf16_scales = false;
  std::string name() const {
    return fmt::format("{}{}w{}", dynamic_activations ? "8da" : "", bits, group ? fmt::format("-g{}", group) : "");
  }
};

/// The single-slot cache of quantized weights: the integers and scales of one
/// layer are read back to back (partition hashing, then writing), so only the
/// last layer is kept.
class QuantCache {
 public:
  using Make = std::function<Result<quant::QuantizedWeight>()>;
  Result<std::shared_ptr<const quant::QuantizedWeight>> get(const void* key, const Make& make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (key_ != key || !value_) {
      value_.reset();
      HF2PTE_ASSIGN_OR_RETURN(quant::QuantizedWeight w, make());
      value_ = std::make_shared<const quant::QuantizedWeight>(std::move(w));
      key_ = key;
    }
    return value_;
  }

 private:
  std::mutex mu_;
  const void* key_ = nullptr;
  std::shared_ptr<const quant::QuantizedWeight> value_;
};

/// All of `c`'s elements (nbytes() / sizeof(T) of them).
template <class T>
Result<std::vector<T>> read_all(const ConstantData& c) {
  const size_t total = size_t(c.nbytes());
  std::vector<T> w(total / sizeof(T));
  size_t at = 0;
  HF2PTE_RETURN_IF_ERROR(c.write([&](const void* p, size_t n) -> Status {
    if (at + n > total) return make_error(ErrorCode::kInternal, "{} streamed more than {} bytes", c.origin, total);
    std::memcpy(reinterpret_cast<uint8_t*>(w.data()) + at, p, n);
    at += n;
    return Status::ok();
  }));
  if (at != total) return make_error(ErrorCode::kInternal, "{} streamed {} of {} bytes", c.origin, at, total);
  return w;
}

bool is_float_dtype(ScalarType t) { return t == ScalarType::kFloat || t == ScalarType::kHalf || t == ScalarType::kBFloat16; }

/// `c` as float32: the checkpoint's values where it streams from one, else
/// its 16-bit values widened exactly while they stream.
ConstantData widened(const ConstantData& c) {
  if (c.dtype == ScalarType::kFloat) return c;
  if (c.converted) return c.converted(ScalarType::kFloat);
  const bool bf16 = c.dtype == ScalarType::kBFloat16;
  return graph::recoded(c, ScalarType::kFloat, c.sizes, "|f32", 2, [bf16](const uint8_t* in, size_t n, std::vector<uint8_t>& out) {
    out.resize(n * sizeof(float));
    const auto* h = reinterpret_cast<const uint16_t*>(in);
    auto* f = reinterpret_cast<float*>(out.data());
    if (bf16) {
      kernels::simd().bf16_to_float_row(h, f, int64_t(n));
    } else {
      kernels::simd().half_to_float_row(h, f, int64_t(n));
    }
  });
}

/// A float constant to be quantized: its stream, block shape and recipe.
struct QuantSource {
  ConstantData source;
  quant::BlockShape shape;
  int bits = 8;
  quant::QParams algo = quant::QParams::kHqq;
  std::shared_ptr<QuantCache> cache;

  Result<std::shared_ptr<const quant::QuantizedWeight>> get() const {
    return cache->get(this, [this]() -> Result<quant::QuantizedWeight> {
      quant::ParallelFor pf = [](int64_t count, const std::function<void(int64_t, int64_t)>& f) {
        kernels::parallel_for(count, 64, f);
      };
      // The checkpoint's values, whatever the program's dtype (a 16-bit
      // program quantizes what an fp32 one does; docs/quantization.md,
      // "16-bit programs"). A bf16 layer is held as its bf16 bits: half the
      // memory, same numbers.
      const bool from_checkpoint = static_cast<bool>(source.converted);
      const bool bf16 = from_checkpoint ? source.source_dtype == ScalarType::kBFloat16 : source.dtype == ScalarType::kBFloat16;
      if (bf16) {
        HF2PTE_ASSIGN_OR_RETURN(auto w, read_all<uint16_t>(from_checkpoint ? source.converted(ScalarType::kBFloat16) : source));
        return quant::quantize_bf16_weight_in_place(w, shape, bits, algo, pf);
      }
      HF2PTE_ASSIGN_OR_RETURN(auto w, read_all<float>(widened(source)));
      return quant::quantize_weight_in_place(w, shape, bits, algo, pf);
    });
  }
};

std::string recipe_key(const QuantSource& s, std::string_view what) {
  if (s.source.dedup_key.empty()) return "";
  return fmt::format("{}|{}{}g{}{}", s.source.dedup_key, what, s.bits, s.shape.group, quant::qparams_name(s.algo));
}

/// The integers as int8 [rows, cols] (mixed_linear, embedding_byte).
ConstantData int8_constant(std::shared_ptr<const QuantSource> s, const LayerRecipe& r) {
  ConstantData c;
  c.dtype = ScalarType::kChar;
  c.sizes = {s->shape.rows, s->shape.cols};
  c.origin = fmt::format("{} as {} ({})", s->source.origin, r.name(), quant::qparams_name(s->algo));
  c.dedup_key = recipe_key(*s, "q");
  c.quant = graph::QuantInfo{r.bits, r.group, false};
  c.write = [s](const ConstantData::Sink& sink) -> Status {
    HF2PTE_ASSIGN_OR_RETURN(auto w, s->get());
    return sink(w->q.data(), w->q.size());
  };
  return c;
}

/// The integers packed two per byte in upstream's embedding_4bit order, uint8 [rows, cols / 2].
ConstantData embedding_int4_constant(std::shared_ptr<const QuantSource> s, const LayerRecipe& r) {
  ConstantData c;
  c.dtype = ScalarType::kByte;
  c.sizes = {s->shape.rows, s->shape.cols / 2};
  c.origin = fmt::format("{} as {} embedding ({})", s->source.origin, r.name(), quant::qparams_name(s->algo));
  c.dedup_key = recipe_key(*s, "e4");
  c.quant = graph::QuantInfo{r.bits, r.group, false};
  c.write = [s](const ConstantData::Sink& sink) -> Status {
    HF2PTE_ASSIGN_OR_RETURN(auto w, s->get());
    const int64_t cols = s->shape.cols;
    std::vector<uint8_t> packed(size_t(s->shape.rows * cols / 2));
    for (int64_t i = 0; i < s->shape.rows; ++i) {
      quant::pack_int4_embedding(std::span<const int8_t>(w->q.data() + i * cols, size_t(cols)), packed.data() + i * cols / 2);
    }
    return sink(packed.data(), packed.size());
  };
  return c;
}

/// The scales, float32 [rows] (per channel) or [rows, blocks per row].
ConstantData scales_constant(std::shared_ptr<const QuantSource> s, const LayerRecipe& r) {
  ConstantData c;
  c.dtype = ScalarType::kFloat;
  c.sizes = r.group == 0 ? std::vector<int64_t>{s->shape.rows} : std::vector<int64_t>{s->shape.rows, s->shape.blocks_per_row()};
  c.origin = fmt::format("{} {} scales", s->source.origin, r.name());
  c.dedup_key = recipe_key(*s, "s");
  c.quant = graph::QuantInfo{r.bits, r.group, true};
  if (r.bf16_scales) c.dedup_key += c.dedup_key.empty() ? "" : "|bf16";
  c.write = [s, bf16 = r.bf16_scales](const ConstantData::Sink& sink) -> Status {
    HF2PTE_ASSIGN_OR_RETURN(auto w, s->get());
    if (!bf16) return sink(w->scales.data(), w->scales.size() * sizeof(float));
    std::vector<float> rounded(w->scales.size());
    for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = bf16_to_float(float_to_bf16(w->scales[i]));
    return sink(rounded.data(), rounded.size() * sizeof(float));
  };
  return c;
}

/// A pattern matches a layer when it matches its module name (the weight's
/// tensor name without ".weight") or the node's name: fnmatch(3) globs when the
/// pattern has * ? or [, else a substring ("lm_head").
bool matches(const std::string& pattern, const std::string& text) {
  if (pattern.find_first_of("*?[") != std::string::npos) return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
  return text.find(pattern) != std::string::npos;
}

class Quantizer {
 public:
  Quantizer(const QuantConfig& q, Backend backend) : q_(q), backend_(backend), cache_(std::make_shared<QuantCache>()) {}

  /// The recipe for a linear with `in` features, or nullopt to keep it float.
  Result<std::optional<LayerRecipe>> linear_recipe(int64_t in, const std::string& layer) const {
    const int64_t g = q_.qlinear_group_size;
    LayerRecipe r;
    if (q_.qlinear == "8da4w,8da8w") {
      r = g > 0 && in % g != 0 ? LayerRecipe{8, 0, true} : LayerRecipe{4, g, true};
    } else if (q_.qlinear == "8da4w") {
      r = {4, g, true};
    } else if (q_.qlinear == "8da8w") {
      r = {8, 0, true};  // always per channel (optimum-executorch; XNNPACK has no 8-bit blocks)
    } else if (q_.qlinear == "4w") {
      r = {4, g, false};
    } else {
      r = {8, g, false};
    }
    if (r.group > 0 && in % r.group != 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--qlinear {}: layer {} has {} input features, not a multiple of --qlinear-group-size {} "
                        "(--qlinear 8da4w,8da8w falls back to 8da8w per channel there; --qlinear-skip keeps it float)",
                        q_.qlinear, layer, in, r.group);
    }
    if (r.bits == 4 && in % 2 != 0) {
      return make_error(ErrorCode::kInvalidArgument, "--qlinear {}: layer {} has an odd number of input features ({}) for 4-bit",
                        q_.qlinear, layer, in);
    }
    // The layers the XNNPACK partitioner makes qbint4 (export/partition.cpp).
    r.bf16_scales = backend_ == Backend::kXnnpack && r.bits == 4 && r.group > 0 && r.group % 32 == 0;
    return std::optional<LayerRecipe>(r);
  }

  bool skipped(const std::string& module, const std::string& node) const {
    for (const auto& p : q_.qlinear_skip) if (matches(p, module) || matches(p, node)) return true;
    return false;
  }

  std::shared_ptr<const QuantSource> source(const ConstantData& c, int64_t rows, int64_t cols, const LayerRecipe& r) const {
    auto s = std::make_shared<QuantSource>();
    s->source = c;
    s->shape = {rows, cols, r.group};
    s->bits = r.bits;
    s->algo = q_.qparams == "affine" ? quant::QParams::kAffine : quant::QParams::kHqq;
    s->cache = cache_;
    return s;
  }

  const QuantConfig& config() const { return q_; }
  int linears = 0, embeddings = 0, skipped_linears = 0;

 private:
  const QuantConfig& q_;
  Backend backend_;
  std::shared_ptr<QuantCache> cache_;
};

std::string module_name(const Graph& g, ValueId w) {
  std::string n = g.value(w).name;
  if (n.ends_with(".weight")) n.resize(n.size() - 7);
  return n;
}

bool is_constant(const Graph& g, ValueId v) { return g.value(v).role == graph::ValueRole::kConstant; }

SymInt product_of_leading(const std::vector<SymInt>& sizes) {
  SymInt m(1);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) m = m * sizes[i];
  return m;
}

// linear(x, W, b) -> view(mixed_linear(act(view(x, [M, K])), Wq, scales) (+ b), [..., N]),
// act = dequantize_per_token(quantize_per_token(x, choose_qparams_per_token_asymmetric(x))) for 8da.
RuleFn quantize_linear(Quantizer& qz) {
  return [&qz](Graph& g, const Node& n) -> Replacement {
    if (n.op != OpId::Linear || qz.config().qlinear.empty()) return no_match();
    ValueId x = std::get<ValueId>(n.args[0]);
    ValueId w = std::get<ValueId>(n.args[1]);
    if (!is_constant(g, w) || g.type(w).rank() != 2 || !is_float_dtype(g.type(w).dtype)) return no_match();
    if (!g.type(w).sizes[0].is_constant() || !g.type(w).sizes[1].is_constant()) return no_match();
    const std::string module = module_name(g, w);
    if (qz.skipped(module, n.name)) {
      ++qz.skipped_linears;
      return no_match();
    }
    const int64_t N = g.type(w).sizes[0].constant_value(), K = g.type(w).sizes[1].constant_value();
    HF2PTE_ASSIGN_OR_RETURN(std::optional<LayerRecipe> r, qz.linear_recipe(K, n.name));
    if (!r) return no_match();
    auto src = qz.source(g.constant(w), N, K, *r);
    const TensorType xt = g.type(x);
    const ValueId wq = g.add_constant(module + ".qweight", int8_constant(src, *r));
    const ValueId ws = g.add_constant(module + ".scales", scales_constant(src, *r));
    HF2PTE_ASSIGN_OR_RETURN(ValueId x2, g.add(OpId::ViewCopyOut, {x, IntList{product_of_leading(xt.sizes), xt.sizes.back()}},
                                              n.name + ".in2d"));
    // A 16-bit program's linear runs the recipe in fp32 between two casts
    // (docs/quantization.md, "16-bit programs"): the quantized ops are fp32 ops.
    const ScalarType dt = xt.dtype;
    if (dt != ScalarType::kFloat) {
      HF2PTE_ASSIGN_OR_RETURN(x2, g.add(OpId::ToCopy, {x2, ScalarType::kFloat}, n.name + ".in_f32"));
    }
    if (r->dynamic_activations) {
      HF2PTE_ASSIGN_OR_RETURN(auto qp, g.add_node(OpId::ChooseQparamsPerTokenAsymmetricOut, {x2, ScalarType::kChar},
                                                  n.name + ".act_qparams"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId xq, g.add(OpId::QuantizePerTokenOut,
                                                {x2, qp[0], qp[1], int64_t(-128), int64_t(127), ScalarType::kChar},
                                                n.name + ".act_q"));
      HF2PTE_ASSIGN_OR_RETURN(x2, g.add(OpId::DequantizePerTokenOut,
                                        {xq, qp[0], qp[1], int64_t(-128), int64_t(127), ScalarType::kChar, ScalarType::kFloat},
                                        n.name + ".act_dq"));
    }
    HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::MixedLinearOut, {x2, wq, ws, None{}, None{}}, n.name + ".2d"));
    if (const auto* b = std::get_if<ValueId>(&n.args[2])) {
      ValueId b32 = *b;
      if (g.type(b32).dtype != ScalarType::kFloat && is_constant(g, b32)) {
        b32 = g.add_constant(module + ".bias_f32", widened(g.constant(b32)));
      } else if (g.type(b32).dtype != ScalarType::kFloat) {
        HF2PTE_ASSIGN_OR_RETURN(b32, g.add(OpId::ToCopy, {b32, ScalarType::kFloat}, n.name + ".bias_f32"));
      }
      HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::AddOut, {y, b32, int64_t(1)}, n.name + ".bias"));
    }
    if (dt != ScalarType::kFloat) {
      HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::ToCopy, {y, dt}, n.name + ".out_cast"));
    }
    IntList out_sizes(xt.sizes.begin(), xt.sizes.end() - 1);
    out_sizes.push_back(SymInt(N));
    HF2PTE_ASSIGN_OR_RETURN(ValueId out, g.add(OpId::ViewCopyOut, {y, out_sizes}, n.name));
    ++qz.linears;
    return replaced_by(out);
  };
}

// embedding(W, ids) -> embedding_byte / embedding_4bit(Wq, scales, None, qmin, qmax, ids).
RuleFn quantize_embedding(Quantizer& qz) {
  return [&qz](Graph& g, const Node& n) -> Replacement {
    const QuantConfig& q = qz.config();
    if (n.op != OpId::EmbeddingOut || q.qembedding.empty()) return no_match();
    ValueId w = std::get<ValueId>(n.args[0]);
    ValueId ids = std::get<ValueId>(n.args[1]);
    if (!is_constant(g, w) || g.type(w).rank() != 2 || !is_float_dtype(g.type(w).dtype)) return no_match();
    const int64_t V = g.type(w).sizes[0].constant_value(), D = g.type(w).sizes[1].constant_value();
    LayerRecipe r{q.qembedding == "4w" ? 4 : 8, q.qembedding_group_size, false};
    const std::string module = module_name(g, w);
    if (r.group > 0 && D % r.group != 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--qembedding {}: embedding {} has width {}, not a multiple of --qembedding-group-size {}",
                        q.qembedding, module, D, r.group);
    }
    if (r.bits == 4 && D % 2 != 0) {
      return make_error(ErrorCode::kInvalidArgument, "--qembedding 4w: embedding {} has an odd width ({})", module, D);
    }
    auto src = qz.source(g.constant(w), V, D, r);
    const ValueId wq = g.add_constant(module + ".qweight", r.bits == 4 ? embedding_int4_constant(src, r) : int8_constant(src, r));
    const ValueId ws = g.add_constant(module + ".scales", scales_constant(src, r));
    const auto range = quant::int_range(r.bits);
    HF2PTE_ASSIGN_OR_RETURN(ValueId out, g.add(r.bits == 4 ? OpId::Embedding4bitOut : OpId::EmbeddingByteOut,
                                               {wq, ws, None{}, int64_t(range.qmin), int64_t(range.qmax), ids},
                                               n.name + (g.type(w).dtype == ScalarType::kFloat ? "" : ".f32")));
    // A 16-bit program's embedding rows come out in its dtype.
    if (g.type(w).dtype != ScalarType::kFloat) {
      HF2PTE_ASSIGN_OR_RETURN(out, g.add(OpId::ToCopy, {out, g.type(w).dtype}, n.name));
    }
    ++qz.embeddings;
    return replaced_by(out);
  };
}

}  // namespace

Status quantize_program(graph::Program& p, const ExportConfig& c, StageLog& log) {
  const QuantConfig& q = c.quant;
  if (!q.active()) return Status::ok();
  Quantizer qz(q, c.backend);
  const std::vector<Rule> rules = {{"quantize_linear", quantize_linear(qz)}, {"quantize_embedding", quantize_embedding(qz)}};
  for (auto& g : p.methods) {
    HF2PTE_RETURN_IF_ERROR(rewrite_to_fixed_point(g, rules).status());
    eliminate_dead_nodes(g);
  }
  if (!q.qlinear.empty() && qz.linears == 0) {
    return make_error(ErrorCode::kInvalidArgument, "--qlinear {}: the model has no linear layer to quantize{}", q.qlinear,
                      qz.skipped_linears ? fmt::format(" ({} skipped by --qlinear-skip)", qz.skipped_linears) : "");
  }
  if (!q.qembedding.empty() && qz.embeddings == 0) {
    return make_error(ErrorCode::kInvalidArgument, "--qembedding {}: the model has no embedding to quantize", q.qembedding);
  }
  log.notes.push_back(fmt::format("quantize: {} linears ({}, group {}), {} kept float; {} embeddings ({}); qparams {}",
                                  qz.linears, q.qlinear.empty() ? "off" : q.qlinear, q.qlinear_group_size,
                                  qz.skipped_linears, qz.embeddings, q.qembedding.empty() ? "off" : q.qembedding, q.qparams));
  return Status::ok();
}

}  // namespace hf2pte::exp
