// Helpers for pass tests (see pass_test_util.h).
#include "tests/passes/pass_test_util.h"

#include <memory>

#include "checker/checker.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "lib/ir/ir.h"
#include "passes/registry.h"
#include "runner/compare/compare.h"
#include "runner/session.h"
#include "absl/strings/str_cat.h"

namespace onnxkit::testing {
namespace {

void CountOps(const pb::GraphProto& g, std::string_view op, int* count, int* nodes) {
  for (const pb::NodeProto& n : g.node) {
    *nodes += 1;
    if (n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx")) *count += 1;
    for (const pb::AttributeProto& a : n.attribute) {
      if (a.g) CountOps(*a.g, op, count, nodes);
      for (const pb::GraphProto& sub : a.graphs) CountOps(sub, op, count, nodes);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<runner::RtValue>> RunModel(const pb::ModelProto& model, const Feeds& feeds) {
  io::LoadedModel loaded;
  loaded.proto = model;
  auto session = runner::Session::Create(std::move(loaded), {});
  if (!session.ok()) return session.status();
  std::vector<std::pair<std::string, runner::RtValue>> values;
  for (const auto& [name, t] : feeds) {
    for (const ir::Value* in : (*session)->FeedInputs()) {
      if (in->name() == name) values.emplace_back(name, runner::RtValue::FromTensor(t));
    }
  }
  return (*session)->Run(std::move(values));
}

absl::StatusOr<PassResult> RunPasses(const pb::ModelProto& model, std::string_view passes,
                                     passes::ManagerOptions options) {
  auto pipeline = passes::ParsePipeline(passes);
  if (!pipeline.ok()) return pipeline.status();
  auto ir_model = ir::FromProto(model);
  if (!ir_model.ok()) return ir_model.status();
  auto report = passes::RunPipeline(*ir_model, *pipeline, options);
  if (!report.ok()) return report.status();
  absl::Status verified = ir::Verify(**ir_model);
  if (!verified.ok()) return absl::InternalError(absl::StrCat("ir::Verify after passes: ", verified.message()));
  std::string bytes;
  io::EncodeTo(ir::ToProto(std::move(*ir_model)), &bytes);
  auto decoded = io::DecodeModel(bytes);
  if (!decoded.ok()) return decoded.status();
  PassResult result;
  result.model = std::move(*decoded);
  result.report = std::move(*report);
  result.rewrites = static_cast<int64_t>(result.report.rewrites.size());
  return result;
}

int OpCount(const pb::ModelProto& model, std::string_view op) {
  int count = 0, nodes = 0;
  if (model.graph) CountOps(*model.graph, op, &count, &nodes);
  return count;
}

int NodeCount(const pb::ModelProto& model) {
  int count = 0, nodes = 0;
  if (model.graph) CountOps(*model.graph, "", &count, &nodes);
  return nodes;
}

void ExpectSameOutputs(const pb::ModelProto& before, const pb::ModelProto& after, const Feeds& feeds, double atol,
                       double rtol) {
  auto a = RunModel(before, feeds);
  ASSERT_TRUE(a.ok()) << "original model: " << a.status();
  auto b = RunModel(after, feeds);
  ASSERT_TRUE(b.ok()) << "rewritten model: " << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    runner::Metrics m = runner::CompareValues((*b)[i], (*a)[i], runner::Tolerance{atol, rtol});
    EXPECT_TRUE(m.comparable) << "output " << i << ": " << m.mismatch;
    EXPECT_TRUE(m.within_tolerance) << "output " << i << ": " << runner::FormatMetrics(m);
  }
}

void ExpectValid(const pb::ModelProto& model) {
  checker::CheckOptions options;
  options.full = true;
  checker::CheckResult r = checker::CheckModel(model, {}, options, "model");
  std::string all;
  for (const checker::Diagnostic& d : r.diagnostics) all += d.location + ": " + d.message + "\n";
  EXPECT_EQ(r.errors, 0) << all;
}

passes::convert::ConvertResult ConvertTo(const pb::ModelProto& m, int64_t opset) {
  io::LoadedModel loaded;
  loaded.proto = m;
  passes::convert::ConvertOptions o;
  o.target_opset = opset;
  o.verify = false;
  auto r = passes::convert::Convert(loaded, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : passes::convert::ConvertResult{};
}

}  // namespace onnxkit::testing
