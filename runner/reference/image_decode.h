// Image decoding for ImageDecoder (opset 20): BMP and the PNM family (read
// here), JPEG, PNG, TIFF, WebP and JPEG 2000 (through libjpeg, libpng,
// libtiff, libwebp and OpenJPEG, each where the build found it).
//
// The format is told by the stream's first bytes, never by a name. Every
// size read from a stream is checked before anything is allocated from it.
#ifndef ONNXKIT_RUNNER_REFERENCE_IMAGE_DECODE_H_
#define ONNXKIT_RUNNER_REFERENCE_IMAGE_DECODE_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/tensor.h"

namespace onnxkit::runner::reference::image {

// The largest image decoded by default, in pixels (height x width): 2^28,
// a 16384 x 16384 image. Beyond the limit a stream is refused before its
// pixels are read, and the codecs' own working memory is bounded from it.
inline constexpr int64_t kMaxPixels = int64_t{1} << 28;

// 8-bit samples, interleaved, rows top to bottom: channels is 1 (gray),
// 2 (gray, alpha), 3 (RGB) or 4 (RGB, alpha). The pixels are a uint8
// tensor [height, width, channels], so they count against the process's
// tensor memory limit.
struct RawImage {
  int64_t height = 0;
  int64_t width = 0;
  int channels = 0;
  Tensor pixels;
  uint8_t* data() { return pixels.mutable_data<uint8_t>(); }
  const uint8_t* data() const { return pixels.data<uint8_t>(); }
  size_t size() const { return static_cast<size_t>(height * width * channels); }
};

// Sets the size of `image` and allocates its pixels (uninitialized).
absl::Status AllocatePixels(RawImage& image, int64_t height, int64_t width, int channels);

enum class ImageFormat { kUnknown, kBmp, kPnm, kJpeg, kPng, kTiff, kWebp, kJpeg2000 };

// The format whose signature starts `bytes`; kUnknown when none does.
ImageFormat DetectFormat(std::span<const uint8_t> bytes);
std::string_view FormatName(ImageFormat format);

// Decodes one image (the first frame or page of a stream holding several).
// DataLoss: the stream is not an image of a known format, or it is
// truncated or corrupt (ImageDecoder then gives an empty image, as the
// operator's definition says). ResourceExhausted: the image is larger than
// `max_pixels`, or the pixels are past the tensor memory limit.
// Unimplemented: the build has no decoder for the format.
absl::StatusOr<RawImage> DecodeRaw(std::span<const uint8_t> bytes, int64_t max_pixels = kMaxPixels);

enum class PixelFormat { kRgb, kBgr, kGrayscale };

// Writes `raw` into `out` as [height, width, 3] in RGB or BGR order, or
// [height, width, 1] gray. Gray sources are repeated into the three channels; alpha is dropped
// (not composited); color becomes gray as L = (19595 R + 38470 G + 7471 B +
// 2^15) >> 16 (ITU-R 601 weights in 16-bit fixed point).
void ToPixelFormat(const RawImage& raw, PixelFormat format, uint8_t* out);

// The codec decoders (image_codecs.cc), each given a stream of its format.
absl::StatusOr<RawImage> DecodeJpeg(std::span<const uint8_t> bytes, int64_t max_pixels);
absl::StatusOr<RawImage> DecodePng(std::span<const uint8_t> bytes, int64_t max_pixels);
absl::StatusOr<RawImage> DecodeTiff(std::span<const uint8_t> bytes, int64_t max_pixels);
absl::StatusOr<RawImage> DecodeWebp(std::span<const uint8_t> bytes, int64_t max_pixels);
absl::StatusOr<RawImage> DecodeJpeg2000(std::span<const uint8_t> bytes, int64_t max_pixels);
// Read here (image_decode.cc).
absl::StatusOr<RawImage> DecodeBmp(std::span<const uint8_t> bytes, int64_t max_pixels);
absl::StatusOr<RawImage> DecodePnm(std::span<const uint8_t> bytes, int64_t max_pixels);

// OK when height x width is within max_pixels and both are positive;
// DataLoss for an empty or negative size, ResourceExhausted beyond the limit.
absl::Status CheckImageSize(int64_t height, int64_t width, std::string_view format, int64_t max_pixels);

}  // namespace onnxkit::runner::reference::image

#endif  // ONNXKIT_RUNNER_REFERENCE_IMAGE_DECODE_H_
