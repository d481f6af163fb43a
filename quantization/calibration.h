// Streaming calibration: runs the float model once per sample with an
// observer that reduces every float activation as it is computed and drops
// it, those of If/Loop/Scan bodies included (a Loop body's values over
// every iteration; values of sibling bodies that share a name share one
// range). Pass 1 records the exact range of each tensor;
// pass 2 (only for histogram methods) fills a fixed number of bins over
// that range. Memory is tensors x bins, never samples; the result does not
// depend on the order of the samples.
#ifndef ONNXKIT_QUANTIZATION_CALIBRATION_H_
#define ONNXKIT_QUANTIZATION_CALIBRATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "runner/inputs.h"
#include "runner/kernel_registry.h"
#include "runner/value.h"

namespace onnxkit::quant {

using Feeds = std::vector<std::pair<std::string, runner::RtValue>>;

// Where calibration samples come from; sample i is built on demand (never
// all held at once).
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int count() const = 0;
  virtual absl::StatusOr<Feeds> Get(int index, const std::vector<const ir::Value*>& inputs) const = 0;
  virtual std::string Describe() const = 0;
};

// test_data_set_* folders (input_<i>.pb) or .npz files in `dir`, sorted by
// name; InvalidArgument when there are none.
absl::StatusOr<std::unique_ptr<SampleSource>> FolderSamples(const std::string& dir,
                                                            std::vector<std::string> shapes);
// One sample from --input files (NAME=FILE or FILE.npz).
std::unique_ptr<SampleSource> FileSamples(std::vector<std::string> files, std::vector<std::string> shapes);
// `count` seeded random samples (sample i uses seed + i), values in [low, high).
std::unique_ptr<SampleSource> RandomSamples(int count, uint64_t seed, double low, double high,
                                            std::vector<std::string> shapes);
// Samples [begin, end) of `base`.
std::unique_ptr<SampleSource> SliceSamples(const SampleSource* base, int begin, int end);

// What calibration knows about one tensor.
struct TensorRange {
  double min = 0, max = 0;
  int64_t count = 0;          // elements seen (finite)
  // NaN and infinite elements seen. A tensor that held any (an attention
  // mask's -inf, a value that overflowed) is not quantized: its non-finite
  // values would come back finite (a mask would mask nothing).
  int64_t nonfinite = 0;
  std::vector<double> hist;   // signed, bins over [min, max]; empty after minmax-only calibration
};

struct Calibration {
  int bins = 0;               // 0: no histograms
  int samples = 0;
  std::map<std::string, TensorRange> tensors;  // float activations by name (bodies' included)
  std::set<std::string> half;                  // float16/bfloat16 activations seen (never quantized)
};

struct CalibrateOptions {
  runner::Backend backend = runner::Backend::kCpu;
  double timeout_seconds = 0;  // per run (0: none)
  bool histograms = true;
  int bins = 2048;
  // Called after each run with (pass, sample index) for progress.
  std::function<void(int pass, int index, int total)> progress;
};

// Calibrates `model` on every sample of `samples`.
absl::StatusOr<Calibration> Calibrate(const io::LoadedModel& model, const SampleSource& samples,
                                      const CalibrateOptions& options);

// Calibration as JSON (ranges and histograms), and back.
std::string CalibrationToJson(const Calibration& c);
absl::StatusOr<Calibration> CalibrationFromJson(std::string_view json);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_CALIBRATION_H_
