// `onnxkit bisect` as a library call: load the model, record golden values,
// check that the original is interesting, reduce, and write the reproducer
// bundle (model.onnx, test_data_set_0/, repro.sh, report.json).
//
//   BisectOptions o; o.model_path = "m.onnx"; o.oracle.kind = OracleKind::kNan;
//   o.output_dir = "repro";
//   ONNXKIT_ASSIGN_OR_RETURN(BisectOutcome r, RunBisect(o));
//   if (!r.interesting) ... r.why ...
#ifndef ONNXKIT_BISECT_BISECT_H_
#define ONNXKIT_BISECT_BISECT_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/oracle.h"
#include "bisect/reducer.h"
#include "runner/inputs.h"

namespace onnxkit::bisect {

struct BisectOptions {
  std::string model_path;
  OracleOptions oracle;
  runner::InputSpec inputs;  // nothing given: random, seed 0
  // Several samples: each folder is a test_data_set (input_<i>.pb), or holds
  // test_data_set_* folders (each one sample, in name order). The first
  // sample on which the original is interesting is the one reduced with.
  // Empty: `inputs` is the one sample.
  std::vector<std::string> input_dirs;
  ReduceOptions reduce;
  std::filesystem::path output_dir;
  std::string onnxkit_binary = "onnxkit";  // used in repro.sh (ShellBinary)
};

// The shell word that runs onnxkit in a repro.sh: $ONNXKIT when set (the
// bundle moved to another machine), else `binary`.
std::string ShellBinary(const std::string& binary);

struct BisectOutcome {
  bool interesting = false;  // false: the original is not; nothing written
  std::string why;
  std::string oracle;        // Describe()
  std::string sample;        // the inputs reduced with ("random", or a folder)
  int samples_tried = 0;     // Prepare calls: samples looked at
  ReduceResult result;
  bool reproduces = false;   // the written model was re-tested interesting
};

// Errors: the model cannot be loaded (its load error: exit 3), a bad oracle
// option or inputs (InvalidArgument: a sample's inputs cannot be prepared,
// an --inputs folder without inputs), the output folder cannot be written.
absl::StatusOr<BisectOutcome> RunBisect(const BisectOptions& options);

// Writes the bundle for `outcome` into options.output_dir. `oracle` gives
// the expected outputs of a mismatch against --reference files.
absl::Status WriteBundle(const BisectOptions& options, const BisectOutcome& outcome,
                         const GoldenStore& golden, const Oracle& oracle,
                         const std::filesystem::path& base_dir);

// The input specs of the samples of `options` (see input_dirs).
absl::StatusOr<std::vector<runner::InputSpec>> SampleSpecs(const BisectOptions& options);

// The shell command repro.sh runs (paths relative to the bundle via $here).
std::string ReproCommand(const BisectOptions& options);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_BISECT_H_
