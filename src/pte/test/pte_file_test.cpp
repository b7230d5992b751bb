#include "pte/pte_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "pte/inspect.h"
#include "pte/pte_writer.h"
#include "pte_test_util.h"

namespace hf2pte::pte {
namespace {

using namespace hf2pte::pte::testing;

const std::string kConformance = HF2PTE_SOURCE_DIR "/tests/data/conformance/";
// Every upstream (ExecuTorch 1.3.1) program in the conformance corpus.
const std::vector<std::string> kConformanceFiles = {"add.pte",   "const_methods.pte", "dtypes.pte",   "dynamic.pte",
                                                    "multi.pte", "quantized.pte",     "lstm/lstm.pte"};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> method_names(const PteFile& file) {
  std::vector<std::string> names;
  for (const auto* plan : *file.program().execution_plan()) names.push_back(plan->name()->str());
  return names;
}

std::shared_ptr<PteFile> open_conformance(const std::string& name) {
  auto file = PteFile::open(kConformance + name);
  EXPECT_TRUE(file.is_ok()) << name << ": " << file.status().message();
  return file.is_ok() ? *file : nullptr;
}

void put_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); }
void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, 8); }

Status open_error(std::vector<uint8_t> bytes) {
  auto file = PteFile::from_bytes(std::move(bytes), "bad.pte");
  return file.is_ok() ? Status::ok() : file.status();
}

/// Calls every accessor with every index the file mentions (and a few past
/// them); the point is that none of this crashes on a damaged file.
void touch_everything(const PteFile& file) {
  const auto& program = file.program();
  const uint32_t segments = program.segments() ? program.segments()->size() : 0;
  for (uint32_t i = 0; i <= segments + 1; ++i) (void)file.segment(i);
  for (uint32_t k = 0; k < 8; ++k) {
    (void)file.constant_data(k, 4);
    (void)file.mutable_data(k, 4);
  }
  if (const auto* named = program.named_data()) {
    for (const auto* entry : *named) {
      if (entry->key()) (void)file.named_data(entry->key()->string_view());
    }
  }
  if (const auto* plans = program.execution_plan()) {
    for (const auto* plan : *plans) {
      if (!plan->delegates()) continue;
      for (const auto* delegate : *plan->delegates()) {
        if (delegate->processed()) (void)file.delegate_data(*delegate->processed());
      }
    }
  }
  const std::string text = inspect_text(file);
  EXPECT_FALSE(text.empty());
  (void)inspect_json(file).dump();
}

TEST(PteFileConformance, EveryFileOpensAndVerifies) {
  for (const std::string& name : kConformanceFiles) {
    SCOPED_TRACE(name);
    auto file = open_conformance(name);
    ASSERT_NE(file, nullptr);
    touch_everything(*file);
  }
}

TEST(PteFileConformance, MethodNames) {
  EXPECT_EQ(method_names(*open_conformance("const_methods.pte")),
            (std::vector<std::string>{"forward", "get_scalar", "get_double", "get_bool", "get_tensor"}));
  EXPECT_EQ(method_names(*open_conformance("multi.pte")), (std::vector<std::string>{"double", "forward"}));
  for (const char* name : {"add.pte", "dtypes.pte", "dynamic.pte", "quantized.pte", "lstm/lstm.pte"}) {
    EXPECT_EQ(method_names(*open_conformance(name)), std::vector<std::string>{"forward"}) << name;
  }
}

TEST(PteFileConformance, HeadersAndSegments) {
  auto add = open_conformance("add.pte");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(add->header().present);
  EXPECT_EQ(add->header().length, 32u);
  EXPECT_EQ(add->header().program_size, 0x440u);
  EXPECT_EQ(add->header().segment_base_offset, 0x480u);
  EXPECT_EQ(add->header().segment_data_size, 432u);
  // The XNNPACK payload lives in segment 1 and starts with the XH00 header.
  const auto* ref = add->program().execution_plan()->Get(0)->delegates()->Get(0)->processed();
  auto payload = add->delegate_data(*ref);
  ASSERT_TRUE(payload.is_ok()) << payload.status().message();
  ASSERT_EQ(payload->size(), 432u);
  EXPECT_EQ(std::memcmp(payload->data() + 4, "XH00", 4), 0);

  auto dtypes = open_conformance("dtypes.pte");
  ASSERT_NE(dtypes, nullptr);
  EXPECT_FALSE(dtypes->header().present);  // no segment data, no eh00

  auto quantized = open_conformance("quantized.pte");
  ASSERT_NE(quantized, nullptr);
  const auto* named = quantized->program().named_data();
  ASSERT_EQ(named->size(), 2u);
  auto weights = quantized->named_data(named->Get(0)->key()->string_view());
  ASSERT_TRUE(weights.is_ok()) << weights.status().message();
  EXPECT_EQ(weights->size(), 64u);  // int8 [8, 8]
  auto bias = quantized->named_data(named->Get(1)->key()->string_view());
  ASSERT_TRUE(bias.is_ok());
  EXPECT_EQ(bias->size(), 32u);  // int32 [8]
}

TEST(PteFileConformance, ConstantTensorData) {
  auto file = open_conformance("const_methods.pte");
  ASSERT_NE(file, nullptr);
  const auto* plan = file->program().execution_plan()->Get(4);
  ASSERT_EQ(plan->name()->str(), "get_tensor");
  const auto* tensor = plan->values()->Get(0)->val_as_Tensor();
  ASSERT_NE(tensor, nullptr);
  auto data = file->constant_data(tensor->data_buffer_idx(), 3 * sizeof(int64_t));
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  int64_t values[3];
  std::memcpy(values, data->data(), sizeof values);
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 2);
  EXPECT_EQ(values[2], 3);
}

TEST(PteFileConformance, LstmCustomOperator) {
  auto file = open_conformance("lstm/lstm.pte");
  ASSERT_NE(file, nullptr);
  const auto* op = file->program().execution_plan()->Get(0)->operators()->Get(0);
  EXPECT_EQ(op->name()->str(), "etnp::lstm");
  EXPECT_EQ(op->overload()->str(), "out");
  EXPECT_EQ(file->program().constant_segment()->offsets()->size(), 5u);
}

TEST(PteFileHostile, TruncatedFilesAreErrors) {
  for (const std::string& name : kConformanceFiles) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = read_bytes(kConformance + name);
    ASSERT_FALSE(bytes.empty());
    for (size_t size = 0; size < bytes.size(); ++size) {
      Status status = open_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + ptrdiff_t(size)));
      EXPECT_FALSE(status.is_ok()) << "truncated at " << size;
      EXPECT_TRUE(status.is_ok() || status.code() == ErrorCode::kInvalidProgram) << status.message();
    }
  }
}

TEST(PteFileHostile, WrongIdentifier) {
  std::vector<uint8_t> bytes = read_bytes(kConformance + "add.pte");
  std::memcpy(bytes.data() + 4, "ET11", 4);
  EXPECT_EQ(open_error(bytes).message(),
            "incompatible ExecuTorch program version: expected file identifier ET12, got 'ET11' (bad.pte)");
  std::memcpy(bytes.data() + 4, "PK\x03\x04", 4);
  EXPECT_EQ(open_error(bytes).message(),
            "not an ExecuTorch program: expected file identifier ET12, got 'PK\\x03\\x04' (bad.pte)");
  EXPECT_EQ(open_error({}).message(), "file too small for a .pte; expected >= 8 bytes, got 0 (bad.pte)");
}

TEST(PteFileHostile, ExtendedHeaderOutOfBounds) {
  const std::vector<uint8_t> good = read_bytes(kConformance + "add.pte");  // 1584 bytes
  ASSERT_TRUE(open_error(good).is_ok());
  auto with = [&](auto edit) {
    std::vector<uint8_t> bytes = good;
    edit(bytes);
    return open_error(bytes);
  };
  Status s = with([](auto& b) { put_u64(b, 16, 5000); });  // program_size past the end
  EXPECT_EQ(s.message(), "eh00 program_size exceeds the file; expected <= 1584, got 5000 (bad.pte)");
  s = with([](auto& b) { put_u64(b, 16, 16); });  // program_size inside the header
  EXPECT_FALSE(s.is_ok());
  s = with([](auto& b) { put_u64(b, 24, 1584); });  // base at the end, data size 432
  EXPECT_NE(s.message().find("runs past the end of the file"), std::string::npos) << s.message();
  s = with([](auto& b) { put_u64(b, 32, 1u << 20); });  // data size past the end
  EXPECT_NE(s.message().find("runs past the end of the file"), std::string::npos) << s.message();
  s = with([](auto& b) {  // base + size overflows u64
    put_u64(b, 24, UINT64_MAX - 8);
    put_u64(b, 32, 64);
  });
  EXPECT_NE(s.message().find("runs past the end of the file"), std::string::npos) << s.message();
  s = with([](auto& b) { put_u64(b, 24, 64); });  // segments overlapping the program
  EXPECT_NE(s.message().find("overlaps the program"), std::string::npos) << s.message();
  s = with([](auto& b) { put_u32(b, 12, 16); });
  EXPECT_EQ(s.message(), "eh00 header length too small; expected >= 24, got 16 (bad.pte)");
  s = with([](auto& b) { put_u32(b, 12, 0xffffffff); });
  EXPECT_NE(s.message().find("runs past the end of the file"), std::string::npos) << s.message();
  s = with([](auto& b) { put_u64(b, 16, 0x400); });  // program cut short: verifier fails
  EXPECT_EQ(s.message(), "program flatbuffer failed verification (bad.pte)");
}

TEST(PteFileHostile, AccessorsAreBoundsChecked) {
  auto file = open_conformance("const_methods.pte");
  ASSERT_NE(file, nullptr);
  const std::string where = " (" + kConformance + "const_methods.pte)";
  EXPECT_EQ(file->segment(3).status().message(), "segment 3 out of range; expected < 1" + where);
  EXPECT_EQ(file->constant_data(3, 4).status().message(), "constant 3 out of range; expected < 3" + where);
  EXPECT_EQ(file->constant_data(0, 4).status().code(), ErrorCode::kInvalidProgram);
  EXPECT_EQ(file->constant_data(2, 25).status().message(),
            "constant 2 (offset 16, 25 bytes) runs past the end of segment 0; expected end <= 40" + where);
  EXPECT_TRUE(file->constant_data(2, 24).is_ok());
  EXPECT_EQ(file->mutable_data(1, 4).status().code(), ErrorCode::kInvalidProgram);
  EXPECT_EQ(file->named_data("x").status().code(), ErrorCode::kNotFound);
  efb::BackendDelegateDataReferenceT ref_t;
  ref_t.location = efb::DataLocation::INLINE;
  ref_t.index = 0;
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(efb::BackendDelegateDataReference::Pack(builder, &ref_t));
  const auto* ref = flatbuffers::GetRoot<efb::BackendDelegateDataReference>(builder.GetBufferPointer());
  EXPECT_EQ(file->delegate_data(*ref).status().message(),
            "inline delegate data 0 out of range; expected < 0" + where);
}

TEST(PteFileHostile, SegmentBytesWithoutHeader) {
  // A verified flatbuffer that claims segment data but has no eh00 header.
  PteContents contents;
  contents.program.execution_plan.push_back(add_plan());
  contents.program.execution_plan[0]->values[0] = tensor_value(efb::ScalarType::FLOAT, {2}, 0, 1, 32);
  auto bytes = serialize_pte(std::move(contents));
  ASSERT_TRUE(bytes.is_ok());
  auto program = PteFile::from_bytes(*bytes);
  ASSERT_TRUE(program.is_ok());
  auto unpacked = (*program)->program().UnPack();
  unpacked->segments[0]->size = 100;
  flatbuffers::FlatBufferBuilder builder;
  efb::FinishProgramBuffer(builder, efb::Program::Pack(builder, unpacked));
  delete unpacked;
  auto file = PteFile::from_bytes(std::vector<uint8_t>(builder.GetBufferPointer(),
                                                       builder.GetBufferPointer() + builder.GetSize()));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->segment(0).status().message(),
            "segment 0 has 100 bytes but the file has no segment data (no eh00 header) (<memory>)");
  touch_everything(**file);
}

TEST(PteFileHostile, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(1234);
  for (const std::string& name : kConformanceFiles) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> good = read_bytes(kConformance + name);
    int opened = 0;
    for (int iteration = 0; iteration < 400; ++iteration) {
      std::vector<uint8_t> bytes = good;
      const int flips = 1 + int(rng() % 4);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = uint8_t(rng());
      auto file = PteFile::from_bytes(std::move(bytes), "fuzz.pte");
      if (!file.is_ok()) continue;
      ++opened;
      touch_everything(**file);
    }
    EXPECT_GT(opened, 0);  // most single-byte damage is in data the verifier cannot see
  }
}

TEST(PteFile, OpenMissingFileIsIoError) {
  auto file = PteFile::open(kConformance + "does-not-exist.pte");
  ASSERT_FALSE(file.is_ok());
  EXPECT_EQ(file.status().code(), ErrorCode::kIoError);
}

}  // namespace
}  // namespace hf2pte::pte

namespace hf2pte::pte {
namespace {

// Releasing pages must never change what the file reads: a mapped file faults
// them back in; in-memory bytes (from_bytes) are anonymous memory, where the
// kernel would zero them, so nothing may be released there.
TEST(PteFileReleasePages, BytesReadTheSameAfterwards) {
  std::vector<uint8_t> bytes = read_bytes(kConformance + "add.pte");
  ASSERT_FALSE(bytes.empty());
  bytes.resize(bytes.size() + (size_t(1) << 18), 0xAB);  // whole pages of trailing data
  const std::vector<uint8_t> expect = bytes;
  auto memory = PteFile::from_bytes(bytes, "padded.pte");
  ASSERT_TRUE(memory.is_ok()) << memory.status().message();
  (*memory)->release_pages((*memory)->file_bytes());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), (*memory)->file_bytes().begin(), (*memory)->file_bytes().end()));

  const std::string path = ::testing::TempDir() + "padded.pte";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(expect.data()), std::streamsize(expect.size()));
  auto mapped = PteFile::open(path);
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().message();
  (*mapped)->release_pages((*mapped)->file_bytes());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), (*mapped)->file_bytes().begin(), (*mapped)->file_bytes().end()));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hf2pte::pte
