// Image decoding, PIL's resize and the image processors against the
// vit-preprocess fixture (Pillow 9.4 + transformers' order of operations):
// the resized 8-bit image exactly, pixel_values within 1e-6; and every bad
// file is one error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include <jpeglib.h>
#include <png.h>

#include "checkpoint/json_fields.h"
#include "checkpoint/npy.h"
#include "preprocess/image.h"
#include "preprocess/image_processor.h"
#include "preprocess/resample.h"

namespace hf2pte::pre {
namespace {

std::string fixture(const std::string& f) { return std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/vit-preprocess/" + f; }

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ImageProcessor, VitPreprocessFixture) {
  auto image = read_image(fixture("image.png"));
  ASSERT_TRUE(image.is_ok()) << image.status().message();
  EXPECT_EQ(image->width, 48);
  EXPECT_EQ(image->height, 40);
  auto cfg_json = read_json_object_file(fixture("preprocessor_config.json"));
  ASSERT_TRUE(cfg_json.is_ok());
  auto cfg = parse_image_processor(*cfg_json, "preprocessor_config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  EXPECT_EQ(cfg->resample, Resample::kBilinear);

  auto resized = resize_for_model(*image, *cfg);
  ASSERT_TRUE(resized.is_ok());
  auto ref = read_npy(fixture("resized_uint8.npy"));
  ASSERT_TRUE(ref.is_ok());
  ASSERT_EQ(ref->sizes, (std::vector<int64_t>{32, 32, 3}));
  ASSERT_EQ(resized->pixels.size(), ref->bytes.size());
  int differing = 0;
  for (size_t i = 0; i < ref->bytes.size(); ++i) differing += resized->pixels[i] != ref->bytes[i];
  EXPECT_EQ(differing, 0);  // Pillow's fixed-point arithmetic, bit for bit

  auto px = pixel_values(*image, *cfg);
  ASSERT_TRUE(px.is_ok());
  auto ref_px = read_npy(fixture("pixel_values.npy"));
  ASSERT_TRUE(ref_px.is_ok());
  ASSERT_EQ(px->sizes, ref_px->sizes);
  double worst = 0;
  for (int64_t i = 0; i < px->numel(); ++i) {
    worst = std::max(worst, double(std::fabs(px->data<float>()[i] - ref_px->data<float>()[i])));
  }
  EXPECT_LE(worst, 1e-6);
}

// Downscale, upscale and identity through every filter: the sizes, the
// constant image stays constant (weights sum to one in fixed point), and
// no filter reads outside the image.
TEST(Resample, EveryFilterKeepsAConstantImage) {
  Rgb8Image flat{13, 7, std::vector<uint8_t>(13 * 7 * 3, 200)};
  for (int f = 0; f <= 5; ++f) {
    for (auto [w, h] : {std::pair{5, 3}, std::pair{29, 17}, std::pair{13, 7}}) {
      auto r = resize(flat, w, h, Resample(f));
      ASSERT_TRUE(r.is_ok());
      EXPECT_EQ(r->width, w);
      EXPECT_EQ(r->height, h);
      for (uint8_t v : r->pixels) ASSERT_EQ(v, 200) << "filter " << f << " " << w << "x" << h;
    }
  }
  EXPECT_FALSE(resample_from_int(6).is_ok());
  EXPECT_FALSE(resize(flat, 0, 3, Resample::kBilinear).is_ok());
}

// ConvNext's form: the short side to shortest_edge / crop_pct, then a centre crop.
TEST(ImageProcessor, ShortestEdgeWithCropPct) {
  auto cfg = parse_image_processor(nlohmann::json{{"size", {{"shortest_edge", 8}}}, {"crop_pct", 0.5}, {"resample", 3},
                                                  {"image_mean", {0.0, 0.0, 0.0}}, {"image_std", {1.0, 1.0, 1.0}}},
                                   "p.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  Rgb8Image img{40, 20, std::vector<uint8_t>(40 * 20 * 3)};
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t(i * 7);
  auto r = resize_for_model(img, *cfg);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->width, 8);
  EXPECT_EQ(r->height, 8);
  // The crop is the middle of the 32x16 resize.
  auto full = resize(img, 32, 16, Resample::kBicubic);
  ASSERT_TRUE(full.is_ok());
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) EXPECT_EQ(r->at(y, x, 1), full->at(y + 4, x + 12, 1));
  EXPECT_FALSE(parse_image_processor(nlohmann::json{{"size", {{"height", 0}, {"width", 3}}}}, "p.json").is_ok());
  EXPECT_FALSE(parse_image_processor(nlohmann::json{{"image_std", {1.0, 0.0, 1.0}}}, "p.json").is_ok());
}

std::vector<uint8_t> encode_png(int color_type, int channels, int w, int h, const std::vector<uint8_t>& px) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep d, png_size_t n) {
        auto* o = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        o->insert(o->end(), d, d + n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, 8, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, const_cast<png_bytep>(&px[size_t(y * w * channels)]));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> encode_jpeg(int w, int h, const std::vector<uint8_t>& rgb) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w, c.image_height = h, c.input_components = 3, c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&rgb[size_t(c.next_scanline) * size_t(w) * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

// Grey becomes three equal channels and alpha is dropped, as PIL's convert("RGB").
TEST(Image, GreyAndAlphaBecomeRgb) {
  std::vector<uint8_t> grey = {0, 50, 100, 150, 200, 250};
  auto g = decode_image(encode_png(PNG_COLOR_TYPE_GRAY, 1, 3, 2, grey), "grey.png");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->pixels.size(), 18u);
  for (int i = 0; i < 6; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g->pixels[size_t(i * 3 + c)], grey[size_t(i)]);
  std::vector<uint8_t> rgba = {10, 20, 30, 0, 40, 50, 60, 128};
  auto a = decode_image(encode_png(PNG_COLOR_TYPE_RGBA, 4, 2, 1, rgba), "rgba.png");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->pixels, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));
}

TEST(Image, JpegDecodes) {
  std::vector<uint8_t> rgb(16 * 8 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = uint8_t(i % 3 == 0 ? 200 : 40);
  auto j = decode_image(encode_jpeg(16, 8, rgb), "x.jpg");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->width, 16);
  EXPECT_EQ(j->height, 8);
  EXPECT_NEAR(j->at(3, 5, 0), 200, 6);
  EXPECT_NEAR(j->at(3, 5, 1), 40, 6);
}

// Truncated, corrupt and unknown files: one error each, naming the format and the file.
TEST(Image, BadFilesAreErrors) {
  auto png = file_bytes(fixture("image.png"));
  std::vector<uint8_t> rgb(16 * 8 * 3, 90);
  auto jpg = encode_jpeg(16, 8, rgb);
  struct Case {
    std::vector<uint8_t> bytes;
    const char* expected;
  };
  std::vector<Case> cases = {
      {std::vector<uint8_t>(png.begin(), png.begin() + long(png.size() / 2)), "bad PNG"},
      {std::vector<uint8_t>(png.begin(), png.begin() + 20), "bad PNG"},
      {std::vector<uint8_t>(jpg.begin(), jpg.begin() + long(jpg.size() / 2)), "bad JPEG"},
      {std::vector<uint8_t>(jpg.begin(), jpg.begin() + 4), "bad JPEG"},
      {{'G', 'I', 'F', '8', '9', 'a'}, "not a PNG or JPEG image"},
      {{}, "not a PNG or JPEG image"},
  };
  auto flipped = png;
  for (size_t i = 40; i < flipped.size() - 20; i += 7) flipped[i] ^= 0x5a;  // corrupt the compressed data
  cases.push_back({flipped, "bad PNG"});
  for (const auto& c : cases) {
    auto r = decode_image(c.bytes, "in.img");
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("(in.img)"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(read_image("/nonexistent.png").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace hf2pte::pre
