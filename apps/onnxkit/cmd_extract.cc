// `onnxkit extract MODEL -i NAME... -o NAME... -O OUT`: the minimal
// subgraph computing the outputs from the inputs, as a standalone model.
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/onnxkit/commands.h"
#include "lib/extract/extract.h"
#include "lib/io/model_io.h"

namespace onnxkit::app {
namespace {

struct ExtractOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string output_path;
  int64_t external_data = -1;
  bool no_infer = false;
  bool quiet = false;
};

absl::StatusOr<int> RunExtract(const ExtractOptions& o) {
  auto loaded = io::LoadModel(o.model);
  if (!loaded.ok()) return loaded.status();
  extract::ExtractRequest request{o.inputs, o.outputs, !o.no_infer};
  extract::ExtractStats stats;
  auto result = extract::ExtractModel(loaded->proto, request, &stats);
  if (!result.ok()) {
    const absl::Status& s = result.status();
    if (IsUsageError(s)) return s;  // the request itself (empty or repeated names)
    // A name that is not in the model, or a cut that cannot be computed from
    // the given inputs, is a problem with the arguments.
    if (s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kFailedPrecondition) {
      return UsageError(std::string(s.message()));
    }
    return absl::Status(s.code(), absl::StrCat(o.model, ": ", s.message()));
  }
  io::SaveOptions save;
  save.external_data_threshold = o.external_data;
  absl::Status saved = io::SaveModel(*result, loaded->base_dir, o.output_path, save);
  if (!saved.ok()) return saved;
  if (!o.quiet) {
    std::cout << "wrote " << o.output_path << ": " << stats.nodes_kept << " of " << stats.nodes_total
              << " nodes, " << stats.initializers_kept << " initializers\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterExtract(CLI::App& app, Action& action) {
  auto opts = std::make_shared<ExtractOptions>();
  CLI::App* sub = app.add_subcommand(
      "extract",
      "Cut the subgraph that computes the given outputs from the given inputs into a standalone "
      "model. Exit codes: 0 ok, 2 usage (also: a name that is not a tensor of the model, or outputs "
      "that need tensors not given as inputs), 3 model unreadable or invalid.");
  sub->add_option("model", opts->model, "Model file (.onnx)")->required();
  sub->add_option("-i,--input", opts->inputs,
                  "Tensor that becomes a graph input (repeat, or comma-separated); tensors needed but "
                  "not listed must be initializers")
      ->delimiter(',');
  sub->add_option("-o,--output", opts->outputs, "Tensor that becomes a graph output (repeat, or comma-separated)")
      ->delimiter(',')
      ->required();
  sub->add_option("-O,--output-model", opts->output_path, "Where to write the extracted model")->required();
  sub->add_option("--external-data", opts->external_data,
                  "Write tensors of at least this many bytes to one data file next to the output "
                  "(<output>.data); external data of the input is always re-written there")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--no-infer-types", opts->no_infer,
                "Do not run shape inference to find the types of new inputs/outputs that the model "
                "does not declare");
  sub->add_flag("-q,--quiet", opts->quiet, "Print nothing on success");
  sub->callback([opts, &action] { action = [opts] { return RunExtract(*opts); }; });
}

}  // namespace onnxkit::app
