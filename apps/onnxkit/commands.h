// The subcommands of the onnxkit binary and the plumbing they share: every
// subcommand registers its flags with CLI11 and sets `action` to a closure
// that does the work and returns the exit code (or an error status).
//
// Exit codes (all subcommands): 0 success; 1 the answer is "no" (documented
// per subcommand); 2 usage error; 3 input unreadable or refused; 4 internal
// error.
#ifndef ONNXKIT_APPS_ONNXKIT_COMMANDS_H_
#define ONNXKIT_APPS_ONNXKIT_COMMANDS_H_

#include <functional>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/base/usage_error.h"

namespace onnxkit::runner {
struct InputSpec;
}  // namespace onnxkit::runner

namespace onnxkit::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitNo = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInput = 3;
inline constexpr int kExitInternal = 4;

// What a subcommand does once flags are parsed: an exit code, or an error
// that Main prints and maps to an exit code with ExitCodeFor.
using Action = std::function<absl::StatusOr<int>()>;

// A usage error found after parsing (conflicting flags, bad flag value) is
// onnxkit::UsageError (lib/base/usage_error.h): printed like a CLI11 error
// and mapped to exit code 2.
using ::onnxkit::UsageError;

// Says on stderr that --precision bf16 computes in float32 here, where the
// processor has no bfloat16 instructions; nothing where it has them.
void NoteWhenBf16Unsupported();

// 2 for UsageError, 4 for Internal/Unknown/DataLoss-free internal faults,
// 3 for everything about the input (missing, unreadable, malformed, limits).
int ExitCodeFor(const absl::Status& status);

void RegisterInspect(CLI::App& app, Action& action);
void RegisterExtract(CLI::App& app, Action& action);
void RegisterRun(CLI::App& app, Action& action);
void RegisterCompare(CLI::App& app, Action& action);
void RegisterCheck(CLI::App& app, Action& action);
void RegisterOptimize(CLI::App& app, Action& action);
void RegisterBisect(CLI::App& app, Action& action);
void RegisterConvert(CLI::App& app, Action& action);
void RegisterQuantize(CLI::App& app, Action& action);

// CLI11 checks for numeric flags that, unlike CLI::NonNegativeNumber, also
// refuse NaN and infinity (a NaN tolerance or limit compares false with
// everything and would silently disable what it sets).
const CLI::Validator& Finite();
const CLI::Validator& FiniteNonNegative();

// --range LOW,HIGH: the range of --random values into `inputs` (run,
// compare and the verification flags).
void AddRangeFlag(CLI::App* sub, runner::InputSpec* inputs);

// The flags that choose the inputs a transformed model is verified on
// (optimize, convert): --inputs, --input, --random, --seed, --range, and --atol /
// --rtol (defaults 1e-4 / 1e-3) into `atol` / `rtol`.
// `shape_flag`: the names of the option giving the dims of random inputs
// ("--shape", or "--shape,--input-shape" for convert, which named it so first).
void AddVerificationFlags(CLI::App* sub, runner::InputSpec* inputs, double* atol, double* rtol,
                          double* timeout, const std::string& shape_flag = "--shape");

// The whole program: parse, dispatch, print errors, return the exit code.
int Main(int argc, char** argv);

}  // namespace onnxkit::app

#endif  // ONNXKIT_APPS_ONNXKIT_COMMANDS_H_
