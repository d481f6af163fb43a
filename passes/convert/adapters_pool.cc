// AveragePool and LpPool features older versions lack, expanded into a
// depthwise Conv (which has dilations and explicit pads since opset 1):
//   AveragePool 19:  dilations
//   AveragePool 10:  ceil_mode
//   LpPool 18:       dilations, ceil_mode
// Before (opset 19): %y = AveragePool[kernel_shape=[2,2], dilations=[2,2]](%x)
// After  (opset 18): %s = Conv[group=C, dilations=[2,2]](%x, ones[C,1,2,2])
//                    %y = Div(%s, counts[OH,OW])
//                 LpPool: %y = Pow(Conv(Pow(Abs(%x), p), ones), 1/p)
// The per-position divisor is a constant: the window's taps inside the
// input (and inside the pads when count_include_pad), never those a
// ceil_mode window reaches past the pads. It factors per axis, so it is an
// outer product. Needs static spatial dims, the channel count and the
// node's inferred output shape; a pool the older op already says (no
// dilation, or a ceil_mode that changes nothing) takes the plain step.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/reference/float_types.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

struct Window {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0;
};

// Each spatial axis's window, from the attributes and the known shapes.
absl::StatusOr<std::vector<Window>> Windows(Step& step) {
  ir::Node* node = step.node;
  std::optional<std::vector<int64_t>> x = KnownShape(*node->input(0), *step.ctx);
  std::optional<std::vector<int64_t>> y = KnownShape(*node->output(0), *step.ctx);
  if (!x || x->size() < 3 || !y || y->size() != x->size()) {
    return Block("expanding it into a Conv needs the input and output ranks");
  }
  const size_t spatial = x->size() - 2;
  std::optional<std::vector<int64_t>> kernel = node->GetInts("kernel_shape");
  if (!kernel || kernel->size() != spatial) return Block("kernel_shape does not match the input rank");
  std::vector<int64_t> strides = node->GetInts("strides").value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dilations = node->GetInts("dilations").value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = node->GetInts("pads").value_or(std::vector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial) {
    return Block("strides, dilations or pads do not match the input rank");
  }
  const std::string auto_pad = node->GetString("auto_pad").value_or("NOTSET");
  std::vector<Window> w(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    Window& a = w[i];
    a.in = (*x)[i + 2];
    a.out = (*y)[i + 2];
    a.kernel = (*kernel)[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    if (a.in < 0 || a.out < 0) return Block("expanding it into a Conv needs static spatial dims");
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1 || a.kernel > 4096 || a.dilation > 4096) {
      return Block("kernel, stride or dilation out of range");
    }
    if (auto_pad == "NOTSET") {
      a.pad_begin = pads[i];
      a.pad_end = pads[i + spatial];
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>((a.out - 1) * a.stride + a.dilation * (a.kernel - 1) + 1 - a.in, 0);
      a.pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      a.pad_end = total - a.pad_begin;
    } else if (auto_pad != "VALID") {
      return Block(absl::StrCat("auto_pad '", auto_pad, "' is not known"));
    }
    if (a.pad_begin < 0 || a.pad_end < 0) return Block("negative pads");
    // The divisor visits kernel taps per output position.
    if (a.out > (int64_t{1} << 22) || a.out * a.kernel > (int64_t{1} << 24)) {
      return Block("the pooled axis is too large to expand");
    }
  }
  return w;
}

// The Conv end pad that makes floor() give `out` outputs (ceil_mode), at
// least the node's own.
int64_t ConvPadEnd(const Window& a) {
  int64_t needed = (a.out - 1) * a.stride + a.dilation * (a.kernel - 1) + 1 - a.in - a.pad_begin;
  return std::max(needed, a.pad_end);
}

// Taps of output `o` counted by the divisor.
int64_t Taps(const Window& a, int64_t o, bool count_pads) {
  int64_t n = 0;
  for (int64_t j = 0; j < a.kernel; ++j) {
    int64_t p = o * a.stride - a.pad_begin + j * a.dilation;
    bool inside = p >= 0 && p < a.in;
    bool in_pads = p >= -a.pad_begin && p < a.in + a.pad_end;
    n += inside || (count_pads && in_pads) ? 1 : 0;
  }
  return n;
}

absl::StatusOr<ir::Value*> AddFilled(Step& step, std::string_view hint, int32_t elem,
                                     const std::vector<int64_t>& shape, const std::vector<double>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::Tensor::Allocate(elem, shape));
  if (static_cast<int64_t>(v.size()) != t.size()) return Block("internal: constant size mismatch");
  for (size_t i = 0; i < v.size(); ++i) {
    switch (elem) {
      case pb::kDouble: t.mutable_data<double>()[i] = v[i]; break;
      case pb::kFloat: t.mutable_data<float>()[i] = static_cast<float>(v[i]); break;
      case pb::kFloat16: t.mutable_data<uint16_t>()[i] = runner::Float16FromDouble(v[i]).bits; break;
      default: return Block("the expansion needs a float, double or float16 input");
    }
  }
  return AddConstant(*step.graph, hint, t);
}

// The depthwise Conv of `x` summing each window (zero pads).
absl::StatusOr<ir::Value*> WindowSum(Step& step, ir::Value* x, int32_t elem, int64_t channels,
                                     const std::vector<Window>& w) {
  std::vector<int64_t> wshape{channels, 1};
  int64_t taps = 1;
  std::vector<int64_t> kernel, strides, dilations, pads(2 * w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    wshape.push_back(w[i].kernel);
    taps *= w[i].kernel;
    if (taps > (int64_t{1} << 22)) return Block("the window is too large to expand");
    kernel.push_back(w[i].kernel);
    strides.push_back(w[i].stride);
    dilations.push_back(w[i].dilation);
    pads[i] = w[i].pad_begin;
    pads[i + w.size()] = ConvPadEnd(w[i]);
  }
  if (channels > (int64_t{1} << 22) || channels * taps > (int64_t{1} << 22)) {
    return Block("the window is too large to expand");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ones, AddFilled(step, "pool_ones", elem, wshape,
                                                       std::vector<double>(static_cast<size_t>(channels * taps), 1.0)));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * conv, AddBefore(step, "Conv", {x, ones}, 1,
                                                      {IntAttr("group", channels), IntsAttr("kernel_shape", kernel),
                                                       IntsAttr("strides", strides), IntsAttr("dilations", dilations),
                                                       IntsAttr("pads", pads)}));
  return conv->output(0);
}

struct Prepared {
  std::vector<Window> windows;
  int32_t elem = 0;
  int64_t channels = 0;
};

absl::StatusOr<Prepared> Prepare(Step& step) {
  Prepared p;
  ONNXKIT_ASSIGN_OR_RETURN(p.windows, Windows(step));
  std::optional<int32_t> elem = ElemType(*step.node->input(0), *step.ctx);
  if (!elem || (*elem != pb::kFloat && *elem != pb::kDouble && *elem != pb::kFloat16)) {
    return Block("the expansion needs a float, double or float16 input");
  }
  p.elem = *elem;
  std::optional<std::vector<int64_t>> x = KnownShape(*step.node->input(0), *step.ctx);
  p.channels = (*x)[1];
  if (p.channels < 1) return Block("expanding it into a Conv needs the channel count");
  return p;
}

// Whether the older op computes the same: no dilation, and (ceil_mode)
// floor and ceil give the same output count.
bool OlderOpSaysIt(Step& step, bool dilations_gone, bool ceil_gone) {
  ir::Node* node = step.node;
  if (dilations_gone) {
    std::vector<int64_t> d = node->GetInts("dilations").value_or(std::vector<int64_t>{});
    if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; })) return false;
  }
  if (ceil_gone && node->GetInt("ceil_mode").value_or(0) != 0) {
    absl::StatusOr<std::vector<Window>> w = Windows(step);
    if (!w.ok()) return false;
    for (const Window& a : *w) {
      int64_t floor_out = (a.in + a.pad_begin + a.pad_end - a.dilation * (a.kernel - 1) - 1) / a.stride + 1;
      if (floor_out != a.out) return false;
    }
  }
  return true;
}

absl::Status Finish(Step& step, ir::Value* result) {
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, result));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ExpandAveragePool(Step& step) {
  ONNXKIT_ASSIGN_OR_RETURN(Prepared p, Prepare(step));
  const bool count_pads = step.node->GetInt("count_include_pad").value_or(0) != 0;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sum, WindowSum(step, step.node->input(0), p.elem, p.channels, p.windows));
  // Divisor [O1, ..., On]: the outer product of each axis's tap counts.
  std::vector<int64_t> shape;
  std::vector<double> counts{1.0};
  for (const Window& a : p.windows) {
    shape.push_back(a.out);
    if (a.out > 0 && static_cast<int64_t>(counts.size()) > (int64_t{1} << 22) / a.out) {
      return Block("the output is too large to expand");
    }
    std::vector<double> next;
    next.reserve(counts.size() * static_cast<size_t>(a.out));
    for (double c : counts) {
      for (int64_t o = 0; o < a.out; ++o) next.push_back(c * static_cast<double>(Taps(a, o, count_pads)));
    }
    counts = std::move(next);
  }
  if (std::any_of(counts.begin(), counts.end(), [](double c) { return c == 0; })) {
    return Block("a window covers no input element");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * divisor, AddFilled(step, "pool_counts", p.elem, shape, counts));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * div, AddBefore(step, "Div", {sum, divisor}, 1));
  return Finish(step, div->output(0));
}

absl::Status ExpandLpPool(Step& step) {
  ONNXKIT_ASSIGN_OR_RETURN(Prepared p, Prepare(step));
  const int64_t power = step.node->GetInt("p").value_or(2);
  if (power < 1 || power > 64) return Block(absl::StrCat("p=", power, " is out of range"));
  ir::Value* x = step.node->input(0);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * abs, AddBefore(step, "Abs", {x}, 1));
  ir::Value* powered = abs->output(0);
  if (power > 1) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, AddFilled(step, "lp_p", p.elem, {}, {static_cast<double>(power)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Node * pw, AddBefore(step, "Pow", {powered, e}, 1));
    powered = pw->output(0);
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sum, WindowSum(step, powered, p.elem, p.channels, p.windows));
  if (power == 1) return Finish(step, sum);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * inv, AddFilled(step, "lp_inverse_p", p.elem, {}, {1.0 / static_cast<double>(power)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Node * root, AddBefore(step, "Pow", {sum, inv}, 1));
  return Finish(step, root->output(0));
}

}  // namespace

absl::Status AveragePoolDown19(Step& step) {
  if (OlderOpSaysIt(step, /*dilations_gone=*/true, /*ceil_gone=*/false)) {
    step.node->RemoveAttribute("dilations");
    return GenericStep(step);
  }
  return ExpandAveragePool(step);
}

absl::Status AveragePoolDown10(Step& step) {
  if (OlderOpSaysIt(step, /*dilations_gone=*/true, /*ceil_gone=*/true)) {
    step.node->RemoveAttribute("ceil_mode");
    return GenericStep(step);
  }
  return ExpandAveragePool(step);
}

absl::Status LpPoolDown18(Step& step) {
  if (OlderOpSaysIt(step, /*dilations_gone=*/true, /*ceil_gone=*/true)) {
    step.node->RemoveAttribute("dilations");
    step.node->RemoveAttribute("ceil_mode");
    return GenericStep(step);
  }
  return ExpandLpPool(step);
}

}  // namespace onnxkit::passes::convert
