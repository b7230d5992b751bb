// Hugging Face image processors in C++: preprocessor_config.json -> the
// pixel_values the model receives, in transformers' order and arithmetic
// (convert to RGB, resize with PIL's filter, center crop, rescale in float64
// then float32, normalize in float32). ViTImageProcessor (size height/width)
// and ConvNextImageProcessor (shortest_edge with crop_pct) are the two forms.
#pragma once

#include <array>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/host_tensor.h"
#include "core/status.h"
#include "preprocess/image.h"
#include "preprocess/resample.h"

namespace hf2pte::pre {

struct ImageProcessorConfig {
  std::string type = "ViTImageProcessor";  ///< image_processor_type (informative)
  bool do_resize = true;
  /// size {"height", "width"}: resize to exactly that; {"shortest_edge"}: the
  /// short side to it (with crop_pct: to shortest_edge / crop_pct, then crop).
  std::optional<int64_t> height, width, shortest_edge;
  std::optional<double> crop_pct;
  Resample resample = Resample::kBilinear;
  bool do_center_crop = false;
  int64_t crop_height = 0, crop_width = 0;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
};

/// Parses preprocessor_config.json's content; `where` names it in errors.
Result<ImageProcessorConfig> parse_image_processor(const nlohmann::json& j, const std::string& where);

/// The resized (and cropped) 8-bit image, before rescaling: what the fixtures call resized_uint8.
Result<Rgb8Image> resize_for_model(const Rgb8Image& image, const ImageProcessorConfig& c);

/// pixel_values f32 [1, 3, H, W].
Result<HostTensor> pixel_values(const Rgb8Image& image, const ImageProcessorConfig& c);

}  // namespace hf2pte::pre
