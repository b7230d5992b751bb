// Pillow's Image.resize for 8-bit RGB, bit for bit: separable convolution with
// the filter's support widened by the downscale factor (antialiasing), 22-bit
// fixed-point weights, the horizontal pass first with its result rounded to
// 8 bits, then the vertical pass (Pillow's Resample.c; facts in docs/vision.md).
// NEAREST picks the source pixel under each output pixel's centre.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "preprocess/image.h"

namespace hf2pte::pre {

/// PIL's resampling filters, numbered as PIL.Image.Resampling (what
/// preprocessor_config.json's "resample" holds).
enum class Resample : int { kNearest = 0, kLanczos = 1, kBilinear = 2, kBicubic = 3, kBox = 4, kHamming = 5 };

/// `resample` as a filter, or an error naming the value.
Result<Resample> resample_from_int(int64_t v);

Result<Rgb8Image> resize(const Rgb8Image& in, int64_t width, int64_t height, Resample filter);

}  // namespace hf2pte::pre
