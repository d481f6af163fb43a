// Finding quantized chains (QDQ patterns) for int8 execution; see
// runner/fusion.h.
//
// Before (weighted):
//   %x = DequantizeLinear(%xq, %xs, %xz)    %w = DequantizeLinear(%wq, %ws, %wz)
//   %c = Conv(%x, %w, %b)    [%r = Relu(%c)]    %yq = QuantizeLinear(%c|%r, %ys, %yz)
// After: one step from %xq to %yq (the DequantizeLinear of %x in the chain
// when Conv is its only use; %w stays a folded constant, or, for a MatMul
// of two activations, is read quantized with its DequantizeLinear
// bypassed). Without a QuantizeLinear after the op (or its Relu), the
// chain ends there and gives the float result.
//
// Before (lookup):
//   %x = DequantizeLinear(%xq, %xs, %xz)    %r = Relu(%x)    %yq = QuantizeLinear(%r, %ys, %yz)
// After: one step from %xq to %yq. Several elementwise ops of the one
// variable (Div by a constant, then Erf, say) make one lookup chain too, as
// does a step that joins the chain's value with %x again (HardSwish written
// out as Mul(%x, HardSigmoid(%x)), SiLU, GELU).
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/ir/attributes.h"
#include "runner/convert.h"
#include "runner/fusion.h"

namespace onnxkit::runner {
namespace {

bool InDefaultDomain(const ir::Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool Present(const ir::Value* v) { return v != nullptr && !v->name().empty(); }

// The one node of `graph` that uses `v`, using it once; null when `v` is a
// graph output or has any other number of uses.
const ir::Node* SoleConsumer(const ir::Value* v, const ir::Graph& graph) {
  if (!Present(v) || v->uses().size() != 1 || v->IsGraphOutput()) return nullptr;
  const ir::Node* n = v->uses()[0].node;
  return n->graph() == &graph && InDefaultDomain(*n) ? n : nullptr;
}

// True when the node has exactly one output, or every output but the first is omitted.
bool OnlyFirstOutput(const ir::Node& node) {
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (Present(node.output(i))) return false;
  }
  return node.num_outputs() >= 1 && Present(node.output(0));
}

// A DequantizeLinear / QuantizeLinear with constant scale and zero point
// and no block quantization (opset 21) or output type (opset 19+).
bool IsQdqNode(const ir::Node* node, std::string_view op,
               const std::function<bool(const ir::Value*)>& is_constant) {
  if (node == nullptr || node->op_type() != op || !InDefaultDomain(*node) || !OnlyFirstOutput(*node))
    return false;
  if (node->num_inputs() < 2 || node->num_inputs() > 3 || !Present(node->input(0))) return false;
  if (!Present(node->input(1)) || !is_constant(node->input(1))) return false;
  if (node->num_inputs() == 3 && Present(node->input(2)) && !is_constant(node->input(2))) return false;
  if (node->GetInt("block_size").value_or(0) != 0) return false;
  if (node->GetInt("output_dtype").value_or(0) != 0) return false;
  return true;
}

// The DequantizeLinear producing `v`, or null.
const ir::Node* Dequantizer(const ir::Value* v, const std::function<bool(const ir::Value*)>& is_constant) {
  if (!Present(v) || v->kind() != ir::ValueKind::kNodeOutput) return nullptr;
  const ir::Node* p = v->producer();
  return IsQdqNode(p, "DequantizeLinear", is_constant) ? p : nullptr;
}

// Unary elementwise ops a lookup table can replace between a
// DequantizeLinear and a QuantizeLinear (their other inputs constant).
bool IsTableOp(const ir::Node& node, const std::function<bool(const ir::Value*)>& is_constant) {
  static constexpr std::string_view kOps[] = {"Relu",     "LeakyRelu", "Sigmoid",  "Tanh", "HardSigmoid",
                                              "HardSwish", "Elu",      "Softplus", "Clip", "Identity",
                                              "Neg",       "Abs",      "Erf",      "Gelu"};
  if (!InDefaultDomain(node) || !OnlyFirstOutput(node) || node.num_inputs() < 1) return false;
  bool known = false;
  for (std::string_view op : kOps) known = known || node.op_type() == op;
  if (!known) return false;
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (Present(node.input(i)) && !is_constant(node.input(i))) return false;
  }
  return true;
}

}  // namespace

bool IsQuantizedMovementOp(const ir::Node& node) {
  static constexpr std::string_view kOps[] = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze"};
  if (!InDefaultDomain(node) || !OnlyFirstOutput(node) || node.num_inputs() < 1) return false;
  for (std::string_view op : kOps) {
    if (node.op_type() == op) return true;
  }
  return false;
}

namespace {

void Finish(FusionChain& chain, absl::flat_hash_set<const ir::Node*>& taken, std::vector<FusionChain>& out) {
  chain.kind = FusionKind::kQuantized;
  for (const ir::Node* n : chain.nodes) {
    taken.insert(n);
    chain.input_offset.push_back(chain.num_inputs);
    chain.num_inputs += n->num_inputs();
  }
  // Bypass extras were recorded as -1 - (offset among the extras).
  for (FusionChain::Bypass& by : chain.bypass) by.extra = chain.num_inputs + (-1 - by.extra);
  out.push_back(std::move(chain));
}

// The weighted chain at `op` (Conv, MatMul, Gemm), if any.
bool MatchWeighted(const ir::Node& op, const ir::Graph& graph,
                   const std::function<bool(const ir::Value*)>& is_constant,
                   const std::function<bool(const ir::Node*)>& skip,
                   const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  const std::string& t = op.op_type();
  if ((t != "Conv" && t != "MatMul" && t != "Gemm") || !InDefaultDomain(op) || !OnlyFirstOutput(op)) return false;
  if (op.num_inputs() < 2 || (t == "MatMul" && op.num_inputs() != 2) || op.num_inputs() > 3) return false;
  const ir::Node* dq_x = Dequantizer(op.input(0), is_constant);
  const ir::Node* dq_w = Dequantizer(op.input(1), is_constant);
  if (dq_x == nullptr || dq_w == nullptr || dq_x == dq_w || is_constant(dq_x->input(0))) return false;
  // MatMul of two quantized activations (attention's Q K^T and P V): the
  // second's DequantizeLinear stays outside the chain, bypassed.
  const bool activations = !is_constant(dq_w->input(0));
  if ((activations && t != "MatMul") || op.input(0) == op.input(1)) return false;
  if (op.num_inputs() == 3 && Present(op.input(2)) && !is_constant(op.input(2))) return false;
  // Then an optional Relu and the QuantizeLinear.
  const ir::Node* next = SoleConsumer(op.output(0), graph);
  const ir::Node* relu = nullptr;
  if (next != nullptr && next->op_type() == "Relu" && next->num_inputs() == 1 && OnlyFirstOutput(*next) &&
      !skip(next) && !taken.contains(next)) {
    relu = next;
    next = SoleConsumer(relu->output(0), graph);
  }
  // Without a QuantizeLinear after it, the chain gives the float result
  // (a classifier's last Gemm): the int8 primitive writes float32.
  const bool quantized_out = IsQdqNode(next, "QuantizeLinear", is_constant) && !skip(next) &&
                             !taken.contains(next) &&
                             next->input(0) == (relu != nullptr ? relu->output(0) : op.output(0));
  if (!quantized_out && activations) return false;
  const bool dq_in_chain = SoleConsumer(dq_x->output(0), graph) == &op && !skip(dq_x) && !taken.contains(dq_x);
  if (dq_in_chain) {
    chain.nodes.push_back(dq_x);
    chain.chained_input.push_back(-1);
  }
  chain.nodes.push_back(&op);
  chain.chained_input.push_back(dq_in_chain ? 0 : -1);
  if (relu != nullptr) {
    chain.nodes.push_back(relu);
    chain.chained_input.push_back(0);
  }
  if (quantized_out) {
    chain.nodes.push_back(next);
    chain.chained_input.push_back(0);
  }
  for (const ir::Node* dq : {dq_x, dq_w}) {
    for (int i = 0; i < 3; ++i) chain.extra_inputs.push_back(i < dq->num_inputs() ? dq->input(i) : nullptr);
  }
  if (!dq_in_chain) chain.bypass.push_back({0, -1, dq_x});  // slot: the op's input 0; extra set in Finish
  if (activations) chain.bypass.push_back({(dq_in_chain ? dq_x->num_inputs() : 0) + 1, -1 - kQwData, dq_w});
  return true;
}

// The elementwise chain at `op` (Add, Sub, Mul, Div of dequantized values
// or float constants, then QuantizeLinear), if any. The DequantizeLinear
// nodes stay outside the chain: both are bypassed.
bool MatchBinary(const ir::Node& op, const ir::Graph& graph,
                 const std::function<bool(const ir::Value*)>& is_constant,
                 const std::function<bool(const ir::Value*)>& is_scalar,
                 const std::function<bool(const ir::Node*)>& skip,
                 const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  const std::string& t = op.op_type();
  if ((t != "Add" && t != "Sub" && t != "Mul" && t != "Div") || !InDefaultDomain(op) || !OnlyFirstOutput(op) ||
      op.num_inputs() != 2 || !Present(op.input(0)) || !Present(op.input(1))) {
    return false;
  }
  const ir::Node* dq[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    if (is_scalar(op.input(i))) return false;  // a lookup chain
    if (is_constant(op.input(i))) continue;
    dq[i] = Dequantizer(op.input(i), is_constant);
    if (dq[i] == nullptr || is_constant(dq[i]->input(0))) return false;
  }
  if (dq[0] == nullptr && dq[1] == nullptr) return false;
  const ir::Node* q = SoleConsumer(op.output(0), graph);
  if (!IsQdqNode(q, "QuantizeLinear", is_constant) || skip(q) || taken.contains(q) || q->input(0) != op.output(0))
    return false;
  chain.nodes = {&op, q};
  chain.chained_input = {-1, 0};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      chain.extra_inputs.push_back(dq[i] != nullptr && j < dq[i]->num_inputs() ? dq[i]->input(j) : nullptr);
    }
    if (dq[i] != nullptr) chain.bypass.push_back({i, -1 - 3 * i, dq[i]});
  }
  return true;
}

// Elementwise ops with a constant one-element operand a lookup chain may
// hold (the chained value the other operand).
bool IsTableBinaryOp(const ir::Node& node) {
  static constexpr std::string_view kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  if (!InDefaultDomain(node) || !OnlyFirstOutput(node) || node.num_inputs() != 2) return false;
  for (std::string_view op : kOps) {
    if (node.op_type() == op) return true;
  }
  return false;
}

// True when `node` can follow `cur` in a lookup chain, taking it as input
// `*at`: a unary op of the table list, or a binary one whose other operand
// is a one-element constant.
bool IsTableStep(const ir::Node& node, const ir::Value* cur, const std::function<bool(const ir::Value*)>& is_constant,
                 const std::function<bool(const ir::Value*)>& is_scalar, int* at) {
  int uses = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (node.input(i) == cur) *at = i, ++uses;
  }
  if (uses != 1) return false;
  if (IsTableBinaryOp(node)) return is_scalar(node.input(1 - *at));
  return *at == 0 && IsTableOp(node, is_constant);
}

// Appends to `chain` the table steps after `cur`, then the QuantizeLinear;
// false when no QuantizeLinear ends them.
bool ExtendTable(const ir::Value* cur, const ir::Graph& graph, const std::function<bool(const ir::Value*)>& is_constant,
                 const std::function<bool(const ir::Value*)>& is_scalar,
                 const std::function<bool(const ir::Node*)>& skip, const absl::flat_hash_set<const ir::Node*>& taken,
                 FusionChain& chain) {
  constexpr size_t kMaxNodes = 10;
  for (;;) {
    const ir::Node* next = SoleConsumer(cur, graph);
    if (next == nullptr || skip(next) || taken.contains(next) || chain.nodes.size() >= kMaxNodes) return false;
    if (IsQdqNode(next, "QuantizeLinear", is_constant) && next->input(0) == cur) {
      chain.nodes.push_back(next);
      chain.chained_input.push_back(0);
      return true;
    }
    int at = -1;
    if (!IsTableStep(*next, cur, is_constant, is_scalar, &at)) return false;
    chain.nodes.push_back(next);
    chain.chained_input.push_back(at);
    cur = next->output(0);
  }
}

// True when the scale and zero point of `qdq` are one-element constants.
bool ScalarQdq(const ir::Node& qdq, const std::function<bool(const ir::Value*)>& is_scalar) {
  return is_scalar(qdq.input(1)) &&
         (qdq.num_inputs() < 3 || !Present(qdq.input(2)) || is_scalar(qdq.input(2)));
}

// The lookup chain at `dq` when its result x has two readers, both in the
// chain: DequantizeLinear, table steps from x, a binary step joining their
// result with x again, more table steps, QuantizeLinear. A written-out
// HardSwish (x * HardSigmoid(x), or x * Clip(x + 3, 0, 6) / 6), a SiLU
// (x * Sigmoid(x)) or a GELU (x * (Erf(x / sqrt 2) + 1) * 0.5): still one
// function of the source byte, also where a QuantizeLinear and its
// DequantizeLinear follow the Sigmoid (a graph quantized after every op).
// The joining step reads x inside the chain.
bool MatchTableJoin(const ir::Node& dq, const ir::Graph& graph,
                    const std::function<bool(const ir::Value*)>& is_constant,
                    const std::function<bool(const ir::Value*)>& is_scalar,
                    const std::function<bool(const ir::Node*)>& skip,
                    const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  constexpr size_t kMaxNodes = 10;
  const ir::Value* x = dq.output(0);
  if (!Present(x) || x->IsGraphOutput() || x->uses().size() != 2 || !ScalarQdq(dq, is_scalar)) return false;
  for (int first = 0; first < 2; ++first) {
    const ir::Node* a = x->uses()[static_cast<size_t>(first)].node;
    const ir::Node* join = x->uses()[static_cast<size_t>(1 - first)].node;
    if (a == join || a->graph() != &graph || join->graph() != &graph || skip(a) || skip(join) ||
        taken.contains(a) || taken.contains(join) || !IsTableBinaryOp(*join)) {
      continue;
    }
    chain.nodes = {&dq};
    chain.chained_input = {-1};
    int at = -1;
    if (!IsTableStep(*a, x, is_constant, is_scalar, &at)) continue;
    chain.nodes.push_back(a);
    chain.chained_input.push_back(at);
    const ir::Value* cur = a->output(0);
    for (;;) {
      const ir::Node* next = SoleConsumer(cur, graph);
      if (next == nullptr || skip(next) || taken.contains(next) || chain.nodes.size() >= kMaxNodes) break;
      if (next == join) {
        // Joined: one input the chain's value, the other x.
        const int cur_at = join->input(0) == cur ? 0 : 1;
        if (join->input(cur_at) != cur || join->input(1 - cur_at) != x) break;
        chain.nodes.push_back(join);
        chain.chained_input.push_back(cur_at);
        chain.inner_input.assign(chain.nodes.size(), -1);
        chain.inner_source.assign(chain.nodes.size(), -1);
        chain.inner_input.back() = 1 - cur_at;
        chain.inner_source.back() = 0;
        if (ExtendTable(join->output(0), graph, is_constant, is_scalar, skip, taken, chain)) return true;
        chain.inner_input.clear();
        chain.inner_source.clear();
        break;
      }
      // A QuantizeLinear and its DequantizeLinear (per tensor) before the
      // join: rounding to the grid is one more function of the source.
      if (IsQdqNode(next, "QuantizeLinear", is_constant) && next->input(0) == cur &&
          ScalarQdq(*next, is_scalar)) {
        const ir::Node* back = SoleConsumer(next->output(0), graph);
        if (back == nullptr || skip(back) || taken.contains(back) || back->input(0) != next->output(0) ||
            !IsQdqNode(back, "DequantizeLinear", is_constant) || !ScalarQdq(*back, is_scalar)) {
          break;
        }
        chain.nodes.insert(chain.nodes.end(), {next, back});
        chain.chained_input.insert(chain.chained_input.end(), {0, 0});
        cur = back->output(0);
        continue;
      }
      if (!IsTableStep(*next, cur, is_constant, is_scalar, &at)) break;
      chain.nodes.push_back(next);
      chain.chained_input.push_back(at);
      cur = next->output(0);
    }
  }
  return false;
}

// The lookup chain at `dq`, if any: DequantizeLinear, one or more
// elementwise ops of one variable (unary ops, or binary ones with a
// one-element constant), QuantizeLinear; or DequantizeLinear, one data
// movement op, QuantizeLinear.
bool MatchTable(const ir::Node& dq, const ir::Graph& graph,
                const std::function<bool(const ir::Value*)>& is_constant,
                const std::function<bool(const ir::Value*)>& is_scalar,
                const std::function<bool(const ir::Node*)>& skip,
                const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  if (!IsQdqNode(&dq, "DequantizeLinear", is_constant) || is_constant(dq.input(0))) return false;
  chain.nodes = {&dq};
  chain.chained_input = {-1};
  const ir::Node* op = SoleConsumer(dq.output(0), graph);
  if (op == nullptr || skip(op) || taken.contains(op)) return false;
  int at = -1;
  if (IsQuantizedMovementOp(*op)) {
    if (op->input(0) != dq.output(0)) return false;
    for (int i = 1; i < op->num_inputs(); ++i) {
      if (op->input(i) == dq.output(0)) return false;
    }
    const ir::Node* q = SoleConsumer(op->output(0), graph);
    if (!IsQdqNode(q, "QuantizeLinear", is_constant) || skip(q) || taken.contains(q) || q->input(0) != op->output(0))
      return false;
    chain.nodes = {&dq, op, q};
    chain.chained_input = {-1, 0, 0};
    return true;
  }
  if (!IsTableStep(*op, dq.output(0), is_constant, is_scalar, &at)) return false;
  chain.nodes.push_back(op);
  chain.chained_input.push_back(at);
  return ExtendTable(op->output(0), graph, is_constant, is_scalar, skip, taken, chain);
}

// The pooling chain at `dq`, if any: DequantizeLinear, then Relu, Clip or
// Identity nodes (their bounds constant), then MaxPool (only its first
// output read), then QuantizeLinear. Max pooling commutes
// with the other, non-decreasing steps, so the kernel pools the 8-bit
// values and looks the result up (it checks the table is non-decreasing).
bool MatchPool(const ir::Node& dq, const ir::Graph& graph, const std::function<bool(const ir::Value*)>& is_constant,
               const std::function<bool(const ir::Node*)>& skip, const absl::flat_hash_set<const ir::Node*>& taken,
               FusionChain& chain) {
  if (!IsQdqNode(&dq, "DequantizeLinear", is_constant) || is_constant(dq.input(0))) return false;
  chain.nodes = {&dq};
  chain.chained_input = {-1};
  const ir::Value* cur = dq.output(0);
  for (;;) {
    const ir::Node* next = SoleConsumer(cur, graph);
    if (next == nullptr || skip(next) || taken.contains(next) || next->input(0) != cur || chain.nodes.size() > 6)
      return false;
    for (int i = 1; i < next->num_inputs(); ++i) {
      if (next->input(i) == cur || (Present(next->input(i)) && !is_constant(next->input(i)))) return false;
    }
    const std::string& t = next->op_type();
    chain.nodes.push_back(next);
    chain.chained_input.push_back(0);
    if (t == "MaxPool") {
      if (!InDefaultDomain(*next) || !OnlyFirstOutput(*next)) return false;
      const ir::Node* q = SoleConsumer(next->output(0), graph);
      if (!IsQdqNode(q, "QuantizeLinear", is_constant) || skip(q) || taken.contains(q) || q->input(0) != next->output(0))
        return false;
      chain.nodes.push_back(q);
      chain.chained_input.push_back(0);
      return true;
    }
    if ((t != "Relu" && t != "Clip" && t != "Identity") || !InDefaultDomain(*next) || !OnlyFirstOutput(*next))
      return false;
    cur = next->output(0);
  }
}

// The concatenation chain at `op`, if any: Concat of dequantized 8-bit
// tensors, then QuantizeLinear. Each DequantizeLinear is bypassed; the
// kernel requantizes each input by a table and concatenates.
bool MatchConcat(const ir::Node& op, const ir::Graph& graph, const std::function<bool(const ir::Value*)>& is_constant,
                 const std::function<bool(const ir::Node*)>& skip, const absl::flat_hash_set<const ir::Node*>& taken,
                 FusionChain& chain) {
  if (op.op_type() != "Concat" || !InDefaultDomain(op) || !OnlyFirstOutput(op) || op.num_inputs() < 1 ||
      !op.GetInt("axis").has_value()) {
    return false;
  }
  std::vector<const ir::Node*> dqs;
  for (int i = 0; i < op.num_inputs(); ++i) {
    const ir::Node* dq = Dequantizer(op.input(i), is_constant);
    if (dq == nullptr || is_constant(dq->input(0))) return false;
    dqs.push_back(dq);
  }
  const ir::Node* q = SoleConsumer(op.output(0), graph);
  if (!IsQdqNode(q, "QuantizeLinear", is_constant) || skip(q) || taken.contains(q) || q->input(0) != op.output(0))
    return false;
  chain.nodes = {&op, q};
  chain.chained_input = {-1, 0};
  for (size_t i = 0; i < dqs.size(); ++i) {
    for (int j = 0; j < 3; ++j) chain.extra_inputs.push_back(j < dqs[i]->num_inputs() ? dqs[i]->input(j) : nullptr);
    chain.bypass.push_back({static_cast<int>(i), -1 - 3 * static_cast<int>(i), dqs[i]});
  }
  return true;
}

// The chain at `op` (of type `type`, one input, only its first output
// read): the op reading a dequantized 8-bit tensor, then QuantizeLinear.
// The DequantizeLinear is bypassed: the chain reads the quantized source as
// its extra inputs.
bool MatchBypassedStep(const ir::Node& op, std::string_view type, const ir::Graph& graph,
                       const std::function<bool(const ir::Value*)>& is_constant,
                       const std::function<bool(const ir::Node*)>& skip,
                       const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  if (op.op_type() != type || !InDefaultDomain(op) || !OnlyFirstOutput(op) || op.num_inputs() != 1)
    return false;
  const ir::Node* dq = Dequantizer(op.input(0), is_constant);
  if (dq == nullptr || is_constant(dq->input(0))) return false;
  const ir::Node* q = SoleConsumer(op.output(0), graph);
  if (!IsQdqNode(q, "QuantizeLinear", is_constant) || skip(q) || taken.contains(q) || q->input(0) != op.output(0))
    return false;
  chain.nodes = {&op, q};
  chain.chained_input = {-1, 0};
  for (int j = 0; j < 3; ++j) chain.extra_inputs.push_back(j < dq->num_inputs() ? dq->input(j) : nullptr);
  chain.bypass.push_back({0, -1, dq});
  return true;
}

// A pooling chain at a MaxPool whose DequantizeLinear has other readers too
// (an Inception module's pooling branch): MaxPool then QuantizeLinear,
// reading the quantized source as extra inputs, the DequantizeLinear
// bypassed.
bool MatchPoolBypass(const ir::Node& op, const ir::Graph& graph,
                     const std::function<bool(const ir::Value*)>& is_constant,
                     const std::function<bool(const ir::Node*)>& skip,
                     const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  return MatchBypassedStep(op, "MaxPool", graph, is_constant, skip, taken, chain);
}

// A lookup chain at `op` whose DequantizeLinear has other readers too (the
// GELU's x / sqrt(2) and x * ...): it starts at the op, reads the quantized
// source as its extra inputs and bypasses the DequantizeLinear.
bool MatchTableBypass(const ir::Node& op, const ir::Graph& graph,
                      const std::function<bool(const ir::Value*)>& is_constant,
                      const std::function<bool(const ir::Value*)>& is_scalar,
                      const std::function<bool(const ir::Node*)>& skip,
                      const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  if (!InDefaultDomain(op) || !OnlyFirstOutput(op)) return false;
  for (int i = 0; i < op.num_inputs(); ++i) {
    const ir::Node* dq = Dequantizer(op.input(i), is_constant);
    int at = -1;
    if (dq == nullptr || is_constant(dq->input(0)) || !IsTableStep(op, op.input(i), is_constant, is_scalar, &at))
      continue;
    chain.nodes = {&op};
    chain.chained_input = {-1};
    if (!ExtendTable(op.output(0), graph, is_constant, is_scalar, skip, taken, chain)) return false;
    for (int j = 0; j < 3; ++j) chain.extra_inputs.push_back(j < dq->num_inputs() ? dq->input(j) : nullptr);
    chain.bypass.push_back({at, -1, dq});
    return true;
  }
  return false;
}

// The global average pooling chain at `op`, if any: GlobalAveragePool of a
// dequantized 8-bit tensor, then QuantizeLinear. The DequantizeLinear is
// bypassed (a squeeze-and-excitation block reads its result again in its
// Mul); the kernel averages the 8-bit values exactly.
bool MatchGlobalAveragePool(const ir::Node& op, const ir::Graph& graph,
                            const std::function<bool(const ir::Value*)>& is_constant,
                            const std::function<bool(const ir::Node*)>& skip,
                            const absl::flat_hash_set<const ir::Node*>& taken, FusionChain& chain) {
  return MatchBypassedStep(op, "GlobalAveragePool", graph, is_constant, skip, taken, chain);
}

}  // namespace

std::vector<FusionChain> FindQuantizedChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                             const std::function<bool(const ir::Value*)>& is_constant,
                                             const std::function<bool(const ir::Value*)>& is_scalar,
                                             const std::function<bool(const ir::Node*)>& skip) {
  std::vector<FusionChain> chains;
  absl::flat_hash_set<const ir::Node*> taken;
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchWeighted(*node, graph, is_constant, skip, taken, chain)) Finish(chain, taken, chains);
  }
  // Before the elementwise chains: a SiLU quantized after its Sigmoid is a
  // Mul of two quantized values too, better one table.
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node) || !IsQdqNode(node, "DequantizeLinear", is_constant) ||
        is_constant(node->input(0)))
      continue;
    FusionChain chain;
    if (MatchTableJoin(*node, graph, is_constant, is_scalar, skip, taken, chain))
      Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchBinary(*node, graph, is_constant, is_scalar, skip, taken, chain)) Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchTable(*node, graph, is_constant, is_scalar, skip, taken, chain)) Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchPool(*node, graph, is_constant, skip, taken, chain)) Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchTableBypass(*node, graph, is_constant, is_scalar, skip, taken, chain)) Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchConcat(*node, graph, is_constant, skip, taken, chain)) Finish(chain, taken, chains);
  }
  for (const ir::Node* node : order) {
    if (skip(node) || taken.contains(node)) continue;
    FusionChain chain;
    if (MatchPoolBypass(*node, graph, is_constant, skip, taken, chain) ||
        MatchGlobalAveragePool(*node, graph, is_constant, skip, taken, chain)) {
      Finish(chain, taken, chains);
    }
  }
  return chains;
}

namespace {

// What a quantized chain can do with channels-last 8-bit values.
enum class LayoutRole {
  kNone,
  kConv2d,  // a 2-D Conv: source and result each in either layout
  kBinary,  // Add / Sub / Mul / Div of two quantized operands: all in one layout
  kTable,   // DequantizeLinear -> elementwise op -> QuantizeLinear: source and result each in either layout
  kConcat,  // Concat of quantized inputs: all in one layout (the axis mapped)
  kPool,    // a 2-D max or global average pooling chain: source and result each in either layout
};

bool ScalarParameters(const ir::Node& qdq, const std::function<bool(const ir::Value*)>& is_scalar) {
  return qdq.num_inputs() >= 2 && is_scalar(qdq.input(1)) &&
         (qdq.num_inputs() < 3 || !Present(qdq.input(2)) || is_scalar(qdq.input(2)));
}

LayoutRole RoleOf(const FusionChain& chain, const std::function<bool(const ir::Value*)>& is_scalar) {
  if (chain.kind != FusionKind::kQuantized || chain.tail().op_type() != "QuantizeLinear" ||
      !ScalarParameters(chain.tail(), is_scalar)) {
    return LayoutRole::kNone;
  }
  const std::string& head = chain.head().op_type();
  if (head == "Add" || head == "Sub" || head == "Mul" || head == "Div") {
    if (chain.bypass.size() != 2) return LayoutRole::kNone;  // a float constant operand
    for (const FusionChain::Bypass& by : chain.bypass) {
      if (!ScalarParameters(*by.dequantize, is_scalar)) return LayoutRole::kNone;
    }
    return LayoutRole::kBinary;
  }
  if (head == "Concat") {
    if (chain.bypass.size() != static_cast<size_t>(chain.head().num_inputs())) return LayoutRole::kNone;
    for (const FusionChain::Bypass& by : chain.bypass) {
      if (!ScalarParameters(*by.dequantize, is_scalar)) return LayoutRole::kNone;
    }
    const int64_t axis = chain.head().GetInt("axis").value_or(99);
    return axis >= -4 && axis < 4 ? LayoutRole::kConcat : LayoutRole::kNone;
  }
  if (chain.extra_inputs.size() == kQuantizedExtras) {
    const ir::Node* op = nullptr;
    for (const ir::Node* n : chain.nodes) {
      if (n->op_type() == "Conv") op = n;
    }
    const ir::Value* w = chain.extra_inputs[kQwData];
    const ir::Value* xs = chain.extra_inputs[kQxScale];
    const ir::Value* xz = chain.extra_inputs[kQxZeroPoint];
    if (op == nullptr || w == nullptr || w->initializer() == nullptr || w->initializer()->dims.size() != 4 ||
        xs == nullptr || !is_scalar(xs) || (xz != nullptr && !is_scalar(xz))) {
      return LayoutRole::kNone;
    }
    return LayoutRole::kConv2d;
  }
  if (head == "GlobalAveragePool") {
    return chain.bypass.size() == 1 && ScalarParameters(*chain.bypass[0].dequantize, is_scalar)
               ? LayoutRole::kPool
               : LayoutRole::kNone;
  }
  for (const ir::Node* n : chain.nodes) {
    if (n->op_type() != "MaxPool") continue;
    const ir::Node& source = head == "DequantizeLinear" ? chain.head() : *chain.bypass[0].dequantize;
    const std::optional<std::vector<int64_t>> kernel = n->GetInts("kernel_shape");
    const bool two_d = kernel.has_value() && kernel->size() == 2;
    return two_d && ScalarParameters(source, is_scalar) ? LayoutRole::kPool : LayoutRole::kNone;
  }
  if (chain.nodes.size() >= 3 && head == "DequantizeLinear" && !IsQuantizedMovementOp(*chain.nodes[1]) &&
      ScalarParameters(chain.head(), is_scalar)) {
    return LayoutRole::kTable;
  }
  if (chain.bypass.size() == 1 && chain.extra_inputs.size() == 3 && head != "DequantizeLinear" &&
      ScalarParameters(*chain.bypass[0].dequantize, is_scalar)) {
    return LayoutRole::kTable;  // a lookup chain bypassing its DequantizeLinear
  }
  return LayoutRole::kNone;
}

// The quantized values a chain of `role` reads.
std::vector<const ir::Value*> Sources(const FusionChain& chain, LayoutRole role) {
  switch (role) {
    case LayoutRole::kConv2d:
      return {chain.extra_inputs[kQxData]};
    case LayoutRole::kBinary:
      return {chain.bypass[0].dequantize->input(0), chain.bypass[1].dequantize->input(0)};
    case LayoutRole::kTable:
    case LayoutRole::kPool:
      return {chain.bypass.empty() ? chain.head().input(0) : chain.extra_inputs[0]};
    case LayoutRole::kConcat: {
      std::vector<const ir::Value*> in;
      for (const FusionChain::Bypass& by : chain.bypass) in.push_back(by.dequantize->input(0));
      return in;
    }
    case LayoutRole::kNone:
      break;
  }
  return {};
}

}  // namespace

void PlanQuantizedLayouts(std::vector<FusionChain>& chains, const ir::Graph& graph,
                          const absl::flat_hash_set<const ir::Node*>& elided,
                          const std::function<bool(const ir::Value*)>& is_scalar) {
  std::vector<LayoutRole> roles(chains.size(), LayoutRole::kNone);
  absl::flat_hash_map<const ir::Node*, size_t> chain_of;
  absl::flat_hash_map<const ir::Value*, size_t> produced_by;
  for (size_t i = 0; i < chains.size(); ++i) {
    roles[i] = RoleOf(chains[i], is_scalar);
    for (const ir::Node* n : chains[i].nodes) chain_of[n] = i;
    if (roles[i] != LayoutRole::kNone) produced_by[chains[i].tail().output(0)] = i;
  }
  // Values known to be 4-D: a 2-D Conv's source and result, an elementwise
  // chain's result from 4-D operands, a lookup chain's source and result
  // together.
  absl::flat_hash_set<const ir::Value*> four_d;
  for (size_t i = 0; i < chains.size(); ++i) {
    if (roles[i] != LayoutRole::kConv2d) continue;
    four_d.insert(chains[i].extra_inputs[kQxData]);
    four_d.insert(chains[i].tail().output(0));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < chains.size(); ++i) {
      const ir::Value* out = chains[i].tail().output(0);
      std::vector<const ir::Value*> in = Sources(chains[i], roles[i]);
      if (roles[i] == LayoutRole::kBinary) {
        if (!four_d.contains(out) && four_d.contains(in[0]) && four_d.contains(in[1]))
          changed |= four_d.insert(out).second;
      } else if (roles[i] == LayoutRole::kConcat) {  // the same rank in and out
        bool any = four_d.contains(out);
        for (const ir::Value* v : in) any = any || four_d.contains(v);
        if (!any) continue;
        changed |= four_d.insert(out).second;
        for (const ir::Value* v : in) changed |= four_d.insert(v).second;
      } else if ((roles[i] == LayoutRole::kTable || roles[i] == LayoutRole::kPool) &&
                 four_d.contains(in[0]) != four_d.contains(out)) {
        four_d.insert(in[0]);
        four_d.insert(out);
        changed = true;
      }
    }
  }
  // Every reader must take the value channels-last.
  auto readers_accept = [&](const ir::Value* v) {
    if (!Present(v) || v->IsGraphOutput() || v->graph() != &graph) return false;
    for (const ir::Use& use : v->uses()) {
      const ir::Node* u = use.node;
      if (u->graph() != &graph || u->op_type() != "DequantizeLinear" || use.input_index != 0) return false;
      auto c = chain_of.find(u);
      if (c != chain_of.end()) {
        LayoutRole role = roles[c->second];
        if ((role != LayoutRole::kConv2d && role != LayoutRole::kTable && role != LayoutRole::kPool) ||
            &chains[c->second].head() != u)
          return false;
        continue;
      }
      if (!elided.contains(u)) return false;
      for (const ir::Use& read : u->output(0)->uses()) {
        auto r = chain_of.find(read.node);
        if (r == chain_of.end()) return false;
        LayoutRole role = roles[r->second];
        if (role == LayoutRole::kNone) return false;
      }
    }
    return true;
  };
  absl::flat_hash_set<const ir::Value*> nhwc;
  for (const auto& [v, i] : produced_by) {
    if (four_d.contains(v) && readers_accept(v)) nhwc.insert(v);
  }
  // An elementwise or concatenation chain's values are all channels-last or none.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < chains.size(); ++i) {
      if (roles[i] != LayoutRole::kBinary && roles[i] != LayoutRole::kConcat) continue;
      std::vector<const ir::Value*> values = Sources(chains[i], roles[i]);
      values.push_back(chains[i].tail().output(0));
      bool all = true;
      for (const ir::Value* v : values) all = all && nhwc.contains(v);
      if (all) continue;
      for (const ir::Value* v : values) changed |= nhwc.erase(v) > 0;
    }
  }
  for (size_t i = 0; i < chains.size(); ++i) {
    if (roles[i] == LayoutRole::kNone) continue;
    chains[i].nhwc_in = nhwc.contains(Sources(chains[i], roles[i])[0]);
    chains[i].nhwc_out = nhwc.contains(chains[i].tail().output(0));
  }
}

namespace {

// The tensor of a constant (an initializer or a Constant node's value), or
// null.
const pb::TensorProto* ConstantProto(const ir::Value* v) {
  if (!Present(v)) return nullptr;
  if (v->IsConstant()) return v->initializer();
  const ir::Node* p = v->kind() == ir::ValueKind::kNodeOutput ? v->producer() : nullptr;
  if (p == nullptr || p->op_type() != "Constant" || !InDefaultDomain(*p)) return nullptr;
  const ir::Attribute* a = p->FindAttribute("value");
  if (a == nullptr || a->type() != pb::kAttrTensor || !a->proto.t) return nullptr;
  return a->proto.t.get();
}

// The dims of a constant, or nullopt.
std::optional<std::vector<int64_t>> ConstantDims(const ir::Value* v) {
  const pb::TensorProto* t = ConstantProto(v);
  return t != nullptr ? std::optional<std::vector<int64_t>>(t->dims) : std::nullopt;
}

// The element type of a constant, or nullopt.
std::optional<int32_t> ConstantType(const ir::Value* v) {
  const pb::TensorProto* t = ConstantProto(v);
  return t != nullptr ? std::optional<int32_t>(t->data_type) : std::nullopt;
}

// The element count of `dims`, or -1 when a dim is negative or the product
// would overflow.
int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return -1;
    n *= d;
  }
  return n;
}

// A one-output node `op` added before `at`, named after `base`.
absl::StatusOr<ir::Value*> EmitBefore(ir::Graph& graph, ir::Node* at, const std::string& base,
                                      const std::string& op, std::vector<ir::Value*> inputs,
                                      std::vector<pb::AttributeProto> attrs = {}) {
  ir::NodeSpec spec;
  spec.op_type = op;
  spec.name = graph.FreshName(absl::StrCat(base, "/", op));
  spec.inputs = std::move(inputs);
  spec.outputs = {graph.FreshName(absl::StrCat(base, "/", op, "_out"))};
  spec.attributes = std::move(attrs);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * n, graph.AddNode(std::move(spec), ir::Position::Before(at)));
  return n->output(0);
}

// The attributes of `node` (none holds a graph).
std::vector<pb::AttributeProto> PlainAttributes(const ir::Node& node) {
  std::vector<pb::AttributeProto> attrs;
  for (const ir::Attribute& a : node.attributes()) {
    if (!a.g && a.graphs.empty()) attrs.push_back(a.proto);
  }
  return attrs;
}

// `node`'s output 0 replaced by `out`, which takes its name and type; the
// node removed.
absl::Status ReplaceByValue(ir::Graph& graph, ir::Node* node, ir::Value* out) {
  ir::Value* old = node->output(0);
  if (old->type() != nullptr) out->set_type(*old->type());
  const std::string name = old->name();
  ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(old, out));
  ONNXKIT_RETURN_IF_ERROR(graph.RemoveNode(node));
  return graph.RenameValue(out, name);
}

// Writes out one QLinearConv / QLinearMatMul; false (nothing changed) when
// its parameters do not allow it.
absl::StatusOr<bool> ExpandQLinear(ir::Graph& graph, ir::Node* node, int64_t opset) {
  const bool conv = node->op_type() == "QLinearConv";
  if (node->num_inputs() < 8 || node->num_inputs() > (conv ? 9 : 8) || !OnlyFirstOutput(*node)) return false;
  for (int i = 0; i < 8; ++i) {  // all required (a missing zero point would change a QuantizeLinear's type)
    if (!Present(node->input(i))) return false;
  }
  // Per-tensor x and y parameters; w's per tensor or one per output channel
  // (a Conv's axis 0, a 2-D MatMul weight's axis 1), zero points alike.
  for (int i : {1, 2, 6, 7}) {
    if (!Present(node->input(i))) continue;
    std::optional<std::vector<int64_t>> d = ConstantDims(node->input(i));
    if (!d || Elements(*d) != 1 || d->size() > 1) return false;
  }
  for (int i : {1, 4, 6}) {
    if (ConstantType(node->input(i)) != pb::kFloat) return false;
  }
  for (int i : {2, 5, 7}) {
    const std::optional<int32_t> t = ConstantType(node->input(i));
    if (t != pb::kUint8 && t != pb::kInt8) return false;
  }
  std::optional<std::vector<int64_t>> ws = ConstantDims(node->input(4));
  if (!ws || ws->size() > 1 || Elements(*ws) < 1) return false;
  if (Present(node->input(5))) {
    std::optional<std::vector<int64_t>> wz = ConstantDims(node->input(5));
    if (!wz || *wz != *ws) return false;
  }
  std::optional<std::vector<int64_t>> w = ConstantDims(node->input(3));
  if (conv && !w) return false;  // the weights of a QLinearConv constant
  std::optional<int64_t> axis;
  if (ws->size() == 1 && (*ws)[0] > 1) {
    if (opset < 13 || !w || w->size() < 2) return false;
    axis = conv ? 0 : static_cast<int64_t>(w->size()) - 1;
    if ((*w)[static_cast<size_t>(*axis)] != (*ws)[0]) return false;
  }
  if (conv && w->size() < 3) return false;  // the Conv kernel's error would name the written-out nodes
  ir::Value* bias = conv && node->num_inputs() == 9 && Present(node->input(8)) ? node->input(8) : nullptr;
  if (bias != nullptr) {  // int32 [M], as the operator requires
    const std::optional<std::vector<int64_t>> b = ConstantDims(bias);
    const std::optional<int32_t> type = ConstantType(bias);
    if (!b || b->size() != 1 || (*b)[0] != (*w)[0] || type != pb::kInt32) return false;
  }

  const std::string base = node->name().empty() ? std::string(node->op_type()) : node->name();
  auto emit = [&](std::string op, std::vector<ir::Value*> inputs,
                  std::vector<pb::AttributeProto> attrs = {}) {
    return EmitBefore(graph, node, base, op, std::move(inputs), std::move(attrs));
  };
  auto parameters = [&](int first) {
    std::vector<ir::Value*> in = {node->input(first), node->input(first + 1)};
    if (Present(node->input(first + 2))) in.push_back(node->input(first + 2));
    return in;
  };
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, emit("DequantizeLinear", parameters(0)));
  std::vector<pb::AttributeProto> w_attrs;
  if (axis) w_attrs.push_back(ir::IntAttr("axis", *axis));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * wf, emit("DequantizeLinear", parameters(3), w_attrs));
  std::vector<ir::Value*> op_inputs = {x, wf};
  if (bias != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * b, emit("Cast", {bias}, {ir::IntAttr("to", pb::kFloat)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scale, emit("Mul", {node->input(1), node->input(4)}));
    ONNXKIT_ASSIGN_OR_RETURN(b, emit("Mul", {b, scale}));
    op_inputs.push_back(b);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, emit(conv ? "Conv" : "MatMul", op_inputs, PlainAttributes(*node)));
  std::vector<ir::Value*> q = {y, node->input(6)};
  if (Present(node->input(7))) q.push_back(node->input(7));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, emit("QuantizeLinear", q));
  ONNXKIT_RETURN_IF_ERROR(ReplaceByValue(graph, node, out));
  return true;
}

// The value of a one-element float constant, or nullopt.
std::optional<float> ConstantFloat(const ir::Value* v) {
  const pb::TensorProto* t = ConstantProto(v);
  if (t == nullptr || Elements(t->dims) != 1 || t->data_type != pb::kFloat) return std::nullopt;
  absl::StatusOr<Tensor> tensor = TensorFromProto(*t);
  if (!tensor.ok() || tensor->size() != 1 || tensor->dtype() != pb::kFloat) return std::nullopt;
  return tensor->data<float>()[0];
}

// A MaxPool of 8-bit values a QuantizeLinear made (QOperator models pool
// the quantized tensor itself) as DequantizeLinear, MaxPool and
// QuantizeLinear with that node's scale and zero point, which the pooling
// chains take: exact, as the scale is positive (max commutes with the
// increasing dequantization, and quantizing a dequantized value with the
// same parameters gives it back).
absl::StatusOr<bool> WrapQuantizedMaxPool(ir::Graph& graph, ir::Node* node) {
  if (node->num_inputs() != 1 || !OnlyFirstOutput(*node) || !Present(node->input(0))) return false;
  const ir::Value* in = node->input(0);
  const ir::Node* q = in->kind() == ir::ValueKind::kNodeOutput ? in->producer() : nullptr;
  if (q == nullptr || q->op_type() != "QuantizeLinear" || !InDefaultDomain(*q) || q->num_inputs() < 2)
    return false;
  if (q->GetInt("output_dtype").value_or(0) != 0 || q->GetInt("block_size").value_or(0) != 0) return false;
  std::optional<float> scale = ConstantFloat(q->input(1));
  if (!scale || !(*scale > 0) || !std::isfinite(*scale)) return false;
  const bool zero_point = q->num_inputs() > 2 && Present(q->input(2));
  if (zero_point) {
    std::optional<std::vector<int64_t>> z = ConstantDims(q->input(2));
    if (!z || Elements(*z) != 1 || z->size() > 1) return false;
  }
  std::vector<ir::Value*> parameters = {q->input(1)};
  if (zero_point) parameters.push_back(q->input(2));
  const std::string base = node->name().empty() ? std::string("MaxPool") : node->name();
  std::vector<ir::Value*> dq = {node->input(0)};
  dq.insert(dq.end(), parameters.begin(), parameters.end());
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, EmitBefore(graph, node, base, "DequantizeLinear", dq));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pooled,
                           EmitBefore(graph, node, base, "MaxPool", {x}, PlainAttributes(*node)));
  std::vector<ir::Value*> qin = {pooled};
  qin.insert(qin.end(), parameters.begin(), parameters.end());
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, EmitBefore(graph, node, base, "QuantizeLinear", qin));
  ONNXKIT_RETURN_IF_ERROR(ReplaceByValue(graph, node, out));
  return true;
}

// Merges the DequantizeLinear nodes of one value with the same scale and
// zero point (each QOperator op written out dequantizes its inputs itself:
// a SiLU's QLinearSigmoid and QLinearMul then read x through two), so that
// the chains see one reader with several uses. Returns how many went.
absl::StatusOr<int> MergeDequantizers(ir::Graph& graph) {
  auto same = [](const ir::Node& a, const ir::Node& b) {
    if (a.num_inputs() != b.num_inputs()) return false;
    for (int i = 1; i < a.num_inputs(); ++i) {
      if (a.input(i) != b.input(i)) return false;
    }
    for (std::string_view attr : {"axis", "block_size", "output_dtype"}) {
      if (a.GetInt(attr) != b.GetInt(attr)) return false;
    }
    return a.attributes().size() == b.attributes().size();
  };
  std::vector<std::pair<ir::Node*, ir::Node*>> merges;  // (kept, merged)
  absl::flat_hash_set<const ir::Node*> merged;
  for (ir::Node* n : graph.nodes()) {
    if (n->op_type() != "DequantizeLinear" || !InDefaultDomain(*n) || !OnlyFirstOutput(*n) ||
        n->num_inputs() < 2 || !Present(n->input(0)) || merged.contains(n) || n->output(0)->IsGraphOutput()) {
      continue;
    }
    for (const ir::Use& use : n->input(0)->uses()) {
      ir::Node* other = use.node;
      if (other == n || use.input_index != 0 || other->graph() != &graph || merged.contains(other) ||
          other->op_type() != "DequantizeLinear" || !InDefaultDomain(*other) || !OnlyFirstOutput(*other) ||
          other->output(0)->IsGraphOutput() || !same(*n, *other)) {
        continue;
      }
      merged.insert(other);
      merges.emplace_back(n, other);
    }
  }
  for (auto& [kept, gone] : merges) {
    ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(gone->output(0), kept->output(0)));
    ONNXKIT_RETURN_IF_ERROR(graph.RemoveNode(gone));
  }
  return static_cast<int>(merges.size());
}

}  // namespace

absl::StatusOr<int> ExpandQLinearOps(ir::Graph& graph, int64_t opset) {
  if (opset < 10) return 0;
  std::vector<ir::Node*> found;
  for (ir::Node* n : graph.nodes()) {
    if (InDefaultDomain(*n) && (n->op_type() == "QLinearConv" || n->op_type() == "QLinearMatMul"))
      found.push_back(n);
  }
  int expanded = 0;
  for (ir::Node* n : found) {
    ONNXKIT_ASSIGN_OR_RETURN(bool done, ExpandQLinear(graph, n, opset));
    expanded += done;
  }
  std::vector<ir::Node*> pools;
  for (ir::Node* n : graph.nodes()) {
    if (InDefaultDomain(*n) && n->op_type() == "MaxPool") pools.push_back(n);
  }
  for (ir::Node* n : pools) {
    ONNXKIT_ASSIGN_OR_RETURN(bool done, WrapQuantizedMaxPool(graph, n));
    expanded += done;
  }
  ONNXKIT_ASSIGN_OR_RETURN(int merged, MergeDequantizers(graph));
  return expanded + merged;
}

}  // namespace onnxkit::runner
