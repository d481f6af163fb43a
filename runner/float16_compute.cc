// float16 nodes computed in float32 on the cpu backend (float16_compute.h).
#include "runner/float16_compute.h"

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/infer/engine.h"
#include "lib/io/proto.h"
#include "lib/ir/attributes.h"
#include "lib/ir/topo.h"

namespace onnxkit::runner {
namespace {

// Ops whose float16 form is the float32 one rounded (every float input and
// the output of one type, or further float inputs that may be cast too),
// with one output and no graph attribute. (Not the ops that move values,
// which the cpu kernels already do on 2-byte words, NaN payloads kept.)
constexpr std::string_view kOps[] = {
    "Conv", "ConvTranspose", "MatMul", "Gemm", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "GroupNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "Resize", "Softmax", "LogSoftmax", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu",
    "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Reciprocal",
    "Abs", "Neg", "Add", "Sub", "Mul", "Div", "Pow", "Clip", "ReduceMean", "ReduceSum", "ReduceMax",
    "ReduceMin", "Einsum", "Sum", "Mean", "Max", "Min", "Softplus", "Mish"};

bool Listed(const ir::Node& node) {
  if (!(node.domain().empty() || node.domain() == "ai.onnx") || node.num_outputs() != 1) return false;
  for (std::string_view op : kOps) {
    if (node.op_type() == op) return true;
  }
  return false;
}

bool Present(const ir::Value* v) { return v != nullptr && !v->name().empty(); }

bool IsFloat16Tensor(const pb::TensorProto* t) { return t != nullptr && t->data_type == pb::kFloat16; }

bool DeclaredFloat16(const ir::Value* v) {
  const pb::TypeProto* t = v->type();
  return t != nullptr && t->tensor_type && t->tensor_type->elem_type == pb::kFloat16;
}

bool GraphMayHoldFloat16(const ir::Graph& g) {
  for (const ir::Value* v : g.inputs()) {
    if (DeclaredFloat16(v)) return true;
  }
  for (const ir::Value* v : g.initializers()) {
    if (IsFloat16Tensor(v->initializer())) return true;
  }
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "Cast" && n->GetInt("to").value_or(0) == pb::kFloat16) return true;
    if (n->op_type() == "Constant") {
      const ir::Attribute* a = n->FindAttribute("value");
      if (a != nullptr && a->type() == pb::kAttrTensor && IsFloat16Tensor(a->proto.t.get())) return true;
    }
  }
  return false;
}

// The element type inference gave `v`, or 0.
int32_t ElemOf(const std::map<std::string, infer::ValueState>& states, const ir::Value* v) {
  auto it = states.find(v->name());
  if (it == states.end() || !it->second.type.is_tensor()) return 0;
  return it->second.type.elem_type;
}

class Rewriter {
 public:
  explicit Rewriter(const std::map<std::string, infer::ValueState>& states) : states_(states) {}

  absl::StatusOr<int> Graph(ir::Graph& g) {
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, ir::TopologicalOrder(g));
    absl::flat_hash_map<const ir::Value*, ir::Value*> casts;  // float16 value -> its float32 Cast
    int rewritten = 0;
    for (ir::Node* node : order) {
      if (!Listed(*node) || HasGraph(*node)) continue;
      if (ElemOf(states_, node->output(0)) != pb::kFloat16) continue;
      bool known = true, any = false;
      for (const ir::Value* in : node->inputs()) {
        if (!Present(in)) continue;
        const int32_t e = ElemOf(states_, in);
        known = known && e != 0;
        any = any || e == pb::kFloat16;
      }
      if (!known || !any) continue;
      const std::string base = node->name().empty() ? node->op_type() : node->name();
      std::vector<ir::Value*> inputs, bypassed;
      for (ir::Value* in : node->inputs()) {
        if (!Present(in) || ElemOf(states_, in) != pb::kFloat16) {
          inputs.push_back(in);
          continue;
        }
        // Rounding to float16 commutes with Relu and max pooling (both pick
        // or zero values, and rounding is monotonic and keeps 0): such a
        // node reads the float32 result its float16 input was rounded
        // from, so that it fuses with the node before it.
        auto unrounded = rounded_from_.find(in);
        if (unrounded != rounded_from_.end() && Commutes(*node)) {
          inputs.push_back(unrounded->second);
          bypassed.push_back(in);
          continue;
        }
        ir::Value*& cast = casts[in];
        if (cast == nullptr) {
          ONNXKIT_ASSIGN_OR_RETURN(cast, Emit(g, node, base, "Cast", {in}, {ir::IntAttr("to", pb::kFloat)}));
        }
        inputs.push_back(cast);
      }
      std::vector<pb::AttributeProto> attrs;
      for (const ir::Attribute& a : node->attributes()) attrs.push_back(a.proto);
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y32, Emit(g, node, base, node->op_type(), std::move(inputs), attrs));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y16,
                               Emit(g, node, base, "Cast", {y32}, {ir::IntAttr("to", pb::kFloat16)}));
      ir::Value* old = node->output(0);
      if (old->type() != nullptr) y16->set_type(*old->type());
      const std::string name = old->name();
      ONNXKIT_RETURN_IF_ERROR(g.ReplaceAllUsesWith(old, y16));
      ONNXKIT_RETURN_IF_ERROR(g.RemoveNode(node));
      ONNXKIT_RETURN_IF_ERROR(g.RenameValue(y16, name));
      rounded_from_[y16] = y32;
      // A rounding nothing reads any more goes, so that the float32 result
      // has one reader (and the two nodes can run as one).
      for (ir::Value* v : bypassed) {
        if (!v->has_uses() && !v->IsGraphOutput() && v->producer() != nullptr) {
          ONNXKIT_RETURN_IF_ERROR(g.RemoveNode(v->producer()));
        }
      }
      ++rewritten;
    }
    return rewritten;
  }

 private:
  static bool HasGraph(const ir::Node& node) {
    for (const ir::Attribute& a : node.attributes()) {
      if (a.g || !a.graphs.empty()) return true;
    }
    return false;
  }

  static absl::StatusOr<ir::Value*> Emit(ir::Graph& g, ir::Node* at, const std::string& base, const std::string& op,
                                         std::vector<ir::Value*> inputs, std::vector<pb::AttributeProto> attrs) {
    ir::NodeSpec spec;
    spec.op_type = op;
    spec.name = g.FreshName(absl::StrCat(base, "/f32/", op));
    spec.inputs = std::move(inputs);
    spec.outputs = {g.FreshName(absl::StrCat(base, "/f32/", op, "_out"))};
    spec.attributes = std::move(attrs);
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, g.AddNode(std::move(spec), ir::Position::Before(at)));
    return n->output(0);
  }

  static bool Commutes(const ir::Node& node) {
    const std::string& op = node.op_type();
    return op == "Relu" || op == "MaxPool" || op == "GlobalMaxPool";
  }

  const std::map<std::string, infer::ValueState>& states_;
  // The float16 result of each rewritten node -> the float32 value it rounds.
  absl::flat_hash_map<const ir::Value*, ir::Value*> rounded_from_;
};

}  // namespace

bool MayHoldFloat16(const ir::Model& model) {
  bool found = false;
  ir::ForEachGraph(model, [&](const ir::Graph& g) { found = found || GraphMayHoldFloat16(g); });
  return found;
}

absl::StatusOr<int> ComputeFloat16InFloat32(ir::Model& model) {
  infer::Engine engine(model);
  engine.Run();
  // Element types that conflict with what the model declares: the types
  // are not to be trusted, and the nodes run as they are.
  for (const infer::InferenceIssue& issue : engine.issues()) {
    if (issue.rule == infer::IssueKind::kTypeConflict || issue.rule == infer::IssueKind::kTypeConstraint)
      return 0;
  }
  const std::map<std::string, infer::ValueState> states = engine.States();
  Rewriter rewriter(states);
  int total = 0;
  absl::Status status = absl::OkStatus();
  ir::ForEachGraph(model, [&](ir::Graph& g) {
    if (!status.ok()) return;
    absl::StatusOr<int> n = rewriter.Graph(g);
    if (n.ok()) {
      total += *n;
    } else {
      status = n.status();
    }
  });
  ONNXKIT_RETURN_IF_ERROR(status);
  return total;
}

}  // namespace onnxkit::runner
