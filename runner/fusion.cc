// Finding Conv chains, and running a chain node by node.
#include "runner/fusion.h"

#include <algorithm>
#include <atomic>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"

namespace onnxkit::runner {
namespace {

bool InDefaultDomain(const ir::Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// The one node of `graph` that uses `v`, using it once; null when `v` is a
// graph output or has any other number of uses.
const ir::Node* SoleConsumer(const ir::Value* v, const ir::Graph& graph) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 1 || v->IsGraphOutput()) return nullptr;
  const ir::Node* n = v->uses()[0].node;
  return n->graph() == &graph && InDefaultDomain(*n) ? n : nullptr;
}

// True when every output but the first is omitted.
bool OnlyFirstOutput(const ir::Node& node) {
  for (int i = 1; i < node.num_outputs(); ++i) {
    const ir::Value* out = node.output(i);
    if (out != nullptr && !out->name().empty()) return false;
  }
  return node.num_outputs() >= 1;
}

// Inputs [first, end) of `node`, where present, are constant.
bool InputsConstant(const ir::Node& node, int first,
                    const std::function<bool(const ir::Value*)>& is_constant) {
  for (int i = first; i < node.num_inputs(); ++i) {
    if (node.input(i) != nullptr && !is_constant(node.input(i))) return false;
  }
  return true;
}

bool IsActivation(const ir::Node& node, int64_t opset,
                  const std::function<bool(const ir::Value*)>& is_constant) {
  if (node.op_type() == "Relu" || node.op_type() == "LeakyRelu" || node.op_type() == "HardSwish")
    return node.num_inputs() == 1;
  // Clip's bounds are attributes before opset 11, optional inputs since.
  if (node.op_type() == "Clip")
    return opset < 11 ? node.num_inputs() == 1 : InputsConstant(node, 1, is_constant);
  return false;
}

// HardSigmoid with alpha 1/6 (as a float: within 1e-7) and beta 1/2, the
// gate of HardSwish written out.
bool IsHardSwishGate(const ir::Node& node) {
  if (node.op_type() != "HardSigmoid") return false;
  const float alpha = node.GetFloat("alpha").value_or(0.2f), beta = node.GetFloat("beta").value_or(0.5f);
  return std::fabs(static_cast<double>(alpha) - 1.0 / 6) <= 1e-7 && beta == 0.5f;
}

// SiLU or HardSwish written out: `v` used exactly twice, by a gate (a
// Sigmoid, or a HardSigmoid with HardSwish's alpha and beta) and by a
// two-input Mul of `v` and that gate's output, which only the Mul reads
// (how exporters write x * sigmoid(x) and, before opset 14, hardswish).
// Sets the two nodes; false otherwise.
bool GatedOf(const ir::Value* v, const ir::Graph& graph, const ir::Node** gate, const ir::Node** mul) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 2 || v->IsGraphOutput()) return false;
  const ir::Node* s = v->uses()[0].node;
  const ir::Node* m = v->uses()[1].node;
  if (m->op_type() == "Sigmoid" || m->op_type() == "HardSigmoid") std::swap(s, m);
  if ((s->op_type() != "Sigmoid" && !IsHardSwishGate(*s)) || s->num_inputs() != 1 || s->num_outputs() != 1 ||
      s->input(0) != v || !InDefaultDomain(*s) || s->graph() != &graph)
    return false;
  if (SoleConsumer(s->output(0), graph) != m || m->op_type() != "Mul" || m->num_inputs() != 2 ||
      m->num_outputs() != 1)
    return false;
  const bool ordered = m->input(0) == v && m->input(1) == s->output(0);
  const bool swapped = m->input(1) == v && m->input(0) == s->output(0);
  if (!ordered && !swapped) return false;
  *gate = s;
  *mul = m;
  return true;
}

// A BatchNormalization the reference runs in inference mode with per-channel
// constant parameters, after a Conv whose weights (and bias) are constant.
bool IsInferenceBatchNorm(const ir::Node& bn, int64_t opset,
                          const std::function<bool(const ir::Value*)>& is_constant) {
  if (bn.op_type() != "BatchNormalization" || bn.num_inputs() != 5 || !InDefaultDomain(bn)) return false;
  if (opset >= 14 && bn.GetInt("training_mode").value_or(0) != 0) return false;
  if (opset < 9 && bn.GetInt("spatial").value_or(1) == 0) return false;
  return InputsConstant(bn, 1, is_constant);
}

bool IsFoldableBatchNorm(const ir::Node& bn, const ir::Node& conv, int64_t opset,
                         const std::function<bool(const ir::Value*)>& is_constant) {
  return IsInferenceBatchNorm(bn, opset, is_constant) && InputsConstant(conv, 1, is_constant);
}

// A Mul or Add of `v` by a constant, after a Conv with constant weights
// (and bias): folded into them (the kernel checks that the constant varies
// only along the channels, else the chain runs node by node).
bool IsFoldableAffine(const ir::Node& node, const ir::Value* v, const ir::Node& conv,
                      const std::function<bool(const ir::Value*)>& is_constant) {
  if ((node.op_type() != "Mul" && node.op_type() != "Add") || node.num_inputs() != 2) return false;
  const ir::Value* other = node.input(0) == v ? node.input(1) : node.input(0);
  return other != nullptr && other != v && is_constant(other) && InputsConstant(conv, 1, is_constant);
}

// A Conv taking `v` as X, with constant weights (and bias): the next
// convolution of a sequence.
bool IsSequenceConv(const ir::Node& node, const ir::Value* v,
                    const std::function<bool(const ir::Value*)>& is_constant) {
  return node.op_type() == "Conv" && node.num_outputs() == 1 && node.num_inputs() >= 2 &&
         node.input(0) == v && node.input(1) != v && (node.num_inputs() < 3 || node.input(2) != v) &&
         InputsConstant(node, 1, is_constant);
}

// A 1x1 Conv of the squeeze-and-excitation pattern: group 1, constant
// weights (and bias), no padding.
bool IsSqueezeConv(const ir::Node& node, const ir::Value* v,
                   const std::function<bool(const ir::Value*)>& is_constant) {
  if (!IsSequenceConv(node, v, is_constant) || node.GetInt("group").value_or(1) != 1) return false;
  for (int64_t p : node.GetInts("pads").value_or(std::vector<int64_t>{})) {
    if (p != 0) return false;
  }
  const std::string pad = node.GetString("auto_pad").value_or("NOTSET");
  return pad == "NOTSET" || pad == "VALID";
}

// Squeeze-and-excitation on `v` (EfficientNet's and MobileNetV3's blocks):
// `v` used by a GlobalAveragePool and a Mul only; the pool's result through
// a 1x1 Conv, an activation (Relu, HardSwish, or SiLU / HardSwish written
// out), a 1x1 Conv and a gate (Sigmoid or HardSigmoid) into that Mul, which
// scales `v` by it per channel. Each value is used once, by the next node.
// Returns the nodes in order (the Mul last), or empty.
std::vector<const ir::Node*> SqueezeExciteOf(const ir::Value* v, const ir::Graph& graph,
                                             const std::function<bool(const ir::Value*)>& is_constant) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 2 || v->IsGraphOutput()) return {};
  const ir::Node* pool = v->uses()[0].node;
  const ir::Node* mul = v->uses()[1].node;
  if (pool->op_type() == "Mul") std::swap(pool, mul);
  if (pool->op_type() != "GlobalAveragePool" || pool->graph() != &graph || !InDefaultDomain(*pool) ||
      pool->num_outputs() != 1 || mul->op_type() != "Mul" || mul->num_inputs() != 2 ||
      mul->num_outputs() != 1 || mul->graph() != &graph || !InDefaultDomain(*mul))
    return {};
  std::vector<const ir::Node*> nodes = {pool};
  const ir::Node* squeeze = SoleConsumer(pool->output(0), graph);
  if (squeeze == nullptr || !IsSqueezeConv(*squeeze, pool->output(0), is_constant)) return {};
  nodes.push_back(squeeze);
  const ir::Value* a = squeeze->output(0);
  const ir::Node* gate = nullptr;
  const ir::Node* gate_mul = nullptr;
  const ir::Node* act = SoleConsumer(a, graph);
  if (act != nullptr && (act->op_type() == "Relu" || act->op_type() == "HardSwish") &&
      act->num_inputs() == 1 && act->num_outputs() == 1) {
    nodes.push_back(act);
    a = act->output(0);
  } else if (GatedOf(a, graph, &gate, &gate_mul)) {
    nodes.insert(nodes.end(), {gate, gate_mul});
    a = gate_mul->output(0);
  } else {
    return {};
  }
  const ir::Node* excite = SoleConsumer(a, graph);
  if (excite == nullptr || !IsSqueezeConv(*excite, a, is_constant)) return {};
  nodes.push_back(excite);
  const ir::Node* scale = SoleConsumer(excite->output(0), graph);
  if (scale == nullptr || (scale->op_type() != "Sigmoid" && scale->op_type() != "HardSigmoid") ||
      scale->num_inputs() != 1 || scale->num_outputs() != 1 || SoleConsumer(scale->output(0), graph) != mul)
    return {};
  const bool ordered = mul->input(0) == v && mul->input(1) == scale->output(0);
  const bool swapped = mul->input(1) == v && mul->input(0) == scale->output(0);
  if (!ordered && !swapped) return {};
  nodes.insert(nodes.end(), {scale, mul});
  return nodes;
}

// A channel shuffle starting at `reshape`: Reshape (to [N, G, C/G, H, W])
// -> Transpose (perm 0, 2, 1, 3, 4) -> Reshape (back to [N, C, H, W]), each
// value used once, shapes constant (the kernel checks their values), then a
// Conv of the sequence. Returns the three nodes and the Conv, or empty.
std::vector<const ir::Node*> ChannelShuffle(const ir::Node& reshape, const ir::Graph& graph,
                                            const std::function<bool(const ir::Value*)>& is_constant) {
  auto is_reshape = [&](const ir::Node& n) {
    return n.op_type() == "Reshape" && n.num_inputs() == 2 && n.input(1) != nullptr && is_constant(n.input(1)) &&
           n.num_outputs() == 1 && n.GetInt("allowzero").value_or(0) == 0;
  };
  if (!is_reshape(reshape)) return {};
  const ir::Node* transpose = SoleConsumer(reshape.output(0), graph);
  if (transpose == nullptr || transpose->op_type() != "Transpose" || transpose->num_outputs() != 1 ||
      transpose->GetInts("perm").value_or(std::vector<int64_t>{}) != std::vector<int64_t>{0, 2, 1, 3, 4})
    return {};
  const ir::Node* back = SoleConsumer(transpose->output(0), graph);
  if (back == nullptr || !is_reshape(*back) || back->input(0) != transpose->output(0)) return {};
  const ir::Node* conv = SoleConsumer(back->output(0), graph);
  if (conv == nullptr || !IsSequenceConv(*conv, back->output(0), is_constant)) return {};
  return {&reshape, transpose, back, conv};
}

// A MaxPool without dilations whose Indices output is omitted: it may end a
// Conv chain (its kernel pools the last convolution's result in oneDNN's
// layout, whose jit pooling kernels take no dilations).
bool IsMaxPool(const ir::Node& node) {
  if (node.op_type() != "MaxPool" || node.num_inputs() != 1 || !OnlyFirstOutput(node)) return false;
  for (int64_t d : node.GetInts("dilations").value_or(std::vector<int64_t>{})) {
    if (d != 1) return false;
  }
  return true;
}

// A GlobalAveragePool: it may end a Conv chain too (its kernel averages
// the last convolution's result in oneDNN's layout: only the means leave
// it).
bool IsEndingGlobalPool(const ir::Node& node) {
  return node.op_type() == "GlobalAveragePool" && node.num_inputs() == 1 && node.num_outputs() == 1;
}

// The uses of `v` when it has exactly two, two nodes of the default domain
// in `graph`: a Conv that takes it as X (`conv`, a sequence convolution)
// and another node (`other`). False otherwise.
bool SplitsIntoConvAndOther(const ir::Value* v, const ir::Graph& graph,
                            const std::function<bool(const ir::Value*)>& is_constant, const ir::Node** conv,
                            const ir::Node** other) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 2 || v->IsGraphOutput()) return false;
  const ir::Node* a = v->uses()[0].node;
  const ir::Node* b = v->uses()[1].node;
  if (a == b) return false;
  if (b->op_type() == "Conv") std::swap(a, b);
  for (const ir::Node* n : {a, b}) {
    if (n->graph() != &graph || !InDefaultDomain(*n)) return false;
  }
  if (!IsSequenceConv(*a, v, is_constant)) return false;
  *conv = a;
  *other = b;
  return true;
}

// The uses of `v` when it has exactly two, in `graph`: a Conv that takes it
// as X (`conv`, a sequence convolution) and a two-input Add or Sum that
// takes it once (`add`): a residual block's input. False otherwise.
bool SplitsIntoConvAndResidual(const ir::Value* v, const ir::Graph& graph,
                               const std::function<bool(const ir::Value*)>& is_constant,
                               const ir::Node** conv, const ir::Node** add) {
  const ir::Node* a = nullptr;
  const ir::Node* b = nullptr;
  if (!SplitsIntoConvAndOther(v, graph, is_constant, &a, &b)) return false;
  if ((b->op_type() != "Add" && b->op_type() != "Sum") || b->num_inputs() != 2 || b->input(0) == b->input(1) ||
      b->num_outputs() != 1)
    return false;
  *conv = a;
  *add = b;
  return true;
}

// The uses of `v` when it has exactly two, in `graph`: a Conv that takes it
// as X (`conv`, a sequence convolution) and an AveragePool (`pool`, one
// output) whose only use is a Concat of two inputs along axis 1 taking the
// pool's result second (`concat`): ShuffleNet's stride-2 unit, whose
// shortcut is the pooled input joined to the branch's result.
bool SplitsIntoConvAndPoolJoin(const ir::Value* v, const ir::Graph& graph,
                               const std::function<bool(const ir::Value*)>& is_constant,
                               const std::function<bool(const ir::Node*)>& skip,
                               const absl::flat_hash_set<const ir::Node*>& taken, const ir::Node** conv,
                               const ir::Node** pool, const ir::Node** concat) {
  const ir::Node* a = nullptr;
  const ir::Node* b = nullptr;
  if (!SplitsIntoConvAndOther(v, graph, is_constant, &a, &b)) return false;
  for (const ir::Node* n : {a, b}) {
    if (skip(n) || taken.contains(n)) return false;
  }
  if (b->op_type() != "AveragePool" || b->num_inputs() != 1 || b->num_outputs() != 1) return false;
  const ir::Node* c = SoleConsumer(b->output(0), graph);
  if (c == nullptr || c->op_type() != "Concat" || !InDefaultDomain(*c) || skip(c) || taken.contains(c) ||
      c->num_inputs() != 2 || c->num_outputs() != 1 || c->input(1) != b->output(0) ||
      c->input(0) == nullptr || c->input(0) == c->input(1) || c->GetInt("axis").value_or(-1) != 1)
    return false;
  *conv = a;
  *pool = b;
  *concat = c;
  return true;
}

// Appends `nodes` to `chain`, each reading the previous one's output (the
// first reads `in`, or no value of the chain when `in` is null) as its
// input 0 or 1.
void AppendChained(FusionChain& chain, const std::vector<const ir::Node*>& nodes, const ir::Value* in) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Value* previous = i == 0 ? in : nodes[i - 1]->output(0);
    chain.nodes.push_back(nodes[i]);
    chain.chained_input.push_back(previous == nullptr ? -1 : nodes[i]->input(0) == previous ? 0 : 1);
  }
}

// A projection block on `v` (a ResNet stage's first block): `v` read by two
// Convs with constant weights, one of them (the shortcut) followed only by
// BatchNormalization / Mul / Add folded into it and then a residual Add or
// Sum. Sets `shortcut` to that Conv and its folded nodes, `main` to the
// other Conv (the block's branch) and `add` to the Add.
bool SplitsIntoProjection(const ir::Value* v, const ir::Graph& graph, int64_t opset,
                          const std::function<bool(const ir::Value*)>& is_constant,
                          const std::function<bool(const ir::Node*)>& skip,
                          const absl::flat_hash_set<const ir::Node*>& taken,
                          std::vector<const ir::Node*>* shortcut, const ir::Node** main,
                          const ir::Node** add) {
  if (v == nullptr || v->name().empty() || v->uses().size() != 2 || v->IsGraphOutput()) return false;
  const ir::Node* convs[2] = {v->uses()[0].node, v->uses()[1].node};
  if (convs[0] == convs[1]) return false;
  for (const ir::Node* c : convs) {
    if (c->graph() != &graph || !InDefaultDomain(*c) || skip(c) || taken.contains(c) ||
        !IsSequenceConv(*c, v, is_constant))
      return false;
  }
  for (int i = 0; i < 2; ++i) {
    std::vector<const ir::Node*> nodes = {convs[i]};
    const ir::Node* next = SoleConsumer(convs[i]->output(0), graph);
    while (next != nullptr && !skip(next) && !taken.contains(next) && OnlyFirstOutput(*next) &&
           (IsFoldableBatchNorm(*next, *convs[i], opset, is_constant) ||
            IsFoldableAffine(*next, nodes.back()->output(0), *convs[i], is_constant))) {
      nodes.push_back(next);
      next = SoleConsumer(next->output(0), graph);
    }
    if (next == nullptr || skip(next) || taken.contains(next) ||
        (next->op_type() != "Add" && next->op_type() != "Sum") || next->num_inputs() != 2 ||
        next->num_outputs() != 1 || next->input(0) == nullptr || next->input(1) == nullptr ||
        next->input(0) == next->input(1))
      continue;
    *shortcut = std::move(nodes);
    *main = convs[1 - i];
    *add = next;
    return true;
  }
  return false;
}

// The nodes of a branch making `v` (an input of a Concat): a Conv with
// constant weights (and bias), then BatchNormalization / Mul / Add folded
// into it and at most one activation, each value used once, by the next
// node. Empty when `v` is not such a branch's result.
std::vector<const ir::Node*> ConcatBranch(const ir::Value* v, const ir::Graph& graph, int64_t opset,
                                          const std::function<bool(const ir::Value*)>& is_constant,
                                          const std::function<bool(const ir::Node*)>& skip,
                                          const absl::flat_hash_set<const ir::Node*>& taken) {
  constexpr int kMaxBranchNodes = 6;
  std::vector<const ir::Node*> nodes;  // from the end back to the Conv
  const ir::Value* out = v;
  while (static_cast<int>(nodes.size()) < kMaxBranchNodes) {
    if (out == nullptr || out->name().empty() || out->uses().size() != 1 || out->IsGraphOutput()) return {};
    const ir::Node* n = out->producer();
    if (n == nullptr || n->graph() != &graph || !InDefaultDomain(*n) || skip(n) || taken.contains(n) ||
        !OnlyFirstOutput(*n) || n->output(0) != out)
      return {};
    nodes.push_back(n);
    if (n->op_type() == "Conv") break;
    if (n->num_inputs() < 1) return {};
    // The chained value: input 0, or for a Mul / Add by a constant the other input.
    int slot = 0;
    if ((n->op_type() == "Mul" || n->op_type() == "Add") && n->num_inputs() == 2 && is_constant(n->input(0)))
      slot = 1;
    out = n->input(slot);
  }
  if (nodes.empty() || nodes.back()->op_type() != "Conv") return {};
  std::reverse(nodes.begin(), nodes.end());
  const ir::Node& conv = *nodes[0];
  if (!IsSequenceConv(conv, conv.input(0), is_constant) || conv.input(0) == nullptr) return {};
  bool activated = false;
  for (size_t k = 1; k < nodes.size(); ++k) {
    const ir::Node& n = *nodes[k];
    const ir::Value* in = nodes[k - 1]->output(0);
    if (!activated && IsActivation(n, opset, is_constant) && n.input(0) == in) {
      activated = true;
    } else if (activated || (!(IsFoldableBatchNorm(n, conv, opset, is_constant) && n.input(0) == in) &&
                             !IsFoldableAffine(n, in, conv, is_constant))) {
      return {};
    }
  }
  return nodes;
}

// Concats along axis 1 of two Conv branches reading the same value
// (ConcatBranch), as chains: the first branch, the second (its Conv takes
// X as an input of the chain), then the Concat, which takes the first
// branch's result as its inner input.
void FindConvConcatChains(const std::vector<ir::Node*>& order, const ir::Graph& graph, int64_t opset,
                          const std::function<bool(const ir::Value*)>& is_constant,
                          const std::function<bool(const ir::Node*)>& skip,
                          absl::flat_hash_set<const ir::Node*>& taken, std::vector<FusionChain>& chains) {
  for (const ir::Node* concat : order) {
    if (concat->op_type() != "Concat" || !InDefaultDomain(*concat) || skip(concat) || concat->num_inputs() != 2 ||
        concat->num_outputs() != 1 || concat->input(0) == concat->input(1))
      continue;
    const int64_t axis = concat->GetInt("axis").value_or(opset < 4 ? 1 : 0);
    if (axis != 1 && axis >= 0) continue;  // negative: the kernel resolves it by rank
    std::vector<const ir::Node*> a = ConcatBranch(concat->input(0), graph, opset, is_constant, skip, taken);
    std::vector<const ir::Node*> b = ConcatBranch(concat->input(1), graph, opset, is_constant, skip, taken);
    if (a.empty() || b.empty() || a[0]->input(0) != b[0]->input(0)) continue;
    // The branch whose Conv comes first in `order` goes first.
    auto position = [&](const ir::Node* n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
    const bool swapped = position(b[0]) < position(a[0]);
    if (swapped) std::swap(a, b);
    FusionChain chain;
    for (const std::vector<const ir::Node*>* branch : {&a, &b}) {
      for (size_t k = 0; k < branch->size(); ++k) {
        const ir::Node* n = (*branch)[k];
        int slot = -1;
        if (k > 0) slot = n->input(0) == (*branch)[k - 1]->output(0) ? 0 : 1;
        chain.nodes.push_back(n);
        chain.chained_input.push_back(slot);
      }
    }
    chain.nodes.push_back(concat);
    chain.chained_input.push_back(swapped ? 0 : 1);
    chain.inner_input.assign(chain.nodes.size(), -1);
    chain.inner_source.assign(chain.nodes.size(), -1);
    chain.inner_input.back() = swapped ? 1 : 0;
    chain.inner_source.back() = static_cast<int>(a.size()) - 1;
    // A MaxPool of the result: each branch pools its own channels.
    const ir::Node* pool = SoleConsumer(concat->output(0), graph);
    if (pool != nullptr && IsMaxPool(*pool) && !skip(pool) && !taken.contains(pool)) {
      chain.nodes.push_back(pool);
      chain.chained_input.push_back(0);
      chain.inner_input.push_back(-1);
      chain.inner_source.push_back(-1);
    }
    for (const ir::Node* n : chain.nodes) {
      taken.insert(n);
      chain.input_offset.push_back(chain.num_inputs);
      chain.num_inputs += n->num_inputs();
    }
    chains.push_back(std::move(chain));
  }
}

}  // namespace

std::vector<FusionChain> FindConvChains(const std::vector<ir::Node*>& order, const ir::Graph& graph,
                                        const std::function<bool(const ir::Value*)>& is_constant,
                                        const std::function<bool(const ir::Node*)>& skip) {
  std::vector<FusionChain> chains;
  const ir::Graph* root = &graph;  // subgraphs know their model through the main graph
  while (root->parent() != nullptr) root = root->parent();
  const ir::Model* model = root->model();
  int64_t opset = 0;
  if (model != nullptr) opset = model->OpsetVersion("").value_or(0);
  if (opset == 0) return chains;
  absl::flat_hash_set<const ir::Node*> taken;  // nodes of a chain found earlier
  FindConvConcatChains(order, graph, opset, is_constant, skip, taken, chains);
  for (const ir::Node* head : order) {
    // Heads: a Conv, or a BatchNormalization that an affine chain (Mul / Add
    // by constants, an activation) follows.
    const bool bn_head = IsInferenceBatchNorm(*head, opset, is_constant);
    if ((head->op_type() != "Conv" && !bn_head) || !InDefaultDomain(*head) || skip(head) ||
        taken.contains(head)) {
      continue;
    }
    // A projection block on the head's X (a ResNet stage's first block
    // after a MaxPool): the chain starts with its shortcut, then the main
    // branch's Conv reads X too (tried first; the head alone if the chain
    // cannot reach the block's Add).
    std::vector<const ir::Node*> head_shortcut;
    const ir::Node* head_main = nullptr;
    const ir::Node* head_add = nullptr;
    const bool projection = !bn_head && head->num_inputs() > 0 &&
                            SplitsIntoProjection(head->input(0), graph, opset, is_constant, skip, taken,
                                                 &head_shortcut, &head_main, &head_add);
    // Or the head's X also pooled and joined to the unit's result (a
    // ShuffleNet stride-2 unit): tried before the head alone.
    const ir::Node* x_conv = nullptr;
    const ir::Node* x_pool = nullptr;
    const ir::Node* x_concat = nullptr;
    const bool x_join = !bn_head && head->num_inputs() > 0 &&
                        SplitsIntoConvAndPoolJoin(head->input(0), graph, is_constant, skip, taken, &x_conv,
                                                  &x_pool, &x_concat) &&
                        x_conv == head;
    // An affine chain over a Concat whose only reader it is (DenseNet's
    // pre-activation of the concatenated features): the Concat heads the
    // chain, its kernel reading the Concat's inputs in place (the kernel
    // checks the axis is the channels').
    const ir::Node* head_concat = nullptr;
    if (bn_head && head->num_inputs() > 0 && head->input(0) != nullptr) {
      const ir::Node* c = head->input(0)->producer();
      if (c != nullptr && c->op_type() == "Concat" && c->graph() == &graph && InDefaultDomain(*c) &&
          c->num_inputs() >= 1 && c->num_outputs() == 1 && !skip(c) && !taken.contains(c) &&
          SoleConsumer(c->output(0), graph) == head) {
        head_concat = c;
      }
    }
    for (int attempt = 0; attempt < 3; ++attempt) {
      if ((attempt == 0 && !projection) || (attempt == 1 && !x_join)) continue;
      FusionChain chain;
      // The main branch's Conv after the shortcut reads X, a chain input, again.
      if (head_concat != nullptr) AppendChained(chain, {head_concat}, nullptr);
      AppendChained(chain, attempt == 0 ? head_shortcut : std::vector<const ir::Node*>{head},
                    head_concat != nullptr ? head_concat->output(0) : nullptr);
      if (attempt == 0) AppendChained(chain, {head_main}, nullptr);
      // Stages: 0 after the Conv and the nodes folded into it
      // (BatchNormalization, Mul or Add by a per-channel constant), 2 after an
      // activation, 3 after the residual Add, 4 after an activation that
      // follows it, 5 after a MaxPool or GlobalAveragePool (the end of the chain).
      int stage = 0;
      const ir::Node* last = head;
      const ir::Node* conv = head;  // the convolution of the current stage
      // Convolutions after the first need every weight constant (prepared once).
      const bool head_constant = InputsConstant(*head, 1, is_constant);
      // A value of the chain that a later residual Add (`pending_add`) also
      // reads: the output of node `pending_source`.
      const ir::Node* pending_add = nullptr;
      int pending_source = -1;
      int block_begin = -1;  // the first node of that block: where the chain ends if it cannot reach the Add
      bool pooled = false;   // the chain ends with a MaxPool or a GlobalAveragePool
      // With pending_add a Concat: the AveragePool of the value it joins
      // (pending_source's, or X's when -1) to the unit's result.
      const ir::Node* pending_pool = nullptr;
      bool shuffled = false;  // the chain holds a channel shuffle (it then runs channels-last)
      // The joins taken: each one's AveragePool and the first node of its unit.
      std::vector<std::pair<int, int>> joins;
      if (attempt == 0) {
        last = conv = head_main;
        pending_add = head_add;
        pending_source = static_cast<int>(head_shortcut.size()) - 1;
        block_begin = 0;
      } else if (attempt == 1) {
        pending_add = x_concat;
        pending_pool = x_pool;
        pending_source = -1;
        block_begin = 0;
      }
      while (!pooled && OnlyFirstOutput(*last)) {
        const ir::Value* v = last->output(0);
        const ir::Node* next = SoleConsumer(v, graph);
        const ir::Node* add = nullptr;
        // After a stage's last post-op (an activation, a residual Add, or the
        // folded nodes of a linear bottleneck) the chain may run on into a
        // residual block (one block's input pending at a time).
        if (next == nullptr && !bn_head && head_constant && stage != 5 && pending_add == nullptr &&
            SplitsIntoConvAndResidual(v, graph, is_constant, &next, &add) && !skip(add) &&
            !taken.contains(add)) {
          pending_add = add;
          pending_source = static_cast<int>(chain.nodes.size()) - 1;
          block_begin = pending_source + 1;
        }
        // Or into a unit whose input is also pooled and joined to its result.
        const ir::Node* join_pool = nullptr;
        if (next == nullptr && !bn_head && head_constant && stage != 5 && pending_add == nullptr &&
            SplitsIntoConvAndPoolJoin(v, graph, is_constant, skip, taken, &next, &join_pool, &add)) {
          pending_add = add;
          pending_pool = join_pool;
          pending_source = static_cast<int>(chain.nodes.size()) - 1;
          block_begin = pending_source + 1;
        }
        // Or into a projection block: its shortcut Conv (and the nodes folded
        // into it) first, then the block's first Conv, which reads `v` from
        // inside the chain; the shortcut's result is the pending residual.
        std::vector<const ir::Node*> shortcut;
        const ir::Node* main_conv = nullptr;
        if (next == nullptr && !bn_head && head_constant && stage != 5 && pending_add == nullptr &&
            SplitsIntoProjection(v, graph, opset, is_constant, skip, taken, &shortcut, &main_conv, &add)) {
          const int source = static_cast<int>(chain.nodes.size()) - 1;
          block_begin = source + 1;
          AppendChained(chain, shortcut, v);
          pending_add = add;
          pending_source = static_cast<int>(chain.nodes.size()) - 1;
          AppendChained(chain, {main_conv}, nullptr);
          chain.inner_input.resize(chain.nodes.size(), -1);
          chain.inner_source.resize(chain.nodes.size(), -1);
          chain.inner_input.back() = 0;
          chain.inner_source.back() = source;
          last = main_conv;
          conv = main_conv;
          stage = 0;
          continue;
        }
        // An activation written as x * Sigmoid(x) (SiLU, Swish) or x *
        // HardSigmoid(x) (HardSwish): the gate and the Mul join the chain, the
        // Mul reading x from inside it.
        const ir::Node* gate_mul = nullptr;
        if (next == nullptr && !bn_head && stage != 2 && stage != 4 && GatedOf(v, graph, &next, &gate_mul) &&
            !skip(next) && !skip(gate_mul) && !taken.contains(next) && !taken.contains(gate_mul)) {
          const int source = static_cast<int>(chain.nodes.size()) - 1;
          const int slot_of_gate = gate_mul->input(0) == next->output(0) ? 0 : 1;
          chain.nodes.insert(chain.nodes.end(), {next, gate_mul});
          chain.chained_input.insert(chain.chained_input.end(), {0, slot_of_gate});
          chain.inner_input.resize(chain.nodes.size(), -1);
          chain.inner_source.resize(chain.nodes.size(), -1);
          chain.inner_input.back() = 1 - slot_of_gate;
          chain.inner_source.back() = source;
          last = gate_mul;
          stage = stage == 3 ? 4 : 2;
          continue;
        }
        // Squeeze-and-excitation after an activation, when a Conv of the
        // sequence follows: its nodes join the chain (the closing Mul reading
        // the activated value from inside it), then that Conv.
        if (next == nullptr && !bn_head && head_constant && stage == 2) {
          std::vector<const ir::Node*> se = SqueezeExciteOf(v, graph, is_constant);
          const ir::Node* after = se.empty() ? nullptr : SoleConsumer(se.back()->output(0), graph);
          bool free = after != nullptr && IsSequenceConv(*after, se.back()->output(0), is_constant) &&
                      !skip(after) && !taken.contains(after);
          for (const ir::Node* n : se) free = free && !skip(n) && !taken.contains(n);
          if (free) {
            const int source = static_cast<int>(chain.nodes.size()) - 1;
            const size_t first = chain.nodes.size();
            AppendChained(chain, se, v);
            chain.nodes.push_back(after);
            chain.chained_input.push_back(0);
            chain.inner_input.resize(chain.nodes.size(), -1);
            chain.inner_source.resize(chain.nodes.size(), -1);
            // The activation's Mul when written out (it reads the squeeze
            // Conv's result), and the closing Mul (it reads v).
            for (size_t k = first + 2; k + 1 < chain.nodes.size(); ++k) {
              if (chain.nodes[k]->op_type() == "Mul") {
                const bool closing = k + 2 == chain.nodes.size();
                chain.inner_input[k] = 1 - chain.chained_input[k];
                chain.inner_source[k] = closing ? source : static_cast<int>(k) - 2;
              }
            }
            last = after;
            conv = after;
            stage = 0;
            continue;
          }
        }
        // A node belongs to one chain: the Sum of a projection block is the
        // tail of both branches, and only the first one found takes it.
        if (next == nullptr || skip(next) || taken.contains(next)) break;
        int slot = -1;
        int next_stage = -1;
        if (bn_head) {
          if (stage == 0 && IsFoldableAffine(*next, v, *head, is_constant)) {
            slot = next->input(0) == v ? 0 : 1;
            next_stage = 0;
          } else if (stage == 0 && IsActivation(*next, opset, is_constant)) {
            slot = 0;
            next_stage = 4;  // the end of an affine chain
          }
        } else if (stage == 0 && (IsFoldableBatchNorm(*next, *conv, opset, is_constant) ||
                                  IsFoldableAffine(*next, v, *conv, is_constant))) {
          slot = next->input(0) == v ? 0 : 1;
          next_stage = 0;
        } else if (stage != 2 && stage != 4 && IsActivation(*next, opset, is_constant)) {
          slot = 0;
          next_stage = stage == 3 ? 4 : 2;
        } else if (stage < 3 && (next->op_type() == "Add" || next->op_type() == "Sum") &&
                   next->num_inputs() == 2 && next->input(0) != nullptr && next->input(1) != nullptr &&
                   next->input(0) != next->input(1)) {
          slot = next->input(0) == v ? 0 : 1;
          next_stage = 3;
        } else if (next == pending_add && pending_pool != nullptr && stage < 3 && shuffled &&
                   next->input(0) == v) {
          // The unit's Concat: the AveragePool (reading X or the unit's
          // input from inside the chain), then the Concat, which reads the
          // pool's result as chained and the unit's result as inner input.
          const int result = static_cast<int>(chain.nodes.size()) - 1;
          joins.emplace_back(static_cast<int>(chain.nodes.size()), block_begin);
          chain.nodes.insert(chain.nodes.end(), {pending_pool, next});
          chain.chained_input.insert(chain.chained_input.end(), {-1, 1});
          chain.inner_input.resize(chain.nodes.size(), -1);
          chain.inner_source.resize(chain.nodes.size(), -1);
          if (pending_source >= 0) {
            chain.inner_input[chain.nodes.size() - 2] = 0;
            chain.inner_source[chain.nodes.size() - 2] = pending_source;
          }
          chain.inner_input.back() = 0;
          chain.inner_source.back() = result;
          pending_add = nullptr;
          pending_pool = nullptr;
          last = next;
          stage = 3;  // an activation may follow
          continue;
        } else if (next == pending_add) {
          break;  // the block's residual Add, where the chain cannot take it
        } else if (!bn_head && head_constant && pending_add == nullptr &&
                   (IsMaxPool(*next) || IsEndingGlobalPool(*next))) {
          slot = 0;
          next_stage = 5;  // the end of the chain
          pooled = true;
        }
        if (next_stage < 0 && !bn_head && head_constant && IsSequenceConv(*next, v, is_constant)) {
          slot = 0;
          next_stage = 0;  // a new convolution: its own BatchNormalization and post-ops may follow
          conv = next;
        }
        // A channel shuffle before the next convolution: its nodes join the
        // chain, the Conv's stage reads the shuffled value.
        if (next_stage < 0 && !bn_head && head_constant && next->input(0) == v) {
          std::vector<const ir::Node*> shuffle = ChannelShuffle(*next, graph, is_constant);
          bool free = !shuffle.empty();
          for (const ir::Node* n : shuffle) free = free && !skip(n) && !taken.contains(n);
          if (free) {
            for (size_t i = 0; i + 1 < shuffle.size(); ++i) {
              chain.nodes.push_back(shuffle[i]);
              chain.chained_input.push_back(0);
            }
            shuffled = true;
            next = shuffle.back();
            v = shuffle[2]->output(0);
            slot = 0;
            next_stage = 0;
            conv = next;
          }
        }
        if (next_stage < 0 || next->input(slot) != v) break;
        chain.nodes.push_back(next);
        chain.chained_input.push_back(slot);
        chain.inner_input.resize(chain.nodes.size(), -1);
        chain.inner_source.resize(chain.nodes.size(), -1);
        if (next == pending_add) {
          chain.inner_input.back() = 1 - slot;
          chain.inner_source.back() = pending_source;
          pending_add = nullptr;
        }
        last = next;
        stage = next_stage;
      }
      if (pending_add != nullptr) {
        // A projection block at the head that the chain could not finish:
        // the head runs on alone.
        if (block_begin == 0) continue;
        // The chain stopped inside the block: it ends where the block begins.
        chain.nodes.resize(static_cast<size_t>(block_begin));
        chain.chained_input.resize(chain.nodes.size());
      }
      // A join is followed by a Conv of the chain (its kernel joins before
      // the next convolution): else the chain ends where its unit begins
      // (the unit's input, which the AveragePool reads, is then the chain's
      // result), or, for a unit at the head, the head runs on alone.
      bool head_alone = false;
      for (size_t j = joins.size(); j-- > 0 && !head_alone;) {
        const auto [at, begin] = joins[j];
        if (static_cast<size_t>(at) >= chain.nodes.size()) continue;  // cut off already
        bool conv_after = false;
        for (size_t k = static_cast<size_t>(at); k < chain.nodes.size(); ++k)
          conv_after = conv_after || chain.nodes[k]->op_type() == "Conv";
        if (conv_after) break;
        head_alone = begin == 0;
        chain.nodes.resize(static_cast<size_t>(begin));
        chain.chained_input.resize(chain.nodes.size());
      }
      if (head_alone) continue;
      chain.inner_input.resize(chain.nodes.size(), -1);
      chain.inner_source.resize(chain.nodes.size(), -1);
      if (chain.nodes.size() < 2) break;
      // The tail's extra outputs (a BatchNormalization's) must be omitted too.
      if (!OnlyFirstOutput(chain.tail())) break;
      for (const ir::Node* n : chain.nodes) {
        taken.insert(n);
        chain.input_offset.push_back(chain.num_inputs);
        chain.num_inputs += n->num_inputs();
      }
      chains.push_back(std::move(chain));
      break;
    }
  }
  return chains;
}

namespace {

std::atomic<int64_t> g_fallback_runs{0};

class ChainKernel : public Kernel {
 public:
  ChainKernel(const FusionChain& chain, std::vector<std::unique_ptr<Kernel>> kernels, bool counted)
      : chain_(chain), kernels_(std::move(kernels)), counted_(counted) {}

  absl::Status Run(KernelContext& ctx) override {
    if (counted_) g_fallback_runs.fetch_add(1, std::memory_order_relaxed);
    // Each node's output 0 while a later node may still read it.
    std::vector<RtValue> produced(chain_.nodes.size());
    for (size_t k = 0; k < chain_.nodes.size(); ++k) {
      const ir::Node& node = *chain_.nodes[k];
      std::vector<const RtValue*> inputs(static_cast<size_t>(node.num_inputs()));
      for (int j = 0; j < node.num_inputs(); ++j) {
        const RtValue* in = ctx.Value(chain_.input_offset[k] + j);
        if (j == chain_.chained_input[k]) in = &produced[k - 1];
        if (j == chain_.InnerInput(k)) in = &produced[static_cast<size_t>(chain_.inner_source[k])];
        inputs[static_cast<size_t>(j)] = in;
      }
      std::vector<RtValue> outputs(static_cast<size_t>(node.num_outputs()));
      KernelContext sub(node, ctx.opset(), std::move(inputs), &outputs, ctx.subgraphs());
      ONNXKIT_RETURN_IF_ERROR_CTX(kernels_[k]->Run(sub), absl::StrCat("node ", ir::NodeLabel(node)));
      if (k + 1 < chain_.nodes.size()) {
        if (outputs.empty() || !outputs[0].defined()) {
          return absl::InternalError(absl::StrCat("node ", ir::NodeLabel(node), " produced no output"));
        }
        produced[k] = std::move(outputs[0]);
        if (k > 0 && !Reread(k - 1)) produced[k - 1] = RtValue();
        continue;
      }
      for (size_t i = 0; i < outputs.size() && static_cast<int>(i) < ctx.num_outputs(); ++i) {
        if (outputs[i].defined())
          ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(static_cast<int>(i), std::move(outputs[i])));
      }
    }
    return absl::OkStatus();
  }

 private:
  // True when a node after node `i` + 1 reads node i's output.
  bool Reread(size_t i) const {
    for (size_t k = i + 2; k < chain_.nodes.size(); ++k) {
      if (chain_.InnerInput(k) >= 0 && chain_.inner_source[k] == static_cast<int>(i)) return true;
    }
    return false;
  }

  FusionChain chain_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  bool counted_;
};

}  // namespace

int64_t ChainFallbackRuns() { return g_fallback_runs.load(std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<Kernel>> MakeChainKernel(const FusionChain& chain, Backend backend,
                                                        const KernelInfo& info, bool counted) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const ir::Node* node : chain.nodes) {
    ONNXKIT_ASSIGN_OR_RETURN(const KernelEntry* entry,
                             FindKernel(backend, node->domain(), node->op_type(), info.opset));
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, entry->factory(*node, info));
    kernels.push_back(std::move(kernel));
  }
  return std::unique_ptr<Kernel>(new ChainKernel(chain, std::move(kernels), counted));
}

namespace {

class BypassFallbackKernel : public Kernel {
 public:
  BypassFallbackKernel(const FusionChain& chain, std::unique_ptr<Kernel> chain_kernel,
                       std::vector<std::unique_ptr<Kernel>> dequantize)
      : chain_(chain), chain_kernel_(std::move(chain_kernel)), dequantize_(std::move(dequantize)) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<const RtValue*> inputs;
    for (int i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.Value(i));
    std::vector<RtValue> computed(chain_.bypass.size());
    for (size_t b = 0; b < chain_.bypass.size(); ++b) {
      const FusionChain::Bypass& by = chain_.bypass[b];
      if (ctx.Value(by.slot) != nullptr) continue;
      std::vector<const RtValue*> dq_inputs = {ctx.Value(by.extra), ctx.Value(by.extra + 1), ctx.Value(by.extra + 2)};
      std::vector<RtValue> out(static_cast<size_t>(by.dequantize->num_outputs()));
      KernelContext sub(*by.dequantize, ctx.opset(), std::move(dq_inputs), &out, ctx.subgraphs());
      ONNXKIT_RETURN_IF_ERROR_CTX(dequantize_[b]->Run(sub), absl::StrCat("node ", ir::NodeLabel(*by.dequantize)));
      if (out.empty() || !out[0].defined()) return absl::InternalError("a skipped DequantizeLinear produced no output");
      computed[b] = std::move(out[0]);
      inputs[static_cast<size_t>(by.slot)] = &computed[b];
    }
    std::vector<RtValue> outputs(static_cast<size_t>(ctx.num_outputs()));
    KernelContext sub(ctx.node(), ctx.opset(), std::move(inputs), &outputs, ctx.subgraphs());
    ONNXKIT_RETURN_IF_ERROR(chain_kernel_->Run(sub));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined()) ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(static_cast<int>(i), std::move(outputs[i])));
    }
    return absl::OkStatus();
  }

 private:
  FusionChain chain_;
  std::unique_ptr<Kernel> chain_kernel_;
  std::vector<std::unique_ptr<Kernel>> dequantize_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeBypassFallback(const FusionChain& chain, Backend backend,
                                                           const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> chain_kernel, MakeChainKernel(chain, backend, info));
  if (chain.bypass.empty()) return chain_kernel;
  std::vector<std::unique_ptr<Kernel>> dequantize;
  for (const FusionChain::Bypass& by : chain.bypass) {
    ONNXKIT_ASSIGN_OR_RETURN(const KernelEntry* entry, FindKernel(backend, by.dequantize->domain(),
                                                                  by.dequantize->op_type(), info.opset));
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, entry->factory(*by.dequantize, info));
    dequantize.push_back(std::move(kernel));
  }
  return std::unique_ptr<Kernel>(new BypassFallbackKernel(chain, std::move(chain_kernel), std::move(dequantize)));
}

}  // namespace onnxkit::runner
