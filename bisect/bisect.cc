// RunBisect: the whole reduction, from a model path to a written bundle.
#include "bisect/bisect.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/engine.h"
#include "lib/io/model_io.h"

namespace onnxkit::bisect {
absl::StatusOr<std::vector<runner::InputSpec>> SampleSpecs(const BisectOptions& options) {
  runner::InputSpec base = options.inputs;
  if (options.input_dirs.empty()) {
    if (base.dir.empty() && base.files.empty()) base.random = true;
    return std::vector<runner::InputSpec>{base};
  }
  std::vector<runner::InputSpec> specs;
  for (const std::string& dir : options.input_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--inputs ", dir, ": not a folder"));
    }
    std::vector<std::string> sets;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
        sets.push_back(e.path().string());
      }
    }
    std::sort(sets.begin(), sets.end());  // test_data_set_10 after _1: name order
    if (sets.empty()) sets.push_back(dir);
    for (const std::string& set : sets) {
      runner::InputSpec s = base;
      s.dir = set;
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

absl::StatusOr<BisectOutcome> RunBisect(const BisectOptions& options) {
  ONNXKIT_ASSIGN_OR_RETURN(io::LoadedModel loaded, io::LoadModel(options.model_path));
  if (!loaded.proto.graph) return absl::InvalidArgumentError(absl::StrCat(options.model_path, ": model has no graph"));
  ScratchDir scratch("onnxkit-bisect");
  if (scratch.path().empty()) return absl::PermissionDeniedError("cannot create a scratch folder");
  OracleOptions oracle_options = options.oracle;
  oracle_options.base_dir = loaded.base_dir;
  oracle_options.scratch = scratch.path() / "calls";
  oracle_options.jobs = std::max(1, options.reduce.jobs);

  bool needs_golden = oracle_options.kind != OracleKind::kCheckFails && oracle_options.kind != OracleKind::kCommand;
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<runner::InputSpec> specs, SampleSpecs(options));
  BisectOutcome outcome;
  std::unique_ptr<GoldenStore> golden;
  std::unique_ptr<Oracle> oracle;
  for (size_t k = 0; k < specs.size() && !outcome.interesting; ++k) {
    golden = std::make_unique<GoldenStore>(scratch.path() / absl::StrCat("golden_", k));
    std::string run_error;
    absl::Status recorded = golden->Record(loaded, specs[k], &run_error, oracle_options.timeout_seconds);
    if (!recorded.ok() && needs_golden) return recorded;
    ONNXKIT_ASSIGN_OR_RETURN(oracle, MakeOracle(oracle_options, golden.get()));
    outcome.oracle = oracle->Describe();
    outcome.sample = !specs[k].dir.empty()     ? specs[k].dir
                     : !specs[k].files.empty() ? "--input files"
                                               : absl::StrCat("random, seed ", specs[k].seed);
    ++outcome.samples_tried;
    outcome.why.clear();
    ONNXKIT_ASSIGN_OR_RETURN(outcome.interesting, oracle->Prepare(loaded.proto, &outcome.why));
    if (!needs_golden) break;  // the samples do not matter to this oracle
  }
  if (!outcome.interesting) {
    if (outcome.samples_tried > 1) outcome.why = absl::StrCat(outcome.why, " (on any of ", outcome.samples_tried, " samples)");
    return outcome;
  }

  TypeSource types(golden.get(), infer::InferredTypes(loaded.proto));
  ReduceOptions reduce = options.reduce;
  // One call of the budget stays for the final test of the result.
  reduce.max_calls = std::max<int64_t>(reduce.max_calls - 1, 0);
  Reducer reducer(loaded.proto, oracle.get(), golden.get(), &types, oracle_options, reduce);
  reducer.AddCalls(outcome.samples_tried);  // Prepare
  ONNXKIT_ASSIGN_OR_RETURN(outcome.result, reducer.Run());
  // The result must still fail: test it once more, as the bundle will
  // (the original, unchanged, was tested by Prepare).
  int64_t accepted = 0;
  for (const StrategyEffect& e : outcome.result.effects) accepted += e.accepted;
  if (accepted > 0) {
    auto again = oracle->Test(outcome.result.model);
    outcome.reproduces = again.ok() && *again;
    ++outcome.result.calls;
  } else {
    outcome.reproduces = true;
  }
  if (!options.output_dir.empty())
    ONNXKIT_RETURN_IF_ERROR(WriteBundle(options, outcome, *golden, *oracle, loaded.base_dir));
  return outcome;
}

}  // namespace onnxkit::bisect
