// `onnxkit convert` over the node models of the ONNX backend suites present
// on this machine: each is converted up to opset 28 and down one and three
// steps; a conversion never fails outright (blocked nodes are fine), and
// wherever the original reproduces its expected outputs on the reference
// backend, the converted model does too. Skips when no suite is present.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "passes/convert/convert.h"
#include "tests/runner/conformance.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

namespace fs = std::filesystem;

int64_t SourceOpset(const pb::ModelProto& m) {
  for (const pb::OperatorSetIdProto& o : m.opset_import) {
    if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
  }
  return 0;
}

// Models drawing random numbers cannot reproduce fixed expected outputs
// (the original only matches by chance).
bool DrawsRandomNumbers(const pb::ModelProto& m) {
  static const std::set<std::string> kRandom = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
                                                "RandomUniformLike", "Multinomial"};
  if (!m.graph) return false;
  for (const pb::NodeProto& n : m.graph->node) {
    if (kRandom.count(n.op_type)) return true;
  }
  return false;
}

void ConvertSuite(const std::string& prefix) {
  std::vector<ConformanceCase> cases;
  for (ConformanceCase& c : CollectConformanceCases()) {
    if (c.id.rfind(prefix, 0) == 0) cases.push_back(std::move(c));
  }
  if (cases.empty()) GTEST_SKIP() << "suite " << prefix << " not present";
  fs::path tmp = MakeTempDir();
  int pairs = 0, converted = 0, proven = 0, original_fails = 0;
  for (const ConformanceCase& c : cases) {
    auto loaded = io::LoadModel(c.model);
    if (!loaded.ok()) continue;
    int64_t s = SourceOpset(loaded->proto);
    if (s < 7 || DrawsRandomNumbers(loaded->proto)) continue;
    if (!RunConformanceCase(c, runner::Backend::kReference).ok()) {
      ++original_fails;
      continue;
    }
    std::set<int64_t> targets = {28};
    if (s - 1 >= 7) targets.insert(s - 1);
    if (s - 3 >= 7) targets.insert(s - 3);
    targets.erase(s);
    for (int64_t t : targets) {
      ++pairs;
      passes::convert::ConvertOptions o;
      o.target_opset = t;
      o.verify = false;  // checked below against the suite's expected outputs
      auto r = passes::convert::Convert(*loaded, o);
      ASSERT_TRUE(r.ok()) << c.id << " -> " << t << ": " << r.status();
      if (!r->blockers.empty()) continue;
      ++converted;
      fs::path out = tmp / "model.onnx";
      ASSERT_TRUE(io::SaveModel(r->model, loaded->base_dir, out).ok()) << c.id;
      ConformanceCase conv = c;
      conv.model = out;
      absl::Status st = RunConformanceCase(conv, runner::Backend::kReference);
      EXPECT_TRUE(st.ok()) << c.id << " -> opset " << t << ": the converted model no longer reproduces the "
                           << "expected outputs: " << st;
      if (st.ok()) ++proven;
    }
  }
  std::printf("convert %s: %zu models (%d whose original fails), %d pairs, %d converted, %d proven\n",
              prefix.c_str(), cases.size(), original_fails, pairs, converted, proven);
}

TEST(ConvertSuiteTest, Onnx123NodeModelsConvertAndReproduceTheirOutputs) { ConvertSuite("onnx-1.23/node/"); }

TEST(ConvertSuiteTest, DebianNodeModelsConvertAndReproduceTheirOutputs) { ConvertSuite("debian/node/"); }

}  // namespace
}  // namespace onnxkit::testing
