// Image files to 8-bit RGB, as Hugging Face pipelines see them (PIL's
// Image.open(...).convert("RGB")): PNG through libpng, JPEG through libjpeg.
// Grey becomes three equal channels, alpha is dropped (not composited), a
// palette is expanded, 16-bit samples keep their high byte. Corrupt or
// truncated files are errors, never partial images.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace hf2pte::pre {

/// Row-major HWC RGB, 3 bytes a pixel.
struct Rgb8Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;
  uint8_t at(int64_t y, int64_t x, int c) const { return pixels[size_t((y * width + x) * 3 + c)]; }
};

/// The largest image accepted (width * height, 8192 x 8192): bounds the memory a header can ask for.
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;

/// Decodes PNG or JPEG bytes (chosen by the signature); `where` names the source in errors.
Result<Rgb8Image> decode_image(std::span<const uint8_t> bytes, const std::string& where);
/// Reads and decodes a file.
Result<Rgb8Image> read_image(const std::string& path);

}  // namespace hf2pte::pre
