// Oracles of `onnxkit bisect`: the interestingness tests. Each decides
// whether a candidate model still fails the way the original does:
//   check-fails  CheckModel(--full) reports an error (with the given code, or
//                the original's first error code);
//   run-fails    running it fails (message matching a regex, or with the
//                original's status code); runs in a forked child, so a crash
//                is a failure, not ours;
//   nan          a node turns finite inputs into NaN/Inf (the same tensor as
//                in the original); child process;
//   mismatch     two backends disagree beyond tolerance, or outputs differ
//                from reference files; child process;
//   command      an outside command (`{model}` replaced by the candidate's
//                path) exits non-zero or prints a match of --fail-regex;
//                one scratch folder per call, -j calls in parallel.
// Runner-based oracles feed every graph input from the golden store.
#ifndef ONNXKIT_BISECT_ORACLE_H_
#define ONNXKIT_BISECT_ORACLE_H_

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/golden.h"
#include "lib/io/proto.h"
#include "runner/kernel_registry.h"

namespace onnxkit::bisect {

enum class OracleKind { kCheckFails, kRunFails, kNan, kMismatch, kCommand };

struct OracleOptions {
  OracleKind kind = OracleKind::kCheckFails;
  std::string pattern;  // check-fails: the code; run-fails / command: regex
  runner::Backend a_backend = runner::Backend::kReference;
  runner::Backend b_backend = runner::Backend::kCpu;
  std::string reference_dir;                  // mismatch against output_<i>.pb files
  std::optional<double> atol, rtol;           // mismatch; default by element type
  std::string command;                        // command: run through /bin/sh -c
  double timeout_seconds = 60;                // per call (child and command)
  int jobs = 1;                               // command: parallel calls
  std::filesystem::path scratch;              // command: per-call folders below it
  std::filesystem::path base_dir;             // the original's folder (external data)
};

class Oracle {
 public:
  virtual ~Oracle() = default;
  // "check-fails E0601", "run-fails /cannot reshape/"...
  virtual std::string Describe() const = 0;
  // Looks at the original: pins what "the same failure" means. Returns
  // whether the original is interesting (`why` says why not).
  virtual absl::StatusOr<bool> Prepare(const pb::ModelProto& original, std::string* why) = 0;
  // Whether `candidate` is interesting. Errors only for faults of ours.
  virtual absl::StatusOr<bool> Test(const pb::ModelProto& candidate) = 0;
  // The first interesting candidate (index) of `candidates`, -1 if none;
  // `calls` receives the tests made. Parallel where the oracle allows it.
  virtual absl::StatusOr<int> TestFirst(const std::vector<pb::ModelProto>& candidates, int64_t* calls);
  // Whether a candidate is well formed enough to be tried: ir::FromProto
  // accepts it and the structural checker rules find no error (check-fails:
  // no error code the original did not have).
  virtual bool Valid(const pb::ModelProto& candidate) const;
  // Whether the oracle runs models (then candidates need golden values).
  virtual bool Runs() const { return true; }
  // mismatch --reference: the expected value of output `name` of the
  // original (read by Prepare); nullptr for others and for other oracles.
  virtual const runner::RtValue* Expected(const std::string& name) const { return nullptr; }
  // Detail of the last interesting verdict (diagnostic, error message...).
  const std::string& detail() const { return detail_; }
  // The original's folder, where candidates' external data resolves.
  void set_base_dir(std::filesystem::path dir) { base_dir_ = std::move(dir); }

 protected:
  std::string detail_;
  std::filesystem::path base_dir_;
};

// The oracle for `options`; `golden` must outlive it. InvalidArgument for a
// bad regex or code.
absl::StatusOr<std::unique_ptr<Oracle>> MakeOracle(const OracleOptions& options, const GoldenStore* golden);

// Whether the structural checker rules accept `model`, and (when
// `allowed_codes` is given) every error code it has is in it.
// External data resolves in `base_dir`.
bool StructurallyValid(const pb::ModelProto& model, const std::vector<std::string>* allowed_codes,
                       const std::filesystem::path& base_dir);

// The result of a function run in a forked child: what it wrote, or how
// the child ended (crash signal, timeout).
struct ChildResult {
  bool finished = false;   // exited normally and wrote a result
  bool timed_out = false;
  int signal = 0;
  std::string output;      // what the function returned
};
// Runs `fn` in a forked child with a wall-clock limit (0: none).
ChildResult RunInChild(const std::function<std::string()>& fn, double timeout_seconds);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_ORACLE_H_
