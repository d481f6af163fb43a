// Every model of the hostile catalogue (testdata/hostile) that loads goes
// through the default optimize pipeline, with and without verification:
// whatever the model holds (recursive functions, huge shapes, malformed
// tensors, outputs an op lacks), optimize returns a result or an error that
// is not internal, never crashes, and what it returns passes ir::Verify.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "lib/ir/ir.h"
#include "passes/optimize.h"
#include "passes/registry.h"
#include "runner/tensor.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

TEST(HostileOptimizeTest, EveryLoadableModelOptimizesOrFailsCleanly) {
  const std::vector<fs::path> models = HostileModels();
  ASSERT_GT(models.size(), 100u);
  runner::SetMemoryLimit(int64_t{1} << 30);
  int optimized = 0;
  for (const fs::path& path : models) {
    auto loaded = io::LoadModel(path.string());
    if (!loaded.ok()) continue;
    for (bool verify : {false, true}) {
      SCOPED_TRACE(path.filename().string() + (verify ? " (verified)" : ""));
      passes::OptimizeOptions options;
      options.pipeline = passes::DefaultPipeline();
      options.verify = verify;
      options.verify_options.timeout_seconds = 5;
      auto result = passes::Optimize(*loaded, options);
      if (!result.ok()) {
        EXPECT_NE(result.status().code(), absl::StatusCode::kInternal) << result.status();
        continue;
      }
      auto reloaded = ir::FromProto(result->model);
      ASSERT_TRUE(reloaded.ok()) << reloaded.status();
      EXPECT_TRUE(ir::Verify(**reloaded).ok());
      ++optimized;
    }
  }
  runner::SetMemoryLimit(0);
  EXPECT_GT(optimized, 50);
}

}  // namespace
}  // namespace onnxkit::testing
