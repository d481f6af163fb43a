// The golden-value cache of `onnxkit bisect`: the reference backend runs the
// original model once and every value of the main graph (graph inputs
// included) and of If/Loop/Scan bodies (a Loop body's first iteration) is
// written to a scratch file as it is computed, so memory stays bounded by
// the session's own plan. A candidate that cuts a tensor feeds it
// with the recorded value, so a reduced model fails on real data.
#ifndef ONNXKIT_BISECT_GOLDEN_H_
#define ONNXKIT_BISECT_GOLDEN_H_

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/base/scratch_dir.h"
#include "lib/io/model_io.h"
#include "lib/io/spill_file.h"
#include "runner/inputs.h"
#include "runner/value.h"

namespace onnxkit::bisect {

class GoldenStore {
 public:
  // Records into `scratch` (created if missing). No values until Record.
  explicit GoldenStore(std::filesystem::path scratch) : scratch_(std::move(scratch)) {}

  // Prepares the feeds of `loaded` from `spec`, records them, then runs the
  // model on the reference backend recording every computed value. A run
  // that fails keeps what it computed before the failure (the run error is
  // returned in `run_error`, not as a status), as does a run past
  // `timeout_seconds` (0: none). Errors: inputs cannot be prepared
  // (InvalidArgument), the scratch folder cannot be written.
  absl::Status Record(const io::LoadedModel& loaded, const runner::InputSpec& spec, std::string* run_error,
                      double timeout_seconds = 0);

  bool Has(const std::string& name) const { return index_.count(name) > 0; }
  // The recorded value of `name`, read back from the scratch file.
  absl::StatusOr<runner::RtValue> Load(const std::string& name) const;
  // The recorded value's type (tensor: element type and concrete shape).
  const pb::TypeProto* TypeOf(const std::string& name) const;
  // Names in recording (execution) order.
  const std::vector<std::string>& order() const { return order_; }
  const std::vector<std::pair<std::string, runner::RtValue>>& original_feeds() const { return feeds_; }

  // Records one value (also used by tests). `source` tells values apart:
  // a name met again from another source (two bodies that both define it)
  // has no one value, and is dropped (nullptr: a graph input).
  absl::Status Put(const std::string& name, const runner::RtValue& value, const void* source = nullptr);

 private:
  struct Entry {
    io::SpillFile::Span span;  // in spill_
    pb::TypeProto type;
  };
  io::SpillFile spill_;  // every value, one after another
  std::filesystem::path scratch_;
  std::map<std::string, Entry> index_;
  std::map<std::string, const void*> source_;
  std::set<std::string> ambiguous_;
  std::vector<std::string> order_;
  std::vector<std::pair<std::string, runner::RtValue>> feeds_;
};

// The scratch folder of a bisect run (lib/base/scratch_dir.h): removed on
// scope exit and on Ctrl-C.
using onnxkit::ScratchDir;

// The TypeProto describing a runtime value (tensors: dtype and shape;
// sequences, optionals, maps: the kind alone).
pb::TypeProto TypeOfValue(const runner::RtValue& v);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_GOLDEN_H_
