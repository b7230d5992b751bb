#include "preprocess/image_processor.h"

#include <cmath>

#include "checkpoint/json_fields.h"

namespace hf2pte::pre {

namespace {

Result<std::array<float, 3>> three_floats(const nlohmann::json& j, const char* key, std::array<float, 3> fallback,
                                          const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_number()) {
    const float v = it->get<float>();
    return std::array<float, 3>{v, v, v};
  }
  HF2PTE_CHECK_OR_RETURN(it->is_array() && it->size() == 3 && (*it)[0].is_number() && (*it)[1].is_number() &&
                             (*it)[2].is_number(),
                         kInvalidInput, "{}: field '{}' must be a number or 3 numbers; got {} ({})", json_label(where),
                         key, it->dump(), where);
  return std::array<float, 3>{(*it)[0].get<float>(), (*it)[1].get<float>(), (*it)[2].get<float>()};
}

Status positive(const char* key, std::optional<int64_t> v, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(!v || (*v > 0 && *v <= 65536), kInvalidInput,
                         "{}: field '{}' out of range; expected 1..65536, got {} ({})", json_label(where), key, *v, where);
  return Status::ok();
}

/// transformers' get_resize_output_image_size(default_to_square=False): the
/// short side becomes `size`, the long side int(size * long / short).
std::pair<int64_t, int64_t> shortest_edge_size(int64_t w, int64_t h, int64_t size) {
  const bool wide = w >= h;
  const int64_t short_side = wide ? h : w, long_side = wide ? w : h;
  const auto new_long = int64_t(double(size) * double(long_side) / double(short_side));
  return wide ? std::pair{new_long, size} : std::pair{size, new_long};
}

/// transformers' center_crop: top = (H - h) // 2, left = (W - w) // 2; smaller images are zero-padded.
Rgb8Image center_crop(const Rgb8Image& in, int64_t width, int64_t height) {
  Rgb8Image out{width, height, std::vector<uint8_t>(size_t(width * height * 3), 0)};
  const int64_t top = (in.height - height) / 2 - ((in.height - height) % 2 != 0 && in.height < height ? 1 : 0);
  const int64_t left = (in.width - width) / 2 - ((in.width - width) % 2 != 0 && in.width < width ? 1 : 0);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t sy = y + top;
    if (sy < 0 || sy >= in.height) continue;
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sx = x + left;
      if (sx < 0 || sx >= in.width) continue;
      for (int ch = 0; ch < 3; ++ch) out.pixels[size_t((y * width + x) * 3 + ch)] = in.at(sy, sx, ch);
    }
  }
  return out;
}

}  // namespace

Result<ImageProcessorConfig> parse_image_processor(const nlohmann::json& j, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(j.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})", json_label(where),
                         json_type_name(j), where);
  ImageProcessorConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.type, get_string_or(j, "image_processor_type", c.type, where));
  HF2PTE_ASSIGN_OR_RETURN(c.do_resize, get_bool_or(j, "do_resize", true, where));
  if (auto size = j.find("size"); size != j.end() && !size->is_null()) {
    if (size->is_number_integer()) {  // older configs: one int = a square
      c.height = c.width = size->get<int64_t>();
    } else {
      HF2PTE_CHECK_OR_RETURN(size->is_object(), kInvalidInput, "{}: field 'size' has wrong type; expected object, got {} ({})",
                             json_label(where), json_type_name(*size), where);
      HF2PTE_ASSIGN_OR_RETURN(c.height, get_optional_int(*size, "height", where));
      HF2PTE_ASSIGN_OR_RETURN(c.width, get_optional_int(*size, "width", where));
      HF2PTE_ASSIGN_OR_RETURN(c.shortest_edge, get_optional_int(*size, "shortest_edge", where));
    }
  } else {
    c.height = c.width = 224;  // ViTImageProcessor's default
  }
  for (auto [key, v] : {std::pair{"size.height", c.height}, std::pair{"size.width", c.width},
                        std::pair{"size.shortest_edge", c.shortest_edge}}) {
    HF2PTE_RETURN_IF_ERROR(positive(key, v, where));
  }
  HF2PTE_CHECK_OR_RETURN(c.shortest_edge || (c.height && c.width), kInvalidInput,
                         "{}: field 'size' needs height and width, or shortest_edge ({})", json_label(where), where);
  HF2PTE_ASSIGN_OR_RETURN(c.crop_pct, get_optional_double(j, "crop_pct", where));
  if (c.crop_pct) {
    HF2PTE_CHECK_OR_RETURN(*c.crop_pct > 0 && *c.crop_pct <= 1, kInvalidInput,
                           "{}: field 'crop_pct' out of range; expected (0, 1], got {} ({})", json_label(where),
                           *c.crop_pct, where);
  }
  HF2PTE_ASSIGN_OR_RETURN(int64_t resample, get_int_or(j, "resample", 2, where));
  HF2PTE_ASSIGN_OR_RETURN(c.resample, resample_from_int(resample));
  HF2PTE_ASSIGN_OR_RETURN(c.do_center_crop, get_bool_or(j, "do_center_crop", false, where));
  if (c.do_center_crop) {
    auto crop = j.find("crop_size");
    HF2PTE_CHECK_OR_RETURN(crop != j.end() && (crop->is_object() || crop->is_number_integer()), kInvalidInput,
                           "{}: do_center_crop needs crop_size ({})", json_label(where), where);
    if (crop->is_number_integer()) {
      c.crop_height = c.crop_width = crop->get<int64_t>();
    } else {
      HF2PTE_ASSIGN_OR_RETURN(c.crop_height, get_int(*crop, "height", where));
      HF2PTE_ASSIGN_OR_RETURN(c.crop_width, get_int(*crop, "width", where));
    }
    HF2PTE_RETURN_IF_ERROR(positive("crop_size", c.crop_height, where));
    HF2PTE_RETURN_IF_ERROR(positive("crop_size", c.crop_width, where));
  }
  HF2PTE_ASSIGN_OR_RETURN(c.do_rescale, get_bool_or(j, "do_rescale", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c.rescale_factor, get_double_or(j, "rescale_factor", c.rescale_factor, where));
  HF2PTE_ASSIGN_OR_RETURN(c.do_normalize, get_bool_or(j, "do_normalize", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c.mean, three_floats(j, "image_mean", c.mean, where));
  HF2PTE_ASSIGN_OR_RETURN(c.std, three_floats(j, "image_std", c.std, where));
  for (float s : c.std) {
    HF2PTE_CHECK_OR_RETURN(s != 0 && std::isfinite(s), kInvalidInput, "{}: image_std must be finite and non-zero ({})",
                           json_label(where), where);
  }
  return c;
}

Result<Rgb8Image> resize_for_model(const Rgb8Image& image, const ImageProcessorConfig& c) {
  Rgb8Image out = image;
  if (c.do_resize) {
    if (c.shortest_edge) {
      const int64_t edge = *c.shortest_edge;
      if (c.crop_pct && edge < 384) {
        // ConvNextImageProcessor: resize the short side to edge / crop_pct, then crop edge x edge.
        const auto [w, h] = shortest_edge_size(out.width, out.height, int64_t(double(edge) / *c.crop_pct));
        HF2PTE_ASSIGN_OR_RETURN(out, resize(out, w, h, c.resample));
        out = center_crop(out, edge, edge);
      } else if (c.crop_pct) {
        HF2PTE_ASSIGN_OR_RETURN(out, resize(out, edge, edge, c.resample));  // >= 384: warped to a square
      } else {
        const auto [w, h] = shortest_edge_size(out.width, out.height, edge);
        HF2PTE_ASSIGN_OR_RETURN(out, resize(out, w, h, c.resample));
      }
    } else {
      HF2PTE_ASSIGN_OR_RETURN(out, resize(out, *c.width, *c.height, c.resample));
    }
  }
  if (c.do_center_crop) out = center_crop(out, c.crop_width, c.crop_height);
  return out;
}

Result<HostTensor> pixel_values(const Rgb8Image& image, const ImageProcessorConfig& c) {
  HF2PTE_ASSIGN_OR_RETURN(Rgb8Image r, resize_for_model(image, c));
  const int64_t H = r.height, W = r.width;
  HostTensor t{ScalarType::kFloat, {1, 3, H, W}, {}};
  t.bytes.resize(size_t(3 * H * W) * sizeof(float));
  float* out = t.data<float>();
  for (int ch = 0; ch < 3; ++ch) {
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t x = 0; x < W; ++x) {
        // rescale: float64 multiply, then float32 (transformers' rescale); normalize in float32.
        float v = c.do_rescale ? float(double(r.at(y, x, ch)) * c.rescale_factor) : float(r.at(y, x, ch));
        if (c.do_normalize) v = (v - c.mean[size_t(ch)]) / c.std[size_t(ch)];
        out[(ch * H + y) * W + x] = v;
      }
    }
  }
  return t;
}

}  // namespace hf2pte::pre
