// The pass interface of `onnxkit optimize` (and of convert and quantize,
// which run passes too): a Pass rewrites one graph; the PassManager
// (passes/manager.h) decides which graphs, in which order, how often, and
// keeps every rewrite a transaction.
//
// A pass file follows one shape:
//
//   // fuse-conv-bn: Conv followed by BatchNormalization folds into the Conv.
//   // Before: %y = Conv(%x, %w, %b); %z = BatchNormalization(%y, %s, %o, %m, %v)
//   // After:  %z = Conv(%x, %w', %b')
//   class FuseConvBn : public Pass {
//     absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
//       bool changed = false;
//       for (ir::Node* node : SnapshotNodes(graph)) {      // a copy: rewrites remove nodes
//         if (!Match(...)) continue;                       // cheap, read-only
//         if (!ctx.Allow(*node, "conv + bn")) continue;    // numbering, --bisect-limit
//         ONNXKIT_RETURN_IF_ERROR(Rewrite(...));           // the only mutation
//         changed = true;
//       }
//       return changed;
//     }
//   };
//
// Rules every pass keeps:
//   - Run looks at `graph` only (not its subgraphs: the manager visits them,
//     bottom-up, before their parent), and mutates it only inside a rewrite
//     that ctx.Allow granted. A pass that finds nothing returns false and
//     leaves the graph untouched.
//   - A rewrite that fails returns its error: the manager restores the model
//     as it was before the pass, skips that rewrite and runs the pass again,
//     so a failed rewrite never leaves a half-changed graph.
//   - Graph inputs and outputs of a graph keep their names, order and
//     meaning; values a subgraph reads from outer scope stay visible.
//   - Standard ONNX ops in, standard ONNX ops out, at the opset the model
//     imports (ctx.Opset).
#ifndef ONNXKIT_PASSES_PASS_H_
#define ONNXKIT_PASSES_PASS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/infer/types.h"
#include "lib/io/external_data.h"
#include "lib/ir/ir.h"

namespace onnxkit::passes {

// What every pass may read of the user's options.
struct PassOptions {
  // fold-constants: a node folds when its outputs take at most
  // max(kFoldGrowth x its inputs' bytes, fold_limit_bytes) bytes.
  int64_t fold_limit_bytes = 1 << 16;
};

// What a pass sees besides the graph: opsets, inferred types, constant
// data, options, and the rewrite gate.
class PassContext {
 public:
  virtual ~PassContext() = default;

  // The opset the graph being processed imports for `domain` ("" and
  // "ai.onnx" are the same); 0 when not imported. Function bodies use
  // their function's imports, other graphs the model's.
  virtual int64_t Opset(std::string_view domain) const = 0;

  // What type/shape inference (lib/infer) knows about `value`, as of the
  // start of this pass on this model; null when nothing is known (function
  // bodies, values created by this pass, or a pass that does not declare
  // needs_shapes in passes.def).
  virtual const infer::ValueState* State(const ir::Value& value) const = 0;

  // Reads external data of initializers (null for models without a folder).
  virtual io::ExternalDataResolver* resolver() = 0;

  virtual const PassOptions& options() const = 0;

  // Says that `tensor`'s data will not be read again soon (its value lost
  // its last use): when the data is a view of the mapped model file, its
  // pages are returned to the OS (read again, they come back from the file).
  virtual void ReleaseData(const pb::TensorProto& tensor) { (void)tensor; }

  // Asks to apply one rewrite anchored at `node`, described by `what`
  // ("Conv + BatchNormalization"). Numbers the rewrite (1, 2, ... across the
  // whole pipeline, stable for a given model and flags) and returns true,
  // or returns false when the rewrite must not be applied (past
  // --bisect-limit, or this rewrite failed before): the pass then leaves
  // that match alone and goes on.
  virtual bool Allow(const ir::Node& node, std::string_view what) = 0;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Rewrites `graph`; true when something changed.
  virtual absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) = 0;
};

// One row of passes/passes.def.
struct PassInfo {
  std::string_view name;         // kebab-case, as --passes spells it
  std::string_view description;  // one line
  bool in_default;               // part of the default pipeline
  bool needs_shapes;             // gets inferred types through PassContext::State
  bool may_change_numerics;      // results may differ in the last bits (fusions)
  std::unique_ptr<Pass> (*create)();
};

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_PASS_H_
