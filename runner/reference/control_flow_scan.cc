// Reference kernels: Scan.
//
// Opset 8: inputs (sequence_lens?, states..., scan inputs...), batch axis 0
// and scan axis 1 on every scan input; each batch row runs its own
// recurrence over its first sequence_lens[b] steps (attribute `directions`
// reverses a scan input); scan outputs are [batch, steps, ...], zero-padded
// past a row's length.
// Opset 9+: no batch axis; scan_input_axes / scan_input_directions and
// scan_output_axes / scan_output_directions (negative axes allowed).
#include <algorithm>

#include "lib/base/status_macros.h"
#include "runner/reference/control_flow.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::reference {
namespace {

using tensor_ops::Concat;
using tensor_ops::SliceAt;

// Shape/attribute facts both forms share, validated at creation.
struct ScanSpec {
  const ir::Graph* body = nullptr;
  int n = 0;  // states
  int m = 0;  // scan inputs
  int k = 0;  // scan outputs
};

absl::StatusOr<ScanSpec> ParseSpec(const ir::Node& node, int leading_inputs) {
  ScanSpec s;
  const ir::Attribute* a = node.FindAttribute("body");
  if (a == nullptr || a->g == nullptr) return absl::InvalidArgumentError("graph attribute 'body' is missing");
  s.body = a->g.get();
  std::optional<int64_t> m = node.GetInt("num_scan_inputs");
  int total = node.num_inputs() - leading_inputs;
  if (!m || *m < 1 || *m > total) {
    return absl::InvalidArgumentError(absl::StrCat("num_scan_inputs must be in [1, ", total, "], got ",
                                                   m ? absl::StrCat(*m) : std::string("none")));
  }
  s.m = static_cast<int>(*m);
  s.n = total - s.m;
  s.k = node.num_outputs() - s.n;
  if (s.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Scan has ", s.n, " states but ", node.num_outputs(), " outputs"));
  }
  if (static_cast<int>(s.body->inputs().size()) != s.n + s.m) {
    return absl::InvalidArgumentError(absl::StrCat("the body takes ", s.body->inputs().size(), " inputs, expected ",
                                                   s.n, " states + ", s.m, " scan inputs"));
  }
  if (static_cast<int>(s.body->outputs().size()) != s.n + s.k) {
    return absl::InvalidArgumentError(absl::StrCat("the body has ", s.body->outputs().size(), " outputs, expected ",
                                                   s.n, " states + ", s.k, " scan outputs"));
  }
  return s;
}

// A per-input/output list attribute: `count` values, `def` each when absent.
absl::StatusOr<std::vector<int64_t>> ListAttr(const ir::Node& node, std::string_view name, int count, int64_t def,
                                              bool directions) {
  std::vector<int64_t> v = AttrInts(node, name, std::vector<int64_t>(static_cast<size_t>(count), def));
  if (static_cast<int>(v.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", Sv(name), "' has ", v.size(), " values, expected ", count));
  }
  for (int64_t d : v) {
    if (directions && d != 0 && d != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", Sv(name), "' values must be 0 or 1, got ", d));
    }
  }
  return v;
}

// Runs the body once; checks that the states and scan outputs are tensors.
absl::StatusOr<std::vector<RtValue>> RunBody(KernelContext& ctx, const ScanSpec& s, std::vector<RtValue> inputs) {
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, ctx.subgraphs()->RunSubgraph(*s.body, std::move(inputs)));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor()) return absl::InvalidArgumentError(absl::StrCat("body output ", i, " is not a tensor"));
  }
  return outs;
}

// A scan output of no steps: `lead` dims followed by the declared item dims
// (when the body declares them).
absl::StatusOr<Tensor> EmptyScanOutput(const ScanSpec& s, int k, std::vector<int64_t> lead) {
  return tensor_ops::EmptyLike(s.body->outputs()[static_cast<size_t>(s.n + k)]->type(), std::move(lead));
}

class Scan9Kernel : public Kernel {
 public:
  Scan9Kernel(ScanSpec s, std::vector<int64_t> in_axes, std::vector<int64_t> in_dirs, std::vector<int64_t> out_axes,
              std::vector<int64_t> out_dirs)
      : s_(s), in_axes_(std::move(in_axes)), in_dirs_(std::move(in_dirs)), out_axes_(std::move(out_axes)),
        out_dirs_(std::move(out_dirs)) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<RtValue> states;
    for (int i = 0; i < s_.n; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
      states.push_back(RtValue::FromTensor(*t));
    }
    std::vector<const Tensor*> scan_in;
    std::vector<int64_t> axes;
    int64_t steps = -1;
    for (int j = 0; j < s_.m; ++j) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(s_.n + j));
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(in_axes_[static_cast<size_t>(j)], t->rank(),
                                                           absl::StrCat("scan_input_axes[", j, "]")));
      int64_t len = t->dim(static_cast<int>(axis));
      if (steps >= 0 && len != steps) {
        return absl::InvalidArgumentError(absl::StrCat("scan input ", j, " ", DescribeTensor(*t), " has ", len,
                                                       " steps along axis ", axis, ", scan input 0 has ", steps));
      }
      steps = len;
      scan_in.push_back(t);
      axes.push_back(axis);
    }
    std::vector<std::vector<Tensor>> items(static_cast<size_t>(s_.k));
    for (int64_t it = 0; it < steps; ++it) {
      std::vector<RtValue> inputs = std::move(states);
      for (int j = 0; j < s_.m; ++j) {
        int64_t at = in_dirs_[static_cast<size_t>(j)] == 1 ? steps - 1 - it : it;
        ONNXKIT_ASSIGN_OR_RETURN(Tensor slice, SliceAt(*scan_in[static_cast<size_t>(j)], axes[static_cast<size_t>(j)], at));
        inputs.push_back(RtValue::FromTensor(std::move(slice)));
      }
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, RunBody(ctx, s_, std::move(inputs)));
      states.assign(outs.begin(), outs.begin() + s_.n);
      for (int k = 0; k < s_.k; ++k) items[static_cast<size_t>(k)].push_back(outs[static_cast<size_t>(s_.n + k)].tensor());
    }
    for (int i = 0; i < s_.n; ++i) ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(i, std::move(states[static_cast<size_t>(i)])));
    for (int k = 0; k < s_.k; ++k) {
      std::vector<Tensor>& parts = items[static_cast<size_t>(k)];
      Tensor out;
      if (parts.empty()) {
        ONNXKIT_ASSIGN_OR_RETURN(out, EmptyScanOutput(s_, k, {0}));
      } else {
        if (out_dirs_[static_cast<size_t>(k)] == 1) std::reverse(parts.begin(), parts.end());
        ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(out_axes_[static_cast<size_t>(k)], parts[0].rank() + 1,
                                                             absl::StrCat("scan_output_axes[", k, "]")));
        ONNXKIT_ASSIGN_OR_RETURN(out, Concat(parts, axis, /*new_axis=*/true, absl::StrCat("scan output ", k, " item")));
      }
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(s_.n + k, RtValue::FromTensor(std::move(out))));
    }
    return absl::OkStatus();
  }

 private:
  ScanSpec s_;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

class Scan8Kernel : public Kernel {
 public:
  Scan8Kernel(ScanSpec s, std::vector<int64_t> dirs) : s_(s), dirs_(std::move(dirs)) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<const Tensor*> in;  // states then scan inputs
    for (int i = 0; i < s_.n + s_.m; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(1 + i));
      bool is_scan = i >= s_.n;
      if (t->rank() < (is_scan ? 2 : 1) || (i > 0 && t->dim(0) != in[0]->dim(0)) ||
          (is_scan && i > s_.n && t->dim(1) != in[static_cast<size_t>(s_.n)]->dim(1))) {
        return absl::InvalidArgumentError(absl::StrCat(
            is_scan ? "scan input " : "state ", is_scan ? i - s_.n : i, " ", DescribeTensor(*t),
            is_scan ? " must be [batch, steps, ...] like the other scan inputs" : " must be [batch, ...]"));
      }
      in.push_back(t);
    }
    int64_t batch = in[0]->dim(0);
    int64_t max_steps = in[static_cast<size_t>(s_.n)]->dim(1);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* lens_t, ctx.OptionalInput(0));
    std::vector<int64_t> lens(static_cast<size_t>(batch), max_steps);
    if (lens_t != nullptr) {
      if (lens_t->dtype() != 7 || lens_t->size() != batch) {
        return absl::InvalidArgumentError(absl::StrCat("sequence_lens must be int64[", batch, "], got ",
                                                       DescribeTensor(*lens_t)));
      }
      for (int64_t b = 0; b < batch; ++b) {
        lens[static_cast<size_t>(b)] = lens_t->data<int64_t>()[b];
        if (lens[static_cast<size_t>(b)] < 0 || lens[static_cast<size_t>(b)] > max_steps) {
          return absl::OutOfRangeError(absl::StrCat("sequence_lens[", b, "] = ", lens[static_cast<size_t>(b)],
                                                    " is outside [0, ", max_steps, "]"));
        }
      }
    }
    std::vector<std::vector<Tensor>> final_states(static_cast<size_t>(s_.n));
    std::vector<std::vector<Tensor>> rows(static_cast<size_t>(s_.k));  // per scan output, [steps, ...] per batch row
    for (int64_t b = 0; b < batch; ++b) {
      ONNXKIT_RETURN_IF_ERROR(RunRow(ctx, in, b, lens[static_cast<size_t>(b)], max_steps, &final_states, &rows));
    }
    for (int i = 0; i < s_.n; ++i) {
      Tensor out;
      if (batch == 0) {
        out = *in[static_cast<size_t>(i)];
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(out, Concat(final_states[static_cast<size_t>(i)], 0, true, absl::StrCat("state ", i)));
      }
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(i, RtValue::FromTensor(std::move(out))));
    }
    for (int k = 0; k < s_.k; ++k) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor out, StackRows(k, rows[static_cast<size_t>(k)], batch, max_steps));
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(s_.n + k, RtValue::FromTensor(std::move(out))));
    }
    return absl::OkStatus();
  }

 private:
  // Runs the recurrence of batch row `b` over its `len` steps.
  absl::Status RunRow(KernelContext& ctx, const std::vector<const Tensor*>& in, int64_t b, int64_t len,
                      int64_t max_steps, std::vector<std::vector<Tensor>>* final_states,
                      std::vector<std::vector<Tensor>>* rows) {
    std::vector<RtValue> states;
    for (int i = 0; i < s_.n; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor st, SliceAt(*in[static_cast<size_t>(i)], 0, b));
      states.push_back(RtValue::FromTensor(std::move(st)));
    }
    std::vector<Tensor> seqs;  // this row of each scan input: [steps, ...]
    for (int j = 0; j < s_.m; ++j) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor row, SliceAt(*in[static_cast<size_t>(s_.n + j)], 0, b));
      seqs.push_back(std::move(row));
    }
    std::vector<std::vector<Tensor>> items(static_cast<size_t>(s_.k));
    for (int64_t t = 0; t < len; ++t) {
      std::vector<RtValue> inputs = std::move(states);
      for (int j = 0; j < s_.m; ++j) {
        int64_t at = dirs_[static_cast<size_t>(j)] == 1 ? len - 1 - t : t;
        ONNXKIT_ASSIGN_OR_RETURN(Tensor x, SliceAt(seqs[static_cast<size_t>(j)], 0, at));
        inputs.push_back(RtValue::FromTensor(std::move(x)));
      }
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outs, RunBody(ctx, s_, std::move(inputs)));
      states.assign(outs.begin(), outs.begin() + s_.n);
      for (int k = 0; k < s_.k; ++k) items[static_cast<size_t>(k)].push_back(outs[static_cast<size_t>(s_.n + k)].tensor());
    }
    for (int i = 0; i < s_.n; ++i) (*final_states)[static_cast<size_t>(i)].push_back(states[static_cast<size_t>(i)].tensor());
    for (int k = 0; k < s_.k; ++k) {
      std::vector<Tensor>& parts = items[static_cast<size_t>(k)];
      if (parts.empty()) {
        (*rows)[static_cast<size_t>(k)].push_back(Tensor());  // shape filled in by StackRows
        continue;
      }
      ONNXKIT_ASSIGN_OR_RETURN(Tensor row, Concat(parts, 0, true, absl::StrCat("scan output ", k, " item")));
      if (len < max_steps) {  // zero padding past this row's length
        std::vector<int64_t> pad_shape = row.shape();
        pad_shape[0] = max_steps - len;
        ONNXKIT_ASSIGN_OR_RETURN(Tensor pad, Tensor::Allocate(row.dtype(), pad_shape));
        Tensor both[] = {row, pad};
        ONNXKIT_ASSIGN_OR_RETURN(row, Concat(both, 0, false, absl::StrCat("scan output ", k)));
      }
      (*rows)[static_cast<size_t>(k)].push_back(std::move(row));
    }
    return absl::OkStatus();
  }

  // Stacks the rows of scan output k to [batch, max_steps, ...]; rows of
  // length 0 become zeros shaped like the others.
  absl::StatusOr<Tensor> StackRows(int k, std::vector<Tensor>& rows, int64_t batch, int64_t max_steps) {
    const Tensor* like = nullptr;
    for (const Tensor& r : rows) {
      if (r.defined()) like = &r;
    }
    if (like == nullptr) return EmptyScanOutput(s_, k, {batch, max_steps});
    std::vector<int64_t> shape = like->shape();
    for (Tensor& r : rows) {
      if (!r.defined()) {
        ONNXKIT_ASSIGN_OR_RETURN(r, Tensor::Allocate(like->dtype(), shape));
      }
    }
    return Concat(rows, 0, true, absl::StrCat("scan output ", k, " row"));
  }

  ScanSpec s_;
  std::vector<int64_t> dirs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeScan8(const ir::Node& node, const KernelInfo&) {
  if (node.num_inputs() < 1) return absl::InvalidArgumentError("Scan-8 needs sequence_lens (may be \"\") first");
  ONNXKIT_ASSIGN_OR_RETURN(ScanSpec s, ParseSpec(node, 1));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> dirs, ListAttr(node, "directions", s.m, 0, true));
  return std::unique_ptr<Kernel>(new Scan8Kernel(s, std::move(dirs)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeScan9(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(ScanSpec s, ParseSpec(node, 0));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, ListAttr(node, "scan_input_axes", s.m, 0, false));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> in_dirs, ListAttr(node, "scan_input_directions", s.m, 0, true));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, ListAttr(node, "scan_output_axes", s.k, 0, false));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_dirs, ListAttr(node, "scan_output_directions", s.k, 0, true));
  return std::unique_ptr<Kernel>(
      new Scan9Kernel(s, std::move(in_axes), std::move(in_dirs), std::move(out_axes), std::move(out_dirs)));
}

}  // namespace onnxkit::runner::reference
