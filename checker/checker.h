// The model checker: validates an ONNX model file (or a decoded model)
// against the rules of checker/rules.def and returns every finding as a
// Diagnostic with a stable code.
//
// The checker is built for hostile input: it never crashes, never allocates
// from sizes declared in the file, never reads weights (external data is
// checked against the real file sizes only), and bounds every recursion
// (limits::kMaxGraphDepth, limits::kMaxFunctionCallDepth).
//
// Rule groups run in this order, each in file order:
//   container (E01xx)  loading the bytes: CheckFile only;
//   model     (E02xx)  ir_version, opset imports, metadata, functions;
//   graph     (E03xx)  SSA, scoping, order, outputs, declared types, in the
//                      main graph, every If/Loop/Scan body and function body;
//   node      (E04xx)  ops against the registry (or model-local functions):
//                      arity, attributes, type constraints;
//   tensor    (E05xx)  every tensor: initializers, attribute tensors, sparse
//                      tensors, external data;
//   --full    (E06xx)  type and shape inference, only when nothing above
//                      found an error.
// A group does not run on data an earlier group found unsound: the node
// rules need sound opset imports and a sound graph structure. A skipped
// group is mentioned in CheckResult::notes.
//
//   CheckResult r = CheckFile("model.onnx", {});
//   if (r.status() != FileStatus::kValid) ... r.diagnostics ...
#ifndef ONNXKIT_CHECKER_CHECKER_H_
#define ONNXKIT_CHECKER_CHECKER_H_

#include <filesystem>
#include <string>
#include <vector>

#include "checker/diagnostic.h"
#include "lib/io/proto.h"

namespace onnxkit::checker {

// At most this many diagnostics are kept per file, whatever max_errors says,
// so that a hostile file of millions of broken nodes gives a bounded report.
inline constexpr int kMaxDiagnostics = 10000;

struct CheckOptions {
  // Also run type and shape inference through the whole graph (E06xx).
  bool full = false;
  // Ops of custom domains (no schema) are errors instead of warnings (E0409).
  bool strict_custom = false;
  // Stop checking a file after this many errors; 0: no limit.
  int max_errors = 0;
  // Warnings are reported as errors.
  bool werror = false;
};

// The verdict on one file: kRefused when any refusal (a rule of kind
// kRefused: unreadable, limits, unsafe external data) was found, else
// kInvalid when any error was found, else kValid.
enum class FileStatus { kValid, kInvalid, kRefused };

// "valid", "invalid", "refused".
std::string_view FileStatusName(FileStatus status);

struct CheckResult {
  std::string path;                     // as given to CheckFile
  std::vector<Diagnostic> diagnostics;  // in the order found (see above)
  int errors = 0;                       // diagnostics of severity kError
  int warnings = 0;                     // diagnostics of severity kWarning
  bool refused = false;                 // some diagnostic's rule is kRefused
  bool truncated = false;               // stopped at CheckOptions::max_errors
  std::vector<std::string> notes;       // skipped rule groups, truncation

  FileStatus status() const {
    if (refused) return FileStatus::kRefused;
    return errors > 0 ? FileStatus::kInvalid : FileStatus::kValid;
  }
};

// Loads and checks a model file. Loading failures become diagnostics of the
// container rules (E0100-E0105, with the byte offset when known); nothing is
// returned as an error status.
CheckResult CheckFile(const std::filesystem::path& path, const CheckOptions& options);

// Checks a decoded model. External data locations are resolved against
// `base_dir`, the folder of the model file; with an empty `base_dir`,
// external tensors are refused (E0506), never resolved against the working
// directory. `display_path` names the model in diagnostics.
CheckResult CheckModel(const pb::ModelProto& model, const std::filesystem::path& base_dir,
                       const CheckOptions& options, const std::string& display_path = "");

}  // namespace onnxkit::checker

#endif  // ONNXKIT_CHECKER_CHECKER_H_
