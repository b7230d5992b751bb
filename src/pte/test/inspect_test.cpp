#include "pte/inspect.h"

#include <gtest/gtest.h>

#include "pte/pte_writer.h"
#include "pte_test_util.h"

namespace hf2pte::pte {
namespace {

using namespace hf2pte::pte::testing;
using Json = nlohmann::ordered_json;

const std::string kConformance = HF2PTE_SOURCE_DIR "/tests/data/conformance/";

std::shared_ptr<PteFile> open(const std::string& name) {
  auto file = PteFile::open(kConformance + name);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  return file.is_ok() ? *file : nullptr;
}

const Json* find_method(const Json& j, const std::string& name) {
  for (const Json& m : j["methods"]) {
    if (m["name"] == name) return &m;
  }
  return nullptr;
}

TEST(Inspect, ConstantMethods) {
  auto file = open("const_methods.pte");
  ASSERT_NE(file, nullptr);
  const Json j = inspect_json(*file);
  EXPECT_EQ(j["file_size"], 2344);
  EXPECT_EQ(j["header"]["present"], true);
  ASSERT_EQ(j["methods"].size(), 5u);

  const Json* forward = find_method(j, "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_FALSE(forward->contains("constant"));
  EXPECT_EQ((*forward)["inputs"][0]["dtype"], "f32");
  EXPECT_EQ((*forward)["inputs"][0]["sizes"], Json::array({3}));
  EXPECT_EQ((*forward)["inputs"][0]["dynamism"], "static");
  EXPECT_EQ((*forward)["instructions"], 2);
  EXPECT_EQ((*forward)["non_const_buffer_sizes"], Json::array({0, 48}));
  bool saw_add = false;
  for (const Json& op : (*forward)["operators"]) {
    if (op["name"] == "aten::add.out") {
      saw_add = true;
      EXPECT_EQ(op["instructions"], 1);
    }
  }
  EXPECT_TRUE(saw_add);

  EXPECT_EQ((*find_method(j, "get_scalar"))["constant"], (Json{{"type", "int"}, {"value", 128}}));
  EXPECT_EQ((*find_method(j, "get_double"))["constant"]["value"], 2.5);
  EXPECT_EQ((*find_method(j, "get_bool"))["constant"]["value"], true);
  const Json& tensor = (*find_method(j, "get_tensor"))["constant"];
  EXPECT_EQ(tensor["dtype"], "i64");
  EXPECT_EQ(tensor["values"], Json::array({1, 2, 3}));

  const std::string text = inspect_text(*file);
  EXPECT_NE(text.find("get_scalar = int 128\n"), std::string::npos) << text;
  EXPECT_NE(text.find("get_double = double 2.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("get_bool = bool true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("get_tensor = i64[3] [1, 2, 3]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("aten::add.out x1\n"), std::string::npos) << text;
  // The naive sum covers at least the planned f32[3] input and output (2 x 12
  // bytes); the arena is larger only through the 16-byte alignment of each slot.
  const uint64_t unshared = (*forward)["planned_tensor_bytes_without_reuse"].get<uint64_t>();
  EXPECT_GE(unshared, 24u);
  EXPECT_LE(unshared, 48u);
  EXPECT_NE(text.find("memory planned buffers: [1] 48 bytes (planned tensors without reuse: " + std::to_string(unshared) +
                      " bytes)\n"),
            std::string::npos)
      << text;
}

TEST(Inspect, DelegatesAndNamedData) {
  auto add = open("add.pte");
  ASSERT_NE(add, nullptr);
  const Json j = inspect_json(*add);
  const Json& delegate = j["methods"][0]["delegates"][0];
  EXPECT_EQ(delegate["id"], "XnnpackBackend");
  EXPECT_EQ(delegate["location"], "segment");
  EXPECT_EQ(delegate["data_index"], 1);
  EXPECT_EQ(delegate["size"], 432);
  EXPECT_EQ(delegate["calls"], 1);
  EXPECT_EQ(j["segments"].size(), 2u);
  const std::string text = inspect_text(*add);
  EXPECT_NE(text.find("[0] XnnpackBackend, segment 1, 432 bytes, calls 1"), std::string::npos) << text;

  auto quantized = open("quantized.pte");
  ASSERT_NE(quantized, nullptr);
  const Json q = inspect_json(*quantized);
  ASSERT_EQ(q["named_data"].size(), 2u);
  EXPECT_EQ(q["named_data"][0]["size"], 64);
  EXPECT_EQ(q["named_data"][1]["size"], 32);
  EXPECT_EQ(q["named_data"][0]["key"].get<std::string>().size(), 64u);  // sha256 hex
}

TEST(Inspect, DynamicShapes) {
  auto file = open("dynamic.pte");
  ASSERT_NE(file, nullptr);
  const Json j = inspect_json(*file);
  EXPECT_EQ(j["methods"][0]["inputs"][0]["dynamism"], "dynamic_bound");
  EXPECT_EQ(j["methods"][0]["inputs"][0]["sizes"], Json::array({8}));
}

TEST(Inspect, BadIndicesPrintQuestionMarks) {
  // The writer does not check plan-internal indices (the runtime does), so it
  // can produce a verified file whose indices point nowhere.
  PteContents contents = add_contents();
  auto& plan = *contents.program.execution_plan[0];
  plan.name = "bad\xff\xfe";  // invalid UTF-8 must not make the JSON dump throw
  plan.inputs = {1, 99, -1};
  efb::KernelCallT call;
  call.op_index = 7;
  auto instruction = std::make_unique<efb::InstructionT>();
  instruction->instr_args.Set(std::move(call));
  plan.chains[0]->instructions.push_back(std::move(instruction));
  efb::DelegateCallT delegate_call;
  delegate_call.delegate_index = 3;
  instruction = std::make_unique<efb::InstructionT>();
  instruction->instr_args.Set(std::move(delegate_call));
  plan.chains[0]->instructions.push_back(std::move(instruction));
  auto delegate = std::make_unique<efb::BackendDelegateT>();
  delegate->id = "Missing";
  delegate->processed = std::make_unique<efb::BackendDelegateDataReferenceT>();
  delegate->processed->location = efb::DataLocation::INLINE;
  delegate->processed->index = 5;
  plan.delegates.push_back(std::move(delegate));
  auto bytes = serialize_pte(std::move(contents));
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = PteFile::from_bytes(*bytes, "bad.pte");
  ASSERT_TRUE(file.is_ok()) << file.status().message();

  const Json j = inspect_json(**file);
  EXPECT_NO_THROW((void)j.dump());
  const Json& m = j["methods"][0];
  EXPECT_EQ(m["name"], "bad\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(m["inputs"][1], (Json{{"value", 99}, {"type", "?"}}));
  EXPECT_EQ(m["inputs"][2]["type"], "?");
  EXPECT_EQ(m["operators"].back(), (Json{{"name", "?"}, {"instructions", 1}}));
  EXPECT_EQ(m["delegates"][0]["error"], "inline delegate data 5 out of range; expected < 0 (bad.pte)");
  EXPECT_EQ(m["delegates"].back()["index"], "?");

  const std::string text = inspect_text(**file);
  EXPECT_NE(text.find("#99 ?"), std::string::npos) << text;
  EXPECT_NE(text.find("      ? x1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[0] Missing, inline 5, ? bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace hf2pte::pte
