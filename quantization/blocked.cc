// Weight-only blocked quantization (see blocked.h).
#include "quantization/blocked.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ir/training.h"
#include "passes/util.h"
#include "runner/convert.h"

namespace onnxkit::quant {
namespace {

bool Selected(const ir::Node& node, const std::string& key, const QdqOptions& o, const std::regex* re) {
  if (node.op_type() != "MatMul" && node.op_type() != "Gemm") return false;
  if (!(node.domain().empty() || node.domain() == "ai.onnx")) return false;
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  if (!o.op_types.empty() && !has(o.op_types, node.op_type())) return false;
  if (has(o.exclude_ops, node.op_type()) || o.keep_float.count(key)) return false;
  return re == nullptr || !std::regex_search(key, *re);
}

}  // namespace

absl::StatusOr<BlockedWeight> QuantizeBlocked(const runner::Tensor& w, int axis, int64_t block, int bits) {
  if (w.dtype() != pb::kFloat) return absl::InvalidArgumentError("weight is not float");
  if (axis < 0 || axis >= w.rank()) return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range"));
  if (bits != 4 && bits != 8) return absl::InvalidArgumentError(absl::StrCat("bits must be 4 or 8, got ", bits));
  if (block < 1) return absl::InvalidArgumentError(absl::StrCat("block size must be >= 1, got ", block));
  const int64_t dim = w.dim(axis);
  int64_t inner = 1;
  for (int d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const int64_t outer = dim == 0 || inner == 0 ? 0 : w.size() / (dim * inner);
  const int64_t blocks = (dim + block - 1) / block;
  std::vector<int64_t> sshape = w.shape();
  sshape[static_cast<size_t>(axis)] = blocks;
  BlockedWeight r;
  ONNXKIT_ASSIGN_OR_RETURN(r.data, runner::Tensor::Allocate(bits == 4 ? pb::kInt4 : pb::kInt8, w.shape()));
  ONNXKIT_ASSIGN_OR_RETURN(r.scale, runner::Tensor::Allocate(pb::kFloat, sshape));
  const double qmax = bits == 4 ? 7 : 127;
  const float* src = w.data<float>();
  float* scales = r.scale.mutable_data<float>();
  auto* bytes = static_cast<uint8_t*>(r.data.mutable_raw());
  auto finite = [](float v) { return std::isfinite(v) ? static_cast<double>(v) : 0.0; };
  // Element (o, d, i) is src[(o * dim + d) * inner + i]; its scale is
  // scales[(o * blocks + d / block) * inner + i].
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t d0 = b * block, d1 = std::min(dim, d0 + block);
      for (int64_t i = 0; i < inner; ++i) {
        double amax = 0;
        for (int64_t d = d0; d < d1; ++d) amax = std::max(amax, std::fabs(finite(src[(o * dim + d) * inner + i])));
        float s = static_cast<float>(amax / qmax);
        if (!(s >= std::numeric_limits<float>::min())) s = 1;
        scales[(o * blocks + b) * inner + i] = s;
        for (int64_t d = d0; d < d1; ++d) {
          int64_t at = (o * dim + d) * inner + i;
          double q = std::clamp(std::nearbyint(finite(src[at]) / static_cast<double>(s)), -qmax, qmax);
          auto v = static_cast<int8_t>(q);
          if (bits == 8) {
            r.data.mutable_data<int8_t>()[at] = v;
          } else {
            // int4: two per byte, element 2k in the low nibble.
            bytes[at / 2] = static_cast<uint8_t>(bytes[at / 2] | ((static_cast<uint8_t>(v) & 0xF) << (4 * (at & 1))));
          }
        }
      }
    }
  }
  return r;
}

absl::StatusOr<QdqResult> QuantizeWeightsOnly(const io::LoadedModel& model, const QdqOptions& options,
                                              const WeightsOnlyOptions& wo) {
  if (wo.bits != 4 && wo.bits != 8) return absl::InvalidArgumentError("--bits must be 4 or 8");
  if (wo.block_size < 1) return absl::InvalidArgumentError("--block-size must be >= 1");
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> m, ir::FromProto(model.proto));
  std::optional<int64_t> opset = m->OpsetVersion("");
  if (!opset || *opset < kWeightsOnlyOpset) {
    return absl::FailedPreconditionError(absl::StrCat("--weights-only needs ai.onnx opset >= ", kWeightsOnlyOpset,
                                                      " (DequantizeLinear with block_size); the model imports ",
                                                      opset.value_or(0)));
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
    for (ir::Node* node : passes::SnapshotNodes(g)) {
      std::string key = NodeKey(*node, index++);
      if (!Selected(*node, key, options, re ? &*re : nullptr) || node->num_inputs() < 2) continue;
      ir::Value* w = node->input(1);
      const pb::TensorProto* wp = w ? passes::ConstantProto(*w) : nullptr;
      if (wp == nullptr || !w->IsConstant() || wp->data_type != pb::kFloat || wp->dims.size() < 2) continue;
      int rank = static_cast<int>(wp->dims.size());
      int axis = rank - 2;  // MatMul: K of [..., K, N]
      if (node->op_type() == "Gemm") {
        if (rank != 2) continue;
        axis = node->GetInt("transB").value_or(0) != 0 ? 1 : 0;
      }
      ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor wt, runner::TensorFromProto(*wp, &resolver));
      ONNXKIT_ASSIGN_OR_RETURN(BlockedWeight q, QuantizeBlocked(wt, axis, wo.block_size, wo.bits));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, passes::AddConstant(g, w->name() + "_quantized", q.data));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, passes::AddConstant(g, w->name() + "_scale", q.scale));
      ir::NodeSpec spec{
          .op_type = "DequantizeLinear",
          .name = g.FreshName(w->name() + "_DequantizeLinear"),
          .inputs = {d, s},
          .outputs = {g.FreshName(w->name() + "_DequantizeLinear_Output")},
          .attributes = {passes::IntAttr("axis", axis), passes::IntAttr("block_size", wo.block_size)}};
      ONNXKIT_ASSIGN_OR_RETURN(ir::Node * dq, g.AddNode(std::move(spec), ir::Position::Before(node)));
      ONNXKIT_RETURN_IF_ERROR(g.SetInput(node, 1, dq->output(0)));
      if (!w->has_uses() && !w->IsGraphOutput() && !w->is_graph_input() &&
          w->kind() == ir::ValueKind::kInitializer) {
        ONNXKIT_RETURN_IF_ERROR(w->graph()->RemoveInitializer(w));
      }
      result.quantized_nodes.push_back(key);
      result.weights += 1;
    }
  }
  if (result.weights == 0) result.warnings.push_back("no MatMul/Gemm with a float constant weight: nothing quantized");
  result.model = ir::ToProto(std::move(m));
  return result;
}

}  // namespace onnxkit::quant
