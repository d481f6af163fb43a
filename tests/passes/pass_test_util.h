// Helpers for pass tests: run a pipeline over a model built in code, count
// ops, and prove a rewrite by executing the model before and after on the
// reference backend.
//
//   pb::ModelProto m = ModelFromGraph(GraphBuilder("g")....Build(), 17);
//   ASSERT_OK_AND_ASSIGN(PassResult r, RunPasses(m, "fuse-conv-bn"));
//   EXPECT_EQ(OpCount(r.model, "BatchNormalization"), 0);
//   ExpectSameOutputs(m, r.model, {{"x", RandomFloats({1, 3, 8, 8}, 1)}});
#ifndef ONNXKIT_TESTS_PASSES_PASS_TEST_UTIL_H_
#define ONNXKIT_TESTS_PASSES_PASS_TEST_UTIL_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/io/proto.h"
#include "passes/convert/convert.h"
#include "passes/manager.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {

struct PassResult {
  pb::ModelProto model;
  passes::ManagerReport report;
  int64_t rewrites = 0;  // total applied
};

// Runs the comma-separated pipeline `passes` over `model` (which must pass
// ir::FromProto) and returns the result, re-encoded and decoded again so
// that it is exactly what a saved file would hold. Also checks ir::Verify
// on the result.
absl::StatusOr<PassResult> RunPasses(const pb::ModelProto& model, std::string_view passes,
                                     passes::ManagerOptions options = {});

// Runs `model` on the reference backend with the feeds it takes of `feeds`.
absl::StatusOr<std::vector<runner::RtValue>> RunModel(const pb::ModelProto& model, const Feeds& feeds);

// Occurrences of `op` (ai.onnx) in every graph of the model (bodies too).
int OpCount(const pb::ModelProto& model, std::string_view op);
// Nodes of every graph.
int NodeCount(const pb::ModelProto& model);

// Runs both models on the reference backend with `feeds` and expects every
// output equal in type and shape and within atol + rtol * |expected|.
void ExpectSameOutputs(const pb::ModelProto& before, const pb::ModelProto& after, const Feeds& feeds,
                       double atol = 1e-5, double rtol = 1e-5);

// `onnxkit convert --opset` of `m` without verification; a failed
// conversion is a test failure (and an empty result).
passes::convert::ConvertResult ConvertTo(const pb::ModelProto& m, int64_t opset);

// `check --full` finds no error in the model (structure, nodes, inference).
void ExpectValid(const pb::ModelProto& model);

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_PASSES_PASS_TEST_UTIL_H_
