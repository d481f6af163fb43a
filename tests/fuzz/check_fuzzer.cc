// Fuzz target: model bytes through the decoder, then the whole checker on the
// decoded model (checker::CheckModel, in memory, with --full) and the JSON
// and text reports. The checker must return; every diagnostic must name a
// rule; the verdict must agree with the diagnostics; the JSON report must be
// valid UTF-8 whatever bytes the model's names hold.
//
// External data resolves against a private folder holding the data files the
// hostile seeds (testdata/hostile) name, so location and range checks run
// on real files; never against the working directory.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "checker/checker.h"
#include "checker/diagnostic.h"
#include "checker/report.h"
#include "lib/io/proto_codec.h"
#include "tests/util/utf8.h"

namespace {

namespace fs = std::filesystem;

fs::path* base_dir = nullptr;

void RemoveBaseDir() {
  std::error_code ec;
  if (base_dir != nullptr) fs::remove_all(*base_dir, ec);
}

void WriteZeros(const fs::path& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << std::string(bytes, '\0');
}

const fs::path& BaseDir() {
  if (base_dir == nullptr) {
    char name[] = "/tmp/onnxkit_check_fuzzer_XXXXXX";
    if (mkdtemp(name) == nullptr) abort();
    base_dir = new fs::path(name);
    WriteZeros(*base_dir / "w.bin", 64);
    WriteZeros(*base_dir / "real.bin", 16);
    WriteZeros(*base_dir / "w..bin", 8);
    fs::create_directories(*base_dir / "sub");
    fs::create_directories(*base_dir / "wdir");
    std::atexit(RemoveBaseDir);
  }
  return *base_dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using onnxkit::checker::RuleKind;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto model = onnxkit::io::DecodeModel(bytes);
  if (!model.ok()) return 0;

  onnxkit::checker::CheckOptions options;
  options.full = true;
  options.strict_custom = (size & 1) != 0;
  options.werror = (size & 2) != 0;
  onnxkit::checker::CheckResult result =
      onnxkit::checker::CheckModel(*model, BaseDir(), options, "fuzz.onnx");

  bool refused = false;
  int errors = 0;
  for (const onnxkit::checker::Diagnostic& d : result.diagnostics) {
    if (d.rule == nullptr) __builtin_trap();
    refused |= d.rule->kind == RuleKind::kRefused;
    errors += d.severity == onnxkit::checker::Severity::kError;
  }
  if (refused != result.refused || errors != result.errors) __builtin_trap();
  if (result.diagnostics.size() > static_cast<size_t>(onnxkit::checker::kMaxDiagnostics)) __builtin_trap();

  std::vector<onnxkit::checker::CheckResult> results;
  results.push_back(std::move(result));
  if (!onnxkit::testing::IsValidUtf8(onnxkit::checker::RenderJson(results))) __builtin_trap();
  (void)onnxkit::checker::RenderText(results);
  return 0;
}
