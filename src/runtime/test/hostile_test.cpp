// Malformed programs: every bad index, size or loop must come back as an
// error value, never a crash (docs/STYLE.md rule 2).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>

#include "runtime/method.h"
#include "runtime/test/test_util.h"

namespace hf2pte::rt {
namespace {

using namespace test;

using Mutator = std::function<void(PlanBuilder&, int x, int out)>;

/// add_plan-like program (x f32[8] @0, out f32[8] @32, arena 64) after `mutate`.
Result<std::unique_ptr<Method>> load_mutated(const Mutator& mutate, std::vector<pte::Blob> constants = {}) {
  PlanBuilder b("forward");
  b.arena(64);
  int x = b.tensor(efb::ScalarType::FLOAT, {8}, 1, 0);
  int out = b.tensor(efb::ScalarType::FLOAT, {8}, 1, 32);
  int one = b.int_value(1);
  b.kernel(b.op("aten::add", "out"), {x, x, one, out, out});
  b.inputs({x});
  b.outputs({out});
  mutate(b, x, out);
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  HF2PTE_ASSIGN_OR_RETURN(auto p, program_from(std::move(plans), std::move(constants)));
  return p->load_method("forward", test_registry());
}

void expect_load_error(const Mutator& mutate, ErrorCode code, const std::string& fragment) {
  auto m = load_mutated(mutate);
  ASSERT_FALSE(m.is_ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(m.status().code(), code) << m.status().message();
  EXPECT_NE(m.status().message().find(fragment), std::string::npos) << m.status().message();
}

TEST(HostileTest, Baseline) {
  auto m = load_mutated([](PlanBuilder&, int, int) {});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
}

TEST(HostileTest, KernelArgOutOfRange) {
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().chains[0]->instructions[0]->instr_args.AsKernelCall()->args[1] = 99; },
                    ErrorCode::kInvalidProgram, "argument 1 refers to value 99; the plan has 3 values (method forward, instruction 0)");
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().chains[0]->instructions[0]->instr_args.AsKernelCall()->args[0] = -1; },
                    ErrorCode::kInvalidProgram, "refers to value -1");
}

TEST(HostileTest, OpIndexOutOfRange) {
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().chains[0]->instructions[0]->instr_args.AsKernelCall()->op_index = 5; },
                    ErrorCode::kInvalidProgram, "op_index 5 is out of range; the plan has 1 operators");
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().chains[0]->instructions[0]->instr_args.AsKernelCall()->op_index = -3; },
                    ErrorCode::kInvalidProgram, "op_index -3");
}

TEST(HostileTest, JumpFalseSelfLoopHitsBudget) {
  auto m = load_mutated([](PlanBuilder& b, int, int) {
    int f = b.bool_value(false);
    b.jump_false(f, 1);  // instruction 1 jumps to itself forever
  });
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  Status st = (*m)->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(st.message().find("instruction budget of 10000000 exceeded"), std::string::npos) << st.message();
}

TEST(HostileTest, JumpDestinationOutOfRange) {
  expect_load_error([](PlanBuilder& b, int, int) { b.jump_false(b.bool_value(false), 7); }, ErrorCode::kInvalidProgram,
                    "jump destination 7 is out of range");
  expect_load_error([](PlanBuilder& b, int, int) { b.jump_false(42, 0); }, ErrorCode::kInvalidProgram,
                    "cond_value_index refers to value 42");
}

TEST(HostileTest, JumpFalseOnNonBoolIsAnError) {
  auto m = load_mutated([](PlanBuilder& b, int, int) { b.jump_false(b.int_value(0), 0); });
  ASSERT_TRUE(m.is_ok());
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  Status st = (*m)->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(st.message().find("expected Bool"), std::string::npos) << st.message();
}

TEST(HostileTest, TensorSizeOverflow) {
  expect_load_error(
      [](PlanBuilder& b, int x, int) {
        auto& t = b.tensor_at(x);
        t.sizes = {2147483647, 2147483647, 2147483647};
        t.dim_order = {0, 1, 2};
      },
      ErrorCode::kInvalidProgram, "overflows");
}

TEST(HostileTest, MemoryOffsetBeyondArena) {
  expect_load_error([](PlanBuilder& b, int, int out) { b.tensor_at(out).allocation_info->memory_offset_low = 40; },
                    ErrorCode::kInvalidProgram, "tensor of 32 bytes at offset 40 exceeds planned buffer 1 of 64 bytes");
  // An offset near 2^64 must not wrap around the end check.
  expect_load_error(
      [](PlanBuilder& b, int, int out) {
        b.tensor_at(out).allocation_info->memory_offset_low = 0xFFFFFFF0u;
        b.tensor_at(out).allocation_info->memory_offset_high = 0xFFFFFFFFu;
      },
      ErrorCode::kInvalidProgram, "exceeds planned buffer");
}

TEST(HostileTest, MemoryIdOutOfRange) {
  expect_load_error([](PlanBuilder& b, int, int out) { b.tensor_at(out).allocation_info->memory_id = 2; },
                    ErrorCode::kInvalidProgram, "memory_id 2 is out of range");
  expect_load_error([](PlanBuilder& b, int, int out) { b.tensor_at(out).allocation_info->memory_id = 0; },
                    ErrorCode::kInvalidProgram, "memory_id 0 is out of range");
}

TEST(HostileTest, HugeOrNegativeArena) {
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().non_const_buffer_sizes[1] = int64_t(1) << 62; },
                    ErrorCode::kOutOfRange, "planned buffers need more than the 17179869184 bytes allowed; buffer 1 has 4611686018427387904 bytes");
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().non_const_buffer_sizes[1] = -5; },
                    ErrorCode::kInvalidProgram, "negative size");
}

// Policy (docs/decisions.md, "Planned memory cap"): the sum of the arenas is
// checked before anything is mapped, so many arenas each under the cap cannot
// add up past it, and 2^40 bytes in a tiny file is refused outright.
TEST(HostileTest, PlannedMemoryIsCapped) {
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().non_const_buffer_sizes[1] = int64_t(1) << 40; },
                    ErrorCode::kOutOfRange, "planned buffers need more than");
  expect_load_error(
      [](PlanBuilder& b, int, int) {
        for (int i = 0; i < 1000; ++i) b.plan().non_const_buffer_sizes.push_back(int64_t(1) << 30);
      },
      ErrorCode::kOutOfRange, "; buffer 17 has 1073741824 bytes");
  expect_load_error(
      [](PlanBuilder& b, int, int) {
        b.plan().non_const_buffer_sizes.push_back(INT64_MAX);
        b.plan().non_const_buffer_sizes.push_back(INT64_MAX);
      },
      ErrorCode::kOutOfRange, "planned buffers need more than");
  // The cap is configurable; a smaller one refuses what the default allows.
  set_max_planned_bytes(32);
  expect_load_error([](PlanBuilder&, int, int) {}, ErrorCode::kOutOfRange,
                    "planned buffers need more than the 32 bytes allowed; buffer 1 has 64 bytes");
  set_max_planned_bytes(0);
  EXPECT_EQ(max_planned_bytes(), kDefaultMaxPlannedBytes);
  EXPECT_TRUE(load_mutated([](PlanBuilder&, int, int) {}).is_ok());
}

TEST(HostileTest, BadTensorMetadata) {
  expect_load_error(
      [](PlanBuilder& b, int x, int) {
        auto& t = b.tensor_at(x);
        t.sizes.assign(17, 1);
        t.dim_order.resize(17);
        for (int i = 0; i < 17; ++i) t.dim_order[size_t(i)] = uint8_t(i);
      },
      ErrorCode::kInvalidProgram, "rank 17 exceeds the maximum of 16");
  expect_load_error([](PlanBuilder& b, int x, int) { b.tensor_at(x).dim_order = {0, 0}; }, ErrorCode::kInvalidProgram,
                    "dim_order has 2 entries for rank 1");
  expect_load_error(
      [](PlanBuilder& b, int x, int) {
        b.tensor_at(x).sizes = {2, 4};
        b.tensor_at(x).dim_order = {1, 1};
      },
      ErrorCode::kInvalidProgram, "is not a permutation");
  expect_load_error([](PlanBuilder& b, int x, int) { b.tensor_at(x).sizes = {-8}; }, ErrorCode::kInvalidProgram,
                    "negative size");
  expect_load_error([](PlanBuilder& b, int x, int) { b.tensor_at(x).storage_offset = 4; },
                    ErrorCode::kInvalidProgram, "storage_offset must be 0");
  expect_load_error(
      [](PlanBuilder& b, int x, int) { b.tensor_at(x).shape_dynamism = efb::TensorShapeDynamism::DYNAMIC_UNBOUND; },
      ErrorCode::kNotSupported, "DYNAMIC_UNBOUND");
  expect_load_error([](PlanBuilder& b, int x, int) { b.tensor_at(x).scalar_type = efb::ScalarType(16); },
                    ErrorCode::kNotSupported, "unsupported scalar type 16");
  expect_load_error([](PlanBuilder& b, int x, int) { b.tensor_at(x).scalar_type = efb::ScalarType(99); },
                    ErrorCode::kNotSupported, "unsupported scalar type 99");
}

TEST(HostileTest, ListItemsOutOfRangeOrWrongType) {
  auto add_list = [](PlanBuilder& b, auto list) {
    auto e = std::make_unique<efb::EValueT>();
    e->val.Set(std::move(list));
    b.plan().values.push_back(std::move(e));
  };
  expect_load_error(
      [&](PlanBuilder& b, int, int) {
        efb::IntListT l;
        l.items = {2, 1000};
        add_list(b, std::move(l));
      },
      ErrorCode::kInvalidProgram, "IntList item refers to value 1000");
  expect_load_error(
      [&](PlanBuilder& b, int x, int) {
        efb::IntListT l;
        l.items = {x};  // a Tensor, not an Int
        add_list(b, std::move(l));
      },
      ErrorCode::kInvalidProgram, "item 0 of IntList is a Tensor");
  expect_load_error(
      [&](PlanBuilder& b, int, int) {
        efb::TensorListT l;
        l.items = {-1};
        add_list(b, std::move(l));
      },
      ErrorCode::kInvalidProgram, "TensorList item refers to value -1");
  expect_load_error(
      [&](PlanBuilder& b, int, int) {
        efb::OptionalTensorListT l;
        l.items = {-1, 2};  // value 2 is an Int
        add_list(b, std::move(l));
      },
      ErrorCode::kInvalidProgram, "item 1 of OptionalTensorList is a Int");
}

TEST(HostileTest, PlanIndicesOutOfRange) {
  expect_load_error([](PlanBuilder& b, int, int) { b.inputs({50}); }, ErrorCode::kInvalidProgram,
                    "input 0 refers to value 50");
  expect_load_error([](PlanBuilder& b, int, int) { b.outputs({-2}); }, ErrorCode::kInvalidProgram,
                    "output 0 refers to value -2");
  expect_load_error([](PlanBuilder& b, int x, int out) { b.delegate_call(3, {x, out}); }, ErrorCode::kInvalidProgram,
                    "delegate_index 3 is out of range");
  expect_load_error([](PlanBuilder& b, int, int) { b.plan().chains.clear(); }, ErrorCode::kInvalidProgram,
                    "no chains");
  expect_load_error(
      [](PlanBuilder& b, int, int) {
        efb::MoveCallT mv;
        mv.move_from = 0;
        mv.move_to = 77;
        auto ins = std::make_unique<efb::InstructionT>();
        ins->instr_args.Set(std::move(mv));
        b.plan().chains[0]->instructions.push_back(std::move(ins));
      },
      ErrorCode::kInvalidProgram, "move_to refers to value 77");
}

TEST(HostileTest, KernelMayNotWriteAConstant) {
  std::vector<pte::Blob> consts;
  consts.push_back(blob_of(std::vector<uint8_t>(32, 0)));
  auto m = load_mutated(
      [](PlanBuilder& b, int, int out) {
        b.tensor_at(out).allocation_info.reset();
        b.tensor_at(out).data_buffer_idx = 1;
        b.outputs({0});
      },
      std::move(consts));
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("writes its result into constant tensor value 1"), std::string::npos)
      << m.status().message();
}

TEST(HostileTest, UseAfterFreeIsAnError) {
  auto m = load_mutated([](PlanBuilder& b, int x, int out) {
    // Free the input, then run add again on it.
    b.free_value(x);
    auto& ins = b.plan().chains[0]->instructions;
    auto again = std::make_unique<efb::InstructionT>();
    efb::KernelCallT k = *ins[0]->instr_args.AsKernelCall();
    again->instr_args.Set(std::move(k));
    ins.push_back(std::move(again));
  });
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  Status st = (*m)->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(st.message().find("tensor without memory"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("instruction 2"), std::string::npos) << st.message();
}

TEST(HostileTest, UnplannedTensorWithoutDataIsAnError) {
  // The kernel's out has no allocation_info and is not a method output:
  // nobody gives it memory.
  auto m = load_mutated([](PlanBuilder& b, int x, int out) {
    b.tensor_at(out).allocation_info.reset();
    b.plan().outputs = {x};
  });
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  Status st = (*m)->execute();
  EXPECT_NE(st.message().find("tensor without memory"), std::string::npos) << st.message();
}

TEST(HostileTest, UnplannedOutputGetsMemory) {
  // alloc_graph_output=false: an unplanned method output is given memory for
  // its bound (by execute(), or by the caller through set_output_buffer).
  auto m = load_mutated([](PlanBuilder& b, int, int out) { b.tensor_at(out).allocation_info.reset(); });
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_FALSE((*m)->output_planned(0));
  ASSERT_TRUE((*m)->set_input(0, ones(ScalarType::kFloat, {8})).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());
  auto out = (*m)->output_tensor(0);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(reinterpret_cast<const float*>(out->bytes.data())[7], 2.0f);
  float mine[8] = {};
  EXPECT_FALSE((*m)->set_output_buffer(0, mine, 16).is_ok());
  ASSERT_TRUE((*m)->set_output_buffer(0, mine, sizeof mine).is_ok());
  ASSERT_TRUE((*m)->execute().is_ok());
  EXPECT_EQ(mine[0], 2.0f);
  EXPECT_EQ(mine[7], 2.0f);
}

// The same checks reached through a real upstream file edited with the object API.
TEST(HostileTest, MutatedUpstreamFile) {
  std::ifstream in(conformance_path("dtypes.pte"), std::ios::binary);
  ASSERT_TRUE(in.good());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto file = pte::PteFile::from_bytes(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().message();

  auto mutate_and_load = [&](const std::function<void(efb::ExecutionPlanT&)>& f) {
    pte::PteContents c;
    (*file)->program().UnPackTo(&c.program);
    // The writer owns the segment tables; dtypes.pte has no constants.
    c.program.segments.clear();
    c.program.constant_segment.reset();
    c.program.mutable_data_segments.clear();
    c.program.named_data.clear();
    f(*c.program.execution_plan[0]);
    auto p = program_from(std::move(c));
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    return (*p)->load_method("forward", test_registry());
  };
  EXPECT_TRUE(mutate_and_load([](efb::ExecutionPlanT&) {}).is_ok());
  auto bad_arg = mutate_and_load([](efb::ExecutionPlanT& p) {
    p.chains[0]->instructions[1]->instr_args.AsKernelCall()->args[3] = 1 << 20;
  });
  ASSERT_FALSE(bad_arg.is_ok());
  EXPECT_NE(bad_arg.status().message().find("instruction 1"), std::string::npos) << bad_arg.status().message();
  auto bad_offset = mutate_and_load([](efb::ExecutionPlanT& p) {
    p.values[4]->val.AsTensor()->allocation_info->memory_offset_low = 48;
  });
  ASSERT_FALSE(bad_offset.is_ok());
  EXPECT_NE(bad_offset.status().message().find("exceeds planned buffer 1 of 48 bytes"), std::string::npos)
      << bad_offset.status().message();
}

}  // namespace
}  // namespace hf2pte::rt
