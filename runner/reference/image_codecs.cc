// The library-backed decoders of image_decode.h: JPEG (libjpeg), PNG
// (libpng), TIFF (libtiff), WebP (libwebp), JPEG 2000 (OpenJPEG). Each is
// compiled when the build found its library (ONNXKIT_HAVE_<NAME>);
// otherwise it answers Unimplemented, naming the library.
//
// libjpeg and libpng report errors by longjmp: the functions that call
// setjmp keep every value that lives across it in a state struct owned by
// their caller, and hold nothing with a destructor themselves. Library
// messages never reach stderr; the first error becomes the Status.
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/reference/image_decode.h"

#if ONNXKIT_HAVE_JPEG
#include <jerror.h>
#include <jpeglib.h>
#endif
#if ONNXKIT_HAVE_PNG
#include <png.h>
#endif
#if ONNXKIT_HAVE_TIFF
#include <tiffio.h>
#endif
#if ONNXKIT_HAVE_WEBP
#include <webp/decode.h>
#endif
#if ONNXKIT_HAVE_OPENJPEG
#include <openjpeg.h>
#endif

namespace onnxkit::runner::reference::image {
namespace {

[[maybe_unused]] absl::Status NotBuilt(std::string_view format, std::string_view library) {
  return absl::UnimplementedError(absl::StrCat("this onnxkit was built without ", std::string(library),
                                               ", so it cannot decode ", std::string(format),
                                               " images (install ", std::string(library), " and rebuild)"));
}

[[maybe_unused]] absl::Status Corrupt(std::string_view format, std::string_view what) {
  return absl::DataLossError(absl::StrCat(std::string(format), ": ", std::string(what)));
}

// Takes the high byte of 16-bit samples, as 8-bit readers of such images do.
[[maybe_unused]] uint8_t To8(uint32_t v, int precision) {
  if (precision == 8) return static_cast<uint8_t>(v);
  if (precision > 8) return static_cast<uint8_t>(v >> (precision - 8));
  const uint32_t max = (1U << precision) - 1;
  return static_cast<uint8_t>((v * 255 + max / 2) / max);
}

}  // namespace

// ---- JPEG ----
#if ONNXKIT_HAVE_JPEG
namespace {

struct JpegState {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated = false;
  int64_t max_pixels = 0;
  absl::Status size;              // the size check or the pixels' allocation, when either failed
  std::vector<uint8_t> cmyk_row;  // a CMYK scanline before it becomes RGB
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* state = reinterpret_cast<JpegState*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int level) {
  // Warnings (level -1) are kept quiet; scan data that ends early (the
  // stream's end, or a marker where entropy-coded data should be) is an
  // error, raised at once: libjpeg would go on decoding gray to the end of
  // an image whose header may claim 2^28 pixels.
  if (level < 0 && (cinfo->err->msg_code == JWRN_JPEG_EOF || cinfo->err->msg_code == JWRN_HIT_MARKER)) {
    auto* state = reinterpret_cast<JpegState*>(cinfo->client_data);
    state->truncated = true;
    (*cinfo->err->format_message)(cinfo, state->message);
    std::longjmp(state->jump, 1);
  }
}

// Runs libjpeg over `bytes` into `out`; false when it failed (the reason in
// state->message, or state->size).
bool RunJpeg(JpegState* state, std::span<const uint8_t> bytes, RawImage* out) {
  if (setjmp(state->jump) != 0) return false;
  jpeg_decompress_struct* cinfo = &state->cinfo;
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  state->size = CheckImageSize(cinfo->image_height, cinfo->image_width, "JPEG", state->max_pixels);
  if (!state->size.ok()) return false;
  // libjpeg's working memory (whole-image coefficient arrays for progressive
  // streams) is bounded by what an image of the limit's size needs.
  cinfo->mem->max_memory_to_use =
      static_cast<long>(std::min<int64_t>(state->max_pixels, int64_t{1} << 28) * 10) + (64L << 20);
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  if (cmyk) {
    cinfo->out_color_space = JCS_CMYK;
  } else if (cinfo->num_components == 1) {
    cinfo->out_color_space = JCS_GRAYSCALE;
  } else {
    cinfo->out_color_space = JCS_RGB;
  }
  jpeg_start_decompress(cinfo);
  const size_t w = cinfo->output_width;
  const size_t comps = static_cast<size_t>(cinfo->output_components);
  state->size =
      AllocatePixels(*out, cinfo->output_height, cinfo->output_width, cmyk ? 3 : static_cast<int>(comps));
  if (!state->size.ok()) return false;
  if (cmyk) state->cmyk_row.resize(4 * w);
  // Adobe's CMYK JPEGs store the inks inverted.
  const bool inverted = cinfo->saw_Adobe_marker;
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* row = out->data() + cinfo->output_scanline * w * static_cast<size_t>(out->channels);
    JSAMPROW rows[1] = {cmyk ? state->cmyk_row.data() : row};
    jpeg_read_scanlines(cinfo, rows, 1);
    if (!cmyk) continue;
    for (size_t x = 0; x < w; ++x) {
      const uint8_t* p = state->cmyk_row.data() + 4 * x;
      const uint32_t k = inverted ? p[3] : 255U - p[3];
      for (size_t c = 0; c < 3; ++c) {
        const uint32_t ink = inverted ? p[c] : 255U - p[c];
        row[3 * x + c] = static_cast<uint8_t>((ink * k + 127) / 255);
      }
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

absl::StatusOr<RawImage> DecodeJpeg(std::span<const uint8_t> bytes, int64_t max_pixels) {
  JpegState state;
  state.max_pixels = max_pixels;
  state.message[0] = 0;
  state.cinfo.err = jpeg_std_error(&state.mgr);
  state.mgr.error_exit = JpegErrorExit;
  state.mgr.emit_message = JpegEmitMessage;
  state.cinfo.client_data = &state;
  jpeg_create_decompress(&state.cinfo);
  RawImage out;
  const bool ok = RunJpeg(&state, bytes, &out);
  jpeg_destroy_decompress(&state.cinfo);
  if (!state.size.ok()) return state.size;
  if (state.truncated) return Corrupt("JPEG", "the stream ends before the image does");
  if (!ok) {
    return Corrupt("JPEG", state.message[0] != 0 ? state.message : "the image has no usable size");
  }
  return out;
}
#else
absl::StatusOr<RawImage> DecodeJpeg(std::span<const uint8_t>, int64_t) { return NotBuilt("JPEG", "libjpeg"); }
#endif

// ---- PNG ----
#if ONNXKIT_HAVE_PNG
namespace {

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const uint8_t> bytes;
  size_t at = 0;
  char message[256];
  int64_t max_pixels = 0;
  absl::Status size;  // the size check or the pixels' allocation, when either failed
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<png_bytep> rows;
};

void PngError(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep data, size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (state->bytes.size() - state->at < length) png_error(png, "the stream ends before the image does");
  std::memcpy(data, state->bytes.data() + state->at, length);
  state->at += length;
}

bool RunPng(PngState* state, RawImage* out) {
  if (setjmp(png_jmpbuf(state->png)) != 0) return false;
  png_structp png = state->png;
  png_infop info = state->info;
  png_set_read_fn(png, state, PngRead);
  // Chunks and dimensions far past any real image are refused by libpng.
  png_set_user_limits(png, 1U << 24, 1U << 24);
  png_set_chunk_malloc_max(png, 64U << 20);
  png_read_info(png, info);
  state->width = png_get_image_width(png, info);
  state->height = png_get_image_height(png, info);
  state->size = CheckImageSize(state->height, state->width, "PNG", state->max_pixels);
  if (!state->size.ok()) return false;
  png_set_expand(png);  // palettes to RGB, low bit depths to 8, tRNS to alpha
  png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int channels = png_get_channels(png, info);
  if (channels < 1 || channels > 4 || png_get_bit_depth(png, info) != 8)
    png_error(png, "unexpected sample layout");
  const size_t stride = static_cast<size_t>(state->width) * static_cast<size_t>(channels);
  if (png_get_rowbytes(png, info) != stride) png_error(png, "unexpected row size");
  state->size = AllocatePixels(*out, state->height, state->width, channels);
  if (!state->size.ok()) return false;
  state->rows.resize(state->height);
  for (size_t y = 0; y < state->height; ++y) state->rows[y] = out->data() + y * stride;
  png_read_image(png, state->rows.data());
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

absl::StatusOr<RawImage> DecodePng(std::span<const uint8_t> bytes, int64_t max_pixels) {
  PngState state;
  state.max_pixels = max_pixels;
  state.bytes = bytes;
  state.message[0] = 0;
  state.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, PngError, PngWarning);
  if (state.png == nullptr) return absl::ResourceExhaustedError("PNG: libpng could not start");
  state.info = png_create_info_struct(state.png);
  if (state.info == nullptr) {
    png_destroy_read_struct(&state.png, nullptr, nullptr);
    return absl::ResourceExhaustedError("PNG: libpng could not start");
  }
  RawImage out;
  const bool ok = RunPng(&state, &out);
  png_destroy_read_struct(&state.png, &state.info, nullptr);
  if (!state.size.ok()) return state.size;
  if (!ok) return Corrupt("PNG", state.message[0] != 0 ? state.message : "unreadable");
  return out;
}
#else
absl::StatusOr<RawImage> DecodePng(std::span<const uint8_t>, int64_t) { return NotBuilt("PNG", "libpng"); }
#endif

// ---- TIFF ----
#if ONNXKIT_HAVE_TIFF
namespace {

struct TiffStream {
  std::span<const uint8_t> bytes;
  uint64_t at = 0;
  std::string error;
};

tmsize_t TiffRead(thandle_t h, void* data, tmsize_t size) {
  auto* s = static_cast<TiffStream*>(h);
  if (size < 0 || s->at >= s->bytes.size()) return 0;
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(size), s->bytes.size() - s->at);
  std::memcpy(data, s->bytes.data() + s->at, n);
  s->at += n;
  return static_cast<tmsize_t>(n);
}
tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return 0; }
toff_t TiffSeek(thandle_t h, toff_t offset, int whence) {
  auto* s = static_cast<TiffStream*>(h);
  uint64_t base = 0;
  if (whence == SEEK_CUR) base = s->at;
  if (whence == SEEK_END) base = s->bytes.size();
  if (offset > UINT64_MAX - base) return static_cast<toff_t>(-1);
  s->at = base + offset;
  return s->at;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<TiffStream*>(h)->bytes.size(); }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

int TiffErrorHandler(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffStream*>(user);
  if (s->error.empty()) {
    char text[512];
    std::vsnprintf(text, sizeof(text), fmt, ap);
    s->error = module != nullptr ? absl::StrCat(module, ": ", text) : text;
  }
  return 1;
}
// Warnings are kept quiet, except a read past the end of the stream: libtiff
// then drops the tag it was reading (a palette's color map, say) and goes
// on with a different image.
int TiffWarningHandler(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffStream*>(user);
  char text[512];
  std::vsnprintf(text, sizeof(text), fmt, ap);
  if (s->error.empty() && std::strstr(text, "IO error") != nullptr) {
    s->error = module != nullptr ? absl::StrCat(module, ": ", text) : text;
  }
  return 1;
}

// The common layouts read as stored (8-bit gray or RGB, with or without an
// extra alpha sample, interleaved, in strips); false when the image is of
// another kind.
bool ReadTiffDirect(TIFF* tif, uint32_t width, uint32_t height, RawImage* out, absl::Status* status) {
  uint16_t bits = 0, spp = 0, photometric = 0, planar = PLANARCONFIG_CONTIG;
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  if (TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric) == 0) return false;
  const bool gray = photometric == PHOTOMETRIC_MINISBLACK && (spp == 1 || spp == 2);
  const bool rgb = photometric == PHOTOMETRIC_RGB && (spp == 3 || spp == 4);
  if (bits != 8 || planar != PLANARCONFIG_CONTIG || TIFFIsTiled(tif) || !(gray || rgb)) return false;
  const tmsize_t line = TIFFScanlineSize(tif);
  if (line != static_cast<tmsize_t>(width) * spp) return false;
  *status = AllocatePixels(*out, height, width, spp);
  if (!status->ok()) return true;
  for (uint32_t y = 0; y < height; ++y) {
    if (TIFFReadScanline(tif, out->data() + static_cast<size_t>(line) * y, y, 0) < 0) {
      *status = Corrupt("TIFF", "a row could not be read");
      return true;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<RawImage> DecodeTiff(std::span<const uint8_t> bytes, int64_t max_pixels) {
  TiffStream stream{bytes, 0, {}};
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  if (options == nullptr) return absl::ResourceExhaustedError("TIFF: libtiff could not start");
  TIFFOpenOptionsSetErrorHandlerExtR(options, TiffErrorHandler, &stream);
  TIFFOpenOptionsSetWarningHandlerExtR(options, TiffWarningHandler, &stream);
  // libtiff's own buffers (strips, tiles, the RGBA raster) stay within what
  // an image of the limit's size needs.
  TIFFOpenOptionsSetMaxSingleMemAlloc(
      options, static_cast<tmsize_t>(std::min<int64_t>(max_pixels, int64_t{1} << 28) * 8 + (16 << 20)));
  TIFF* tif = TIFFClientOpenExt("stream", "rm", &stream, TiffRead, TiffWrite, TiffSeek, TiffClose, TiffSize,
                                TiffMap, TiffUnmap, options);
  TIFFOpenOptionsFree(options);
  if (tif == nullptr) return Corrupt("TIFF", stream.error.empty() ? "unreadable" : stream.error);
  uint32_t width = 0, height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  absl::Status status = CheckImageSize(height, width, "TIFF", max_pixels);
  RawImage out;
  if (status.ok() && !ReadTiffDirect(tif, width, height, &out, &status)) {
    // Everything else (palettes, 1-16 bits, CMYK, YCbCr, tiles, planes)
    // through libtiff's RGBA reader.
    char message[1024] = {0};
    if (TIFFRGBAImageOK(tif, message) == 0) {
      status = Corrupt("TIFF", message);
    } else {
      // The packed raster counts against the memory limit like the pixels.
      absl::StatusOr<Tensor> packed = Tensor::AllocateUninitialized(pb::kUint32, {height, width});
      const uint32_t* raster = packed.ok() ? packed->data<uint32_t>() : nullptr;
      if (!packed.ok()) {
        status = packed.status();
      } else if (TIFFReadRGBAImageOriented(tif, width, height, packed->mutable_data<uint32_t>(),
                                           ORIENTATION_TOPLEFT, 1) == 0) {
        status = Corrupt("TIFF", stream.error.empty() ? "the image could not be read" : stream.error);
      } else {
        status = AllocatePixels(out, height, width, 4);
        uint8_t* px = status.ok() ? out.data() : nullptr;
        const size_t count = static_cast<size_t>(width) * height;
        for (size_t i = 0; px != nullptr && i < count; ++i) {
          px[4 * i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
          px[4 * i + 1] = static_cast<uint8_t>(TIFFGetG(raster[i]));
          px[4 * i + 2] = static_cast<uint8_t>(TIFFGetB(raster[i]));
          px[4 * i + 3] = static_cast<uint8_t>(TIFFGetA(raster[i]));
        }
      }
    }
  }
  TIFFClose(tif);
  if (!status.ok()) return status;
  // An error libtiff reported but read past (a short strip, a bad tile)
  // leaves part of the image unset.
  if (!stream.error.empty()) return Corrupt("TIFF", stream.error);
  return out;
}
#else
absl::StatusOr<RawImage> DecodeTiff(std::span<const uint8_t>, int64_t) { return NotBuilt("TIFF", "libtiff"); }
#endif

// ---- WebP ----
#if ONNXKIT_HAVE_WEBP
absl::StatusOr<RawImage> DecodeWebp(std::span<const uint8_t> bytes, int64_t max_pixels) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &features) != VP8_STATUS_OK) {
    return Corrupt("WebP", "the headers are not readable");
  }
  if (features.has_animation) return Corrupt("WebP", "animated WebP is not supported");
  ONNXKIT_RETURN_IF_ERROR(CheckImageSize(features.height, features.width, "WebP", max_pixels));
  RawImage out;
  ONNXKIT_RETURN_IF_ERROR(AllocatePixels(out, features.height, features.width, features.has_alpha ? 4 : 3));
  const int stride = features.width * out.channels;
  const uint8_t* done = features.has_alpha
                            ? WebPDecodeRGBAInto(bytes.data(), bytes.size(), out.data(), out.size(), stride)
                            : WebPDecodeRGBInto(bytes.data(), bytes.size(), out.data(), out.size(), stride);
  if (done == nullptr) return Corrupt("WebP", "the image data is corrupt or truncated");
  return out;
}
#else
absl::StatusOr<RawImage> DecodeWebp(std::span<const uint8_t>, int64_t) { return NotBuilt("WebP", "libwebp"); }
#endif

// ---- JPEG 2000 ----
#if ONNXKIT_HAVE_OPENJPEG
namespace {

struct OpjStream {
  std::span<const uint8_t> bytes;
  uint64_t at = 0;
  std::string error;
};

OPJ_SIZE_T OpjRead(void* buffer, OPJ_SIZE_T n, void* user) {
  auto* s = static_cast<OpjStream*>(user);
  if (s->at >= s->bytes.size()) return static_cast<OPJ_SIZE_T>(-1);
  const uint64_t k = std::min<uint64_t>(n, s->bytes.size() - s->at);
  std::memcpy(buffer, s->bytes.data() + s->at, k);
  s->at += k;
  return k;
}
// `at` never passes the end: reads stop there and seeks are checked.
OPJ_OFF_T OpjSkip(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<OpjStream*>(user);
  if (n < 0) {
    if (n == std::numeric_limits<OPJ_OFF_T>::min() || static_cast<uint64_t>(-n) > s->at) return -1;
    s->at -= static_cast<uint64_t>(-n);
    return n;
  }
  const uint64_t k = std::min<uint64_t>(static_cast<uint64_t>(n), s->bytes.size() - s->at);
  s->at += k;
  return static_cast<OPJ_OFF_T>(k);
}
OPJ_BOOL OpjSeek(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<OpjStream*>(user);
  if (n < 0 || static_cast<uint64_t>(n) > s->bytes.size()) return OPJ_FALSE;
  s->at = static_cast<uint64_t>(n);
  return OPJ_TRUE;
}
void OpjError(const char* message, void* user) {
  auto* s = static_cast<OpjStream*>(user);
  if (s->error.empty()) {
    s->error = message;
    while (!s->error.empty() && (s->error.back() == '\n' || s->error.back() == ' ')) s->error.pop_back();
  }
}
void OpjQuiet(const char*, void*) {}

// A component's 8-bit sample at image pixel (x, y): its own grid may be
// subsampled (dx, dy) and its values signed or of 1-31 bits.
uint8_t OpjSample(const opj_image_comp_t& c, uint32_t x, uint32_t y) {
  const uint32_t cx = std::min<uint32_t>(x / std::max<uint32_t>(c.dx, 1), c.w - 1);
  const uint32_t cy = std::min<uint32_t>(y / std::max<uint32_t>(c.dy, 1), c.h - 1);
  int64_t v = c.data[static_cast<size_t>(cy) * c.w + cx];
  if (c.sgnd) v += int64_t{1} << (c.prec - 1);
  const int64_t max = (int64_t{1} << c.prec) - 1;
  v = std::clamp<int64_t>(v, 0, max);
  return To8(static_cast<uint32_t>(v), static_cast<int>(c.prec));
}

}  // namespace

absl::StatusOr<RawImage> DecodeJpeg2000(std::span<const uint8_t> bytes, int64_t max_pixels) {
  const bool jp2 = bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0;
  OpjStream source{bytes, 0, {}};
  opj_codec_t* codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if (codec == nullptr) return absl::ResourceExhaustedError("JPEG 2000: OpenJPEG could not start");
  opj_set_error_handler(codec, OpjError, &source);
  opj_set_warning_handler(codec, OpjQuiet, &source);
  opj_set_info_handler(codec, OpjQuiet, &source);
  opj_dparameters_t parameters;
  opj_set_default_decoder_parameters(&parameters);
  opj_stream_t* stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  opj_image_t* img = nullptr;
  absl::Status status;
  if (stream == nullptr || opj_setup_decoder(codec, &parameters) == 0) {
    status = absl::ResourceExhaustedError("JPEG 2000: OpenJPEG could not start");
  } else {
    opj_stream_set_user_data(stream, &source, nullptr);
    opj_stream_set_user_data_length(stream, bytes.size());
    opj_stream_set_read_function(stream, OpjRead);
    opj_stream_set_skip_function(stream, OpjSkip);
    opj_stream_set_seek_function(stream, OpjSeek);
    if (opj_read_header(stream, codec, &img) == 0 || img == nullptr) {
      status = Corrupt("JPEG 2000", source.error.empty() ? "the headers are not readable" : source.error);
    } else {
      const int64_t width = int64_t{img->x1} - img->x0;
      const int64_t height = int64_t{img->y1} - img->y0;
      status = CheckImageSize(height, width, "JPEG 2000", max_pixels);
      if (status.ok() && img->numcomps == 0) status = Corrupt("JPEG 2000", "no components");
      // OpenJPEG decodes into 32-bit planes of its own, one per component
      // (four at most are decoded): their samples are held to the limit too.
      const int64_t planes = std::min<int64_t>(img->numcomps, 4);
      if (status.ok() && width * planes > max_pixels / height) {
        status = absl::ResourceExhaustedError(
            absl::StrCat("JPEG 2000 image of ", width, " x ", height, " pixels and ", planes,
                         " components is larger than the decoder's limit of ", max_pixels, " samples"));
      }
      // Only the first four components are used: the rest are not decoded
      // (each would cost a full plane).
      static const OPJ_UINT32 kFirstFour[4] = {0, 1, 2, 3};
      if (status.ok() && img->numcomps > 4 &&
          opj_set_decoded_components(codec, 4, kFirstFour, OPJ_FALSE) == 0) {
        status = Corrupt("JPEG 2000", source.error.empty() ? "too many components" : source.error);
      }
      if (status.ok() && (opj_decode(codec, stream, img) == 0 || opj_end_decompress(codec, stream) == 0)) {
        status = Corrupt("JPEG 2000", source.error.empty() ? "the image data is corrupt" : source.error);
      }
    }
  }
  RawImage out;
  if (status.ok()) {
    const uint32_t n = std::min<uint32_t>(img->numcomps, 4);
    for (uint32_t i = 0; i < n && status.ok(); ++i) {
      const opj_image_comp_t& c = img->comps[i];
      if (c.data == nullptr || c.w == 0 || c.h == 0 || c.prec == 0 || c.prec > 31) {
        status = Corrupt("JPEG 2000", absl::StrCat("component ", i, " holds no usable samples"));
      }
    }
    if (status.ok()) {
      status =
          AllocatePixels(out, int64_t{img->y1} - img->y0, int64_t{img->x1} - img->x0, static_cast<int>(n));
    }
    if (status.ok()) {
      const bool sycc = img->color_space == OPJ_CLRSPC_SYCC && n >= 3;
      uint8_t* px = out.data();
      size_t at = 0;
      for (uint32_t y = 0; y < out.height; ++y) {
        for (uint32_t x = 0; x < out.width; ++x) {
          uint8_t s[4];
          for (int c = 0; c < out.channels; ++c) s[c] = OpjSample(img->comps[c], x, y);
          if (sycc) {  // luma and chroma to RGB (ITU-R 601, full range)
            const double yy = s[0], cb = s[1] - 128.0, cr = s[2] - 128.0;
            const double rgb[3] = {yy + 1.402 * cr, yy - 0.344136 * cb - 0.714136 * cr, yy + 1.772 * cb};
            for (int c = 0; c < 3; ++c)
              s[c] = static_cast<uint8_t>(std::clamp(std::lround(rgb[c]), 0L, 255L));
          }
          for (int c = 0; c < out.channels; ++c) px[at++] = s[c];
        }
      }
    }
  }
  if (img != nullptr) opj_image_destroy(img);
  if (stream != nullptr) opj_stream_destroy(stream);
  opj_destroy_codec(codec);
  if (!status.ok()) return status;
  return out;
}
#else
absl::StatusOr<RawImage> DecodeJpeg2000(std::span<const uint8_t>, int64_t) {
  return NotBuilt("JPEG 2000", "OpenJPEG");
}
#endif

}  // namespace onnxkit::runner::reference::image
