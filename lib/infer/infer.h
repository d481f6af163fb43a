// Type and shape inference: one engine for `onnxkit check --full` (rules
// E0600-E0603), the optimize passes, convert and quantize.
//
// Starting from the declared graph input types and the initializers, infers
// the element type and shape of every value of the model (main graph and
// If/Loop/Scan bodies, which see outer-scope values; calls of model-local
// functions are opaque) and reports:
//   E0600 type-inference   an inferred element type conflicts with a declared one
//   E0601 shape-inference  shapes that are impossible for an op (Reshape
//                          element counts, Concat dims, Gather axes, MatMul
//                          inner dims, broadcasting, Conv channels, overflow)
//   E0602 shape-conflict   an inferred shape conflicts with a declared one
// Symbolic or unknown dims never conflict. Ops without a shape function get
// types from their schema and unknown shapes.
//
//   for (const InferenceIssue& i : InferModel(model))
//     // i.location: "graph 'main' › node 'r' (Reshape)"
//     // i.message:  "Reshape: cannot reshape 24 elements into shape [5, 5]"
#ifndef ONNXKIT_LIB_INFER_INFER_H_
#define ONNXKIT_LIB_INFER_INFER_H_

#include <string>
#include <vector>

#include <string_view>

#include "lib/io/proto.h"

namespace onnxkit::infer {

// What an issue is; `check --full` reports each kind under its own rule.
enum class IssueKind {
  kTypeConflict,     // E0600 type-inference
  kImpossibleShape,  // E0601 shape-inference
  kShapeConflict,    // E0602 shape-conflict
  kTypeConstraint,   // E0603 inferred-type-constraint
};

// The stable diagnostic code `check --full` gives an issue kind ("E0601").
std::string_view IssueCode(IssueKind kind);

struct InferenceIssue {
  IssueKind rule;
  std::string location;
  std::string message;
};

// Infers element types and shapes through the whole model and reports
// conflicts and impossible shapes, in graph order. Never fails, never
// crashes, never allocates from declared sizes; a model ir::FromProto
// refuses gives no issues (the structural rules report it).
std::vector<InferenceIssue> InferModel(const pb::ModelProto& model);

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_INFER_H_
