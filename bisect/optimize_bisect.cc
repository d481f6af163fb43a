// BisectOptimize: the optimizer's culprit rewrite, and the models around it.
#include "bisect/optimize_bisect.h"

#include <sys/stat.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"

namespace onnxkit::bisect {

absl::StatusOr<OptimizeBisectResult> BisectOptimize(const std::string& model_path,
                                                    const passes::OptimizeOptions& options,
                                                    const std::filesystem::path& output_dir,
                                                    const std::string& onnxkit_binary) {
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
  std::filesystem::create_directories(output_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", output_dir.string(), ": ", ec.message()));
  o.verify = false;
  for (int64_t limit : {c.rewrite - 1, c.rewrite}) {
    o.manager.bisect_limit = limit;
    ONNXKIT_ASSIGN_OR_RETURN(passes::OptimizeResult r, passes::Optimize(loaded, o));
    std::string name = limit < c.rewrite ? "before.onnx" : "after.onnx";
    ONNXKIT_RETURN_IF_ERROR(io::SaveModel(r.model, loaded.base_dir, output_dir / name));
    if (limit == c.rewrite) ONNXKIT_RETURN_IF_ERROR(io::SaveModel(r.model, loaded.base_dir, output_dir / "model.onnx"));
  }
  std::string script = absl::StrCat(
      "#!/bin/sh\n# The optimizer's rewrite ", c.rewrite, " (", c.pass, " at ", c.record.node,
      ") moves the outputs.\nhere=$(cd \"$(dirname \"$0\")\" && pwd)\n'", onnxkit_binary,
      "' compare --a \"$here/before.onnx\" --b \"$here/after.onnx\" --random\n");
  ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(output_dir / "repro.sh", script));
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
  w.KeyInt("verify_runs", result.verify_runs);
  w.KeyDouble("seconds", result.seconds);
  w.EndObject();
  ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(output_dir / "report.json", w.Take() + "\n"));
  return result;
}

}  // namespace onnxkit::bisect
