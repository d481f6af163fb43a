// Finding the transformer chains of runner/fusion.h (kind kTransformer):
//
//   MatMul + bias:  %m = MatMul(%x, %W); %y = Add(%m, %b)     (%W, %b constant)
//   dynamic int8:   %i = MatMulInteger(%a, %B, ...); %f = Cast(%i, to=float);
//                   %y = Mul(%f, %s)
//   attention:      %s = MatMul(%q, %kt); [%d = Div(%s, %c) or Mul;]
//                   [%w = Where(%cond, %d, %fill) or Where(%cond, %fill, %d);]
//                   [%m = Add(%w, %mask);] %p = Softmax(%m); %y = MatMul(%p, %v)
//   Add + norm:     %x = Add(%a, %b); %y = LayerNormalization(%x, %scale, %bias)
//   written-out norm: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div
//                   [, Mul by gamma [, Add of beta]] (DecomposedLayerNormChain)
//   RMS norm:       Pow(%x, 2) or Mul(%x, %x), ReduceMean, Add, Sqrt, then
//                   Div(%x, %s), or Div(1, %s) / Reciprocal and Mul by %x;
//                   [, Mul by gamma] (RmsNormChain)
//   GELU (erf):     %d = Div(%x, %c); %e = Erf(%d); %s = Add(%e, %one);
//                   %p = Mul(%x, %s); %y = Mul(%p, %half)     (%c, %one, %half constant)
//   SiLU:           %s = Sigmoid(%x); %y = Mul(%x, %s) [; %z = Mul(%y, %u)]
//                   (SwiGLU's gate times its other projection %u)
//   Mish:           %s = Softplus(%x); %t = Tanh(%s); %y = Mul(%x, %t)
//
// Either operand order of Add and Mul. The kernel (runner/cpu/transformer.h)
// checks shapes and types and computes the same expression in one pass; the
// GELU, SiLU and Mish chains' %x is read by two of their nodes, both from
// outside the chain.
#include <functional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "lib/io/proto.h"
#include "runner/fusion.h"

namespace onnxkit::runner {
namespace {

bool DefaultDomain(const ir::Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// The one node of `graph` using `v` (once), with one output; null otherwise
// or when `v` is a graph output.
const ir::Node* OnlyUser(const ir::Value* v, const ir::Graph& graph) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 1 || v->IsGraphOutput()) return nullptr;
  const ir::Node* n = v->uses()[0].node;
  if (n->graph() != &graph || !DefaultDomain(*n) || n->num_outputs() != 1) return nullptr;
  return n;
}

// `node` is `op` with two inputs, one of them `v` and the other constant
// (and not `v`); returns the slot of `v`, or -1.
int BinaryWithConstant(const ir::Node* node, std::string_view op, const ir::Value* v,
                       const std::function<bool(const ir::Value*)>& is_constant) {
  if (node == nullptr || node->op_type() != op || node->num_inputs() != 2) return -1;
  const ir::Value* a = node->input(0);
  const ir::Value* b = node->input(1);
  if (a == nullptr || b == nullptr || a == b) return -1;
  if (a == v && is_constant(b)) return 0;
  if (b == v && is_constant(a)) return 1;
  return -1;
}

struct Link {
  const ir::Node* node;
  int slot;
};

// Appends `links` to `chain` (nodes, chained inputs, input offsets) and
// marks their nodes taken.
void AppendLinks(const std::vector<Link>& links, FusionChain& chain,
                 absl::flat_hash_set<const ir::Node*>& taken) {
  for (const Link& l : links) {
    taken.insert(l.node);
    chain.nodes.push_back(l.node);
    chain.chained_input.push_back(l.slot);
    chain.input_offset.push_back(chain.num_inputs);
    chain.num_inputs += l.node->num_inputs();
  }
}

// The GELU chain starting at `div`, or empty.
std::vector<Link> GeluChain(const ir::Node& div, const ir::Graph& graph,
                            const std::function<bool(const ir::Value*)>& is_constant) {
  if (div.op_type() != "Div" || div.num_inputs() != 2 || div.num_outputs() != 1) return {};
  const ir::Value* x = div.input(0);
  if (x == nullptr || div.input(1) == nullptr || div.input(1) == x || !is_constant(div.input(1))) return {};
  const ir::Node* erf = OnlyUser(div.output(0), graph);
  if (erf == nullptr || erf->op_type() != "Erf" || erf->num_inputs() != 1) return {};
  const ir::Node* add = OnlyUser(erf->output(0), graph);
  int add_slot = BinaryWithConstant(add, "Add", erf->output(0), is_constant);
  if (add_slot < 0) return {};
  const ir::Node* mul = OnlyUser(add->output(0), graph);
  if (mul == nullptr || mul->op_type() != "Mul" || mul->num_inputs() != 2) return {};
  int mul_slot = mul->input(0) == add->output(0) ? 0 : 1;
  if (mul->input(mul_slot) != add->output(0) || mul->input(1 - mul_slot) != x) return {};
  const ir::Node* half = OnlyUser(mul->output(0), graph);
  int half_slot = BinaryWithConstant(half, "Mul", mul->output(0), is_constant);
  if (half_slot < 0) return {};
  return {{&div, -1}, {erf, 0}, {add, add_slot}, {mul, mul_slot}, {half, half_slot}};
}

// The MatMul + bias chain starting at `matmul`, or empty.
std::vector<Link> MatMulBiasChain(const ir::Node& matmul, const ir::Graph& graph,
                                  const std::function<bool(const ir::Value*)>& is_constant) {
  if (matmul.op_type() != "MatMul" || matmul.num_inputs() != 2 || matmul.num_outputs() != 1) return {};
  if (matmul.input(0) == nullptr || matmul.input(1) == nullptr || !is_constant(matmul.input(1))) return {};
  const ir::Node* add = OnlyUser(matmul.output(0), graph);
  int slot = BinaryWithConstant(add, "Add", matmul.output(0), is_constant);
  if (slot < 0) return {};
  return {{&matmul, -1}, {add, slot}};
}

// MatMulInteger, the Cast of its int32 product to float and the Mul of
// that by a scale (how dynamic quantization writes a MatMul: the scale is
// the product of the activation's and the weight's), or empty. The scale
// may be computed in the run; the kernel checks its shape.
std::vector<Link> MatMulIntegerScaleChain(const ir::Node& mmi, const ir::Graph& graph) {
  if (mmi.op_type() != "MatMulInteger" || mmi.num_inputs() < 2 || mmi.num_outputs() != 1 ||
      mmi.input(0) == nullptr || mmi.input(1) == nullptr) {
    return {};
  }
  const ir::Node* cast = OnlyUser(mmi.output(0), graph);
  if (cast == nullptr || cast->op_type() != "Cast" || cast->num_inputs() != 1) return {};
  const ir::Attribute* to = cast->FindAttribute("to");
  if (to == nullptr || to->type() != pb::kAttrInt || to->proto.i != pb::kFloat) return {};
  const ir::Node* mul = OnlyUser(cast->output(0), graph);
  if (mul == nullptr || mul->op_type() != "Mul" || mul->num_inputs() != 2) return {};
  const ir::Value* f = cast->output(0);
  if (mul->input(0) == f && mul->input(1) != nullptr && mul->input(1) != f)
    return {{&mmi, -1}, {cast, 0}, {mul, 0}};
  if (mul->input(1) == f && mul->input(0) != nullptr && mul->input(0) != f)
    return {{&mmi, -1}, {cast, 0}, {mul, 1}};
  return {};
}

// The attention chain starting at `matmul`, or empty: the Div by the scale,
// the Where of a boolean mask (a causal mask applied by masked_fill) and
// the Add of an additive mask are each optional (a query scaled
// beforehand, no mask). The divisor and the masks may be computed in the
// run; the kernel checks them.
std::vector<Link> AttentionChain(const ir::Node& matmul, const ir::Graph& graph) {
  if (matmul.op_type() != "MatMul" || matmul.num_inputs() != 2 || matmul.num_outputs() != 1 ||
      matmul.input(0) == nullptr || matmul.input(1) == nullptr) {
    return {};
  }
  std::vector<Link> links = {{&matmul, -1}};
  const ir::Node* next = OnlyUser(matmul.output(0), graph);
  if (next != nullptr && next->op_type() == "Div") {
    if (next->num_inputs() != 2 || next->input(0) != links.back().node->output(0) ||
        next->input(1) == nullptr || next->input(1) == next->input(0)) {
      return {};
    }
    links.push_back({next, 0});
    next = OnlyUser(next->output(0), graph);
  } else if (next != nullptr && next->op_type() == "Mul") {  // torch's baddbmm: the scores times alpha
    if (next->num_inputs() != 2 || next->input(0) == nullptr || next->input(1) == nullptr ||
        next->input(0) == next->input(1)) {
      return {};
    }
    links.push_back({next, next->input(0) == matmul.output(0) ? 0 : 1});
    next = OnlyUser(next->output(0), graph);
  }
  if (next != nullptr && next->op_type() == "Where") {  // masked_fill, or torch.where(causal, s, fill)
    const ir::Value* prev = links.back().node->output(0);
    if (next->num_inputs() != 3 || next->input(0) == nullptr || next->input(1) == nullptr ||
        next->input(2) == nullptr || next->input(0) == prev || next->input(1) == next->input(2) ||
        (next->input(1) != prev && next->input(2) != prev)) {
      return {};
    }
    links.push_back({next, next->input(1) == prev ? 1 : 2});
    next = OnlyUser(next->output(0), graph);
  }
  if (next != nullptr && next->op_type() == "Add") {
    const ir::Value* prev = links.back().node->output(0);
    if (next->num_inputs() != 2 || next->input(0) == nullptr || next->input(1) == nullptr ||
        next->input(0) == next->input(1)) {
      return {};
    }
    links.push_back({next, next->input(0) == prev ? 0 : 1});
    next = OnlyUser(next->output(0), graph);
  }
  const ir::Node* softmax = next;
  if (softmax == nullptr || softmax->op_type() != "Softmax" || softmax->num_inputs() != 1) return {};
  links.push_back({softmax, 0});
  const ir::Node* out = OnlyUser(softmax->output(0), graph);
  if (out == nullptr || out->op_type() != "MatMul" || out->num_inputs() != 2 ||
      out->input(0) != softmax->output(0) || out->input(1) == nullptr || out->input(1) == out->input(0)) {
    return {};
  }
  links.push_back({out, 0});
  return links;
}

// The Add + LayerNormalization chain starting at `add`, or empty.
std::vector<Link> AddLayerNormChain(const ir::Node& add, const ir::Graph& graph) {
  if (add.op_type() != "Add" || add.num_inputs() != 2 || add.num_outputs() != 1 || add.input(0) == nullptr ||
      add.input(1) == nullptr) {
    return {};
  }
  const ir::Node* ln = OnlyUser(add.output(0), graph);
  if (ln == nullptr || ln->op_type() != "LayerNormalization" || ln->num_inputs() < 2 ||
      ln->input(0) != add.output(0)) {
    return {};
  }
  for (int i = 1; i < ln->num_inputs(); ++i) {
    if (ln->input(i) == add.output(0)) return {};
  }
  return {{&add, -1}, {ln, 0}};
}

// The layer normalization exporters write before LayerNormalization
// (opset 17) existed, starting at `mean`, or empty:
//   %m = ReduceMean(%x); %d = Sub(%x, %m); %p = Pow(%d, %two);
//   %v = ReduceMean(%p); %e = Add(%v, %eps); %s = Sqrt(%e); %n = Div(%d, %s)
//   [; %g = Mul(%n, %gamma) [; %y = Add(%g, %beta)]]
// with %two, %eps, %gamma, %beta and any axes input constant; the kernel
// checks axes, keepdims, the exponent and the shapes. %d is read by the Pow
// and, as inner input 0, by the Div.
std::vector<Link> DecomposedLayerNormChain(const ir::Node& mean, const ir::Graph& graph,
                                           const std::function<bool(const ir::Value*)>& is_constant,
                                           std::vector<int>* inner_input, std::vector<int>* inner_source) {
  if (mean.op_type() != "ReduceMean" || mean.num_inputs() < 1 || mean.num_outputs() != 1 ||
      mean.input(0) == nullptr) {
    return {};
  }
  auto constant_axes = [&](const ir::Node& n) {
    return n.num_inputs() < 2 || n.input(1) == nullptr || is_constant(n.input(1));
  };
  const ir::Value* x = mean.input(0);
  if (!constant_axes(mean)) return {};
  const ir::Node* sub = OnlyUser(mean.output(0), graph);
  if (sub == nullptr || sub->op_type() != "Sub" || sub->num_inputs() != 2 || sub->input(0) != x ||
      sub->input(1) != mean.output(0)) {
    return {};
  }
  // %d: read by exactly the Pow and the Div.
  const ir::Value* d = sub->output(0);
  if (d == nullptr || d->name().empty() || d->IsGraphOutput() || d->uses().size() != 2) return {};
  const ir::Node* pow = nullptr;
  const ir::Node* div = nullptr;
  for (const ir::Use& u : d->uses()) {
    const ir::Node* n = u.node;
    if (n->graph() != &graph || !DefaultDomain(*n) || n->num_outputs() != 1 || n->num_inputs() != 2)
      return {};
    if (n->op_type() == "Pow" && u.input_index == 0) pow = n;
    if (n->op_type() == "Div" && u.input_index == 0) div = n;
  }
  if (pow == nullptr || div == nullptr || pow->input(1) == nullptr || !is_constant(pow->input(1))) return {};
  const ir::Node* var = OnlyUser(pow->output(0), graph);
  if (var == nullptr || var->op_type() != "ReduceMean" || var->num_inputs() < 1 ||
      var->input(0) != pow->output(0) || !constant_axes(*var)) {
    return {};
  }
  const ir::Node* add = OnlyUser(var->output(0), graph);
  const int add_slot = BinaryWithConstant(add, "Add", var->output(0), is_constant);
  if (add_slot < 0) return {};
  const ir::Node* sqrt = OnlyUser(add->output(0), graph);
  if (sqrt == nullptr || sqrt->op_type() != "Sqrt" || sqrt->num_inputs() != 1) return {};
  if (OnlyUser(sqrt->output(0), graph) != div || div->input(1) != sqrt->output(0)) return {};
  std::vector<Link> links = {{&mean, -1}, {sub, 1}, {pow, 0}, {var, 0}, {add, add_slot}, {sqrt, 0}, {div, 1}};
  inner_input->assign(links.size(), -1);
  inner_source->assign(links.size(), -1);
  inner_input->back() = 0;
  inner_source->back() = 1;  // the Sub's %d
  const ir::Node* scale = OnlyUser(div->output(0), graph);
  const int scale_slot = BinaryWithConstant(scale, "Mul", div->output(0), is_constant);
  if (scale_slot < 0) return links;
  links.push_back({scale, scale_slot});
  const ir::Node* shift = OnlyUser(scale->output(0), graph);
  const int shift_slot = BinaryWithConstant(shift, "Add", scale->output(0), is_constant);
  if (shift_slot >= 0) links.push_back({shift, shift_slot});
  return links;
}

// The root-mean-square normalization as exporters write it (LLaMA's and
// T5's RMSNorm), starting at `head`, or empty:
//   %p = Pow(%x, %two) or Mul(%x, %x); %v = ReduceMean(%p); %e = Add(%v, %eps);
//   %s = Sqrt(%e); then %n = Div(%x, %s), or %r = Div(%one, %s) or
//   Reciprocal(%s) and %n = Mul(%x, %r); [%y = Mul(%n, %gamma)]
// with %two, %eps, %one, %gamma and any axes input constant; the kernel
// checks their values, the axes and the shapes. %x is read outside the
// chain by the head and by the Div or Mul.
std::vector<Link> RmsNormChain(const ir::Node& head, const ir::Graph& graph,
                               const std::function<bool(const ir::Value*)>& is_constant) {
  if (head.num_inputs() != 2 || head.num_outputs() != 1 || head.input(0) == nullptr ||
      head.input(1) == nullptr) {
    return {};
  }
  const ir::Value* x = head.input(0);
  if (head.op_type() == "Pow") {
    if (head.input(1) == x || !is_constant(head.input(1))) return {};
  } else if (head.op_type() != "Mul" || head.input(1) != x) {
    return {};
  }
  const ir::Node* var = OnlyUser(head.output(0), graph);
  if (var == nullptr || var->op_type() != "ReduceMean" || var->num_inputs() < 1 ||
      var->input(0) != head.output(0) ||
      (var->num_inputs() >= 2 && var->input(1) != nullptr && !is_constant(var->input(1)))) {
    return {};
  }
  const ir::Node* add = OnlyUser(var->output(0), graph);
  const int add_slot = BinaryWithConstant(add, "Add", var->output(0), is_constant);
  if (add_slot < 0) return {};
  const ir::Node* sqrt = OnlyUser(add->output(0), graph);
  if (sqrt == nullptr || sqrt->op_type() != "Sqrt" || sqrt->num_inputs() != 1) return {};
  const ir::Value* s = sqrt->output(0);
  std::vector<Link> links = {{&head, -1}, {var, 0}, {add, add_slot}, {sqrt, 0}};
  const ir::Node* next = OnlyUser(s, graph);
  if (next == nullptr) return {};
  const ir::Node* last = next;
  if (next->op_type() == "Div" && next->num_inputs() == 2 && next->input(1) == s && next->input(0) == x) {
    links.push_back({next, 1});
  } else {
    const bool inverse = next->op_type() == "Reciprocal"
                             ? next->num_inputs() == 1
                             : next->op_type() == "Div" && next->num_inputs() == 2 && next->input(1) == s &&
                                   next->input(0) != nullptr && next->input(0) != x &&
                                   is_constant(next->input(0));
    if (!inverse) return {};
    links.push_back({next, next->op_type() == "Div" ? 1 : 0});
    const ir::Node* mul = OnlyUser(next->output(0), graph);
    if (mul == nullptr || mul->op_type() != "Mul" || mul->num_inputs() != 2) return {};
    const ir::Value* r = next->output(0);
    if (mul->input(0) == x && mul->input(1) == r) {
      links.push_back({mul, 1});
    } else if (mul->input(0) == r && mul->input(1) == x) {
      links.push_back({mul, 0});
    } else {
      return {};
    }
    last = mul;
  }
  const ir::Node* scale = OnlyUser(last->output(0), graph);
  const int scale_slot = BinaryWithConstant(scale, "Mul", last->output(0), is_constant);
  if (scale_slot >= 0) links.push_back({scale, scale_slot});
  return links;
}

// The SiLU chain starting at `sigmoid`, with the Mul by another tensor after
// it when there is one (not its own result), or empty.
std::vector<Link> SiluChain(const ir::Node& sigmoid, const ir::Graph& graph) {
  if (sigmoid.op_type() != "Sigmoid" || sigmoid.num_inputs() != 1 || sigmoid.num_outputs() != 1) return {};
  const ir::Value* x = sigmoid.input(0);
  const ir::Value* s = sigmoid.output(0);
  const ir::Node* mul = OnlyUser(s, graph);
  if (x == nullptr || mul == nullptr || mul->op_type() != "Mul" || mul->num_inputs() != 2) return {};
  int slot = -1;
  if (mul->input(0) == x && mul->input(1) == s) slot = 1;
  if (mul->input(0) == s && mul->input(1) == x) slot = 0;
  if (slot < 0) return {};
  std::vector<Link> links = {{&sigmoid, -1}, {mul, slot}};
  const ir::Value* y = mul->output(0);
  const ir::Node* gate = OnlyUser(y, graph);
  if (gate != nullptr && gate->op_type() == "Mul" && gate->num_inputs() == 2) {
    const ir::Value* a = gate->input(0);
    const ir::Value* b = gate->input(1);
    if (a == y && b != nullptr && b != y) links.push_back({gate, 0});
    if (b == y && a != nullptr && a != y) links.push_back({gate, 1});
  }
  return links;
}

// The Mish chain starting at `softplus`, or empty.
std::vector<Link> MishChain(const ir::Node& softplus, const ir::Graph& graph) {
  if (softplus.op_type() != "Softplus" || softplus.num_inputs() != 1 || softplus.num_outputs() != 1)
    return {};
  const ir::Value* x = softplus.input(0);
  const ir::Node* tanh = OnlyUser(softplus.output(0), graph);
  if (x == nullptr || tanh == nullptr || tanh->op_type() != "Tanh" || tanh->num_inputs() != 1) return {};
  const ir::Value* t = tanh->output(0);
  const ir::Node* mul = OnlyUser(t, graph);
  if (mul == nullptr || mul->op_type() != "Mul" || mul->num_inputs() != 2) return {};
  if (mul->input(0) == x && mul->input(1) == t) return {{&softplus, -1}, {tanh, 0}, {mul, 1}};
  if (mul->input(0) == t && mul->input(1) == x) return {{&softplus, -1}, {tanh, 0}, {mul, 0}};
  return {};
}

}  // namespace

std::vector<FusionChain> FindTransformerChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                               const std::function<bool(const ir::Value*)>& is_constant,
                                               const std::function<bool(const ir::Node*)>& skip) {
  std::vector<FusionChain> chains;
  absl::flat_hash_set<const ir::Node*> taken;
  for (const ir::Node* head : order) {
    if (!DefaultDomain(*head) || skip(head) || taken.contains(head)) continue;
    std::vector<int> inner_input, inner_source;
    std::vector<Link> links = GeluChain(*head, graph, is_constant);
    if (links.empty()) links = MatMulBiasChain(*head, graph, is_constant);
    if (links.empty()) links = MatMulIntegerScaleChain(*head, graph);
    if (links.empty()) links = AttentionChain(*head, graph);
    if (links.empty()) links = AddLayerNormChain(*head, graph);
    if (links.empty())
      links = DecomposedLayerNormChain(*head, graph, is_constant, &inner_input, &inner_source);
    if (links.empty()) links = RmsNormChain(*head, graph, is_constant);
    if (links.empty()) links = SiluChain(*head, graph);
    if (links.empty()) links = MishChain(*head, graph);
    if (links.empty()) continue;
    bool free = true;
    for (const Link& l : links) free = free && !skip(l.node) && !taken.contains(l.node);
    if (!free) continue;
    FusionChain chain;
    chain.kind = FusionKind::kTransformer;
    if (!inner_input.empty()) {
      inner_input.resize(links.size(), -1);
      inner_source.resize(links.size(), -1);
      chain.inner_input = std::move(inner_input);
      chain.inner_source = std::move(inner_source);
    }
    AppendLinks(links, chain, taken);
    chains.push_back(std::move(chain));
  }
  return chains;
}

FusionChain PackedWeightsChain(const ir::Node& matmul, const std::vector<const ir::Value*>& packed, int bits,
                               int64_t k) {
  FusionChain chain;
  chain.packed_bits = bits;
  chain.packed_k = k;
  chain.kind = FusionKind::kTransformer;
  absl::flat_hash_set<const ir::Node*> taken;
  AppendLinks({{&matmul, -1}}, chain, taken);
  chain.extra_inputs = packed;
  return chain;
}

namespace {

bool ElementwiseOp(const ir::Node& node, const std::function<bool(const ir::Value*)>& is_constant) {
  if (!DefaultDomain(node) || node.num_outputs() != 1) return false;
  static constexpr std::string_view kUnary[] = {"Tanh", "Erf", "Sigmoid", "Relu",
                                                "Neg",  "Abs", "Sqrt",    "Reciprocal"};
  static constexpr std::string_view kBinary[] = {"Add", "Sub", "Mul", "Div"};
  const std::string& op = node.op_type();
  for (std::string_view u : kUnary) {
    if (op == u) return node.num_inputs() == 1 && node.input(0) != nullptr;
  }
  for (std::string_view b : kBinary) {
    if (op == b) return node.num_inputs() == 2 && node.input(0) != nullptr && node.input(1) != nullptr;
  }
  return op == "Pow" && node.num_inputs() == 2 && node.input(0) != nullptr && node.input(1) != nullptr &&
         node.input(1) != node.input(0) && is_constant(node.input(1));
}

}  // namespace

std::vector<FusionChain> FindElementwiseChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                               const std::function<bool(const ir::Value*)>& is_constant,
                                               const std::function<bool(const ir::Node*)>& skip) {
  std::vector<FusionChain> chains;
  absl::flat_hash_set<const ir::Node*> taken;
  for (const ir::Node* head : order) {
    if (skip(head) || taken.contains(head) || !ElementwiseOp(*head, is_constant)) continue;
    std::vector<Link> links = {{head, -1}};
    for (;;) {
      const ir::Value* v = links.back().node->output(0);
      const ir::Node* next = OnlyUser(v, graph);
      if (next == nullptr || skip(next) || taken.contains(next) || !ElementwiseOp(*next, is_constant)) break;
      // The chain's value is one operand, not both; a Pow's base.
      int slot = -1;
      for (int i = 0; i < next->num_inputs(); ++i) {
        if (next->input(i) == v) slot = slot < 0 ? i : -2;
      }
      if (slot < 0 || (next->op_type() == "Pow" && slot != 0)) break;
      links.push_back({next, slot});
    }
    if (links.size() < kMinElementwiseChain) continue;
    FusionChain chain;
    chain.kind = FusionKind::kElementwise;
    AppendLinks(links, chain, taken);
    chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace onnxkit::runner
