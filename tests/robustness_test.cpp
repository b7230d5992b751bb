// The bad-input catalogue (issue 7): every byte hf2pte reads is untrusted.
// Each case feeds one kind of damage to the real CLI and asserts the contract:
// exit code 2, exactly one line "hf2pte: error: <what> (<where>)", and no
// output file (nor a temporary one) afterwards; an existing output is kept.
// Index-level damage is built with the flatbuffers object API from a real
// upstream file, the way src/runtime/test/hostile_test.cpp does it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "kernels/portable/kernels.h"
#include "pte/pte_file.h"
#include "pte/pte_writer.h"
#include "pte/program_generated.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

namespace fs = std::filesystem;
namespace efb = executorch_flatbuffer;

using test::CliResult;
CliResult run_cli(const std::string& args, const std::string& dir) { return test::run_cli(HF2PTE_CLI, args, dir); }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The error contract: `code` (2 = bad input), one line, the prefix, a
/// "(<where>)" at the end, and `needle` somewhere in it.
void expect_error(const CliResult& r, const std::string& needle = "", int code = 2) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("hf2pte: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.err.size() >= 2 && r.err[r.err.size() - 2] == ')') << "no (<where>): " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

/// Nothing but `keep` in `dir`: no output, no temporary file left behind.
void expect_only(const std::string& dir, std::set<std::string> keep) {
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    EXPECT_TRUE(keep.count(rel)) << "left behind: " << rel;
  }
}

std::string conformance(const std::string& name) { return test::repo_path("tests/data/conformance/" + name); }

const std::vector<std::string> kPteFiles = {"add.pte",        "dtypes.pte",    "dynamic.pte",   "multi.pte",
                                            "const_methods.pte", "quantized.pte", "lstm/lstm.pte"};

enum class Expect {
  kRefused,        ///< inspect and run both fail
  kRunRefused,     ///< run fails; inspect may pass (it reads no segment or payload)
  kMaybeBenign,    ///< each may pass (a flipped bit can land in padding or a value)
};

/// `inspect` and `run` (no inputs: the method is loaded, then refused) on `bytes`.
/// `needle`, when given, must appear in every error printed.
void expect_pte_refused(const std::vector<uint8_t>& bytes, const std::string& dir, const std::string& what,
                        Expect expect, const std::string& needle = "") {
  SCOPED_TRACE(what);
  write_bytes(dir + "/bad.pte", bytes);
  auto ins = run_cli("inspect " + dir + "/bad.pte", dir);
  if (!(expect != Expect::kRefused && ins.exit_code == 0)) expect_error(ins, needle);
  auto run = run_cli("run " + dir + "/bad.pte --output-dir " + dir + "/out", dir);
  if (!(expect == Expect::kMaybeBenign && run.exit_code == 0)) expect_error(run, needle);
  expect_only(dir, {"bad.pte"});
}

// --- .pte: truncation, bit flips, header damage --------------------------------

TEST(RobustnessPte, TruncatedAtEveryStructuralBoundary) {
  auto dir = test::temp_dir("t");
  int cases = 0;
  for (const auto& name : kPteFiles) {
    const auto bytes = read_bytes(conformance(name));
    auto file = pte::PteFile::from_bytes(bytes, name);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    std::set<uint64_t> cuts = {0, 4, 8, 12, 24, 40};
    const auto& h = (*file)->header();
    if (h.present) {
      cuts.insert(h.program_size);
      cuts.insert(h.program_size - 1);
      cuts.insert(h.segment_base_offset);
      for (const auto* seg : *(*file)->program().segments()) {
        cuts.insert(h.segment_base_offset + seg->offset());
        cuts.insert(h.segment_base_offset + seg->offset() + 1);
      }
      cuts.insert(h.segment_base_offset + h.segment_data_size - 1);
    } else {
      cuts.insert(bytes.size() / 2);
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 4; ++i) cuts.insert(rng() % bytes.size());
    for (uint64_t cut : cuts) {
      if (cut >= bytes.size()) continue;
      expect_pte_refused({bytes.begin(), bytes.begin() + ptrdiff_t(cut)}, dir, name + " cut at " + std::to_string(cut),
                         Expect::kRefused, "bad.pte");
      ++cases;
    }
  }
  EXPECT_GT(cases, 60);
}

TEST(RobustnessPte, RandomBitFlipsNeverCrash) {
  auto dir = test::temp_dir("t");
  std::mt19937 rng(2024);
  for (const auto& name : {std::string("add.pte"), std::string("quantized.pte"), std::string("const_methods.pte")}) {
    const auto good = read_bytes(conformance(name));
    for (int i = 0; i < 12; ++i) {
      auto bytes = good;
      for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] ^= uint8_t(1u << (rng() % 8));
      expect_pte_refused(bytes, dir, name + " flip " + std::to_string(i), Expect::kMaybeBenign);
    }
  }
}

void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

TEST(RobustnessPte, WrongIdentifierAndHeaderSizes) {
  auto dir = test::temp_dir("t");
  const auto good = read_bytes(conformance("add.pte"));
  auto b = good;
  std::memcpy(b.data() + 4, "ET11", 4);
  write_bytes(dir + "/bad.pte", b);
  expect_error(run_cli("inspect " + dir + "/bad.pte", dir), "expected file identifier ET12, got 'ET11'");
  b = good;
  std::memcpy(b.data() + 4, "XH00", 4);
  expect_pte_refused(b, dir, "identifier XH00", Expect::kRefused, "expected file identifier ET12, got 'XH00'");
  b = good;
  std::memcpy(b.data() + 8, "eh01", 4);  // no eh00: segments cannot be found
  expect_pte_refused(b, dir, "eh01", Expect::kRunRefused);
  for (size_t at : {16, 24, 32}) {
    for (uint64_t v : {uint64_t(good.size() + 1), uint64_t(1) << 40, UINT64_MAX}) {
      b = good;
      put_u64(b, at, v);
      expect_pte_refused(b, dir, "eh00 field at " + std::to_string(at) + " = " + std::to_string(v), Expect::kRefused,
                         "eh00");
    }
  }
}

// --- .pte: out-of-range indices, built with the object API ----------------------

/// Rewrites a conformance file after `mutate`: delegate payloads and named data
/// are carried over as blobs so the writer lays the segments out again.
std::vector<uint8_t> rewrite(const std::string& name, const std::function<void(efb::ProgramT&)>& mutate) {
  auto file = pte::PteFile::from_bytes(read_bytes(conformance(name)), name);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return {};
  const auto& f = **file;
  pte::PteContents c;
  f.program().UnPackTo(&c.program);
  for (auto& plan : c.program.execution_plan) {
    for (auto& d : plan->delegates) {
      if (!d->processed || d->processed->location != efb::DataLocation::SEGMENT) continue;
      auto seg = f.segment(d->processed->index);
      EXPECT_TRUE(seg.is_ok());
      d->processed->index = uint32_t(c.delegates.size());
      c.delegates.push_back(pte::Blob{});
      auto& blob = c.delegates.back();
      std::vector<uint8_t> copy(seg->begin(), seg->end());
      blob.size = copy.size();
      blob.write = [copy](pte::ByteSink& s) { return s.write(copy.data(), copy.size()); };
    }
  }
  for (const auto& nd : c.program.named_data) {
    auto data = f.named_data(nd->key);
    EXPECT_TRUE(data.is_ok());
    std::vector<uint8_t> copy(data->begin(), data->end());
    pte::NamedBlob nb;
    nb.key = nd->key;
    nb.blob.size = copy.size();
    nb.blob.write = [copy](pte::ByteSink& s) { return s.write(copy.data(), copy.size()); };
    c.named.push_back(std::move(nb));
  }
  EXPECT_FALSE(c.program.constant_segment && !c.program.constant_segment->offsets.empty() &&
               c.program.constant_segment->offsets.size() > 1)
      << name << " has constants; this helper does not carry them";
  c.program.segments.clear();
  c.program.constant_segment.reset();
  c.program.mutable_data_segments.clear();
  c.program.named_data.clear();
  mutate(c.program);
  auto bytes = pte::serialize_pte(std::move(c));
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? *bytes : std::vector<uint8_t>{};
}

void expect_mutation_refused(const std::string& name, const std::function<void(efb::ProgramT&)>& mutate,
                             const std::string& needle) {
  auto dir = test::temp_dir("t");
  auto bytes = rewrite(name, mutate);
  ASSERT_FALSE(bytes.empty());
  write_bytes(dir + "/bad.pte", bytes);
  auto r = run_cli("run " + dir + "/bad.pte --output-dir " + dir + "/out", dir);
  expect_error(r, needle);
  expect_only(dir, {"bad.pte"});
}

efb::ExecutionPlanT& forward(efb::ProgramT& p) { return *p.execution_plan[0]; }

/// The unchanged rewrite of `name`, written to dir/ok.pte.
std::string write_ok(const std::string& dir, const std::string& name) {
  write_bytes(dir + "/ok.pte", rewrite(name, [](efb::ProgramT&) {}));
  return dir + "/ok.pte";
}

TEST(RobustnessPte, RewrittenFileStillRuns) {
  // The helper itself is faithful: add.pte rewritten unchanged still loads.
  auto dir = test::temp_dir("t");
  write_bytes(dir + "/ok.pte", rewrite("add.pte", [](efb::ProgramT&) {}));
  EXPECT_EQ(run_cli("inspect " + dir + "/ok.pte", dir).exit_code, 0);
}

TEST(RobustnessPte, OutOfRangeIndices) {
  expect_mutation_refused("dtypes.pte", [](efb::ProgramT& p) { forward(p).inputs[0] = 999; }, "999");
  expect_mutation_refused("dtypes.pte", [](efb::ProgramT& p) { forward(p).outputs[0] = -2; }, "-2");
  expect_mutation_refused(
      "dtypes.pte",
      [](efb::ProgramT& p) { forward(p).chains[0]->instructions[1]->instr_args.AsKernelCall()->args[0] = 1 << 20; },
      "refers to value 1048576");
  expect_mutation_refused(
      "dtypes.pte",
      [](efb::ProgramT& p) { forward(p).chains[0]->instructions[1]->instr_args.AsKernelCall()->op_index = 77; },
      "op_index 77");
  expect_mutation_refused("dtypes.pte", [](efb::ProgramT& p) { forward(p).operators[0]->name = "aten::nope"; },
                          "aten::nope");
  // Delegate index of a DelegateCall, delegate data (inline index), backend id.
  auto delegate_call = [](efb::ProgramT& p) -> efb::DelegateCallT* {
    for (auto& ins : forward(p).chains[0]->instructions) {
      if (auto* d = ins->instr_args.AsDelegateCall()) return d;
    }
    return nullptr;
  };
  expect_mutation_refused(
      "add.pte",
      [&](efb::ProgramT& p) {
        ASSERT_NE(delegate_call(p), nullptr);
        delegate_call(p)->delegate_index = 9;
      },
      "9");
  expect_mutation_refused(
      "add.pte",
      [](efb::ProgramT& p) {
        forward(p).delegates[0]->processed->location = efb::DataLocation::INLINE;
        forward(p).delegates[0]->processed->index = 5;
      },
      "inline delegate data 5 out of range");
  expect_mutation_refused("add.pte", [](efb::ProgramT& p) { forward(p).delegates[0]->id = "NoSuchBackend"; },
                          "NoSuchBackend");
  // Named data the payload refers to is gone.
  expect_mutation_refused("quantized.pte", [](efb::ProgramT& p) { p.named_data.clear(); }, "");
}

TEST(RobustnessPte, TensorSizesOverflowOrExceedArena) {
  auto tensor_value = [](efb::ProgramT& p) -> efb::TensorT* {
    for (auto& v : forward(p).values) {
      if (auto* t = v->val.AsTensor(); t && t->allocation_info) return t;
    }
    return nullptr;
  };
  expect_mutation_refused(
      "dtypes.pte",
      [&](efb::ProgramT& p) {
        auto* t = tensor_value(p);
        ASSERT_NE(t, nullptr);
        t->sizes = {2147483647, 2147483647, 2147483647};
        t->dim_order = {0, 1, 2};
      },
      "overflows");
  expect_mutation_refused(
      "dtypes.pte",
      [&](efb::ProgramT& p) {
        auto* t = tensor_value(p);
        ASSERT_NE(t, nullptr);
        t->sizes = {4096};
      },
      "exceeds planned buffer");
  // Planned memory above the cap (docs/decisions.md, "Planned memory cap").
  expect_mutation_refused("dtypes.pte", [](efb::ProgramT& p) { forward(p).non_const_buffer_sizes.back() = int64_t(1) << 40; },
                          "planned buffers need more than");
}

/// The process's virtual size (VmSize in /proc/self/status), in bytes.
uint64_t virtual_size() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

TEST(RobustnessPte, ArenaSizeIsJustifiedByItsTensors) {
  // A file may claim a planned buffer far larger than the tensors placed in
  // it reach. Loading must cost only what the tensors justify: the claimed
  // 8 GiB (under the 16 GiB cap, so not refused) is never mapped.
  auto dir = test::temp_dir("t");
  write_bytes(dir + "/big.pte",
              rewrite("dtypes.pte", [](efb::ProgramT& p) { forward(p).non_const_buffer_sizes.back() = int64_t(8) << 30; }));
  auto program = rt::Program::load(dir + "/big.pte");
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  const uint64_t before = virtual_size();
  ASSERT_GT(before, 0u);
  auto method = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(method.is_ok()) << method.status().message();
  const uint64_t after = virtual_size();
  EXPECT_LT(after, before + (uint64_t(64) << 20)) << "loading mapped " << (after - before) << " bytes";
}

/// A one-element .npy file (`descr` '<f4' or '<i8') holding `value`.
void write_npy(const std::string& path, const std::string& descr, double value) {
  std::string hdr = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }";
  hdr.resize(128 - 10 - 1, ' ');
  hdr += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(hdr.size());
  out += '\0';
  out += hdr;
  if (descr == "<f4") {
    const float f = float(value);
    out.append(reinterpret_cast<const char*>(&f), 4);
  } else {
    const int64_t i = int64_t(value);
    out.append(reinterpret_cast<const char*>(&i), 8);
  }
  std::ofstream(path, std::ios::binary) << out;
}

TEST(RobustnessPte, JumpFalseLoopHitsInstructionBudget) {
  // forward() of dtypes.pte gets a JumpFalse on a constant false back to
  // instruction 0: it never ends unless the budget stops it.
  auto dir = test::temp_dir("t");
  auto bytes = rewrite("dtypes.pte", [](efb::ProgramT& p) {
    auto& plan = forward(p);
    auto cond = std::make_unique<efb::EValueT>();
    efb::BoolT b;
    b.bool_val = false;
    cond->val.Set(b);
    plan.values.push_back(std::move(cond));
    efb::JumpFalseCallT j;
    j.cond_value_index = int32_t(plan.values.size() - 1);
    j.destination_instruction = 0;
    auto ins = std::make_unique<efb::InstructionT>();
    ins->instr_args.Set(j);
    plan.chains[0]->instructions.push_back(std::move(ins));
  });
  ASSERT_FALSE(bytes.empty());
  write_bytes(dir + "/loop.pte", bytes);
  write_npy(dir + "/a.npy", "<i8", 1);
  write_npy(dir + "/b.npy", "<f4", 1);
  const std::string io = " --input " + dir + "/a.npy --input " + dir + "/b.npy --output-dir " + dir + "/out";
  ASSERT_EQ(run_cli("run " + write_ok(dir, "dtypes.pte") + io, dir).exit_code, 0);
  fs::remove_all(dir + "/out");
  // A smaller budget than the default (10M, the same loop) keeps this fast
  // under the sanitizers; the default is the same code with another number.
  auto r = run_cli("run " + dir + "/loop.pte" + io + " --max-instructions 100000", dir);
  expect_error(r, "instruction budget of 100000 exceeded");
  expect_error(run_cli("run " + dir + "/loop.pte" + io + " --max-instructions 0", dir),
               "--max-instructions must be at least 1");
  expect_only(dir, {"loop.pte", "ok.pte", "a.npy", "b.npy"});
}

// --- XNNPACK payloads ----------------------------------------------------------

std::vector<uint8_t> with_payload_edit(const std::string& name, const std::function<void(std::vector<uint8_t>&)>& edit) {
  auto bytes = read_bytes(conformance(name));
  auto file = pte::PteFile::from_bytes(bytes, name);
  EXPECT_TRUE(file.is_ok());
  const auto* ref = (*file)->program().execution_plan()->Get(0)->delegates()->Get(0)->processed();
  auto payload = (*file)->delegate_data(*ref);
  EXPECT_TRUE(payload.is_ok());
  const size_t at = size_t(payload->data() - (*file)->file_bytes().data());
  std::vector<uint8_t> p(payload->begin(), payload->end());
  edit(p);
  std::copy(p.begin(), p.end(), bytes.begin() + ptrdiff_t(at));
  return bytes;
}

TEST(RobustnessXnnpack, BadPayloads) {
  auto dir = test::temp_dir("t");
  // Header magic, header ranges, then random damage inside the XNNGraph and constants.
  expect_pte_refused(with_payload_edit("add.pte", [](auto& p) { std::memcpy(p.data() + 4, "XH99", 4); }), dir,
                     "XH99", Expect::kRefused, "delegate 0");
  expect_pte_refused(with_payload_edit("add.pte", [](auto& p) { std::memset(p.data() + 8, 0xff, 4); }), dir,
                     "flatbuffer offset", Expect::kRefused, "delegate 0");
  expect_pte_refused(with_payload_edit("add.pte", [](auto& p) { std::memset(p.data() + 12, 0xff, 4); }), dir,
                     "flatbuffer size", Expect::kRefused, "delegate 0");
  expect_pte_refused(with_payload_edit("quantized.pte", [](auto& p) { std::memset(p.data() + 16, 0x7f, 4); }), dir,
                     "constant offset", Expect::kRefused, "delegate 0");
  expect_pte_refused(with_payload_edit("quantized.pte", [](auto& p) { std::memset(p.data() + 20, 0x7f, 8); }), dir,
                     "constant size", Expect::kRefused, "delegate 0");
  std::mt19937 rng(99);
  for (const auto& name : {std::string("add.pte"), std::string("quantized.pte"), std::string("dynamic.pte")}) {
    for (int i = 0; i < 10; ++i) {
      expect_pte_refused(with_payload_edit(name,
                                           [&](auto& p) {
                                             for (int k = 0; k < 2; ++k) p[32 + rng() % (p.size() - 32)] ^= uint8_t(1u << (rng() % 8));
                                           }),
                         dir, name + " payload flip " + std::to_string(i), Expect::kMaybeBenign);
    }
  }
}

// --- checkpoints: safetensors ---------------------------------------------------

std::string copy_fixture(const std::string& name, const std::string& dir) {
  auto dst = dir + "/" + name;
  fs::copy(test::repo_path("tests/data/fixtures/" + name), dst, fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(dst)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dst;
}

/// Export of a damaged copy of llama-mha must fail with exit 2 naming
/// `needle` and leave nothing but the model folder behind.
void expect_export_refused(const std::function<void(const std::string& model)>& damage, const std::string& needle) {
  auto dir = test::temp_dir("t");
  auto model = copy_fixture("llama-mha", dir);
  damage(model);
  auto r = run_cli("export " + model + " -o " + dir + "/m.pte --quiet", dir);
  expect_error(r, needle);
  EXPECT_FALSE(fs::exists(dir + "/m.pte"));
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "llama-mha") << e.path();
}

/// Rewrites the safetensors header JSON of `model` with `edit` (text level, so
/// duplicate keys are possible); data bytes are kept.
void edit_safetensors(const std::string& model, const std::function<void(std::string&)>& edit) {
  auto bytes = read_bytes(model + "/model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + ptrdiff_t(n));
  edit(header);
  const size_t old_size = size_t(n);
  // Keep the data where it was: pad with spaces (valid JSON whitespace) or grow.
  if (header.size() < old_size) header.resize(old_size, ' ');
  const uint64_t m = header.size();
  std::string out(reinterpret_cast<const char*>(&m), 8);
  out += header;
  out.append(reinterpret_cast<const char*>(bytes.data()) + 8 + old_size, bytes.size() - 8 - old_size);
  std::ofstream(model + "/model.safetensors", std::ios::binary) << out;
}

/// Edits the parsed header (re-serialised; offsets are relative to the data
/// start, so the JSON length does not matter).
void edit_safetensors_json(const std::string& model, const std::function<void(nlohmann::ordered_json&)>& edit) {
  edit_safetensors(model, [&](std::string& h) {
    auto j = nlohmann::ordered_json::parse(h);
    edit(j);
    h = j.dump();
  });
}

std::string first_tensor(const nlohmann::ordered_json& j, int skip = 0) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "__metadata__" && skip-- == 0) return it.key();
  }
  return "";
}

TEST(RobustnessCheckpoint, Safetensors) {
  expect_export_refused(
      [](const std::string& m) {
        auto b = read_bytes(m + "/model.safetensors");
        const uint64_t n = b.size() + 100;
        std::memcpy(b.data(), &n, 8);
        write_bytes(m + "/model.safetensors", b);
      },
      "model.safetensors");
  expect_export_refused([](const std::string& m) { edit_safetensors(m, [](std::string& h) { h[0] = '['; h[h.size() / 2] = '\x01'; }); },
                        "model.safetensors");
  expect_export_refused(
      [](const std::string& m) {
        edit_safetensors_json(m, [](auto& j) { j[first_tensor(j, 1)]["data_offsets"] = j[first_tensor(j)]["data_offsets"]; });
      },
      "model.safetensors");
  expect_export_refused(
      [](const std::string& m) {
        edit_safetensors_json(m, [](auto& j) {
          auto& off = j[first_tensor(j, 1)]["data_offsets"];
          off[0] = off[0].template get<uint64_t>() + 1;
          off[1] = off[1].template get<uint64_t>() + 1;
        });
      },
      "model.safetensors");
  expect_export_refused(
      [](const std::string& m) {
        edit_safetensors_json(m, [](auto& j) {
          auto& shape = j[first_tensor(j)]["shape"];
          shape[0] = shape[0].template get<int64_t>() + 1;
        });
      },
      "model.safetensors");
  expect_export_refused(
      [](const std::string& m) { edit_safetensors_json(m, [](auto& j) { j[first_tensor(j)]["dtype"] = "F99"; }); },
      "F99");
  expect_export_refused(
      [](const std::string& m) {
        edit_safetensors_json(m, [](auto& j) { j[first_tensor(j)]["data_offsets"] = {0, uint64_t(1) << 62}; });
      },
      "model.safetensors");
  expect_export_refused(
      [](const std::string& m) {
        edit_safetensors(m, [](std::string& h) {
          auto j = nlohmann::ordered_json::parse(h);
          const std::string a = first_tensor(j), b = first_tensor(j, 1);
          const auto p = h.find("\"" + b + "\"");
          h.replace(p, b.size() + 2, "\"" + a + "\"");  // two entries named a
        });
      },
      "model.safetensors");
}

// --- checkpoints: config.json -----------------------------------------------------

void rewrite_config(const std::string& model, const std::string& from, const std::string& to) {
  std::string s = slurp(model + "/config.json");
  auto p = s.find(from);
  ASSERT_NE(p, std::string::npos) << from;
  s.replace(p, from.size(), to);
  std::ofstream(model + "/config.json") << s;
}

void expect_config_refused(const std::string& from, const std::string& to, const std::string& needle) {
  SCOPED_TRACE(to);
  expect_export_refused([&](const std::string& m) { rewrite_config(m, from, to); }, needle);
}

TEST(RobustnessCheckpoint, ConfigJson) {
  expect_config_refused("\"hidden_size\": 64,", "", "hidden_size");
  expect_config_refused("\"num_hidden_layers\": 2,", "", "num_hidden_layers");
  expect_config_refused("\"hidden_size\": 64", "\"hidden_size\": \"64\"", "hidden_size");
  expect_config_refused("\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": [1]", "rms_norm_eps");
  expect_config_refused("\"hidden_size\": 64", "\"hidden_size\": 0", "hidden_size");
  expect_config_refused("\"num_hidden_layers\": 2", "\"num_hidden_layers\": -1", "num_hidden_layers");
  expect_config_refused("\"vocab_size\": 320", "\"vocab_size\": 0", "vocab_size");
  expect_config_refused("\"num_attention_heads\": 4", "\"num_attention_heads\": -4", "num_attention_heads");
  expect_config_refused("\"hidden_size\": 64", "\"hidden_size\": 1e300", "hidden_size");
  expect_config_refused("\"num_key_value_heads\": 4", "\"num_key_value_heads\": 3", "num_key_value_heads");
  expect_export_refused(
      [](const std::string& m) {
        rewrite_config(m, "\"head_dim\": 16,", "");
        rewrite_config(m, "\"num_attention_heads\": 4", "\"num_attention_heads\": 5");
      },
      "");  // 64 is not divisible by 5 heads
  expect_config_refused("\"model_type\": \"llama\"", "\"model_type\": \"rwkv\"", "supported: llama");
  expect_config_refused("\"vocab_size\": 320", "\"vocab_size\": 300", "expected [300, 64], got [320, 64]");
  expect_export_refused([](const std::string& m) { std::ofstream(m + "/config.json") << "{\"model_type\": "; },
                        "config.json");
  expect_export_refused([](const std::string& m) { fs::remove(m + "/config.json"); }, "config.json");
  expect_export_refused([](const std::string& m) { fs::remove(m + "/model.safetensors"); }, "safetensors");
}

// --- tokenizer.json ----------------------------------------------------------------

void expect_tokenizer_refused(const std::string& json, const std::string& needle) {
  SCOPED_TRACE(json);
  auto dir = test::temp_dir("t");
  fs::create_directories(dir + "/tok");
  std::ofstream(dir + "/tok/tokenizer.json") << json;
  auto r = run_cli("tokenize --tokenizer " + dir + "/tok --text hello", dir);
  expect_error(r, needle);
}

TEST(RobustnessTokenizer, TokenizerJson) {
  const std::string vocab = R"("vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "he": 4})";
  expect_tokenizer_refused(R"({"model": {"type": "Mystery"}})", "Mystery");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", )" + vocab + R"(, "merges": ["h"]}})", "malformed merge #0");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", )" + vocab + R"(, "merges": [["h", "e", "x"]]}})", "malformed merge #0");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", )" + vocab + R"(, "merges": [7]}})", "malformed merge #0 7");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", )" + vocab + R"(, "merges": ["h q"]}})", "a token is not in the vocabulary");
  expect_tokenizer_refused(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated",
      "invert": false}, "model": {"type": "BPE", )" + vocab + R"(, "merges": []}})",
                           "regex '(a' does not compile");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", )" + vocab, "tokenizer.json");
  expect_tokenizer_refused(R"({"model": 5})", "model");
  expect_tokenizer_refused(R"({"model": {"type": "BPE", "vocab": {"h": -1}, "merges": []}})", "is not a non-negative id");
  expect_tokenizer_refused("", "tokenizer.json");
}

// --- CLI: files and outputs ---------------------------------------------------------

TEST(RobustnessCli, MissingFiles) {
  auto dir = test::temp_dir("t");
  expect_error(run_cli("export " + dir + "/nope -o " + dir + "/m.pte", dir), "nope");
  expect_error(run_cli("inspect " + dir + "/nope.pte", dir), "nope.pte");
  expect_error(run_cli("run " + dir + "/nope.pte --output-dir " + dir + "/out", dir), "nope.pte");
  expect_error(run_cli("tokenize --tokenizer " + dir + "/nope --text hi", dir), "nope");
  expect_error(run_cli("run " + conformance("add.pte") + " --input " + dir + "/x.npy --input " + dir +
                           "/y.npy --output-dir " + dir + "/out",
                       dir),
               "x.npy");
  expect_only(dir, {});
}

TEST(RobustnessCli, OutputDirectoryMissingOrNotADirectory) {
  auto dir = test::temp_dir("t");
  const auto model = test::repo_path("tests/data/fixtures/llama-mha");
  expect_error(run_cli("export " + model + " -o " + dir + "/no/such/dir/m.pte --quiet", dir), "m.pte");
  std::ofstream(dir + "/file") << "x";
  expect_error(run_cli("export " + model + " -o " + dir + "/file/m.pte --quiet", dir), "m.pte");
  expect_only(dir, {"file"});
  // An existing output is kept intact when the export fails.
  std::ofstream(dir + "/m.pte") << "previous";
  auto bad = copy_fixture("llama-mha", dir);
  rewrite_config(bad, "\"hidden_size\": 64", "\"hidden_size\": 65");
  expect_error(run_cli("export " + bad + " -o " + dir + "/m.pte --quiet", dir));
  EXPECT_EQ(slurp(dir + "/m.pte"), "previous");
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(RobustnessCli, InterruptedExportLeavesNoFile) {
  // A real SIGINT at several points of a 71 MB export: the process either
  // stops through its handler (exit 130, as a shell reports SIGINT) or, when
  // the signal lands before the handler is installed, dies of it. Either way
  // no output and no temporary file remain, and an existing output is kept.
  auto dir = test::temp_dir("t");
  const std::string model = dir + "/bench-small";
  ASSERT_EQ(std::system((std::string(HF2PTE_MAKE_CHECKPOINT) + " bench-small " + model + " >/dev/null").c_str()), 0);
  std::ofstream(dir + "/m.pte") << "previous";
  int handled = 0;
  for (int delay_ms : {0, 30, 100, 200, 400}) {
    SCOPED_TRACE("SIGINT after " + std::to_string(delay_ms) + " ms");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(HF2PTE_CLI, HF2PTE_CLI, "export", model.c_str(), "-o", (dir + "/m.pte").c_str(), "--quiet",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    usleep(useconds_t(delay_ms) * 1000);
    kill(pid, SIGINT);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {  // finished before the signal
      std::ofstream(dir + "/m.pte") << "previous";
      continue;
    }
    EXPECT_TRUE((WIFEXITED(status) && WEXITSTATUS(status) == 130) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT))
        << "status " << status;
    handled += WIFEXITED(status) && WEXITSTATUS(status) == 130;
    EXPECT_EQ(slurp(dir + "/m.pte"), "previous");
    for (auto& e : fs::directory_iterator(dir)) {
      const auto name = e.path().filename().string();
      EXPECT_TRUE(name == "m.pte" || name == "bench-small") << "left behind: " << name;
    }
  }
  EXPECT_GT(handled, 0) << "no SIGINT reached the export mid-way";
}

TEST(RobustnessCli, OutputDirectoryNotWritable) {
  // Root ignores permission bits, so the unwritable directory is /sys (sysfs
  // refuses new files even for root); as another user, a 0555 directory.
  auto dir = test::temp_dir("t");
  const auto model = test::repo_path("tests/data/fixtures/llama-mha");
  std::string target;
  if (geteuid() == 0) {
    if (access("/sys", F_OK) != 0) GTEST_SKIP() << "no /sys and running as root: no unwritable directory to try";
    target = "/sys";
  } else {
    target = dir + "/ro";
    fs::create_directory(target);
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  const std::string out = target + "/hf2pte-robustness-m.pte";
  expect_error(run_cli("export " + model + " -o " + out + " --quiet", dir), "hf2pte-robustness-m.pte");
  EXPECT_FALSE(fs::exists(out));
  for (auto& e : fs::directory_iterator(target)) {
    EXPECT_EQ(e.path().filename().string().find("hf2pte-robustness"), std::string::npos) << e.path();
  }
  if (geteuid() != 0) fs::permissions(target, fs::perms::owner_all);
}

}  // namespace
}  // namespace hf2pte
