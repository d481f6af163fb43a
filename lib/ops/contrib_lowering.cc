#include "lib/ops/contrib_lowering.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/infer/engine.h"
#include "lib/ir/attributes.h"
#include "lib/ops/schema.h"

namespace onnxkit::ops {
namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";

bool IsDefaultDomain(std::string_view d) { return d.empty() || d == "ai.onnx"; }

// The com.microsoft ops this file writes as standard ops.
constexpr std::string_view kMicrosoftOps[] = {
    "Attention",
    "MultiHeadAttention",
    "GroupQueryAttention",
    "RotaryEmbedding",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "MatMulNBits",
    "GatherBlockQuantized",
    "MoE",
    "QMoE",
    "EmbedLayerNormalization",
    "QGemm",
    "QLinearSoftmax",
    "BiasGelu",
    "DequantizeLinear",
    "FastGelu",
    "FusedConv",
    "FusedGemm",
    "FusedMatMul",
    "Gelu",
    "QLinearAdd",
    "QLinearAveragePool",
    "QLinearConcat",
    "QLinearGlobalAveragePool",
    "QLinearLeakyRelu",
    "QLinearMul",
    "QLinearSigmoid",
    "QuantizeLinear",
    "QuickGelu",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
};

bool Known(std::string_view op) {
  for (std::string_view k : kMicrosoftOps) {
    if (k == op) return true;
  }
  return false;
}

// The output types of the contrib ops an LLM chains (inference has no
// schema for them), so that one inference types a whole chain of them and
// one round writes it out: output 0 as input 0 for the normalizations,
// activations, RotaryEmbedding and the MoE ops; MatMulNBits' A with N last;
// the attention ops' query with its output width where known.
std::vector<std::optional<infer::Type>> ContribOutputTypes(const ir::Node& node,
                                                           const std::vector<const infer::ValueState*>& in) {
  std::vector<std::optional<infer::Type>> out(static_cast<size_t>(node.num_outputs()));
  if (out.empty()) return out;
  auto tensor = [&](size_t i) -> const infer::Type* {
    if (i >= in.size() || in[i] == nullptr || !in[i]->type.is_tensor() || in[i]->type.elem_type == 0)
      return nullptr;
    return &in[i]->type;
  };
  const infer::Type* x = tensor(0);
  if (x == nullptr) return out;
  const std::string& op = node.op_type();
  const bool microsoft = node.domain() == kMicrosoft;
  if ((IsDefaultDomain(node.domain()) &&
       (op == "SimplifiedLayerNormalization" || op == "LayerNormalization")) ||
      (microsoft && (op == "SkipLayerNormalization" || op == "SkipSimplifiedLayerNormalization" ||
                     op == "Gelu" || op == "FastGelu" || op == "QuickGelu" || op == "BiasGelu" ||
                     op == "RotaryEmbedding" || op == "MoE" || op == "QMoE"))) {
    out[0] = *x;
    // SkipLayerNormalization's input + skip (output 3) too.
    if (microsoft && out.size() > 3 && op.rfind("Skip", 0) == 0) out[3] = *x;
    return out;
  }
  if (!microsoft) return out;
  if (op == "MatMulNBits") {
    infer::Type y = *x;
    const int64_t n = node.GetInt("N").value_or(0);
    if (y.shape && !y.shape->empty()) y.shape->back() = n > 0 ? infer::Dim::Of(n) : infer::Dim::Unknown();
    out[0] = std::move(y);
    return out;
  }
  if (op == "GroupQueryAttention" || op == "MultiHeadAttention" || op == "Attention") {
    if (!x->shape || x->shape->size() != 3) return out;
    infer::Type y = *x;
    infer::Dim& width = y.shape->back();
    if (op == "GroupQueryAttention" && tensor(1) == nullptr && width.known()) {
      // Packed QKV: the query's part.
      const int64_t heads = node.GetInt("num_heads").value_or(0),
                    kv = node.GetInt("kv_num_heads").value_or(0);
      const bool counts = heads > 0 && kv > 0 && heads <= 4096 && kv <= 4096;
      const int64_t parts = counts ? heads + 2 * kv : 1;
      width = counts && *width.value % parts == 0 ? infer::Dim::Of(*width.value / parts * heads)
                                                  : infer::Dim::Unknown();
    } else if (op != "GroupQueryAttention") {
      width = infer::Dim::Unknown();  // the value width may differ
    }
    out[0] = std::move(y);
  }
  return out;
}

// What LowerNode says of a rewrite the caller's `allow` refused.
constexpr std::string_view kRefused = "refused";

class Lowerer {
 public:
  Lowerer(ir::Model& model, int64_t opset) : model_(model), opset_(opset) {}

  // One pass over every graph; true when some node was rewritten.
  // One pass over `graphs` (every graph of the model when empty); true
  // when some node was rewritten. `allow` may refuse a rewrite that would
  // go through.
  absl::StatusOr<bool> Round(std::map<std::string, std::pair<std::string, int>>* left,
                             std::vector<ir::Graph*> graphs = {},
                             std::function<bool(const ir::Node&)> allow = nullptr) {
    Seed();
    allow_ = std::move(allow);
    if (graphs.empty()) ir::ForEachGraph(model_, [&](ir::Graph& g) { graphs.push_back(&g); });
    bool progress = false;
    for (ir::Graph* g : graphs) {
      std::vector<ir::Node*> nodes;
      for (ir::Node* n : g->nodes()) {
        if (IsContribNode(model_, n->domain(), n->op_type())) nodes.push_back(n);
      }
      for (ir::Node* n : nodes) {
        std::string key = absl::StrCat(IsDefaultDomain(n->domain()) ? "ai.onnx" : n->domain(), "::", n->op_type());
        ONNXKIT_ASSIGN_OR_RETURN(std::string why, LowerNode(*g, n));
        if (why.empty()) {
          ++lowered_;
          progress = true;
        } else if (why != kRefused) {
          auto& entry = (*left)[key];
          entry.first = why;
          ++entry.second;
        }
      }
    }
    return progress;
  }

  int lowered() const { return lowered_; }
  std::vector<ContribLowering::PackedWeights>& packed() { return packed_; }

 private:
  // Element types and ranks that inference finds for the model as it is now.
  void Seed() {
    infer::Engine engine(model_);
    engine.set_opaque_typer(ContribOutputTypes);
    engine.Run();
    std::map<std::string, infer::ValueState> states = engine.States();
    elem_.clear();
    rank_.clear();
    dims_.clear();
    ir::ForEachGraph(model_, [&](ir::Graph& g) {
      for (ir::Value* v : g.values()) {
        auto it = states.find(v->name());
        if (it == states.end() || !it->second.type.is_tensor()) continue;
        if (it->second.type.elem_type != 0) elem_[v] = it->second.type.elem_type;
        if (!it->second.type.shape) continue;
        rank_[v] = static_cast<int64_t>(it->second.type.shape->size());
        std::vector<int64_t>& dims = dims_[v];
        for (const infer::Dim& d : *it->second.type.shape) dims.push_back(d.value.value_or(-1));
      }
    });
  }

  // Dim `axis` (negative counts from the end) of `v` when known, else -1.
  int64_t DimOf(const ir::Value* v, int64_t axis) const {
    std::optional<int64_t> rank = Rank(v);
    if (!rank) return -1;
    if (axis < 0) axis += *rank;
    if (axis < 0 || axis >= *rank) return -1;
    if (auto it = dims_.find(v); it != dims_.end() && static_cast<int64_t>(it->second.size()) == *rank) {
      if (it->second[static_cast<size_t>(axis)] >= 0) return it->second[static_cast<size_t>(axis)];
    }
    if (const pb::TensorProto* t = v->initializer())
      return std::max<int64_t>(t->dims[static_cast<size_t>(axis)], -1);
    const pb::TypeProto* type = v->type();
    if (type != nullptr && type->tensor_type && type->tensor_type->shape &&
        static_cast<int64_t>(type->tensor_type->shape->dim.size()) == *rank) {
      const auto& d = type->tensor_type->shape->dim[static_cast<size_t>(axis)];
      if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0) return d.dim_value;
    }
    return -1;
  }

  std::optional<int32_t> Elem(const ir::Value* v) const {
    if (v == nullptr) return std::nullopt;
    if (auto it = elem_.find(v); it != elem_.end()) return it->second;
    if (const pb::TensorProto* t = v->initializer()) return t->data_type;
    const pb::TypeProto* type = v->type();
    if (type != nullptr && type->tensor_type && type->tensor_type->elem_type != 0) return type->tensor_type->elem_type;
    return std::nullopt;
  }

  std::optional<int64_t> Rank(const ir::Value* v) const {
    if (v == nullptr) return std::nullopt;
    if (auto it = rank_.find(v); it != rank_.end()) return it->second;
    if (const pb::TensorProto* t = v->initializer()) return static_cast<int64_t>(t->dims.size());
    const pb::TypeProto* type = v->type();
    if (type != nullptr && type->tensor_type && type->tensor_type->shape) {
      return static_cast<int64_t>(type->tensor_type->shape->dim.size());
    }
    return std::nullopt;
  }

  static bool IsFloat(int32_t t) {
    return t == pb::kFloat || t == pb::kFloat16 || t == pb::kDouble || t == pb::kBfloat16;
  }

  // --- emission, before the node being rewritten ---

  absl::StatusOr<ir::Value*> Emit(std::string_view op, std::vector<ir::Value*> inputs,
                                  std::vector<pb::AttributeProto> attributes = {}, int outputs = 1,
                                  std::vector<ir::Value*>* all_outputs = nullptr) {
    ir::NodeSpec spec;
    spec.op_type = std::string(op);
    spec.name = graph_->FreshName(absl::StrCat(base_, "/", std::string(op)));
    spec.inputs = std::move(inputs);
    for (int i = 0; i < outputs; ++i) spec.outputs.push_back(graph_->FreshName(absl::StrCat(base_, "/", std::string(op), "_out")));
    spec.attributes = std::move(attributes);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * node, graph_->AddNode(std::move(spec), ir::Position::Before(at_)));
    emitted_.push_back(node);
    if (all_outputs != nullptr) *all_outputs = node->outputs();
    return node->output(0);
  }

  absl::StatusOr<ir::Value*> ConstantOf(pb::TensorProto t, std::string_view hint) {
    pb::AttributeProto value;
    value.name = "value";
    value.type = pb::kAttrTensor;
    value.t = std::move(t);
    ir::NodeSpec spec{.op_type = "Constant",
                      .name = graph_->FreshName(absl::StrCat(base_, "/", std::string(hint))),
                      .outputs = {graph_->FreshName(absl::StrCat(base_, "/", std::string(hint)))},
                      .attributes = {std::move(value)}};
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * node, graph_->AddNode(std::move(spec), ir::Position::Before(at_)));
    emitted_.push_back(node);
    return node->output(0);
  }

  // A scalar of element type `elem` (a float constant, cast when needed).
  absl::StatusOr<ir::Value*> Scalar(double v, int32_t elem) {
    pb::TensorProto t;
    t.data_type = pb::kFloat;
    t.float_data.push_back(static_cast<float>(v));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, ConstantOf(std::move(t), "c"));
    if (elem == pb::kFloat) return c;
    return Emit("Cast", {c}, {ir::IntAttr("to", elem)});
  }

  absl::StatusOr<ir::Value*> Int64s(const std::vector<int64_t>& v) {
    pb::TensorProto t;
    t.data_type = pb::kInt64;
    t.dims = {static_cast<int64_t>(v.size())};
    t.int64_data = v;
    return ConstantOf(std::move(t), "axes");
  }

  // A zero point of 0 in `elem` (an 8-bit integer type).
  absl::StatusOr<ir::Value*> ZeroPoint(int32_t elem) {
    pb::TensorProto t;
    t.data_type = elem;
    t.int32_data.push_back(0);
    return ConstantOf(std::move(t), "zero_point");
  }

  absl::StatusOr<ir::Value*> ReduceMean(ir::Value* x, const std::vector<int64_t>& axes) {
    if (opset_ >= 18) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Int64s(axes));
      return Emit("ReduceMean", {x, a}, {ir::IntAttr("keepdims", 1)});
    }
    return Emit("ReduceMean", {x}, {ir::IntsAttr("axes", axes), ir::IntAttr("keepdims", 1)});
  }

  // --- the rewrite of one node ---

  ir::Value* In(int i) const { return i < node_->num_inputs() ? node_->input(i) : nullptr; }
  bool Used(int i) const {
    if (i >= node_->num_outputs()) return false;
    const ir::Value* v = node_->output(i);
    return v != nullptr && !v->name().empty() && (v->has_uses() || v->IsGraphOutput());
  }
  float FloatAttr(std::string_view name, float fallback) const { return node_->GetFloat(name).value_or(fallback); }
  int64_t IntAttr(std::string_view name, int64_t fallback) const { return node_->GetInt(name).value_or(fallback); }

  // Returns "" when rewritten, else why not (the graph unchanged).
  absl::StatusOr<std::string> LowerNode(ir::Graph& g, ir::Node* node) {
    graph_ = &g;
    at_ = node;
    node_ = node;
    base_ = node->name().empty() ? node->op_type() : node->name();
    emitted_.clear();
    pending_.reset();
    if (node->num_outputs() == 0 || node->output(0) == nullptr) return std::string("the node has no output");
    std::vector<ir::Value*> outs(static_cast<size_t>(node->num_outputs()), nullptr);
    absl::StatusOr<std::string> why = Rewrite(outs);
    if (why.ok() && why->empty()) {
      for (int i = 0; i < node->num_outputs(); ++i) {
        if (Used(i) && outs[static_cast<size_t>(i)] == nullptr) {
          why = absl::StrCat("output ", i, " is not supported");
          break;
        }
      }
    }
    if (why.ok() && why->empty() && allow_ && !allow_(*node)) why = std::string(kRefused);
    if (!why.ok() || !why->empty()) {
      // Undo: the emitted nodes are unused (nothing refers to them yet).
      for (auto it = emitted_.rbegin(); it != emitted_.rend(); ++it) {
        ONNXKIT_RETURN_IF_ERROR(graph_->RemoveNode(*it));
      }
      return why;
    }
    // Each output takes its rewritten value, which then takes its name.
    std::vector<std::pair<ir::Value*, std::string>> renames;
    for (int i = 0; i < node->num_outputs(); ++i) {
      ir::Value* old_value = node->output(i);
      ir::Value* new_value = outs[static_cast<size_t>(i)];
      if (old_value == nullptr || old_value->name().empty() || new_value == nullptr) continue;
      if (new_value->producer() == nullptr || !graph_->HasNode(new_value->producer()) ||
          std::find(emitted_.begin(), emitted_.end(), new_value->producer()) == emitted_.end()) {
        ONNXKIT_ASSIGN_OR_RETURN(new_value, Emit("Identity", {new_value}));
      }
      if (old_value->type() != nullptr) new_value->set_type(*old_value->type());
      ONNXKIT_RETURN_IF_ERROR(graph_->ReplaceAllUsesWith(old_value, new_value));
      renames.emplace_back(new_value, old_value->name());
    }
    ONNXKIT_RETURN_IF_ERROR(graph_->RemoveNode(node));
    for (auto& [value, name] : renames) ONNXKIT_RETURN_IF_ERROR(graph_->RenameValue(value, name));
    if (pending_) packed_.push_back(*std::move(pending_));
    return std::string();
  }

  absl::StatusOr<std::string> Rewrite(std::vector<ir::Value*>& outs) {
    const std::string& op = node_->op_type();
    if (IsDefaultDomain(node_->domain())) {
      if (op == "LayerNormalization") return LayerNorm(outs, false);
      return LayerNorm(outs, true);  // SimplifiedLayerNormalization
    }
    if (!Known(op)) return std::string("not supported");
    if (op == "FusedConv") return FusedConv(outs);
    if (op == "FusedGemm") return FusedGemm(outs);
    if (op == "FusedMatMul") return FusedMatMul(outs);
    if (op == "Gelu" || op == "BiasGelu" || op == "FastGelu" || op == "QuickGelu") return GeluFamily(outs);
    if (op == "SkipLayerNormalization") return SkipLayerNorm(outs, false);
    if (op == "SkipSimplifiedLayerNormalization") return SkipLayerNorm(outs, true);
    if (op == "QuantizeLinear" || op == "DequantizeLinear") return QuantizeOps(outs);
    if (op == "Attention") return Attention(outs);
    if (op == "MultiHeadAttention") return MultiHeadAttention(outs);
    if (op == "GroupQueryAttention") return GroupQueryAttention(outs);
    if (op == "RotaryEmbedding") return RotaryEmbedding(outs);
    if (op == "QGemm") return QGemm(outs);
    if (op == "DynamicQuantizeMatMul") return IntegerMatMul(outs, true);
    if (op == "MatMulIntegerToFloat") return IntegerMatMul(outs, false);
    if (op == "MatMulNBits") return MatMulNBits(outs);
    if (op == "GatherBlockQuantized") return GatherBlockQuantized(outs);
    if (op == "MoE" || op == "QMoE") return MoE(outs);
    if (op == "QLinearSoftmax") return QLinearSoftmax(outs);
    if (op == "EmbedLayerNormalization") return EmbedLayerNorm(outs);
    return QLinear(outs);
  }

  // The activation ONNX Runtime fused: `params` as the op gives them.
  absl::StatusOr<std::string> Activation(ir::Value* x, std::string_view kind, const std::vector<float>& params,
                                         int32_t elem, ir::Value** out) {
    auto need = [&](size_t n) -> std::string {
      return params.size() < n ? absl::StrCat("activation ", std::string(kind), " needs ", n, " parameters") : std::string();
    };
    if (kind.empty()) {
      *out = x;
    } else if (kind == "Relu" || kind == "Tanh" || kind == "Sigmoid") {
      ONNXKIT_ASSIGN_OR_RETURN(*out, Emit(kind, {x}));
    } else if (kind == "LeakyRelu") {
      if (std::string w = need(1); !w.empty()) return w;
      ONNXKIT_ASSIGN_OR_RETURN(*out, Emit("LeakyRelu", {x}, {ir::FloatAttr("alpha", params[0])}));
    } else if (kind == "HardSigmoid") {
      if (std::string w = need(2); !w.empty()) return w;
      ONNXKIT_ASSIGN_OR_RETURN(
          *out, Emit("HardSigmoid", {x}, {ir::FloatAttr("alpha", params[0]), ir::FloatAttr("beta", params[1])}));
    } else if (kind == "Clip") {
      if (std::string w = need(2); !w.empty()) return w;
      if (opset_ < 11) {
        ONNXKIT_ASSIGN_OR_RETURN(
            *out, Emit("Clip", {x}, {ir::FloatAttr("min", params[0]), ir::FloatAttr("max", params[1])}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lo, Scalar(params[0], elem));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hi, Scalar(params[1], elem));
        ONNXKIT_ASSIGN_OR_RETURN(*out, Emit("Clip", {x, lo, hi}));
      }
    } else {
      return absl::StrCat("activation '", std::string(kind), "' is not supported");
    }
    return std::string();
  }

  // The node's attributes but `drop`.
  std::vector<pb::AttributeProto> AttributesBut(std::initializer_list<std::string_view> drop) const {
    std::vector<pb::AttributeProto> out;
    for (const ir::Attribute& a : node_->attributes()) {
      bool dropped = false;
      for (std::string_view d : drop) dropped = dropped || a.name() == d;
      if (!dropped && !a.g && a.graphs.empty()) out.push_back(a.proto);
    }
    return out;
  }

  std::vector<float> Floats(std::string_view name) const {
    const ir::Attribute* a = node_->FindAttribute(name);
    if (a == nullptr || a->type() != pb::kAttrFloats) return {};
    return a->proto.floats;
  }

  absl::StatusOr<std::string> FusedConv(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("X or W is missing");
    std::optional<int32_t> elem = Elem(In(1));
    if (!elem) elem = Elem(In(0));
    const std::string kind = node_->GetString("activation").value_or("");
    if (kind == "Clip" && !elem) return std::string("the element type is unknown");
    std::vector<ir::Value*> conv_inputs = {In(0), In(1)};
    if (In(2) != nullptr) conv_inputs.push_back(In(2));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y,
                             Emit("Conv", conv_inputs, AttributesBut({"activation", "activation_params"})));
    if (In(3) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, In(3)}));
    }
    return Activation(y, kind, Floats("activation_params"), elem.value_or(pb::kFloat), &outs[0]);
  }

  absl::StatusOr<std::string> FusedGemm(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("A or B is missing");
    const std::string kind = node_->GetString("activation").value_or("");
    if (kind == "Clip") return std::string("activation Clip is not supported");
    std::vector<ir::Value*> inputs = {In(0), In(1)};
    if (In(2) != nullptr) inputs.push_back(In(2));
    ONNXKIT_ASSIGN_OR_RETURN(
        ir::Value * y, Emit("Gemm", inputs, AttributesBut({"activation", "activation_alpha", "activation_beta",
                                                           "activation_gamma"})));
    std::vector<float> params = {FloatAttr("activation_alpha", kind == "LeakyRelu" ? 0.01f : 0.2f),
                                 FloatAttr("activation_beta", 0.5f)};
    return Activation(y, kind, params, pb::kFloat, &outs[0]);
  }

  // The matrix operand FusedMatMul takes from `v` (rank `rank`): with
  // `batch` (transBatch), dims 1 .. rank-2 are the batch and dims 0 and
  // rank-1 the matrix; `trans` swaps the two matrix dims.
  absl::StatusOr<ir::Value*> Operand(ir::Value* v, int64_t rank, bool trans, bool batch) {
    std::vector<int64_t> perm;
    if (batch) {
      for (int64_t i = 1; i + 1 < rank; ++i) perm.push_back(i);
      perm.push_back(0);
      perm.push_back(rank - 1);
    } else {
      for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
    }
    if (trans) std::swap(perm[static_cast<size_t>(rank - 2)], perm[static_cast<size_t>(rank - 1)]);
    bool identity = true;
    for (int64_t i = 0; i < rank; ++i) identity = identity && perm[static_cast<size_t>(i)] == i;
    if (identity) return v;
    return Emit("Transpose", {v}, {ir::IntsAttr("perm", perm)});
  }

  absl::StatusOr<std::string> FusedMatMul(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("A or B is missing");
    const bool ta = IntAttr("transA", 0) != 0, tb = IntAttr("transB", 0) != 0;
    const bool ba = IntAttr("transBatchA", 0) != 0, bb = IntAttr("transBatchB", 0) != 0;
    std::optional<int64_t> ra = Rank(In(0)), rb = Rank(In(1));
    if (((ta || ba) && !ra) || ((tb || bb) && !rb)) return std::string("the rank of a transposed input is unknown");
    if ((ra && *ra > 64) || (rb && *rb > 64)) return std::string("an input has a rank above 64");
    const float alpha = FloatAttr("alpha", 1.0f);
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem) elem = Elem(In(1));
    if (alpha != 1.0f && !elem) return std::string("the element type is unknown");
    ir::Value* a = In(0);
    ir::Value* b = In(1);
    // A vector operand is used as it is.
    if ((ta || ba) && *ra >= 2) {
      ONNXKIT_ASSIGN_OR_RETURN(a, Operand(a, *ra, ta, ba));
    }
    if ((tb || bb) && *rb >= 2) {
      ONNXKIT_ASSIGN_OR_RETURN(b, Operand(b, *rb, tb, bb));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("MatMul", {a, b}));
    if (alpha != 1.0f) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Scalar(alpha, *elem));
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Mul", {y, s}));
    }
    outs[0] = y;
    return std::string();
  }

  // x * 0.5 * (1 + erf(x / sqrt(2))), as exporters write it.
  absl::StatusOr<ir::Value*> ErfGelu(ir::Value* x, int32_t elem) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r2, Scalar(std::sqrt(2.0), elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Scalar(1.0, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * half, Scalar(0.5, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, Emit("Div", {x, r2}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, Emit("Erf", {d}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Emit("Add", {e, one}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, Emit("Mul", {x, s}));
    return Emit("Mul", {m, half});
  }

  absl::StatusOr<std::string> GeluFamily(std::vector<ir::Value*>& outs) {
    const std::string& op = node_->op_type();
    if (In(0) == nullptr) return std::string("the input is missing");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem && In(1) != nullptr) elem = Elem(In(1));
    if (!elem) return std::string("the element type is unknown");
    if (!IsFloat(*elem)) return std::string("the element type is not a float type");
    ir::Value* x = In(0);
    if ((op == "BiasGelu" || op == "FastGelu") && In(1) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(x, Emit("Add", {x, In(1)}));
    }
    if (op == "BiasGelu" && In(1) == nullptr) return std::string("the bias is missing");
    if (op == "Gelu" || op == "BiasGelu") {
      ONNXKIT_ASSIGN_OR_RETURN(outs[0], ErfGelu(x, *elem));
    } else if (op == "QuickGelu") {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Scalar(FloatAttr("alpha", 1.702f), *elem));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ax, Emit("Mul", {x, a}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Emit("Sigmoid", {ax}));
      ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit("Mul", {x, s}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(outs[0], TanhGelu(x, *elem));
    }
    return std::string();
  }

  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
  absl::StatusOr<ir::Value*> TanhGelu(ir::Value* x, int32_t elem) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Scalar(0.044715, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k, Scalar(0.7978845608028654, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Scalar(1.0, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * half, Scalar(0.5, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x2, Emit("Mul", {x, x}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x3, Emit("Mul", {x2, x}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cx3, Emit("Mul", {x3, c}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * in, Emit("Add", {x, cx3}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kin, Emit("Mul", {in, k}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, Emit("Tanh", {kin}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Emit("Add", {t, one}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, Emit("Mul", {x, s}));
    return Emit("Mul", {m, half});
  }

  // MoE: each row of input ([rows, H] or [B, S, H]) goes to the k experts
  // of highest softmax(router_probs) (weights renormalized to sum 1 with
  // normalize_routing_weights), expert e computing
  // fc2[e] act(fc1[e] x + b1[e]) + b2[e] (fc1 [E, F, H], fc2 [E, H, I]: out
  // by in); the row's result is their weighted sum. Written densely: every
  // expert runs on every row and the weights of the experts not chosen are
  // 0, E / k times the work of running only the chosen ones.
  //
  // QMoE: the same with fc1 and fc2 as uint8 codes (expert_weight_bits 4:
  // two a byte, low nibble first; or 8) along the input axis, each
  // (code - 2^(bits-1)) * scale, scales [E, out] or per block_size codes
  // [E, out, in / block_size]; its routing weights are always renormalized
  // to sum 1 over the k chosen (as ONNX Runtime computes it on cpu,
  // whatever normalize_routing_weights says).
  absl::StatusOr<std::string> MoE(std::vector<ir::Value*>& outs) {
    const bool quantized = node_->op_type() == "QMoE";
    const int fc1 = 2, b1 = quantized ? 4 : 3, fc2 = quantized ? 5 : 4, b2 = quantized ? 7 : 5;
    if (In(0) == nullptr || In(1) == nullptr || In(fc1) == nullptr || In(fc2) == nullptr ||
        (quantized && (In(3) == nullptr || In(6) == nullptr))) {
      return std::string("input, router_probs, fc1 or fc2's weights (or their scales) are missing");
    }
    for (int i = quantized ? 8 : 6; i < node_->num_inputs(); ++i) {
      if (In(i) != nullptr) {
        return std::string(
            "fc3_experts_weights (a separate gate projection) and zero points are not supported");
      }
    }
    if (IntAttr("use_sparse_mixer", 0) != 0) {
      // ONNX Runtime's cpu kernel routes such a node as plain top k (its
      // CUDA kernel by the sparse mixer): neither is written here.
      return std::string(
          "use_sparse_mixer is not supported (ONNX Runtime's cpu and CUDA kernels route it differently)");
    }
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    for (int i : {1, b1, b2}) {
      if (In(i) != nullptr && Elem(In(i)) != elem) return std::string("the inputs' element types differ");
    }
    const std::optional<int64_t> rank = Rank(In(0));
    if (!rank || (*rank != 2 && *rank != 3))
      return std::string("input is not [rows, hidden] or [B, S, hidden]");
    if (Rank(In(1)) != 2 || Rank(In(fc1)) != 3 || Rank(In(fc2)) != 3 ||
        (In(b1) != nullptr && Rank(In(b1)) != 2) || (In(b2) != nullptr && Rank(In(b2)) != 2)) {
      return std::string(
          "router_probs, the expert weights or their biases are not of the ranks the op takes");
    }
    const int64_t bits = IntAttr("expert_weight_bits", 4), block = IntAttr("block_size", 0);
    if (quantized) {
      if (bits != 4 && bits != 8) return std::string("expert_weight_bits is neither 4 nor 8");
      if (block < 0 || block > (int64_t{1} << 20))
        return std::string("block_size is not 0 or a positive length");
      for (int i : {fc1, fc2}) {
        if (Elem(In(i)) != pb::kUint8) return std::string("the quantized expert weights are not uint8");
        if (Elem(In(i + 1)) != elem || Rank(In(i + 1)) != (block > 0 ? 3 : 2)) {
          return std::string(
              "the scales are not [E, out] (or [E, out, blocks] with block_size) of input's type");
        }
      }
    } else {
      for (int i : {fc1, fc2}) {
        if (Elem(In(i)) != elem) return std::string("the inputs' element types differ");
      }
    }
    const int64_t k = IntAttr("k", 1), experts = DimOf(In(1), 1);
    if (k < 1 || (experts > 0 && k > experts)) return std::string("k is not between 1 and the expert count");
    const std::string act = node_->GetString("activation_type").value_or("relu");
    const bool swiglu = act == "swiglu";
    if (swiglu && IntAttr("swiglu_fusion", 0) != 1) {
      return std::string("swiglu is supported with swiglu_fusion 1 (gate and linear values interleaved)");
    }
    if (!swiglu && act != "relu" && act != "gelu" && act != "silu" && act != "identity") {
      return absl::StrCat("activation_type '", act, "' is not supported");
    }
    const int32_t e = *elem;
    // Rows [R, H]; routing weights [R, E], zero but for each row's top k.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, Emit("Flatten", {In(0)}, {ir::IntAttr("axis", *rank - 1)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * probs, Emit("Softmax", {In(1)}, {ir::IntAttr("axis", 1)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kk, Int64s({k}));
    std::vector<ir::Value*> top;
    ONNXKIT_RETURN_IF_ERROR(Emit("TopK", {probs, kk}, {ir::IntAttr("axis", 1)}, 2, &top).status());
    ir::Value* chosen = top[0];
    if (quantized || IntAttr("normalize_routing_weights", 0) != 0) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis1, Int64s({1}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sum,
                               Emit("ReduceSum", {chosen, axis1}, {ir::IntAttr("keepdims", 1)}));
      ONNXKIT_ASSIGN_OR_RETURN(chosen, Emit("Div", {chosen, sum}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Emit("Shape", {probs}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zeros, Emit("ConstantOfShape", {shape}));
    if (e != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(zeros, Emit("Cast", {zeros}, {ir::IntAttr("to", e)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * gates,
                             Emit("ScatterElements", {zeros, top[1], chosen}, {ir::IntAttr("axis", 1)}));
    // Every expert on every row: [1, R, H] x [E, H, F] -> [E, R, F].
    ir::Value* weights1 = In(fc1);
    ir::Value* weights2 = In(fc2);
    if (quantized) {
      ONNXKIT_ASSIGN_OR_RETURN(weights1, ExpertWeights(In(fc1), In(fc1 + 1), bits, block, e));
      ONNXKIT_ASSIGN_OR_RETURN(weights2, ExpertWeights(In(fc2), In(fc2 + 1), bits, block, e));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, Unsqueezed(x, {0}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w1,
                             Emit("Transpose", {weights1}, {ir::IntsAttr("perm", {0, 2, 1})}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * h, Emit("MatMul", {rows, w1}));
    if (In(b1) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * bias1, Unsqueezed(In(b1), {1}));
      ONNXKIT_ASSIGN_OR_RETURN(h, Emit("Add", {h, bias1}));
    }
    if (act == "relu") {
      ONNXKIT_ASSIGN_OR_RETURN(h, Emit("Relu", {h}));
    } else if (act == "gelu") {
      ONNXKIT_ASSIGN_OR_RETURN(h, TanhGelu(h, e));
    } else if (act == "silu") {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sig, Emit("Sigmoid", {h}));
      ONNXKIT_ASSIGN_OR_RETURN(h, Emit("Mul", {h, sig}));
    } else if (swiglu) {
      // Gate and linear values interleaved along F: gate min(g, limit),
      // linear clipped to +-limit, g sigmoid(alpha g) (linear + beta).
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pairs, Reshaped(h, {0, 0, -1, 2}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * i0, Int64Scalar(0));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * i1, Int64Scalar(1));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * gate, Emit("Gather", {pairs, i0}, {ir::IntAttr("axis", 3)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * linear, Emit("Gather", {pairs, i1}, {ir::IntAttr("axis", 3)}));
      if (std::optional<float> limit = node_->GetFloat("swiglu_limit"); limit && std::isfinite(*limit)) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hi, Scalar(*limit, e));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lo, Scalar(-*limit, e));
        ONNXKIT_ASSIGN_OR_RETURN(gate, Emit("Min", {gate, hi}));
        ONNXKIT_ASSIGN_OR_RETURN(linear, Emit("Min", {linear, hi}));
        ONNXKIT_ASSIGN_OR_RETURN(linear, Emit("Max", {linear, lo}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * alpha, Scalar(FloatAttr("activation_alpha", 1.0f), e));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * beta, Scalar(FloatAttr("activation_beta", 0.0f), e));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ag, Emit("Mul", {gate, alpha}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sig, Emit("Sigmoid", {ag}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * glu, Emit("Mul", {gate, sig}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lb, Emit("Add", {linear, beta}));
      ONNXKIT_ASSIGN_OR_RETURN(h, Emit("Mul", {glu, lb}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w2,
                             Emit("Transpose", {weights2}, {ir::IntsAttr("perm", {0, 2, 1})}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("MatMul", {h, w2}));  // [E, R, H]
    if (In(b2) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * bias2, Unsqueezed(In(b2), {1}));
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, bias2}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * per_expert,
                             Emit("Transpose", {gates}, {ir::IntsAttr("perm", {1, 0})}));
    ONNXKIT_ASSIGN_OR_RETURN(per_expert, Unsqueezed(per_expert, {2}));  // [E, R, 1]
    ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Mul", {y, per_expert}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis0, Int64s({0}));
    ONNXKIT_ASSIGN_OR_RETURN(y, Emit("ReduceSum", {y, axis0}, {ir::IntAttr("keepdims", 0)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out_shape, Emit("Shape", {In(0)}));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit("Reshape", {y, out_shape}));
    return std::string();
  }

  // Normalizes `x` over `axes`: (x - mean) / sqrt(var + eps), or for the
  // simplified (RMS) form x / sqrt(mean(x^2) + eps). Sets the mean and the
  // inverse standard deviation where asked for.
  absl::StatusOr<std::string> Normalize(ir::Value* x, const std::vector<int64_t>& axes, float epsilon,
                                        bool simplified, int32_t elem, bool stash, ir::Value** y, ir::Value** mean,
                                        ir::Value** inv_std) {
    int32_t compute = elem;
    if (stash && (elem == pb::kFloat16 || elem == pb::kBfloat16)) {
      compute = pb::kFloat;
      ONNXKIT_ASSIGN_OR_RETURN(x, Emit("Cast", {x}, {ir::IntAttr("to", pb::kFloat)}));
    }
    ir::Value* centered = x;
    if (!simplified) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, ReduceMean(x, axes));
      if (mean != nullptr) *mean = m;
      ONNXKIT_ASSIGN_OR_RETURN(centered, Emit("Sub", {x, m}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sq, Emit("Mul", {centered, centered}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * var, ReduceMean(sq, axes));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * eps, Scalar(epsilon, compute));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ve, Emit("Add", {var, eps}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sd, Emit("Sqrt", {ve}));
    if (inv_std != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(*inv_std, Emit("Reciprocal", {sd}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(*y, Emit("Div", {centered, sd}));
    if (compute != elem) {
      ONNXKIT_ASSIGN_OR_RETURN(*y, Emit("Cast", {*y}, {ir::IntAttr("to", elem)}));
    }
    return std::string();
  }

  // ai.onnx LayerNormalization below 17 (ONNX Runtime's own) and
  // SimplifiedLayerNormalization: X, Scale, B -> Y, Mean, InvStdDev (the
  // simplified form: Y, InvStdVar).
  absl::StatusOr<std::string> LayerNorm(std::vector<ir::Value*>& outs, bool simplified) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("X or Scale is missing");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem) return std::string("the element type is unknown");
    if (!IsFloat(*elem)) return std::string("the element type is not a float type");
    const int64_t axis = IntAttr("axis", -1);
    std::vector<int64_t> axes;
    if (axis < 0) {
      if (axis < -64) return std::string("the axis is out of range");
      for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    } else {
      std::optional<int64_t> rank = Rank(In(0));
      if (!rank) return std::string("the rank of X is unknown");
      if (*rank > 64) return std::string("X has a rank above 64");
      if (axis >= *rank) return std::string("the axis is out of range");
      for (int64_t a = axis; a < *rank; ++a) axes.push_back(a);
    }
    ir::Value* y = nullptr;
    ir::Value* mean = nullptr;
    ir::Value* inv = nullptr;
    const bool want_mean = !simplified && Used(1);
    const bool want_inv = simplified ? Used(1) : Used(2);
    ONNXKIT_ASSIGN_OR_RETURN(std::string why,
                             Normalize(In(0), axes, FloatAttr("epsilon", 1e-5f), simplified, *elem,
                                       IntAttr("stash_type", 1) == 1, &y, want_mean ? &mean : nullptr,
                                       want_inv ? &inv : nullptr));
    if (!why.empty()) return why;
    ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Mul", {y, In(1)}));
    if (!simplified && In(2) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, In(2)}));
    }
    outs[0] = y;
    if (simplified) {
      if (outs.size() > 1) outs[1] = inv;
    } else {
      if (outs.size() > 1) outs[1] = mean;
      if (outs.size() > 2) outs[2] = inv;
    }
    return std::string();
  }

  // SkipLayerNormalization: input, skip, gamma, beta, bias -> output, mean,
  // inv_std_var, input_skip_bias_sum; the simplified form: input, skip,
  // gamma, bias (no beta, no mean).
  absl::StatusOr<std::string> SkipLayerNorm(std::vector<ir::Value*>& outs, bool simplified) {
    if (In(0) == nullptr || In(1) == nullptr || In(2) == nullptr) return std::string("input, skip or gamma is missing");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem) elem = Elem(In(2));
    if (!elem) return std::string("the element type is unknown");
    if (!IsFloat(*elem)) return std::string("the element type is not a float type");
    ir::Value* beta = simplified ? nullptr : In(3);
    ir::Value* bias = simplified ? In(3) : In(4);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sum, Emit("Add", {In(0), In(1)}));
    if (bias != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(sum, Emit("Add", {sum, bias}));
    }
    ir::Value* y = nullptr;
    ir::Value* mean = nullptr;
    ir::Value* inv = nullptr;
    ONNXKIT_ASSIGN_OR_RETURN(std::string why, Normalize(sum, {-1}, FloatAttr("epsilon", 1e-12f), simplified, *elem,
                                                        true, &y, (!simplified && Used(1)) ? &mean : nullptr,
                                                        Used(2) ? &inv : nullptr));
    if (!why.empty()) return why;
    ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Mul", {y, In(2)}));
    if (beta != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, beta}));
    }
    outs[0] = y;
    if (outs.size() > 1) outs[1] = mean;
    if (outs.size() > 2) outs[2] = inv;
    if (outs.size() > 3) outs[3] = sum;
    return std::string();
  }

  absl::StatusOr<ir::Value*> Unsqueezed(ir::Value* v, const std::vector<int64_t>& axes) {
    if (opset_ >= 13) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Int64s(axes));
      return Emit("Unsqueeze", {v, a});
    }
    return Emit("Unsqueeze", {v}, {ir::IntsAttr("axes", axes)});
  }

  absl::StatusOr<ir::Value*> Reshaped(ir::Value* v, const std::vector<int64_t>& shape) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Int64s(shape));
    return Emit("Reshape", {v, s});
  }

  // The int64 scalar dim `axis` of `x` at run time.
  absl::StatusOr<ir::Value*> DimScalar(ir::Value* x, int64_t axis) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Emit("Shape", {x}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * from, Int64s({axis}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * to, Int64s({axis + 1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * dim, Emit("Slice", {shape, from, to}));
    if (opset_ >= 13) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axes, Int64s({0}));
      return Emit("Squeeze", {dim, axes});
    }
    return Emit("Squeeze", {dim}, {ir::IntsAttr("axes", {0})});
  }

  absl::StatusOr<ir::Value*> Int64Scalar(int64_t v) {
    pb::TensorProto t;
    t.data_type = pb::kInt64;
    t.int64_data = {v};
    return ConstantOf(std::move(t), "i");
  }

  // int64 0, 1 .. n-1 for n = dim `axis` of `x`.
  absl::StatusOr<ir::Value*> RangeOf(ir::Value* x, int64_t axis) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * n, DimScalar(x, axis));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, Int64Scalar(0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * step, Int64Scalar(1));
    return Emit("Range", {zero, n, step});
  }

  // int64 0, 1 .. n-1 for n = dim 1 of `x`.
  absl::StatusOr<ir::Value*> Positions(ir::Value* x) { return RangeOf(x, 1); }

  // x[..., start:end] along `axis` (opset 10 on).
  absl::StatusOr<ir::Value*> SliceOf(ir::Value* x, int64_t start, int64_t end, int64_t axis) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Int64s({start}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, Int64s({end}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Int64s({axis}));
    return Emit("Slice", {x, s, e, a});
  }

  // [B, S, N*H] -> [B, N, S, H], or [B, N, H, S] when `transposed`.
  absl::StatusOr<ir::Value*> Heads(ir::Value* x, int64_t heads, bool transposed = false) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, Reshaped(x, {0, 0, heads, -1}));
    const std::vector<int64_t> perm =
        transposed ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
    return Emit("Transpose", {r}, {ir::IntsAttr("perm", perm)});
  }

  // What the attention ops share: Q [B, N, S, H], K [B, N, T, H] and
  // V [B, N, T, Hv] give softmax(Q K^T * scale + masks) V as [B, S, N*Hv].
  struct Attend {
    ir::Value* q = nullptr;
    ir::Value* k = nullptr;   // or, when null,
    ir::Value* kt = nullptr;  // K^T [B, N, H, T]
    ir::Value* v = nullptr;
    int64_t head_size = -1;  // H for the default scale; -1 when only known at run time
    int32_t elem = 0;
    // Key padding: [B] lengths (keys from the length on masked), [B, T] or
    // [B, S, T] (a value > 0 attends); a masked key gets `filter` added.
    ir::Value* mask = nullptr;
    int64_t mask_rank = 0;
    ir::Value* bias = nullptr;  // added to the scores, [B|1, N|1, S, T]
    ir::Value* add = nullptr;   // the same, of a mask built here
    bool causal = false;        // query i (of S, the last of T) sees keys up to T - S + i
    double softcap = 0.0;       // > 0: scaled scores become softcap * tanh(scores / softcap)
    ir::Value* sink = nullptr;  // [1, N, 1, 1] or a scalar: one more logit in each softmax
  };

  // cap * tanh(scores / cap).
  absl::StatusOr<ir::Value*> Capped(ir::Value* scores, double cap, int32_t elem) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Scalar(cap, elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, Emit("Div", {scores, c}));
    ONNXKIT_ASSIGN_OR_RETURN(x, Emit("Tanh", {x}));
    return Emit("Mul", {x, c});
  }

  // The sink logit of each query row as a column [B, N, S, 1], from Q
  // [B, N, S, H] and `sink` ([1, N, 1, 1] or a scalar).
  absl::StatusOr<ir::Value*> SinkColumn(ir::Value* q, ir::Value* sink, int32_t elem) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one_col, SliceOf(q, 0, 1, 3));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Emit("Shape", {one_col}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zeros, Emit("ConstantOfShape", {shape}));
    if (elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(zeros, Emit("Cast", {zeros}, {ir::IntAttr("to", elem)}));
    }
    return Emit("Add", {zeros, sink});
  }

  // Softmax of 4-D scores along the last axis; with `sink_column` (one
  // logit per row, [.., .., R, 1]) counted in each row's denominator.
  absl::StatusOr<ir::Value*> Probabilities(ir::Value* scores, ir::Value* sink_column) {
    if (sink_column == nullptr) return Emit("Softmax", {scores}, {ir::IntAttr("axis", 3)});
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * all,
                             Emit("Concat", {scores, sink_column}, {ir::IntAttr("axis", 3)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * probs, Emit("Softmax", {all}, {ir::IntAttr("axis", 3)}));
    return SliceOf(probs, 0, -1, 3);
  }

  absl::StatusOr<ir::Value*> AttendHeads(const Attend& a) {
    ir::Value* kt = a.kt;
    if (kt == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(kt, Emit("Transpose", {a.k}, {ir::IntsAttr("perm", {0, 1, 3, 2})}));
    }
    // Where the keys' count T is.
    ir::Value* const keyed = a.k != nullptr ? a.k : kt;
    const int64_t key_axis = a.k != nullptr ? 2 : 3;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scores, Emit("MatMul", {a.q, kt}));
    ir::Value* sc = nullptr;
    if (double scale = FloatAttr("scale", 0.0f); scale != 0.0) {
      ONNXKIT_ASSIGN_OR_RETURN(sc, Scalar(scale, a.elem));
    } else if (a.head_size > 0) {
      ONNXKIT_ASSIGN_OR_RETURN(sc, Scalar(1.0 / std::sqrt(static_cast<double>(a.head_size)), a.elem));
    } else {
      // 1 / sqrt(H) from the run's head size.
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * h, DimScalar(a.q, 3));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hf, Emit("Cast", {h}, {ir::IntAttr("to", pb::kFloat)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * root, Emit("Sqrt", {hf}));
      ONNXKIT_ASSIGN_OR_RETURN(sc, Emit("Reciprocal", {root}));
      if (a.elem != pb::kFloat) {
        ONNXKIT_ASSIGN_OR_RETURN(sc, Emit("Cast", {sc}, {ir::IntAttr("to", a.elem)}));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Mul", {scores, sc}));
    if (a.softcap > 0.0) {
      ONNXKIT_ASSIGN_OR_RETURN(scores, Capped(scores, a.softcap, a.elem));
    }
    ir::Value* zero = nullptr;
    ir::Value* filter = nullptr;
    if (a.mask != nullptr || a.causal) {
      ONNXKIT_ASSIGN_OR_RETURN(zero, Scalar(0.0, a.elem));
      ONNXKIT_ASSIGN_OR_RETURN(filter, Scalar(FloatAttr("mask_filter_value", -10000.0f), a.elem));
    }
    if (a.mask != nullptr) {
      ir::Value* attend = nullptr;  // bool [B, T] or [B, S, T]
      if (a.mask_rank == 1) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * keys, RangeOf(keyed, key_axis));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lengths,
                                 Emit("Cast", {a.mask}, {ir::IntAttr("to", pb::kInt64)}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * col, Unsqueezed(lengths, {1}));
        ONNXKIT_ASSIGN_OR_RETURN(attend, Emit("Less", {keys, col}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, Emit("Cast", {a.mask}, {ir::IntAttr("to", pb::kFloat)}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * z, Scalar(0.0, pb::kFloat));
        ONNXKIT_ASSIGN_OR_RETURN(attend, Emit("Greater", {m, z}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * add, Emit("Where", {attend, zero, filter}));
      if (a.mask_rank == 3) {
        ONNXKIT_ASSIGN_OR_RETURN(add, Unsqueezed(add, {1}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(add, Unsqueezed(add, {1, 2}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Add", {scores, add}));
    }
    for (ir::Value* more : {a.bias, a.add}) {
      if (more == nullptr) continue;
      ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Add", {scores, more}));
    }
    if (a.causal) {
      // Key j is hidden from query i when j > i + (T - S).
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, RangeOf(a.q, 2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * keys, RangeOf(keyed, key_axis));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, DimScalar(keyed, key_axis));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, DimScalar(a.q, 2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * offset, Emit("Sub", {t, s}));
      ONNXKIT_ASSIGN_OR_RETURN(rows, Emit("Add", {rows, offset}));
      ONNXKIT_ASSIGN_OR_RETURN(rows, Unsqueezed(rows, {1}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * later, Emit("Greater", {keys, rows}));  // [S, T]
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * add, Emit("Where", {later, filter, zero}));
      ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Add", {scores, add}));
    }
    ir::Value* sinks = nullptr;
    if (a.sink != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(sinks, SinkColumn(a.q, a.sink, a.elem));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * probs, Probabilities(scores, sinks));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ctx, Emit("MatMul", {probs, a.v}));
    ONNXKIT_ASSIGN_OR_RETURN(ctx, Emit("Transpose", {ctx}, {ir::IntsAttr("perm", {0, 2, 1, 3})}));
    return Reshaped(ctx, {0, 0, -1});
  }

  // Attention's and MultiHeadAttention's masks into `a`: the key padding
  // mask of input `mask`, the attention bias of input `bias`,
  // unidirectional. Returns why not, or "".
  std::string Masks(Attend& a, int mask, int bias) const {
    a.causal = IntAttr("unidirectional", 0) != 0;
    a.bias = In(bias);
    if (In(mask) == nullptr) return std::string();
    std::optional<int64_t> rank = Rank(In(mask));
    if (!rank || *rank < 1 || *rank > 3) {
      return "only a key mask of [batch] lengths, [batch, total length] or [batch, length, total length] is "
             "supported";
    }
    a.mask = In(mask);
    a.mask_rank = *rank;
    return std::string();
  }

  // Attention: input [B, S, I] times weights [I, Q + K + V] (+ bias) gives
  // Q, K, V, then the shared attention core. past [2, B, N, P, H] goes
  // before K and V along the sequence, present is them stacked again.
  absl::StatusOr<std::string> Attention(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("input or weights is missing");
    if (In(6) != nullptr || IntAttr("past_present_share_buffer", 0) != 0) {
      return std::string("a past buffer shared with present is not supported");
    }
    if (IntAttr("do_rotary", 0) != 0) return std::string("do_rotary is not supported");
    if (Used(1) && In(4) == nullptr) return std::string("the present output needs the past input");
    if (opset_ < 11) return std::string("it needs ai.onnx opset 11");
    const int64_t heads = IntAttr("num_heads", 0);
    if (heads <= 0 || heads > 4096) return std::string("num_heads is not a positive count");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    std::vector<int64_t> sizes;
    if (std::optional<std::vector<int64_t>> q = node_->GetInts("qkv_hidden_sizes"); q && !q->empty()) {
      sizes = *q;
    } else if (int64_t w = DimOf(In(1), 1); Rank(In(1)) == 2 && w > 0) {
      sizes.assign(3, w / 3);
    } else {
      return std::string("the hidden sizes are unknown (weights of unknown shape, no qkv_hidden_sizes)");
    }
    if (sizes.size() != 3 || sizes[0] != sizes[1])
      return std::string("qkv_hidden_sizes is not [Q, K, V] with Q == K");
    for (int64_t v : sizes) {
      if (v <= 0 || v % heads != 0) return std::string("a hidden size does not divide into num_heads");
    }
    if (In(4) != nullptr && sizes[2] != sizes[0])
      return std::string("past state needs V's hidden size to be Q's");
    Attend a;
    a.elem = *elem;
    a.head_size = sizes[0] / heads;
    if (std::string why = Masks(a, 3, 5); !why.empty()) return why;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qkv, Emit("MatMul", {In(0), In(1)}));
    if (In(2) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(qkv, Emit("Add", {qkv, In(2)}));
    }
    std::vector<ir::Value*> parts;
    if (opset_ >= 13) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * split, Int64s(sizes));
      ONNXKIT_RETURN_IF_ERROR(Emit("Split", {qkv, split}, {ir::IntAttr("axis", -1)}, 3, &parts).status());
    } else {
      ONNXKIT_RETURN_IF_ERROR(
          Emit("Split", {qkv}, {ir::IntAttr("axis", 2), ir::IntsAttr("split", sizes)}, 3, &parts).status());
    }
    ONNXKIT_ASSIGN_OR_RETURN(a.q, Heads(parts[0], heads));
    if (In(4) == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(a.kt, Heads(parts[1], heads, true));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(a.k, Heads(parts[1], heads));
    }
    ONNXKIT_ASSIGN_OR_RETURN(a.v, Heads(parts[2], heads));
    if (In(4) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, Int64Scalar(0));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Int64Scalar(1));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pk, Emit("Gather", {In(4), zero}, {ir::IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pv, Emit("Gather", {In(4), one}, {ir::IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(a.k, Emit("Concat", {pk, a.k}, {ir::IntAttr("axis", 2)}));
      ONNXKIT_ASSIGN_OR_RETURN(a.v, Emit("Concat", {pv, a.v}, {ir::IntAttr("axis", 2)}));
      if (Used(1)) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k5, Unsqueezed(a.k, {0}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v5, Unsqueezed(a.v, {0}));
        ONNXKIT_ASSIGN_OR_RETURN(outs[1], Emit("Concat", {k5, v5}, {ir::IntAttr("axis", 0)}));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], AttendHeads(a));
    return std::string();
  }

  // MultiHeadAttention: Q, K, V already projected. query [B, S, D] with key
  // and value [B, L, D] / [B, L, Dv] (bias [D + D + Dv] added), or
  // [B, N, L, H] (a cross-attention cache, taken as it is); or query packed
  // QKV [B, S, N, 3, H]; or key packed KV [B, L, N, 2, H]. past_key and
  // past_value [B, N, P, H] go before K and V; present_key and
  // present_value are K and V with them.
  absl::StatusOr<std::string> MultiHeadAttention(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr) return std::string("query is missing");
    if (In(8) != nullptr || In(9) != nullptr) {
      return std::string(
          "past_sequence_length and cache_indirection (shared buffers, beam search) are not supported");
    }
    if (Used(3)) return std::string("the qk output is not supported");
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    const int64_t heads = IntAttr("num_heads", 0);
    if (heads <= 0 || heads > 4096) return std::string("num_heads is not a positive count");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    const std::optional<int64_t> qr = Rank(In(0)), kr = Rank(In(1)), vr = Rank(In(2));
    if ((In(1) != nullptr && !kr) || (In(2) != nullptr && !vr) || !qr)
      return std::string("an input's rank is unknown");
    if ((In(6) == nullptr) != (In(7) == nullptr)) return std::string("past_key and past_value go together");
    Attend a;
    a.elem = *elem;
    if (std::string why = Masks(a, 4, 5); !why.empty()) return why;
    const bool packed_qkv = *qr == 5 && In(1) == nullptr && In(2) == nullptr;
    const bool packed_kv = *qr == 3 && kr == 5 && In(2) == nullptr;
    const bool cached_kv = *qr == 3 && kr == 4 && vr == 4;
    const bool separate = *qr == 3 && kr == 3 && vr == 3;
    if (!packed_qkv && !packed_kv && !cached_kv && !separate) {
      return std::string("the query, key and value shapes are none of the forms it takes");
    }
    if (In(3) != nullptr && !separate) {
      return std::string("bias is supported with separate 3-D query, key and value only");
    }
    if (cached_kv && In(6) != nullptr)
      return std::string("past state with a [B, N, L, H] key is not supported");
    auto part = [&](ir::Value* packed, int64_t index) -> absl::StatusOr<ir::Value*> {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * i, Int64Scalar(index));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * g, Emit("Gather", {packed, i}, {ir::IntAttr("axis", 3)}));
      return Emit("Transpose", {g}, {ir::IntsAttr("perm", {0, 2, 1, 3})});
    };
    if (packed_qkv) {
      a.head_size = DimOf(In(0), 4);
      ONNXKIT_ASSIGN_OR_RETURN(a.q, part(In(0), 0));
      ONNXKIT_ASSIGN_OR_RETURN(a.k, part(In(0), 1));
      ONNXKIT_ASSIGN_OR_RETURN(a.v, part(In(0), 2));
    } else {
      const int64_t d = DimOf(In(0), 2);
      if (d > 0) {
        if (d % heads != 0) return std::string("the query's hidden size does not divide into num_heads");
        a.head_size = d / heads;
      }
      ir::Value* q = In(0);
      ir::Value* k = In(1);
      ir::Value* v = In(2);
      if (In(3) != nullptr) {
        const int64_t dk = DimOf(In(1), 2), dv = DimOf(In(2), 2);
        if (d <= 0 || dk <= 0 || dv <= 0) return std::string("bias needs the hidden sizes known");
        std::vector<ir::Value*> biases;
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * split, Int64s({d, dk, dv}));
        ONNXKIT_RETURN_IF_ERROR(Emit("Split", {In(3), split}, {ir::IntAttr("axis", 0)}, 3, &biases).status());
        ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Add", {q, biases[0]}));
        ONNXKIT_ASSIGN_OR_RETURN(k, Emit("Add", {k, biases[1]}));
        ONNXKIT_ASSIGN_OR_RETURN(v, Emit("Add", {v, biases[2]}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(a.q, Heads(q, heads));
      if (packed_kv) {
        ONNXKIT_ASSIGN_OR_RETURN(a.k, part(k, 0));
        ONNXKIT_ASSIGN_OR_RETURN(a.v, part(k, 1));
      } else if (cached_kv) {
        a.k = k;
        a.v = v;
      } else if (In(6) == nullptr && !Used(1)) {
        ONNXKIT_ASSIGN_OR_RETURN(a.kt, Heads(k, heads, true));
        ONNXKIT_ASSIGN_OR_RETURN(a.v, Heads(v, heads));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(a.k, Heads(k, heads));
        ONNXKIT_ASSIGN_OR_RETURN(a.v, Heads(v, heads));
      }
    }
    if (In(6) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(a.k, Emit("Concat", {In(6), a.k}, {ir::IntAttr("axis", 2)}));
      ONNXKIT_ASSIGN_OR_RETURN(a.v, Emit("Concat", {In(7), a.v}, {ir::IntAttr("axis", 2)}));
    }
    if (outs.size() > 1) outs[1] = a.k;
    if (outs.size() > 2) outs[2] = a.v;
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], AttendHeads(a));
    return std::string();
  }

  // Rotary embedding of 4-D `x` ([B, S, N, H] or [B, N, S, H]): its first
  // 2 * half values per head turn by cos and sin (broadcast against x's
  // halves; with a trailing 1 when `interleaved`: pairs), the rest pass
  // when `rest`.
  absl::StatusOr<ir::Value*> Rotate(ir::Value* x, ir::Value* cos, ir::Value* sin, int64_t half,
                                    bool interleaved, bool rest) {
    ir::Value* x1 = nullptr;
    ir::Value* x2 = nullptr;
    ir::Value* turned = nullptr;
    if (interleaved) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, SliceOf(x, 0, 2 * half, -1));
      ONNXKIT_ASSIGN_OR_RETURN(r, Reshaped(r, {0, 0, 0, half, 2}));
      ONNXKIT_ASSIGN_OR_RETURN(x1, SliceOf(r, 0, 1, -1));
      ONNXKIT_ASSIGN_OR_RETURN(x2, SliceOf(r, 1, 2, -1));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(x1, SliceOf(x, 0, half, -1));
      ONNXKIT_ASSIGN_OR_RETURN(x2, SliceOf(x, half, 2 * half, -1));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Emit("Mul", {x1, cos}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * b, Emit("Mul", {x2, sin}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y1, Emit("Sub", {a, b}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Emit("Mul", {x2, cos}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, Emit("Mul", {x1, sin}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y2, Emit("Add", {c, d}));
    ONNXKIT_ASSIGN_OR_RETURN(turned, Emit("Concat", {y1, y2}, {ir::IntAttr("axis", -1)}));
    if (interleaved) {
      ONNXKIT_ASSIGN_OR_RETURN(turned, Reshaped(turned, {0, 0, 0, 2 * half}));
    }
    if (!rest) return turned;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * tail, SliceOf(x, 2 * half, std::numeric_limits<int64_t>::max(), -1));
    return Emit("Concat", {turned, tail}, {ir::IntAttr("axis", -1)});
  }

  // GroupQueryAttention: query [B, S, N*H] with key and value
  // [B, S, Nkv*H] (or all three packed in query), each group of N / Nkv
  // query heads sharing a key and value head. Batch b's new tokens sit at
  // positions off_b .. off_b + S - 1, off_b = seqlens_k[b] + 1 - S (0 for
  // the first prompt: S > 1 and S == total_sequence_length); with
  // do_rotary, Q and K turn by those positions first. K and V are
  // past [B, Nkv, P, H] then the new ones; a query sees the past keys below
  // off_b and the new keys up to its own (within local_window_size).
  absl::StatusOr<std::string> GroupQueryAttention(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(5) == nullptr || In(6) == nullptr) {
      return std::string("query, seqlens_k and total_sequence_length are needed");
    }
    for (int i = 12; i < node_->num_inputs(); ++i) {
      if (In(i) != nullptr) return std::string("quantized caches' scales are not supported");
    }
    if (Used(3)) return std::string("the output_qk output is not supported");
    if (IntAttr("causal", 1) != 1) return std::string("causal 0 is not supported");
    const double softcap = FloatAttr("softcap", 0.0f);
    if (!(softcap >= 0.0) || std::isinf(softcap)) return std::string("softcap is not a finite value >= 0");
    if (IntAttr("sliding_window_cache", 0) != 0)
      return std::string("a sliding window cache is not supported");
    for (std::string_view q : {"k_quant_type", "v_quant_type"}) {
      std::optional<std::string> t = node_->GetString(q);
      if (t && !t->empty() && *t != "NONE") return std::string("quantized caches are not supported");
    }
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    const int64_t heads = IntAttr("num_heads", 0), kv_heads = IntAttr("kv_num_heads", 0);
    if (heads <= 0 || heads > 4096 || kv_heads <= 0 || heads % kv_heads != 0) {
      return std::string("num_heads is not a positive multiple of kv_num_heads");
    }
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    if (Rank(In(0)) != 3) return std::string("query is not 3-D");
    if ((In(1) == nullptr) != (In(2) == nullptr)) return std::string("key and value go together");
    if ((In(3) == nullptr) != (In(4) == nullptr)) return std::string("past_key and past_value go together");
    const bool packed = In(1) == nullptr;
    const int64_t d = DimOf(In(0), 2);
    const int64_t parts = packed ? heads + 2 * kv_heads : heads;
    if (d <= 0 || d % parts != 0)
      return std::string("the hidden size is unknown or does not divide into the heads");
    const int64_t h = d / parts;
    const bool rotary = IntAttr("do_rotary", 0) != 0;
    int64_t half = 0;
    if (rotary) {
      if (In(7) == nullptr || In(8) == nullptr) return std::string("do_rotary needs cos_cache and sin_cache");
      half = DimOf(In(7), 1);
      if (Rank(In(7)) != 2 || half <= 0 || 2 * half > h) {
        return std::string("cos_cache is not [length, rotary width / 2] of a known width within the head");
      }
    }
    if (In(9) != nullptr &&
        (Rank(In(9)).value_or(2) != 2 || Elem(In(9)).value_or(pb::kInt64) != pb::kInt64)) {
      return std::string("position_ids is not int64 [batch, length]");
    }
    // A head's sink logit (head_sink [N]; 0 for smooth_softmax) counts in
    // its softmax's denominator.
    ir::Value* sink = nullptr;
    if (In(11) != nullptr) {
      const int64_t n = DimOf(In(11), 0);
      if (Rank(In(11)) != 1 || (n >= 0 && n != heads) || Elem(In(11)) != *elem) {
        return std::string("head_sink is not [num_heads] of the query's type");
      }
      ONNXKIT_ASSIGN_OR_RETURN(sink, Reshaped(In(11), {1, heads, 1, 1}));
    } else if (IntAttr("smooth_softmax", 0) != 0) {
      ONNXKIT_ASSIGN_OR_RETURN(sink, Scalar(0.0, *elem));
    }
    const int64_t window = IntAttr("local_window_size", -1);
    ir::Value* q = In(0);
    ir::Value* k = In(1);
    ir::Value* v = In(2);
    if (packed) {
      std::vector<ir::Value*> qkv;
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * split, Int64s({heads * h, kv_heads * h, kv_heads * h}));
      ONNXKIT_RETURN_IF_ERROR(Emit("Split", {In(0), split}, {ir::IntAttr("axis", -1)}, 3, &qkv).status());
      q = qkv[0];
      k = qkv[1];
      v = qkv[2];
    }
    // Where each batch's new tokens start: off [B, 1].
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, DimScalar(In(0), 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lens, Emit("Cast", {In(5)}, {ir::IntAttr("to", pb::kInt64)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * total, Emit("Cast", {In(6)}, {ir::IntAttr("to", pb::kInt64)}));
    ONNXKIT_ASSIGN_OR_RETURN(total, Reshaped(total, {-1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Int64Scalar(1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, Int64Scalar(0));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ones, Emit("Add", {lens, one}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * off, Emit("Sub", {ones, s}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * many, Emit("Greater", {s, one}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * whole, Emit("Equal", {s, total}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * first, Emit("And", {many, whole}));
    ONNXKIT_ASSIGN_OR_RETURN(off, Emit("Where", {first, zero, off}));
    ONNXKIT_ASSIGN_OR_RETURN(off, Unsqueezed(off, {1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * steps, RangeOf(In(0), 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qpos, Emit("Add", {off, steps}));  // [B, S]
    ONNXKIT_ASSIGN_OR_RETURN(q, Reshaped(q, {0, 0, heads, h}));
    ONNXKIT_ASSIGN_OR_RETURN(k, Reshaped(k, {0, 0, kv_heads, h}));
    if (rotary) {
      const bool interleaved = IntAttr("rotary_interleaved", 0) != 0;
      std::vector<int64_t> axes = {2};
      if (interleaved) axes.push_back(4);
      // Turned by position_ids when given: [B, S], or for the first prompt
      // its first value and the steps after it (as ONNX Runtime reads them).
      ir::Value* turn = qpos;
      if (In(9) != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * flat, Reshaped(In(9), {-1}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * start, SliceOf(flat, 0, 1, 0));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * from_start, Emit("Add", {start, steps}));
        ONNXKIT_ASSIGN_OR_RETURN(from_start, Unsqueezed(from_start, {0}));  // [1, S]
        ONNXKIT_ASSIGN_OR_RETURN(turn, Emit("Where", {first, from_start, In(9)}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cos, Emit("Gather", {In(7), turn}, {ir::IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sin, Emit("Gather", {In(8), turn}, {ir::IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(cos, Unsqueezed(cos, axes));
      ONNXKIT_ASSIGN_OR_RETURN(sin, Unsqueezed(sin, axes));
      ONNXKIT_ASSIGN_OR_RETURN(q, Rotate(q, cos, sin, half, interleaved, 2 * half != h));
      ONNXKIT_ASSIGN_OR_RETURN(k, Rotate(k, cos, sin, half, interleaved, 2 * half != h));
    }
    Attend a;
    a.elem = *elem;
    a.head_size = h;
    a.bias = In(10);
    a.softcap = softcap;
    a.sink = sink;
    ONNXKIT_ASSIGN_OR_RETURN(a.q, Emit("Transpose", {q}, {ir::IntsAttr("perm", {0, 2, 1, 3})}));
    ONNXKIT_ASSIGN_OR_RETURN(k, Emit("Transpose", {k}, {ir::IntsAttr("perm", {0, 2, 1, 3})}));
    ONNXKIT_ASSIGN_OR_RETURN(v, Heads(v, kv_heads));
    // The present cache as ONNX Runtime lays it out: row t holds position
    // t; past rows below off_b, then the new ones, zeros after; its length
    // max(total_sequence_length, P).
    ir::Value* past_len = zero;
    if (In(3) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(past_len, DimScalar(In(3), 2));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * length, Emit("Max", {total, past_len}));
    ONNXKIT_ASSIGN_OR_RETURN(length, Reshaped(length, {}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, Emit("Range", {zero, length, one}));  // [T]
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * below_off, Emit("Less", {rows, off}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * below_p, Emit("Less", {rows, past_len}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * from_past, Emit("And", {below_off, below_p}));  // [B, T]
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * end, Emit("Add", {off, s}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * before_end, Emit("Less", {rows, end}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * after_off, Emit("Not", {below_off}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * from_new, Emit("And", {after_off, before_end}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * new_row, Emit("Sub", {rows, off}));
    ONNXKIT_ASSIGN_OR_RETURN(new_row, Emit("Add", {new_row, past_len}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero_row, Emit("Add", {past_len, s}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pick, Emit("Where", {from_new, new_row, zero_row}));
    ONNXKIT_ASSIGN_OR_RETURN(pick, Emit("Where", {from_past, rows, pick}));
    ONNXKIT_ASSIGN_OR_RETURN(pick, Unsqueezed(pick, {1, 3}));  // [B, 1, T, 1]
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * heads_1, Int64s({1, kv_heads, 1, 1}));
    ONNXKIT_ASSIGN_OR_RETURN(pick, Emit("Expand", {pick, heads_1}));  // [B, Nkv, T, 1]
    auto lay_out = [&](ir::Value* past, ir::Value* fresh) -> absl::StatusOr<ir::Value*> {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one_row, SliceOf(fresh, 0, 1, 2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Emit("Shape", {one_row}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zeros, Emit("ConstantOfShape", {shape}));
      if (*elem != pb::kFloat) {
        ONNXKIT_ASSIGN_OR_RETURN(zeros, Emit("Cast", {zeros}, {ir::IntAttr("to", *elem)}));
      }
      std::vector<ir::Value*> all;
      if (past != nullptr) all.push_back(past);
      all.push_back(fresh);
      all.push_back(zeros);
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Emit("Concat", all, {ir::IntAttr("axis", 2)}));
      return Emit("GatherND", {c, pick}, {ir::IntAttr("batch_dims", 2)});
    };
    ONNXKIT_ASSIGN_OR_RETURN(k, lay_out(In(3), k));
    ONNXKIT_ASSIGN_OR_RETURN(v, lay_out(In(4), v));
    if (outs.size() > 1) outs[1] = k;
    if (outs.size() > 2) outs[2] = v;
    // An attention bias of N heads, one head or none lets each group of
    // query heads meet its key and value head without copying them.
    const int64_t bias_heads = In(10) != nullptr ? DimOf(In(10), 1) : 1;
    const bool grouped = (bias_heads == 1 || bias_heads == heads) && Rank(In(10)).value_or(4) == 4;
    if (heads != kv_heads && !grouped) {
      // Each key and value head repeated for its group of query heads.
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * reps, Int64s({1, 1, heads / kv_heads, 1, 1}));
      ONNXKIT_ASSIGN_OR_RETURN(k, Unsqueezed(k, {2}));
      ONNXKIT_ASSIGN_OR_RETURN(k, Emit("Tile", {k, reps}));
      ONNXKIT_ASSIGN_OR_RETURN(k, Reshaped(k, {0, heads, -1, h}));
      ONNXKIT_ASSIGN_OR_RETURN(v, Unsqueezed(v, {2}));
      ONNXKIT_ASSIGN_OR_RETURN(v, Emit("Tile", {v, reps}));
      ONNXKIT_ASSIGN_OR_RETURN(v, Reshaped(v, {0, heads, -1, h}));
    }
    a.k = k;
    a.v = v;
    // Query i of batch b (at qpos) sees rows up to its position, none past
    // the batch's length (the first prompt's padding).
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kpos3, Unsqueezed(rows, {0, 1}));  // [1, 1, T]
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qpos3, Unsqueezed(qpos, {2}));     // [B, S, 1]
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hide, Emit("Greater", {kpos3, qpos3}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * col, Unsqueezed(lens, {1, 2}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * beyond, Emit("Greater", {kpos3, col}));
    ONNXKIT_ASSIGN_OR_RETURN(hide, Emit("Or", {hide, beyond}));
    if (window > 0) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * back, Emit("Sub", {qpos3, kpos3}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, Int64Scalar(window - 1));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * far, Emit("Greater", {back, w}));
      ONNXKIT_ASSIGN_OR_RETURN(hide, Emit("Or", {hide, far}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * none, Scalar(0.0, *elem));
    ONNXKIT_ASSIGN_OR_RETURN(
        ir::Value * lowest,
        Scalar(*elem == pb::kFloat16 ? -65504.0 : std::numeric_limits<float>::lowest(), *elem));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * add, Emit("Where", {hide, lowest, none}));
    ONNXKIT_ASSIGN_OR_RETURN(a.add, Unsqueezed(add, {1}));  // [B, 1, S, T]
    if (!grouped) {
      ONNXKIT_ASSIGN_OR_RETURN(outs[0], AttendHeads(a));
      return std::string();
    }
    // Query heads as [B, Nkv, G*S, H]; scores from K [B, Nkv, T, H] times
    // their transpose (K is read as it is), then transposed back.
    const int64_t group = heads / kv_heads;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qg, Reshaped(a.q, {0, kv_heads, -1, h}));
    ONNXKIT_ASSIGN_OR_RETURN(qg, Emit("Transpose", {qg}, {ir::IntsAttr("perm", {0, 1, 3, 2})}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scores, Emit("MatMul", {k, qg}));
    ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Transpose", {scores}, {ir::IntsAttr("perm", {0, 1, 3, 2})}));
    const double scale =
        FloatAttr("scale", 0.0f) != 0.0f ? FloatAttr("scale", 0.0f) : 1.0 / std::sqrt(static_cast<double>(h));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sc, Scalar(scale, *elem));
    ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Mul", {scores, sc}));
    if (softcap > 0.0) {
      ONNXKIT_ASSIGN_OR_RETURN(scores, Capped(scores, softcap, *elem));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * reps, Int64s({1, 1, group, 1}));
    if (In(10) != nullptr) {
      ir::Value* bias = In(10);
      if (bias_heads == heads) {
        ONNXKIT_ASSIGN_OR_RETURN(bias, Reshaped(bias, {0, kv_heads, -1, 0}));
      } else if (group > 1) {
        ONNXKIT_ASSIGN_OR_RETURN(bias, Emit("Tile", {bias, reps}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Add", {scores, bias}));
    }
    ir::Value* mask = a.add;
    if (group > 1) {
      ONNXKIT_ASSIGN_OR_RETURN(mask, Emit("Tile", {mask, reps}));  // [B, 1, G*S, T]
    }
    ONNXKIT_ASSIGN_OR_RETURN(scores, Emit("Add", {scores, mask}));
    ir::Value* sinks = nullptr;
    if (sink != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(sinks, SinkColumn(a.q, sink, *elem));  // [B, N, S, 1]
      ONNXKIT_ASSIGN_OR_RETURN(sinks, Reshaped(sinks, {0, kv_heads, -1, 1}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * probs, Probabilities(scores, sinks));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ctx, Emit("MatMul", {probs, v}));
    ONNXKIT_ASSIGN_OR_RETURN(ctx, Reshaped(ctx, {0, heads, -1, h}));
    ONNXKIT_ASSIGN_OR_RETURN(ctx, Emit("Transpose", {ctx}, {ir::IntsAttr("perm", {0, 2, 1, 3})}));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Reshaped(ctx, {0, 0, -1}));
    return std::string();
  }

  // RotaryEmbedding: per head, the first rotary_embedding_dim values (all
  // when 0) turn by the angle of their position: with c, s = cos_cache and
  // sin_cache at the position, halves x1, x2 (pairs when interleaved) become
  // x1 c - x2 s, x2 c + x1 s; the rest pass. input [B, S, N*H] or
  // [B, N, S, H]; position_ids [B, S], or [1]: the first position.
  absl::StatusOr<std::string> RotaryEmbedding(std::vector<ir::Value*>& outs) {
    for (int i = 0; i < 4; ++i) {
      if (In(i) == nullptr) return std::string("input, position_ids, cos_cache and sin_cache are all needed");
    }
    if (IntAttr("is_packed_batching", 0) != 0) return std::string("packed batching is not supported");
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    const std::optional<int64_t> rank = Rank(In(0)), prank = Rank(In(1));
    if (!rank || (*rank != 3 && *rank != 4)) return std::string("input is not 3-D or 4-D");
    if (!prank || (*prank != 1 && *prank != 2))
      return std::string("position_ids is not [1] or [batch, length]");
    if (Rank(In(2)) != 2 || Rank(In(3)) != 2) return std::string("cos_cache and sin_cache are not 2-D");
    const int64_t width = DimOf(In(2), 1);
    const int64_t rotary = IntAttr("rotary_embedding_dim", 0);
    const int64_t heads = IntAttr("num_heads", 0);
    if (rotary < 0 || rotary % 2 != 0) return std::string("rotary_embedding_dim is not an even count");
    if (heads < 0 || heads > 4096) return std::string("num_heads is out of range");
    if (rotary > 0 && *rank == 3 && heads == 0) return std::string("rotary_embedding_dim needs num_heads");
    const int64_t half = rotary > 0 ? rotary / 2 : width;
    if (half <= 0) return std::string("the rotary width is unknown (cos_cache of unknown shape)");
    if (width > 0 && width != half) return std::string("cos_cache's width is not rotary_embedding_dim / 2");
    const bool interleaved = IntAttr("interleaved", 0) != 0;
    // x as [B, S, N, H] or [B, N, S, H]; `seq` is S's axis.
    ir::Value* x = In(0);
    int64_t seq = 2;
    if (*rank == 3) {
      seq = 1;
      if (heads > 0) {
        ONNXKIT_ASSIGN_OR_RETURN(x, Reshaped(x, {0, 0, heads, -1}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(x, Reshaped(x, {0, 0, -1, 2 * half}));
      }
    }
    ir::Value* positions = In(1);
    if (*prank == 1) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * steps, RangeOf(x, seq));
      ONNXKIT_ASSIGN_OR_RETURN(positions, Emit("Add", {steps, In(1)}));  // [S]
    }
    // cos, sin: [S, half] or [B, S, half], then a 1 for the heads' axis.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cos, Emit("Gather", {In(2), positions}, {ir::IntAttr("axis", 0)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sin, Emit("Gather", {In(3), positions}, {ir::IntAttr("axis", 0)}));
    std::vector<int64_t> axes;
    if (*prank == 1) {
      if (*rank == 3) axes = {1};  // [S, 1, half] against [B, S, N, H]
    } else {
      axes = {*rank == 3 ? int64_t{2} : int64_t{1}};
    }
    if (interleaved) axes.push_back(*prank == 1 ? (*rank == 3 ? 3 : 2) : 4);  // pairs: [..., half, 1]
    if (!axes.empty()) {
      ONNXKIT_ASSIGN_OR_RETURN(cos, Unsqueezed(cos, axes));
      ONNXKIT_ASSIGN_OR_RETURN(sin, Unsqueezed(sin, axes));
    }
    int64_t head = DimOf(x, 3);
    if (*rank == 3 && heads > 0 && DimOf(In(0), 2) > 0) head = DimOf(In(0), 2) / heads;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y,
                             Rotate(x, cos, sin, half, interleaved, rotary > 0 && head != 2 * half));
    if (*rank == 3) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Reshaped(y, {0, 0, -1}));
    }
    outs[0] = y;
    return std::string();
  }

  // EmbedLayerNormalization: word, position (0 .. S-1, or position_ids)
  // and segment embeddings summed, then layer-normalized; mask_index is the
  // count of mask values per batch, embedding_sum the sum.
  absl::StatusOr<std::string> EmbedLayerNorm(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(2) == nullptr || In(3) == nullptr || In(5) == nullptr || In(6) == nullptr) {
      return std::string("input_ids, an embedding, gamma or beta is missing");
    }
    if (opset_ < 11) return std::string("it needs ai.onnx opset 11");
    if ((In(1) == nullptr) != (In(4) == nullptr))
      return std::string("segment_ids and segment_embedding go together");
    if (Used(1) && In(7) == nullptr) return std::string("mask_index without a mask is not supported");
    std::optional<int32_t> elem = Elem(In(2));
    if (!elem || !IsFloat(*elem)) return std::string("the element type is unknown or not a float type");
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sum, Emit("Gather", {In(2), In(0)}, {ir::IntAttr("axis", 0)}));
    ir::Value* positions = In(8);
    if (positions == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(positions, Positions(In(0)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pos, Emit("Gather", {In(3), positions}, {ir::IntAttr("axis", 0)}));
    ONNXKIT_ASSIGN_OR_RETURN(sum, Emit("Add", {sum, pos}));
    if (In(1) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * seg, Emit("Gather", {In(4), In(1)}, {ir::IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(sum, Emit("Add", {sum, seg}));
    }
    ir::Value* y = nullptr;
    ONNXKIT_ASSIGN_OR_RETURN(std::string why, Normalize(sum, {-1}, FloatAttr("epsilon", 1e-12f), false, *elem,
                                                        true, &y, nullptr, nullptr));
    if (!why.empty()) return why;
    ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Mul", {y, In(5)}));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit("Add", {y, In(6)}));
    if (Used(1)) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, Emit("Cast", {In(7)}, {ir::IntAttr("to", pb::kInt32)}));
      ir::Value* count = nullptr;
      if (opset_ >= 13) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axes, Int64s({1}));
        ONNXKIT_ASSIGN_OR_RETURN(count, Emit("ReduceSum", {m, axes}, {ir::IntAttr("keepdims", 0)}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(
            count, Emit("ReduceSum", {m}, {ir::IntsAttr("axes", {1}), ir::IntAttr("keepdims", 0)}));
      }
      outs[1] = count;
    }
    if (outs.size() > 2) outs[2] = sum;
    return std::string();
  }

  absl::StatusOr<std::string> QuantizeOps(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr) return std::string("x or its scale is missing");
    std::vector<pb::AttributeProto> attrs;
    if (const ir::Attribute* a = node_->FindAttribute("axis")) {
      if (opset_ < 13) return std::string("axis needs ai.onnx opset 13");
      attrs.push_back(a->proto);
    }
    std::vector<ir::Value*> inputs = {In(0), In(1)};
    if (In(2) != nullptr) inputs.push_back(In(2));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit(node_->op_type(), inputs, attrs));
    return std::string();
  }

  // DequantizeLinear of a (value, scale, zero point) triple.
  absl::StatusOr<ir::Value*> Dq(ir::Value* x, ir::Value* scale, ir::Value* zp) {
    std::vector<ir::Value*> inputs = {x, scale};
    if (zp != nullptr) inputs.push_back(zp);
    return Emit("DequantizeLinear", inputs);
  }

  // QuantizeLinear to the type of `like` (the op's quantized input).
  absl::StatusOr<ir::Value*> Q(ir::Value* y, ir::Value* scale, ir::Value* zp, int32_t elem) {
    if (zp == nullptr && elem != pb::kUint8) {
      ONNXKIT_ASSIGN_OR_RETURN(zp, ZeroPoint(elem));
    }
    std::vector<ir::Value*> inputs = {y, scale};
    if (zp != nullptr) inputs.push_back(zp);
    return Emit("QuantizeLinear", inputs);
  }

  // MatMulIntegerToFloat: A, B (8-bit), a_scale, b_scale (one value or one
  // per column of B), a_zero_point, b_zero_point, bias;
  // Y = (A - a_zero_point)(B - b_zero_point) * a_scale * b_scale + bias, as
  // MatMulInteger, Cast to float, Mul by a_scale * b_scale, Add of bias.
  // DynamicQuantizeMatMul: A float (quantized to uint8 by
  // DynamicQuantizeLinear, which gives a_scale and a_zero_point), B,
  // b_scale, b_zero_point, bias; the same after that.
  absl::StatusOr<std::string> IntegerMatMul(std::vector<ir::Value*>& outs, bool dynamic) {
    ir::Value *a = In(0), *b = In(1), *a_scale = nullptr, *a_zp = nullptr, *b_scale = nullptr,
              *b_zp = nullptr, *bias = nullptr;
    if (dynamic) {
      b_scale = In(2);
      b_zp = In(3);
      bias = In(4);
      if (a == nullptr || b == nullptr || b_scale == nullptr)
        return std::string("A, B or b_scale is missing");
      if (opset_ < 11) return std::string("it needs ai.onnx opset 11 (DynamicQuantizeLinear)");
      std::vector<ir::Value*> q;
      ONNXKIT_RETURN_IF_ERROR(Emit("DynamicQuantizeLinear", {a}, {}, 3, &q).status());
      a = q[0];
      a_scale = q[1];
      a_zp = q[2];
    } else {
      a_scale = In(2);
      b_scale = In(3);
      a_zp = In(4);
      b_zp = In(5);
      bias = In(6);
      if (a == nullptr || b == nullptr || a_scale == nullptr || b_scale == nullptr) {
        return std::string("A, B or a scale is missing");
      }
      if (opset_ < 10) return std::string("it needs ai.onnx opset 10 (MatMulInteger)");
    }
    std::vector<ir::Value*> mm = {a, b};
    if (a_zp != nullptr || b_zp != nullptr) mm.push_back(a_zp);
    if (b_zp != nullptr) mm.push_back(b_zp);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * acc, Emit("MatMulInteger", mm));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * f, Emit("Cast", {acc}, {ir::IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scale, Emit("Mul", {a_scale, b_scale}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("Mul", {f, scale}));
    if (bias != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, bias}));
    }
    outs[0] = y;
    return std::string();
  }

  // QMoE's expert weights: uint8 codes [E, out, in * bits / 8] as
  // (code - 2^(bits-1)) * scale of type `elem`, scales [E, out] or
  // [E, out, in / block].
  absl::StatusOr<ir::Value*> ExpertWeights(ir::Value* codes, ir::Value* scales, int64_t bits, int64_t block,
                                           int32_t elem) {
    ir::Value* q = codes;
    if (bits == 4) {
      ONNXKIT_ASSIGN_OR_RETURN(q, Nibbles(codes, {0, 0, -1}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Cast", {q}, {ir::IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, Scalar(bits == 4 ? 8.0 : 128.0, pb::kFloat));
    ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Sub", {q, zero}));
    ir::Value* s = scales;
    if (elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(s, Emit("Cast", {s}, {ir::IntAttr("to", pb::kFloat)}));
    }
    if (block > 0) {
      ONNXKIT_ASSIGN_OR_RETURN(q, Reshaped(q, {0, 0, -1, block}));
      ONNXKIT_ASSIGN_OR_RETURN(s, Unsqueezed(s, {3}));
      ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Mul", {q, s}));
      ONNXKIT_ASSIGN_OR_RETURN(q, Reshaped(q, {0, 0, -1}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(s, Unsqueezed(s, {2}));
      ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Mul", {q, s}));
    }
    if (elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(q, Emit("Cast", {q}, {ir::IntAttr("to", elem)}));
    }
    return q;
  }

  // The 4-bit codes of uint8 `bytes` [..., n] as [..., 2n] (low nibble first).
  absl::StatusOr<ir::Value*> Nibbles(ir::Value* bytes, const std::vector<int64_t>& shape) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * four, ConstantOf(Uint8Scalar(4), "four"));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sixteen, ConstantOf(Uint8Scalar(16), "sixteen"));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * high,
                             Emit("BitShift", {bytes, four}, {ir::StringAttr("direction", "RIGHT")}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * low, Emit("Mod", {bytes, sixteen}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis, Int64s({-1}));
    ONNXKIT_ASSIGN_OR_RETURN(low, Emit("Unsqueeze", {low, axis}));
    ONNXKIT_ASSIGN_OR_RETURN(high, Emit("Unsqueeze", {high, axis}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * both, Emit("Concat", {low, high}, {ir::IntAttr("axis", -1)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * to, Int64s(shape));
    return Emit("Reshape", {both, to});
  }

  static pb::TensorProto Uint8Scalar(int v) {
    pb::TensorProto t;
    t.data_type = pb::kUint8;
    t.int32_data.push_back(v);
    return t;
  }

  // MatMulNBits: Y = A x dequantize(B)^T (+ bias), B [N, k_blocks, blob]
  // of 4- or 8-bit codes packed low first along K, dequantized per block of
  // block_size as (code - zero_point) * scale; scales [N * k_blocks] or
  // [N, k_blocks]; zero points packed like B, or of A's type, or absent
  // (2^(bits-1)). Written as the unpacking, Sub, Mul, Transpose and MatMul,
  // which compute the float weights from constants once per session.
  absl::StatusOr<std::string> MatMulNBits(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr || In(2) == nullptr)
      return std::string("A, B or scales is missing");
    if (In(4) != nullptr) return std::string("g_idx is not supported");
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    const int64_t k = IntAttr("K", 0), n = IntAttr("N", 0), bits = IntAttr("bits", 4),
                  block = IntAttr("block_size", 0);
    if (bits != 4 && bits != 8) return std::string("only 4- and 8-bit codes are supported");
    if (k <= 0 || n <= 0 || k > (int64_t{1} << 31) || n > (int64_t{1} << 31))
      return std::string("K or N is not a positive size");
    if (block < 16 || block > (int64_t{1} << 20) || (block & (block - 1)) != 0) {
      return std::string("block_size is not a power of two of at least 16");
    }
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem || (*elem != pb::kFloat && *elem != pb::kFloat16))
      return std::string("A's element type is unknown or not float/float16");
    if (Elem(In(1)).value_or(0) != pb::kUint8) return std::string("B is not uint8");
    const int64_t blocks = (k + block - 1) / block;
    // Codes [N, blocks, block] as float.
    ir::Value* codes = In(1);
    if (bits == 4) {
      ONNXKIT_ASSIGN_OR_RETURN(codes, Nibbles(codes, {n, blocks, block}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Int64s({n, blocks, block}));
      ONNXKIT_ASSIGN_OR_RETURN(codes, Emit("Reshape", {codes, shape}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, Emit("Cast", {codes}, {ir::IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * per_block, Int64s({n, blocks, 1}));
    ir::Value* zp = In(3);
    if (zp == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(zp, Scalar(bits == 4 ? 8.0 : 128.0, pb::kFloat));
    } else if (Elem(zp).value_or(0) == pb::kUint8) {
      const int64_t per_row = (blocks * bits + 7) / 8;
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, Int64s({n, per_row}));
      ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Reshape", {zp, rows}));
      if (bits == 4) {
        ONNXKIT_ASSIGN_OR_RETURN(zp, Nibbles(zp, {n, 2 * per_row}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * start, Int64s({0}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * end, Int64s({blocks}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis, Int64s({1}));
        ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Slice", {zp, start, end, axis}));
      }
      ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Reshape", {zp, per_block}));
      ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Cast", {zp}, {ir::IntAttr("to", pb::kFloat)}));
    } else if (Elem(zp).value_or(0) == *elem) {
      ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Reshape", {zp, per_block}));
      if (*elem != pb::kFloat) {
        ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Cast", {zp}, {ir::IntAttr("to", pb::kFloat)}));
      }
    } else {
      return std::string("zero_points are neither uint8 nor of A's type");
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scales, Emit("Reshape", {In(2), per_block}));
    if (*elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(scales, Emit("Cast", {scales}, {ir::IntAttr("to", pb::kFloat)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Sub", {w, zp}));
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Mul", {w, scales}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * flat, Int64s({n, blocks * block}));
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Reshape", {w, flat}));
    if (blocks * block != k) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * start, Int64s({0}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * end, Int64s({k}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * axis, Int64s({1}));
      ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Slice", {w, start, end, axis}));
    }
    if (*elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Cast", {w}, {ir::IntAttr("to", *elem)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Transpose", {w}, {ir::IntsAttr("perm", {1, 0})}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("MatMul", {In(0), w}));
    if (*elem == pb::kFloat) Packed(*y->producer(), In(1), In(2), In(3), bits, k, n);
    if (In(5) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Add", {y, In(5)}));
    }
    outs[0] = y;
    return std::string();
  }

  // GatherBlockQuantized of uint8 data (4-bit codes two a byte, low nibble
  // first, or 8-bit codes) quantized in blocks along the last axis of a
  // [rows, K] table, gathered along axis 0: the table dequantized,
  // (code - zero_point) * scale per block, then Gather.
  absl::StatusOr<std::string> GatherBlockQuantized(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr || In(2) == nullptr)
      return std::string("data, indices or scales is missing");
    if (opset_ < 13) return std::string("it needs ai.onnx opset 13");
    if (Elem(In(0)).value_or(0) != pb::kUint8) return std::string("only uint8 data is supported");
    if (Rank(In(0)) != 2 || Rank(In(2)) != 2) return std::string("data and scales are not 2-D");
    const int64_t bits = IntAttr("bits", 4), block = IntAttr("block_size", 128);
    const int64_t gather_axis = IntAttr("gather_axis", 0), quantize_axis = IntAttr("quantize_axis", 1);
    if (bits != 4 && bits != 8) return std::string("only 4- and 8-bit codes are supported");
    if (gather_axis != 0 || (quantize_axis != 1 && quantize_axis != -1)) {
      return std::string("only gathering rows of a table quantized along its last axis is supported");
    }
    if (block < 16 || block > (int64_t{1} << 20) || (block & (block - 1)) != 0) {
      return std::string("block_size is not a power of two of at least 16");
    }
    std::optional<int32_t> elem = Elem(In(2));
    if (!elem || !IsFloat(*elem))
      return std::string("the scales' element type is unknown or not a float type");
    const int64_t width = DimOf(In(0), 1);
    if (width <= 0 || width > (int64_t{1} << 31)) return std::string("the table's width is unknown");
    const int64_t k = bits == 4 ? 2 * width : width;
    if (k % block != 0) return std::string("the table's width is not a whole number of blocks");
    const int64_t blocks = k / block;
    ir::Value* codes = In(0);
    if (bits == 4) {
      ONNXKIT_ASSIGN_OR_RETURN(codes, Nibbles(codes, {0, blocks, block}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(codes, Reshaped(codes, {0, blocks, block}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, Emit("Cast", {codes}, {ir::IntAttr("to", pb::kFloat)}));
    ir::Value* zp = In(3);
    if (zp == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(zp, Scalar(bits == 4 ? 8.0 : 128.0, pb::kFloat));
    } else {
      if (Elem(zp).value_or(0) != pb::kUint8) return std::string("zero_points are not uint8");
      if (bits == 4) {
        const int64_t per_row = (blocks + 1) / 2;
        ONNXKIT_ASSIGN_OR_RETURN(zp, Reshaped(zp, {-1, per_row}));
        ONNXKIT_ASSIGN_OR_RETURN(zp, Nibbles(zp, {0, 2 * per_row}));
        ONNXKIT_ASSIGN_OR_RETURN(zp, SliceOf(zp, 0, blocks, 1));
      }
      ONNXKIT_ASSIGN_OR_RETURN(zp, Reshaped(zp, {-1, blocks, 1}));
      ONNXKIT_ASSIGN_OR_RETURN(zp, Emit("Cast", {zp}, {ir::IntAttr("to", pb::kFloat)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scales, Reshaped(In(2), {-1, blocks, 1}));
    if (*elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(scales, Emit("Cast", {scales}, {ir::IntAttr("to", pb::kFloat)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Sub", {w, zp}));
    ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Mul", {w, scales}));
    ONNXKIT_ASSIGN_OR_RETURN(w, Reshaped(w, {0, k}));
    if (*elem != pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(w, Emit("Cast", {w}, {ir::IntAttr("to", *elem)}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit("Gather", {w, In(1)}, {ir::IntAttr("axis", 0)}));
    // Scales of another shape than [rows, blocks] are the reference's to refuse.
    const pb::TensorProto* scale_tensor = In(2)->initializer();
    if (*elem == pb::kFloat && scale_tensor != nullptr && scale_tensor->dims.size() == 2 &&
        scale_tensor->dims[1] == blocks) {
      Packed(*outs[0]->producer(), In(0), In(2), In(3), bits, k, 0);
    }
    return std::string();
  }

  // Records `node` (the MatMul of N columns `n`, or with n 0 the Gather,
  // written for packed weights) in packed_ when the codes, float scales and
  // uint8 zero points (or none) are initializers.
  void Packed(const ir::Node& node, const ir::Value* codes, const ir::Value* scales, const ir::Value* zeros,
              int64_t bits, int64_t k, int64_t n) {
    auto constant = [](const ir::Value* v) { return v != nullptr && v->initializer() != nullptr; };
    if (!constant(codes) || !constant(scales) || scales->initializer()->data_type != pb::kFloat ||
        (zeros != nullptr && (!constant(zeros) || zeros->initializer()->data_type != pb::kUint8))) {
      return;
    }
    pending_ = ContribLowering::PackedWeights{graph_,
                                              node.name(),
                                              codes->name(),
                                              scales->name(),
                                              zeros != nullptr ? zeros->name() : std::string(),
                                              static_cast<int>(bits),
                                              k,
                                              n == 0,
                                              n};
  }

  // QGemm: A, a_scale, a_zero_point, B, b_scale (a scalar or one per output
  // column), b_zero_point, C (int32 at scale a_scale * b_scale), y_scale,
  // y_zero_point; Y = alpha * (A'B' + C). Dequantized Gemm, quantized again
  // when y_scale is given (else the output is float).
  absl::StatusOr<std::string> QGemm(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr || In(3) == nullptr || In(4) == nullptr) {
      return std::string("A, B or a scale is missing");
    }
    if (opset_ < 10) return std::string("it needs ai.onnx opset 10");
    std::optional<int64_t> b_scale_rank = Rank(In(4));
    if (!b_scale_rank || *b_scale_rank > 1) return std::string("the rank of b_scale is unknown or above 1");
    const bool per_column = *b_scale_rank == 1;
    if (per_column && opset_ < 13) return std::string("a per-column b_scale needs ai.onnx opset 13");
    const bool trans_b = IntAttr("transB", 0) != 0;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Dq(In(0), In(1), In(2)));
    std::vector<ir::Value*> b_inputs = {In(3), In(4)};
    if (In(5) != nullptr) b_inputs.push_back(In(5));
    std::vector<pb::AttributeProto> b_attrs;
    if (per_column) b_attrs.push_back(ir::IntAttr("axis", trans_b ? 0 : 1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * b, Emit("DequantizeLinear", b_inputs, b_attrs));
    // alpha scales the bias too: Y = alpha * (A'B' + C).
    const float alpha = FloatAttr("alpha", 1.0f);
    std::vector<ir::Value*> gemm = {a, b};
    if (In(6) != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Emit("Cast", {In(6)}, {ir::IntAttr("to", pb::kFloat)}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scale, Emit("Mul", {In(1), In(4)}));
      ONNXKIT_ASSIGN_OR_RETURN(c, Emit("Mul", {c, scale}));
      gemm.push_back(c);
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("Gemm", gemm,
                                                 {ir::FloatAttr("alpha", alpha), ir::FloatAttr("beta", alpha),
                                                  ir::IntAttr("transA", IntAttr("transA", 0)),
                                                  ir::IntAttr("transB", trans_b ? 1 : 0)}));
    if (In(7) == nullptr) {
      outs[0] = y;
      return std::string();
    }
    std::vector<ir::Value*> q = {y, In(7)};
    if (In(8) != nullptr) q.push_back(In(8));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Emit("QuantizeLinear", q));
    return std::string();
  }

  // QLinearSoftmax over the last axis (where the attribute 'opset''s two
  // Softmax semantics agree): DequantizeLinear, Softmax, QuantizeLinear.
  absl::StatusOr<std::string> QLinearSoftmax(std::vector<ir::Value*>& outs) {
    if (In(0) == nullptr || In(1) == nullptr || In(3) == nullptr)
      return std::string("X or a scale is missing");
    if (opset_ < 10) return std::string("it needs ai.onnx opset 10");
    std::optional<int64_t> rank = Rank(In(0));
    if (!rank || *rank < 1 || *rank > 64) return std::string("the rank of X is unknown");
    const int64_t axis = IntAttr("axis", -1);
    if (axis != -1 && axis != *rank - 1) return std::string("only the last axis is supported");
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem) return std::string("the element type is unknown");
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, Dq(In(0), In(1), In(2)));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Emit("Softmax", {x}, {ir::IntAttr("axis", *rank - 1)}));
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Q(y, In(3), In(4), *elem));
    return std::string();
  }

  absl::StatusOr<std::string> QLinear(std::vector<ir::Value*>& outs) {
    const std::string& op = node_->op_type();
    if (opset_ < 10) return std::string("QuantizeLinear needs ai.onnx opset 10");
    if (IntAttr("channels_last", 0) != 0) return std::string("channels_last is not supported");
    if (op == "QLinearConcat") {
      if (node_->num_inputs() < 5 || (node_->num_inputs() - 2) % 3 != 0) {
        return std::string("the inputs are not (Y_scale, Y_zero_point, then value, scale, zero point triples)");
      }
      std::optional<int32_t> elem = Elem(In(2));
      if (!elem) elem = Elem(In(1));
      if (!elem) return std::string("the element type is unknown");
      std::vector<ir::Value*> parts;
      for (int i = 2; i + 2 < node_->num_inputs(); i += 3) {
        if (In(i) == nullptr || In(i + 1) == nullptr) return std::string("an input or its scale is missing");
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, Dq(In(i), In(i + 1), In(i + 2)));
        parts.push_back(d);
      }
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * c, Emit("Concat", parts, {ir::IntAttr("axis", IntAttr("axis", 0))}));
      ONNXKIT_ASSIGN_OR_RETURN(outs[0], Q(c, In(0), In(1), *elem));
      return std::string();
    }
    const bool binary = op == "QLinearAdd" || op == "QLinearMul";
    const int out_scale = binary ? 6 : 3;
    if (In(0) == nullptr || In(1) == nullptr || In(out_scale) == nullptr ||
        (binary && (In(3) == nullptr || In(4) == nullptr))) {
      return std::string("an input or a scale is missing");
    }
    std::optional<int32_t> elem = Elem(In(0));
    if (!elem) return std::string("the element type is unknown");
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, Dq(In(0), In(1), In(2)));
    ir::Value* y = nullptr;
    if (binary) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * b, Dq(In(3), In(4), In(5)));
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit(op == "QLinearAdd" ? "Add" : "Mul", {a, b}));
    } else if (op == "QLinearSigmoid") {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("Sigmoid", {a}));
    } else if (op == "QLinearLeakyRelu") {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("LeakyRelu", {a}, {ir::FloatAttr("alpha", FloatAttr("alpha", 0.01f))}));
    } else if (op == "QLinearGlobalAveragePool") {
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("GlobalAveragePool", {a}));
    } else {  // QLinearAveragePool
      ONNXKIT_ASSIGN_OR_RETURN(y, Emit("AveragePool", {a}, AttributesBut({"channels_last"})));
    }
    ONNXKIT_ASSIGN_OR_RETURN(outs[0], Q(y, In(out_scale), In(out_scale + 1), *elem));
    return std::string();
  }

  ir::Model& model_;
  int64_t opset_;
  int lowered_ = 0;
  absl::flat_hash_map<const ir::Value*, int32_t> elem_;
  absl::flat_hash_map<const ir::Value*, int64_t> rank_;
  absl::flat_hash_map<const ir::Value*, std::vector<int64_t>> dims_;
  // The node being rewritten.
  ir::Graph* graph_ = nullptr;
  ir::Node* at_ = nullptr;
  ir::Node* node_ = nullptr;
  std::string base_;
  std::vector<ir::Node*> emitted_;
  std::function<bool(const ir::Node&)> allow_;
  std::optional<ContribLowering::PackedWeights> pending_;
  std::vector<ContribLowering::PackedWeights> packed_;
};

}  // namespace

bool IsContribNode(const ir::Model& model, std::string_view domain, std::string_view op) {
  if (domain == kMicrosoft) return true;
  if (!IsDefaultDomain(domain)) return false;
  if (op == "SimplifiedLayerNormalization") return true;
  if (op != "LayerNormalization") return false;
  std::optional<int64_t> opset = model.OpsetVersion("");
  return opset && *opset < 17;
}

bool IsLowerableContribOp(std::string_view domain, std::string_view op) {
  return domain == kMicrosoft && Known(op);
}

bool HasContribNodes(const ir::Model& model) {
  bool found = false;
  ir::ForEachGraph(model, [&](const ir::Graph& g) {
    for (const ir::Node* n : g.nodes()) {
      if (!found && IsContribNode(model, n->domain(), n->op_type())) found = true;
    }
  });
  return found;
}

absl::StatusOr<int> LowerContribNodes(ir::Graph& graph, const std::function<bool(const ir::Node&)>& allow) {
  ir::Model* model = graph.Root()->model();
  if (model == nullptr) return 0;
  std::optional<int64_t> opset = model->OpsetVersion("");
  if (!opset || *opset < 7) return 0;
  Lowerer lowerer(*model, *opset);
  std::map<std::string, std::pair<std::string, int>> left;
  for (int round = 0; round < 1024; ++round) {
    left.clear();
    ONNXKIT_ASSIGN_OR_RETURN(bool progress, lowerer.Round(&left, {&graph}, allow));
    if (!progress || left.empty()) break;
  }
  return lowerer.lowered();
}

absl::StatusOr<ContribLowering> LowerContribOps(ir::Model& model) {
  ContribLowering result;
  std::map<std::string, std::pair<std::string, int>> left;
  std::optional<int64_t> opset = model.OpsetVersion("");
  if (!opset || *opset < 7) {
    ir::ForEachGraph(model, [&](ir::Graph& g) {
      for (const ir::Node* n : g.nodes()) {
        if (!IsContribNode(model, n->domain(), n->op_type())) continue;
        auto& e = left[absl::StrCat(n->domain(), "::", n->op_type())];
        e.first = "the model's ai.onnx opset is below 7";
        ++e.second;
      }
    });
  } else {
    Lowerer lowerer(model, *opset);
    // A rewrite can make types known further on (inference does not see
    // through contrib ops): go again while that helps.
    for (int round = 0; round < 64; ++round) {
      left.clear();
      ONNXKIT_ASSIGN_OR_RETURN(bool progress, lowerer.Round(&left));
      if (!progress || left.empty()) break;
    }
    result.lowered = lowerer.lowered();
    result.packed = std::move(lowerer.packed());
  }
  for (const auto& [op, entry] : left) {
    result.left.push_back(absl::StrCat(op, ": ", entry.first, " (", entry.second, entry.second == 1 ? " node)" : " nodes)"));
  }
  return result;
}

}  // namespace onnxkit::ops
