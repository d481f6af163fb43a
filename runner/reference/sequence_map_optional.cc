// Reference kernels: SequenceMap (runs its body once per element of the
// input sequence; extra sequence inputs are indexed alongside, extra tensor
// inputs are passed whole) and the optional ops Optional,
// OptionalHasElement and OptionalGetElement. A plain tensor or sequence
// counts as a present value at every opset (opset 18 allows it; earlier
// models pass one when a loop-carried optional comes back as a sequence);
// OptionalHasElement's input may be omitted from opset 18.
#include "lib/base/status_macros.h"
#include "runner/reference/control_flow.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/sequence.h"

namespace onnxkit::runner::reference {
namespace {

class SequenceMapKernel : public Kernel {
 public:
  explicit SequenceMapKernel(const ir::Graph* body) : body_(body) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<const RtValue*> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const RtValue* v = ctx.Value(i);
      if (v == nullptr || !v->defined()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
      in.push_back(v);
    }
    if (!in[0]->is_sequence()) return absl::InvalidArgumentError("input 0 must be a sequence");
    size_t n = in[0]->elements().size();
    for (size_t i = 1; i < in.size(); ++i) {
      if (in[i]->is_sequence() && in[i]->elements().size() != n) {
        return absl::InvalidArgumentError(absl::StrCat("input sequence ", i, " has ", in[i]->elements().size(),
                                                       " elements, input 0 has ", n));
      }
    }
    std::vector<std::vector<RtValue>> results(static_cast<size_t>(ctx.num_outputs()));
    for (size_t e = 0; e < n; ++e) {
      std::vector<RtValue> args;
      for (const RtValue* v : in) args.push_back(v->is_sequence() ? v->elements()[e] : *v);
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, ctx.subgraphs()->RunSubgraph(*body_, std::move(args)));
      for (size_t o = 0; o < outs.size(); ++o) {
        if (!outs[o].is_tensor()) return absl::InvalidArgumentError(absl::StrCat("body output ", o, " is not a tensor"));
        if (!results[o].empty() && results[o][0].tensor().dtype() != outs[o].tensor().dtype()) {
          return absl::InvalidArgumentError(absl::StrCat("body output ", o, " changes element type: ",
                                                         DescribeTensor(outs[o].tensor()), " after ",
                                                         DescribeTensor(results[o][0].tensor())));
        }
        results[o].push_back(std::move(outs[o]));
      }
    }
    for (size_t o = 0; o < results.size(); ++o) {
      int32_t dtype = results[o].empty() ? tensor_ops::DeclaredElemType(body_->outputs()[o]->type())
                                         : results[o][0].tensor().dtype();
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(static_cast<int>(o), RtValue::FromSequence(std::move(results[o]), dtype)));
    }
    return absl::OkStatus();
  }

 private:
  const ir::Graph* body_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSequenceMap(const ir::Node& node, const KernelInfo&) {
  const ir::Attribute* a = node.FindAttribute("body");
  if (a == nullptr || a->g == nullptr) return absl::InvalidArgumentError("graph attribute 'body' is missing");
  const ir::Graph* body = a->g.get();
  if (node.num_inputs() < 1) return absl::InvalidArgumentError("SequenceMap needs an input sequence");
  if (static_cast<int>(body->inputs().size()) != node.num_inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body takes ", body->inputs().size(), " inputs, the node has ", node.num_inputs()));
  }
  if (static_cast<int>(body->outputs().size()) != node.num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body has ", body->outputs().size(), " outputs, the node ", node.num_outputs()));
  }
  return std::unique_ptr<Kernel>(new SequenceMapKernel(body));
}

absl::Status Optional(KernelContext& ctx) {
  const RtValue* v = ctx.Value(0);
  if (v == nullptr || !v->defined()) {
    if (ctx.node().FindAttribute("type") == nullptr) {
      return absl::InvalidArgumentError("an Optional without input needs the 'type' attribute");
    }
    return ctx.SetOutput(0, RtValue::None());
  }
  if (v->is_optional()) return absl::InvalidArgumentError("the input of Optional must be a tensor or a sequence");
  return ctx.SetOutput(0, RtValue::Some(*v));
}

absl::Status OptionalHasElement(KernelContext& ctx) {
  const RtValue* v = ctx.Value(0);
  bool present = v != nullptr && v->defined();
  if (ctx.opset() < 18 && !present) return absl::InvalidArgumentError("before opset 18 the input is required");
  bool has = present && (!v->is_optional() || v->has_value());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 9, {}));
  y->mutable_data<uint8_t>()[0] = has ? 1 : 0;
  return absl::OkStatus();
}

absl::Status OptionalGetElement(KernelContext& ctx) {
  const RtValue* v = ctx.Value(0);
  if (v == nullptr || !v->defined()) return absl::InvalidArgumentError("input 0 is missing");
  if (!v->is_optional()) return ctx.SetOutput(0, *v);
  if (!v->has_value()) return absl::InvalidArgumentError("the optional input is empty");
  return ctx.SetOutput(0, v->value());
}

}  // namespace onnxkit::runner::reference
