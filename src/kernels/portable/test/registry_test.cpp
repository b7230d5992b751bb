// The portable table covers ops.def exactly: every kernel op has a kernel
// under its key, graph-only ops have none.
#include <set>

#include <gtest/gtest.h>

#include "kernels/portable/kernels.h"
#include "ops/op_table.h"

namespace hf2pte::kernels {
namespace {

TEST(PortableRegistry, EveryKernelOpIsRegistered) {
  const rt::KernelRegistry& reg = portable_registry();
  size_t kernel_ops = 0;
  for (const OpInfo& op : all_ops()) {
    if (op.has_kernel) {
      ++kernel_ops;
      EXPECT_NE(reg.find(op.kernel_key()), nullptr) << op.kernel_key();
    } else {
      EXPECT_EQ(reg.find(op.kernel_key()), nullptr) << op.kernel_key();
    }
  }
  EXPECT_EQ(reg.size(), kernel_ops);
  EXPECT_EQ(portable_kernel_table().size(), kernel_ops);
}

TEST(PortableRegistry, TableRowsAreUniqueKernelOps) {
  std::set<OpId> seen;
  for (const PortableKernel& k : portable_kernel_table()) {
    EXPECT_TRUE(op_info(k.op).has_kernel);
    EXPECT_NE(k.fn, nullptr);
    EXPECT_TRUE(seen.insert(k.op).second);
  }
}

TEST(PortableRegistry, RegistersIntoAnotherRegistry) {
  rt::KernelRegistry reg;
  hf2pte::register_portable_kernels(reg);
  ASSERT_NE(reg.find("aten::add.out"), nullptr);
  ASSERT_NE(reg.find("aten::index_put_"), nullptr);
  ASSERT_NE(reg.find("dim_order_ops::_to_dim_order_copy.out"), nullptr);
  EXPECT_EQ(reg.find("aten::linear"), nullptr);
  EXPECT_EQ(&hf2pte::portable_registry(), &portable_registry());
}

TEST(PortableRegistry, WrongArityIsAnErrorForEveryKernel) {
  // No kernel may touch its args before checking how many it got.
  for (const PortableKernel& k : portable_kernel_table()) {
    const std::string key = op_info(k.op).kernel_key();
    rt::KernelContext ctx{key};
    rt::EValue none;
    std::vector<rt::EValue*> args = {&none};
    Status st = k.fn(ctx, args);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidProgram) << key;
  }
}

}  // namespace
}  // namespace hf2pte::kernels
