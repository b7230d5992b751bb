// Helpers shared by the checkpoint tests: temporary folders, hand-built
// safetensors files, fixture paths.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"

namespace hf2pte::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/" + name;
}

/// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hf2pte_ckpt_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// 8-byte little-endian length + `header` + `data`: a safetensors file with
/// exactly the header text given (so tests can write broken headers).
inline std::vector<uint8_t> safetensors_bytes(const std::string& header, const std::vector<uint8_t>& data,
                                              uint64_t declared_len = UINT64_MAX) {
  uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t((n >> (8 * i)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// One tensor to serialize with write_safetensors().
struct TensorSpec {
  std::string name;
  std::string dtype;  // "F32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// A valid safetensors file holding `tensors` in the given order.
inline std::vector<uint8_t> build_safetensors(const std::vector<TensorSpec>& tensors,
                                              const nlohmann::json& metadata = nullptr) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::vector<uint8_t> data;
  for (const auto& t : tensors) {
    uint64_t begin = data.size();
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, uint64_t(data.size())}}};
  }
  return safetensors_bytes(header.dump(), data);
}

/// The specs of the tensors in a parsed file (to re-shard fixtures).
inline TensorSpec spec_of(const TensorRef& t) {
  return {t.name, std::string(safetensors_dtype_name(t.dtype)), t.shape,
          std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
}

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace hf2pte::testing
