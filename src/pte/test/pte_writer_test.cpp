#include "pte/pte_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "pte/pte_file.h"
#include "pte_test_util.h"

namespace hf2pte::pte {
namespace {

using namespace hf2pte::pte::testing;
namespace fs = std::filesystem;

std::shared_ptr<PteFile> reopen(const std::vector<uint8_t>& bytes) {
  auto file = PteFile::from_bytes(bytes, "written.pte");
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  return file.is_ok() ? *file : nullptr;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A fresh, empty directory under the build tree, removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::path(HF2PTE_BINARY_DIR) / "pte_test_tmp" / fmt::format("{}.{}", name, ::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

TEST(PteWriter, RoundTripConstantsAlignedAndDeduped) {
  PteContents contents;
  contents.program.execution_plan.push_back(add_plan());
  contents.constants.push_back(bytes_blob(float_bytes({1.0f, 2.0f}), "w"));  // k=1: 8 bytes at 0
  contents.constants.push_back(bytes_blob({1, 2, 3, 4, 5}));                 // k=2: at 16
  contents.constants.push_back(bytes_blob(float_bytes({1.0f, 2.0f}), "w"));  // k=3: dedup of k=1
  contents.constants.push_back(bytes_blob({9, 8, 7}));                       // k=4: at 32, last: no pad
  auto bytes = serialize_pte(std::move(contents));
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = reopen(*bytes);
  ASSERT_NE(file, nullptr);

  const ExtendedHeader& header = file->header();
  ASSERT_TRUE(header.present);
  EXPECT_EQ(header.length, 32u);
  EXPECT_EQ(std::memcmp(bytes->data() + 8, "eh00", 4), 0);
  EXPECT_EQ(header.segment_base_offset % kSegmentAlignment, 0u);
  EXPECT_GE(header.segment_base_offset, header.program_size);
  EXPECT_LT(header.segment_base_offset - header.program_size, kSegmentAlignment);
  EXPECT_EQ(header.segment_data_size, 35u);
  EXPECT_EQ(bytes->size(), header.segment_base_offset + header.segment_data_size);
  for (uint64_t i = header.program_size; i < header.segment_base_offset; ++i) EXPECT_EQ((*bytes)[i], 0) << i;

  const auto& program = file->program();
  EXPECT_EQ(program.version(), 0u);
  ASSERT_EQ(program.segments()->size(), 1u);
  EXPECT_EQ(program.segments()->Get(0)->offset(), 0u);
  const auto* constants = program.constant_segment();
  ASSERT_NE(constants, nullptr);
  EXPECT_EQ(constants->segment_index(), 0u);
  std::vector<uint64_t> offsets(constants->offsets()->begin(), constants->offsets()->end());
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 0, 16, 0, 32}));
  for (uint64_t offset : offsets) EXPECT_EQ(offset % kConstantAlignment, 0u);
  EXPECT_EQ(program.mutable_data_segments()->size(), 0u);  // present but empty (--force-empty)

  auto c1 = file->constant_data(1, 8);
  ASSERT_TRUE(c1.is_ok()) << c1.status().message();
  EXPECT_EQ(std::vector<uint8_t>(c1->begin(), c1->end()), float_bytes({1.0f, 2.0f}));
  auto c3 = file->constant_data(3, 8);
  ASSERT_TRUE(c3.is_ok());
  EXPECT_EQ(c3->data(), c1->data());  // stored once
  auto c2 = file->constant_data(2, 5);
  ASSERT_TRUE(c2.is_ok());
  EXPECT_EQ(std::vector<uint8_t>(c2->begin(), c2->end()), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  auto c4 = file->constant_data(4, 3);
  ASSERT_TRUE(c4.is_ok());
  EXPECT_EQ(std::vector<uint8_t>(c4->begin(), c4->end()), (std::vector<uint8_t>{9, 8, 7}));
  EXPECT_FALSE(file->constant_data(4, 4).is_ok());  // past the (unpadded) segment end

  // The method itself survives the trip.
  const auto* plan = program.execution_plan()->Get(0);
  EXPECT_EQ(plan->name()->str(), "forward");
  EXPECT_EQ(plan->operators()->Get(0)->name()->str(), "aten::add");
  EXPECT_EQ(plan->operators()->Get(0)->overload()->str(), "out");
  const auto* call = plan->chains()->Get(0)->instructions()->Get(0)->instr_args_as_KernelCall();
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(std::vector<int32_t>(call->args()->begin(), call->args()->end()), (std::vector<int32_t>{0, 1, 3, 2, 2}));
  EXPECT_EQ(plan->values()->Get(0)->val_as_Tensor()->data_buffer_idx(), 1u);
  EXPECT_EQ(plan->values()->Get(2)->val_as_Tensor()->allocation_info()->memory_offset_low(), 16u);
  // Required-but-empty vectors are emitted, never omitted (pte-format.md §2).
  EXPECT_NE(plan->delegates(), nullptr);
  EXPECT_NE(plan->chains()->Get(0)->inputs(), nullptr);
}

TEST(PteWriter, NoExtendedHeaderWithoutSegmentData) {
  PteContents contents;
  contents.program.execution_plan.push_back(add_plan());
  contents.program.execution_plan[0]->values[0] = tensor_value(efb::ScalarType::FLOAT, {2}, 0, 1, 32);
  auto bytes = serialize_pte(std::move(contents));
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  EXPECT_EQ(std::memcmp(bytes->data() + 4, "ET12", 4), 0);
  EXPECT_NE(std::memcmp(bytes->data() + 8, "eh00", 4), 0);
  auto file = reopen(*bytes);
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(file->header().present);
  const auto& program = file->program();
  ASSERT_EQ(program.segments()->size(), 1u);  // like upstream add.pte: segments=[{0,0}]
  EXPECT_EQ(program.segments()->Get(0)->offset(), 0u);
  EXPECT_EQ(program.segments()->Get(0)->size(), 0u);
  ASSERT_NE(program.constant_segment(), nullptr);
  ASSERT_EQ(program.constant_segment()->offsets()->size(), 1u);
  EXPECT_EQ(program.constant_segment()->offsets()->Get(0), 0u);
  auto segment = file->segment(0);
  ASSERT_TRUE(segment.is_ok());
  EXPECT_TRUE(segment->empty());
}

TEST(PteWriter, MutableDelegateAndNamedSegments) {
  PteContents contents = add_contents();
  auto& plan = *contents.program.execution_plan[0];
  plan.values.push_back(tensor_value(efb::ScalarType::FLOAT, {1}, 1, 1, 32));  // mutable with initial value
  contents.mutable_data.push_back(bytes_blob(float_bytes({42.0f})));
  contents.mutable_data.push_back(bytes_blob({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}));
  auto delegate = std::make_unique<efb::BackendDelegateT>();
  delegate->id = "XnnpackBackend";
  delegate->processed = std::make_unique<efb::BackendDelegateDataReferenceT>();
  delegate->processed->location = efb::DataLocation::SEGMENT;
  delegate->processed->index = 0;  // delegates[0]
  plan.delegates.push_back(std::move(delegate));
  contents.delegates.push_back(bytes_blob(std::vector<uint8_t>(200, 0xab)));
  contents.named.push_back({"weights.a", bytes_blob(std::vector<uint8_t>(130, 0x11), "sha-a")});
  contents.named.push_back({"weights.b", bytes_blob(std::vector<uint8_t>(7, 0x22))});
  contents.named.push_back({"weights.a2", bytes_blob(std::vector<uint8_t>(130, 0x11), "sha-a")});

  auto bytes = serialize_pte(std::move(contents));
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = reopen(*bytes);
  ASSERT_NE(file, nullptr);
  const auto& program = file->program();

  // Order: constants, mutable data, delegate blobs, named blobs; each 128-aligned.
  ASSERT_EQ(program.segments()->size(), 5u);
  std::vector<std::pair<uint64_t, uint64_t>> segments;
  for (const auto* s : *program.segments()) segments.emplace_back(s->offset(), s->size());
  EXPECT_EQ(segments, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 8}, {128, 33}, {256, 200}, {512, 130}, {768, 7}}));
  EXPECT_EQ(file->header().segment_data_size, 775u);
  EXPECT_EQ(file->header().segment_base_offset % 128, 0u);

  ASSERT_EQ(program.mutable_data_segments()->size(), 1u);
  const auto* mutable_segment = program.mutable_data_segments()->Get(0);
  EXPECT_EQ(mutable_segment->segment_index(), 1u);
  EXPECT_EQ(std::vector<uint64_t>(mutable_segment->offsets()->begin(), mutable_segment->offsets()->end()),
            (std::vector<uint64_t>{0, 0, 16}));
  auto m1 = file->mutable_data(1, 4);
  ASSERT_TRUE(m1.is_ok()) << m1.status().message();
  EXPECT_EQ(std::vector<uint8_t>(m1->begin(), m1->end()), float_bytes({42.0f}));
  auto m2 = file->mutable_data(2, 17);
  ASSERT_TRUE(m2.is_ok()) << m2.status().message();
  EXPECT_EQ((*m2)[16], 17);
  EXPECT_FALSE(file->mutable_data(3, 1).is_ok());

  const auto* ref = program.execution_plan()->Get(0)->delegates()->Get(0)->processed();
  EXPECT_EQ(ref->location(), efb::DataLocation::SEGMENT);
  EXPECT_EQ(ref->index(), 2u);  // rewritten from delegates[0] to the segment index
  auto payload = file->delegate_data(*ref);
  ASSERT_TRUE(payload.is_ok()) << payload.status().message();
  EXPECT_EQ(payload->size(), 200u);
  EXPECT_EQ((*payload)[199], 0xab);

  ASSERT_EQ(program.named_data()->size(), 3u);
  EXPECT_EQ(program.named_data()->Get(0)->segment_index(), 3u);
  EXPECT_EQ(program.named_data()->Get(2)->segment_index(), 3u);  // deduped by key
  auto a = file->named_data("weights.a2");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->size(), 130u);
  auto b = file->named_data("weights.b");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(std::vector<uint8_t>(b->begin(), b->end()), std::vector<uint8_t>(7, 0x22));
  EXPECT_EQ(file->named_data("nope").status().code(), ErrorCode::kNotFound);
}

TEST(PteWriter, OutputIsReproducibleAndMatchesFile) {
  auto first = serialize_pte(add_contents());
  auto second = serialize_pte(add_contents());
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  EXPECT_EQ(*first, *second);

  TempDir dir("reproducible");
  const fs::path out = dir.path() / "model.pte";
  std::vector<WriteProgress> progress;
  std::vector<WriteSummary> layouts;  // on_layout: once, before the first byte
  WriteOptions options;
  options.on_layout = [&](const WriteSummary& w) {
    EXPECT_TRUE(progress.empty());
    layouts.push_back(w);
  };
  options.on_progress = [&](const WriteProgress& p) { progress.push_back(p); };
  auto summary = write_pte(out.string(), add_contents(), options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(layouts.size(), 1u);
  EXPECT_EQ(layouts[0].file_size, first->size());
  EXPECT_EQ(layouts[0].program_size, summary->program_size);
  EXPECT_EQ(read_file(out), *first);
  EXPECT_EQ(summary->file_size, first->size());
  EXPECT_EQ(summary->segment_data_size, 8u);
  EXPECT_EQ(summary->file_size, (summary->program_size + 127) / 128 * 128 + summary->segment_data_size);
  ASSERT_FALSE(progress.empty());
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_GE(progress[i].bytes_written, progress[i - 1].bytes_written);
  EXPECT_EQ(progress.back().bytes_written, summary->file_size);
  EXPECT_EQ(progress.back().bytes_total, summary->file_size);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.pte"});  // no temp file left

  auto file = PteFile::open(out.string());
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->program().execution_plan()->Get(0)->name()->str(), "forward");
}

// The file sink buffers small writes and passes large ones (mmapped weights)
// through without a copy: blobs below, at and across its 1 MiB buffer and
// 2 MiB pages, at unaligned offsets, must come out byte for byte.
TEST(PteWriter, LargeBlobsAcrossBufferBoundariesMatchFile) {
  constexpr size_t kMiB = size_t(1) << 20;
  PteContents contents;
  contents.program.execution_plan.push_back(add_plan());
  uint8_t seed = 1;
  for (size_t size : {size_t(100), 2 * kMiB, 3 * kMiB + 5, size_t(17), 5 * kMiB + 4097, 2 * kMiB - 1}) {
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = uint8_t(i * 131 + seed);
    contents.constants.push_back(bytes_blob(std::move(data)));
    ++seed;
  }
  PteContents copy;
  copy.program.execution_plan.push_back(add_plan());
  copy.constants = contents.constants;
  auto expected = serialize_pte(std::move(copy));
  ASSERT_TRUE(expected.is_ok()) << expected.status().message();
  ASSERT_GT(expected->size(), 12 * kMiB);

  TempDir dir("chunks");
  const fs::path out = dir.path() / "big.pte";
  auto summary = write_pte(out.string(), std::move(contents), {});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->file_size, expected->size());
  EXPECT_TRUE(read_file(out) == *expected);
}

TEST(PteWriter, FailedBlobLeavesNoFileAndKeepsExistingDestination) {
  TempDir dir("atomic");
  const fs::path out = dir.path() / "model.pte";

  auto failing = [] {
    PteContents contents = add_contents();
    Blob blob;
    blob.size = 1000;
    blob.write = [](ByteSink& sink) -> Status {
      const std::vector<uint8_t> half(500, 1);
      HF2PTE_RETURN_IF_ERROR(sink.write(half.data(), half.size()));
      return Status(ErrorCode::kIoError, "checkpoint read failed (model.safetensors)");
    };
    contents.named.push_back({"big", std::move(blob)});
    return contents;
  };

  auto result = write_pte(out.string(), failing());
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kIoError);
  EXPECT_EQ(result.status().message(), "checkpoint read failed (model.safetensors)");
  EXPECT_TRUE(dir.entries().empty());

  {
    std::ofstream existing(out, std::ios::binary);
    existing << "previous export";
  }
  result = write_pte(out.string(), failing());
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.pte"});
  const std::vector<uint8_t> kept = read_file(out);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "previous export");

  // A successful write replaces it.
  ASSERT_TRUE(write_pte(out.string(), add_contents()).is_ok());
  EXPECT_EQ(read_file(out), *serialize_pte(add_contents()));
}

TEST(PteWriter, BlobMustWriteExactlyItsDeclaredSize) {
  TempDir dir("blob_size");
  const fs::path out = dir.path() / "model.pte";
  for (uint64_t declared : {uint64_t(4), uint64_t(16)}) {
    PteContents contents = add_contents();
    Blob blob = bytes_blob(std::vector<uint8_t>(8, 3));
    blob.size = declared;  // the function writes 8
    contents.constants.push_back(std::move(blob));
    auto result = write_pte(out.string(), std::move(contents));
    ASSERT_FALSE(result.is_ok()) << declared;
    EXPECT_EQ(result.status().code(), ErrorCode::kInternal);
    EXPECT_NE(result.status().message().find("constants[1]"), std::string::npos) << result.status().message();
    EXPECT_TRUE(dir.entries().empty());
  }
}

TEST(PteWriter, RejectsInconsistentContents) {
  {
    PteContents contents = add_contents();
    contents.program.execution_plan[0]->values[0] = tensor_value(efb::ScalarType::FLOAT, {2}, 2);
    auto r = serialize_pte(std::move(contents));
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              "value 0 data_buffer_idx out of range; expected <= 1 (constants blobs), got 2 (method 'forward')");
  }
  {
    PteContents contents = add_contents();
    contents.named.push_back({"k", bytes_blob({1})});
    contents.named.push_back({"k", bytes_blob({2})});
    EXPECT_EQ(serialize_pte(std::move(contents)).status().message(), "duplicate named data key 'k'");
  }
  {
    PteContents contents = add_contents();
    contents.constants.push_back(bytes_blob({1, 2}, "same"));
    contents.constants.push_back(bytes_blob({1, 2, 3}, "same"));
    EXPECT_EQ(serialize_pte(std::move(contents)).status().code(), ErrorCode::kInvalidArgument);
  }
  {
    PteContents contents = add_contents();
    contents.program.segments.push_back(std::make_unique<efb::DataSegmentT>());
    EXPECT_EQ(serialize_pte(std::move(contents)).status().code(), ErrorCode::kInvalidArgument);
  }
  {
    PteContents contents = add_contents();
    contents.program.execution_plan[0]->values.push_back(nullptr);
    EXPECT_EQ(serialize_pte(std::move(contents)).status().message(), "value 4 is null (method 'forward')");
  }
  {
    PteContents contents = add_contents();
    auto delegate = std::make_unique<efb::BackendDelegateT>();
    delegate->processed = std::make_unique<efb::BackendDelegateDataReferenceT>();
    delegate->processed->location = efb::DataLocation::SEGMENT;
    contents.program.execution_plan[0]->delegates.push_back(std::move(delegate));
    EXPECT_EQ(serialize_pte(std::move(contents)).status().code(), ErrorCode::kInvalidArgument);
  }
  {
    PteContents contents = add_contents();
    Blob blob;
    blob.size = 3;  // no write function
    contents.constants.push_back(std::move(blob));
    EXPECT_EQ(serialize_pte(std::move(contents)).status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(PteWriter, UnwritableDirectoryIsAnIoError) {
  auto result = write_pte("/nonexistent-dir-for-hf2pte/x.pte", add_contents());
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kIoError);
}

}  // namespace
}  // namespace hf2pte::pte
