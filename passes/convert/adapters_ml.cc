// Adapters for ai.onnx.ml (`--ml-opset`):
//   LabelEncoder 2:  classes_strings (strings <-> their positions) <->
//                    keys_*/values_* lists
//   LabelEncoder 4:  keys_tensor/values_tensor/default_tensor -> lists
//                    going down (float, int64 and string ones)
//   TreeEnsembleRegressor/Classifier 3: *_as_tensor (double) -> float lists
//                    going down, when every value is a float exactly
//   TreeEnsembleRegressor 5: deprecated; rewritten as a TreeEnsemble (Cast
//                    of X to float before and an Add of base_values after
//                    where needed), and back going down
//   TreeEnsembleClassifier 5: deprecated; with 3 or more classes rewritten
//                    as a TreeEnsemble of per-class raw scores (+ base_values),
//                    Y = Gather(labels, ArgMax(scores)), Z = Softmax/Sigmoid
//                    of the scores for SOFTMAX/LOGISTIC; blocks for two
//                    classes, SOFTMAX_ZERO/PROBIT, and classes a row may get
//                    no vote for (no base values)
// Before (up):  %y = ai.onnx.ml.LabelEncoder-1[classes_strings=["a","b"]](%s: string)
// After:        %y = ai.onnx.ml.LabelEncoder-2[keys_strings=["a","b"], values_int64s=[0,1]](%s)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/convert.h"
#include "runner/reference/ml_tree_forms.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

constexpr std::string_view kMl = "ai.onnx.ml";
// Nodes a TreeEnsemble may unfold to as a regressor.
constexpr int64_t kMaxRegressorNodes = int64_t{1} << 24;

std::vector<int64_t> Positions(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

bool IsPositions(const std::vector<int64_t>& v) { return v == Positions(v.size()); }

// The element type of `value` where known (0 otherwise).
int32_t TypeOf(Step& step, const ir::Value* value) {
  if (value == nullptr) return 0;
  return ElemType(*value, *step.ctx).value_or(0);
}

// A node of ai.onnx.ml before step.node (the caller queues it for further steps).
absl::StatusOr<ir::Node*> AddMlBefore(Step& step, std::string op, std::vector<ir::Value*> inputs,
                                      std::vector<pb::AttributeProto> attrs) {
  ir::NodeSpec spec;
  spec.op_type = std::move(op);
  spec.domain = std::string(kMl);
  spec.name = step.node->name();
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.outputs.push_back(step.graph->FreshName(spec.op_type + "_out"));
  return step.graph->AddNode(std::move(spec), ir::Position::Before(step.node));
}

// A plain ai.onnx node before step.node (valid at every opset convert targets).
absl::StatusOr<ir::Node*> AddOnnxBefore(Step& step, std::string op, std::vector<ir::Value*> inputs,
                                        std::vector<pb::AttributeProto> attrs) {
  ir::NodeSpec spec;
  spec.op_type = std::move(op);
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.outputs.push_back(step.graph->FreshName(spec.op_type + "_out"));
  return step.graph->AddNode(std::move(spec), ir::Position::Before(step.node));
}

absl::StatusOr<runner::Tensor> AttrTensor(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (a == nullptr || !a->proto.t) return runner::Tensor();
  return runner::TensorFromProto(*a->proto.t);
}

}  // namespace

absl::Status LabelEncoderUp2(Step& step) {
  ir::Node& n = *step.node;
  const ir::Attribute* classes = n.FindAttribute("classes_strings");
  std::vector<std::string> c = classes == nullptr ? std::vector<std::string>() : classes->proto.strings;
  int32_t in = TypeOf(step, n.input(0));
  if (in == 0)
    in = TypeOf(step, n.output(0)) == pb::kString  ? pb::kInt64
         : TypeOf(step, n.output(0)) == pb::kInt64 ? pb::kString
                                                   : 0;
  if (in == pb::kString) {
    absl::flat_hash_set<std::string> seen;
    for (const std::string& s : c) {
      if (!seen.insert(s).second) return Block(absl::StrCat("classes_strings lists '", s, "' twice"));
    }
    n.SetAttribute(StringsAttr("keys_strings", c));
    n.SetAttribute(IntsAttr("values_int64s", Positions(c.size())));
  } else if (in == pb::kInt64) {
    n.SetAttribute(IntsAttr("keys_int64s", Positions(c.size())));
    n.SetAttribute(StringsAttr("values_strings", c));
  } else {
    return Block("the element type of X is unknown (string or int64 decides the mapping)");
  }
  n.RemoveAttribute("classes_strings");
  return GenericStep(step);
}

absl::Status LabelEncoderDown2(Step& step) {
  ir::Node& n = *step.node;
  auto list = [&](std::string_view name) -> const ir::Attribute* { return n.FindAttribute(name); };
  if (list("keys_floats") != nullptr || list("values_floats") != nullptr) {
    return Block("LabelEncoder-1 maps only strings to positions and back, not floats");
  }
  std::vector<std::string> classes;
  if (list("keys_strings") != nullptr && list("values_int64s") != nullptr) {
    if (!IsPositions(list("values_int64s")->proto.ints) ||
        list("values_int64s")->proto.ints.size() != list("keys_strings")->proto.strings.size()) {
      return Block("values_int64s are not the positions 0, 1, ... of keys_strings");
    }
    classes = list("keys_strings")->proto.strings;
  } else if (list("keys_int64s") != nullptr && list("values_strings") != nullptr) {
    if (!IsPositions(list("keys_int64s")->proto.ints) ||
        list("keys_int64s")->proto.ints.size() != list("values_strings")->proto.strings.size()) {
      return Block("keys_int64s are not the positions 0, 1, ... of values_strings");
    }
    classes = list("values_strings")->proto.strings;
  } else {
    return Block("LabelEncoder-1 maps only strings to positions and back");
  }
  for (std::string_view name :
       {"keys_strings", "values_int64s", "keys_int64s", "values_strings", "default_float"}) {
    n.RemoveAttribute(name);
  }
  n.SetAttribute(StringsAttr("classes_strings", std::move(classes)));
  return GenericStep(step);
}

absl::Status LabelEncoderDown4(Step& step) {
  ir::Node& n = *step.node;
  for (std::string_view base : {"keys", "values"}) {
    std::string name = absl::StrCat(Sv(base), "_tensor");
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, AttrTensor(n, name));
    if (!t.defined()) continue;
    if (t.dtype() == pb::kString) {
      std::vector<std::string> v(t.strings().begin(), t.strings().end());
      n.SetAttribute(StringsAttr(absl::StrCat(Sv(base), "_strings"), std::move(v)));
    } else if (t.dtype() == pb::kInt64) {
      n.SetAttribute(IntsAttr(absl::StrCat(Sv(base), "_int64s"),
                              std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.size())));
    } else if (t.dtype() == pb::kFloat) {
      n.SetAttribute(FloatsAttr(absl::StrCat(Sv(base), "_floats"),
                            std::vector<float>(t.data<float>(), t.data<float>() + t.size())));
    } else {
      return Block(
          absl::StrCat(name, " holds ", Sv(DataTypeName(t.dtype())), " values, which LabelEncoder-2 lacks"));
    }
    n.RemoveAttribute(name);
  }
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor d, AttrTensor(n, "default_tensor"));
  if (d.defined()) {
    if (d.size() != 1) return Block("default_tensor does not hold one value");
    if (d.dtype() == pb::kString) {
      n.SetAttribute(StringAttr("default_string", d.strings()[0]));
    } else if (d.dtype() == pb::kInt64) {
      n.SetAttribute(IntAttr("default_int64", d.data<int64_t>()[0]));
    } else if (d.dtype() == pb::kFloat) {
      n.SetAttribute(FloatAttr("default_float", d.data<float>()[0]));
    } else {
      return Block(absl::StrCat("default_tensor holds a ", Sv(DataTypeName(d.dtype())),
                                " value, which LabelEncoder-2 lacks"));
    }
    n.RemoveAttribute("default_tensor");
  }
  return GenericStep(step);
}

absl::Status TreeAsTensorDown3(Step& step) {
  ir::Node& n = *step.node;
  for (std::string_view base :
       {"base_values", "nodes_hitrates", "nodes_values", "target_weights", "class_weights"}) {
    std::string name = absl::StrCat(Sv(base), "_as_tensor");
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, AttrTensor(n, name));
    if (!t.defined()) continue;
    std::vector<float> v;
    for (int64_t i = 0; i < t.size(); ++i) {
      double d = t.dtype() == pb::kDouble  ? t.data<double>()[i]
                 : t.dtype() == pb::kFloat ? t.data<float>()[i]
                                           : NAN;
      float f = static_cast<float>(d);
      if (static_cast<double>(f) != d && !(std::isnan(d) && std::isnan(f))) {
        return Block(
            absl::StrCat(name, "[", i, "] = ", d, " is not exactly a float; opset 1 holds floats only"));
      }
      v.push_back(f);
    }
    n.RemoveAttribute(name);
    n.SetAttribute(FloatsAttr(std::string(base), std::move(v)));
  }
  return GenericStep(step);
}

namespace {

// A TreeEnsemble node before step.node computing `form`'s raw scores from
// X, as float [N, targets] plus the base values: X cast to float unless
// double, splits and weights in that type, the result cast back to float.
absl::StatusOr<ir::Value*> AddTreeEnsemble(Step& step, runner::reference::ml_forms::TreeEnsembleForm& form,
                                           const std::vector<double>& base_values) {
  ir::Value* x = step.node->input(0);
  const int32_t in = TypeOf(step, x);
  if (in == 0) return Block("the element type of X is unknown");
  // TreeEnsemble computes in X's type (float or double); the older ops'
  // outputs are float.
  const int32_t compute = in == pb::kDouble ? pb::kDouble : pb::kFloat;
  if (form.value_dtype != compute) {
    auto retype = [&](std::string_view name) -> absl::Status {
      for (pb::AttributeProto& a : form.attributes) {
        if (a.name != name) continue;
        ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::TensorFromProto(*a.t));
        ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor r, runner::Tensor::Allocate(compute, t.shape()));
        for (int64_t i = 0; i < t.size(); ++i) {
          double d = t.dtype() == pb::kDouble ? t.data<double>()[i] : t.data<float>()[i];
          if (compute == pb::kDouble) {
            r.mutable_data<double>()[i] = d;
          } else {
            r.mutable_data<float>()[i] = static_cast<float>(d);
          }
        }
        a.t = runner::TensorToProto(r, a.name);
      }
      return absl::OkStatus();
    };
    ONNXKIT_RETURN_IF_ERROR(retype("nodes_splits"));
    ONNXKIT_RETURN_IF_ERROR(retype("leaf_weights"));
  }
  if (in != compute) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddOnnxBefore(step, "Cast", {x}, {IntAttr("to", compute)}));
    x = cast->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * te, AddMlBefore(step, "TreeEnsemble", {x}, std::move(form.attributes)));
  if (step.created != nullptr) step.created->push_back(te);
  ir::Value* y = te->output(0);
  if (compute != pb::kFloat) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddOnnxBefore(step, "Cast", {y}, {IntAttr("to", pb::kFloat)}));
    y = cast->output(0);
  }
  if (!base_values.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(
        runner::Tensor b, runner::Tensor::Allocate(pb::kFloat, {static_cast<int64_t>(base_values.size())}));
    for (size_t i = 0; i < base_values.size(); ++i)
      b.mutable_data<float>()[i] = static_cast<float>(base_values[i]);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * bv, AddConstant(*step.graph, "base_values", b));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * add, AddOnnxBefore(step, "Add", {y, bv}, {}));
    y = add->output(0);
  }
  return y;
}

// Routes step.node's outputs to `results` (one per output; outputs without
// a name are skipped), removes the node, and gives the results the names of
// the graph outputs they replace.
absl::Status RerouteOutputs(Step& step, const std::vector<ir::Value*>& results) {
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (size_t i = 0; i < results.size() && static_cast<int>(i) < step.node->num_outputs(); ++i) {
    ir::Value* old = step.node->output(static_cast<int>(i));
    if (old == nullptr || old->name().empty()) continue;
    if (results[i]->IsGraphOutput() || results[i]->graph() != old->graph()) {
      return Block(absl::StrCat("output ", i, " cannot be rerouted"));
    }
    if (old->IsGraphOutput()) renames.emplace_back(results[i], old->name());
    ONNXKIT_RETURN_IF_ERROR(step.graph->ReplaceAllUsesWith(old, results[i]));
  }
  ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(*step.graph, step.node));
  if (!removed) return absl::InternalError("the node still has uses after its outputs were rerouted");
  for (auto& [value, name] : renames) ONNXKIT_RETURN_IF_ERROR(step.graph->RenameValue(value, name));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegressorToTreeEnsemble(Step& step) {
  auto form = runner::reference::ml_forms::TreeEnsembleFromRegressor(*step.node);
  if (!form.ok()) return Block(std::string(StdSv(form.status().message())));
  if (form->layers > 1) return Block("a leaf feeds several targets; a TreeEnsemble leaf feeds one");
  if (!form->base_values.empty() && form->post_transform != 0) {
    return Block("base_values before a post_transform have no TreeEnsemble form");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, AddTreeEnsemble(step, *form, form->base_values));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ClassifierToTreeEnsemble(Step& step) {
  auto form = runner::reference::ml_forms::TreeEnsembleFromClassifier(*step.node, kMaxRegressorNodes);
  if (!form.ok()) return Block(std::string(StdSv(form.status().message())));
  const int64_t classes = static_cast<int64_t>(std::max(form->labels_int.size(), form->labels_str.size()));
  if (classes < 3) {
    return Block(absl::StrCat(classes,
                              " classes: one- and two-class scores and labels follow rules of their own ",
                              "(a single score against 0.5 or 0) that ArgMax does not express"));
  }
  const int64_t post = form->form.post_transform;
  if (post == 3 || post == 4)
    return Block("post_transform SOFTMAX_ZERO or PROBIT has no plain ai.onnx form here");
  if (form->base_values.empty()) {
    for (int64_t c = 0; c < classes; ++c) {
      if (!form->always_scored[static_cast<size_t>(c)]) {
        return Block(absl::StrCat("class ", c,
                                  " may get no vote for a row, which keeps it out of the choice ",
                                  "where ArgMax would count its 0"));
      }
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * raw, AddTreeEnsemble(step, form->form, form->base_values));
  // Y: the label of the first best raw score; Z: the scores after post_transform.
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Node * arg, AddOnnxBefore(step, "ArgMax", {raw}, {IntAttr("axis", 1), IntAttr("keepdims", 0)}));
  runner::Tensor labels;
  if (!form->labels_str.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(labels, runner::Tensor::Strings({classes}, form->labels_str));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(labels, runner::Tensor::Allocate(pb::kInt64, {classes}));
    for (int64_t c = 0; c < classes; ++c)
      labels.mutable_data<int64_t>()[c] = form->labels_int[static_cast<size_t>(c)];
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lv, AddConstant(*step.graph, "classlabels", labels));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * gather,
                           AddOnnxBefore(step, "Gather", {lv, arg->output(0)}, {IntAttr("axis", 0)}));
  ir::Value* z = raw;
  if (post == 1) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sm, AddOnnxBefore(step, "Softmax", {raw}, {IntAttr("axis", 1)}));
    z = sm->output(0);
  } else if (post == 2) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * sg, AddOnnxBefore(step, "Sigmoid", {raw}, {}));
    z = sg->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(RerouteOutputs(step, {gather->output(0), z}));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status TreeEnsembleToRegressor(Step& step) {
  ir::Value* x = step.node->input(0);
  const int32_t in = TypeOf(step, x);
  if (in != pb::kFloat && in != pb::kDouble) {
    return Block("X is not float or double (TreeEnsembleRegressor has no float16 input)");
  }
  auto attrs = runner::reference::ml_forms::RegressorFromTreeEnsemble(*step.node, in == pb::kDouble,
                                                                      kMaxRegressorNodes);
  if (!attrs.ok()) return Block(std::string(StdSv(attrs.status().message())));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * reg,
                           AddMlBefore(step, "TreeEnsembleRegressor", {x}, std::move(*attrs)));
  // Opset 3 here; converted further down (to 1) like any other node.
  if (step.created != nullptr) step.created->push_back(reg);
  ir::Value* y = reg->output(0);
  if (in == pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, AddOnnxBefore(step, "Cast", {y}, {IntAttr("to", pb::kDouble)}));
    y = cast->output(0);
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
