// cuBLAS is opened when a CUDA program first runs a matrix product on a
// device, never at process start (device/cublas_api.h): a process that does
// not run one does not map the library. Where the toolkit's libcublas is
// installed (CI's nvcc machines; no GPU needed) every entry point resolves.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "backends/cuda/runtime/device/cublas_api.h"

namespace hf2pte::cuda {
namespace {

bool maps_cublas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcublas") != std::string::npos) return true;
  }
  return false;
}

TEST(CublasApi, OpenedOnFirstUseNotAtStart) {
  EXPECT_FALSE(maps_cublas()) << "cuBLAS is mapped before any CUDA program ran";
  auto api = cublas_api();
  if (!api.is_ok()) GTEST_SKIP() << api.status().message();
  EXPECT_TRUE(maps_cublas());
  const CublasApi& a = **api;
  EXPECT_NE(a.create, nullptr);
  EXPECT_NE(a.destroy, nullptr);
  EXPECT_NE(a.set_stream, nullptr);
  EXPECT_NE(a.set_workspace, nullptr);
  EXPECT_NE(a.gemm_strided_batched_ex, nullptr);
  ASSERT_NE(a.status_string, nullptr);
  // A call that needs no device: the library's own text for a status.
  const char* text = a.status_string(CUBLAS_STATUS_NOT_INITIALIZED);
  ASSERT_NE(text, nullptr);
  EXPECT_NE(std::string(text), std::string(a.status_string(CUBLAS_STATUS_SUCCESS)));
  // Opened once.
  auto again = cublas_api();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *api);
}

}  // namespace
}  // namespace hf2pte::cuda
