// Unplanned mutable buffers (alloc_mutable_buffers=false): the caller binds
// their memory, execute() refuses until every one is bound, and the state
// lives in the caller's memory across calls.
#include <gtest/gtest.h>

#include "runtime/method.h"
#include "runtime/test/test_util.h"

namespace hf2pte::rt {
namespace {

using namespace test;

/// forward(x f32[8]) -> out: state += x; out = state + x, with `state` a
/// named mutable buffer f32[8] (planned at 32 when `planned`, else unplanned;
/// `out` at `out_offset`, which overlaps the state's bytes below 64).
Result<std::unique_ptr<Method>> accumulator(bool planned, const char* name = "acc.state", int out_offset = 64) {
  PlanBuilder b("forward");
  b.arena(96);
  int x = b.tensor(efb::ScalarType::FLOAT, {8}, 1, 0);
  int state = b.tensor(efb::ScalarType::FLOAT, {8}, planned ? 1 : 0, 32);
  int out = b.tensor(efb::ScalarType::FLOAT, {8}, 1, out_offset);
  b.tensor_at(state).extra_tensor_info = std::make_unique<efb::ExtraTensorInfoT>();
  b.tensor_at(state).extra_tensor_info->fully_qualified_name = name;
  int one = b.int_value(1);
  int add = b.op("aten::add", "out");
  b.kernel(add, {state, x, one, state, state});
  b.kernel(add, {state, x, one, out, out});
  b.inputs({x});
  b.outputs({out});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  HF2PTE_ASSIGN_OR_RETURN(auto p, program_from(std::move(plans)));
  return p->load_method("forward", test_registry());
}

TEST(MutableBufferTest, MetadataOfPlannedAndUnplanned) {
  for (bool planned : {true, false}) {
    auto m = accumulator(planned);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    ASSERT_EQ((*m)->num_mutable_buffers(), 1u);
    EXPECT_EQ((*m)->buffer_planned(0), planned);
    const MutableBufferMeta meta = (*m)->mutable_buffer_meta(0);
    EXPECT_EQ(meta.name, "acc.state");
    EXPECT_EQ(meta.dtype, ScalarType::kFloat);
    EXPECT_EQ(meta.sizes, (std::vector<int64_t>{8}));
    EXPECT_EQ(meta.nbytes, 32u);
    EXPECT_EQ(meta.planned, planned);
    EXPECT_EQ(meta.bound, planned);
    EXPECT_TRUE(meta.rebindable);
    EXPECT_FALSE((*m)->buffer_planned(1));
    EXPECT_EQ((*m)->mutable_buffer_meta(1).name, "");
  }
}

TEST(MutableBufferTest, UnboundBufferRefusesToExecute) {
  auto m = accumulator(false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  Status st = (*m)->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "mutable buffer 0 (acc.state) is unplanned and has no memory; bind 32 bytes with set_mutable_buffer before "
            "execute (method forward)");
}

TEST(MutableBufferTest, BadBindingsAreRefused) {
  auto m = accumulator(false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  alignas(16) float mem[9] = {};
  EXPECT_EQ((*m)->set_mutable_buffer(0, mem, 31).message(),
            "mutable buffer 0 (acc.state) needs a buffer of 32 bytes, got 31 (method forward)");
  EXPECT_EQ((*m)->set_mutable_buffer(0, nullptr, 32).message(),
            "mutable buffer 0 (acc.state) needs a buffer of 32 bytes, got 0 (method forward)");
  EXPECT_EQ((*m)->set_mutable_buffer(0, reinterpret_cast<uint8_t*>(mem) + 1, 32).message(),
            "mutable buffer 0 (acc.state) needs memory aligned to 4 bytes; the address is not (method forward)");
  EXPECT_EQ((*m)->set_mutable_buffer(1, mem, 32).message(),
            "mutable buffer 1 is out of range; method forward has 1 mutable buffers");
  EXPECT_FALSE((*m)->mutable_buffer_meta(0).bound);
  // A planned buffer whose bytes another value shares keeps its place.
  auto aliased = accumulator(true, "acc.state", 48);
  ASSERT_TRUE(aliased.is_ok()) << aliased.status().message();
  EXPECT_FALSE((*aliased)->mutable_buffer_meta(0).rebindable);
  EXPECT_EQ((*aliased)->set_mutable_buffer(0, mem, 32).message(),
            "mutable buffer 0 (acc.state) shares planned memory with other values; it cannot be bound (method forward)");
}

TEST(MutableBufferTest, PlannedBufferMovesToCallerMemory) {
  // One cache per sequence, switched by pointer (hf2pte serve's slots).
  auto m = accumulator(true);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_TRUE((*m)->mutable_buffer_meta(0).rebindable);
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());  // the planned state: 0 -> 1
  float a[8] = {5, 5, 5, 5, 5, 5, 5, 5}, b[8] = {};
  ASSERT_TRUE((*m)->set_mutable_buffer(0, a, sizeof a).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());
  ASSERT_TRUE((*m)->set_mutable_buffer(0, b, sizeof b).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());
  auto out = (*m)->output_tensor(0);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(floats(*out)[0], 2.0f);  // b: 0 -> 1, out = 1 + 1
  EXPECT_EQ(a[0], 6.0f);
  EXPECT_EQ(b[0], 1.0f);
}

TEST(MutableBufferTest, StateLivesInCallerMemoryAcrossCallsAndMethods) {
  auto m = accumulator(false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  float state[8] = {10, 10, 10, 10, 10, 10, 10, 10};  // the caller's initial state is used as is
  ASSERT_TRUE((*m)->set_mutable_buffer(0, state, sizeof state).is_ok());
  EXPECT_TRUE((*m)->mutable_buffer_meta(0).bound);
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  for (float want : {12.0f, 13.0f}) {
    ASSERT_TRUE((*m)->execute().is_ok());
    auto out = (*m)->output_tensor(0);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(floats(*out)[7], want);
  }
  EXPECT_EQ(state[0], 12.0f);
  EXPECT_EQ(state[7], 12.0f);
  // A second method given the same memory continues from it.
  auto other = accumulator(false);
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  ASSERT_TRUE((*other)->set_mutable_buffer(0, state, sizeof state).is_ok());
  ASSERT_TRUE((*other)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  ASSERT_TRUE((*other)->execute().is_ok());
  EXPECT_EQ(state[3], 13.0f);
}

TEST(MutableBufferTest, BindZeroedGivesOwnedZeroMemoryOnlyWhereNeeded) {
  auto m = accumulator(false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto owned = bind_zeroed_mutable_buffers(**m);
  ASSERT_TRUE(owned.is_ok()) << owned.status().message();
  ASSERT_EQ(owned->size(), 1u);
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());
  EXPECT_EQ(reinterpret_cast<const float*>((*owned)[0].data())[5], 1.0f);  // 0 + 1
  // Already bound or planned: nothing more to allocate.
  auto again = bind_zeroed_mutable_buffers(**m);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->empty());
  auto planned = accumulator(true);
  ASSERT_TRUE(planned.is_ok());
  auto none = bind_zeroed_mutable_buffers(**planned);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST(MutableBufferTest, UnnamedTensorsAreNotMutableBuffers) {
  // Without a name, an unplanned tensor is just unbacked memory (the kernel
  // guard reports it), not something a caller is asked to bind.
  auto m = accumulator(false, "");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->num_mutable_buffers(), 0u);
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  EXPECT_NE((*m)->execute().message().find("tensor without memory"), std::string::npos);
}

}  // namespace
}  // namespace hf2pte::rt
