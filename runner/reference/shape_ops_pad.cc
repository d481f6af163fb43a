// Reference kernels: Pad (modes constant, reflect, edge, wrap; pads and value
// attributes before opset 11, pads/constant_value/axes inputs from 11/18;
// negative pads crop first) and CenterCropPad.
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

using shape_ops::ShapeString;

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Per axis: the kept input range [lo, lo + len) after cropping by negative
// pads, and the padding before it in the output.
struct AxisPad {
  int64_t lo = 0;
  int64_t len = 0;
  int64_t before = 0;
};

// Maps r (position relative to the kept range, any integer) into [0, len).
int64_t MapIndex(PadMode mode, int64_t r, int64_t len) {
  switch (mode) {
    case PadMode::kEdge:
      return std::clamp<int64_t>(r, 0, len - 1);
    case PadMode::kWrap:
      return ((r % len) + len) % len;
    case PadMode::kReflect: {
      if (len == 1) return 0;
      int64_t period = 2 * (len - 1);
      int64_t m = ((r % period) + period) % period;
      return m < len ? m : period - m;
    }
    case PadMode::kConstant:
      break;
  }
  return r;
}

class PadKernel : public Kernel {
 public:
  PadKernel(PadMode mode, std::optional<std::vector<int64_t>> attr_pads, float attr_value)
      : mode_(mode), attr_pads_(std::move(attr_pads)), attr_value_(attr_value) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, FullPads(ctx, *x));
    size_t rank = x->shape().size();
    std::vector<AxisPad> axes(rank);
    std::vector<int64_t> out_shape(rank);
    for (size_t i = 0; i < rank; ++i) {
      int64_t dim = x->shape()[i], b = pads[i], e = pads[i + rank];
      AxisPad& p = axes[i];
      p.lo = b < 0 ? -b : 0;
      int64_t hi = e < 0 ? dim + e : dim;  // e >= -2^63 + 1 after the range check
      p.len = hi - p.lo;
      p.before = b > 0 ? b : 0;
      auto size = CheckedAdd(p.len, p.before);
      if (p.len < 0 || !size || !(size = CheckedAdd(*size, e > 0 ? e : 0))) {
        return absl::InvalidArgumentError(
            absl::StrCat("pads [", absl::StrJoin(pads, ", "), "] do not fit input ", DescribeTensor(*x)));
      }
      out_shape[i] = *size;
      if (mode_ != PadMode::kConstant && p.len == 0 && *size > 0) {
        return absl::InvalidArgumentError(absl::StrCat("cannot pad an empty axis ", i, " of ",
                                                       DescribeTensor(*x), " in a mode other than constant"));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor value, ConstantValue(ctx, *x));
    std::vector<int64_t> strides = Strides(x->shape());
    ElementCopier copy(*x, *y);
    ElementCopier fill(value, *y);
    if (rank > 0 && y->size() > 0) {
      // Row by row along the last axis: its inside part is one run.
      int64_t out = 0;
      const size_t last = rank - 1;
      const AxisPad& lp = axes[last];
      const int64_t row = out_shape[last];
      std::vector<int64_t> outer(out_shape.begin(), out_shape.end() - 1);
      ForEachIndex(outer, [&](const std::vector<int64_t>& c) {
        int64_t src = 0;
        bool inside = true;
        for (size_t d = 0; d < last && inside; ++d) {
          int64_t r = c[d] - axes[d].before;
          if (r < 0 || r >= axes[d].len) {
            if (mode_ == PadMode::kConstant) {
              inside = false;
              break;
            }
            r = MapIndex(mode_, r, axes[d].len);
          }
          src += (axes[d].lo + r) * strides[d];
        }
        for (int64_t j = 0; j < row; ++j) {
          int64_t r = j - lp.before;
          if (inside && r == 0 && lp.len > 0) {
            copy.CopyRun(src + lp.lo, out + j, lp.len);
            j += lp.len - 1;
          } else if (inside && (mode_ != PadMode::kConstant || (r >= 0 && r < lp.len))) {
            copy.Copy(src + lp.lo + (r >= 0 && r < lp.len ? r : MapIndex(mode_, r, lp.len)), out + j);
          } else if (value.defined()) {
            fill.Copy(0, out + j);
          }
        }
        out += row;
      });
      return absl::OkStatus();
    }
    // A scalar has nothing to pad; an empty output nothing to write.
    if (rank == 0 && y->size() == 1) copy.Copy(0, 0);
    return absl::OkStatus();
  }

 private:
  // Pads for every axis: [b_0, ..., b_{r-1}, e_0, ..., e_{r-1}].
  absl::StatusOr<std::vector<int64_t>> FullPads(KernelContext& ctx, const Tensor& x) const {
    int64_t rank = x.rank();
    std::vector<int64_t> given;
    std::vector<int64_t> axes;
    if (attr_pads_) {
      given = *attr_pads_;
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* p, ctx.Input(1));
      if (p->rank() > 1)
        return absl::InvalidArgumentError(absl::StrCat("pads must be 1-D, got ", DescribeTensor(*p)));
      ONNXKIT_ASSIGN_OR_RETURN(given, shape_ops::ReadInts(*p, "pads"));
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.OptionalInput(3));
      if (a != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> raw, shape_ops::ReadInts(*a, "axes"));
        ONNXKIT_ASSIGN_OR_RETURN(axes, shape_ops::NormalizeAxes(raw, rank));
      }
    }
    if (axes.empty() && given.size() == static_cast<size_t>(2 * rank)) return CheckRange(given);
    if (axes.empty()) {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    if (given.size() != 2 * axes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("pads [", absl::StrJoin(given, ", "), "] must have ",
                                                     2 * axes.size(), " values for input ",
                                                     DescribeTensor(x)));
    }
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      full[static_cast<size_t>(axes[i])] = given[i];
      full[static_cast<size_t>(axes[i] + rank)] = given[i + axes.size()];
    }
    return CheckRange(full);
  }

  static absl::StatusOr<std::vector<int64_t>> CheckRange(std::vector<int64_t> pads) {
    for (int64_t p : pads) {
      if (p < -(int64_t{1} << 62) || p > (int64_t{1} << 62)) {
        return absl::InvalidArgumentError(absl::StrCat("pad ", p, " is out of range"));
      }
    }
    return pads;
  }

  // The padding value as a one-element tensor of the input's type; an
  // undefined tensor for zero (the output is already zero-filled).
  absl::StatusOr<Tensor> ConstantValue(KernelContext& ctx, const Tensor& x) const {
    if (mode_ != PadMode::kConstant) return Tensor();
    if (attr_pads_) {
      if (attr_value_ == 0) return Tensor();
      ONNXKIT_ASSIGN_OR_RETURN(Tensor v, Tensor::Allocate(x.dtype(), {}));
      ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(v, 0, attr_value_));
      return v;
    }
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* v, ctx.OptionalInput(2));
    if (v == nullptr) return Tensor();
    if (v->dtype() != x.dtype() || v->size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("constant_value must be one element of the input's type, got ", DescribeTensor(*v)));
    }
    return *v;
  }

  PadMode mode_;
  std::optional<std::vector<int64_t>> attr_pads_;
  float attr_value_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakePad(const ir::Node& node, const KernelInfo& info) {
  std::string mode_name = AttrString(node, "mode", "constant");
  PadMode mode;
  if (mode_name == "constant") {
    mode = PadMode::kConstant;
  } else if (mode_name == "reflect") {
    mode = PadMode::kReflect;
  } else if (mode_name == "edge") {
    mode = PadMode::kEdge;
  } else if (mode_name == "wrap" && info.opset >= 19) {
    mode = PadMode::kWrap;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Pad mode '", mode_name,
                                                   "' is not one of constant, reflect, edge",
                                                   info.opset >= 19 ? ", wrap" : ""));
  }
  std::optional<std::vector<int64_t>> pads;
  if (info.opset < 11) {
    pads = node.GetInts(info.opset < 2 ? "paddings" : "pads");
    if (!pads) return absl::InvalidArgumentError("Pad before opset 11 needs the pads attribute");
  }
  return std::unique_ptr<Kernel>(new PadKernel(mode, std::move(pads), AttrFloat(node, "value", 0.0f)));
}

absl::Status CenterCropPad(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, shape_ops::ReadInts(*s, "shape"));
  int64_t rank = x->rank();
  std::vector<int64_t> axes;
  if (auto a = ctx.node().GetInts("axes")) {
    ONNXKIT_ASSIGN_OR_RETURN(axes, shape_ops::NormalizeAxes(*a, rank));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (shape.size() != axes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeString(shape), " must have one value per axis (", axes.size(), ")"));
  }
  std::vector<int64_t> out_shape = x->shape();
  std::vector<int64_t> in_start(static_cast<size_t>(rank), 0), out_start(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = static_cast<size_t>(axes[i]);
    int64_t dim = x->shape()[a], want = shape[i];
    if (want < 0)
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(shape), " has a negative value"));
    out_shape[a] = want;
    if (want < dim) in_start[a] = (dim - want) / 2;
    if (want > dim) out_start[a] = (want - dim) / 2;
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  // Copy the overlap: the smaller of the input and output along each axis.
  std::vector<int64_t> overlap(static_cast<size_t>(rank));
  for (size_t d = 0; d < overlap.size(); ++d) overlap[d] = std::min(x->shape()[d], out_shape[d]);
  std::vector<int64_t> in_strides = Strides(x->shape()), out_strides = Strides(out_shape);
  ElementCopier copy(*x, *y);
  ForEachIndex(overlap, [&](const std::vector<int64_t>& c) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < c.size(); ++d) {
      src += (in_start[d] + c[d]) * in_strides[d];
      dst += (out_start[d] + c[d]) * out_strides[d];
    }
    copy.Copy(src, dst);
  });
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
