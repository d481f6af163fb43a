// BisectOptimize: the optimizer's culprit rewrite, and the models around it.
#include "bisect/optimize_bisect.h"

#include <sys/stat.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "bisect/bisect.h"
#include "bisect/candidate.h"
#include "bisect/golden.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"

namespace onnxkit::bisect {

namespace {

namespace fs = std::filesystem;

absl::Status CopyInputs(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove_all(to, ec);
  fs::create_directories(to.parent_path(), ec);
  fs::copy(from, to, fs::copy_options::recursive, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot write ", to.string(), ": ", ec.message()));
  return absl::OkStatus();
}

std::string Script(const passes::Culprit& c, bool shrunk, const std::string& bin, const std::string& flags) {
  std::string head = absl::StrCat("#!/bin/sh\n# The optimizer's rewrite ", c.rewrite, " (", c.pass, " at ", c.record.node,
                                  ") moves the outputs.\nhere=$(cd \"$(dirname \"$0\")\" && pwd)\n");
  if (!shrunk) {
    return absl::StrCat(head, ShellBinary(bin),
                        " compare --a \"$here/before.onnx\" --b \"$here/after.onnx\" --random\n");
  }
  return absl::StrCat(
      head, "# model.onnx: the rewrite's node and its neighbours; optimize exits 1 (outputs moved)\n",
      ShellBinary(bin),
      " optimize \"$here/model.onnx\" -o \"$here/optimized.onnx\" --inputs \"$here/test_data_set_0\"",
      flags.empty() ? "" : " ", flags, "\n");
}

}  // namespace

absl::StatusOr<OptimizeBisectResult> BisectOptimize(const std::string& model_path,
                                                    const passes::OptimizeOptions& options,
                                                    const std::filesystem::path& output_dir,
                                                    const std::string& onnxkit_binary,
                                                    const std::string& repro_flags) {
  auto start = std::chrono::steady_clock::now();
  ONNXKIT_ASSIGN_OR_RETURN(io::LoadedModel loaded, io::LoadModel(model_path));
  passes::OptimizeOptions o = options;
  o.verify = true;
  ONNXKIT_ASSIGN_OR_RETURN(passes::OptimizeResult full, passes::Optimize(loaded, o));
  OptimizeBisectResult result;
  result.verify_runs = full.verify_runs;
  result.culprit = full.culprit;
  if (!full.culprit || full.culprit->rewrite <= 0) {
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (full.culprit) result.culprit.reset();  // moved, but not narrowed to one rewrite
    return result;
  }
  const passes::Culprit& c = *full.culprit;
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", output_dir.string(), ": ", ec.message()));
  o.verify = false;
  io::LoadedModel before = loaded;
  pb::ModelProto after;
  for (int64_t limit : {c.rewrite - 1, c.rewrite}) {
    o.manager.bisect_limit = limit;
    ONNXKIT_ASSIGN_OR_RETURN(passes::OptimizeResult r, passes::Optimize(loaded, o));
    (limit < c.rewrite ? before.proto : after) = r.model;
    std::string name = limit < c.rewrite ? "before.onnx" : "after.onnx";
    ONNXKIT_RETURN_IF_ERROR(io::SaveModel(r.model, loaded.base_dir, output_dir / name));
  }
  result.nodes_before = MainNodeCount(before.proto);
  ScratchDir scratch("onnxkit-bisect");
  std::optional<ShrunkModel> shrunk;
  if (!scratch.path().empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(shrunk, ShrinkAroundRewrite(before, c, options, scratch.path()));
  }
  result.shrunk = shrunk.has_value();
  const pb::ModelProto& model = shrunk ? shrunk->model : after;
  result.nodes_after = MainNodeCount(model);
  ONNXKIT_RETURN_IF_ERROR(io::SaveModel(model, loaded.base_dir, output_dir / "model.onnx"));
  if (shrunk) ONNXKIT_RETURN_IF_ERROR(CopyInputs(shrunk->inputs_dir, output_dir / "test_data_set_0"));
  ONNXKIT_RETURN_IF_ERROR(
      io::WriteFileAtomically(output_dir / "repro.sh", Script(c, result.shrunk, onnxkit_binary, repro_flags)));
  chmod((output_dir / "repro.sh").c_str(), 0755);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  JsonWriter w;
  w.BeginObject();
  w.KeyString("model", model_path);
  w.KeyString("oracle", "optimize");
  w.KeyString("pass", c.pass);
  w.KeyInt("rewrite", c.rewrite);
  w.KeyString("graph", c.record.graph);
  w.KeyString("node", c.record.node);
  w.KeyString("what", c.record.what);
  w.KeyString("summary", c.summary);
  w.KeyBool("shrunk", result.shrunk);
  w.KeyInt("nodes_before", result.nodes_before);
  w.KeyInt("nodes_after", result.nodes_after);
  if (shrunk) w.KeyString("shrunk_summary", shrunk->culprit.summary);
  w.KeyInt("verify_runs", result.verify_runs);
  w.KeyDouble("seconds", result.seconds);
  w.EndObject();
  ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(output_dir / "report.json", w.Take() + "\n"));
  return result;
}

}  // namespace onnxkit::bisect
