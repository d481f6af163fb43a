// RunBisect: the whole reduction, from a model path to a written bundle.
#include "bisect/bisect.h"

#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/engine.h"
#include "lib/io/model_io.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;

// A fresh private scratch folder, removed when this goes out of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "onnxkit-bisect-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

absl::StatusOr<BisectOutcome> RunBisect(const BisectOptions& options) {
  ONNXKIT_ASSIGN_OR_RETURN(io::LoadedModel loaded, io::LoadModel(options.model_path));
  if (!loaded.proto.graph) return absl::InvalidArgumentError(absl::StrCat(options.model_path, ": model has no graph"));
  ScratchDir scratch;
  if (scratch.path().empty()) return absl::PermissionDeniedError("cannot create a scratch folder");
  OracleOptions oracle_options = options.oracle;
  oracle_options.base_dir = loaded.base_dir;
  oracle_options.scratch = scratch.path() / "calls";
  oracle_options.jobs = std::max(1, options.reduce.jobs);

  GoldenStore golden(scratch.path() / "golden");
  runner::InputSpec spec = options.inputs;
  if (spec.dir.empty() && spec.files.empty()) spec.random = true;
  std::string run_error;
  absl::Status recorded = golden.Record(loaded, spec, &run_error);
  bool needs_golden = oracle_options.kind != OracleKind::kCheckFails && oracle_options.kind != OracleKind::kCommand;
  if (!recorded.ok() && needs_golden) return recorded;

  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Oracle> oracle, MakeOracle(oracle_options, &golden));
  BisectOutcome outcome;
  outcome.oracle = oracle->Describe();
  ONNXKIT_ASSIGN_OR_RETURN(outcome.interesting, oracle->Prepare(loaded.proto, &outcome.why));
  if (!outcome.interesting) return outcome;

  TypeSource types(&golden, infer::InferredTypes(loaded.proto));
  ReduceOptions reduce = options.reduce;
  Reducer reducer(loaded.proto, oracle.get(), &golden, &types, oracle_options, reduce);
  reducer.AddCalls(1);  // Prepare
  ONNXKIT_ASSIGN_OR_RETURN(outcome.result, reducer.Run());
  // The result must still fail: test it once more, as the bundle will.
  auto again = oracle->Test(outcome.result.model);
  outcome.reproduces = again.ok() && *again;
  ++outcome.result.calls;
  if (!options.output_dir.empty()) ONNXKIT_RETURN_IF_ERROR(WriteBundle(options, outcome, golden, loaded.base_dir));
  return outcome;
}

}  // namespace onnxkit::bisect
