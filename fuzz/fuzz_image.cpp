// libFuzzer target: image files (classify / preprocess read user images):
// PNG / JPEG decoding, then Pillow's resize of what decoded.
#include <cstdint>
#include <span>

#include "preprocess/image.h"
#include "preprocess/resample.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto img = hf2pte::pre::decode_image(std::span<const uint8_t>(data, size), "fuzz.img");
  if (img.is_ok() && img->width * img->height <= (1 << 20)) {
    (void)hf2pte::pre::resize(*img, 7, 5, hf2pte::pre::Resample::kBicubic);
  }
  return 0;
}
