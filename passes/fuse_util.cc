// Helpers shared by the fuse-* passes (see fuse_util.h).
#include "passes/fuse_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "lib/base/status_macros.h"
#include "passes/util.h"
#include "runner/reference/float_types.h"

namespace onnxkit::passes {

bool IsOp(const ir::Node* node, std::string_view op) {
  return node != nullptr && node->op_type() == op && (node->domain().empty() || node->domain() == "ai.onnx");
}

ir::Node* ProducerOp(const ir::Value* value, std::string_view op, const ir::Graph& graph) {
  if (value == nullptr) return nullptr;
  ir::Node* p = value->producer();
  return IsOp(p, op) && p->graph() == &graph ? p : nullptr;
}

ir::Node* ConsumerOp(const ir::Value& value, std::string_view op, const ir::Graph& graph) {
  ir::Node* c = SoleConsumer(value);
  return IsOp(c, op) && c->graph() == &graph ? c : nullptr;
}

bool OnlyUsedBy(const ir::Value& value, std::initializer_list<const ir::Node*> users) {
  if (value.IsGraphOutput()) return false;
  for (const ir::Use& u : value.uses()) {
    if (std::find(users.begin(), users.end(), u.node) == users.end()) return false;
  }
  return true;
}

ir::Value* OtherInput(const ir::Node& node, const ir::Value* x) {
  if (node.num_inputs() != 2 || x == nullptr) return nullptr;
  if (node.input(0) == x) return node.input(1);
  if (node.input(1) == x) return node.input(0);
  return nullptr;
}

bool IsFoldableFloat(int32_t dtype) {
  return dtype == pb::kFloat || dtype == pb::kFloat16 || dtype == pb::kDouble;
}

std::optional<std::vector<double>> ToDoubles(const runner::Tensor& t) {
  if (t.is_string()) return std::nullopt;
  std::vector<double> out(static_cast<size_t>(t.size()));
  switch (t.dtype()) {
    case pb::kFloat:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<float>()[i];
      return out;
    case pb::kDouble:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<double>()[i];
      return out;
    case pb::kFloat16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<runner::Float16>()[i]);
      return out;
    default:
      return std::nullopt;
  }
}

absl::StatusOr<runner::Tensor> FromDoubles(int32_t dtype, std::vector<int64_t> shape,
                                           const std::vector<double>& values) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::AllocateUninitialized(dtype, std::move(shape)));
  if (static_cast<size_t>(t.size()) != values.size()) {
    return absl::InvalidArgumentError("folded values do not match the tensor shape");
  }
  switch (dtype) {
    case pb::kFloat:
      for (size_t i = 0; i < values.size(); ++i)
        t.mutable_data<float>()[i] = runner::RoundFromDouble<float>(values[i]);
      return t;
    case pb::kDouble:
      for (size_t i = 0; i < values.size(); ++i) t.mutable_data<double>()[i] = values[i];
      return t;
    case pb::kFloat16:
      for (size_t i = 0; i < values.size(); ++i) {
        t.mutable_data<runner::Float16>()[i] = runner::RoundFromDouble<runner::Float16>(values[i]);
      }
      return t;
    default:
      return absl::InvalidArgumentError("folded weights must be float, float16 or double");
  }
}

std::optional<runner::Tensor> FloatConstant(const ir::Value* value, PassContext& ctx) {
  if (value == nullptr || !IsConstantValue(*value)) return std::nullopt;
  absl::StatusOr<runner::Tensor> t = ConstantTensor(*value, ctx);
  if (!t.ok() || t->is_string() || !IsFoldableFloat(t->dtype())) return std::nullopt;
  return *std::move(t);
}

std::optional<double> SmallScalar(const ir::Value* value, PassContext& ctx) {
  if (value == nullptr) return std::nullopt;
  std::optional<std::vector<int64_t>> shape = KnownShape(*value, ctx);
  if (shape && shape->size() > 1) return std::nullopt;
  return ConstantScalar(*value, ctx);
}

bool ScalarNear(const ir::Value* value, double expected, PassContext& ctx) {
  std::optional<double> v = SmallScalar(value, ctx);
  if (!v) return false;
  std::optional<int32_t> type = ElemType(*value, ctx);
  // Exported constants are rounded to the model's type: allow a half ulp of
  // float16 (2^-11) and bfloat16 (2^-8) besides the 1e-4 of float.
  double rtol = !type ? 1e-4 : *type == pb::kFloat16 ? 1e-3 : *type == pb::kBfloat16 ? 5e-3 : 1e-4;
  return std::fabs(*v - expected) <= rtol * std::fabs(expected);
}

absl::StatusOr<ir::Node*> ReplaceWithNode(ir::Graph& graph, ir::NodeSpec spec, ir::Value* old_out,
                                          const std::vector<ir::Node*>& matched) {
  std::set<uint64_t> serials;
  for (const ir::Node* n : matched) serials.insert(n->serial());
  const std::string old_name = old_out->name();
  spec.outputs = {graph.FreshName(old_name)};
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * node,
                           graph.AddNode(std::move(spec), ir::Position::Before(old_out->producer())));
  ir::Value* out = node->output(0);
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, old_out, out));
  // Consumers come after their producers: one backward sweep removes a dead chain.
  std::vector<ir::Node*> nodes = SnapshotNodes(graph);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (serials.count((*it)->serial()) == 0) continue;
    ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, *it).status());
  }
  if (out->name() != old_name && !graph.NameInUse(old_name)) {
    ONNXKIT_RETURN_IF_ERROR(graph.RenameValue(out, old_name));
  }
  return node;
}

absl::Status DropIfUnused(ir::Graph& graph, ir::Value* value) {
  if (value == nullptr || value->graph() != &graph || value->has_uses() || value->IsGraphOutput()) {
    return absl::OkStatus();
  }
  if (value->IsConstant()) return graph.RemoveInitializer(value);
  if (ir::Node* p = ProducerOp(value, "Constant", graph)) return RemoveIfDead(graph, p).status();
  return absl::OkStatus();
}

absl::Status DropAllIfUnused(ir::Graph& graph, const std::vector<ir::Value*>& values) {
  std::vector<ir::Value*> distinct;
  for (ir::Value* v : values) {
    if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
  }
  for (ir::Value* v : distinct) ONNXKIT_RETURN_IF_ERROR(DropIfUnused(graph, v));
  return absl::OkStatus();
}

absl::Status ReplaceKeepingName(ir::Graph& graph, ir::Value* old_value, ir::Value* replacement) {
  const std::string name = old_value->name();
  ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, old_value, replacement));
  if (replacement->name() != name && !graph.NameInUse(name)) {
    ONNXKIT_RETURN_IF_ERROR(graph.RenameValue(replacement, name));
  }
  return absl::OkStatus();
}

std::optional<ConvWeights> ReadConvWeights(const ir::Node& conv, PassContext& ctx) {
  if (!IsOp(&conv, "Conv") || conv.num_inputs() < 2 || conv.num_inputs() > 3 || conv.num_outputs() != 1) {
    return std::nullopt;
  }
  std::optional<runner::Tensor> w = FloatConstant(conv.input(1), ctx);
  if (!w || w->rank() < 3 || w->dim(0) < 1) return std::nullopt;
  ConvWeights out;
  out.dtype = w->dtype();
  out.w_shape = w->shape();
  out.channels = w->dim(0);
  out.w = *ToDoubles(*w);
  out.b.assign(static_cast<size_t>(out.channels), 0.0);
  if (conv.num_inputs() == 3 && conv.input(2) != nullptr) {
    std::optional<runner::Tensor> b = FloatConstant(conv.input(2), ctx);
    if (!b || b->dtype() != out.dtype || b->rank() != 1 || b->dim(0) != out.channels) return std::nullopt;
    out.b = *ToDoubles(*b);
    out.has_bias = true;
  }
  return out;
}

absl::Status WriteConvWeights(ir::Graph& graph, ir::Node& conv, const ConvWeights& weights) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor w, FromDoubles(weights.dtype, weights.w_shape, weights.w));
  ir::Value* old_w = conv.input(1);
  const std::string w_name = old_w->name();
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * new_w, AddConstant(graph, w_name + "_fused", w));
  ONNXKIT_RETURN_IF_ERROR(graph.SetInput(&conv, 1, new_w));
  ONNXKIT_RETURN_IF_ERROR(DropIfUnused(graph, old_w));
  if (!weights.has_bias) return absl::OkStatus();
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor b, FromDoubles(weights.dtype, {weights.channels}, weights.b));
  ir::Value* old_b = conv.num_inputs() == 3 ? conv.input(2) : nullptr;
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Value * new_b,
      AddConstant(graph, old_b != nullptr ? old_b->name() + "_fused" : w_name + "_bias", b));
  if (conv.num_inputs() == 3) {
    ONNXKIT_RETURN_IF_ERROR(graph.SetInput(&conv, 2, new_b));
  } else {
    ONNXKIT_RETURN_IF_ERROR(graph.AppendInput(&conv, new_b));
  }
  return DropIfUnused(graph, old_b);
}

bool FoldStaysFinite(const ConvWeights& weights, const std::vector<double>& factor,
                     const std::vector<double>& shift) {
  const double max = weights.dtype == pb::kDouble    ? std::numeric_limits<double>::max()
                     : weights.dtype == pb::kFloat16 ? 65504.0
                                                     : static_cast<double>(std::numeric_limits<float>::max());
  auto fits = [max](double v) { return std::isfinite(v) && std::fabs(v) <= max; };
  const size_t channels = static_cast<size_t>(weights.channels);
  if (channels == 0 || factor.size() != channels || shift.size() != channels) return false;
  const size_t per_channel = weights.w.size() / channels;
  for (size_t c = 0; c < channels; ++c) {
    if (!std::isfinite(factor[c]) || !std::isfinite(shift[c])) return false;
    for (size_t i = c * per_channel; i < (c + 1) * per_channel; ++i) {
      if (std::isfinite(weights.w[i]) && !fits(weights.w[i] * factor[c])) return false;
    }
    if (c < weights.b.size() && std::isfinite(weights.b[c]) && !fits(weights.b[c] * factor[c] + shift[c]))
      return false;
  }
  return true;
}

}  // namespace onnxkit::passes
