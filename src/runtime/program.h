// Program -> Method: the public runtime API (mirrors ExecuTorch's
// Program::load / Method::init / execute).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/host_tensor.h"
#include "core/status.h"
#include "runtime/aligned_buffer.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"

namespace hf2pte::pte {
class PteFile;
}

namespace hf2pte::rt {

class Method;

/// A named mutable buffer of a method (a KV cache): a tensor the program
/// updates in place and that keeps its contents across execute() calls.
struct MutableBufferMeta {
  std::string name;                       ///< fully qualified name from the file
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> sizes;             ///< planned (upper-bound) sizes
  size_t nbytes = 0;                      ///< bytes of `sizes`: the capacity a caller must supply
  bool planned = true;                    ///< lives in a planned arena (else the caller binds it)
  bool bound = true;                      ///< has memory (planned, or bound by set_mutable_buffer)
  /// set_mutable_buffer may point it at caller memory: unplanned, or planned
  /// in arena bytes no other value of the method uses (so no alias is lost).
  bool rebindable = true;
};

/// Shape/dtype of one method input or output, as planned in the file.
struct ValueMeta {
  Tag tag = Tag::kNone;
  ScalarType dtype = ScalarType::kFloat;  ///< tensors only
  std::vector<int64_t> sizes;             ///< planned (upper-bound) sizes
  ShapeDynamism dynamism = ShapeDynamism::kStatic;
};

class Program {
 public:
  /// Opens and verifies a .pte file.
  static Result<std::shared_ptr<Program>> load(const std::string& path);
  static Result<std::shared_ptr<Program>> from_file(std::shared_ptr<pte::PteFile> file);

  std::vector<std::string> method_names() const;
  /// Parses values, allocates planned arenas, resolves every kernel in `registry`
  /// (all missing operators are named in one error).
  Result<std::unique_ptr<Method>> load_method(std::string_view name, const KernelRegistry& registry) const;
  const pte::PteFile& file() const { return *file_; }

 private:
  std::shared_ptr<pte::PteFile> file_;
};

class Method {
 public:
  virtual ~Method() = default;
  virtual const std::string& name() const = 0;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  virtual ValueMeta input_meta(size_t i) const = 0;
  virtual ValueMeta output_meta(size_t i) const = 0;
  /// Copies `t` into input i (resizing a dynamic input within its bound; dtype must match).
  virtual Status set_input(size_t i, const HostTensor& t) = 0;
  /// Whether output i lives in planned memory. A program exported with
  /// alloc_graph_output=false leaves its tensor outputs unplanned: the caller
  /// may bind its own buffer (set_output_buffer), else execute() gives the
  /// output Method-owned memory sized for its upper bound.
  virtual bool output_planned(size_t i) const = 0;
  /// Binds caller memory (`capacity_bytes` >= the output's upper-bound bytes,
  /// kept alive by the caller) to unplanned tensor output i: kernels then write
  /// the result straight into it.
  virtual Status set_output_buffer(size_t i, void* data, size_t capacity_bytes) = 0;
  /// Mutable buffers named in the file (extra_tensor_info.fully_qualified_name),
  /// in value order. A program exported with alloc_mutable_buffers=false
  /// leaves them unplanned: the caller must bind memory to each
  /// (set_mutable_buffer) before execute(), which refuses otherwise.
  virtual size_t num_mutable_buffers() const = 0;
  /// Metadata of mutable buffer i (default-constructed when out of range).
  virtual MutableBufferMeta mutable_buffer_meta(size_t i) const = 0;
  /// Whether mutable buffer i lives in planned memory (false when out of range).
  virtual bool buffer_planned(size_t i) const = 0;
  /// Binds caller memory to mutable buffer i (unplanned, or planned and
  /// `rebindable`: a server keeps one cache per sequence and switches between
  /// them by pointer): `capacity_bytes` >= its nbytes, `data` aligned to its element size, kept alive by the caller for
  /// as long as the method executes. The contents are used as they are (the
  /// initial state) and the program updates them in place: the state lives in
  /// the caller's memory across execute() calls and may be rebound or shared.
  virtual Status set_mutable_buffer(size_t i, void* data, size_t capacity_bytes) = 0;
  /// Runs every chain once. Mutable buffers (KV caches) keep their contents across calls.
  virtual Status execute() = 0;
  /// Output i after execute(): a tensor (copied out) ...
  virtual Result<HostTensor> output_tensor(size_t i) const = 0;
  /// ... or any value (scalars of constant methods).
  virtual const EValue& output(size_t i) const = 0;
};

/// Zero-filled memory for every unplanned mutable buffer of `m` that is not
/// bound yet, bound to it (what the CLI and the LLM runner do, so programs
/// exported with alloc_mutable_buffers=false still run). The caller keeps the
/// returned buffers alive while `m` executes.
Result<std::vector<AlignedBuffer>> bind_zeroed_mutable_buffers(Method& m);

}  // namespace hf2pte::rt
