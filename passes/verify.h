// Proof by execution, shared by every transforming subcommand (optimize,
// convert): the original model runs once on the chosen inputs, each
// candidate runs on the same inputs, and their outputs are compared with
// compare's metrics against tolerances.
//
//   ONNXKIT_ASSIGN_OR_RETURN(auto v, Verifier::Create(loaded, options));
//   ONNXKIT_ASSIGN_OR_RETURN(VerifyResult r, v->Check(candidate_proto));
//   if (!r.ok) ... r.summary names the worst output
#ifndef ONNXKIT_PASSES_VERIFY_H_
#define ONNXKIT_PASSES_VERIFY_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "runner/compare/compare.h"
#include "runner/inputs.h"
#include "runner/kernel_registry.h"
#include "runner/value.h"

namespace onnxkit::passes {

struct VerifyOptions {
  // Inputs: a test_data_set folder, files, or seeded random values (the
  // default when nothing is given: random with seed 0).
  runner::InputSpec inputs;
  // Dims of symbolic or unknown input dimensions without a --shape entry:
  // by dim_param name (`dims`), else `default_dim`.
  std::map<std::string, int64_t> dims;
  int64_t default_dim = 1;
  runner::Backend backend = runner::Backend::kReference;
  // An output element matches when |a - e| <= atol + rtol * |e|; NaN
  // matches NaN. Integer and bool outputs must match exactly.
  double atol = 1e-4;
  double rtol = 1e-3;
  // When set, a float output also fails below this SQNR (dB): the judge of
  // precision conversion, whose errors are spread over every element.
  std::optional<double> min_sqnr_db;
  // Run-time limit of one execution in seconds (0: none).
  double timeout_seconds = 0;
  // When set, shown each feed and every main-graph value of the original's
  // run in Create (runner::SessionOptions::observer); candidates run
  // without it. It must outlive Create only.
  std::function<absl::Status(const ir::Value& value, const runner::RtValue& v)> observer;
  // The observer also sees the values of If/Loop/Scan bodies
  // (runner::SessionOptions::observe_subgraphs).
  bool observe_subgraphs = false;
};

struct OutputCheck {
  std::string name;
  runner::Metrics metrics;
};

struct VerifyResult {
  bool ok = true;
  std::string summary;  // "outputs match (worst: 'y' max abs 3e-07)" or what differs
  std::string error;    // the candidate could not run (then ok is false)
  std::vector<OutputCheck> outputs;
};

class Verifier {
 public:
  // Runs `original` (its proto is copied; its folder and mapping are used
  // for external data) once and keeps its outputs. Errors: the inputs
  // cannot be prepared (InvalidArgument) or the original does not run
  // (its error, annotated).
  static absl::StatusOr<std::unique_ptr<Verifier>> Create(const io::LoadedModel& original, VerifyOptions options);

  // Runs `candidate` (a model over the same folder) on the same inputs and
  // compares its outputs, by position, with the original's. A float32 input
  // the candidate takes as float16 or bfloat16 is fed rounded to that type;
  // float16 and bfloat16 outputs are compared as float32.
  absl::StatusOr<VerifyResult> Check(const pb::ModelProto& candidate) const;

  // What the inputs were ("random, seed 0" or the folder / files).
  const std::string& input_description() const { return input_description_; }

 private:
  Verifier() = default;
  absl::StatusOr<std::vector<runner::RtValue>> Execute(const pb::ModelProto& model,
                                                       std::vector<std::string>* output_names) const;

  io::LoadedModel source_;  // path, base_dir and mapping (the proto is empty)
  VerifyOptions options_;
  std::vector<std::pair<std::string, runner::RtValue>> feeds_;
  std::vector<std::string> output_names_;
  std::vector<runner::RtValue> expected_;
  std::string input_description_;
};

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_VERIFY_H_
