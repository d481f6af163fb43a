// `onnxkit inspect MODEL`: summary of a model (text, JSON or Graphviz).
#include <iostream>
#include <memory>

#include "apps/onnxkit/commands.h"
#include "lib/analysis/inspect.h"
#include "lib/io/model_io.h"

namespace onnxkit::app {
namespace {

struct InspectOptions {
  std::string model;
  std::string format = "text";
  bool json = false;
  bool nodes = false;
};

absl::StatusOr<int> RunInspect(const InspectOptions& o) {
  std::string format = o.json ? "json" : o.format;
  if (o.json && o.format != "text" && o.format != "json") {
    return UsageError("--json conflicts with --format " + o.format);
  }
  auto loaded = io::LoadModel(o.model);
  if (!loaded.ok()) return loaded.status();
  const pb::ModelProto& model = loaded->proto;
  if (format == "dot") {
    std::cout << analysis::RenderDot(model);
    return kExitOk;
  }
  analysis::ModelSummary summary =
      analysis::Summarize(model, o.model, loaded->mapping ? loaded->mapping->bytes().size() : 0);
  if (format == "json") {
    std::cout << analysis::RenderJson(summary);
    return kExitOk;
  }
  std::cout << analysis::RenderText(summary);
  if (o.nodes) std::cout << "nodes:\n" << analysis::RenderNodeList(model);
  return kExitOk;
}

}  // namespace

void RegisterInspect(CLI::App& app, Action& action) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Summarize a model: IR version, opsets, inputs/outputs with types and shapes, op histogram, "
      "initializers and parameters, subgraphs, functions, metadata. Exit codes: 0 ok, 2 usage, "
      "3 file unreadable or not a model.");
  sub->add_option("model", opts->model, "Model file (.onnx)")->required();
  sub->add_option("--format", opts->format, "Output format: text, json or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "json", "dot"}));
  sub->add_flag("--json", opts->json, "Same as --format json");
  sub->add_flag("--nodes", opts->nodes, "Also list every node (text format), subgraph nodes indented");
  sub->callback([opts, &action] { action = [opts] { return RunInspect(*opts); }; });
}

}  // namespace onnxkit::app
