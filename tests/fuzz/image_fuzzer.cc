// Fuzz target: bytes through ImageDecoder's decoders (runner/reference/
// image_decode.h), every format told by its signature, with a limit of 2^20
// pixels so that no stream can claim the fuzzer's memory. A decoder may
// refuse (DataLoss: corrupt or unknown; ResourceExhausted: too large),
// never crash, leak, read out of bounds or give pixels that do not match
// the size it reports; every pixel format is then produced from the image.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runner/reference/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace image = onnxkit::runner::reference::image;
  auto raw = image::DecodeRaw({data, size}, int64_t{1} << 20);
  if (!raw.ok()) {
    if (!absl::IsDataLoss(raw.status()) && !absl::IsResourceExhausted(raw.status())) __builtin_trap();
    return 0;
  }
  if (raw->height <= 0 || raw->width <= 0 || raw->height * raw->width > (int64_t{1} << 20)) __builtin_trap();
  std::vector<uint8_t> out(static_cast<size_t>(raw->height * raw->width) * 3);
  for (image::PixelFormat f :
       {image::PixelFormat::kRgb, image::PixelFormat::kBgr, image::PixelFormat::kGrayscale}) {
    image::ToPixelFormat(*raw, f, out.data());
  }
  return 0;
}
