// Reference kernels: If (every opset: tensor, sequence and optional branch
// outputs) and Loop (every opset: trip count and/or condition, loop-carried
// values of any kind, scan outputs stacked along a new first axis).
#include <limits>

#include "lib/base/status_macros.h"
#include "runner/reference/control_flow.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::reference {
namespace {

// The graph held by attribute `name`; InvalidArgument when missing.
absl::StatusOr<const ir::Graph*> GraphAttr(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (a == nullptr || a->g == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("graph attribute '", Sv(name), "' is missing"));
  }
  return a->g.get();
}

// The single bool of a condition tensor.
absl::StatusOr<bool> ReadCondition(const Tensor& t, std::string_view what) {
  if (t.dtype() != 9 || t.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), " must be a bool tensor with one element, got ", DescribeTensor(t)));
  }
  return t.data<uint8_t>()[0] != 0;
}

class IfKernel : public Kernel {
 public:
  IfKernel(const ir::Graph* then_branch, const ir::Graph* else_branch)
      : then_(then_branch), else_(else_branch) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(bool cond, ReadCondition(*c, "cond"));
    const ir::Graph* branch = cond ? then_ : else_;
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, ctx.subgraphs()->RunSubgraph(*branch, {}));
    if (static_cast<int>(outs.size()) != ctx.num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(cond ? "then" : "else", "_branch has ", outs.size(),
                                                     " outputs, the node ", ctx.num_outputs()));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(static_cast<int>(i), std::move(outs[i])));
    }
    return absl::OkStatus();
  }

 private:
  const ir::Graph* then_;
  const ir::Graph* else_;
};

class LoopKernel : public Kernel {
 public:
  LoopKernel(const ir::Graph* body, int num_carried, int num_scan)
      : body_(body), n_(num_carried), k_(num_scan) {}

  absl::Status Run(KernelContext& ctx) override {
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* m, ctx.OptionalInput(0));
    if (m != nullptr) {
      if (m->dtype() != 7 || m->size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("trip count M must be an int64 tensor with one element, got ", DescribeTensor(*m)));
      }
      max_trips = m->data<int64_t>()[0];
    }
    bool cond = true;
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.OptionalInput(1));
    if (c != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(cond, ReadCondition(*c, "cond"));
    }
    std::vector<RtValue> carried;
    for (int i = 0; i < n_; ++i) {
      const RtValue* v = ctx.Value(2 + i);
      if (v == nullptr || !v->defined()) {
        return absl::InvalidArgumentError(absl::StrCat("loop-carried input ", i, " is missing"));
      }
      carried.push_back(*v);
    }
    std::vector<std::vector<Tensor>> scans(static_cast<size_t>(k_));
    for (int64_t iter = 0; iter < max_trips && cond; ++iter) {
      std::vector<RtValue> inputs;
      inputs.reserve(static_cast<size_t>(n_) + 2);
      inputs.push_back(RtValue::FromTensor(Tensor::Scalar<int64_t>(7, iter)));
      inputs.push_back(RtValue::FromTensor(Tensor::Scalar<uint8_t>(9, cond ? 1 : 0)));
      for (RtValue& v : carried) inputs.push_back(std::move(v));
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, ctx.subgraphs()->RunSubgraph(*body_, std::move(inputs)));
      if (!outs[0].is_tensor()) return absl::InvalidArgumentError("the body's condition output is not a tensor");
      ONNXKIT_ASSIGN_OR_RETURN(cond, ReadCondition(outs[0].tensor(), "the body's condition output"));
      carried.assign(std::make_move_iterator(outs.begin() + 1), std::make_move_iterator(outs.begin() + 1 + n_));
      for (int k = 0; k < k_; ++k) {
        const RtValue& s = outs[static_cast<size_t>(1 + n_ + k)];
        if (!s.is_tensor()) {
          return absl::InvalidArgumentError(absl::StrCat("scan output ", k, " of the body is not a tensor"));
        }
        if (ctx.OutputRequested(n_ + k)) scans[static_cast<size_t>(k)].push_back(s.tensor());
      }
    }
    for (int i = 0; i < n_; ++i) ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(i, std::move(carried[static_cast<size_t>(i)])));
    for (int k = 0; k < k_; ++k) {
      if (!ctx.OutputRequested(n_ + k)) continue;
      std::vector<Tensor>& parts = scans[static_cast<size_t>(k)];
      Tensor stacked;
      if (parts.empty()) {
        ONNXKIT_ASSIGN_OR_RETURN(stacked, tensor_ops::EmptyLike(body_->outputs()[static_cast<size_t>(1 + n_ + k)]->type(), {0}));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(stacked, tensor_ops::Concat(parts, 0, /*new_axis=*/true, absl::StrCat("scan output ", k, " item")));
      }
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(n_ + k, RtValue::FromTensor(std::move(stacked))));
    }
    return absl::OkStatus();
  }

 private:
  const ir::Graph* body_;
  int n_;
  int k_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeIf(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(const ir::Graph* then_branch, GraphAttr(node, "then_branch"));
  ONNXKIT_ASSIGN_OR_RETURN(const ir::Graph* else_branch, GraphAttr(node, "else_branch"));
  for (const ir::Graph* g : {then_branch, else_branch}) {
    const char* name = g == then_branch ? "then_branch" : "else_branch";
    if (!g->inputs().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must take no inputs, it takes ", g->inputs().size()));
    }
    if (static_cast<int>(g->outputs().size()) != node.num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has ", g->outputs().size(), " outputs, the node ",
                                                     node.num_outputs()));
    }
  }
  return std::unique_ptr<Kernel>(new IfKernel(then_branch, else_branch));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLoop(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(const ir::Graph* body, GraphAttr(node, "body"));
  if (node.num_inputs() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Loop needs inputs M and cond (either may be \"\"), got ", node.num_inputs(), " inputs"));
  }
  int n = node.num_inputs() - 2;
  int k = node.num_outputs() - n;
  if (k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Loop has ", n, " loop-carried inputs but only ", node.num_outputs(), " outputs"));
  }
  if (static_cast<int>(body->inputs().size()) != n + 2) {
    return absl::InvalidArgumentError(absl::StrCat("the body takes ", body->inputs().size(),
                                                   " inputs, expected 2 + ", n, " loop-carried"));
  }
  if (static_cast<int>(body->outputs().size()) != 1 + n + k) {
    return absl::InvalidArgumentError(absl::StrCat("the body has ", body->outputs().size(), " outputs, expected 1 + ",
                                                   n, " loop-carried + ", k, " scan outputs"));
  }
  return std::unique_ptr<Kernel>(new LoopKernel(body, n, k));
}

}  // namespace onnxkit::runner::reference
