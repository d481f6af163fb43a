// Input preparation for `onnxkit run` and `onnxkit compare`: values from a
// test_data_set folder, from .pb/.npy/.npz files, or seeded random values,
// plus writing outputs in the test_data_set layout and value summaries.
#ifndef ONNXKIT_RUNNER_INPUTS_H_
#define ONNXKIT_RUNNER_INPUTS_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "runner/value.h"

namespace onnxkit::runner {

struct InputSpec {
  // A test_data_set folder: input_<i>.pb in graph-input order (a name inside
  // the TensorProto, when it names an input, takes precedence).
  std::string dir;
  // NAME=FILE (.pb or .npy), or FILE.npz (arrays matched by name).
  std::vector<std::string> files;
  // Random values for every input not given otherwise.
  bool random = false;
  uint64_t seed = 0;
  double low = 0, high = 1;  // range of random values (integers: [floor(low), ceil(high)])
  // Values for symbolic or unknown dims: NAME=1x3x224x224 (a whole shape).
  std::vector<std::string> shapes;
};

// Builds the feeds for `inputs` (the model's feed inputs, in order).
// A usage error (lib/base/usage_error.h) names the input when a value is
// missing or the flags name no input; symbolic dims without --shape are a
// usage error that names them. Files that cannot be read, or hold values of
// the wrong type, are input errors that name the file.
// `overridable`: initializers listed as graph inputs (IR >= 4), which a
// file may feed by name (--input, .npz, a named input_<i>.pb past the
// required ones); they are never made up by --random.
absl::StatusOr<std::vector<std::pair<std::string, RtValue>>> PrepareInputs(
    const std::vector<const ir::Value*>& inputs, const InputSpec& spec,
    const std::vector<const ir::Value*>& overridable = {});

// Writes output_<i>.pb (TensorProto / SequenceProto / OptionalProto /
// MapProto) for each value, atomically, into `dir` (created if missing).
absl::Status SaveOutputs(const std::filesystem::path& dir, const std::vector<const ir::Value*>& names,
                         const std::vector<RtValue>& values);

// "float[1, 1000] min -3.2 max 4.1 mean 0.0021 first [0.1, 0.2, ...]".
std::string SummarizeValue(const RtValue& v);

// Tensor statistics for JSON reports (numeric tensors; zeros otherwise).
struct TensorStats {
  double min = 0, max = 0, mean = 0;
  std::vector<double> first;  // up to 8 values
};
TensorStats StatsOf(const Tensor& t);

// A file name for a tensor name (unsafe characters replaced, unique suffix).
std::string SafeFileName(const std::string& name, int index);

// Keys for the values a run observes (run --dump-all, compare --per-layer):
// a value's own name, or, for a body value whose name another graph of the
// model also defines (an enclosing graph, which is invalid ONNX, or another
// body), the name with the body it lives in: "p (in 'loop' (Loop).body)".
// Keys are cached per value; one instance per session.
class ObservedValueKeys {
 public:
  const std::string& For(const ir::Value& value);

 private:
  bool counted_ = false;
  std::map<std::string, int> graphs_defining_;
  std::map<const ir::Value*, std::string> keys_;
};

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_INPUTS_H_
