// QDQ insertion (see qdq.h): a plan over each graph (the main graph, then
// the If/Loop/Scan bodies), then the rewrite.
#include "quantization/qdq.h"

#include <algorithm>
#include <memory>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ir/training.h"
#include "passes/util.h"
#include "quantization/rules.h"
#include "runner/convert.h"

namespace onnxkit::quant {
namespace {

struct WeightJob {
  ir::Node* node;
  int input;
  int axis;
  int bias_input;
  std::string activation;  // input 0's name (its scale scales the bias)
};

absl::StatusOr<std::regex> CompileRegex(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--exclude-nodes '", pattern, "': ", e.what()));
  }
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class Inserter {
 public:
  // Quantizes the nodes of `graph` (the main graph or a body of `model`).
  Inserter(ir::Model& model, ir::Graph& graph, const Calibration& cal, const QdqOptions& options,
           const std::filesystem::path& base)
      : model_(model), graph_(graph), cal_(cal), options_(options), resolver_(base) {}

  // Decides which nodes are quantized and how. `index` numbers the nodes
  // across graphs (the keys of unnamed nodes).
  absl::Status Plan(QdqResult* result, int* index) {
    std::optional<int64_t> opset = model_.OpsetVersion("");
    if (!opset || *opset < 10) {
      return absl::FailedPreconditionError(
          absl::StrCat("quantize needs ai.onnx opset >= 10 (QuantizeLinear); the model imports ", opset.value_or(0)));
    }
    bool wide = options_.weight_type == QType::kInt4 || options_.act_type == QType::kInt16 ||
                options_.act_type == QType::kUint16;
    if (wide && *opset < 21) {
      return absl::FailedPreconditionError(absl::StrCat(
          "int4 weights and 16-bit activations need ai.onnx opset >= 21; the model imports ", *opset));
    }
    if (options_.act_type == QType::kInt4 || options_.weight_type == QType::kInt16 ||
        options_.weight_type == QType::kUint16) {
      return absl::InvalidArgumentError("activations are uint8, int8, uint16 or int16; weights int8, uint8 or int4");
    }
    per_channel_ = options_.per_channel && *opset >= 13;
    if (options_.per_channel && *opset < 13 && &graph_ == &model_.graph()) {
      result->warnings.push_back(absl::StrCat("opset ", *opset, " < 13: weights quantized per tensor"));
    }
    std::optional<std::regex> re;
    if (!options_.exclude_nodes.empty()) {
      ONNXKIT_ASSIGN_OR_RETURN(std::regex r, CompileRegex(options_.exclude_nodes));
      re = std::move(r);
    }
    for (ir::Node* node : passes::SnapshotNodes(graph_)) {
      std::string key = NodeKey(*node, (*index)++);
      const Rule* rule = (node->domain().empty() || node->domain() == "ai.onnx") ? FindRule(node->op_type()) : nullptr;
      if (rule == nullptr) continue;
      if (!options_.op_types.empty() && !Contains(options_.op_types, node->op_type())) continue;
      if (Contains(options_.exclude_ops, node->op_type())) continue;
      if (re && std::regex_search(key, *re)) continue;
      if (options_.keep_float.count(key)) continue;
      if (AlreadyQuantized(*node)) {
        ++already_quantized_;
        continue;
      }
      if (ReadsHalf(*node)) {
        ++half_;
        continue;
      }
      if (PlanNode(*node, *rule, key, *opset)) result->quantized_nodes.push_back(key);
    }
    if (half_ > 0) {
      result->warnings.push_back(absl::StrCat(
          half_,
          " node(s) compute in float16 or bfloat16 and are left as they are (quantize quantizes float32 "
          "tensors)",
          &graph_ == &model_.graph() ? "" : absl::StrCat(" in a body of ", graph_.name())));
    }
    if (already_quantized_ > 0) {
      result->warnings.push_back(
          absl::StrCat(already_quantized_,
                       " node(s) already quantized (reading a DequantizeLinear or read by a QuantizeLinear) ",
                       "left as they are",
                       &graph_ == &model_.graph() ? "" : absl::StrCat(" in a body of ", graph_.name())));
    }
    return absl::OkStatus();
  }

  // A node of an already quantized model: one of its inputs comes from a
  // DequantizeLinear, or one of its outputs goes into a QuantizeLinear.
  // Quantizing it again would stack a second pair (a weight already int8
  // quantized again as an activation).
  static bool AlreadyQuantized(const ir::Node& node) {
    auto is = [](const ir::Node* n, std::string_view op) {
      return n != nullptr && n->op_type() == op &&
             (n->domain().empty() || n->domain() == "ai.onnx" || n->domain() == "com.microsoft");
    };
    for (const ir::Value* v : node.inputs()) {
      if (v != nullptr && is(v->producer(), "DequantizeLinear")) return true;
    }
    for (const ir::Value* v : node.outputs()) {
      if (v == nullptr) continue;
      for (const ir::Use& u : v->uses()) {
        if (is(u.node, "QuantizeLinear")) return true;
      }
    }
    return false;
  }

  // A node whose first input is a float16 or bfloat16 tensor (declared, or
  // seen so in calibration).
  bool ReadsHalf(const ir::Node& node) const {
    const ir::Value* v = node.num_inputs() > 0 ? node.input(0) : nullptr;
    if (v == nullptr) return false;
    if (cal_.half.count(v->name()) > 0) return true;
    const pb::TypeProto* t = v->type();
    return t != nullptr && t->tensor_type &&
           (t->tensor_type->elem_type == pb::kFloat16 || t->tensor_type->elem_type == pb::kBfloat16);
  }

  // The activations left float because calibration saw NaN or infinity.
  const std::set<std::string>& nonfinite() const { return nonfinite_; }

  absl::Status Apply(QdqResult* result) {
    for (ActivationRecord& a : records_) {
      // A value no node reads (a graph output only, an unread output) would
      // get a pair nothing reads: it stays as it is, and unreported.
      const ir::Value* v = graph_.FindLocalValue(a.tensor);
      if (v != nullptr && v->uses().empty()) continue;
      ONNXKIT_RETURN_IF_ERROR(InsertPair(a));
      result->activations.push_back(a);
    }
    for (const WeightJob& job : weights_) ONNXKIT_RETURN_IF_ERROR(QuantizeWeightInput(job, result));
    return absl::OkStatus();
  }

 private:
  // True when `v` is an activation of this graph with a calibrated range
  // of finite values only. One that held NaN or an infinity (an attention
  // mask's -inf) stays float: quantized, those values would come back
  // finite, and a mask would mask nothing.
  bool Calibrated(const ir::Value* v) {
    if (v == nullptr || v->IsConstant() || v->graph() != &graph_) return false;
    auto it = cal_.tensors.find(v->name());
    if (it == cal_.tensors.end()) return false;
    if (it->second.nonfinite > 0 || it->second.count == 0) {
      if (it->second.nonfinite > 0) nonfinite_.insert(v->name());
      return false;
    }
    return true;
  }

  // The calibration entry whose range quantizes `v`: with uint8 activations,
  // a sole Relu consumer (or Clip from 0) narrows it to that op's output.
  const TensorRange& RangeSource(const ir::Value& v, bool* narrowed) const {
    const TensorRange& own = cal_.tensors.at(v.name());
    if (QTypeSigned(options_.act_type)) return own;
    ir::Node* next = passes::SoleConsumer(v);
    if (next == nullptr || next->num_outputs() < 1 || next->output(0) == nullptr) return own;
    auto it = cal_.tensors.find(next->output(0)->name());
    if (it == cal_.tensors.end() || it->second.nonfinite > 0 || it->second.count == 0) return own;
    *narrowed = true;
    if (next->op_type() == "Relu") return it->second;
    if (next->op_type() == "Clip" && it->second.min >= 0 && own.min < 0) {
      bool from_zero = next->GetFloat("min").value_or(-1) == 0;
      if (next->num_inputs() > 1 && next->input(1) != nullptr) {
        const pb::TensorProto* p = passes::ConstantProto(*next->input(1));
        auto t = p ? runner::TensorFromProto(*p) : absl::StatusOr<runner::Tensor>(absl::NotFoundError(""));
        from_zero = t.ok() && t->dtype() == pb::kFloat && t->size() == 1 && t->data<float>()[0] == 0.f;
      }
      if (from_zero) return it->second;
    }
    *narrowed = false;
    return own;
  }

  // True when `v` is the output of a Softmax whose input is quantized
  // (planned earlier, as its producer precedes it), directly or through
  // Dropout or Identity: the DequantizeLinear -> Softmax -> QuantizeLinear
  // that ONNX Runtime fuses into QLinearSoftmax.
  bool FromQuantizedSoftmax(const ir::Value& v) const {
    const ir::Value* at = &v;
    for (int hops = 0; hops < 8 && at != nullptr; ++hops) {
      const ir::Node* p = at->producer();
      if (p == nullptr || !(p->domain().empty() || p->domain() == "ai.onnx") || p->num_inputs() < 1)
        return false;
      if (p->op_type() == "Softmax") return p->input(0) != nullptr && planned_.count(p->input(0)->name()) > 0;
      if (p->op_type() != "Dropout" && p->op_type() != "Identity") return false;
      if (p->num_outputs() < 1 || p->output(0) != at) return false;
      at = p->input(0);
    }
    return false;
  }

  // Plans QDQ on `v` (once); false when it cannot be quantized.
  bool Activation(const ir::Value* v, const std::string& key, const ActivationRecord* share = nullptr) {
    if (!Calibrated(v)) return false;
    if (planned_.count(v->name())) return true;
    ActivationRecord a;
    a.tensor = v->name();
    a.node = key;
    const TensorRange& own = cal_.tensors.at(v->name());
    a.observed_min = own.min;
    a.observed_max = own.max;
    if (share != nullptr) {
      a.params = share->params;
      a.range = share->range;
      a.shared = true;
    } else if (std::optional<QParams> fixed = SoftmaxParams(options_.act_type);
               fixed && FromQuantizedSoftmax(*v)) {
      a.params = *fixed;
      a.softmax = true;
      a.range =
          Range{0, (QTypeMax(options_.act_type) - static_cast<double>(fixed->zero_point)) * fixed->scale};
    } else {
      CalibratorOptions co = options_.calibrator;
      co.symmetric = QTypeSigned(options_.act_type);
      a.range = ComputeRange(RangeSource(*v, &a.narrowed), co);
      a.params = ActivationParams(a.range, options_.act_type);
    }
    planned_[v->name()] = records_.size();
    records_.push_back(a);
    return true;
  }

  bool PlanNode(ir::Node& node, const Rule& rule, const std::string& key, int64_t opset) {
    if (node.num_inputs() < 1 || node.num_outputs() < 1) return false;
    ir::Value* in = node.input(0);
    ir::Value* out = node.output(0);
    switch (rule.family) {
      case Family::kSameScale: {
        if (!options_.quantize_outputs) return false;
        auto it = in ? planned_.find(in->name()) : planned_.end();
        if (it == planned_.end()) return false;
        ActivationRecord share = records_[it->second];
        return Activation(out, key, &share);
      }
      case Family::kPool:
        if (!Activation(in, key)) return false;
        if (options_.quantize_outputs) Activation(out, key);
        return true;
      case Family::kElementwise: {
        bool any = false;
        for (ir::Value* v : node.inputs()) any |= Activation(v, key);
        if (any && options_.quantize_outputs) Activation(out, key);
        return any;
      }
      case Family::kWeighted:
        return PlanWeighted(node, rule, key, opset);
    }
    return false;
  }

  bool PlanWeighted(ir::Node& node, const Rule& rule, const std::string& key, int64_t opset) {
    if (node.num_inputs() <= rule.weight_input) return false;
    ir::Value* w = node.input(rule.weight_input);
    const pb::TensorProto* wp = w ? passes::ConstantProto(*w) : nullptr;
    bool weight = wp != nullptr && w->IsConstant() && wp->data_type == pb::kFloat;
    if (!Calibrated(node.input(0))) return false;
    if (!weight && !(node.op_type() == "MatMul" && Calibrated(w))) return false;
    Activation(node.input(0), key);
    if (!weight) {
      Activation(w, key);
    } else {
      int axis = rule.per_channel_axis;
      int64_t rank = static_cast<int64_t>(wp->dims.size());
      if (node.op_type() == "Gemm") axis = node.GetInt("transB").value_or(0) != 0 ? 0 : 1;
      if (node.op_type() == "MatMul") axis = rank >= 2 ? static_cast<int>(rank - 1) : -1;
      if (!per_channel_ || rank < 1 || axis >= rank) axis = -1;
      int bias = rule.bias_input;
      if (node.op_type() == "Gemm" && node.GetFloat("beta").value_or(1.f) != 1.f) bias = -1;
      weights_.push_back(WeightJob{&node, rule.weight_input, axis, bias, node.input(0)->name()});
    }
    if (options_.quantize_outputs) Activation(node.output(0), key);
    (void)opset;
    return true;
  }

  absl::StatusOr<ir::Value*> Scalar(const std::string& hint, runner::Tensor t) {
    return passes::AddConstant(graph_, hint, t);
  }

  absl::Status InsertPair(ActivationRecord& a) {
    ir::Value* v = graph_.FindLocalValue(a.tensor);
    if (v == nullptr) return absl::InternalError(absl::StrCat("tensor '", a.tensor, "' vanished"));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Scalar(a.tensor + "_scale", runner::Tensor::Scalar<float>(pb::kFloat, a.params.scale)));
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor zt, ZeroPointTensor(options_.act_type, {a.params.zero_point}, false));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, Scalar(a.tensor + "_zero_point", zt));
    ir::Position where = v->producer() ? ir::Position::After(v->producer())
                         : graph_.num_nodes() > 0 ? ir::Position::Before(*graph_.nodes().begin())
                                                  : ir::Position::End();
    std::vector<ir::Use> uses = v->uses();
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * q, graph_.AddNode({.op_type = "QuantizeLinear",
                                                           .name = graph_.FreshName(a.tensor + "_QuantizeLinear"),
                                                           .inputs = {v, s, z},
                                                           .outputs = {graph_.FreshName(a.tensor + "_QuantizeLinear_Output")}},
                                                          where));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * dq, graph_.AddNode({.op_type = "DequantizeLinear",
                                                            .name = graph_.FreshName(a.tensor + "_DequantizeLinear"),
                                                            .inputs = {q->output(0), s, z},
                                                            .outputs = {graph_.FreshName(a.tensor + "_DequantizeLinear_Output")}},
                                                           ir::Position::After(q)));
    a.dq_output = dq->output(0)->name();
    for (const ir::Use& u : uses) ONNXKIT_RETURN_IF_ERROR(u.node->graph()->SetInput(u.node, u.input_index, dq->output(0)));
    return absl::OkStatus();
  }

  // DequantizeLinear(data, scale, zero point) before `node`, feeding input `index`.
  absl::StatusOr<ir::Value*> AddDq(ir::Node* node, const std::string& hint, const runner::Tensor& data,
                                   const runner::Tensor& scale, const runner::Tensor& zp, int axis) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, passes::AddConstant(graph_, hint + "_quantized", data));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, passes::AddConstant(graph_, hint + "_scale", scale));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, passes::AddConstant(graph_, hint + "_zero_point", zp));
    ir::NodeSpec spec{.op_type = "DequantizeLinear",
                      .name = graph_.FreshName(hint + "_DequantizeLinear"),
                      .inputs = {d, s, z},
                      .outputs = {graph_.FreshName(hint + "_DequantizeLinear_Output")}};
    if (axis >= 0) spec.attributes.push_back(passes::IntAttr("axis", axis));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * dq, graph_.AddNode(std::move(spec), ir::Position::Before(node)));
    return dq->output(0);
  }

  // Scale / zero-point tensors: a scalar per tensor, 1-D per channel.
  template <typename T>
  static absl::StatusOr<runner::Tensor> Params(int32_t dtype, const std::vector<T>& v, bool vector) {
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, vector ? runner::Tensor::Allocate(dtype, {static_cast<int64_t>(v.size())})
                                                      : runner::Tensor::Allocate(dtype, {}));
    for (size_t i = 0; i < (vector ? v.size() : 1); ++i) t.mutable_data<T>()[i] = v[i];
    return t;
  }

  absl::Status QuantizeWeightInput(const WeightJob& job, QdqResult* result) {
    ir::Value* w = job.node->input(job.input);
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor wt, runner::TensorFromProto(*w->initializer(), &resolver_));
    // The bias, when it becomes int32: its scale is input scale x weight
    // scale, so a weight scale too small for it is raised until the bias
    // fits (tiny activations against a large bias) rather than leaving a
    // float bias beside an int8 weight, which runtimes' QDQ fusions do not
    // all expect.
    ir::Value* b = job.bias_input >= 0 && job.node->num_inputs() > job.bias_input
                       ? job.node->input(job.bias_input)
                       : nullptr;
    auto it = planned_.find(job.activation);
    const bool int_bias =
        b != nullptr && b->IsConstant() && b->initializer() != nullptr && it != planned_.end();
    std::optional<runner::Tensor> bt;
    std::optional<std::vector<double>> min_scales;
    if (int_bias) {
      ONNXKIT_ASSIGN_OR_RETURN(bt, runner::TensorFromProto(*b->initializer(), &resolver_));
      const int64_t channels = job.axis >= 0 && job.axis < wt.rank() ? wt.dim(job.axis) : 1;
      min_scales = MinWeightScalesForBias(*bt, records_[it->second].params.scale, channels, job.axis < 0);
    }
    ONNXKIT_ASSIGN_OR_RETURN(QuantizedWeight q, QuantizeWeight(wt, job.axis, options_.weight_type,
                                                               min_scales ? &*min_scales : nullptr));
    if (q.raised > 0) result->raised_weight_scales.push_back(w->name());
    bool vec = job.axis >= 0;
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor scale, Params<float>(pb::kFloat, q.scales, vec));
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor zp, ZeroPointTensor(options_.weight_type, q.zero_points, vec));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * dq, AddDq(job.node, w->name(), q.data, scale, zp, job.axis));
    ONNXKIT_RETURN_IF_ERROR(graph_.SetInput(job.node, job.input, dq));
    ONNXKIT_RETURN_IF_ERROR(DropIfUnused(w));
    result->weights += 1;
    result->per_channel_weights += vec ? 1 : 0;
    if (!int_bias) return absl::OkStatus();
    std::vector<float> bias_scales;
    std::optional<runner::Tensor> bq =
        QuantizeBias(*bt, records_[it->second].params.scale, q.scales, &bias_scales);
    if (!bq) {
      result->float_biases.push_back(b->name());
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor bs, Params<float>(pb::kFloat, bias_scales, vec));
    ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor bz, Params<int32_t>(pb::kInt32, std::vector<int32_t>(bias_scales.size(), 0), vec));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * bdq, AddDq(job.node, b->name(), *bq, bs, bz, vec ? 0 : -1));
    ONNXKIT_RETURN_IF_ERROR(graph_.SetInput(job.node, job.bias_input, bdq));
    ONNXKIT_RETURN_IF_ERROR(DropIfUnused(b));
    result->int32_biases += 1;
    return absl::OkStatus();
  }

  // (A weight may be an initializer of an enclosing graph.)
  absl::Status DropIfUnused(ir::Value* v) {
    if (v->has_uses() || v->IsGraphOutput() || v->is_graph_input() || v->graph() == nullptr)
      return absl::OkStatus();
    return v->graph()->RemoveInitializer(v);
  }

  ir::Model& model_;
  ir::Graph& graph_;
  const Calibration& cal_;
  const QdqOptions& options_;
  io::ExternalDataResolver resolver_;
  bool per_channel_ = true;
  std::vector<ActivationRecord> records_;
  std::map<std::string, size_t> planned_;
  std::set<std::string> nonfinite_;  // activations left float: NaN or infinity in calibration
  int already_quantized_ = 0;
  int half_ = 0;
  std::vector<WeightJob> weights_;
};

}  // namespace

std::string NodeKey(const ir::Node& node, int index) {
  return node.name().empty() ? absl::StrCat("#", index, " (", node.op_type(), ")") : node.name();
}

absl::StatusOr<QdqResult> InsertQdq(const io::LoadedModel& model, const Calibration& calibration,
                                    const QdqOptions& options) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> m, ir::FromProto(model.proto));
  QdqResult result;
  std::vector<ir::Graph*> graphs;
  // A graph a Gradient differentiates is left as it is (lib/ir/training.h).
  ir::ForEachGraph(m->graph(), [&](ir::Graph& g) {
    if (!ir::DifferentiatedByGradient(g)) graphs.push_back(&g);
  });
  std::vector<std::unique_ptr<Inserter>> inserters;
  int index = 0;
  for (ir::Graph* g : graphs) {
    inserters.push_back(std::make_unique<Inserter>(*m, *g, calibration, options, model.base_dir));
    ONNXKIT_RETURN_IF_ERROR(inserters.back()->Plan(&result, &index));
  }
  std::set<std::string> nonfinite;
  for (const std::unique_ptr<Inserter>& inserter : inserters) {
    ONNXKIT_RETURN_IF_ERROR(inserter->Apply(&result));
    nonfinite.insert(inserter->nonfinite().begin(), inserter->nonfinite().end());
  }
  if (!result.raised_weight_scales.empty()) {
    const std::vector<std::string>& raised = result.raised_weight_scales;
    std::string names;
    for (size_t i = 0; i < raised.size() && i < 3; ++i)
      absl::StrAppend(&names, i > 0 ? ", '" : "'", raised[i], "'");
    if (raised.size() > 3) absl::StrAppend(&names, ", ...");
    result.warnings.push_back(
        absl::StrCat(raised.size(),
                     " weight(s) got a larger scale than their values need, so that the "
                     "int32 bias fits (activations tiny against the bias): ",
                     names));
  }
  if (!nonfinite.empty()) {
    std::string names;
    int shown = 0;
    for (const std::string& name : nonfinite) {
      if (shown++ == 3) {
        absl::StrAppend(&names, ", ...");
        break;
      }
      absl::StrAppend(&names, shown > 1 ? ", " : "", "'", name, "'");
    }
    result.warnings.push_back(
        absl::StrCat(nonfinite.size(),
                     " tensor(s) held NaN or infinity during calibration and stay float "
                     "(an attention mask's -inf quantized would mask nothing): ",
                     names));
  }
  result.model = ir::ToProto(std::move(m));
  return result;
}

}  // namespace onnxkit::quant
