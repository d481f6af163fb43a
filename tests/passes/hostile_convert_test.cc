// `onnxkit convert` on input it should refuse, never crash on: every model
// of the hostile catalogue (testdata/hostile) that loads, to old and new
// opsets, with and without verification; and a node of every op that has
// an adapter row, left without its operands or given scalars of the wrong
// types, across that row's step. Each gives a result or an error that is
// not internal, and a result passes ir::Verify.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/ir/ir.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter.h"
#include "passes/convert/convert.h"
#include "runner/tensor.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;
using passes::convert::ConvertOptions;

// Converts `loaded` to `opset`; expects no internal error and, for a
// result without blockers, a model that loads and verifies. True when
// converted.
bool ConvertsOrFailsCleanly(const io::LoadedModel& loaded, int64_t opset, bool verify) {
  ConvertOptions o;
  o.target_opset = opset;
  o.verify = verify;
  o.verify_options.timeout_seconds = 5;
  auto r = passes::convert::Convert(loaded, o);
  if (!r.ok()) {
    EXPECT_NE(r.status().code(), absl::StatusCode::kInternal) << r.status();
    return false;
  }
  if (!r->blockers.empty()) return false;
  auto reloaded = ir::FromProto(r->model);
  EXPECT_TRUE(reloaded.ok()) << reloaded.status();
  if (reloaded.ok()) {
    EXPECT_TRUE(ir::Verify(**reloaded).ok());
  }
  return true;
}

TEST(HostileConvertTest, EveryLoadableCatalogueModelConvertsOrFailsCleanly) {
  const std::vector<fs::path> models = HostileModels();
  ASSERT_GT(models.size(), 100u);
  runner::SetMemoryLimit(int64_t{1} << 30);
  int converted = 0;
  for (const fs::path& path : models) {
    auto loaded = io::LoadModel(path.string());
    if (!loaded.ok()) continue;
    for (int64_t opset : {7, 11, 17, 28}) {
      SCOPED_TRACE(absl::StrCat(path.filename().string(), " -> ", opset));
      converted += ConvertsOrFailsCleanly(*loaded, opset, /*verify=*/opset == 17);
    }
  }
  runner::SetMemoryLimit(0);
  EXPECT_GT(converted, 50);
}

// Attributes at the ends of int64 (a window of 2^63 - 1, ignore_index
// -2^63) become exact constants, never a double cast out of range.
TEST(HostileConvertTest, ExtremeIntegerAttributesConvertExactly) {
  for (int64_t window : {INT64_MAX, INT64_MIN, int64_t{1} << 60}) {
    GraphBuilder g("g");
    g.Input("q", pb::kFloat, std::vector<int64_t>{1, 2, 3, 4})
        .Input("k", pb::kFloat, std::vector<int64_t>{1, 2, 3, 4})
        .Input("v", pb::kFloat, std::vector<int64_t>{1, 2, 3, 4})
        .Node("Attention", {"q", "k", "v"}, {"y"},
              {AttrInt("left_window_size", window), AttrInt("right_window_size", window)})
        .Output("y", pb::kFloat);
    io::LoadedModel loaded;
    loaded.proto = ModelFromGraph(g.Build(), 25, 11);
    SCOPED_TRACE(window);
    for (int64_t opset : {22, 17}) ConvertsOrFailsCleanly(loaded, opset, /*verify=*/true);
    GraphBuilder nll("g");
    nll.Input("x", pb::kFloat, std::vector<int64_t>{3, 4})
        .Input("t", pb::kInt32, std::vector<int64_t>{3})
        .Node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"}, {AttrInt("ignore_index", window)})
        .Output("y", pb::kFloat);
    loaded.proto = ModelFromGraph(nll.Build(), 13, 8);
    ConvertsOrFailsCleanly(loaded, 11, /*verify=*/false);
  }
}

// One node of `op` with `inputs` (graph inputs; empty names are absent
// operands) and one output, at `opset`.
io::LoadedModel NodeModel(std::string_view op, const std::vector<std::string>& inputs, int32_t elem,
                          int64_t opset) {
  GraphBuilder g("g");
  for (const std::string& name : inputs) {
    if (!name.empty()) g.Input(name, elem, std::vector<int64_t>{});
  }
  g.Node(std::string(op), inputs, {"y"}).Output("y", elem);
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(g.Build(), opset, 10);
  return loaded;
}

TEST(HostileConvertTest, AdaptersRefuseNodesWithoutTheirOperands) {
  int rows = 0;
  for (const passes::convert::AdapterRow& row : passes::convert::AllAdapters()) {
    // Ops of ai.onnx.ml convert with --ml-opset; this covers ai.onnx rows.
    if (ops::FindSchema("", row.op, row.boundary) == nullptr) continue;
    ++rows;
    const bool down = row.direction == passes::convert::Direction::kDown;
    const int64_t from = down ? row.boundary : row.boundary - 1;
    const int64_t to = down ? std::max<int64_t>(row.boundary - 1, 7) : row.boundary;
    if (from < 1 || from == to) continue;
    const ops::OpSchema* schema = ops::FindSchema("", row.op, from);
    const int n = schema == nullptr ? 3 : std::min(schema->max_input(), 6);
    std::vector<std::vector<std::string>> shapes = {{}, {""}, std::vector<std::string>(n, "")};
    std::vector<std::string> scalars;
    for (int i = 0; i < n; ++i) scalars.push_back(absl::StrCat("i", i));
    shapes.push_back(scalars);
    for (const std::vector<std::string>& inputs : shapes) {
      for (int32_t elem : {pb::kFloat, pb::kInt64, pb::kBool}) {
        SCOPED_TRACE(absl::StrCat(std::string(row.op), " ", from, " -> ", to, " (", std::string(row.name),
                                  "), ", inputs.size(), " inputs of type ", elem));
        ConvertsOrFailsCleanly(NodeModel(row.op, inputs, elem, from), to, /*verify=*/false);
      }
    }
  }
  EXPECT_GT(rows, 100);
}

}  // namespace
}  // namespace onnxkit::testing
