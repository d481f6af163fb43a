// The two forms of a tree ensemble regressor in ai.onnx.ml, and the
// translation between them, shared by the reference backend (which runs
// TreeEnsembleRegressor-1/3 as a TreeEnsemble) and `onnxkit convert
// --ml-opset` (which rewrites one form into the other):
//
//   TreeEnsembleRegressor (1, 3; deprecated at 5): nodes named by
//     (tree id, node id), branch modes as strings, LEAF nodes whose targets
//     and weights sit in target_* lists (a leaf may feed several targets),
//     base_values added before post_transform, output always float.
//   TreeEnsemble (5): interior nodes in one array, leaves in another (one
//     target per leaf), trees by their root index, modes as a uint8 tensor
//     (MEMBER sets in membership_values), splits and weights in X's type.
//
// Both directions fail with InvalidArgument naming what has no equivalent
// (a leaf with several targets, set membership past `max_nodes`, ...).
#ifndef ONNXKIT_RUNNER_REFERENCE_ML_TREE_FORMS_H_
#define ONNXKIT_RUNNER_REFERENCE_ML_TREE_FORMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/proto.h"
#include "lib/ir/ir.h"

namespace onnxkit::runner::reference::ml_forms {

struct TreeEnsembleForm {
  // The attributes of the equivalent TreeEnsemble-5 node.
  std::vector<pb::AttributeProto> attributes;
  // Added per target after aggregation and before post_transform; empty
  // when the regressor has none (or all are zero).
  std::vector<double> base_values;
  // Element type of nodes_splits and leaf_weights: float, or double when the
  // regressor holds its values as double tensors.
  int32_t value_dtype = pb::kFloat;
  int64_t post_transform = 0;  // 0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT
  // Set when a regressor leaf feeds several targets: the trees are laid out
  // once per target (`layers` copies), each copy's leaves carrying that
  // target's weight, `leaf_scored` telling which leaves carry one (the others
  // do not count, also for MIN and MAX). No TreeEnsemble-5 node can say
  // this: only the runtime takes such a form.
  int64_t layers = 1;
  std::vector<uint8_t> leaf_scored;
};

// A TreeEnsembleRegressor node as a TreeEnsemble. A tree made of one leaf
// gets one interior node whose branches both reach it.
absl::StatusOr<TreeEnsembleForm> TreeEnsembleFromRegressor(const ir::Node& node);

// A TreeEnsembleClassifier (1, 3) as a TreeEnsemble producing one raw
// score per class (SUM, no post_transform, no base values) plus what the
// classifier does on top of those scores.
struct ClassifierForm {
  // n_targets is the number of class labels. A classifier leaf votes for
  // several classes, a TreeEnsemble leaf for one: the trees are laid out
  // once per class that some leaf votes for (in class order), each copy's
  // leaves carrying that class's vote, so there are up to (classes x nodes)
  // nodes.
  TreeEnsembleForm form;
  // Per TreeEnsemble leaf: whether it carries a vote (a leaf without a vote
  // for its layer's class feeds a 0 that does not count as a score).
  std::vector<uint8_t> leaf_scored;
  std::vector<int64_t> labels_int;
  std::vector<std::string> labels_str;
  std::vector<double> base_values;  // as given: empty, one per class, or one of two
  int64_t voted_classes = 0;        // distinct class ids among the votes
  // Per class: whether some tree votes for it at every leaf, so every row
  // gets a score for it.
  std::vector<uint8_t> always_scored;
  bool all_weights_positive = true;
};

// Fails past max(`max_nodes`, 4 x (nodes + class votes)) nodes after the
// per-class layout.
absl::StatusOr<ClassifierForm> TreeEnsembleFromClassifier(const ir::Node& node, int64_t max_nodes);

// A TreeEnsemble node as TreeEnsembleRegressor-3 attributes: tree t is what
// its root reaches (shared subtrees stay shared; at most `max_nodes` nodes
// in all), MEMBER nodes become chains of BRANCH_EQ nodes. Values are
// written as floats when `double_values` is false (nodes_values,
// target_weights) and as double tensors (*_as_tensor) otherwise.
absl::StatusOr<std::vector<pb::AttributeProto>> RegressorFromTreeEnsemble(const ir::Node& node, bool double_values,
                                                                          int64_t max_nodes);

}  // namespace onnxkit::runner::reference::ml_forms

#endif  // ONNXKIT_RUNNER_REFERENCE_ML_TREE_FORMS_H_
