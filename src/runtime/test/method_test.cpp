// Method semantics on upstream ExecuTorch 1.3.1 files and on hand-built
// programs: inputs, outputs, constant methods, dynamic bounds, mutable
// buffers, missing operators and backends.
#include <gtest/gtest.h>

#include <atomic>

#include "runtime/backend.h"
#include "runtime/method.h"
#include "runtime/test/test_util.h"

namespace hf2pte::rt {
namespace {

using namespace test;

std::shared_ptr<Program> load_conformance(const std::string& name) {
  auto p = Program::load(conformance_path(name));
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return p.is_ok() ? p.value() : nullptr;
}

std::unique_ptr<Method> load_method(const Program& p, std::string_view name, const KernelRegistry& r) {
  auto m = p.load_method(name, r);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

/// Fills every tensor input with ones at its planned shape, like executor_runner.
void set_ones(Method& m) {
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    ValueMeta meta = m.input_meta(i);
    if (meta.tag != Tag::kTensor) continue;
    Status st = m.set_input(i, ones(meta.dtype, meta.sizes));
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
}

TEST(ConformanceTest, Dtypes) {
  auto p = load_conformance("dtypes.pte");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->method_names(), std::vector<std::string>{"forward"});
  KernelRegistry r = test_registry();
  auto m = load_method(*p, "forward", r);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->num_inputs(), 2u);
  EXPECT_EQ(m->input_meta(0).dtype, ScalarType::kLong);
  EXPECT_EQ(m->input_meta(1).dtype, ScalarType::kFloat);
  set_ones(*m);
  ASSERT_TRUE(m->execute().is_ok());
  ASSERT_EQ(m->num_outputs(), 2u);
  auto o0 = m->output_tensor(0);
  ASSERT_TRUE(o0.is_ok()) << o0.status().message();
  EXPECT_EQ(o0->dtype, ScalarType::kLong);
  EXPECT_EQ(o0->sizes, std::vector<int64_t>{1});
  EXPECT_EQ(o0->data<int64_t>()[0], 2);
  auto o1 = m->output_tensor(1);
  ASSERT_TRUE(o1.is_ok());
  EXPECT_EQ(o1->dtype, ScalarType::kFloat);
  EXPECT_EQ(floats(*o1), std::vector<float>{2.0f});
}

TEST(ConformanceTest, MultiMethods) {
  auto p = load_conformance("multi.pte");
  ASSERT_TRUE(p);
  KernelRegistry r = test_registry();
  for (const char* name : {"forward", "double"}) {
    auto m = load_method(*p, name, r);
    ASSERT_TRUE(m) << name;
    set_ones(*m);
    Status st = m->execute();
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto out = m->output_tensor(0);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(floats(*out), (std::vector<float>{2, 2})) << name;
  }
  auto missing = p->load_method("triple", r);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("double, forward"), std::string::npos) << missing.status().message();
}

TEST(ConformanceTest, ConstMethods) {
  auto p = load_conformance("const_methods.pte");
  ASSERT_TRUE(p);
  KernelRegistry r = test_registry();
  {
    auto m = load_method(*p, "forward", r);
    ASSERT_TRUE(m);
    set_ones(*m);
    ASSERT_TRUE(m->execute().is_ok());
    auto out = m->output_tensor(0);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(floats(*out), (std::vector<float>{2, 2, 2}));
  }
  // Constant getters need no kernels and no inputs.
  KernelRegistry empty;
  auto run = [&](const char* name) -> std::unique_ptr<Method> {
    auto m = load_method(*p, name, empty);
    if (!m) return nullptr;
    EXPECT_EQ(m->num_inputs(), 0u);
    EXPECT_TRUE(m->execute().is_ok());
    return m;
  };
  auto s = run("get_scalar");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->output(0).is_int());
  EXPECT_EQ(s->output(0).i, 128);
  EXPECT_EQ(s->output_meta(0).tag, Tag::kInt);
  EXPECT_FALSE(s->output_tensor(0).is_ok());
  auto d = run("get_double");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->output(0).is_double());
  EXPECT_DOUBLE_EQ(d->output(0).d, 2.5);
  auto b = run("get_bool");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->output(0).is_bool());
  EXPECT_EQ(b->output(0).i, 1);
  auto t = run("get_tensor");
  ASSERT_TRUE(t);
  auto tv = t->output_tensor(0);
  ASSERT_TRUE(tv.is_ok()) << tv.status().message();
  EXPECT_EQ(tv->dtype, ScalarType::kLong);
  EXPECT_EQ(tv->sizes, std::vector<int64_t>{3});
  EXPECT_EQ(std::vector<int64_t>(tv->data<int64_t>(), tv->data<int64_t>() + 3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(t->output(5).is_none());  // out of range: None, not a crash
}

TEST(ConformanceTest, MissingCustomOperatorIsNamed) {
  auto p = load_conformance("lstm/lstm.pte");
  ASSERT_TRUE(p);
  KernelRegistry r = test_registry();
  auto m = p->load_method("forward", r);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(m.status().message().find("operator not found: etnp::lstm.out"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("(method forward)"), std::string::npos) << m.status().message();
}

TEST(ConformanceTest, XnnpackDelegateNeedsItsBackend) {
  KernelRegistry r = test_registry();
  for (const char* name : {"add.pte", "dynamic.pte"}) {
    auto p = load_conformance(name);
    ASSERT_TRUE(p);
    auto m = p->load_method("forward", r);
    ASSERT_FALSE(m.is_ok()) << name;
    EXPECT_EQ(m.status().code(), ErrorCode::kNotSupported);
    EXPECT_EQ(m.status().message(), "backend XnnpackBackend is not available (method forward, delegate 0)");
  }
}

TEST(MethodTest, InputErrors) {
  auto p = load_conformance("dtypes.pte");
  ASSERT_TRUE(p);
  KernelRegistry r = test_registry();
  auto m = load_method(*p, "forward", r);
  ASSERT_TRUE(m);
  Status st = m->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 0 was not set"), std::string::npos) << st.message();

  st = m->set_input(0, ones(ScalarType::kFloat, {1}));
  EXPECT_EQ(st.message(), "input 0 has wrong dtype; expected i64, got f32 (method forward)");
  st = m->set_input(0, ones(ScalarType::kLong, {1, 1}));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("wrong rank"), std::string::npos);
  st = m->set_input(0, ones(ScalarType::kLong, {2}));
  EXPECT_NE(st.message().find("does not match the static shape [1]"), std::string::npos) << st.message();
  HostTensor short_bytes = ones(ScalarType::kLong, {1});
  short_bytes.bytes.resize(3);
  EXPECT_FALSE(m->set_input(0, short_bytes).is_ok());
  EXPECT_FALSE(m->set_input(7, ones(ScalarType::kLong, {1})).is_ok());

  ASSERT_TRUE(m->set_input(0, ones(ScalarType::kLong, {1})).is_ok());
  st = m->execute();
  EXPECT_NE(st.message().find("input 1 was not set"), std::string::npos) << st.message();
  EXPECT_FALSE(m->output_tensor(9).is_ok());
}

TEST(MethodTest, DynamicBoundInput) {
  auto p = program_from([] {
    std::vector<std::unique_ptr<efb::ExecutionPlanT>> v;
    v.push_back(add_plan(efb::TensorShapeDynamism::DYNAMIC_BOUND));
    return v;
  }());
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  KernelRegistry r = test_registry();
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->input_meta(0).dynamism, ShapeDynamism::kDynamicBound);
  EXPECT_EQ(m->input_meta(0).sizes, std::vector<int64_t>{8});
  for (int64_t n : {1, 4, 8, 3}) {
    ASSERT_TRUE(m->set_input(0, ones(ScalarType::kFloat, {n})).is_ok()) << n;
    ASSERT_TRUE(m->execute().is_ok());
    auto out = m->output_tensor(0);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(out->sizes, std::vector<int64_t>{n});
    EXPECT_EQ(floats(*out), std::vector<float>(size_t(n), 2.0f));
  }
  Status st = m->set_input(0, ones(ScalarType::kFloat, {9}));
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(st.message(), "input 0 shape [9] exceeds the planned bound [8] (method forward)");
}

TEST(MethodTest, UnplannedInputIsCopied) {
  PlanBuilder b("forward");
  b.arena(32);
  int x = b.tensor(efb::ScalarType::FLOAT, {4}, 0, 0);  // no allocation_info: caller memory
  int out = b.tensor(efb::ScalarType::FLOAT, {4}, 1, 0);
  int one = b.int_value(1);
  b.kernel(b.op("aten::add", "out"), {x, x, one, out, out});
  b.inputs({x});
  b.outputs({out});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  auto p = program_from(std::move(plans));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  KernelRegistry r = test_registry();
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  {
    HostTensor in = HostTensor::from<float>(ScalarType::kFloat, {4}, {1, 2, 3, 4});
    ASSERT_TRUE(m->set_input(0, in).is_ok());
  }  // the Method keeps its own copy
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{2, 4, 6, 8}));
}

TEST(MethodTest, MutableBufferPersistsAcrossExecutes) {
  // state (planned, initial value [10, 20]) += x; output state.
  PlanBuilder b("forward");
  b.arena(64);
  int x = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 0);
  int state = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 16, efb::TensorShapeDynamism::STATIC, /*data_buffer_idx=*/1);
  int one = b.int_value(1);
  b.kernel(b.op("aten::add", "out"), {state, x, one, state, state});
  b.inputs({x});
  b.outputs({state});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  std::vector<float> init{10, 20};
  std::vector<uint8_t> init_bytes(sizeof(float) * 2);
  std::memcpy(init_bytes.data(), init.data(), init_bytes.size());
  std::vector<pte::Blob> mut;
  mut.push_back(blob_of(init_bytes));
  auto p = program_from(std::move(plans), {}, std::move(mut));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  KernelRegistry r = test_registry();
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->set_input(0, ones(ScalarType::kFloat, {2})).is_ok());
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{11, 21}));
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{12, 22}));
  // A second Method gets its own arena, starting from the initial value.
  auto m2 = load_method(**p, "forward", r);
  ASSERT_TRUE(m2);
  ASSERT_TRUE(m2->set_input(0, ones(ScalarType::kFloat, {2})).is_ok());
  ASSERT_TRUE(m2->execute().is_ok());
  EXPECT_EQ(floats(*m2->output_tensor(0)), (std::vector<float>{11, 21}));
}

TEST(MethodTest, ConstantTensorInput) {
  // out = x + c where c is a constant [5, 6].
  PlanBuilder b("forward");
  b.arena(32);
  int x = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 0);
  int c = b.tensor(efb::ScalarType::FLOAT, {2}, 0, 0, efb::TensorShapeDynamism::STATIC, 1);
  int out = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 16);
  int one = b.int_value(1);
  b.kernel(b.op("aten::add", "out"), {x, c, one, out, out});
  b.inputs({x});
  b.outputs({out});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  std::vector<uint8_t> cb(8);
  float cv[2] = {5, 6};
  std::memcpy(cb.data(), cv, 8);
  std::vector<pte::Blob> consts;
  consts.push_back(blob_of(cb));
  auto p = program_from(std::move(plans), std::move(consts));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  KernelRegistry r = test_registry();
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  set_ones(*m);
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{6, 7}));
}

// --huge-pages (weight_store.h): a constant of kHugePageMinBytes or more is
// copied out of the file into huge-page memory at load; the program computes
// the same values from the copy.
TEST(MethodTest, LargeConstantMovesToHugePagesWhenAsked) {
  const int64_t n = int64_t(kHugePageMinBytes / sizeof(float));
  std::vector<float> cv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) cv[size_t(i)] = float(i % 1000) * 0.5f;
  std::vector<uint8_t> cb(cv.size() * sizeof(float));
  std::memcpy(cb.data(), cv.data(), cb.size());
  auto program = [&] {
    PlanBuilder b("forward");
    b.arena(2 * n * 4);
    int x = b.tensor(efb::ScalarType::FLOAT, {int32_t(n)}, 1, 0);
    int c = b.tensor(efb::ScalarType::FLOAT, {int32_t(n)}, 0, 0, efb::TensorShapeDynamism::STATIC, 1);
    int out = b.tensor(efb::ScalarType::FLOAT, {int32_t(n)}, 1, uint64_t(n * 4));
    b.kernel(b.op("aten::add", "out"), {x, c, b.int_value(1), out, out});
    b.inputs({x});
    b.outputs({out});
    std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
    plans.push_back(b.release());
    std::vector<pte::Blob> consts;
    consts.push_back(blob_of(cb));
    return program_from(std::move(plans), std::move(consts));
  };
  KernelRegistry r = test_registry();
  std::vector<float> in_place, huge;
  for (WeightPlacement placement : {WeightPlacement::kInPlace, WeightPlacement::kHugePages}) {
    set_weight_placement(placement);
    auto p = program();
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    auto m = load_method(**p, "forward", r);
    set_weight_placement(WeightPlacement::kInPlace);
    ASSERT_TRUE(m);
    set_ones(*m);
    ASSERT_TRUE(m->execute().is_ok());
    (placement == WeightPlacement::kInPlace ? in_place : huge) = floats(*m->output_tensor(0));
  }
  ASSERT_EQ(in_place.size(), size_t(n));
  EXPECT_EQ(huge, in_place);
  EXPECT_EQ(in_place[1001], 1.0f + 0.5f);
}

TEST(MethodTest, KernelErrorCarriesContext) {
  KernelRegistry r;
  r.register_kernel("aten::add.out", [](KernelContext& ctx, std::span<EValue*> args) -> Status {
    EXPECT_EQ(ctx.op_name, "aten::add.out");
    HF2PTE_ASSIGN_OR_RETURN(Tensor * t, arg_tensor(args[2], "argument 'alpha' of aten::add.out"));
    (void)t;
    return Status::ok();
  });
  auto p = program_from([] {
    std::vector<std::unique_ptr<efb::ExecutionPlanT>> v;
    v.push_back(add_plan());
    return v;
  }());
  ASSERT_TRUE(p.is_ok());
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  set_ones(*m);
  Status st = m->execute();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidProgram);
  EXPECT_EQ(st.message(),
            "argument 'alpha' of aten::add.out: expected Tensor, got Int (method forward, instruction 0, "
            "aten::add.out)");
}

TEST(MethodTest, AllMissingOperatorsInOneError) {
  PlanBuilder b("forward");
  b.arena(32);
  int x = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 0);
  int y = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 16);
  int a = b.op("aten::mm", "out");
  int c = b.op("aten::relu", "");
  b.kernel(a, {x, x, y, y});
  b.kernel(c, {y, y});
  b.kernel(a, {x, x, y, y});
  b.inputs({x});
  b.outputs({y});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  auto p = program_from(std::move(plans));
  ASSERT_TRUE(p.is_ok());
  KernelRegistry r;
  auto m = (*p)->load_method("forward", r);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.status().message(), "operator not found: aten::mm.out, aten::relu (method forward)");
}

// A backend that doubles its single f32 input into its single output.
class DoublingBackend final : public Backend {
 public:
  struct Handle final : DelegateHandle {
    std::string payload;
  };
  mutable std::atomic<int> executes{0};

  Result<std::unique_ptr<DelegateHandle>> init(const BackendInitContext& ctx, std::span<const uint8_t> payload,
                                               std::span<const CompileSpec> specs) const override {
    auto h = std::make_unique<Handle>();
    h->payload.assign(payload.begin(), payload.end());
    if (h->payload != "double") return make_error(ErrorCode::kInvalidProgram, "bad payload");
    if (specs.size() != 1 || specs[0].key != "k") return make_error(ErrorCode::kInvalidProgram, "bad specs");
    return std::unique_ptr<DelegateHandle>(std::move(h));
  }
  Status execute(DelegateHandle& handle, std::span<EValue*> args) const override {
    ++executes;
    HF2PTE_CHECK_OR_RETURN(args.size() == 2, kInvalidProgram, "expected 2 args");
    HF2PTE_ASSIGN_OR_RETURN(Tensor * in, arg_tensor(args[0], "input"));
    HF2PTE_ASSIGN_OR_RETURN(Tensor * out, arg_tensor(args[1], "output"));
    HF2PTE_RETURN_IF_ERROR(out->resize(in->sizes()));
    for (int64_t k = 0; k < in->numel(); ++k) out->data<float>()[k] = 2 * in->data<float>()[k];
    return Status::ok();
  }
};

TEST(MethodTest, DelegateCallRunsRegisteredBackend) {
  auto backend = std::make_shared<DoublingBackend>();
  ASSERT_TRUE(register_backend("TestDoublingBackend", backend).is_ok());
  EXPECT_FALSE(register_backend("TestDoublingBackend", backend).is_ok());
  EXPECT_EQ(find_backend("TestDoublingBackend"), backend);

  PlanBuilder b("forward");
  b.arena(32);
  int x = b.tensor(efb::ScalarType::FLOAT, {3}, 1, 0);
  int y = b.tensor(efb::ScalarType::FLOAT, {3}, 1, 16);
  b.delegate_call(0, {x, y});
  b.inputs({x});
  b.outputs({y});
  auto plan = b.release();
  auto d = std::make_unique<efb::BackendDelegateT>();
  d->id = "TestDoublingBackend";
  d->processed = std::make_unique<efb::BackendDelegateDataReferenceT>();
  d->processed->location = efb::DataLocation::SEGMENT;
  d->processed->index = 0;
  auto spec = std::make_unique<efb::CompileSpecT>();
  spec->key = "k";
  d->compile_specs.push_back(std::move(spec));
  plan->delegates.push_back(std::move(d));
  pte::PteContents c;
  c.program.execution_plan.push_back(std::move(plan));
  c.delegates.push_back(blob_of({'d', 'o', 'u', 'b', 'l', 'e'}));
  auto p = program_from(std::move(c));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  KernelRegistry r;
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {3}, {1, 2, 3})).is_ok());
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(backend->executes.load(), 1);
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{2, 4, 6}));
}

TEST(MethodTest, ScalarInputsAreConstants) {
  PlanBuilder b("forward");
  b.arena(32);
  int x = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 0);
  int alpha = b.int_value(3);
  int out = b.tensor(efb::ScalarType::FLOAT, {2}, 1, 16);
  b.kernel(b.op("aten::add", "out"), {x, x, alpha, out, out});
  b.inputs({x, alpha});
  b.outputs({out});
  std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans;
  plans.push_back(b.release());
  auto p = program_from(std::move(plans));
  ASSERT_TRUE(p.is_ok());
  KernelRegistry r = test_registry();
  auto m = load_method(**p, "forward", r);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->input_meta(1).tag, Tag::kInt);
  Status st = m->set_input(1, ones(ScalarType::kLong, {}));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("constant Int"), std::string::npos) << st.message();
  ASSERT_TRUE(m->set_input(0, ones(ScalarType::kFloat, {2})).is_ok());
  ASSERT_TRUE(m->execute().is_ok());  // the scalar input need not be set
  EXPECT_EQ(floats(*m->output_tensor(0)), (std::vector<float>{4, 4}));
}

}  // namespace
}  // namespace hf2pte::rt
