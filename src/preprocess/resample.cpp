#include "preprocess/resample.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace hf2pte::pre {

namespace {

struct Filter {
  double (*fn)(double);
  double support;
};

double box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= std::numbers::pi;
  return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}
double cubic(double x) {  // a = -0.5
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}
double lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::kBox: return {box, 0.5};
    case Resample::kBilinear: return {triangle, 1.0};
    case Resample::kHamming: return {hamming, 1.0};
    case Resample::kBicubic: return {cubic, 2.0};
    case Resample::kLanczos: return {lanczos, 3.0};
    case Resample::kNearest: break;
  }
  return {triangle, 1.0};
}

constexpr int kPrecisionBits = 32 - 8 - 2;

/// Per output pixel: the first source pixel and the fixed-point weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  ///< [out, ksize]
};

Coefficients precompute(int64_t in_size, int64_t out_size, Filter f) {
  const double scale = double(in_size) / double(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Coefficients c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first.resize(size_t(out_size));
  c.count.resize(size_t(out_size));
  c.weights.assign(size_t(out_size) * size_t(c.ksize), 0);
  std::vector<double> k(size_t(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (double(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = int(in_size);
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[size_t(x)] = f.fn((double(x + xmin) - center + 0.5) * ss);
      ww += k[size_t(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      c.weights[size_t(xx) * size_t(c.ksize) + size_t(x)] =
          int32_t(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[size_t(xx)] = xmin;
    c.count[size_t(xx)] = xmax;
  }
  return c;
}

uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;
  return uint8_t(std::clamp(v, 0, 255));
}

Rgb8Image horizontal(const Rgb8Image& in, int64_t width, Filter f) {
  const Coefficients c = precompute(in.width, width, f);
  Rgb8Image out{width, in.height, std::vector<uint8_t>(size_t(width * in.height * 3))};
  for (int64_t y = 0; y < in.height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      const int32_t* k = &c.weights[size_t(x) * size_t(c.ksize)];
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int i = 0; i < c.count[size_t(x)]; ++i) {
        const uint8_t* p = &in.pixels[size_t((y * in.width + c.first[size_t(x)] + i) * 3)];
        for (int ch = 0; ch < 3; ++ch) acc[ch] += int32_t(p[ch]) * k[i];
      }
      for (int ch = 0; ch < 3; ++ch) out.pixels[size_t((y * width + x) * 3 + ch)] = clip8(acc[ch]);
    }
  }
  return out;
}

Rgb8Image vertical(const Rgb8Image& in, int64_t height, Filter f) {
  const Coefficients c = precompute(in.height, height, f);
  Rgb8Image out{in.width, height, std::vector<uint8_t>(size_t(in.width * height * 3))};
  for (int64_t y = 0; y < height; ++y) {
    const int32_t* k = &c.weights[size_t(y) * size_t(c.ksize)];
    for (int64_t x = 0; x < in.width; ++x) {
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int i = 0; i < c.count[size_t(y)]; ++i) {
        const uint8_t* p = &in.pixels[size_t(((c.first[size_t(y)] + i) * in.width + x) * 3)];
        for (int ch = 0; ch < 3; ++ch) acc[ch] += int32_t(p[ch]) * k[i];
      }
      for (int ch = 0; ch < 3; ++ch) out.pixels[size_t((y * in.width + x) * 3 + ch)] = clip8(acc[ch]);
    }
  }
  return out;
}

Rgb8Image nearest(const Rgb8Image& in, int64_t width, int64_t height) {
  Rgb8Image out{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  const double sx = double(in.width) / double(width), sy = double(in.height) / double(height);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t ys = std::min<int64_t>(int64_t((double(y) + 0.5) * sy), in.height - 1);
    for (int64_t x = 0; x < width; ++x) {
      const int64_t xs = std::min<int64_t>(int64_t((double(x) + 0.5) * sx), in.width - 1);
      for (int ch = 0; ch < 3; ++ch) out.pixels[size_t((y * width + x) * 3 + ch)] = in.at(ys, xs, ch);
    }
  }
  return out;
}

}  // namespace

Result<Resample> resample_from_int(int64_t v) {
  HF2PTE_CHECK_OR_RETURN(v >= 0 && v <= 5, kInvalidInput,
                         "resample {} is not a PIL filter; expected 0 (nearest), 1 (lanczos), 2 (bilinear), 3 (bicubic), "
                         "4 (box) or 5 (hamming)",
                         v);
  return Resample(int(v));
}

Result<Rgb8Image> resize(const Rgb8Image& in, int64_t width, int64_t height, Resample filter) {
  HF2PTE_CHECK_OR_RETURN(width > 0 && height > 0 && width * height <= kMaxImagePixels, kInvalidArgument,
                         "resize to {}x{}: expected a positive size of at most 2^26 pixels", width, height);
  HF2PTE_CHECK_OR_RETURN(in.width > 0 && in.height > 0, kInvalidArgument, "resize of an empty image");
  if (filter == Resample::kNearest) return nearest(in, width, height);
  const Filter f = filter_of(filter);
  Rgb8Image out = in;
  if (width != in.width) out = horizontal(out, width, f);
  if (height != in.height) out = vertical(out, height, f);
  return out;
}

}  // namespace hf2pte::pre
