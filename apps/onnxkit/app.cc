// Main: builds the CLI, dispatches to the chosen subcommand, maps statuses to
// exit codes. The only place (with the dependency boundaries) that catches
// exceptions: CLI11 reports parse errors by throwing.
#include <cctype>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "apps/onnxkit/commands.h"
#include "runner/cpu/threads.h"

namespace onnxkit::app {

void NoteWhenBf16Unsupported() {
  if (runner::cpu::Bf16Supported()) return;
  std::cerr
      << "onnxkit: note: this processor has no bfloat16 instructions (AVX512_BF16 or AMX); computing in "
         "float32\n";
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (IsUsageError(status)) return kExitUsage;
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return kExitInternal;
    default:
      return kExitInput;
  }
}

// The first argument of the chosen subcommand that looks like a flag but
// names none of its options ("--bogus", "--outptu=x"); numbers ("-1") are
// values.
std::optional<std::string> UnknownFlag(CLI::App& app, int argc, char** argv) {
  std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return std::nullopt;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || std::isdigit(static_cast<unsigned char>(arg[1])) ||
        arg[1] == '.') {
      continue;
    }
    std::string name = arg.substr(0, arg.find('='));
    if (name.rfind("--", 0) != 0 && name.size() > 2) name = name.substr(0, 2);  // -ofile
    if (chosen[0]->get_option_no_throw(name) == nullptr && name != "-h" && name != "--help") return arg;
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  CLI::App app{"onnxkit: a toolkit for ONNX models.", "onnxkit"};
  app.set_version_flag("--version", "onnxkit 0.1.0");
  app.require_subcommand(1, 1);
  app.fallthrough(false);
  Action action;
  RegisterInspect(app, action);
  RegisterExtract(app, action);
  RegisterRun(app, action);
  RegisterCompare(app, action);
  RegisterCheck(app, action);
  RegisterOptimize(app, action);
  RegisterBisect(app, action);
  RegisterConvert(app, action);
  RegisterQuantize(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      app.exit(e);
      return kExitOk;
    }
    std::string message = e.what();
    // CLI11 checks required options before unknown ones; a mistyped flag is
    // the likelier fault, and the one to name.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      if (std::optional<std::string> unknown = UnknownFlag(app, argc, argv)) {
        message = "The following argument was not expected: " + *unknown;
      }
    }
    std::cerr << "onnxkit: error: " << message << "\nRun with --help for more information.\n";
    return kExitUsage;
  }
  absl::StatusOr<int> result;
  try {
    result = action ? action() : absl::InternalError("no subcommand action");
  } catch (const std::bad_alloc&) {
    result = absl::ResourceExhaustedError("out of memory");
  } catch (const std::exception& e) {
    result = absl::InternalError(std::string("unexpected exception: ") + e.what());
  }
  std::cout.flush();
  if (!result.ok()) {
    std::cerr << "onnxkit: error: " << result.status().message() << "\n";
    if (ExitCodeFor(result.status()) == kExitUsage) {
      std::cerr << "Run with --help for more information.\n";
    }
    return ExitCodeFor(result.status());
  }
  return *result;
}

}  // namespace onnxkit::app
