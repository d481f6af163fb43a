// The default optimize pipeline over every model of the ONNX backend suites
// present on this machine: optimizing never fails, the result passes
// ir::Verify, and wherever the original model reproduces its expected
// outputs on the reference backend, the optimized model does too (the same
// tolerances as the conformance driver). Skips when no suite is present.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "passes/optimize.h"
#include "passes/registry.h"
#include "tests/runner/conformance.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

void OptimizeSuite(const std::string& prefix) {
  std::vector<ConformanceCase> cases;
  for (ConformanceCase& c : CollectConformanceCases()) {
    if (c.id.rfind(prefix, 0) == 0) cases.push_back(std::move(c));
  }
  if (cases.empty()) GTEST_SKIP() << "suite " << prefix << " not present";
  fs::path tmp = MakeTempDir();
  passes::OptimizeOptions options;
  options.pipeline = passes::DefaultPipeline();
  options.verify = false;  // checked below against the suite's expected outputs
  int changed = 0, proven = 0, original_fails = 0;
  int64_t nodes_before = 0, nodes_after = 0;
  for (const ConformanceCase& c : cases) {
    auto loaded = io::LoadModel(c.model);
    ASSERT_TRUE(loaded.ok()) << c.id << ": " << loaded.status();
    auto result = passes::Optimize(*loaded, options);
    ASSERT_TRUE(result.ok()) << c.id << ": " << result.status();
    EXPECT_TRUE(result->report.failures.empty())
        << c.id << ": pass " << result->report.failures[0].pass << " failed: " << result->report.failures[0].message;
    nodes_before += result->nodes_before;
    nodes_after += result->nodes_after;
    if (result->report.rewrites.empty()) continue;
    ++changed;
    if (!RunConformanceCase(c, runner::Backend::kReference).ok()) {
      ++original_fails;
      continue;
    }
    fs::path out = tmp / "model.onnx";
    ASSERT_TRUE(io::SaveModel(result->model, loaded->base_dir, out).ok()) << c.id;
    ConformanceCase optimized = c;
    optimized.model = out;
    absl::Status s = RunConformanceCase(optimized, runner::Backend::kReference);
    EXPECT_TRUE(s.ok()) << c.id << ": the optimized model no longer reproduces the expected outputs: " << s;
    if (s.ok()) ++proven;
  }
  std::printf("optimize %s: %zu models, %d changed (%d proven against expected outputs, %d whose original "
              "fails anyway); nodes %lld -> %lld\n",
              prefix.c_str(), cases.size(), changed, proven, original_fails, static_cast<long long>(nodes_before),
              static_cast<long long>(nodes_after));
}

TEST(OptimizeSuiteTest, Onnx123SuiteModelsStillReproduceTheirOutputs) { OptimizeSuite("onnx-1.23/"); }

TEST(OptimizeSuiteTest, DebianSuiteModelsStillReproduceTheirOutputs) { OptimizeSuite("debian/"); }

}  // namespace
}  // namespace onnxkit::testing
