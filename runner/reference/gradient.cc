// Reference kernel: ai.onnx.preview.training Gradient.
//
// Gradient(xs..., zs...) -> dy/dx for each name of xs. The function
// differentiated is the part of the Gradient's own graph that computes `y`
// from the values named by xs (differentiated) and zs (held constant), plus
// the graph's constant initializers. At creation the kernel finds those
// nodes (walking back from y, stopping at xs, zs and constants) and makes a
// reference kernel for each; a run evaluates them on the Gradient's inputs,
// then propagates the derivative from y back to xs in double, node by node in
// reverse order. A y with several elements is seeded with ones: the result
// is the gradient of the sum of y's elements. An x that y does not depend on
// gets zeros.
//
// Derivatives: Add, Sub, Mul, Div, Pow, Sum (numpy broadcasting: a gradient
// is summed over the dims its operand was broadcast along), Neg, Abs, Relu,
// Sigmoid, Tanh, Exp, Log, Sqrt, Reciprocal, Identity, Cast (to a float type;
// none flows through a Cast to another), Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, MatMul (batched, broadcast, 1-D operands),
// Gemm, ReduceSum and ReduceMean. Another op on a path from xs to y, a node
// holding a graph or another Gradient's result, a y that depends on a graph
// input named by neither xs nor zs, or on a value of an enclosing graph,
// fails naming it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/ir/ir.h"
#include "runner/convert.h"
#include "runner/kernel_registry.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"

namespace onnxkit::runner::reference {
namespace {

// A value in double with its shape: forward values and gradients alike.
struct Array {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

absl::StatusOr<Array> ToArray(const RtValue* value, const std::string& name) {
  if (value == nullptr || !value->is_tensor()) {
    return absl::InvalidArgumentError(absl::StrCat("value '", name, "' is not a tensor"));
  }
  const Tensor& t = value->tensor();
  if (!IsStandardNumeric(t.dtype())) {
    return absl::UnimplementedError(absl::StrCat("value '", name, "' has element type ",
                                                 Sv(DataTypeName(t.dtype())), ", not differentiable"));
  }
  Array a;
  a.shape = t.shape();
  a.v.resize(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) a.v[static_cast<size_t>(i)] = ElementAsDouble(t, i).value_or(0.0);
  return a;
}

// The element count of a shape some tensor of the run has (so it fits).
int64_t Count(const std::vector<int64_t>& shape) { return CheckedElementCount(shape).value_or(0); }

// g (of shape `from`, the broadcast result) summed onto `to`.
Array SumTo(const std::vector<double>& g, const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  Array out{to, std::vector<double>(static_cast<size_t>(Count(to)), 0.0)};
  std::vector<int64_t> idx = BroadcastIndices(to, from);
  for (size_t i = 0; i < idx.size(); ++i) out.v[static_cast<size_t>(idx[i])] += g[i];
  return out;
}

// x (of shape `from`) broadcast to `to`, element by element.
std::vector<double> Spread(const Array& x, const std::vector<int64_t>& to) {
  std::vector<int64_t> idx = BroadcastIndices(x.shape, to);
  std::vector<double> out(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) out[i] = x.v[static_cast<size_t>(idx[i])];
  return out;
}

// C[m x n] += op(A) * op(B), A and B row-major [m x k] / [k x n] after the
// optional transposes (ta: A is stored [k x m]; tb: B is stored [n x k]).
void Gemm(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const double av = ta ? a[p * m + i] : a[i * k + p];
      if (av == 0) continue;
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * (tb ? b[j * k + p] : b[p * n + j]);
    }
  }
}

bool IsDifferentiable(const std::string& op) {
  static const absl::flat_hash_set<std::string>* const ops = new absl::flat_hash_set<std::string>{
      "Add",        "Sub",      "Mul",     "Div",       "Pow",       "Sum",     "Neg",
      "Abs",        "Relu",     "Sigmoid", "Tanh",      "Exp",       "Log",     "Sqrt",
      "Reciprocal", "Identity", "Cast",    "Reshape",   "Flatten",   "Squeeze", "Unsqueeze",
      "Transpose",  "MatMul",   "Gemm",    "ReduceSum", "ReduceMean"};
  return ops->contains(op);
}

class GradientKernel : public Kernel {
 public:
  struct Step {
    const ir::Node* node;
    int64_t opset;
    std::unique_ptr<Kernel> kernel;
    bool on_path;  // some input depends on xs
  };

  static absl::StatusOr<std::unique_ptr<Kernel>> Create(const ir::Node& node) {
    auto k = std::make_unique<GradientKernel>();
    const ir::Attribute* xs = node.FindAttribute("xs");
    const ir::Attribute* y = node.FindAttribute("y");
    if (xs == nullptr || xs->proto.strings.empty()) {
      return absl::InvalidArgumentError("attribute 'xs' (the names to differentiate by) is missing or empty");
    }
    if (y == nullptr || y->proto.s.empty())
      return absl::InvalidArgumentError("attribute 'y' is missing or empty");
    k->xs_ = xs->proto.strings;
    k->y_ = y->proto.s;
    if (const ir::Attribute* zs = node.FindAttribute("zs"); zs != nullptr) k->zs_ = zs->proto.strings;
    if (node.num_inputs() != static_cast<int>(k->xs_.size() + k->zs_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("takes one input per name of xs and zs (",
                                                     k->xs_.size() + k->zs_.size(), "), got ",
                                                     node.num_inputs()));
    }
    if (node.num_outputs() > static_cast<int>(k->xs_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("gives one output per name of xs (", k->xs_.size(), "), got ", node.num_outputs()));
    }
    absl::flat_hash_set<std::string> leaves;
    for (const auto* names : {&k->xs_, &k->zs_}) {
      for (const std::string& n : *names) {
        if (n.empty() || !leaves.insert(n).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("xs and zs must name distinct values; '", n, "' is not"));
        }
      }
    }
    ONNXKIT_RETURN_IF_ERROR(k->FindSteps(node, leaves));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  absl::Status Run(KernelContext& ctx) override {
    absl::flat_hash_map<std::string, RtValue> values = constants_;
    for (size_t i = 0; i < xs_.size() + zs_.size(); ++i) {
      const RtValue* v = ctx.Value(static_cast<int>(i));
      if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
      values[i < xs_.size() ? xs_[i] : zs_[i - xs_.size()]] = *v;
    }
    // Forward: the nodes from xs and zs to y, on the Gradient's inputs.
    for (const Step& s : steps_) {
      std::vector<const RtValue*> in;
      for (const ir::Value* v : s.node->inputs()) {
        auto it = v == nullptr ? values.end() : values.find(v->name());
        in.push_back(it == values.end() ? nullptr : &it->second);
      }
      std::vector<RtValue> out(static_cast<size_t>(s.node->num_outputs()));
      KernelContext kc(*s.node, s.opset, std::move(in), &out, ctx.subgraphs());
      absl::Status st = s.kernel->Run(kc);
      if (!st.ok())
        return AnnotateStatus(st, absl::StrCat("node '", s.node->name(), "' (", s.node->op_type(), ")"));
      for (int i = 0; i < s.node->num_outputs(); ++i) {
        if (s.node->output(i) != nullptr)
          values[s.node->output(i)->name()] = std::move(out[static_cast<size_t>(i)]);
      }
    }
    auto array_of = [&](const std::string& name) -> absl::StatusOr<Array> {
      auto it = values.find(name);
      return ToArray(it == values.end() ? nullptr : &it->second, name);
    };
    // Backward, seeded with ones over y.
    absl::flat_hash_map<std::string, Array> grads;
    {
      ONNXKIT_ASSIGN_OR_RETURN(Array yv, array_of(y_));
      grads[y_] = Array{yv.shape, std::vector<double>(yv.v.size(), 1.0)};
    }
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      if (!it->on_path) continue;
      ONNXKIT_RETURN_IF_ERROR(Backward(*it->node, it->opset, array_of, &grads));
    }
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      if (!ctx.OutputRequested(i)) continue;
      const RtValue* x = ctx.Value(i);
      if (x == nullptr || !x->is_tensor())
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a tensor"));
      const int32_t dtype = x->tensor().dtype();
      if (dtype != 1 && dtype != 10 && dtype != 11 && dtype != 16) {
        return absl::InvalidArgumentError(absl::StrCat("xs '", xs_[static_cast<size_t>(i)],
                                                       "' has element type ", Sv(DataTypeName(dtype)),
                                                       ": only float values have gradients"));
      }
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(i, dtype, x->tensor().shape()));
      auto g = grads.find(xs_[static_cast<size_t>(i)]);
      if (g == grads.end()) continue;  // y does not depend on it: zeros
      if (g->second.v.size() != static_cast<size_t>(out->size())) {
        return absl::InternalError(absl::StrCat("gradient of '", g->first, "' has ", g->second.v.size(),
                                                " elements for ", out->size()));
      }
      ONNXKIT_RETURN_IF_ERROR(VisitFloat(dtype, [&](auto tag) -> absl::Status {
        using T = decltype(tag);
        T* d = out->mutable_data<T>();
        for (size_t j = 0; j < g->second.v.size(); ++j) d[j] = RoundFromDouble<T>(g->second.v[j]);
        return absl::OkStatus();
      }));
    }
    return absl::OkStatus();
  }

 private:
  // The nodes computing y, in graph order, with a kernel each.
  absl::Status FindSteps(const ir::Node& gradient, const absl::flat_hash_set<std::string>& leaves) {
    ir::Graph* graph = gradient.graph();
    const ir::Model* model = graph->Root()->model();
    absl::flat_hash_set<const ir::Node*> needed;
    std::vector<std::string> stack{y_};
    absl::flat_hash_set<std::string> seen;
    while (!stack.empty()) {
      std::string name = std::move(stack.back());
      stack.pop_back();
      if (name.empty() || leaves.contains(name) || !seen.insert(name).second) continue;
      const ir::Value* v = graph->FindValue(name);
      if (v == nullptr || v->graph() != graph) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", name, "', which y depends on, is no value of the Gradient's graph"));
      }
      if (v->IsConstant()) {
        if (v->initializer() == nullptr) {
          return absl::UnimplementedError(absl::StrCat("y depends on sparse initializer '", name, "'"));
        }
        ONNXKIT_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(*v->initializer()));
        constants_[name] = RtValue::FromTensor(std::move(t));
        continue;
      }
      if (v->kind() != ir::ValueKind::kNodeOutput || v->producer() == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("y depends on graph input '", name, "', which is named by neither xs nor zs"));
      }
      const ir::Node* p = v->producer();
      if (p == &gradient) return absl::InvalidArgumentError("y depends on the Gradient's own outputs");
      if (p->op_type() == "Gradient" && p->domain() == "ai.onnx.preview.training") {
        // (Two Gradients whose ys read each other's results would otherwise
        // make each other's kernels without end.)
        return absl::UnimplementedError(
            absl::StrCat("y depends on the result of another Gradient (node '", p->name(), "')"));
      }
      if (!needed.insert(p).second) continue;
      for (const ir::Value* in : p->inputs()) {
        if (in != nullptr) stack.push_back(in->name());
      }
    }
    absl::flat_hash_set<std::string> depends;  // values that depend on xs
    for (const std::string& x : xs_) depends.insert(x);
    for (const ir::Node* n : graph->nodes()) {
      if (!needed.contains(n)) continue;
      for (const ir::Attribute& a : n->attributes()) {
        if (a.g != nullptr || !a.graphs.empty()) {
          return absl::UnimplementedError(absl::StrCat("cannot differentiate through node '", n->name(),
                                                       "' (", n->op_type(), "), which holds a graph"));
        }
      }
      Step s{n, 0, nullptr, false};
      for (const ir::Value* in : n->inputs())
        s.on_path = s.on_path || (in != nullptr && depends.contains(in->name()));
      // A Cast to a type other than a float's is piecewise constant: no gradient flows through it.
      const int64_t to = n->op_type() == "Cast" ? n->GetInt("to").value_or(0) : 1;
      if (to != 1 && to != 10 && to != 11 && to != 16) s.on_path = false;
      if (s.on_path) {
        if (!n->domain().empty() && n->domain() != "ai.onnx") {
          return absl::UnimplementedError(absl::StrCat("no derivative of ", n->domain(), "::", n->op_type(),
                                                       " (node '", n->name(), "')"));
        }
        if (!IsDifferentiable(n->op_type())) {
          return absl::UnimplementedError(
              absl::StrCat("no derivative of ", n->op_type(), " (node '", n->name(), "')"));
        }
        for (const ir::Value* out : n->outputs()) {
          if (out != nullptr) depends.insert(out->name());
        }
      }
      std::optional<int64_t> opset = model != nullptr ? model->OpsetVersion(n->domain()) : std::nullopt;
      if (!opset.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", n->name(), "': the model imports no opset of its domain"));
      }
      s.opset = *opset;
      ONNXKIT_ASSIGN_OR_RETURN(const KernelEntry* entry,
                               FindKernel(Backend::kReference, n->domain(), n->op_type(), s.opset));
      KernelInfo info;
      info.opset = s.opset;
      auto kernel = entry->factory(*n, info);
      if (!kernel.ok()) return AnnotateStatus(kernel.status(), absl::StrCat("node '", n->name(), "'"));
      s.kernel = std::move(*kernel);
      steps_.push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  template <typename ArrayOf>
  static absl::Status Backward(const ir::Node& n, int64_t opset, ArrayOf& array_of,
                               absl::flat_hash_map<std::string, Array>* grads) {
    const ir::Value* y = n.output(0);
    auto g_it = y == nullptr ? grads->end() : grads->find(y->name());
    if (g_it == grads->end()) return absl::OkStatus();  // y does not depend on this node's result
    const Array g = g_it->second;
    const std::string& op = n.op_type();
    auto add = [&](int i, Array d) -> absl::Status {
      const ir::Value* in = n.input(i);
      if (in == nullptr) return absl::OkStatus();
      auto [it, inserted] = grads->try_emplace(in->name(), std::move(d));
      if (inserted) return absl::OkStatus();
      if (it->second.v.size() != d.v.size()) {
        return absl::InternalError(absl::StrCat("gradients of '", in->name(), "' disagree in size"));
      }
      for (size_t j = 0; j < d.v.size(); ++j) it->second.v[j] += d.v[j];
      return absl::OkStatus();
    };
    auto input = [&](int i) -> absl::StatusOr<Array> {
      if (i >= n.num_inputs() || n.input(i) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' lacks input ", i));
      }
      return array_of(n.input(i)->name());
    };
    auto unary = [&](auto&& f) -> absl::Status {
      ONNXKIT_ASSIGN_OR_RETURN(Array x, input(0));
      ONNXKIT_ASSIGN_OR_RETURN(Array out, array_of(y->name()));
      Array d{x.shape, std::vector<double>(x.v.size())};
      for (size_t j = 0; j < x.v.size(); ++j) d.v[j] = g.v[j] * f(x.v[j], out.v[j]);
      return add(0, std::move(d));
    };
    if (op == "Identity" || op == "Cast" || op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
        op == "Unsqueeze") {
      ONNXKIT_ASSIGN_OR_RETURN(Array x, input(0));
      return add(0, Array{x.shape, g.v});
    }
    if (op == "Neg") return unary([](double, double) { return -1.0; });
    if (op == "Abs") return unary([](double x, double) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); });
    if (op == "Relu") return unary([](double x, double) { return x > 0 ? 1.0 : 0.0; });
    if (op == "Sigmoid") return unary([](double, double s) { return s * (1 - s); });
    if (op == "Tanh") return unary([](double, double t) { return 1 - t * t; });
    if (op == "Exp") return unary([](double, double e) { return e; });
    if (op == "Log") return unary([](double x, double) { return 1 / x; });
    if (op == "Sqrt") return unary([](double, double r) { return 0.5 / r; });
    if (op == "Reciprocal") return unary([](double, double r) { return -r * r; });
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") {
      ONNXKIT_ASSIGN_OR_RETURN(Array a, input(0));
      ONNXKIT_ASSIGN_OR_RETURN(Array b, input(1));
      const std::vector<double> as = Spread(a, g.shape), bs = Spread(b, g.shape);
      std::vector<double> da(g.v.size()), db(g.v.size());
      for (size_t j = 0; j < g.v.size(); ++j) {
        const double x = as[j], w = bs[j], gj = g.v[j];
        if (op == "Add") {
          da[j] = gj, db[j] = gj;
        } else if (op == "Sub") {
          da[j] = gj, db[j] = -gj;
        } else if (op == "Mul") {
          da[j] = gj * w, db[j] = gj * x;
        } else if (op == "Div") {
          da[j] = gj / w, db[j] = -gj * x / (w * w);
        } else {
          da[j] = gj * w * std::pow(x, w - 1);
          db[j] = gj * std::pow(x, w) * std::log(x);
        }
      }
      ONNXKIT_RETURN_IF_ERROR(add(0, SumTo(da, g.shape, a.shape)));
      return add(1, SumTo(db, g.shape, b.shape));
    }
    if (op == "Sum") {
      for (int i = 0; i < n.num_inputs(); ++i) {
        ONNXKIT_ASSIGN_OR_RETURN(Array x, input(i));
        ONNXKIT_RETURN_IF_ERROR(add(i, SumTo(g.v, g.shape, x.shape)));
      }
      return absl::OkStatus();
    }
    if (op == "Transpose") {
      ONNXKIT_ASSIGN_OR_RETURN(Array x, input(0));
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      std::vector<int64_t> perm = AttrInts(n, "perm");
      if (perm.empty()) {
        for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
      }
      if (static_cast<int64_t>(perm.size()) != rank)
        return absl::InvalidArgumentError("Transpose perm does not fit");
      // y[i] = x[j] where y's index k is x's index perm[k].
      std::vector<int64_t> xstride = Strides(x.shape);
      Array d{x.shape, std::vector<double>(x.v.size())};
      std::vector<int64_t> yi(static_cast<size_t>(rank), 0);
      for (size_t j = 0; j < g.v.size(); ++j) {
        int64_t xo = 0;
        for (int64_t k = 0; k < rank; ++k)
          xo += yi[static_cast<size_t>(k)] * xstride[static_cast<size_t>(perm[static_cast<size_t>(k)])];
        d.v[static_cast<size_t>(xo)] = g.v[j];
        for (int64_t k = rank - 1; k >= 0; --k) {
          if (++yi[static_cast<size_t>(k)] < g.shape[static_cast<size_t>(k)]) break;
          yi[static_cast<size_t>(k)] = 0;
        }
      }
      return add(0, std::move(d));
    }
    if (op == "ReduceSum" || op == "ReduceMean") {
      ONNXKIT_ASSIGN_OR_RETURN(Array x, input(0));
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      const bool axes_input = op == "ReduceSum" ? opset >= 13 : opset >= 18;
      std::vector<int64_t> axes;
      if (axes_input) {
        if (n.num_inputs() > 1 && n.input(1) != nullptr) {
          ONNXKIT_ASSIGN_OR_RETURN(Array a, input(1));
          for (double v : a.v) axes.push_back(static_cast<int64_t>(v));
        }
      } else {
        axes = AttrInts(n, "axes");
      }
      if (axes.empty() && axes_input && AttrInt(n, "noop_with_empty_axes", 0) != 0)
        return add(0, Array{x.shape, g.v});
      std::vector<int64_t> kept = x.shape;
      if (axes.empty()) {
        std::fill(kept.begin(), kept.end(), 1);
      } else {
        for (int64_t a : axes) {
          ONNXKIT_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(a, rank));
          kept[static_cast<size_t>(ax)] = 1;
        }
      }
      const double scale = op == "ReduceMean" ? static_cast<double>(Count(kept)) /
                                                    static_cast<double>(std::max<int64_t>(Count(x.shape), 1))
                                              : 1.0;
      Array gk{kept, g.v};
      std::vector<double> d = Spread(gk, x.shape);
      for (double& v : d) v *= scale;
      return add(0, Array{x.shape, std::move(d)});
    }
    if (op == "MatMul" || op == "Gemm") {
      ONNXKIT_ASSIGN_OR_RETURN(Array a, input(0));
      ONNXKIT_ASSIGN_OR_RETURN(Array b, input(1));
      if (op == "Gemm") {
        if (a.shape.size() != 2 || b.shape.size() != 2)
          return absl::InvalidArgumentError("Gemm takes 2-D A and B");
        const bool ta = AttrInt(n, "transA", 0) != 0, tb = AttrInt(n, "transB", 0) != 0;
        const double alpha = AttrFloat(n, "alpha", 1.0f), beta = AttrFloat(n, "beta", 1.0f);
        const int64_t m = g.shape[0], nn = g.shape[1], k = ta ? a.shape[0] : a.shape[1];
        // dA' = alpha g B'^T (stored as A is); dB' = alpha A'^T g.
        Array da{a.shape, std::vector<double>(a.v.size())}, db{b.shape, std::vector<double>(b.v.size())};
        std::vector<double> ga(static_cast<size_t>(m * k), 0.0), gb(static_cast<size_t>(k * nn), 0.0);
        Gemm(g.v.data(), b.v.data(), ga.data(), m, k, nn, false, !tb);  // g [m x n] * B'^T [n x k]
        Gemm(a.v.data(), g.v.data(), gb.data(), k, nn, m, !ta, false);  // A'^T [k x m] * g [m x n]
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t p = 0; p < k; ++p)
            da.v[static_cast<size_t>(ta ? p * m + i : i * k + p)] =
                alpha * ga[static_cast<size_t>(i * k + p)];
        }
        for (int64_t p = 0; p < k; ++p) {
          for (int64_t j = 0; j < nn; ++j)
            db.v[static_cast<size_t>(tb ? j * k + p : p * nn + j)] =
                alpha * gb[static_cast<size_t>(p * nn + j)];
        }
        ONNXKIT_RETURN_IF_ERROR(add(0, std::move(da)));
        ONNXKIT_RETURN_IF_ERROR(add(1, std::move(db)));
        if (n.num_inputs() > 2 && n.input(2) != nullptr) {
          ONNXKIT_ASSIGN_OR_RETURN(Array c, input(2));
          std::vector<double> gc = g.v;
          for (double& v : gc) v *= beta;
          return add(2, SumTo(gc, g.shape, c.shape));
        }
        return absl::OkStatus();
      }
      // MatMul: 1-D operands become [1, K] / [K, 1]; batch dims broadcast.
      std::vector<int64_t> as = a.shape, bs = b.shape;
      if (as.empty() || bs.empty()) return absl::InvalidArgumentError("MatMul operands must have rank >= 1");
      if (as.size() == 1) as.insert(as.begin(), 1);
      if (bs.size() == 1) bs.push_back(1);
      const int64_t m = as[as.size() - 2], k = as.back(), nn = bs.back();
      if (bs[bs.size() - 2] != k) return absl::InvalidArgumentError("MatMul inner dims differ");
      std::vector<int64_t> abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
      std::vector<std::vector<int64_t>> batches{abatch, bbatch};
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(batches));
      const std::vector<int64_t> ai = BroadcastIndices(abatch, batch), bi = BroadcastIndices(bbatch, batch);
      if (static_cast<int64_t>(g.v.size()) != Count(batch) * m * nn) {
        return absl::InvalidArgumentError("MatMul's gradient does not fit its operands");
      }
      Array da{a.shape, std::vector<double>(a.v.size(), 0.0)},
          db{b.shape, std::vector<double>(b.v.size(), 0.0)};
      for (size_t t = 0; t < ai.size(); ++t) {
        const double* gt = g.v.data() + static_cast<int64_t>(t) * m * nn;
        // dA[m x k] += g[m x n] B^T ; dB[k x n] += A^T g.
        Gemm(gt, b.v.data() + bi[t] * k * nn, da.v.data() + ai[t] * m * k, m, k, nn, false, true);
        Gemm(a.v.data() + ai[t] * m * k, gt, db.v.data() + bi[t] * k * nn, k, nn, m, true, false);
      }
      ONNXKIT_RETURN_IF_ERROR(add(0, std::move(da)));
      return add(1, std::move(db));
    }
    return absl::UnimplementedError(absl::StrCat("no derivative of ", op));
  }

  std::vector<std::string> xs_, zs_;
  std::string y_;
  absl::flat_hash_map<std::string, RtValue> constants_;
  std::vector<Step> steps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeGradient(const ir::Node& node, const KernelInfo&) {
  return GradientKernel::Create(node);
}

}  // namespace onnxkit::runner::reference
