// Fuzz target: model bytes through the decoder and ir::FromProto, then the
// default optimize pipeline (no verification: running arbitrary models is
// the runner's fuzzing), with a small fold budget so that folding stays
// cheap. The pipeline must return; a model it returns must pass ir::Verify
// and survive lowering, encoding and decoding again. Passes may fail on a
// hostile model (the manager undoes and reports them), never crash.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lib/io/proto_codec.h"
#include "lib/ir/ir.h"
#include "passes/manager.h"
#include "passes/registry.h"
#include "runner/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto proto = onnxkit::io::DecodeModel(bytes);
  if (!proto.ok()) return 0;
  auto model = onnxkit::ir::FromProto(*std::move(proto));
  if (!model.ok()) return 0;
  // Kernels folding constants allocate within a bounded budget.
  onnxkit::runner::SetMemoryLimit(int64_t{256} << 20);
  onnxkit::passes::ManagerOptions options;
  options.pass.fold_limit_bytes = 4096;
  options.max_iterations = 3;
  auto report = onnxkit::passes::RunPipeline(*model, onnxkit::passes::DefaultPipeline(), options);
  if (!report.ok()) return 0;
  if (!onnxkit::ir::Verify(**model).ok()) __builtin_trap();
  std::string encoded = onnxkit::io::Encode(onnxkit::ir::ToProto(std::move(*model)));
  auto again = onnxkit::io::DecodeModel(encoded);
  if (!again.ok()) __builtin_trap();
  if (!onnxkit::ir::FromProto(*std::move(again)).ok()) __builtin_trap();
  return 0;
}
