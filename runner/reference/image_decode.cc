// ImageDecoder (20) and the decoders written here: BMP (every header
// version, 1 to 32 bits, bit fields, RLE4 and RLE8) and the PNM family
// (P1 to P6, any maxval). See image_decode.h.
#include "runner/reference/image_decode.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/misc.h"

namespace onnxkit::runner::reference {
namespace image {
namespace {

bool StartsWith(std::span<const uint8_t> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() && std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

bool IsPnmSpace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

absl::Status Corrupt(std::string_view format, std::string_view what) {
  return absl::DataLossError(absl::StrCat(std::string(format), ": ", std::string(what)));
}

// ---- BMP ----

uint32_t U16(std::span<const uint8_t> b, size_t at) { return b[at] | (uint32_t{b[at + 1]} << 8); }
uint32_t U32(std::span<const uint8_t> b, size_t at) { return U16(b, at) | (U16(b, at + 2) << 16); }

// One channel of a bit-field pixel, scaled to 8 bits as v * 255 / max,
// truncated (0 when the mask is empty).
struct Field {
  uint32_t mask = 0;
  int shift = 0;
  uint32_t max = 0;
  explicit Field(uint32_t m) : mask(m) {
    if (m == 0) return;
    while (((m >> shift) & 1U) == 0) ++shift;
    max = m >> shift;
  }
  uint8_t Of(uint32_t pixel) const {
    if (max == 0) return 0;
    const uint64_t v = (pixel & mask) >> shift;
    return static_cast<uint8_t>(v * 255 / max);
  }
};

struct BmpInfo {
  int64_t width = 0;
  int64_t height = 0;  // positive
  bool top_down = false;
  uint32_t bpp = 0;
  uint32_t compression = 0;
  uint32_t masks[4] = {0, 0, 0, 0};  // R, G, B, A
  std::vector<uint8_t> palette;      // RGB triples
};

constexpr uint32_t kBiRgb = 0, kBiRle8 = 1, kBiRle4 = 2, kBiBitfields = 3, kBiAlphaBitfields = 6;

// Expands RLE8/RLE4 data into one palette index per pixel (rows bottom up,
// as stored); pixels it never reaches stay 0.
absl::Status DecodeRle(std::span<const uint8_t> data, const BmpInfo& info, std::vector<uint8_t>& indices) {
  const bool four = info.compression == kBiRle4;
  int64_t x = 0;
  int64_t y = 0;  // stored row (0 = bottom)
  size_t at = 0;
  auto put = [&](uint8_t index) {
    if (x < info.width && y < info.height) indices[static_cast<size_t>(y * info.width + x)] = index;
    ++x;
  };
  while (at + 1 < data.size() && y < info.height) {
    const uint8_t count = data[at];
    const uint8_t value = data[at + 1];
    at += 2;
    if (count > 0) {  // a run
      for (int i = 0; i < count; ++i) put(four ? (i % 2 == 0 ? value >> 4 : value & 15) : value);
      continue;
    }
    if (value == 0) {  // end of line
      x = 0;
      ++y;
    } else if (value == 1) {  // end of bitmap
      return absl::OkStatus();
    } else if (value == 2) {  // delta
      if (at + 1 >= data.size()) break;
      x += data[at];
      y += data[at + 1];
      at += 2;
    } else {  // absolute: `value` literal pixels, padded to 16 bits
      const size_t n = value;
      const size_t nbytes = four ? (n + 1) / 2 : n;
      if (at + nbytes > data.size()) return Corrupt("BMP", "RLE data ends inside a literal run");
      for (size_t i = 0; i < n; ++i) {
        put(four ? (i % 2 == 0 ? data[at + i / 2] >> 4 : data[at + i / 2] & 15) : data[at + i]);
      }
      at += nbytes + (nbytes & 1);
    }
  }
  // Streams that stop without an end-of-bitmap marker are read as far as
  // they go, like most readers do.
  return absl::OkStatus();
}

absl::StatusOr<BmpInfo> ReadBmpHeaders(std::span<const uint8_t> b, int64_t max_pixels,
                                       uint32_t& pixel_offset) {
  if (b.size() < 26) return Corrupt("BMP", "shorter than its headers");
  pixel_offset = U32(b, 10);
  const uint32_t header = U32(b, 14);
  BmpInfo info;
  size_t palette_at = 14 + static_cast<size_t>(header);
  uint32_t colors_used = 0;
  size_t entry = 4;
  if (header == 12) {  // BITMAPCOREHEADER
    info.width = U16(b, 18);
    info.height = U16(b, 20);
    info.bpp = U16(b, 24);
    entry = 3;
  } else if (header == 16 || header == 40 || header == 52 || header == 56 || header == 64 || header == 108 ||
             header == 124) {
    if (b.size() < 14 + static_cast<size_t>(std::max<uint32_t>(header, 40)) && header != 16) {
      return Corrupt("BMP", "shorter than its headers");
    }
    if (b.size() < 30) return Corrupt("BMP", "shorter than its headers");
    info.width = static_cast<int32_t>(U32(b, 18));
    const int64_t h = static_cast<int32_t>(U32(b, 22));
    info.top_down = h < 0;
    info.height = h < 0 ? -h : h;
    info.bpp = U16(b, 28);
    if (header >= 40) {
      info.compression = U32(b, 30);
      colors_used = U32(b, 46);
    }
    if (header >= 52) {
      for (int i = 0; i < (header >= 56 ? 4 : 3); ++i)
        info.masks[i] = U32(b, 54 + 4 * static_cast<size_t>(i));
    } else if (header == 40 && (info.compression == kBiBitfields || info.compression == kBiAlphaBitfields)) {
      const int n = info.compression == kBiAlphaBitfields ? 4 : 3;
      if (b.size() < 54 + 4 * static_cast<size_t>(n)) return Corrupt("BMP", "bit-field masks missing");
      for (int i = 0; i < n; ++i) info.masks[i] = U32(b, 54 + 4 * static_cast<size_t>(i));
      palette_at += 4 * static_cast<size_t>(n);
    }
  } else {
    return Corrupt("BMP", absl::StrCat("unknown header size ", header));
  }
  ONNXKIT_RETURN_IF_ERROR(CheckImageSize(info.height, info.width, "BMP", max_pixels));
  const uint32_t c = info.compression;
  const uint32_t bpp = info.bpp;
  const bool ok = (c == kBiRgb &&
                   (bpp == 1 || bpp == 2 || bpp == 4 || bpp == 8 || bpp == 16 || bpp == 24 || bpp == 32)) ||
                  (c == kBiRle8 && bpp == 8) || (c == kBiRle4 && bpp == 4) ||
                  ((c == kBiBitfields || c == kBiAlphaBitfields) && (bpp == 16 || bpp == 32));
  if (!ok)
    return Corrupt("BMP", absl::StrCat(bpp, " bits per pixel with compression ", c, " is not supported"));
  if ((c == kBiRle8 || c == kBiRle4) && info.top_down) return Corrupt("BMP", "a top-down RLE image");
  if (bpp <= 8) {
    const uint32_t most = 1U << bpp;
    const uint32_t n = colors_used == 0 || colors_used > most ? most : colors_used;
    if (palette_at > b.size() || (b.size() - palette_at) / entry < n) {
      return Corrupt("BMP", "the palette runs past the end");
    }
    info.palette.resize(3 * static_cast<size_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const size_t at = palette_at + i * entry;
      info.palette[3 * i] = b[at + 2];
      info.palette[3 * i + 1] = b[at + 1];
      info.palette[3 * i + 2] = b[at];
    }
  }
  if (c == kBiRgb && bpp == 16) {
    info.masks[0] = 0x7C00;
    info.masks[1] = 0x03E0;
    info.masks[2] = 0x001F;
  } else if (c == kBiRgb && bpp == 32) {
    info.masks[0] = 0x00FF0000;
    info.masks[1] = 0x0000FF00;
    info.masks[2] = 0x000000FF;
    info.masks[3] = 0;  // the fourth byte of BI_RGB is padding
  }
  return info;
}

}  // namespace

absl::StatusOr<RawImage> DecodeBmp(std::span<const uint8_t> b, int64_t max_pixels) {
  uint32_t pixel_offset = 0;
  ONNXKIT_ASSIGN_OR_RETURN(BmpInfo info, ReadBmpHeaders(b, max_pixels, pixel_offset));
  if (pixel_offset >= b.size()) return Corrupt("BMP", "the pixel data starts past the end");
  const std::span<const uint8_t> data = b.subspan(pixel_offset);
  const bool alpha = info.masks[3] != 0;
  RawImage out;
  ONNXKIT_RETURN_IF_ERROR(AllocatePixels(out, info.height, info.width, alpha ? 4 : 3));
  const size_t w = static_cast<size_t>(info.width);
  const size_t h = static_cast<size_t>(info.height);
  // Pixels whose index is past the palette are black (RLE pixels no code
  // reaches have index 0, the first palette entry).
  std::memset(out.data(), 0, out.size());
  const size_t palette_size = info.palette.size() / 3;
  auto put_index = [&](uint8_t* px, uint32_t index) {
    if (index < palette_size) std::memcpy(px, &info.palette[3 * index], 3);
  };
  auto row_out = [&](size_t stored_row) {
    const size_t y = info.top_down ? stored_row : h - 1 - stored_row;
    return out.data() + y * w * static_cast<size_t>(out.channels);
  };
  if (info.compression == kBiRle8 || info.compression == kBiRle4) {
    std::vector<uint8_t> indices(h * w, 0);
    ONNXKIT_RETURN_IF_ERROR(DecodeRle(data, info, indices));
    for (size_t r = 0; r < h; ++r) {
      uint8_t* dst = row_out(r);
      for (size_t x = 0; x < w; ++x) put_index(dst + 3 * x, indices[r * w + x]);
    }
    return out;
  }
  const size_t stride = (w * info.bpp + 31) / 32 * 4;
  if (data.size() / stride < h) return Corrupt("BMP", "the pixel data is truncated");
  const Field fields[4] = {Field(info.masks[0]), Field(info.masks[1]), Field(info.masks[2]),
                           Field(info.masks[3])};
  for (size_t r = 0; r < h; ++r) {
    const uint8_t* src = data.data() + r * stride;
    uint8_t* dst = row_out(r);
    for (size_t x = 0; x < w; ++x) {
      uint8_t* px = dst + static_cast<size_t>(out.channels) * x;
      switch (info.bpp) {
        case 1:
        case 2:
        case 4:
        case 8: {
          const size_t bit = x * info.bpp;
          const uint32_t index = (src[bit / 8] >> (8 - info.bpp - bit % 8)) & ((1U << info.bpp) - 1);
          put_index(px, index);
          break;
        }
        case 24:
          px[0] = src[3 * x + 2];
          px[1] = src[3 * x + 1];
          px[2] = src[3 * x];
          break;
        default: {
          const uint32_t pixel = info.bpp == 16 ? U16({src, stride}, 2 * x) : U32({src, stride}, 4 * x);
          for (int c = 0; c < out.channels; ++c) px[c] = fields[c].Of(pixel);
        }
      }
    }
  }
  return out;
}

namespace {

// ---- PNM ----

class PnmReader {
 public:
  explicit PnmReader(std::span<const uint8_t> b) : b_(b) {}
  // The next header or ASCII number; skips whitespace and # comments.
  absl::StatusOr<uint32_t> Number() {
    while (at_ < b_.size()) {
      if (IsPnmSpace(b_[at_])) {
        ++at_;
      } else if (b_[at_] == '#') {
        while (at_ < b_.size() && b_[at_] != '\n' && b_[at_] != '\r') ++at_;
      } else {
        break;
      }
    }
    if (at_ >= b_.size() || b_[at_] < '0' || b_[at_] > '9') return Corrupt("PNM", "a number is missing");
    uint64_t v = 0;
    while (at_ < b_.size() && b_[at_] >= '0' && b_[at_] <= '9') {
      v = v * 10 + (b_[at_++] - '0');
      if (v > 0xFFFFFFFFULL) return Corrupt("PNM", "a number is out of range");
    }
    return static_cast<uint32_t>(v);
  }
  // A P1 bit: the next 0 or 1, which may touch its neighbours.
  absl::StatusOr<uint32_t> Bit() {
    while (at_ < b_.size()) {
      if (b_[at_] == '0' || b_[at_] == '1') return static_cast<uint32_t>(b_[at_++] - '0');
      if (b_[at_] == '#') {
        while (at_ < b_.size() && b_[at_] != '\n' && b_[at_] != '\r') ++at_;
      } else if (IsPnmSpace(b_[at_])) {
        ++at_;
      } else {
        break;
      }
    }
    return Corrupt("PNM", "the bitmap is truncated");
  }
  // Past the single whitespace character that ends a binary header.
  absl::StatusOr<std::span<const uint8_t>> Raster() {
    if (at_ >= b_.size() || !IsPnmSpace(b_[at_]))
      return Corrupt("PNM", "the header does not end in whitespace");
    return b_.subspan(at_ + 1);
  }
  void Skip(size_t n) { at_ += n; }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<RawImage> DecodePnm(std::span<const uint8_t> b, int64_t max_pixels) {
  if (b.size() < 3 || b[0] != 'P' || b[1] < '1' || b[1] > '6') return Corrupt("PNM", "no P1-P6 signature");
  const int kind = b[1] - '0';
  PnmReader reader(b);
  reader.Skip(2);
  ONNXKIT_ASSIGN_OR_RETURN(uint32_t width, reader.Number());
  ONNXKIT_ASSIGN_OR_RETURN(uint32_t height, reader.Number());
  uint32_t maxval = 1;
  const bool bitmap = kind == 1 || kind == 4;
  if (!bitmap) {
    ONNXKIT_ASSIGN_OR_RETURN(maxval, reader.Number());
    if (maxval == 0 || maxval > 65535)
      return Corrupt("PNM", absl::StrCat("maxval ", maxval, " is out of range"));
  }
  ONNXKIT_RETURN_IF_ERROR(CheckImageSize(height, width, "PNM", max_pixels));
  RawImage out;
  ONNXKIT_RETURN_IF_ERROR(AllocatePixels(out, height, width, (kind == 3 || kind == 6) ? 3 : 1));
  const size_t samples = out.size();
  uint8_t* pixels = out.data();
  auto scale = [maxval](uint32_t v) -> uint8_t {
    v = std::min(v, maxval);
    return maxval == 255 ? static_cast<uint8_t>(v)
                         : static_cast<uint8_t>((uint64_t{v} * 255 + maxval / 2) / maxval);
  };
  if (kind == 1) {
    for (size_t i = 0; i < samples; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(uint32_t bit, reader.Bit());
      pixels[i] = bit ? 0 : 255;
    }
  } else if (kind == 2 || kind == 3) {
    for (size_t i = 0; i < samples; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(uint32_t v, reader.Number());
      pixels[i] = scale(v);
    }
  } else if (kind == 4) {
    ONNXKIT_ASSIGN_OR_RETURN(std::span<const uint8_t> raster, reader.Raster());
    const size_t stride = (static_cast<size_t>(width) + 7) / 8;
    if (raster.size() / stride < height) return Corrupt("PNM", "the bitmap is truncated");
    for (size_t y = 0; y < height; ++y) {
      for (size_t x = 0; x < width; ++x) {
        const bool black = (raster[y * stride + x / 8] >> (7 - x % 8)) & 1;
        pixels[y * width + x] = black ? 0 : 255;
      }
    }
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(std::span<const uint8_t> raster, reader.Raster());
    const size_t bytes_per = maxval > 255 ? 2 : 1;
    if (raster.size() / bytes_per < samples) return Corrupt("PNM", "the raster is truncated");
    for (size_t i = 0; i < samples; ++i) {
      const uint32_t v = bytes_per == 2 ? (uint32_t{raster[2 * i]} << 8) | raster[2 * i + 1] : raster[i];
      pixels[i] = scale(v);
    }
  }
  return out;
}

absl::Status CheckImageSize(int64_t height, int64_t width, std::string_view format, int64_t max_pixels) {
  if (height <= 0 || width <= 0) return Corrupt(format, absl::StrCat("an image of ", width, " x ", height));
  if (width > max_pixels / height) {
    return absl::ResourceExhaustedError(absl::StrCat(std::string(format), " image of ", width, " x ", height,
                                                     " pixels is larger than the decoder's limit of ",
                                                     max_pixels, " pixels"));
  }
  return absl::OkStatus();
}

absl::Status AllocatePixels(RawImage& image, int64_t height, int64_t width, int channels) {
  ONNXKIT_ASSIGN_OR_RETURN(image.pixels,
                           Tensor::AllocateUninitialized(pb::kUint8, {height, width, channels}));
  image.height = height;
  image.width = width;
  image.channels = channels;
  return absl::OkStatus();
}

ImageFormat DetectFormat(std::span<const uint8_t> b) {
  using std::string_view_literals::operator""sv;
  if (StartsWith(b, "\xFF\xD8\xFF"sv)) return ImageFormat::kJpeg;
  if (StartsWith(b, "\x89PNG\r\n\x1A\n"sv)) return ImageFormat::kPng;
  if (StartsWith(b, "BM"sv)) return ImageFormat::kBmp;
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' && IsPnmSpace(b[2]))
    return ImageFormat::kPnm;
  // Classic and big TIFF, either byte order.
  if (StartsWith(b, "II*\0"sv) || StartsWith(b, "MM\0*"sv) || StartsWith(b, "II+\0"sv) ||
      StartsWith(b, "MM\0+"sv)) {
    return ImageFormat::kTiff;
  }
  if (b.size() >= 12 && StartsWith(b, "RIFF"sv) && std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  // A JP2 file's signature box, or a bare codestream (SOC then SIZ).
  if (StartsWith(b, "\0\0\0\x0CjP  \r\n\x87\n"sv) || StartsWith(b, "\xFF\x4F\xFF\x51"sv)) {
    return ImageFormat::kJpeg2000;
  }
  return ImageFormat::kUnknown;
}

std::string_view FormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kPnm:
      return "PNM";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kTiff:
      return "TIFF";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kJpeg2000:
      return "JPEG 2000";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

absl::StatusOr<RawImage> DecodeRaw(std::span<const uint8_t> bytes, int64_t max_pixels) {
  absl::StatusOr<RawImage> image;
  switch (DetectFormat(bytes)) {
    case ImageFormat::kBmp:
      image = DecodeBmp(bytes, max_pixels);
      break;
    case ImageFormat::kPnm:
      image = DecodePnm(bytes, max_pixels);
      break;
    case ImageFormat::kJpeg:
      image = DecodeJpeg(bytes, max_pixels);
      break;
    case ImageFormat::kPng:
      image = DecodePng(bytes, max_pixels);
      break;
    case ImageFormat::kTiff:
      image = DecodeTiff(bytes, max_pixels);
      break;
    case ImageFormat::kWebp:
      image = DecodeWebp(bytes, max_pixels);
      break;
    case ImageFormat::kJpeg2000:
      image = DecodeJpeg2000(bytes, max_pixels);
      break;
    case ImageFormat::kUnknown:
      return absl::DataLossError(
          "not an image: no BMP, JPEG, JPEG 2000, PNG, PNM, TIFF or WebP signature at the start of the "
          "stream");
  }
  if (image.ok()) {
    const RawImage& r = *image;
    const bool consistent =
        r.height > 0 && r.width > 0 && r.channels >= 1 && r.channels <= 4 && r.pixels.nbytes() == r.size();
    if (!consistent) return absl::InternalError("an image decoder gave pixels that do not match its size");
  }
  return image;
}

void ToPixelFormat(const RawImage& raw, PixelFormat format, uint8_t* out) {
  const size_t n = static_cast<size_t>(raw.height * raw.width);
  const size_t in_c = static_cast<size_t>(raw.channels);
  const bool gray_source = raw.channels <= 2;
  const uint8_t* src = raw.data();
  if (format == PixelFormat::kGrayscale) {
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = src + i * in_c;
      out[i] = gray_source
                   ? p[0]
                   : static_cast<uint8_t>((19595U * p[0] + 38470U * p[1] + 7471U * p[2] + 0x8000U) >> 16);
    }
    return;
  }
  const bool bgr = format == PixelFormat::kBgr;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = src + i * in_c;
    uint8_t* q = out + 3 * i;
    if (gray_source) {
      q[0] = q[1] = q[2] = p[0];
    } else {
      q[0] = p[bgr ? 2 : 0];
      q[1] = p[1];
      q[2] = p[bgr ? 0 : 2];
    }
  }
}

}  // namespace image

// ImageDecoder (20): a 1-D uint8 stream in, [H, W, 3] or [H, W, 1] uint8
// out; [0, 0, C] for a stream that is not a decodable image (the operator's
// definition: "it will return an empty matrix"). Images past the size limit
// and formats this build cannot read are errors, not empty images.
absl::Status ImageDecoder(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* stream, ctx.Input(0));
  if (stream->dtype() != pb::kUint8 || stream->rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoded_stream must be a 1-D uint8 tensor, not ", DescribeTensor(*stream)));
  }
  const std::string name = AttrString(ctx.node(), "pixel_format", "RGB");
  image::PixelFormat format;
  if (name == "RGB") {
    format = image::PixelFormat::kRgb;
  } else if (name == "BGR") {
    format = image::PixelFormat::kBgr;
  } else if (name == "Grayscale") {
    format = image::PixelFormat::kGrayscale;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("pixel_format \"", name, "\" is not one of \"RGB\", \"BGR\", \"Grayscale\""));
  }
  const int64_t channels = format == image::PixelFormat::kGrayscale ? 1 : 3;
  absl::StatusOr<image::RawImage> raw =
      image::DecodeRaw({stream->data<uint8_t>(), static_cast<size_t>(stream->size())});
  if (!raw.ok()) {
    if (absl::IsDataLoss(raw.status())) return ctx.AllocateOutput(0, pb::kUint8, {0, 0, channels}).status();
    return raw.status();
  }
  if (format == image::PixelFormat::kRgb && raw->channels == 3) {
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(raw->pixels)));  // already as asked
  }
  ONNXKIT_ASSIGN_OR_RETURN(
      Tensor * out, ctx.AllocateOutputUninitialized(0, pb::kUint8, {raw->height, raw->width, channels}));
  image::ToPixelFormat(*raw, format, out->mutable_data<uint8_t>());
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
