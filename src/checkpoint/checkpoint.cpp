#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/ranges.h>

#include "checkpoint/json_fields.h"

namespace hf2pte {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfigName = "config.json";
constexpr const char* kGenerationConfigName = "generation_config.json";
constexpr const char* kSingleWeightsName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A shard name from the index must name a file inside the folder. We check
// the name lexically and do not resolve symlinks: the Hugging Face cache
// stores snapshot files as symlinks into ../../blobs, which is legitimate.
bool is_safe_relative_name(const std::string& name) {
  if (name.empty() || name.find('\0') != std::string::npos) return false;
  fs::path p(name);
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return p.has_filename();
}

}  // namespace

std::string DTypeSet::to_string() const {
  // Customary order first ("F32|F16|BF16"), then anything else by c10 code.
  constexpr ScalarType kOrder[] = {ScalarType::kFloat, ScalarType::kHalf, ScalarType::kBFloat16,
                                   ScalarType::kDouble, ScalarType::kLong, ScalarType::kInt,
                                   ScalarType::kShort, ScalarType::kChar, ScalarType::kByte,
                                   ScalarType::kBool};
  std::string out;
  auto append = [&](ScalarType t) {
    if (!out.empty()) out += '|';
    std::string_view name = safetensors_dtype_name(t);
    out += name == "?" ? scalar_type_name(t) : name;
  };
  for (ScalarType t : kOrder) {
    if (contains(t)) append(t);
  }
  for (int code = 0; code < 32; ++code) {
    auto t = static_cast<ScalarType>(code);
    if (is_known_scalar_type(code) && contains(t) && !safetensors_dtype(safetensors_dtype_name(t))) append(t);
  }
  return out.empty() ? "(none)" : out;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return out + "]";
}

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  HF2PTE_CHECK_OR_RETURN(fs::exists(dir, ec), kNotFound, "checkpoint folder not found ({})", dir);
  HF2PTE_CHECK_OR_RETURN(fs::is_directory(dir, ec), kInvalidArgument,
                         "checkpoint is not a folder; expected a folder with config.json and *.safetensors ({})", dir);
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path root(dir);

  ckpt.config_path_ = (root / kConfigName).string();
  HF2PTE_CHECK_OR_RETURN(is_file(ckpt.config_path_), kNotFound, "missing {} ({})", kConfigName, dir);
  HF2PTE_ASSIGN_OR_RETURN(ckpt.config_, read_json_object_file(ckpt.config_path_));

  fs::path generation = root / kGenerationConfigName;
  if (is_file(generation)) {
    HF2PTE_ASSIGN_OR_RETURN(json g, read_json_object_file(generation.string()));
    ckpt.generation_config_ = std::move(g);
  }

  if (is_file(root / kSingleWeightsName)) {
    HF2PTE_RETURN_IF_ERROR(ckpt.load_single(kSingleWeightsName));
    return ckpt;
  }
  if (is_file(root / kIndexName)) {
    ckpt.layout_ = Layout::kSharded;
    HF2PTE_RETURN_IF_ERROR(ckpt.load_sharded(kIndexName));
    return ckpt;
  }

  // No standard name: accept exactly one *.safetensors file (some exporters
  // name it after the model). Several without an index are ambiguous.
  std::vector<std::string> candidates;
  std::vector<std::string> pickles;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_regular_file(ec)) continue;
    std::string name = e.path().filename().string();
    std::string ext = e.path().extension().string();
    if (ext == ".safetensors") candidates.push_back(name);
    if (ext == ".bin" || ext == ".pt" || ext == ".pth") pickles.push_back(name);
  }
  HF2PTE_CHECK_OR_RETURN(!ec, kIoError, "cannot list folder: {} ({})", ec.message(), dir);
  std::sort(candidates.begin(), candidates.end());
  if (candidates.size() == 1) {
    HF2PTE_RETURN_IF_ERROR(ckpt.load_single(candidates[0]));
    return ckpt;
  }
  if (candidates.size() > 1) {
    return make_error(ErrorCode::kInvalidInput,
                      "several safetensors files and no {}; expected {} or an index, got {} ({})", kIndexName,
                      kSingleWeightsName, fmt::join(candidates, ", "), dir);
  }
  if (!pickles.empty()) {
    std::sort(pickles.begin(), pickles.end());
    return make_error(ErrorCode::kNotSupported,
                      "PyTorch pickle weights are not supported; expected {}, got {} (convert the checkpoint to "
                      "safetensors) ({})",
                      kSingleWeightsName, fmt::join(pickles, ", "), dir);
  }
  return make_error(ErrorCode::kNotFound, "no weights found; expected {}, {} or one *.safetensors file ({})",
                    kSingleWeightsName, kIndexName, dir);
}

Status Checkpoint::add_file(const std::string& relative_name, SafetensorsFile file) {
  size_t file_idx = weight_files_.size();
  weight_files_.push_back(relative_name);
  for (const TensorRef& ref : file.tensors()) {
    auto [it, inserted] = tensors_.try_emplace(ref.name);
    if (!inserted) {
      return make_error(ErrorCode::kInvalidInput, "tensor {} is stored twice; expected one file, got {} and {} ({})",
                        ref.name, weight_files_[it->second.file_idx], relative_name, dir_);
    }
    it->second.ref = ref;
    it->second.file_idx = file_idx;
  }
  return Status::ok();
}

Status Checkpoint::load_single(const std::string& relative_name) {
  layout_ = Layout::kSingle;
  HF2PTE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open((fs::path(dir_) / relative_name).string()));
  return add_file(relative_name, std::move(file));
}

Status Checkpoint::load_sharded(const std::string& index_name) {
  const std::string index_path = (fs::path(dir_) / index_name).string();
  // Duplicate names in weight_map would make the shard of a tensor ambiguous.
  JsonParseOptions options;
  options.reject_duplicate_keys = true;
  HF2PTE_ASSIGN_OR_RETURN(json index, read_json_object_file(index_path, options));
  auto map_it = index.find("weight_map");
  HF2PTE_CHECK_OR_RETURN(map_it != index.end(), kInvalidInput, "{}: missing required field 'weight_map' ({})",
                         index_name, index_path);
  HF2PTE_CHECK_OR_RETURN(map_it->is_object(), kInvalidInput,
                         "{}: field 'weight_map' has wrong type; expected object, got {} ({})", index_name,
                         json_type_name(*map_it), index_path);

  // shard name -> tensor names the index places there; std::map opens each
  // shard once, in a stable order.
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [name, shard] : map_it->items()) {
    HF2PTE_CHECK_OR_RETURN(shard.is_string(), kInvalidInput,
                           "{}: shard of tensor {} has wrong type; expected string, got {} ({})", index_name, name,
                           json_type_name(shard), index_path);
    const auto& shard_name = shard.get_ref<const std::string&>();
    HF2PTE_CHECK_OR_RETURN(is_safe_relative_name(shard_name), kInvalidInput,
                           "{}: shard name must stay inside the checkpoint folder; expected a relative file name, "
                           "got '{}' (tensor {}) ({})",
                           index_name, shard_name, name, index_path);
    shards[shard_name].push_back(name);
  }
  HF2PTE_CHECK_OR_RETURN(!shards.empty(), kInvalidInput, "{}: weight_map is empty; expected at least one tensor ({})",
                         index_name, index_path);

  for (auto& [shard_name, names] : shards) {
    fs::path shard_path = fs::path(dir_) / shard_name;
    HF2PTE_CHECK_OR_RETURN(is_file(shard_path), kNotFound, "missing shard {} listed in {} ({})", shard_name,
                           index_name, dir_);
    HF2PTE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(shard_path.string()));
    for (const std::string& name : names) {
      HF2PTE_CHECK_OR_RETURN(file.find(name) != nullptr, kInvalidInput,
                             "tensor {} listed in {} is missing from its shard; expected it in {} ({})", name,
                             index_name, shard_name, dir_);
    }
    // Tensors a shard holds beyond its index entries are registered too:
    // check_all_consumed() then reports them instead of them being dropped.
    HF2PTE_RETURN_IF_ERROR(add_file(shard_name, std::move(file)));
  }
  return Status::ok();
}

std::optional<std::string> Checkpoint::find_file(std::string_view name) const {
  fs::path p = fs::path(dir_) / std::string(name);
  if (!is_file(p)) return std::nullopt;
  return p.string();
}

bool Checkpoint::has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Result<const TensorRef*> Checkpoint::tensor(std::string_view name) const {
  auto it = tensors_.find(name);
  HF2PTE_CHECK_OR_RETURN(it != tensors_.end(), kNotFound, "missing tensor {} ({})", name, dir_);
  return &it->second.ref;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, e] : tensors_) out.push_back(name);
  return out;
}

Result<Checkpoint::Entry*> Checkpoint::entry_or_error(std::string_view name) {
  auto it = tensors_.find(name);
  HF2PTE_CHECK_OR_RETURN(it != tensors_.end(), kNotFound, "missing tensor {} ({})", name, dir_);
  return &it->second;
}

Status Checkpoint::check_tensor(const Entry& e, DTypeSet dtypes, const std::vector<int64_t>& shape) const {
  const std::string& file = weight_files_[e.file_idx];
  HF2PTE_CHECK_OR_RETURN(dtypes.contains(e.ref.dtype), kInvalidInput,
                         "tensor {} has wrong dtype; expected {}, got {} ({})", e.ref.name, dtypes.to_string(),
                         safetensors_dtype_name(e.ref.dtype), file);
  bool match = shape.size() == e.ref.shape.size();
  for (size_t i = 0; match && i < shape.size(); ++i) {
    match = shape[i] < 0 || shape[i] == e.ref.shape[i];
  }
  HF2PTE_CHECK_OR_RETURN(match, kInvalidInput, "tensor {} has wrong shape; expected {}, got {} ({})", e.ref.name,
                         format_shape(shape), format_shape(e.ref.shape), file);
  return Status::ok();
}

Result<TensorRef> Checkpoint::expect(std::string_view name, DTypeSet dtypes, const std::vector<int64_t>& shape) {
  HF2PTE_ASSIGN_OR_RETURN(Entry * e, entry_or_error(name));
  HF2PTE_RETURN_IF_ERROR(check_tensor(*e, dtypes, shape));
  e->use = Use::kConsumed;
  return e->ref;
}

Result<std::optional<TensorRef>> Checkpoint::expect_optional(std::string_view name, DTypeSet dtypes,
                                                             const std::vector<int64_t>& shape) {
  if (!has(name)) return std::optional<TensorRef>();
  HF2PTE_ASSIGN_OR_RETURN(TensorRef ref, expect(name, dtypes, shape));
  return std::optional<TensorRef>(std::move(ref));
}

Status Checkpoint::mark_consumed(std::string_view name) {
  HF2PTE_ASSIGN_OR_RETURN(Entry * e, entry_or_error(name));
  e->use = Use::kConsumed;
  return Status::ok();
}

bool Checkpoint::mark_ignored(std::string_view name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return false;
  // Ignoring never downgrades a tensor the model already uses.
  if (it->second.use == Use::kUnused) it->second.use = Use::kIgnored;
  return true;
}

size_t Checkpoint::mark_ignored_if(const std::function<bool(std::string_view)>& pred) {
  size_t n = 0;
  for (auto& [name, e] : tensors_) {
    if (e.use == Use::kUnused && pred(name)) {
      e.use = Use::kIgnored;
      ++n;
    }
  }
  return n;
}

bool Checkpoint::is_consumed(std::string_view name) const {
  auto it = tensors_.find(name);
  return it != tensors_.end() && it->second.use == Use::kConsumed;
}

std::vector<std::string> Checkpoint::unconsumed() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : tensors_) {
    if (e.use == Use::kUnused) out.push_back(name);
  }
  return out;
}

Status Checkpoint::check_all_consumed() const {
  std::vector<std::string> left = unconsumed();
  if (left.empty()) return Status::ok();
  std::string listed;
  for (size_t i = 0; i < left.size() && i < kMaxListedUnconsumed; ++i) {
    if (i) listed += ", ";
    listed += left[i];
  }
  if (left.size() > kMaxListedUnconsumed) listed += ", ...";
  return make_error(ErrorCode::kInvalidInput, "checkpoint tensors not used by the model: {} ({} in total) ({})",
                    listed, left.size(), dir_);
}

}  // namespace hf2pte
