// onnxkit: command-line entry point. Registers the subcommands, parses flags
// (usage errors exit 2), runs the chosen subcommand and maps its status to
// the documented exit code.
#include <iostream>

#include "CLI/CLI.hpp"
#include "apps/onnxkit/commands.h"

int main(int argc, char** argv) {
  return onnxkit::app::Main(argc, argv);
}
