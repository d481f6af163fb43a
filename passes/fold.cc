// fold: a node whose inputs are all constant is computed once, on the
// runner's reference kernels, and its outputs become constants.
//
// Before: %s = Shape(%w); %k = Gather(%s, %i); %y = Reshape(%x, %k)   (%w, %i initializers)
// After:  %y = Reshape(%x, %k)                                          (%k an initializer)
//
// Constants are initializers named like the values they replace, or
// Constant nodes where an initializer cannot hold them (IR < 4 models, whose
// initializers are graph inputs; function bodies). Constant nodes become
// initializers. A node folds when its outputs take at most
// max(kFoldGrowth x its non-scalar inputs' bytes, --fold-limit) bytes;
// generators (ConstantOfShape, Tile, Expand, Range ...) only within
// --fold-limit. Never folded: random ops, training-mode Dropout, nodes with
// subgraphs, domains other than ai.onnx / ai.onnx.ml, nodes without inputs
// (but Constant), non-tensor outputs. A kernel failing on the constants
// leaves its node as it is.
#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/infer/tensor_state.h"
#include "passes/pass_list.h"
#include "passes/util.h"
#include "runner/convert.h"
#include "runner/kernel.h"
#include "runner/kernel_registry.h"

namespace onnxkit::passes {
namespace {

// Outputs may take this many times the bytes of the inputs they replace.
constexpr int64_t kFoldGrowth = 2;
constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();

constexpr std::string_view kRandomOps[] = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                           "RandomUniformLike", "Multinomial",   "Bernoulli"};
// Ops whose outputs can be far larger than their inputs: --fold-limit alone.
constexpr std::string_view kGenerators[] = {
    "ConstantOfShape", "Tile",           "Expand",          "Range",   "OneHot", "HannWindow",
    "HammingWindow",   "BlackmanWindow", "MelWeightMatrix", "EyeLike", "Resize", "Upsample"};

bool IsOneOf(std::string_view op, std::span<const std::string_view> ops) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// A named output something reads (a node or a graph output).
bool Needed(const ir::Value* v) {
  return v != nullptr && !v->name().empty() && (v->has_uses() || v->IsGraphOutput());
}

// Where constants go in `graph`: initializers, or Constant nodes.
bool UseInitializers(ir::Graph& graph) {
  const ir::Model* model = graph.Root()->model();
  return model != nullptr && model->ir_version() >= 4;
}

int64_t Bytes(const runner::Tensor& t) {
  if (!t.is_string()) return static_cast<int64_t>(t.nbytes());
  int64_t n = 0;
  for (const std::string& s : t.strings())
    n = CheckedAdd(n, static_cast<int64_t>(s.size()) + 1).value_or(kHuge);
  return n;
}

// A constant bool scalar holding false (Dropout's training_mode).
bool IsFalse(const ir::Value& value, PassContext& ctx) {
  if (!IsConstantValue(value)) return false;
  absl::StatusOr<runner::Tensor> t = ConstantTensor(value, ctx);
  return t.ok() && t->dtype() == pb::kBool && t->size() == 1 && *t->data<uint8_t>() == 0;
}

// Read-only: may `node` fold at all (its inputs aside)?
bool Foldable(const ir::Node& node, PassContext& ctx, bool initializers) {
  const std::string& d = node.domain();
  if (!d.empty() && d != "ai.onnx" && d != "ai.onnx.ml") return false;
  if (IsOneOf(node.op_type(), kRandomOps) || !node.Subgraphs().empty()) return false;
  // A quantized model's weights stay quantized: folding their
  // DequantizeLinear would store them as float (4 x the bytes) and take the
  // consumers off the integer kernels that read the DequantizeLinear.
  if (node.op_type() == "DequantizeLinear") return false;
  if (node.op_type() == "Constant") return initializers && node.num_inputs() == 0;
  if (node.num_inputs() == 0) return false;
  if (node.op_type() == "Dropout") {
    if (ctx.Opset(d) < 7) return node.GetInt("is_test").value_or(0) != 0;
    if (node.num_inputs() > 2 && node.input(2) != nullptr && !IsFalse(*node.input(2), ctx)) return false;
  }
  return std::any_of(node.outputs().begin(), node.outputs().end(), Needed);
}

infer::ValueState StateOf(const runner::Tensor& t) {
  if (t.size() <= infer::kMaxDataElements) return infer::StateFromTensor(runner::TensorToProto(t, "t"));
  infer::ValueState s;
  s.type = infer::TensorOf(t.dtype(), infer::DimsOf(t.shape()));
  return s;
}

// The bytes the outputs of `node` will take, from the op's shape function
// on the constant inputs (at least a byte an element); nullopt when it
// cannot tell. Keeps a generator from allocating gigabytes to find out.
std::optional<int64_t> PredictBytes(const ir::Node& node, int64_t opset,
                                    const std::vector<runner::Tensor>& in) {
  infer::ShapeFn fn = infer::FindShapeFn(node.domain(), node.op_type());
  if (fn == nullptr) return std::nullopt;
  std::vector<infer::ValueState> states(in.size());
  std::vector<const infer::ValueState*> ptrs(in.size(), nullptr);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].defined()) continue;
    states[i] = StateOf(in[i]);
    ptrs[i] = &states[i];
  }
  infer::NodeContext nctx(node, opset, std::move(ptrs), nullptr);
  fn(nctx);
  if (nctx.failed()) return std::nullopt;
  int64_t total = 0;
  for (int i = 0; i < node.num_outputs(); ++i) {
    if (node.output(i) == nullptr || node.output(i)->name().empty()) continue;
    const infer::Type& type = nctx.output(i)->type;
    if (!type.shape) return std::nullopt;
    std::optional<std::vector<int64_t>> dims = infer::KnownValues(*type.shape);
    if (!dims) return std::nullopt;
    std::optional<int64_t> count = CheckedElementCount(*dims);
    std::optional<int64_t> bytes = count;
    if (count && DataTypeBits(type.elem_type) > 8) bytes = RawByteSize(type.elem_type, *count);
    total = CheckedAdd(total, bytes.value_or(kHuge)).value_or(kHuge);
  }
  return total;
}

// The outputs of `node` computed on its constant inputs (undefined where not
// needed), or nullopt when the node does not fold: an input not constant,
// over the budget, a kernel error, a non-tensor output.
std::optional<std::vector<runner::Tensor>> Compute(const ir::Node& node, PassContext& ctx) {
  if (node.op_type() == "Constant") {
    absl::StatusOr<runner::Tensor> t = ConstantTensor(*node.output(0), ctx);
    if (!t.ok()) return std::nullopt;
    return std::vector<runner::Tensor>{*std::move(t)};
  }
  std::vector<runner::Tensor> in(static_cast<size_t>(node.num_inputs()));
  int64_t in_bytes = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const ir::Value* v = node.input(i);
    if (v == nullptr) continue;
    if (!IsConstantValue(*v)) return std::nullopt;
    absl::StatusOr<runner::Tensor> t = ConstantTensor(*v, ctx);
    if (!t.ok()) return std::nullopt;
    if (t->size() > 1) in_bytes = CheckedAdd(in_bytes, Bytes(*t)).value_or(kHuge);
    in[static_cast<size_t>(i)] = *std::move(t);
  }
  const int64_t limit = std::max<int64_t>(ctx.options().fold_limit_bytes, 0);
  const bool generator = IsOneOf(node.op_type(), kGenerators);
  const int64_t budget =
      generator ? limit : std::max(CheckedMul(in_bytes, kFoldGrowth).value_or(kHuge), limit);
  const int64_t opset = ctx.Opset(node.domain());
  std::optional<int64_t> predicted = PredictBytes(node, opset, in);
  if (predicted ? *predicted > budget : generator) return std::nullopt;

  absl::StatusOr<const runner::KernelEntry*> entry =
      runner::FindKernel(runner::Backend::kReference, node.domain(), node.op_type(), opset);
  if (!entry.ok()) return std::nullopt;
  absl::StatusOr<std::unique_ptr<runner::Kernel>> kernel =
      (*entry)->factory(node, runner::KernelInfo{opset, 1});
  if (!kernel.ok()) return std::nullopt;
  std::vector<const runner::RtValue*> in_ptrs;
  std::vector<runner::RtValue> in_values(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].defined()) in_values[i] = runner::RtValue::FromTensor(in[i]);
    in_ptrs.push_back(in[i].defined() ? &in_values[i] : nullptr);
  }
  std::vector<runner::RtValue> outs(static_cast<size_t>(node.num_outputs()));
  runner::KernelContext kctx(node, opset, std::move(in_ptrs), &outs, /*subgraphs=*/nullptr);
  if (!(*kernel)->Run(kctx).ok()) return std::nullopt;

  std::vector<runner::Tensor> result(outs.size());
  int64_t out_bytes = 0;
  for (int i = 0; i < node.num_outputs(); ++i) {
    if (!Needed(node.output(i))) continue;
    const runner::RtValue& v = outs[static_cast<size_t>(i)];
    if (!v.is_tensor() || !v.tensor().defined()) return std::nullopt;
    out_bytes = CheckedAdd(out_bytes, Bytes(v.tensor())).value_or(kHuge);
    result[static_cast<size_t>(i)] = v.tensor();
  }
  if (out_bytes > budget) return std::nullopt;
  return result;
}

// A new constant holding `t` in `graph` (an initializer, or a Constant node
// before `anchor`), named from `hint`.
absl::StatusOr<ir::Value*> MakeConstant(ir::Graph& graph, ir::Node* anchor, const std::string& hint,
                                        const runner::Tensor& t, bool initializers) {
  if (initializers) return AddConstant(graph, hint, t);
  return AddConstantNode(graph, anchor, hint, t);
}

// Replaces the needed outputs of `node` by constants holding `values`,
// removes `node`, and gives each constant the name of the value it replaces.
// Constants made by this run that nothing reads any more go too.
absl::Status Rewrite(ir::Graph& graph, ir::Node* node, const std::vector<runner::Tensor>& values,
                     bool initializers, absl::flat_hash_set<const ir::Value*>& made) {
  std::vector<ir::Value*> inputs = node->inputs();
  std::vector<std::pair<std::string, ir::Value*>> renames;
  for (int i = 0; i < node->num_outputs(); ++i) {
    ir::Value* out = node->output(i);
    if (!Needed(out)) continue;
    ONNXKIT_ASSIGN_OR_RETURN(
        ir::Value * c, MakeConstant(graph, node, out->name(), values[static_cast<size_t>(i)], initializers));
    ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(out, c));
    renames.emplace_back(out->name(), c);
    made.insert(c);
  }
  ONNXKIT_ASSIGN_OR_RETURN(bool removed, RemoveIfDead(graph, node));
  if (!removed) return absl::InternalError("folded node still in use after its outputs were replaced");
  for (auto& [name, c] : renames) ONNXKIT_RETURN_IF_ERROR(graph.RenameValue(c, name));
  for (ir::Value* v : inputs) {
    if (v == nullptr || !made.contains(v) || v->has_uses() || v->IsGraphOutput()) continue;
    made.erase(v);
    if (v->kind() == ir::ValueKind::kInitializer) {
      ONNXKIT_RETURN_IF_ERROR(graph.RemoveInitializer(v));
    } else if (v->producer() != nullptr) {
      ONNXKIT_RETURN_IF_ERROR(RemoveIfDead(graph, v->producer()).status());
    }
  }
  return absl::OkStatus();
}

class Fold : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    absl::StatusOr<std::vector<ir::Node*>> order = ir::TopologicalOrder(graph);
    if (!order.ok()) return false;  // a cycle: the checker reports it
    const bool initializers = UseInitializers(graph);
    if (!initializers && ctx.Opset("") < 1) return false;  // no Constant to hold the values
    absl::flat_hash_set<const ir::Value*> made;
    bool changed = false;
    for (ir::Node* node : *order) {
      if (!Foldable(*node, ctx, initializers)) continue;
      std::optional<std::vector<runner::Tensor>> values = Compute(*node, ctx);
      if (!values) continue;
      if (!ctx.Allow(*node, absl::StrCat("fold ", node->op_type()))) continue;
      // The model's own initializers among the inputs (Rewrite deletes only
      // constants this run made, so these stay valid across it).
      std::vector<const ir::Value*> weights;
      for (const ir::Value* in : node->inputs()) {
        if (in != nullptr && !made.contains(in) && in->IsConstant() && in->initializer() != nullptr) {
          weights.push_back(in);
        }
      }
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, node, *values, initializers, made));
      // Weights read for the last time: their file pages can go.
      for (const ir::Value* w : weights) {
        if (!w->has_uses()) ctx.ReleaseData(*w->initializer());
      }
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFold() { return std::make_unique<Fold>(); }

}  // namespace onnxkit::passes
