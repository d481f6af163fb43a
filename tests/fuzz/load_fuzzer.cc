// Fuzz target: bytes written to a file and loaded with io::LoadModel, the
// path every subcommand takes (size and file-kind checks, mmap, decoding
// with raw_data kept as views into the mapping, the not-a-model checks).
// A model LoadModel accepts must also decode from the bytes in memory, and
// both must re-encode identically (views and copies hold the same bytes).
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"

namespace {

namespace fs = std::filesystem;

fs::path* folder = nullptr;

void RemoveFolder() {
  std::error_code ec;
  if (folder != nullptr) fs::remove_all(*folder, ec);
}

const fs::path& ModelPath() {
  static const fs::path* path = [] {
    char name[] = "/tmp/onnxkit_load_fuzzer_XXXXXX";
    if (mkdtemp(name) == nullptr) abort();
    folder = new fs::path(name);
    std::atexit(RemoveFolder);
    return new fs::path(*folder / "model.onnx");
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream out(ModelPath(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) abort();  // the fuzzing machine's problem, not a finding
  }
  auto loaded = onnxkit::io::LoadModel(ModelPath());
  if (!loaded.ok()) return 0;
  auto decoded = onnxkit::io::DecodeModel(bytes);
  if (!decoded.ok()) __builtin_trap();
  if (onnxkit::io::Encode(loaded->proto) != onnxkit::io::Encode(*decoded)) __builtin_trap();
  return 0;
}
