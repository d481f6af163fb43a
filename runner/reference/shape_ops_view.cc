// Reference kernels that only change a tensor's shape (the output shares the
// input's buffer): Reshape (allowzero), Flatten, Squeeze, Unsqueeze (axes
// attribute before opset 13, input from 13); shape queries Shape (start/end)
// and Size; and Dropout (identity plus mask in inference, seeded random mask
// with training_mode, drawn like numpy so the seeded ONNX tests reproduce).
#include <cstring>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

using shape_ops::ShapeString;

absl::Status SetView(KernelContext& ctx, const Tensor& x, std::vector<int64_t> shape) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor y, x.Reshaped(std::move(shape)));
  return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
}

// Reshape-1..4 read the shape attribute; 5+ read input 1.
class ReshapeKernel : public Kernel {
 public:
  ReshapeKernel(std::optional<std::vector<int64_t>> attr_shape, bool allowzero)
      : attr_shape_(std::move(attr_shape)), allowzero_(allowzero) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    std::vector<int64_t> requested;
    if (attr_shape_) {
      requested = *attr_shape_;
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* s, ctx.Input(1));
      if (s->rank() != 1)
        return absl::InvalidArgumentError(absl::StrCat("shape must be 1-D, got ", DescribeTensor(*s)));
      ONNXKIT_ASSIGN_OR_RETURN(requested, shape_ops::ReadInts(*s, "shape"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Resolve(x->shape(), requested));
    return SetView(ctx, *x, std::move(shape));
  }

 private:
  absl::StatusOr<std::vector<int64_t>> Resolve(const std::vector<int64_t>& in,
                                               const std::vector<int64_t>& req) const {
    std::vector<int64_t> out = req;
    int infer = -1;
    bool has_zero = false;
    for (size_t i = 0; i < req.size(); ++i) {
      if (req[i] == 0) {
        has_zero = true;
        if (!allowzero_) {
          if (i >= in.size()) {
            return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(req), " copies dim ", i,
                                                           " of an input of rank ", in.size()));
          }
          out[i] = in[i];
        }
      } else if (req[i] == -1) {
        if (infer >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("shape ", ShapeString(req), " has more than one -1"));
        }
        infer = static_cast<int>(i);
      } else if (req[i] < -1) {
        return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(req), " has a negative dim"));
      }
    }
    if (allowzero_ && has_zero && infer >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(req), " has both 0 and -1 with allowzero=1"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(int64_t total, shape_ops::CheckedCount(in, "input shape"));
    if (infer >= 0) {
      out[static_cast<size_t>(infer)] = 1;
      ONNXKIT_ASSIGN_OR_RETURN(int64_t known, shape_ops::CheckedCount(out, "shape"));
      if (known == 0 || total % known != 0) {
        return absl::InvalidArgumentError(absl::StrCat("cannot reshape input ", ShapeString(in), " to ",
                                                       ShapeString(req), ": the -1 dim cannot be inferred"));
      }
      out[static_cast<size_t>(infer)] = total / known;
    }
    ONNXKIT_ASSIGN_OR_RETURN(int64_t count, shape_ops::CheckedCount(out, "shape"));
    if (count != total) {
      return absl::InvalidArgumentError(absl::StrCat("cannot reshape input ", ShapeString(in), " (", total,
                                                     " elements) to ", ShapeString(req), " (", count,
                                                     " elements)"));
    }
    return out;
  }

  std::optional<std::vector<int64_t>> attr_shape_;
  bool allowzero_;
};

class FlattenKernel : public Kernel {
 public:
  FlattenKernel(int64_t axis, bool allow_negative) : axis_(axis), allow_negative_(allow_negative) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    int64_t rank = x->rank();
    int64_t axis = axis_;
    if (axis < 0 && allow_negative_) axis += rank;
    if (axis < 0 || axis > rank) {
      return absl::OutOfRangeError(absl::StrCat("axis ", axis_, " is out of range for rank ", rank,
                                                " (valid: ", allow_negative_ ? -rank : 0, " to ", rank, ")"));
    }
    std::vector<int64_t> outer(x->shape().begin(), x->shape().begin() + axis);
    std::vector<int64_t> inner(x->shape().begin() + axis, x->shape().end());
    ONNXKIT_ASSIGN_OR_RETURN(int64_t a, shape_ops::CheckedCount(outer, "input shape"));
    ONNXKIT_ASSIGN_OR_RETURN(int64_t b, shape_ops::CheckedCount(inner, "input shape"));
    return SetView(ctx, *x, {a, b});
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

// Squeeze and Unsqueeze: axes from an attribute (before opset 13) or from
// the optional input 1.
class SqueezeKernel : public Kernel {
 public:
  SqueezeKernel(bool unsqueeze, std::optional<std::vector<int64_t>> attr_axes)
      : unsqueeze_(unsqueeze), attr_axes_(std::move(attr_axes)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    std::optional<std::vector<int64_t>> axes = attr_axes_;
    if (!axes) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.OptionalInput(1));
      if (a != nullptr) {
        if (a->rank() > 1)
          return absl::InvalidArgumentError(absl::StrCat("axes must be 1-D, got ", DescribeTensor(*a)));
        ONNXKIT_ASSIGN_OR_RETURN(axes, shape_ops::ReadInts(*a, "axes"));
      }
    }
    if (unsqueeze_) {
      if (!axes) return absl::InvalidArgumentError("Unsqueeze needs axes");
      return RunUnsqueeze(ctx, *x, *axes);
    }
    return RunSqueeze(ctx, *x, axes);
  }

 private:
  static absl::Status RunSqueeze(KernelContext& ctx, const Tensor& x,
                                 const std::optional<std::vector<int64_t>>& axes) {
    std::vector<bool> drop(x.shape().size(), false);
    if (axes) {
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> norm, shape_ops::NormalizeAxes(*axes, x.rank()));
      for (int64_t a : norm) {
        if (x.dim(static_cast<int>(a)) != 1) {
          return absl::InvalidArgumentError(absl::StrCat("cannot squeeze axis ", a, " of input ",
                                                         ShapeString(x.shape()), ": its dim is not 1"));
        }
        drop[static_cast<size_t>(a)] = true;
      }
    } else {
      for (size_t i = 0; i < drop.size(); ++i) drop[i] = x.shape()[i] == 1;
    }
    std::vector<int64_t> shape;
    for (size_t i = 0; i < drop.size(); ++i) {
      if (!drop[i]) shape.push_back(x.shape()[i]);
    }
    return SetView(ctx, x, std::move(shape));
  }

  static absl::Status RunUnsqueeze(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& axes) {
    int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> norm, shape_ops::NormalizeAxes(axes, out_rank));
    std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
    for (int64_t a : norm) is_new[static_cast<size_t>(a)] = true;
    std::vector<int64_t> shape;
    size_t next = 0;
    for (int64_t i = 0; i < out_rank; ++i) {
      shape.push_back(is_new[static_cast<size_t>(i)] ? 1 : x.shape()[next++]);
    }
    return SetView(ctx, x, std::move(shape));
  }

  bool unsqueeze_;
  std::optional<std::vector<int64_t>> attr_axes_;
};

// Dropout. Inference (the default, and opsets before 12 always here): the
// output is the input and the mask all true. With training_mode true and a
// ratio > 0, a mask is drawn (seeded by the seed attribute) and kept values
// scale by 1 / (1 - ratio).
class DropoutKernel : public Kernel {
 public:
  DropoutKernel(int64_t opset, float ratio_attr) : opset_(opset), ratio_attr_(ratio_attr) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    double ratio = ratio_attr_;
    bool training = false;
    if (opset_ >= 12) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* r, ctx.OptionalInput(1));
      if (r != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(ratio, shape_ops::ReadScalar(*r, "ratio"));
      }
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.OptionalInput(2));
      if (t != nullptr) {
        if (t->dtype() != 9 || t->size() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("training_mode must be a bool scalar, got ", DescribeTensor(*t)));
        }
        training = t->data<bool>()[0];
      }
    }
    if (training && !(ratio >= 0 && ratio < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("ratio ", ratio, " is outside [0, 1)"));
    }
    if (!training || ratio == 0) {
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(0, RtValue::FromTensor(*x)));
      if (!ctx.OutputRequested(1)) return absl::OkStatus();
      // Opsets 7..9 give the mask the input's type; others bool.
      int32_t mask_type = opset_ < 10 ? x->dtype() : 9;
      if (mask_type == 9) {
        ONNXKIT_ASSIGN_OR_RETURN(Tensor * mask, ctx.AllocateOutputUninitialized(1, mask_type, x->shape()));
        std::memset(mask->mutable_data<bool>(), 1, static_cast<size_t>(mask->size()));
        return absl::OkStatus();
      }
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * mask, ctx.AllocateOutput(1, mask_type, x->shape()));
      for (int64_t i = 0; i < mask->size(); ++i)
        ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*mask, i, 1.0));
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    Tensor* mask = nullptr;
    if (ctx.OutputRequested(1)) {
      ONNXKIT_ASSIGN_OR_RETURN(mask, ctx.AllocateOutput(1, 9, x->shape()));
    }
    shape_ops::LegacyRandom rng(shape_ops::SeedOf(ctx.node()));
    double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < x->size(); ++i) {
      bool keep = rng.Uniform() >= ratio;
      ONNXKIT_RETURN_IF_ERROR(
          shape_ops::StoreDouble(*y, i, keep ? shape_ops::LoadDouble(*x, i) * scale : 0.0));
      if (mask != nullptr) mask->mutable_data<bool>()[i] = keep;
    }
    return absl::OkStatus();
  }

 private:
  int64_t opset_;
  float ratio_attr_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeReshape(const ir::Node& node, const KernelInfo& info) {
  std::optional<std::vector<int64_t>> attr_shape;
  if (info.opset < 5) {
    attr_shape = node.GetInts("shape");
    if (!attr_shape) return absl::InvalidArgumentError("Reshape-1 needs the shape attribute");
  }
  int64_t allowzero = AttrInt(node, "allowzero", 0);
  if (allowzero != 0 && allowzero != 1) {
    return absl::InvalidArgumentError(absl::StrCat("allowzero must be 0 or 1, got ", allowzero));
  }
  return std::unique_ptr<Kernel>(new ReshapeKernel(std::move(attr_shape), allowzero == 1));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeFlatten(const ir::Node& node, const KernelInfo& info) {
  return std::unique_ptr<Kernel>(new FlattenKernel(AttrInt(node, "axis", 1), info.opset >= 11));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeSqueeze(const ir::Node& node, const KernelInfo& info) {
  std::optional<std::vector<int64_t>> axes;
  if (info.opset < 13) axes = node.GetInts("axes");
  return std::unique_ptr<Kernel>(new SqueezeKernel(false, std::move(axes)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeUnsqueeze(const ir::Node& node, const KernelInfo& info) {
  std::optional<std::vector<int64_t>> axes;
  if (info.opset < 13) {
    axes = node.GetInts("axes");
    if (!axes) return absl::InvalidArgumentError("Unsqueeze before opset 13 needs the axes attribute");
  }
  return std::unique_ptr<Kernel>(new SqueezeKernel(true, std::move(axes)));
}

absl::Status Shape(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t rank = x->rank();
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clamp(AttrInt(ctx.node(), "start", 0));
  int64_t end = ctx.node().GetInt("end") ? clamp(*ctx.node().GetInt("end")) : rank;
  int64_t n = std::max<int64_t>(end - start, 0);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {n}));
  for (int64_t i = 0; i < n; ++i) y->mutable_data<int64_t>()[i] = x->dim(static_cast<int>(start + i));
  return absl::OkStatus();
}

absl::Status Size(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {}));
  y->mutable_data<int64_t>()[0] = x->size();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeDropout(const ir::Node& node, const KernelInfo& info) {
  float ratio = AttrFloat(node, "ratio", 0.5f);
  return std::unique_ptr<Kernel>(new DropoutKernel(info.opset, ratio));
}

}  // namespace onnxkit::runner::reference
