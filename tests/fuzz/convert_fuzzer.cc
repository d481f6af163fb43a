// Fuzz target: model bytes through the decoder, then `convert` to an opset
// picked by the input's size (7 ... 28, down and up), without verification
// (running arbitrary models is the runner's fuzzing). Conversion may refuse
// or block, never crash; when the decoded model passed ir::FromProto, a
// model it writes must too, and must survive encoding and decoding again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "lib/ir/ir.h"
#include "passes/convert/convert.h"
#include "runner/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int64_t kTargets[] = {7, 9, 10, 11, 12, 13, 15, 17, 18, 19, 21, 23, 25, 28};
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto proto = onnxkit::io::DecodeModel(bytes);
  if (!proto.ok()) return 0;
  const bool valid = onnxkit::ir::FromProto(*proto).ok();
  // Expansions that build constants allocate within a bounded budget.
  onnxkit::runner::SetMemoryLimit(int64_t{256} << 20);
  onnxkit::io::LoadedModel loaded;
  loaded.proto = *std::move(proto);
  onnxkit::passes::convert::ConvertOptions options;
  options.target_opset = kTargets[size % (sizeof(kTargets) / sizeof(kTargets[0]))];
  options.verify = false;
  auto result = onnxkit::passes::convert::Convert(loaded, options);
  if (!result.ok() || !result->blockers.empty() || !valid) return 0;
  std::string encoded = onnxkit::io::Encode(result->model);
  auto again = onnxkit::io::DecodeModel(encoded);
  if (!again.ok()) __builtin_trap();
  if (!onnxkit::ir::FromProto(*std::move(again)).ok()) __builtin_trap();
  return 0;
}
