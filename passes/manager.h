// The pass manager: runs a pipeline of passes over a model until nothing
// changes (or a cap), visiting every graph (If/Loop/Scan bodies bottom-up
// before their parent, then model-local functions), numbering rewrites,
// applying --bisect-limit, and making every rewrite a transaction: a pass
// whose rewrite fails is undone (the model restored as it was before the
// pass), that rewrite is skipped, and the pass runs again.
#ifndef ONNXKIT_PASSES_MANAGER_H_
#define ONNXKIT_PASSES_MANAGER_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "lib/ir/ir.h"
#include "passes/pass.h"

namespace onnxkit::passes {

struct ManagerOptions {
  PassOptions pass;
  // Apply only rewrites numbered 1..bisect_limit (-1: all).
  int64_t bisect_limit = -1;
  // Runs of the whole pipeline at most (the last one changing nothing ends
  // it early).
  int max_iterations = 8;
  // Folder of the model file: external data resolves from there (empty:
  // the model has no external data to read).
  std::filesystem::path base_dir;
  // The mapped model file, when the model's raw data views it:
  // PassContext::ReleaseData returns the pages of such views to the OS.
  std::shared_ptr<const io::MappedFile> mapping;
  // Called after every pass run that changed the model (for --verify-each),
  // with the pass and the rewrite numbers it applied; an error stops the
  // pipeline and is returned.
  std::function<absl::Status(const PassInfo& pass, int64_t first_rewrite, int64_t last_rewrite)> after_pass;
};

// One applied rewrite.
struct RewriteRecord {
  int64_t number = 0;
  std::string pass;
  std::string graph;  // "main", "main/If 'cond'/then_branch", "function 'f'"
  std::string node;   // NodeLabel of the anchor
  std::string what;
};

// A rewrite that failed and was skipped (the graph restored).
struct RewriteFailure {
  int64_t number = 0;  // 0: the pass failed outside a rewrite
  std::string pass;
  std::string graph;   // where the rewrite was (empty outside a rewrite)
  std::string node;
  std::string message;
};

struct PassStats {
  std::string name;
  int runs = 0;
  int64_t rewrites = 0;
  int64_t nodes_removed = 0;  // all graphs
  int64_t nodes_added = 0;
  double seconds = 0;
};

struct ManagerReport {
  std::vector<PassStats> passes;  // in pipeline order (a pass listed twice: once)
  std::vector<RewriteRecord> rewrites;
  std::vector<RewriteFailure> failures;
  int iterations = 0;
  bool fixed_point = false;   // the last iteration changed nothing
  bool limit_reached = false; // --bisect-limit stopped a rewrite
};

// Runs `pipeline` over `*model`. Fails only for errors that are not a
// pass's (a model that cannot be restored, after_pass errors); a failing
// rewrite is reported in ManagerReport::failures.
absl::StatusOr<ManagerReport> RunPipeline(std::unique_ptr<ir::Model>& model,
                                          const std::vector<const PassInfo*>& pipeline,
                                          const ManagerOptions& options);

// Nodes of every graph (main graph, bodies, model-local functions).
int64_t CountAllNodes(const ir::Model& model);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_MANAGER_H_
