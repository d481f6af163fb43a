// Dynamic quantization of MatMul (see dynamic.h).
#include "quantization/dynamic.h"

#include <algorithm>
#include <regex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ir/training.h"
#include "passes/util.h"
#include "runner/convert.h"

namespace onnxkit::quant {
namespace {

bool Selected(const ir::Node& node, const std::string& key, const QdqOptions& o, const std::regex* re) {
  if (node.op_type() != "MatMul" || !(node.domain().empty() || node.domain() == "ai.onnx")) return false;
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  if (!o.op_types.empty() && !has(o.op_types, "MatMul")) return false;
  if (has(o.exclude_ops, "MatMul") || o.keep_float.count(key)) return false;
  return re == nullptr || !std::regex_search(key, *re);
}

// The DynamicQuantizeLinear of each activation already written, per graph:
// MatMuls reading one activation (attention's query, key and value
// projections) share one quantization of it.
using Quantizers = absl::flat_hash_map<const ir::Value*, ir::Node*>;

absl::Status Rewrite(ir::Graph& g, ir::Node* mm, const QuantizedWeight& q, bool per_channel,
                     Quantizers& dqls) {
  std::string base = mm->output(0)->name();
  auto fresh = [&](const std::string& suffix) { return g.FreshName(base + suffix); };
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * wq, passes::AddConstant(g, mm->input(1)->name() + "_quantized", q.data));
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor st, per_channel ? runner::Tensor::Allocate(pb::kFloat, {static_cast<int64_t>(q.scales.size())})
                                                           : runner::Tensor::Allocate(pb::kFloat, {}));
  for (size_t i = 0; i < (per_channel ? q.scales.size() : 1); ++i) st.mutable_data<float>()[i] = q.scales[i];
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ws, passes::AddConstant(g, mm->input(1)->name() + "_scale", st));
  ir::Position at = ir::Position::Before(mm);
  ir::Node*& dql = dqls[mm->input(0)];
  if (dql == nullptr) {
    // Before the first reader in graph order, so before every later one.
    ONNXKIT_ASSIGN_OR_RETURN(
        dql, g.AddNode({.op_type = "DynamicQuantizeLinear",
                        .name = fresh("_DynamicQuantizeLinear"),
                        .inputs = {mm->input(0)},
                        .outputs = {fresh("_a_quantized"), fresh("_a_scale"), fresh("_a_zero_point")}},
                       at));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * mmi, g.AddNode({.op_type = "MatMulInteger", .name = fresh("_MatMulInteger"),
                                                      .inputs = {dql->output(0), wq, dql->output(2)},
                                                      .outputs = {fresh("_int32")}},
                                                     at));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * cast, g.AddNode({.op_type = "Cast", .name = fresh("_Cast"), .inputs = {mmi->output(0)},
                                                       .outputs = {fresh("_float")}, .attributes = {passes::IntAttr("to", pb::kFloat)}},
                                                      at));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * scale, g.AddNode({.op_type = "Mul", .name = fresh("_scale_Mul"),
                                                        .inputs = {dql->output(1), ws}, .outputs = {fresh("_scale")}},
                                                       at));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * out, g.AddNode({.op_type = "Mul", .name = fresh("_Mul"),
                                                      .inputs = {cast->output(0), scale->output(0)}, .outputs = {fresh("_dynamic")}},
                                                     at));
  ir::Value* w = mm->input(1);
  ONNXKIT_RETURN_IF_ERROR(passes::ReplaceValue(g, mm->output(0), out->output(0)));
  // (The weight may be an initializer of an enclosing graph.)
  if (!w->has_uses() && !w->IsGraphOutput() && !w->is_graph_input() &&
      w->kind() == ir::ValueKind::kInitializer) {
    ONNXKIT_RETURN_IF_ERROR(w->graph()->RemoveInitializer(w));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QdqResult> QuantizeDynamic(const io::LoadedModel& model, const QdqOptions& options) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> m, ir::FromProto(model.proto));
  std::optional<int64_t> opset = m->OpsetVersion("");
  if (!opset || *opset < 11) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--mode dynamic needs ai.onnx opset >= 11 (DynamicQuantizeLinear); the model imports ", opset.value_or(0)));
  }
  std::optional<std::regex> re;
  if (!options.exclude_nodes.empty()) {
    try {
      re = std::regex(options.exclude_nodes, std::regex::ECMAScript | std::regex_constants::__polynomial);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("--exclude-nodes '", options.exclude_nodes, "': ", e.what()));
    }
  }
  QdqResult result;
  io::ExternalDataResolver resolver(model.base_dir);
  // The main graph, then the If/Loop/Scan bodies (a weight there may be an
  // initializer of an enclosing graph). A graph a Gradient differentiates is
  // left as it is (lib/ir/training.h).
  std::vector<ir::Graph*> graphs;
  ir::ForEachGraph(m->graph(), [&](ir::Graph& sub) {
    if (!ir::DifferentiatedByGradient(sub)) graphs.push_back(&sub);
  });
  int index = 0;
  for (ir::Graph* graph : graphs) {
    ir::Graph& g = *graph;
    Quantizers dqls;
    for (ir::Node* node : passes::SnapshotNodes(g)) {
      std::string key = NodeKey(*node, index++);
      if (!Selected(*node, key, options, re ? &*re : nullptr) || node->num_inputs() != 2) continue;
      ir::Value* w = node->input(1);
      const pb::TensorProto* wp = w ? passes::ConstantProto(*w) : nullptr;
      if (wp == nullptr || !w->IsConstant() || wp->data_type != pb::kFloat || wp->dims.size() != 2) continue;
      ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor wt, runner::TensorFromProto(*wp, &resolver));
      ONNXKIT_ASSIGN_OR_RETURN(QuantizedWeight q,
                               QuantizeWeight(wt, options.per_channel ? 1 : -1, QType::kInt8));
      ONNXKIT_RETURN_IF_ERROR(Rewrite(g, node, q, options.per_channel, dqls));
      result.quantized_nodes.push_back(key);
      result.weights += 1;
      result.per_channel_weights += options.per_channel ? 1 : 0;
    }
  }
  result.model = ir::ToProto(std::move(m));
  return result;
}

}  // namespace onnxkit::quant
