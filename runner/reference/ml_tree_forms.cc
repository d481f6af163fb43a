// Translation between TreeEnsembleRegressor and TreeEnsemble (see
// ml_tree_forms.h).
#include "runner/reference/ml_tree_forms.h"

#include <cmath>
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ir/attributes.h"
#include "runner/convert.h"
#include "runner/tensor.h"

namespace onnxkit::runner::reference::ml_forms {
namespace {

constexpr std::string_view kModeNames[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE",
                                           "BRANCH_GT",  "BRANCH_EQ", "BRANCH_NEQ"};
constexpr std::string_view kAggregateNames[] = {"AVERAGE", "SUM", "MIN", "MAX"};
constexpr std::string_view kPostNames[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

std::vector<int64_t> Ints(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  return a == nullptr ? std::vector<int64_t>() : a->proto.ints;
}

int64_t Int(const ir::Node& node, std::string_view name, int64_t def) {
  const ir::Attribute* a = node.FindAttribute(name);
  return a == nullptr ? def : a->proto.i;
}

std::string String(const ir::Node& node, std::string_view name, std::string def) {
  const ir::Attribute* a = node.FindAttribute(name);
  return a == nullptr ? def : a->proto.s;
}

// The values of `name` (floats) or of `name`_as_tensor (a float or double
// tensor, which wins); `is_double` tells which was read.
absl::StatusOr<std::vector<double>> Values(const ir::Node& node, std::string_view name, bool* is_double) {
  *is_double = false;
  const ir::Attribute* t = node.FindAttribute(absl::StrCat(Sv(name), "_as_tensor"));
  if (t != nullptr && t->proto.t) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(*t->proto.t));
    std::vector<double> out(static_cast<size_t>(tensor.size()));
    if (tensor.dtype() == pb::kDouble) {
      *is_double = true;
      for (int64_t i = 0; i < tensor.size(); ++i) out[static_cast<size_t>(i)] = tensor.data<double>()[i];
    } else if (tensor.dtype() == pb::kFloat) {
      for (int64_t i = 0; i < tensor.size(); ++i) out[static_cast<size_t>(i)] = tensor.data<float>()[i];
    } else {
      return Invalid(absl::StrCat("attribute '", Sv(name), "_as_tensor' must hold float or double values"));
    }
    return out;
  }
  const ir::Attribute* a = node.FindAttribute(name);
  std::vector<double> out;
  if (a != nullptr) out.assign(a->proto.floats.begin(), a->proto.floats.end());
  return out;
}

absl::StatusOr<pb::AttributeProto> TensorA(std::string name, int32_t dtype, const std::vector<double>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, {static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == pb::kDouble) {
      t.mutable_data<double>()[i] = v[i];
    } else {
      t.mutable_data<float>()[i] = static_cast<float>(v[i]);
    }
  }
  pb::AttributeProto a;
  a.name = name;
  a.type = pb::kAttrTensor;
  a.t = TensorToProto(t, name);
  return a;
}

template <size_t N>
absl::StatusOr<int64_t> Code(const std::string_view (&names)[N], const std::string& s, std::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<int64_t>(i);
  }
  return Invalid(absl::StrCat(Sv(what), " '", s, "' is not known"));
}

}  // namespace

namespace {

// The nodes_* lists of a TreeEnsembleRegressor/Classifier, checked.
struct TreeNodes {
  std::vector<int64_t> tree_ids, node_ids, features, true_ids, false_ids, missing;
  std::vector<std::string> modes;
  std::vector<double> splits;
  bool splits_double = false;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, size_t> index;  // (tree, node) -> position
  std::vector<int64_t> tree_order;                                  // tree ids in first-seen order
};

absl::StatusOr<TreeNodes> ParseTreeNodes(const ir::Node& node) {
  TreeNodes t;
  t.tree_ids = Ints(node, "nodes_treeids");
  t.node_ids = Ints(node, "nodes_nodeids");
  t.features = Ints(node, "nodes_featureids");
  t.true_ids = Ints(node, "nodes_truenodeids");
  t.false_ids = Ints(node, "nodes_falsenodeids");
  const size_t n = t.tree_ids.size();
  t.missing = Ints(node, "nodes_missing_value_tracks_true");
  if (t.missing.empty()) t.missing.assign(n, 0);
  const ir::Attribute* modes_attr = node.FindAttribute("nodes_modes");
  if (modes_attr != nullptr) t.modes = modes_attr->proto.strings;
  ONNXKIT_ASSIGN_OR_RETURN(t.splits, Values(node, "nodes_values", &t.splits_double));
  if (t.splits.empty()) t.splits.assign(n, 0.0);
  if (n == 0) return Invalid("the ensemble has no tree nodes");
  if (t.node_ids.size() != n || t.features.size() != n || t.true_ids.size() != n || t.false_ids.size() != n ||
      t.missing.size() != n || t.modes.size() != n || t.splits.size() != n) {
    return Invalid("the nodes_* attributes disagree in length");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!t.index.emplace(std::make_pair(t.tree_ids[i], t.node_ids[i]), i).second) {
      return Invalid(absl::StrCat("node ", t.node_ids[i], " of tree ", t.tree_ids[i], " is listed twice"));
    }
    if (std::find(t.tree_order.begin(), t.tree_order.end(), t.tree_ids[i]) == t.tree_order.end()) {
      t.tree_order.push_back(t.tree_ids[i]);
    }
  }
  return t;
}

// The arrays of a TreeEnsemble-5 node.
struct Flat {
  std::vector<int64_t> features, true_ids, false_ids, true_leafs, false_leafs, missing, modes, roots, leaf_targets;
  std::vector<double> splits, leaf_weights;
  std::vector<uint8_t> leaf_scored;
};

// Lays the trees out as TreeEnsemble arrays; `votes[i]` lists the (target,
// weight) pairs of node i when it is a LEAF (at most one each).
absl::StatusOr<Flat> Layout(const TreeNodes& t,
                            const std::vector<std::vector<std::pair<int64_t, double>>>& votes,
                            int64_t aggregate, bool allow_unscored = false) {
  const size_t n = t.tree_ids.size();
  std::vector<int64_t> interior(n, -1), leaf(n, -1), mode_codes(n, -1);
  int64_t n_interior = 0, n_leaves = 0;
  Flat f;
  for (size_t i = 0; i < n; ++i) {
    if (t.modes[i] == "LEAF") {
      const auto& lt = votes[i];
      if (lt.size() > 1) {
        return Invalid(absl::StrCat("leaf ", t.node_ids[i], " of tree ", t.tree_ids[i], " feeds ", lt.size(),
                                    " targets; a TreeEnsemble leaf feeds one"));
      }
      if (lt.empty() && aggregate >= 2 && !allow_unscored) {
        return Invalid(absl::StrCat("leaf ", t.node_ids[i], " of tree ", t.tree_ids[i],
                                    " feeds no target, which MIN/MAX aggregation cannot express as a TreeEnsemble"));
      }
      leaf[i] = n_leaves++;
      f.leaf_targets.push_back(lt.empty() ? 0 : lt[0].first);
      f.leaf_weights.push_back(lt.empty() ? 0.0 : lt[0].second);
      f.leaf_scored.push_back(lt.empty() ? 0 : 1);
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(mode_codes[i], Code(kModeNames, t.modes[i], "node mode"));
      interior[i] = n_interior++;
    }
  }
  std::map<int64_t, std::vector<size_t>> by_tree;
  std::map<int64_t, std::vector<int64_t>> children;
  for (size_t i = 0; i < n; ++i) {
    by_tree[t.tree_ids[i]].push_back(i);
    if (interior[i] < 0) continue;
    f.features.push_back(t.features[i]);
    f.modes.push_back(mode_codes[i]);
    f.splits.push_back(t.splits[i]);
    f.missing.push_back(t.missing[i] != 0 ? 1 : 0);
    for (int side = 0; side < 2; ++side) {
      int64_t child = side == 0 ? t.true_ids[i] : t.false_ids[i];
      auto it = t.index.find(std::make_pair(t.tree_ids[i], child));
      if (it == t.index.end()) {
        return Invalid(absl::StrCat("node ", t.node_ids[i], " of tree ", t.tree_ids[i], " branches to missing node ", child));
      }
      children[t.tree_ids[i]].push_back(child);
      bool is_leaf = leaf[it->second] >= 0;
      (side == 0 ? f.true_leafs : f.false_leafs).push_back(is_leaf ? 1 : 0);
      (side == 0 ? f.true_ids : f.false_ids).push_back(is_leaf ? leaf[it->second] : interior[it->second]);
    }
  }
  for (int64_t tree : t.tree_order) {
    std::vector<int64_t>& kids = children[tree];
    std::sort(kids.begin(), kids.end());
    std::vector<size_t> tops;
    for (size_t i : by_tree[tree]) {
      if (!std::binary_search(kids.begin(), kids.end(), t.node_ids[i])) tops.push_back(i);
    }
    if (tops.size() != 1) return Invalid(absl::StrCat("tree ", tree, " has ", tops.size(), " roots"));
    size_t r = tops[0];
    if (interior[r] >= 0) {
      f.roots.push_back(interior[r]);
      continue;
    }
    // A lone leaf: one node whose branches both reach it.
    f.roots.push_back(static_cast<int64_t>(f.features.size()));
    f.features.push_back(0);
    f.modes.push_back(0);
    f.splits.push_back(0.0);
    f.missing.push_back(0);
    f.true_leafs.push_back(1);
    f.false_leafs.push_back(1);
    f.true_ids.push_back(leaf[r]);
    f.false_ids.push_back(leaf[r]);
  }
  return f;
}

// Appends the trees of `src` to `dst`, renumbering its nodes and leaves.
void Append(Flat& dst, const Flat& src) {
  const int64_t node_base = static_cast<int64_t>(dst.features.size());
  const int64_t leaf_base = static_cast<int64_t>(dst.leaf_targets.size());
  for (size_t i = 0; i < src.features.size(); ++i) {
    dst.features.push_back(src.features[i]);
    dst.modes.push_back(src.modes[i]);
    dst.splits.push_back(src.splits[i]);
    dst.missing.push_back(src.missing[i]);
    dst.true_leafs.push_back(src.true_leafs[i]);
    dst.false_leafs.push_back(src.false_leafs[i]);
    dst.true_ids.push_back(src.true_ids[i] + (src.true_leafs[i] ? leaf_base : node_base));
    dst.false_ids.push_back(src.false_ids[i] + (src.false_leafs[i] ? leaf_base : node_base));
  }
  for (int64_t r : src.roots) dst.roots.push_back(r + node_base);
  dst.leaf_targets.insert(dst.leaf_targets.end(), src.leaf_targets.begin(), src.leaf_targets.end());
  dst.leaf_weights.insert(dst.leaf_weights.end(), src.leaf_weights.begin(), src.leaf_weights.end());
  dst.leaf_scored.insert(dst.leaf_scored.end(), src.leaf_scored.begin(), src.leaf_scored.end());
}

// The TreeEnsemble attributes of `f`.
absl::Status WriteAttributes(const Flat& f, int64_t aggregate, int64_t targets, int64_t post, int32_t dtype,
                             std::vector<pb::AttributeProto>& a) {
  a.push_back(ir::IntAttr("aggregate_function", aggregate));
  a.push_back(ir::IntsAttr("leaf_targetids", f.leaf_targets));
  ONNXKIT_ASSIGN_OR_RETURN(pb::AttributeProto lw, TensorA("leaf_weights", dtype, f.leaf_weights));
  a.push_back(std::move(lw));
  a.push_back(ir::IntAttr("n_targets", targets));
  a.push_back(ir::IntsAttr("nodes_falseleafs", f.false_leafs));
  a.push_back(ir::IntsAttr("nodes_falsenodeids", f.false_ids));
  a.push_back(ir::IntsAttr("nodes_featureids", f.features));
  a.push_back(ir::IntsAttr("nodes_missing_value_tracks_true", f.missing));
  {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor m, Tensor::Allocate(pb::kUint8, {static_cast<int64_t>(f.modes.size())}));
    for (size_t i = 0; i < f.modes.size(); ++i) m.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(f.modes[i]);
    pb::AttributeProto ma;
    ma.name = "nodes_modes";
    ma.type = pb::kAttrTensor;
    ma.t = TensorToProto(m, "nodes_modes");
    a.push_back(std::move(ma));
  }
  ONNXKIT_ASSIGN_OR_RETURN(pb::AttributeProto sp, TensorA("nodes_splits", dtype, f.splits));
  a.push_back(std::move(sp));
  a.push_back(ir::IntsAttr("nodes_trueleafs", f.true_leafs));
  a.push_back(ir::IntsAttr("nodes_truenodeids", f.true_ids));
  a.push_back(ir::IntAttr("post_transform", post));
  a.push_back(ir::IntsAttr("tree_roots", f.roots));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TreeEnsembleForm> TreeEnsembleFromRegressor(const ir::Node& node) {
  ONNXKIT_ASSIGN_OR_RETURN(TreeNodes t, ParseTreeNodes(node));
  const std::vector<int64_t> t_trees = Ints(node, "target_treeids"), t_nodes = Ints(node, "target_nodeids"),
                             t_ids = Ints(node, "target_ids");
  bool weights_double = false, base_double = false;
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> weights, Values(node, "target_weights", &weights_double));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> base, Values(node, "base_values", &base_double));
  if (t_nodes.size() != t_trees.size() || t_ids.size() != t_trees.size() || weights.size() != t_trees.size()) {
    return Invalid("the target_* attributes disagree in length");
  }
  const int64_t targets = Int(node, "n_targets", 1);
  if (targets < 1 || targets > (int64_t{1} << 24)) return Invalid(absl::StrCat("n_targets ", targets, " is invalid"));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t aggregate, Code(kAggregateNames, String(node, "aggregate_function", "SUM"),
                                                   "aggregate_function"));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t post, Code(kPostNames, String(node, "post_transform", "NONE"), "post_transform"));
  std::vector<std::vector<std::pair<int64_t, double>>> votes(t.tree_ids.size());
  for (size_t k = 0; k < t_trees.size(); ++k) {
    auto it = t.index.find(std::make_pair(t_trees[k], t_nodes[k]));
    if (it == t.index.end()) return Invalid(absl::StrCat("target entry ", k, " names no node"));
    if (t_ids[k] < 0 || t_ids[k] >= targets) return Invalid(absl::StrCat("target id ", t_ids[k], " is outside n_targets"));
    votes[it->second].emplace_back(t_ids[k], weights[k]);
  }
  bool multi = false;
  for (const auto& v : votes) multi = multi || v.size() > 1;
  TreeEnsembleForm form;
  Flat f;
  if (!multi) {
    ONNXKIT_ASSIGN_OR_RETURN(f, Layout(t, votes, aggregate));
  } else {
    // One layer of the trees per target some leaf feeds (sklearn's
    // multi-output regressors): each leaf carries that target's weight (the
    // sum of its entries for it), or none.
    std::map<int64_t, std::vector<std::vector<std::pair<int64_t, double>>>> layers;
    for (size_t i = 0; i < votes.size(); ++i) {
      for (const auto& [target, weight] : votes[i]) {
        auto& layer = layers[target];
        if (layer.empty()) layer.resize(votes.size());
        if (layer[i].empty()) {
          layer[i].emplace_back(target, weight);
        } else {
          layer[i][0].second += weight;
        }
      }
    }
    for (const auto& [target, layer] : layers) {
      ONNXKIT_ASSIGN_OR_RETURN(Flat one, Layout(t, layer, aggregate, /*allow_unscored=*/true));
      Append(f, one);
    }
    form.layers = static_cast<int64_t>(layers.size());
    form.leaf_scored = f.leaf_scored;
  }

  form.value_dtype = t.splits_double || weights_double ? pb::kDouble : pb::kFloat;
  form.post_transform = post;
  bool any_base = false;
  for (double b : base) any_base |= b != 0;
  if (any_base) {
    if (static_cast<int64_t>(base.size()) != targets) {
      return Invalid(absl::StrCat("base_values holds ", base.size(), " values for ", targets, " targets"));
    }
    form.base_values = base;
  }
  ONNXKIT_RETURN_IF_ERROR(WriteAttributes(f, aggregate, targets, post, form.value_dtype, form.attributes));
  return form;
}

absl::StatusOr<ClassifierForm> TreeEnsembleFromClassifier(const ir::Node& node, int64_t max_nodes) {
  ONNXKIT_ASSIGN_OR_RETURN(TreeNodes t, ParseTreeNodes(node));
  ClassifierForm out;
  out.labels_int = Ints(node, "classlabels_int64s");
  if (const ir::Attribute* a = node.FindAttribute("classlabels_strings")) out.labels_str = a->proto.strings;
  if (out.labels_int.empty() == out.labels_str.empty()) {
    return Invalid("exactly one of classlabels_int64s and classlabels_strings must be given");
  }
  const int64_t classes = static_cast<int64_t>(std::max(out.labels_int.size(), out.labels_str.size()));
  const std::vector<int64_t> c_trees = Ints(node, "class_treeids"), c_nodes = Ints(node, "class_nodeids"),
                             c_ids = Ints(node, "class_ids");
  bool weights_double = false, base_double = false;
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> weights, Values(node, "class_weights", &weights_double));
  ONNXKIT_ASSIGN_OR_RETURN(out.base_values, Values(node, "base_values", &base_double));
  if (c_nodes.size() != c_trees.size() || c_ids.size() != c_trees.size() || weights.size() != c_trees.size()) {
    return Invalid("the class_* attributes disagree in length");
  }
  if (!out.base_values.empty() && static_cast<int64_t>(out.base_values.size()) != classes &&
      !(classes == 2 && out.base_values.size() == 1)) {
    return Invalid(absl::StrCat("base_values holds ", out.base_values.size(), " values for ", classes, " classes"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(out.form.post_transform,
                           Code(kPostNames, String(node, "post_transform", "NONE"), "post_transform"));
  // One layer of trees per class that some leaf votes for: in the layer of
  // class c each leaf keeps its vote for c (several summed), so every
  // TreeEnsemble leaf feeds one target.
  std::map<int64_t, std::vector<std::vector<std::pair<int64_t, double>>>> layers;
  std::vector<size_t> at(c_trees.size());  // node of each vote
  std::set<int64_t> voted;
  out.all_weights_positive = true;
  for (size_t k = 0; k < c_trees.size(); ++k) {
    auto it = t.index.find(std::make_pair(c_trees[k], c_nodes[k]));
    if (it == t.index.end()) return Invalid(absl::StrCat("class entry ", k, " names no node"));
    if (t.modes[it->second] != "LEAF") return Invalid(absl::StrCat("class entry ", k, " names a node that is not a LEAF"));
    if (c_ids[k] < 0 || c_ids[k] >= classes) {
      return Invalid(absl::StrCat("class id ", c_ids[k], " is outside the ", classes, " class labels"));
    }
    out.all_weights_positive = out.all_weights_positive && weights[k] >= 0;
    at[k] = it->second;
    voted.insert(c_ids[k]);
  }
  // The copies grow with the model (a forest voting for every class at every
  // leaf has about as many votes as copied nodes); past that, `max_nodes`.
  const int64_t n_nodes = static_cast<int64_t>(t.tree_ids.size());
  const int64_t budget = std::max(max_nodes, 4 * (n_nodes + static_cast<int64_t>(c_trees.size())));
  if (static_cast<int64_t>(voted.size()) > std::max<int64_t>(1, budget / n_nodes)) {
    return Invalid(absl::StrCat(voted.size(), " class layers of ", n_nodes, " nodes exceed the limit of ", budget,
                                " nodes"));
  }
  for (size_t k = 0; k < c_trees.size(); ++k) {
    auto& votes = layers[c_ids[k]];
    if (votes.empty()) votes.resize(t.tree_ids.size());
    auto& v = votes[at[k]];
    if (v.empty()) {
      v.emplace_back(c_ids[k], weights[k]);
    } else {
      v[0].second += weights[k];
    }
  }
  out.voted_classes = static_cast<int64_t>(layers.size());
  out.always_scored.assign(static_cast<size_t>(classes), 0);
  for (const auto& [cls, votes] : layers) {
    std::map<int64_t, bool> tree_full;  // tree id -> every leaf votes for cls
    for (size_t i = 0; i < t.tree_ids.size(); ++i) {
      auto [it, fresh] = tree_full.emplace(t.tree_ids[i], true);
      if (t.modes[i] == "LEAF" && votes[i].empty()) it->second = false;
    }
    for (const auto& [tree, full] : tree_full) out.always_scored[static_cast<size_t>(cls)] |= full ? 1 : 0;
  }
  Flat all;
  for (const auto& [cls, votes] : layers) {
    ONNXKIT_ASSIGN_OR_RETURN(Flat f, Layout(t, votes, /*aggregate=*/1));
    Append(all, f);
  }
  if (layers.empty()) {  // no votes at all: the trees still route rows
    ONNXKIT_ASSIGN_OR_RETURN(Flat f, Layout(t, std::vector<std::vector<std::pair<int64_t, double>>>(t.tree_ids.size()), 1));
    Append(all, f);
  }
  out.leaf_scored = all.leaf_scored;
  out.form.value_dtype = t.splits_double || weights_double || base_double ? pb::kDouble : pb::kFloat;
  ONNXKIT_RETURN_IF_ERROR(
      WriteAttributes(all, /*aggregate=*/1, classes, /*post=*/0, out.form.value_dtype, out.form.attributes));
  return out;
}

absl::StatusOr<std::vector<pb::AttributeProto>> RegressorFromTreeEnsemble(const ir::Node& node, bool double_values,
                                                                          int64_t max_nodes) {
  const std::vector<int64_t> features = Ints(node, "nodes_featureids"), true_id = Ints(node, "nodes_truenodeids"),
                             false_id = Ints(node, "nodes_falsenodeids"), true_leaf = Ints(node, "nodes_trueleafs"),
                             false_leaf = Ints(node, "nodes_falseleafs"), leaf_target = Ints(node, "leaf_targetids"),
                             roots = Ints(node, "tree_roots");
  const size_t n = features.size(), leaves = leaf_target.size();
  std::vector<int64_t> missing = Ints(node, "nodes_missing_value_tracks_true");
  if (missing.empty()) missing.assign(n, 0);
  auto tensor_values = [&](std::string_view name) -> absl::StatusOr<std::vector<double>> {
    const ir::Attribute* a = node.FindAttribute(name);
    if (a == nullptr || !a->proto.t) return std::vector<double>();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(*a->proto.t));
    std::vector<double> out(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) {
      double v = 0;
      switch (t.dtype()) {
        case pb::kFloat: v = t.data<float>()[i]; break;
        case pb::kDouble: v = t.data<double>()[i]; break;
        case pb::kUint8: v = t.data<uint8_t>()[i]; break;
        case pb::kFloat16:
          return Invalid(absl::StrCat("attribute '", Sv(name), "' holds float16 values, which TreeEnsembleRegressor lacks"));
        default: return Invalid(absl::StrCat("attribute '", Sv(name), "' has an unexpected element type"));
      }
      out[static_cast<size_t>(i)] = v;
    }
    return out;
  };
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> splits, tensor_values("nodes_splits"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> weights, tensor_values("leaf_weights"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> mode_values, tensor_values("nodes_modes"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> members, tensor_values("membership_values"));
  if (true_id.size() != n || false_id.size() != n || true_leaf.size() != n || false_leaf.size() != n ||
      missing.size() != n || splits.size() != n || mode_values.size() != n || weights.size() != leaves) {
    return Invalid("the TreeEnsemble attributes disagree in length");
  }
  const int64_t targets = Int(node, "n_targets", 1), aggregate = Int(node, "aggregate_function", 1),
                post = Int(node, "post_transform", 0);
  if (targets < 1 || aggregate < 0 || aggregate > 3 || post < 0 || post > 4) {
    return Invalid("n_targets, aggregate_function or post_transform is invalid");
  }
  // Membership sets per node, NaN-separated in node order.
  std::vector<std::vector<double>> sets(n);
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (mode_values[i] < 0 || mode_values[i] > 6) return Invalid(absl::StrCat("nodes_modes[", i, "] is not a mode"));
    if (mode_values[i] != 6) continue;
    if (next >= members.size()) return Invalid("membership_values has too few sets");
    while (next < members.size() && !std::isnan(members[next])) sets[i].push_back(members[next++]);
    ++next;
  }
  for (size_t i = 0; i < n; ++i) {
    bool ok = features[i] >= 0 &&
              (true_leaf[i] ? true_id[i] >= 0 && static_cast<size_t>(true_id[i]) < leaves
                            : true_id[i] >= 0 && static_cast<size_t>(true_id[i]) < n) &&
              (false_leaf[i] ? false_id[i] >= 0 && static_cast<size_t>(false_id[i]) < leaves
                             : false_id[i] >= 0 && static_cast<size_t>(false_id[i]) < n);
    if (!ok) return Invalid(absl::StrCat("node ", i, " has an invalid feature id or branch index"));
  }
  for (int64_t t : leaf_target) {
    if (t < 0 || t >= targets) return Invalid(absl::StrCat("leaf target ", t, " is outside n_targets"));
  }

  std::vector<int64_t> o_tree, o_node, o_feature, o_true, o_false, o_missing, t_tree, t_node, t_ids;
  std::vector<std::string> o_modes;
  std::vector<double> o_values, t_weights;
  for (size_t tree = 0; tree < roots.size(); ++tree) {
    if (roots[tree] < 0 || static_cast<size_t>(roots[tree]) >= n) {
      return Invalid(absl::StrCat("tree root ", roots[tree], " is not a node"));
    }
    // Each node or leaf reachable from the root gets ids once (shared
    // subtrees stay shared); a MEMBER node takes one id per set value.
    std::map<std::pair<bool, int64_t>, int64_t> ids;
    std::deque<std::pair<bool, int64_t>> work;
    int64_t next_id = 0;
    auto id_of = [&](bool is_leaf, int64_t idx) -> absl::StatusOr<int64_t> {
      auto it = ids.find({is_leaf, idx});
      if (it != ids.end()) return it->second;
      int64_t count = !is_leaf && mode_values[static_cast<size_t>(idx)] == 6
                          ? std::max<int64_t>(1, static_cast<int64_t>(sets[static_cast<size_t>(idx)].size()))
                          : 1;
      if (static_cast<int64_t>(o_tree.size()) + next_id + count > max_nodes) {
        return Invalid(absl::StrCat("the regressor form would exceed ", max_nodes, " nodes"));
      }
      int64_t id = next_id;
      next_id += count;
      ids[{is_leaf, idx}] = id;
      work.emplace_back(is_leaf, idx);
      return id;
    };
    ONNXKIT_RETURN_IF_ERROR(id_of(false, roots[tree]).status());
    auto emit = [&](int64_t id, int64_t feature, std::string_view mode, double value, int64_t t, int64_t f,
                    int64_t miss) {
      o_tree.push_back(static_cast<int64_t>(tree));
      o_node.push_back(id);
      o_feature.push_back(feature);
      o_modes.emplace_back(mode);
      o_values.push_back(value);
      o_true.push_back(t);
      o_false.push_back(f);
      o_missing.push_back(miss);
    };
    while (!work.empty()) {
      auto [is_leaf, idx] = work.front();
      work.pop_front();
      const int64_t id = ids[{is_leaf, idx}];
      const size_t i = static_cast<size_t>(idx);
      if (is_leaf) {
        emit(id, 0, "LEAF", 0.0, 0, 0, 0);
        t_tree.push_back(static_cast<int64_t>(tree));
        t_node.push_back(id);
        t_ids.push_back(leaf_target[i]);
        t_weights.push_back(weights[i]);
        continue;
      }
      ONNXKIT_ASSIGN_OR_RETURN(int64_t t, id_of(true_leaf[i] != 0, true_id[i]));
      ONNXKIT_ASSIGN_OR_RETURN(int64_t f, id_of(false_leaf[i] != 0, false_id[i]));
      const int64_t miss = missing[i] != 0 ? 1 : 0;
      const int mode = static_cast<int>(mode_values[i]);
      if (mode != 6) {
        emit(id, features[i], kModeNames[mode], splits[i], t, f, miss);
        continue;
      }
      // MEMBER: x == s0 ? T : (x == s1 ? T : ... F); an empty set matches
      // nothing (NaN never equals), except through missing_value_tracks_true.
      const std::vector<double>& s = sets[i];
      if (s.empty()) {
        emit(id, features[i], "BRANCH_EQ", std::nan(""), t, f, miss);
        continue;
      }
      for (size_t k = 0; k < s.size(); ++k) {
        int64_t k_id = id + static_cast<int64_t>(k);
        emit(k_id, features[i], "BRANCH_EQ", s[k], t, k + 1 < s.size() ? k_id + 1 : f, miss);
      }
    }
  }

  std::vector<pb::AttributeProto> a;
  a.push_back(ir::StringAttr("aggregate_function", std::string(kAggregateNames[aggregate])));
  a.push_back(ir::IntAttr("n_targets", targets));
  a.push_back(ir::IntsAttr("nodes_falsenodeids", o_false));
  a.push_back(ir::IntsAttr("nodes_featureids", o_feature));
  a.push_back(ir::IntsAttr("nodes_missing_value_tracks_true", o_missing));
  {
    pb::AttributeProto m;
    m.name = "nodes_modes";
    m.type = pb::kAttrStrings;
    m.strings = o_modes;
    a.push_back(std::move(m));
  }
  a.push_back(ir::IntsAttr("nodes_nodeids", o_node));
  a.push_back(ir::IntsAttr("nodes_treeids", o_tree));
  a.push_back(ir::IntsAttr("nodes_truenodeids", o_true));
  a.push_back(ir::StringAttr("post_transform", std::string(kPostNames[post])));
  a.push_back(ir::IntsAttr("target_ids", t_ids));
  a.push_back(ir::IntsAttr("target_nodeids", t_node));
  a.push_back(ir::IntsAttr("target_treeids", t_tree));
  if (double_values) {
    ONNXKIT_ASSIGN_OR_RETURN(pb::AttributeProto v, TensorA("nodes_values_as_tensor", pb::kDouble, o_values));
    ONNXKIT_ASSIGN_OR_RETURN(pb::AttributeProto w, TensorA("target_weights_as_tensor", pb::kDouble, t_weights));
    a.push_back(std::move(v));
    a.push_back(std::move(w));
  } else {
    pb::AttributeProto v, w;
    v.name = "nodes_values";
    v.type = pb::kAttrFloats;
    for (double d : o_values) v.floats.push_back(static_cast<float>(d));
    w.name = "target_weights";
    w.type = pb::kAttrFloats;
    for (double d : t_weights) w.floats.push_back(static_cast<float>(d));
    a.push_back(std::move(v));
    a.push_back(std::move(w));
  }
  return a;
}

}  // namespace onnxkit::runner::reference::ml_forms
