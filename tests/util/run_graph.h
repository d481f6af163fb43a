// Running graphs built in code on a runner backend, for kernel tests:
// random inputs with a fixed seed, and the check that the cpu backend agrees
// with the reference kernels (the oracle) output by output.
//
//   GraphBuilder g("g");
//   g.Input("x").Node("Relu", {"x"}, {"y"}).Output("y");
//   ExpectCpuMatchesReference(g.Build(), {{"x", RandomFloats({2, 3}, 1)}});
#ifndef ONNXKIT_TESTS_UTIL_RUN_GRAPH_H_
#define ONNXKIT_TESTS_UTIL_RUN_GRAPH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/proto.h"
#include "runner/kernel_registry.h"
#include "runner/tensor.h"
#include "runner/value.h"

namespace onnxkit::testing {

using Feeds = std::vector<std::pair<std::string, runner::Tensor>>;

// Runs `graph` (opset `opset` of ai.onnx, plus ai.onnx.ml 5, com.microsoft 1,
// com.microsoft.nchwc 1 and ai.onnx.preview 1 imports) on `backend` with `feeds`; the graph outputs.
// `bf16`: SessionOptions::bf16.
absl::StatusOr<std::vector<runner::RtValue>> RunGraphOn(runner::Backend backend, const pb::GraphProto& graph,
                                                        const Feeds& feeds, int64_t opset = 18,
                                                        int threads = 1, bool bf16 = false);

// Runs one node `op` (of `domain`) on `inputs`, named x0, x1... (an
// undefined tensor leaves that input out), at `opset`; returns its
// `num_outputs` outputs y0, y1...
absl::StatusOr<std::vector<runner::RtValue>> RunSingleNode(
    const std::string& op, const std::vector<runner::Tensor>& inputs,
    std::vector<pb::AttributeProto> attributes = {}, int64_t opset = 21, int num_outputs = 1,
    const std::string& domain = "", runner::Backend backend = runner::Backend::kReference);
// How RunNodeOn builds the graph: inputs declared with their shapes (not
// only their types), and outputs left unnamed.
struct NodeRunOptions {
  bool declare_shapes = false;
  std::vector<int> omitted;  // output indices left unnamed (not computed)
};
// RunSingleNode with the backend first and NodeRunOptions.
absl::StatusOr<std::vector<runner::RtValue>> RunNodeOn(runner::Backend backend, const std::string& op,
                                                       const std::vector<runner::Tensor>& inputs,
                                                       std::vector<pb::AttributeProto> attributes,
                                                       int64_t opset, int num_outputs,
                                                       const std::string& domain,
                                                       const NodeRunOptions& options);
// The same, returning the outputs as tensors (an error when one is not).
absl::StatusOr<std::vector<runner::Tensor>> RunSingleNodeTensors(
    const std::string& op, const std::vector<runner::Tensor>& inputs,
    std::vector<pb::AttributeProto> attributes = {}, int64_t opset = 21, int num_outputs = 1);

// A float tensor of `shape` with values uniform in [lo, hi), fixed by `seed`.
runner::Tensor RandomFloats(std::vector<int64_t> shape, uint32_t seed, float lo = -1.f, float hi = 1.f);
// A tensor of `dtype` (int8, uint8, int32, int64) with values uniform in [lo, hi].
runner::Tensor RandomInts(int32_t dtype, std::vector<int64_t> shape, uint32_t seed, int64_t lo, int64_t hi);
// Tensors with given values: Floats, Int64s... in tests/util/tensors.h.

// Runs `graph` on the reference and the cpu backend and expects each output
// to have the same type and shape, and values within atol + rtol * |ref|
// (exact for integer and bool outputs). Reports the worst element.
void ExpectCpuMatchesReference(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset = 18,
                               double atol = 1e-5, double rtol = 1e-4);

// Runs one session per backend (reference and cpu) on each feed set in
// turn, for kernels that cache per input shape or treat initializers as
// constant, and expects every output close as above. The model imports
// ai.onnx `opset` and has `ir_version` (IR < 4 lists initializers as inputs).
void ExpectRepeatedRunsMatch(const pb::GraphProto& graph, const std::vector<Feeds>& runs, double atol = 1e-4,
                             int64_t opset = 18, int64_t ir_version = 9);

// An initializer named `name` holding `t` (raw data).
pb::TensorProto InitializerFrom(const std::string& name, const runner::Tensor& t);

// Expects two tensors equal in type and shape and close as above.
void ExpectTensorsClose(const runner::Tensor& expected, const runner::Tensor& actual, double atol,
                        double rtol, const std::string& what);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_UTIL_RUN_GRAPH_H_
