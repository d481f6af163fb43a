// Fuzz target: model bytes through the protobuf decoder, then a re-encode and
// decode that must reproduce the same bytes (the codec is lossless).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lib/io/proto_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto model = onnxkit::io::DecodeModel(bytes);
  if (!model.ok()) return 0;
  std::string once = onnxkit::io::Encode(*model);
  auto again = onnxkit::io::DecodeModel(once);
  if (!again.ok() || onnxkit::io::Encode(*again) != once) __builtin_trap();
  return 0;
}
