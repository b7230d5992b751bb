// The device executor: runs a CudaProgram's nodes on one CUDA stream with the
// launchers of ops.cu.
//
// Memory is allocated once, at creation: constants (uploaded once), one arena
// for the intermediates at their planned offsets, one buffer for the delegate
// inputs and outputs at capacity, and scratch for the kernels. State inputs
// (KV caches) get a device copy per host buffer, made the first time that
// buffer is seen; from then on the device copy is the truth. Because every
// address is fixed and every launch parameter depends only on the evaluated
// dims, a run with the same dims (and state buffers) can be captured into a
// CUDA graph once and replayed: decode steps then cost one graph launch.
// Uploads, downloads and the error-flag reset stay outside the graph.
//
// Environment: HF2PTE_CUDA_GRAPHS=0 runs every call eagerly; HF2PTE_CUDA_SYNC=1
// also waits after every node, so an asynchronous fault names its node.

// fmt 9 under nvcc in C++20 mode: see ops.cu.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include "backends/cuda/runtime/device.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backends/cuda/runtime/device/ops.h"

namespace hf2pte::cuda {

namespace {

std::string cuda_text(cudaError_t e) { return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e)); }

Status cuda_status(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return Status::ok();
  return make_error(ErrorCode::kInternal, "CUDA error in {}: {}", what, cuda_text(e));
}

Status cublas_status(const CublasApi& api, cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return make_error(ErrorCode::kInternal, "cuBLAS error in {}: {}", what, api.status_string(s));
}

std::string shape_str(std::span<const int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

constexpr size_t kAlign = 256;  // cudaMalloc's alignment; also what cuBLAS wants for its workspace
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;  // NVIDIA's recommendation for Hopper
constexpr int kGraphWarmups = 2;   // identical calls before a capture (kernels and cuBLAS are loaded by then)
constexpr size_t kMaxGraphs = 4;   // e.g. decode plus a few prefill lengths
constexpr size_t kMaxUncapturable = 64;

/// A cudaMalloc'd block, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  Status allocate(size_t bytes, std::string_view what) {
    if (bytes == 0) return Status::ok();
    const cudaError_t e = cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      p_ = nullptr;
      (void)cudaGetLastError();
      return make_error(ErrorCode::kInternal, "cudaMalloc of {} bytes for {} failed: {}", bytes, what, cuda_text(e));
    }
    return Status::ok();
  }
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_ = nullptr;
};

bool is_matmul(OpId op) { return op == OpId::MmOut || op == OpId::BmmOut || op == OpId::AddmmOut; }

class CudaDeviceExecutor final : public DeviceExecutor {
 public:
  explicit CudaDeviceExecutor(std::shared_ptr<const CudaProgram> program) : prog_(std::move(program)) {}
  ~CudaDeviceExecutor() override;
  Status init(const ConstantLookup& constants);
  Status execute(std::span<rt::EValue*> args) override;

 private:
  struct Graph {
    std::vector<int64_t> key;
    cudaGraphExec_t exec = nullptr;
    uint64_t used = 0;
  };

  Status check_program();
  Status upload_constants(const ConstantLookup& constants);
  Status allocate_io();
  Status refresh_sizes(const std::vector<int64_t>& ev);
  Status bind_state(uint32_t input, rt::Tensor& host);
  Status run(const std::vector<int64_t>& ev, const std::vector<int64_t>& key);
  Status capture_and_launch(const std::vector<int64_t>& ev, const std::vector<int64_t>& key);
  Status run_nodes(const std::vector<int64_t>& ev);
  void fill_arg(DevArg& d, const ValueInfo& v, const std::vector<int64_t>& ev) const;
  DevTensor dev_tensor(uint32_t t) const;
  /// Passes `st` through; on an error first waits for queued work, so a
  /// failed call leaves nothing in flight that reads caller memory.
  Status abandon_if_error(Status st) {
    if (!st.is_ok()) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaGetLastError();
    }
    return st;
  }

  std::shared_ptr<const CudaProgram> prog_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer constants_, arena_, io_, work_;
  std::vector<uint8_t*> ptr_;  ///< device address per tensor (state: rebound every call)
  std::map<std::pair<uint32_t, const void*>, std::unique_ptr<DeviceBuffer>> state_;
  std::vector<uint32_t> copy_back_;  ///< delegate inputs (role kInput) that a node mutates
  std::vector<OpLauncher> launchers_;  ///< per node
  DeviceContext ctx_;
  int* host_flag_ = nullptr;  ///< pinned copy of the kernels' error flag

  std::vector<int64_t> sizes_ev_;  ///< the exprs `sizes_` was computed for
  std::vector<std::vector<int64_t>> sizes_;
  std::vector<DevArg> args_;

  bool graphs_enabled_ = true;
  bool sync_each_ = false;  ///< HF2PTE_CUDA_SYNC=1: wait after every node, so a fault names its node
  std::vector<int64_t> last_key_;
  int repeats_ = 0;
  std::vector<Graph> graphs_;
  std::vector<std::vector<int64_t>> uncapturable_;
  uint64_t tick_ = 0;
  std::mutex mu_;
};

CudaDeviceExecutor::~CudaDeviceExecutor() {
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  for (Graph& g : graphs_) (void)cudaGraphExecDestroy(g.exec);
  if (cublas_ != nullptr) (void)ctx_.blas->destroy(cublas_);
  if (host_flag_ != nullptr) (void)cudaFreeHost(host_flag_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status CudaDeviceExecutor::check_program() {
  const CudaProgram& P = *prog_;
  for (size_t t = 0; t < P.tensors.size(); ++t) {
    const TensorInfo& ti = P.tensors[t];
    HF2PTE_CHECK_OR_RETURN(ti.sizes.size() <= size_t(kMaxDims), kNotSupported,
                           "CUDA device executor: tensor {} has rank {}; at most {} is supported", t, ti.sizes.size(),
                           kMaxDims);
    HF2PTE_CHECK_OR_RETURN(element_size(ti.dtype) != 0, kNotSupported,
                           "CUDA device executor: tensor {} has unsupported dtype {}", t, int(ti.dtype));
    if (ti.role == TensorRole::kIntermediate) {
      HF2PTE_CHECK_OR_RETURN(ti.arena_offset <= P.arena_bytes && ti.capacity_bytes <= P.arena_bytes - ti.arena_offset,
                             kInvalidProgram, "tensor {} at arena offset {} ({} bytes) exceeds the arena of {} bytes",
                             t, ti.arena_offset, ti.capacity_bytes, P.arena_bytes);
    }
  }
  HF2PTE_CHECK_OR_RETURN(P.input_tensor.size() == P.num_inputs && P.output_tensor.size() == P.num_outputs,
                         kInvalidProgram, "program lists {} of {} inputs and {} of {} outputs", P.input_tensor.size(),
                         P.num_inputs, P.output_tensor.size(), P.num_outputs);
  launchers_.clear();
  for (const NodeInfo& node : P.nodes) {
    const std::string key = op_info(node.op).kernel_key();
    const OpLauncher fn = find_launcher(node.op);
    HF2PTE_CHECK_OR_RETURN(fn != nullptr, kNotSupported, "CUDA device executor has no kernel for {} (node {})", key,
                           node.name);
    HF2PTE_CHECK_OR_RETURN(node.args.size() == op_schema(node.op).args.size(), kInvalidProgram,
                           "node {} ({}) has {} arguments; the schema has {}", node.name, key, node.args.size(),
                           op_schema(node.op).args.size());
    for (uint32_t v : node.args) {
      HF2PTE_CHECK_OR_RETURN(v < P.values.size(), kInvalidProgram, "node {} refers to value {} of {}", node.name, v,
                             P.values.size());
    }
    launchers_.push_back(fn);
    if (node.op == OpId::IndexPut_) {
      const ValueInfo& self = P.values[node.args[0]];
      HF2PTE_CHECK_OR_RETURN(self.kind == ValueKind::kTensor, kInvalidProgram, "node {}: self is not a tensor",
                             node.name);
      const TensorInfo& ti = P.tensors[self.tensor];
      HF2PTE_CHECK_OR_RETURN(ti.role != TensorRole::kConstant, kNotSupported,
                             "CUDA device executor: node {} mutates constant {}", node.name, ti.key);
      if (ti.role == TensorRole::kInput &&
          std::find(copy_back_.begin(), copy_back_.end(), ti.io_index) == copy_back_.end()) {
        copy_back_.push_back(ti.io_index);
      }
    }
  }
  return Status::ok();
}

Status CudaDeviceExecutor::upload_constants(const ConstantLookup& constants) {
  const CudaProgram& P = *prog_;
  size_t total = 0;
  std::vector<size_t> offset(P.tensors.size(), 0);
  for (size_t t = 0; t < P.tensors.size(); ++t) {
    if (P.tensors[t].role != TensorRole::kConstant) continue;
    offset[t] = total;
    total += align_up(P.tensors[t].capacity_bytes);
  }
  HF2PTE_RETURN_IF_ERROR(constants_.allocate(total, "constants"));
  for (size_t t = 0; t < P.tensors.size(); ++t) {
    const TensorInfo& ti = P.tensors[t];
    if (ti.role != TensorRole::kConstant) continue;
    auto bytes = constants(ti.key);
    if (!bytes.is_ok()) return bytes.status().with_context(fmt::format("constant {}", ti.key));
    HF2PTE_CHECK_OR_RETURN(bytes->size() == ti.capacity_bytes, kInvalidProgram,
                           "constant {} has {} bytes; its tensor needs {}", ti.key, bytes->size(), ti.capacity_bytes);
    ptr_[t] = constants_.get() + offset[t];
    if (!bytes->empty()) {
      HF2PTE_RETURN_IF_ERROR(cuda_status(cudaMemcpy(ptr_[t], bytes->data(), bytes->size(), cudaMemcpyHostToDevice),
                                         fmt::format("upload of constant {}", ti.key)));
    }
  }
  return Status::ok();
}

Status CudaDeviceExecutor::allocate_io() {
  const CudaProgram& P = *prog_;
  size_t total = 0;
  std::vector<size_t> offset(P.tensors.size(), 0);
  for (size_t t = 0; t < P.tensors.size(); ++t) {
    const TensorRole r = P.tensors[t].role;
    if (r != TensorRole::kInput && r != TensorRole::kOutput) continue;
    offset[t] = total;
    total += align_up(P.tensors[t].capacity_bytes);
  }
  HF2PTE_RETURN_IF_ERROR(io_.allocate(total, "inputs and outputs"));
  HF2PTE_RETURN_IF_ERROR(arena_.allocate(size_t(P.arena_bytes), "the intermediates' arena"));
  for (size_t t = 0; t < P.tensors.size(); ++t) {
    const TensorInfo& ti = P.tensors[t];
    if (ti.role == TensorRole::kInput || ti.role == TensorRole::kOutput) ptr_[t] = io_.get() + offset[t];
    if (ti.role == TensorRole::kIntermediate) ptr_[t] = arena_.get() + ti.arena_offset;
  }
  return Status::ok();
}

Status CudaDeviceExecutor::init(const ConstantLookup& constants) {
  const CudaProgram& P = *prog_;
  HF2PTE_RETURN_IF_ERROR(check_program());
  HF2PTE_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device_), "cudaGetDevice"));
  HF2PTE_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  int sms = 1;
  HF2PTE_RETURN_IF_ERROR(
      cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute"));
  ptr_.assign(P.tensors.size(), nullptr);
  HF2PTE_RETURN_IF_ERROR(upload_constants(constants));
  HF2PTE_RETURN_IF_ERROR(allocate_io());

  // Work area: [cuBLAS workspace][GEMV partials][GEMV counters][error flag].
  const bool mm = std::any_of(P.nodes.begin(), P.nodes.end(), [](const NodeInfo& n) { return is_matmul(n.op); });
  const size_t ws = mm ? kCublasWorkspaceBytes : 0;
  const size_t scratch = mm ? align_up(kGemvScratchFloats * sizeof(float)) : 0;
  const size_t counters = mm ? align_up(kGemvCounters * sizeof(unsigned)) : 0;
  HF2PTE_RETURN_IF_ERROR(work_.allocate(ws + scratch + counters + kAlign, "kernel scratch"));
  uint8_t* w = work_.get();
  HF2PTE_RETURN_IF_ERROR(cuda_status(cudaMemset(w + ws + scratch, 0, counters + kAlign), "cudaMemset"));
  HF2PTE_RETURN_IF_ERROR(cuda_status(cudaMallocHost(&host_flag_, sizeof(int)), "cudaMallocHost"));
  if (mm) {
    HF2PTE_ASSIGN_OR_RETURN(ctx_.blas, cublas_api());
    const CublasApi& api = *ctx_.blas;
    HF2PTE_RETURN_IF_ERROR(cublas_status(api, api.create(&cublas_), "cublasCreate"));
    // cublasSetStream resets the workspace, so the workspace comes second. A
    // workspace of our own also keeps cuBLAS from allocating during capture.
    HF2PTE_RETURN_IF_ERROR(cublas_status(api, api.set_stream(cublas_, stream_), "cublasSetStream"));
    HF2PTE_RETURN_IF_ERROR(cublas_status(api, api.set_workspace(cublas_, w, ws), "cublasSetWorkspace"));
  }
  ctx_.stream = stream_;
  ctx_.cublas = cublas_;
  ctx_.scratch = mm ? reinterpret_cast<float*>(w + ws) : nullptr;
  ctx_.scratch_floats = mm ? kGemvScratchFloats : 0;
  ctx_.counters = mm ? reinterpret_cast<unsigned*>(w + ws + scratch) : nullptr;
  ctx_.num_counters = mm ? kGemvCounters : 0;
  ctx_.error_flag = reinterpret_cast<int*>(w + ws + scratch + counters);
  ctx_.sm_count = sms;

  const char* graphs = std::getenv("HF2PTE_CUDA_GRAPHS");
  const char* sync = std::getenv("HF2PTE_CUDA_SYNC");
  sync_each_ = sync != nullptr && std::string_view(sync) == "1";
  graphs_enabled_ = !(graphs != nullptr && std::string_view(graphs) == "0") && !sync_each_;
  // Constant uploads used the legacy stream; make sure they are done.
  return cuda_status(cudaDeviceSynchronize(), "upload");
}

DevTensor CudaDeviceExecutor::dev_tensor(uint32_t t) const {
  DevTensor d;
  d.data = ptr_[t];
  d.dtype = prog_->tensors[t].dtype;
  const std::vector<int64_t>& s = sizes_[t];
  d.rank = int(s.size());
  std::copy(s.begin(), s.end(), d.sizes.begin());
  return d;
}

void CudaDeviceExecutor::fill_arg(DevArg& d, const ValueInfo& v, const std::vector<int64_t>& ev) const {
  d.kind = v.kind;
  switch (v.kind) {
    case ValueKind::kTensor: d.tensor = dev_tensor(v.tensor); break;
    case ValueKind::kInt: d.i = ev[v.exprs[0]]; break;
    case ValueKind::kDouble: d.f = v.f; break;
    case ValueKind::kBool: d.b = v.b; break;
    case ValueKind::kIntList:
      d.ints.clear();
      for (uint32_t e : v.exprs) d.ints.push_back(ev[e]);
      break;
    case ValueKind::kTensorList:
    case ValueKind::kOptTensorList:
      d.list.clear();
      for (int32_t t : v.tensors) {
        d.list.push_back(t < 0 ? std::nullopt : std::optional<DevTensor>(dev_tensor(uint32_t(t))));
      }
      break;
    case ValueKind::kScalarType: d.scalar_type = v.scalar_type; break;
    case ValueKind::kNone: break;
  }
}

Status CudaDeviceExecutor::run_nodes(const std::vector<int64_t>& ev) {
  const CudaProgram& P = *prog_;
  for (size_t n = 0; n < P.nodes.size(); ++n) {
    const NodeInfo& node = P.nodes[n];
    args_.resize(node.args.size());
    for (size_t k = 0; k < node.args.size(); ++k) fill_arg(args_[k], P.values[node.args[k]], ev);
    ctx_.node_index = int(n);
    const Status st = launchers_[n](ctx_, node.op, args_);
    if (!st.is_ok()) return st.with_context(fmt::format("node {}", node.name));
    const cudaError_t e = sync_each_ ? cudaStreamSynchronize(stream_) : cudaGetLastError();
    if (e != cudaSuccess) {
      return make_error(ErrorCode::kInternal, "{}: CUDA kernel failed: {} (node {})", op_info(node.op).kernel_key(),
                        cuda_text(e), node.name);
    }
  }
  return Status::ok();
}

Status CudaDeviceExecutor::capture_and_launch(const std::vector<int64_t>& ev, const std::vector<int64_t>& key) {
  auto give_up = [&]() {
    // Not capturable (a library call that does not support capture, ...): run this key eagerly from now on.
    (void)cudaGetLastError();
    if (uncapturable_.size() >= kMaxUncapturable) uncapturable_.erase(uncapturable_.begin());
    uncapturable_.push_back(key);
    return run_nodes(ev);
  };
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return give_up();
  const Status st = run_nodes(ev);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (end != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return give_up();
  }
  if (!st.is_ok()) {  // a launcher refused its arguments: the same error as an eager run
    (void)cudaGraphDestroy(graph);
    return st;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (inst != cudaSuccess) return give_up();
  if (graphs_.size() >= kMaxGraphs) {
    auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                [](const Graph& a, const Graph& b) { return a.used < b.used; });
    (void)cudaGraphExecDestroy(lru->exec);
    graphs_.erase(lru);
  }
  graphs_.push_back(Graph{key, exec, tick_});
  return cuda_status(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
}

Status CudaDeviceExecutor::run(const std::vector<int64_t>& ev, const std::vector<int64_t>& key) {
  if (!graphs_enabled_) return run_nodes(ev);
  ++tick_;
  for (Graph& g : graphs_) {
    if (g.key == key) {
      g.used = tick_;
      return cuda_status(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
    }
  }
  if (key == last_key_) {
    ++repeats_;
  } else {
    last_key_ = key;
    repeats_ = 0;
  }
  const bool known_bad = std::find(uncapturable_.begin(), uncapturable_.end(), key) != uncapturable_.end();
  if (repeats_ < kGraphWarmups || known_bad) return run_nodes(ev);
  return capture_and_launch(ev, key);
}

Status CudaDeviceExecutor::refresh_sizes(const std::vector<int64_t>& ev) {
  if (ev == sizes_ev_ && !sizes_.empty()) return Status::ok();
  const CudaProgram& P = *prog_;
  sizes_.resize(P.tensors.size());
  for (uint32_t t = 0; t < P.tensors.size(); ++t) {
    sizes_[t] = P.sizes_of(t, ev);
    // Device buffers hold capacity_bytes: a shape beyond that must never reach a kernel.
    uint64_t bytes = element_size(P.tensors[t].dtype);
    bool ok = sizes_[t].size() == P.tensors[t].sizes.size();
    for (int64_t s : sizes_[t]) {
      ok = ok && s >= 0 && (s == 0 || bytes <= UINT64_MAX / uint64_t(s));  // no wrap-around
      bytes = s > 0 ? bytes * uint64_t(s) : 0;
    }
    if (!ok || bytes > P.tensors[t].capacity_bytes) {
      sizes_.clear();
      return make_error(ErrorCode::kOutOfRange, "tensor {} has shape {} ({} bytes) beyond its capacity of {} bytes", t,
                        shape_str(P.sizes_of(t, ev)), bytes, P.tensors[t].capacity_bytes);
    }
  }
  sizes_ev_ = ev;
  return Status::ok();
}

Status CudaDeviceExecutor::bind_state(uint32_t input, rt::Tensor& host) {
  const uint32_t t = prog_->input_tensor[input];
  const TensorInfo& ti = prog_->tensors[t];
  auto& slot = state_[{t, host.raw_data()}];
  if (!slot) {
    HF2PTE_CHECK_OR_RETURN(host.nbytes() <= ti.capacity_bytes, kOutOfRange,
                           "state input {} has {} bytes; its device copy holds {}", input, host.nbytes(),
                           ti.capacity_bytes);
    auto buf = std::make_unique<DeviceBuffer>();
    HF2PTE_RETURN_IF_ERROR(buf->allocate(std::max<size_t>(ti.capacity_bytes, 1), "a state input"));
    if (host.nbytes() > 0) {
      HF2PTE_RETURN_IF_ERROR(cuda_status(
          cudaMemcpyAsync(buf->get(), host.raw_data(), host.nbytes(), cudaMemcpyHostToDevice, stream_),
          fmt::format("upload of state input {}", input)));
    }
    slot = std::move(buf);
  }
  ptr_[t] = slot->get();
  return Status::ok();
}

Status CudaDeviceExecutor::execute(std::span<rt::EValue*> args) {
  std::lock_guard<std::mutex> lock(mu_);
  const CudaProgram& P = *prog_;
  HF2PTE_CHECK_OR_RETURN(args.size() == size_t(P.num_inputs) + P.num_outputs, kInvalidArgument,
                         "CUDA delegate call has {} arguments; expected {} inputs and {} outputs", args.size(),
                         P.num_inputs, P.num_outputs);
  HF2PTE_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));

  // Host tensors: dtype, rank and layout must be what the program says.
  std::vector<rt::Tensor*> host(args.size());
  std::vector<std::span<const int64_t>> in_sizes(P.num_inputs);
  for (size_t i = 0; i < args.size(); ++i) {
    const bool is_in = i < P.num_inputs;
    const size_t pos = is_in ? i : i - P.num_inputs;
    const char* what = is_in ? "input" : "output";
    rt::EValue* v = args[i];
    HF2PTE_CHECK_OR_RETURN(v != nullptr && v->is_tensor() && v->tensor != nullptr, kInvalidArgument,
                           "CUDA delegate {} {} is not a tensor", what, pos);
    rt::Tensor& h = *v->tensor;
    const TensorInfo& ti = P.tensors[is_in ? P.input_tensor[pos] : P.output_tensor[pos]];
    HF2PTE_CHECK_OR_RETURN(h.dtype() == ti.dtype, kInvalidArgument, "CUDA delegate {} {} has dtype {}; expected {}",
                           what, pos, scalar_type_name(h.dtype()), scalar_type_name(ti.dtype));
    HF2PTE_CHECK_OR_RETURN(size_t(h.dim()) == ti.sizes.size(), kInvalidArgument,
                           "CUDA delegate {} {} has rank {}; expected {}", what, pos, h.dim(), ti.sizes.size());
    HF2PTE_CHECK_OR_RETURN(h.is_contiguous(), kNotSupported,
                           "CUDA delegate {} {} is not contiguous; the device executor copies contiguous tensors only",
                           what, pos);
    host[i] = &h;
    if (is_in) in_sizes[i] = h.sizes();
  }
  std::vector<int64_t> ev;
  HF2PTE_RETURN_IF_ERROR(P.evaluate(in_sizes, &ev));
  HF2PTE_RETURN_IF_ERROR(refresh_sizes(ev));
  for (uint32_t i = 0; i < P.num_inputs; ++i) {
    const std::vector<int64_t>& want = sizes_[P.input_tensor[i]];
    const auto got = host[i]->sizes();
    HF2PTE_CHECK_OR_RETURN(std::equal(want.begin(), want.end(), got.begin(), got.end()), kInvalidArgument,
                           "CUDA delegate input {} has shape {}; expected {}", i, shape_str(got), shape_str(want));
  }
  for (uint32_t j = 0; j < P.num_outputs; ++j) {
    const Status st = host[P.num_inputs + j]->resize(sizes_[P.output_tensor[j]]);
    if (!st.is_ok()) return st.with_context(fmt::format("CUDA delegate output {}", j));
  }

  // Inputs: state buffers bound (first sight uploads), plain inputs uploaded.
  std::vector<int64_t> key = ev;
  for (uint32_t i = 0; i < P.num_inputs; ++i) {
    const uint32_t t = P.input_tensor[i];
    if (P.tensors[t].role == TensorRole::kState) {
      HF2PTE_RETURN_IF_ERROR(abandon_if_error(bind_state(i, *host[i])));
      key.push_back(int64_t(reinterpret_cast<uintptr_t>(ptr_[t])));  // a graph bakes the address in
    } else if (host[i]->nbytes() > 0) {
      HF2PTE_RETURN_IF_ERROR(
          abandon_if_error(cuda_status(cudaMemcpyAsync(ptr_[t], host[i]->raw_data(), host[i]->nbytes(),
                                                       cudaMemcpyHostToDevice, stream_),
                                       fmt::format("upload of input {}", i))));
    }
  }
  HF2PTE_RETURN_IF_ERROR(
      abandon_if_error(cuda_status(cudaMemsetAsync(ctx_.error_flag, 0, sizeof(int), stream_), "cudaMemsetAsync")));

  HF2PTE_RETURN_IF_ERROR(abandon_if_error(run(ev, key)));

  // Outputs (and mutated plain inputs) back to the host, then wait.
  for (uint32_t j = 0; j < P.num_outputs; ++j) {
    rt::Tensor& h = *host[P.num_inputs + j];
    if (h.nbytes() == 0) continue;
    HF2PTE_RETURN_IF_ERROR(abandon_if_error(
        cuda_status(cudaMemcpyAsync(h.raw_data(), ptr_[P.output_tensor[j]], h.nbytes(), cudaMemcpyDeviceToHost, stream_),
                    fmt::format("download of output {}", j))));
  }
  for (uint32_t i : copy_back_) {
    rt::Tensor& h = *host[i];
    if (h.nbytes() == 0) continue;
    HF2PTE_RETURN_IF_ERROR(abandon_if_error(
        cuda_status(cudaMemcpyAsync(h.raw_data(), ptr_[P.input_tensor[i]], h.nbytes(), cudaMemcpyDeviceToHost, stream_),
                    fmt::format("copy back of mutated input {}", i))));
  }
  HF2PTE_RETURN_IF_ERROR(abandon_if_error(
      cuda_status(cudaMemcpyAsync(host_flag_, ctx_.error_flag, sizeof(int), cudaMemcpyDeviceToHost, stream_),
                  "cudaMemcpyAsync")));
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) {
    return make_error(ErrorCode::kInternal,
                      "CUDA error while running the delegate ({} nodes): {} (HF2PTE_CUDA_SYNC=1 names the node)",
                      P.nodes.size(), cuda_text(e));
  }
  if (*host_flag_ != 0) {
    const NodeInfo& node = P.nodes[size_t(*host_flag_ - 1)];
    return make_error(ErrorCode::kOutOfRange, "{}: an index is out of range (node {})",
                      op_info(node.op).kernel_key(), node.name);
  }
  return Status::ok();
}

/// device_unavailable_reason's probe, run once.
const std::string& probe_reason() {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      reason = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
      return;
    }
    if (n == 0) {
      reason = "cudaGetDeviceCount: no CUDA device found";
      return;
    }
    reason = kernel_image_problem();
  });
  return reason;
}

}  // namespace

std::string device_unavailable_reason() { return probe_reason(); }

std::string device_description() {
  if (!probe_reason().empty()) return "";
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return fmt::format("{}, {:.1f} GiB, sm_{}{}", prop.name, double(prop.totalGlobalMem) / double(uint64_t(1) << 30),
                     prop.major, prop.minor);
}

Result<std::unique_ptr<DeviceExecutor>> make_device_executor(std::shared_ptr<const CudaProgram> program,
                                                             const ConstantLookup& constants) {
  const std::string& reason = probe_reason();
  HF2PTE_CHECK_OR_RETURN(reason.empty(), kNotSupported, "no usable CUDA device: {}", reason);
  HF2PTE_CHECK_OR_RETURN(program != nullptr, kInvalidArgument, "make_device_executor: no program");
  auto ex = std::make_unique<CudaDeviceExecutor>(std::move(program));
  HF2PTE_RETURN_IF_ERROR(ex->init(constants));
  return std::unique_ptr<DeviceExecutor>(std::move(ex));
}

}  // namespace hf2pte::cuda
