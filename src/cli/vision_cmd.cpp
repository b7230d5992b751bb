// hf2pte classify / preprocess: an image file through the program's own
// preprocessing settings (constant method get_preprocessor_config, or a
// processor folder) to labels, or to the exact pixel_values tensor.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "backends/builtin/builtin.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "checkpoint/json_fields.h"
#include "checkpoint/npy.h"
#include "cli/commands.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "preprocess/image_processor.h"

namespace hf2pte::cli {

Result<std::optional<rt::EValue>> constant_output(const rt::Program& p, const char* name) {
  auto names = p.method_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return std::optional<rt::EValue>{};
  HF2PTE_ASSIGN_OR_RETURN(auto m, p.load_method(name, portable_registry()));
  HF2PTE_RETURN_IF_ERROR(m->execute());
  if (m->num_outputs() == 0) return std::optional<rt::EValue>{};
  return std::optional<rt::EValue>{m->output(0)};
}

Result<bool> is_image_classifier(const rt::Program& p) {
  HF2PTE_ASSIGN_OR_RETURN(auto v, constant_output(p, "is_image_classifier"));
  return v && v->is_bool() && v->i != 0;
}

Result<nlohmann::json> constant_json(const rt::Program& p, const char* name, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(auto v, constant_output(p, name));
  if (!v || v->tag != rt::Tag::kString) return nlohmann::json();
  return parse_json(std::string(v->s), where + ": " + name);
}

Result<ProcessorSource> processor_config(const std::string& path, const rt::Program* program) {
  if (std::filesystem::is_directory(path)) {
    const std::string file = path + "/preprocessor_config.json";
    HF2PTE_ASSIGN_OR_RETURN(auto j, read_json_object_file(file));
    return ProcessorSource{std::move(j), file};
  }
  HF2PTE_CHECK_OR_RETURN(program != nullptr, kInvalidArgument,
                         "--processor must be a folder with preprocessor_config.json or a .pte ({})", path);
  HF2PTE_ASSIGN_OR_RETURN(auto j, constant_json(*program, "get_preprocessor_config", path));
  return ProcessorSource{std::move(j), path + ": get_preprocessor_config"};
}

namespace {

/// The processor: a folder's preprocessor_config.json, or the one stored in a
/// program, or (none stored) ViTImageProcessor's defaults at the model's image size.
Result<pre::ImageProcessorConfig> processor_for(const std::string& path, const rt::Program* program,
                                                std::vector<std::string>* warnings) {
  HF2PTE_ASSIGN_OR_RETURN(ProcessorSource src, processor_config(path, program));
  if (!src.config.is_null()) return pre::parse_image_processor(src.config, src.where);
  HF2PTE_ASSIGN_OR_RETURN(auto size, constant_output(*program, "get_image_size"));
  HF2PTE_CHECK_OR_RETURN(size && size->is_int(), kInvalidArgument,
                         "the program is not an image model (no get_image_size) ({})", path);
  warnings->push_back(fmt::format("the program stores no preprocessor_config.json; using ViTImageProcessor's defaults "
                                  "(bilinear resize to {0}x{0}, mean 0.5, std 0.5)",
                                  size->i));
  pre::ImageProcessorConfig c;
  c.height = c.width = size->i;
  return c;
}

}  // namespace

CLI::App* add_classify_command(CLI::App& app, ClassifyArgs& a) {
  auto* c = app.add_subcommand("classify", "label an image with an image-classification program");
  c->add_option("pte", a.pte, ".pte file (image classifier)")->required();
  c->add_option("--image", a.image, "PNG or JPEG file")->required();
  c->add_option("--top-k", a.top_k, "labels to print (default 5)");
  c->add_option("--processor", a.processor, "folder with preprocessor_config.json (default: the one stored in the program)");
  c->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  c->add_flag("--json", a.json, "machine-readable output");
  return c;
}

CLI::App* add_preprocess_command(CLI::App& app, PreprocessArgs& a) {
  auto* c = app.add_subcommand("preprocess", "write the tensor a model receives for an input file (pixel_values, input_features)");
  auto* image = c->add_option("--image", a.image, "PNG or JPEG file");
  auto* audio = c->add_option("--audio", a.audio, "16 kHz WAV file");
  image->excludes(audio);
  audio->excludes(image);
  c->add_option("--processor", a.processor, "folder with preprocessor_config.json, or a .pte that stores one")->required();
  c->add_option("-o,--output", a.output, "output .npy")->required();
  return c;
}

int run_preprocess(const PreprocessArgs& a) {
  std::shared_ptr<rt::Program> program;
  if (!std::filesystem::is_directory(a.processor)) {
    auto p = rt::Program::load(a.processor);
    if (!p) return fail(p.status());
    program = *p;
  }
  if (a.image.empty() == a.audio.empty()) {
    return fail(make_error(ErrorCode::kInvalidArgument, "preprocess needs --image F or --audio F (command line)"));
  }
  if (!a.audio.empty()) {
    auto fe = feature_extractor_for(a.processor, program.get());
    if (!fe) return fail(fe.status());
    auto wav = pre::read_wav(a.audio);
    if (!wav) return fail(wav.status());
    auto features = pre::log_mel_features(*wav, *fe, a.audio);
    if (!features) return fail(features.status());
    if (auto st = write_npy(a.output, *features); !st) return fail(st);
    std::fprintf(stderr, "hf2pte: wrote %s: input_features f32[1, %lld, %lld]\n", a.output.c_str(),
                 static_cast<long long>(features->sizes[1]), static_cast<long long>(features->sizes[2]));
    return 0;
  }
  std::vector<std::string> warnings;
  auto cfg = processor_for(a.processor, program.get(), &warnings);
  if (!cfg) return fail(cfg.status());
  for (const auto& w : warnings) std::fprintf(stderr, "hf2pte: warning: %s\n", w.c_str());
  auto image = pre::read_image(a.image);
  if (!image) return fail(image.status());
  auto px = pre::pixel_values(*image, *cfg);
  if (!px) return fail(px.status());
  if (auto st = write_npy(a.output, *px); !st) return fail(st);
  std::fprintf(stderr, "hf2pte: wrote %s: pixel_values f32[1, 3, %lld, %lld]\n", a.output.c_str(),
               static_cast<long long>(px->sizes[2]), static_cast<long long>(px->sizes[3]));
  return 0;
}

int run_classify(const ClassifyArgs& a) {
  if (a.top_k < 1) return fail(make_error(ErrorCode::kInvalidArgument, "--top-k must be at least 1; got {} (command line)", a.top_k));
  if (auto st = backends::register_builtin_backends(); !st) return fail(st);
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  auto program = rt::Program::load(a.pte);
  if (!program) return fail(program.status());
  auto is_image = is_image_classifier(**program);
  if (!is_image) return fail(is_image.status());
  if (!*is_image) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "this program is not an image classifier (no is_image_classifier); classify runs programs "
                           "exported from *ForImageClassification checkpoints ({})",
                           a.pte));
  }
  std::vector<std::string> warnings;
  auto cfg = processor_for(a.processor.empty() ? a.pte : a.processor, program->get(), &warnings);
  if (!cfg) return fail(cfg.status());
  auto labels_json = constant_json(**program, "get_id2label", a.pte);
  if (!labels_json) return fail(labels_json.status());
  std::vector<std::string> labels;
  for (const auto& l : *labels_json) labels.push_back(l.is_string() ? l.get<std::string>() : l.dump());

  auto image = pre::read_image(a.image);
  if (!image) return fail(image.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto px = pre::pixel_values(*image, *cfg);
  if (!px) return fail(px.status());
  auto method = (*program)->load_method("forward", optimized_registry());
  if (!method) return fail(method.status());
  const auto meta = (*method)->input_meta(0);
  // Static programs (ViT) take exactly their size; fully convolutional ones (ResNet) up to a bound.
  bool fits = meta.sizes.size() == 4 && meta.sizes[0] == 1 && meta.sizes[1] == px->sizes[1];
  for (size_t d = 2; fits && d < 4; ++d) fits = meta.dynamism != rt::ShapeDynamism::kStatic ? px->sizes[d] <= meta.sizes[d] : px->sizes[d] == meta.sizes[d];
  if (!fits) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "the processor makes pixel_values [{}], the program takes [{}]; check --processor ({})",
                           fmt::join(px->sizes, ", "), fmt::join(meta.sizes, ", "), a.image));
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (auto st = (*method)->set_input(0, *px); !st) return fail(st);
  if (auto st = (*method)->execute(); !st) return fail(st);
  const auto t2 = std::chrono::steady_clock::now();
  auto logits = (*method)->output_tensor(0);
  if (!logits) return fail(logits.status());
  const int64_t n = logits->numel();
  const float* z = logits->data<float>();
  const float zmax = *std::max_element(z, z + n);
  std::vector<double> p(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[size_t(i)] = std::exp(double(z[i]) - double(zmax));
  for (double& v : p) v /= sum;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min<int64_t>(a.top_k, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t x, int64_t y) { return p[size_t(x)] > p[size_t(y)]; });
  auto name = [&](int64_t i) { return i < int64_t(labels.size()) ? labels[size_t(i)] : fmt::format("LABEL_{}", i); };
  const double pre_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double run_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  for (const auto& w : warnings) std::fprintf(stderr, "hf2pte: warning: %s\n", w.c_str());
  if (a.json) {
    nlohmann::ordered_json out;
    out["image"] = a.image;
    out["labels"] = nlohmann::ordered_json::array();
    for (int64_t r = 0; r < k; ++r) {
      const int64_t i = order[size_t(r)];
      out["labels"].push_back({{"id", i}, {"label", name(i)}, {"probability", p[size_t(i)]}});
    }
    out["preprocess_ms"] = pre_ms;
    out["forward_ms"] = run_ms;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (int64_t r = 0; r < k; ++r) {
    const int64_t i = order[size_t(r)];
    std::printf("%.4f  %s\n", p[size_t(i)], name(i).c_str());
  }
  std::fprintf(stderr, "preprocess %.2f ms, forward %.2f ms\n", pre_ms, run_ms);
  return 0;
}

}  // namespace hf2pte::cli
