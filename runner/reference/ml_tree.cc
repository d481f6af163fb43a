// Reference kernels: TreeEnsemble (ai.onnx.ml 5), and TreeEnsembleRegressor
// (1, 3) run through its TreeEnsemble form (ml_tree_forms.h).
//
// Each tree starts at nodes_*[tree_roots[t]]; a node compares feature
// nodes_featureids[i] of the row with nodes_splits[i] (modes LEQ, LT, GTE,
// GT, EQ, NEQ, MEMBER; NaN goes the true way where
// nodes_missing_value_tracks_true) and continues at nodes_truenodeids[i] or
// nodes_falsenodeids[i], which index the leaves instead when
// nodes_trueleafs[i] / nodes_falseleafs[i] is set. Leaf weights are combined
// per target (SUM, AVERAGE over trees, MIN, MAX; targets no leaf reaches
// keep 0, the float max or min) in X's type, then post_transform applies
// (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT). MEMBER sets come from
// membership_values, NaN-separated, in node order.
// Also the post_transform helpers the linear models share (ml_util).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <set>

#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"
#include "runner/reference/ml_tree_forms.h"

namespace onnxkit::runner::reference {
namespace {

enum class Mode { kLeq, kLt, kGte, kGt, kEq, kNeq, kMember };

struct Ensemble {
  std::vector<int64_t> feature, true_id, false_id, true_leaf, false_leaf, missing_true, leaf_target, roots;
  std::vector<Mode> modes;
  std::vector<double> splits, leaf_weights;
  std::vector<std::set<double>> members;  // per node (empty unless MEMBER)
  int64_t targets = 1;
  int64_t aggregate = 1;  // 0 AVERAGE, 1 SUM, 2 MIN, 3 MAX
  int64_t post = 0;       // 0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT
  int32_t dtype = 1;      // of splits and weights
  // TreeEnsembleRegressor-1/3 run as a TreeEnsemble: X of any numeric type,
  // a float output, base values added before post_transform.
  bool regressor = false;
  std::vector<double> base;
  // TreeEnsembleClassifier-1/3 (classifier set): whether each leaf carries a
  // vote, and what turns the per-class sums into labels and scores.
  std::vector<uint8_t> leaf_scored;
  std::optional<ml_forms::ClassifierForm> classifier;
  // The trees AVERAGE divides by: the roots, or the roots of one layer when
  // a regressor's trees are laid out once per target.
  int64_t layers = 1;
};

absl::StatusOr<Tensor> RequiredTensor(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (a == nullptr || !a->proto.t) return absl::InvalidArgumentError(absl::StrCat("attribute '", Sv(name), "' is required"));
  return TensorFromProto(*a->proto.t);
}

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.size()));
  (void)VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (int64_t i = 0; i < t.size(); ++i) out[static_cast<size_t>(i)] = static_cast<double>(static_cast<ComputeT<T>>(t.data<T>()[i]));
    return absl::OkStatus();
  });
  return out;
}

// sqrt(2) * erfinv(2p - 1), by Newton steps on std::erf.
double Probit(double p) {
  double y = 2 * p - 1;
  if (y <= -1) return -std::numeric_limits<double>::infinity();
  if (y >= 1) return std::numeric_limits<double>::infinity();
  double x = 0;
  for (int i = 0; i < 60; ++i) {
    double err = std::erf(x) - y;
    x -= err / (2 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
  }
  return std::sqrt(2.0) * x;
}

}  // namespace

namespace ml_util {

absl::StatusOr<int64_t> PostTransformCode(std::string_view name) {
  static constexpr std::string_view kNames[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
  for (int64_t i = 0; i < 5; ++i) {
    if (name == kNames[i]) return i;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("post_transform '", Sv(name), "' is not one of NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT"));
}

void ApplyPostTransform(int64_t post, std::vector<double>& row) {
  if (post == 1 || post == 3) {  // SOFTMAX (SOFTMAX_ZERO leaves zeros at zero)
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (double v : row) {
      if (post == 1 || v != 0) mx = std::max(mx, v);
    }
    for (double& v : row) {
      v = post == 3 && v == 0 ? 0 : std::exp(v - mx);
      sum += v;
    }
    for (double& v : row) v = sum > 0 ? v / sum : v;
  } else if (post == 2) {
    for (double& v : row) v = 1 / (1 + std::exp(-v));
  } else if (post == 4) {
    for (double& v : row) v = Probit(v);
  }
}

}  // namespace ml_util

namespace {

bool RegressorInput(int32_t dtype) {
  return dtype == pb::kFloat || dtype == pb::kDouble || dtype == pb::kInt64 || dtype == pb::kInt32;
}

float Logistic(double v) { return DoubleToFloat(1 / (1 + std::exp(-v))); }

// A classifier's scores from the per-class sums `row` (`has`: whether some
// reached leaf voted for the class), in place, and the index of its label.
// Several classes: base values added, the best class that has a score
// (first on ties) wins, post_transform applies to every score. Two classes
// (as ONNX Runtime does; the spec leaves it open): with two base values and
// a vote for class 1, scores become [-(s0 + b1), s0 + b1]; with one, s0 +=
// b0. When only class 0 has a score it is the single score s, and the
// label is class 1 when s > 0.5 (every weight >= 0) or s > 0 (otherwise) if
// all votes are for one class id, else when s > 0; Z becomes [1 - p, p]
// with weights >= 0 (p = logistic(s) under LOGISTIC, else s), [-s, s] with
// mixed weights (LOGISTIC: [logistic(-s), logistic(s)]), or PROBIT(s).
// Otherwise a class without a vote scores 0 before post_transform. With two
// classes voted for and other labels than 0 and 1, ONNX Runtime writes 1 or
// 0 as the label; this kernel writes the class label.
int64_t ClassifierScores(const ml_forms::ClassifierForm& c, int64_t classes, std::vector<double>& row,
                         std::vector<uint8_t>& has) {
  const std::vector<double>& base = c.base_values;
  const int64_t post = c.form.post_transform;
  for (double& v : row) v = static_cast<double>(DoubleToFloat(v));
  if (classes != 2) {
    for (size_t k = 0; k < base.size(); ++k) {
      row[k] += base[k];
      has[k] = 1;
    }
    int64_t best = -1;
    for (int64_t k = 0; k < classes; ++k) {
      if (has[static_cast<size_t>(k)] && (best < 0 || row[static_cast<size_t>(k)] > row[static_cast<size_t>(best)])) best = k;
    }
    ml_util::ApplyPostTransform(post, row);
    return std::max<int64_t>(best, 0);
  }
  int mode = -1;  // how a single score becomes two (ONNX Runtime's cases 0-3)
  bool single = false;
  if (base.size() == 2) {
    if (has[1]) {
      row[1] = base[1] + row[0];
      row[0] = -row[1];
    } else {
      row[0] += base[0];
      row[1] += base[1];
    }
  } else if (base.size() == 1) {
    row[0] += base[0];
    single = !has[1];
  } else {
    mode = 3;
    single = !has[1];
  }
  const double pos = !single && has[1] ? row[1] : (has[0] ? row[0] : 0.0);
  int64_t label = pos > 0 ? 1 : 0;
  if (c.voted_classes == 1) {
    if (c.all_weights_positive) {
      label = pos > 0.5 ? 1 : 0;
      mode = label == 1 ? 0 : 1;
    } else {
      mode = label == 1 ? 2 : 3;
    }
  }
  if (!single) {
    for (size_t k = 0; k < 2; ++k) row[k] = has[k] ? row[k] : 0.0;  // a class without a vote scores 0
    ml_util::ApplyPostTransform(post, row);
    return label;
  }
  const double s = row[0];
  if (post == 4) {
    std::vector<double> one = {s};
    ml_util::ApplyPostTransform(4, one);
    row = {one[0], 0.0};
  } else if (mode == 0 || mode == 1) {
    const double p = post == 2 ? static_cast<double>(Logistic(s)) : s;
    row = {1 - p, p};
  } else if ((mode == 2 || mode == 3) && post == 2) {
    row = {Logistic(-s), Logistic(s)};
  } else if (mode == 2 || mode == 3) {
    row = {-s, s};
  } else {
    row = {s, 0.0};
  }
  return label;
}

class TreeEnsembleKernel : public Kernel {
 public:
  explicit TreeEnsembleKernel(Ensemble e) : e_(std::move(e)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if ((e_.regressor ? !RegressorInput(x->dtype()) : x->dtype() != e_.dtype) || x->rank() > 2) {
      return absl::InvalidArgumentError(absl::StrCat("X must be [N, F] of ", e_.regressor ? "a numeric type, not " : "the ensemble's type ",
                                                     Sv(DataTypeName(e_.dtype)), ", got ", DescribeTensor(*x)));
    }
    const int64_t rows = x->rank() == 2 ? x->dim(0) : 1, width = x->rank() == 0 ? 1 : x->shape().back();
    for (int64_t f : e_.feature) {
      if (f >= width) return absl::OutOfRangeError(absl::StrCat("feature id ", f, " is outside the ", width, " features of X"));
    }
    const int32_t out_dtype = e_.regressor ? pb::kFloat : x->dtype();
    Tensor* y = nullptr;
    Tensor* labels = nullptr;
    if (e_.classifier) {
      const bool strings = !e_.classifier->labels_str.empty();
      ONNXKIT_ASSIGN_OR_RETURN(labels, ctx.AllocateOutput(0, strings ? pb::kString : pb::kInt64, {rows}));
      ONNXKIT_ASSIGN_OR_RETURN(y, ctx.AllocateOutput(1, pb::kFloat, {rows, e_.targets}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(y, ctx.AllocateOutput(0, out_dtype, {rows, e_.targets}));
    }
    const std::vector<double> xs = Doubles(*x);
    const bool single = e_.dtype != pb::kDouble;  // accumulate in float unless the values are double
    std::vector<double> row;
    std::vector<uint8_t> has, touched;
    for (int64_t r = 0; r < rows; ++r) {
      const double init = e_.aggregate == 2 ? (single ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max())
                          : e_.aggregate == 3 ? (single ? std::numeric_limits<float>::lowest() : std::numeric_limits<double>::lowest())
                                              : 0.0;
      row.assign(static_cast<size_t>(e_.targets), init);
      has.assign(static_cast<size_t>(e_.targets), 0);
      touched.assign(static_cast<size_t>(e_.targets), 0);
      const double trees =
          static_cast<double>(e_.roots.size() / static_cast<size_t>(std::max<int64_t>(e_.layers, 1)));
      for (int64_t root : e_.roots) {
        ONNXKIT_ASSIGN_OR_RETURN(int64_t leaf, FindLeaf(root, xs.data() + r * width));
        const size_t target = static_cast<size_t>(e_.leaf_target[static_cast<size_t>(leaf)]);
        if (!e_.leaf_scored.empty()) {
          has[target] |= e_.leaf_scored[static_cast<size_t>(leaf)];
          if (e_.leaf_scored[static_cast<size_t>(leaf)] == 0)
            continue;  // carries no weight: counts for nothing
        }
        touched[target] = 1;
        double w = e_.leaf_weights[static_cast<size_t>(leaf)];
        double& acc = row[target];
        switch (e_.aggregate) {
          case 0:
            acc += w / trees;
            break;
          case 1: acc += w; break;
          case 2: acc = std::min(acc, w); break;
          default: acc = std::max(acc, w); break;
        }
        if (single) acc = static_cast<double>(DoubleToFloat(acc));
      }
      // MIN / MAX of no leaf: 0 (then the base value), not the starting extreme.
      for (size_t t = 0; t < row.size(); ++t) {
        if (!touched[t]) row[t] = 0.0;
      }
      if (e_.classifier) {
        const int64_t label = ClassifierScores(*e_.classifier, e_.targets, row, has);
        if (labels->is_string()) {
          labels->mutable_strings()[static_cast<size_t>(r)] = e_.classifier->labels_str[static_cast<size_t>(label)];
        } else {
          labels->mutable_data<int64_t>()[r] = e_.classifier->labels_int[static_cast<size_t>(label)];
        }
      } else {
        for (size_t t = 0; t < e_.base.size(); ++t) row[t] += e_.base[t];
        ml_util::ApplyPostTransform(e_.post, row);
      }
      ONNXKIT_RETURN_IF_ERROR(VisitFloat(out_dtype, [&](auto tag) -> absl::Status {
        using T = decltype(tag);
        for (int64_t t = 0; t < e_.targets; ++t) y->mutable_data<T>()[r * e_.targets + t] = RoundFromDouble<T>(row[static_cast<size_t>(t)]);
        return absl::OkStatus();
      }));
    }
    return absl::OkStatus();
  }

 private:
  // The leaf one row reaches from node `root`; a cycle is an error.
  absl::StatusOr<int64_t> FindLeaf(int64_t node, const double* features) const {
    for (size_t steps = 0; steps <= e_.modes.size(); ++steps) {
      size_t i = static_cast<size_t>(node);
      double v = features[e_.feature[i]];
      double s = e_.splits[i];
      bool go = false;
      switch (e_.modes[i]) {
        case Mode::kLeq: go = v <= s; break;
        case Mode::kLt: go = v < s; break;
        case Mode::kGte: go = v >= s; break;
        case Mode::kGt: go = v > s; break;
        case Mode::kEq: go = v == s; break;
        case Mode::kNeq: go = v != s; break;
        case Mode::kMember:
          go = !std::isnan(v) && e_.members[i].count(v) > 0;
          break;  // NaN orders with nothing
      }
      go = go || (e_.missing_true[i] != 0 && std::isnan(v));
      if (go ? e_.true_leaf[i] : e_.false_leaf[i]) return go ? e_.true_id[i] : e_.false_id[i];
      node = go ? e_.true_id[i] : e_.false_id[i];
    }
    return absl::InvalidArgumentError("the tree has a cycle");
  }

  Ensemble e_;
};

}  // namespace

namespace {

absl::StatusOr<Ensemble> ParseEnsemble(const ir::Node& node) {
  Ensemble e;
  e.feature = AttrInts(node, "nodes_featureids");
  e.true_id = AttrInts(node, "nodes_truenodeids");
  e.false_id = AttrInts(node, "nodes_falsenodeids");
  e.true_leaf = AttrInts(node, "nodes_trueleafs");
  e.false_leaf = AttrInts(node, "nodes_falseleafs");
  e.leaf_target = AttrInts(node, "leaf_targetids");
  e.roots = AttrInts(node, "tree_roots");
  e.targets = AttrInt(node, "n_targets", 1);
  e.aggregate = AttrInt(node, "aggregate_function", 1);
  e.post = AttrInt(node, "post_transform", 0);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor splits, RequiredTensor(node, "nodes_splits"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor weights, RequiredTensor(node, "leaf_weights"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor modes, RequiredTensor(node, "nodes_modes"));
  e.dtype = splits.dtype();
  if ((e.dtype != 1 && e.dtype != 10 && e.dtype != 11) || weights.dtype() != e.dtype || modes.dtype() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("nodes_splits and leaf_weights must share a float type and nodes_modes "
                                                   "be uint8, got ", DescribeTensor(splits), ", ", DescribeTensor(weights),
                                                   ", ", DescribeTensor(modes)));
  }
  e.splits = Doubles(splits);
  e.leaf_weights = Doubles(weights);
  const size_t n = e.feature.size(), leaves = e.leaf_target.size();
  e.missing_true = AttrInts(node, "nodes_missing_value_tracks_true", std::vector<int64_t>(n, 0));
  bool sizes_ok = e.true_id.size() == n && e.false_id.size() == n && e.true_leaf.size() == n &&
                  e.false_leaf.size() == n && e.missing_true.size() == n && e.splits.size() == n &&
                  static_cast<size_t>(modes.size()) == n && e.leaf_weights.size() == leaves;
  if (!sizes_ok || e.targets < 1 || e.aggregate < 0 || e.aggregate > 3 || e.post < 0 || e.post > 4) {
    return absl::InvalidArgumentError("TreeEnsemble attributes disagree in length or hold invalid enum values");
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor members_t, [&]() -> absl::StatusOr<Tensor> {
    const ir::Attribute* a = node.FindAttribute("membership_values");
    if (a == nullptr || !a->proto.t) return Tensor();
    return TensorFromProto(*a->proto.t);
  }());
  std::vector<double> member_values = members_t.defined() ? Doubles(members_t) : std::vector<double>();
  size_t next_member = 0;
  e.members.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint8_t m = modes.data<uint8_t>()[i];
    if (m > 6) return absl::InvalidArgumentError(absl::StrCat("nodes_modes[", i, "] = ", m, " is not a mode"));
    e.modes.push_back(static_cast<Mode>(m));
    if (e.modes.back() == Mode::kMember) {
      if (next_member >= member_values.size()) return absl::InvalidArgumentError("membership_values has too few sets");
      while (next_member < member_values.size() && !std::isnan(member_values[next_member])) {
        e.members[i].insert(member_values[next_member++]);
      }
      ++next_member;  // the NaN separator
    }
    bool feature_ok = e.feature[i] >= 0;
    bool t_ok = e.true_leaf[i] ? e.true_id[i] >= 0 && static_cast<size_t>(e.true_id[i]) < leaves
                               : e.true_id[i] >= 0 && static_cast<size_t>(e.true_id[i]) < n;
    bool f_ok = e.false_leaf[i] ? e.false_id[i] >= 0 && static_cast<size_t>(e.false_id[i]) < leaves
                                : e.false_id[i] >= 0 && static_cast<size_t>(e.false_id[i]) < n;
    if (!feature_ok || !t_ok || !f_ok) {
      return absl::InvalidArgumentError(absl::StrCat("node ", i, " has an invalid feature id or branch index"));
    }
  }
  for (int64_t t : e.leaf_target) {
    if (t < 0 || t >= e.targets) return absl::InvalidArgumentError(absl::StrCat("leaf target ", t, " is outside [0, ", e.targets, ")"));
  }
  for (int64_t r : e.roots) {
    if (r < 0 || static_cast<size_t>(r) >= n) return absl::InvalidArgumentError(absl::StrCat("tree root ", r, " is not a node"));
  }
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsemble(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(Ensemble e, ParseEnsemble(node));
  return std::unique_ptr<Kernel>(new TreeEnsembleKernel(std::move(e)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsembleClassifier(const ir::Node& node, const KernelInfo&) {
  constexpr int64_t kMaxNodes = int64_t{1} << 24;
  ONNXKIT_ASSIGN_OR_RETURN(ml_forms::ClassifierForm form, ml_forms::TreeEnsembleFromClassifier(node, kMaxNodes));
  ir::Graph scratch;
  ir::NodeSpec spec;
  spec.op_type = "TreeEnsemble";
  spec.domain = "ai.onnx.ml";
  spec.attributes = std::move(form.form.attributes);
  form.form.attributes.clear();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * as_ensemble, scratch.AddNode(std::move(spec)));
  ONNXKIT_ASSIGN_OR_RETURN(Ensemble e, ParseEnsemble(*as_ensemble));
  e.regressor = true;
  e.leaf_scored = std::move(form.leaf_scored);
  e.classifier = std::move(form);
  return std::unique_ptr<Kernel>(new TreeEnsembleKernel(std::move(e)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsembleRegressor(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(ml_forms::TreeEnsembleForm form, ml_forms::TreeEnsembleFromRegressor(node));
  ir::Graph scratch;
  ir::NodeSpec spec;
  spec.op_type = "TreeEnsemble";
  spec.domain = "ai.onnx.ml";
  spec.attributes = std::move(form.attributes);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * as_ensemble, scratch.AddNode(std::move(spec)));
  ONNXKIT_ASSIGN_OR_RETURN(Ensemble e, ParseEnsemble(*as_ensemble));
  e.regressor = true;
  e.base = std::move(form.base_values);
  e.layers = form.layers;
  e.leaf_scored = std::move(form.leaf_scored);
  return std::unique_ptr<Kernel>(new TreeEnsembleKernel(std::move(e)));
}

}  // namespace onnxkit::runner::reference
