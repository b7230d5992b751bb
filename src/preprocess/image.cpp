#include "preprocess/image.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <jpeglib.h>
#include <png.h>

namespace hf2pte::pre {

namespace {

// ---- PNG (libpng's progressive-free API over a memory buffer) ----

struct PngSource {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char error[200] = {0};
};

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (s->pos + n > s->bytes.size()) png_error(png, "file is truncated");
  std::memcpy(out, s->bytes.data() + s->pos, n);
  s->pos += n;
}

void png_fail(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof s->error, "%s", msg);
  png_longjmp(png, 1);
}

void png_warn(png_structp, png_const_charp) {}  // benign chunk warnings (PIL ignores them too)

// No C++ object with a destructor lives across the setjmp: rows go into a
// buffer sized before it, and errors come back as text.
bool decode_png_rows(PngSource* src, std::vector<uint8_t>* out, std::vector<png_bytep>* rows, int64_t* w, int64_t* h) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_fail, png_warn);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, src, png_read_bytes);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  if (width == 0 || height == 0 || int64_t(width) * int64_t(height) > kMaxImagePixels) {
    std::snprintf(src->error, sizeof src->error, "image of %ux%u pixels is empty or too large (at most 2^26)", width, height);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  const int color = png_get_color_type(png, info);
  png_set_expand(png);         // palette -> RGB, grey < 8 bits -> 8, tRNS -> alpha
  png_set_strip_16(png);       // 16-bit samples: the high byte (PIL's RGB;16B unpacking)
  png_set_strip_alpha(png);    // convert("RGB") drops alpha
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(width) * 3) {
    std::snprintf(src->error, sizeof src->error, "unexpected PNG row layout after conversion to RGB");
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->resize(size_t(width) * size_t(height) * 3);
  rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y) (*rows)[y] = out->data() + size_t(y) * size_t(width) * 3;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  *w = width, *h = height;
  return true;
}

Result<Rgb8Image> decode_png(std::span<const uint8_t> bytes, const std::string& where) {
  PngSource src{bytes};
  Rgb8Image img;
  std::vector<png_bytep> rows;
  if (!decode_png_rows(&src, &img.pixels, &rows, &img.width, &img.height)) {
    return make_error(ErrorCode::kInvalidInput, "bad PNG: {} ({})", src.error[0] ? src.error : "cannot decode", where);
  }
  return img;
}

// ---- JPEG (libjpeg-turbo; its defaults are PIL's: islow DCT, fancy upsampling) ----

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

// Warnings (a premature end of data, corrupt entropy data) are errors: PIL
// refuses truncated images unless told otherwise.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

bool decode_jpeg_rows(std::span<const uint8_t> bytes, JpegError* err, std::vector<uint8_t>* out, int64_t* w, int64_t* h) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_fail;
  err->mgr.emit_message = jpeg_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(err->message, sizeof err->message, "CMYK JPEG images are not supported; convert the file to RGB");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  if (cinfo.image_width == 0 || cinfo.image_height == 0 ||
      int64_t(cinfo.image_width) * int64_t(cinfo.image_height) > kMaxImagePixels) {
    std::snprintf(err->message, sizeof err->message, "image of %ux%u pixels is empty or too large (at most 2^26)",
                  cinfo.image_width, cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = JCS_RGB;  // grey is replicated, YCbCr converted
  jpeg_start_decompress(&cinfo);
  out->resize(size_t(cinfo.output_width) * size_t(cinfo.output_height) * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->data() + size_t(cinfo.output_scanline) * size_t(cinfo.output_width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  *w = cinfo.output_width, *h = cinfo.output_height;
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Result<Rgb8Image> decode_jpeg(std::span<const uint8_t> bytes, const std::string& where) {
  JpegError err;
  Rgb8Image img;
  if (!decode_jpeg_rows(bytes, &err, &img.pixels, &img.width, &img.height)) {
    return make_error(ErrorCode::kInvalidInput, "bad JPEG: {} ({})", err.message[0] ? err.message : "cannot decode", where);
  }
  return img;
}

}  // namespace

Result<Rgb8Image> decode_image(std::span<const uint8_t> bytes, const std::string& where) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return decode_png(bytes, where);
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return decode_jpeg(bytes, where);
  return make_error(ErrorCode::kInvalidInput, "not a PNG or JPEG image ({})", where);
}

Result<Rgb8Image> read_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HF2PTE_CHECK_OR_RETURN(in.good(), kNotFound, "cannot open file: {} ({})", std::strerror(errno), path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  HF2PTE_CHECK_OR_RETURN(!in.bad(), kIoError, "cannot read file ({})", path);
  return decode_image(bytes, path);
}

}  // namespace hf2pte::pre
