// Reference kernels: BatchNormalization (inference, and the training-mode
// outputs), InstanceNormalization, LayerNormalization, GroupNormalization,
// RMSNormalization, LRN, LpNormalization and MeanVarianceNormalization.
// Statistics are accumulated in double.
#include <cmath>
#include <type_traits>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

bool IsFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 11 || dtype == 16; }

// Allocates output i with `dtype` and `shape` and stores `values` in it.
absl::Status StoreOutput(KernelContext& ctx, int i, int32_t dtype, const std::vector<int64_t>& shape,
                         const std::vector<double>& values) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(i, dtype, shape));
  return VisitFloat(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    T* p = y->mutable_data<T>();
    for (int64_t j = 0; j < y->size(); ++j) p[j] = static_cast<T>(values[static_cast<size_t>(j)]);
    return absl::OkStatus();
  });
}

absl::Status CheckFloat(const Tensor& t, std::string_view name) {
  if (!IsFloat(t.dtype())) {
    return absl::UnimplementedError(absl::StrCat(Sv(name), " ", DescribeTensor(t), " is not a float tensor"));
  }
  return absl::OkStatus();
}

// Per-group mean and (population) variance, where group[i] names the group
// of element i.
void GroupMoments(const std::vector<double>& x, const std::vector<int64_t>& group, int64_t groups,
                  std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(static_cast<size_t>(groups), 0);
  var.assign(static_cast<size_t>(groups), 0);
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    mean[static_cast<size_t>(group[i])] += x[i];
    ++count[static_cast<size_t>(group[i])];
  }
  for (size_t g = 0; g < mean.size(); ++g) mean[g] /= count[g] > 0 ? static_cast<double>(count[g]) : 1;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = x[i] - mean[static_cast<size_t>(group[i])];
    var[static_cast<size_t>(group[i])] += d * d;
  }
  for (size_t g = 0; g < var.size(); ++g) var[g] /= count[g] > 0 ? static_cast<double>(count[g]) : 1;
}

// The parameter `p` broadcast onto `shape` (unidirectional), as doubles per
// element of `shape`.
absl::StatusOr<std::vector<double>> BroadcastParam(const Tensor& p, const std::vector<int64_t>& shape,
                                                   std::string_view name) {
  std::vector<int64_t> shapes[] = {p.shape(), shape};
  auto b = BroadcastShapes(shapes);
  if (!b.ok() || *b != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(name), " ", DescribeTensor(p), " does not broadcast to ", ShapeString(shape)));
  }
  std::vector<double> v = FloatsAsDoubles(p);
  std::vector<int64_t> idx = BroadcastIndices(p.shape(), shape);
  std::vector<double> out(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) out[i] = v[static_cast<size_t>(idx[i])];
  return out;
}

// --- BatchNormalization ---

class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(double epsilon, double momentum, bool spatial, bool training, int64_t opset)
      : epsilon_(epsilon), momentum_(momentum), spatial_(spatial), training_(training), opset_(opset) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[5];
    for (int i = 0; i < 5; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], ctx.Input(i));
      ONNXKIT_RETURN_IF_ERROR(CheckFloat(*in[i], "input"));
    }
    const Tensor& x = *in[0];
    if (x.rank() < 2)
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(x), " needs rank >= 2"));
    // Parameters are per channel, or (spatial = 0, opset < 9) per element of
    // one batch item.
    std::vector<int64_t> param_shape(x.shape().begin() + 1, x.shape().end());
    if (spatial_) param_shape.resize(1);
    for (int i = 1; i < 5; ++i) {
      if (in[i]->size() != CheckedElementCount(param_shape).value_or(-1)) {
        return absl::InvalidArgumentError(absl::StrCat("BatchNormalization input ", i, " ",
                                                       DescribeTensor(*in[i]), " must have ",
                                                       ShapeString(param_shape), " elements"));
      }
    }
    int64_t channels = x.dim(1);
    int64_t inner = x.size() / std::max<int64_t>(x.dim(0), 1) / std::max<int64_t>(channels, 1);
    int64_t per_item = spatial_ ? channels : in[1]->size();
    int64_t repeat = spatial_ ? inner : 1;  // elements sharing one parameter within an item
    std::vector<double> xv = FloatsAsDoubles(x), scale = FloatsAsDoubles(*in[1]),
                        bias = FloatsAsDoubles(*in[2]);
    std::vector<double> mean = FloatsAsDoubles(*in[3]), var = FloatsAsDoubles(*in[4]);
    std::vector<int64_t> group(xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      group[i] = (static_cast<int64_t>(i) / repeat) % std::max<int64_t>(per_item, 1);
    bool training = training_ || (opset_ < 14 && (ctx.OutputRequested(3) || ctx.OutputRequested(4)));
    std::vector<double> use_mean = mean, use_var = var;
    if (training) GroupMoments(xv, group, per_item, use_mean, use_var);
    std::vector<double> y(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      size_t g = static_cast<size_t>(group[i]);
      y[i] = scale[g] * (xv[i] - use_mean[g]) / std::sqrt(use_var[g] + epsilon_) + bias[g];
    }
    ONNXKIT_RETURN_IF_ERROR(StoreOutput(ctx, 0, x.dtype(), x.shape(), y));
    if (!training) return absl::OkStatus();
    std::vector<double> running_mean(mean.size()), running_var(var.size());
    for (size_t g = 0; g < mean.size(); ++g) {
      running_mean[g] = mean[g] * momentum_ + use_mean[g] * (1 - momentum_);
      running_var[g] = var[g] * momentum_ + use_var[g] * (1 - momentum_);
    }
    const std::vector<double>* outs[] = {&running_mean, &running_var, &use_mean, &use_var};
    for (int i = 1; i < 5 && i < ctx.num_outputs(); ++i) {
      if (!ctx.OutputRequested(i)) continue;
      const Tensor& like = *in[i <= 2 ? i + 2 : i];
      ONNXKIT_RETURN_IF_ERROR(StoreOutput(ctx, i, like.dtype(), in[3]->shape(), *outs[i - 1]));
    }
    return absl::OkStatus();
  }

 private:
  double epsilon_, momentum_;
  bool spatial_, training_;
  int64_t opset_;
};

// --- Normalization over a trailing block of axes (Layer, RMS, Instance, Group) ---

struct BlockNorm {
  int64_t outer = 0;  // number of normalized blocks
  int64_t inner = 0;  // elements per block
};

// Normalizes each contiguous block of `x`: y = (x - mean) * inv_std (no mean
// when rms), returning per-block mean and inverse standard deviation.
void NormalizeBlocks(const std::vector<double>& x, BlockNorm b, double epsilon, bool rms,
                     std::vector<double>& y, std::vector<double>& mean, std::vector<double>& inv_std) {
  y.resize(x.size());
  mean.assign(static_cast<size_t>(b.outer), 0);
  inv_std.assign(static_cast<size_t>(b.outer), 0);
  for (int64_t o = 0; o < b.outer; ++o) {
    const double* p = x.data() + o * b.inner;
    double m = 0, v = 0;
    if (!rms) {
      for (int64_t i = 0; i < b.inner; ++i) m += p[i];
      m /= static_cast<double>(std::max<int64_t>(b.inner, 1));
    }
    for (int64_t i = 0; i < b.inner; ++i) v += (p[i] - m) * (p[i] - m);
    v /= static_cast<double>(std::max<int64_t>(b.inner, 1));
    double inv = 1.0 / std::sqrt(v + epsilon);
    for (int64_t i = 0; i < b.inner; ++i) y[static_cast<size_t>(o * b.inner + i)] = (p[i] - m) * inv;
    mean[static_cast<size_t>(o)] = m;
    inv_std[static_cast<size_t>(o)] = inv;
  }
}

enum class NormKind { kLayer, kRms };

// LayerNormalization and RMSNormalization: normalize over axes [axis, rank).
class AxisNormKernel : public Kernel {
 public:
  AxisNormKernel(NormKind kind, int64_t axis, double epsilon, int32_t stash_type)
      : kind_(kind), axis_(axis), epsilon_(epsilon), stash_type_(stash_type) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, kind_ == NormKind::kLayer
                                                     ? ctx.OptionalInput(2)
                                                     : absl::StatusOr<const Tensor*>(nullptr));
    ONNXKIT_RETURN_IF_ERROR(CheckFloat(*x, "X"));
    ONNXKIT_RETURN_IF_ERROR(CheckFloat(*scale, "scale"));
    if (bias != nullptr) ONNXKIT_RETURN_IF_ERROR(CheckFloat(*bias, "B"));
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    BlockNorm b{1, 1};
    for (int i = 0; i < x->rank(); ++i) (i < axis ? b.outer : b.inner) *= x->dim(i);
    std::vector<double> y, mean, inv_std;
    NormalizeBlocks(FloatsAsDoubles(*x), b, epsilon_, kind_ == NormKind::kRms, y, mean, inv_std);
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> s, BroadcastParam(*scale, x->shape(), "scale"));
    for (size_t i = 0; i < y.size(); ++i) y[i] *= s[i];
    if (bias != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> bv, BroadcastParam(*bias, x->shape(), "B"));
      for (size_t i = 0; i < y.size(); ++i) y[i] += bv[i];
    }
    // RMSNormalization's Y has the scale's type (V), which may differ from X's.
    const int32_t y_type = kind_ == NormKind::kRms ? scale->dtype() : x->dtype();
    ONNXKIT_RETURN_IF_ERROR(StoreOutput(ctx, 0, y_type, x->shape(), y));
    std::vector<int64_t> stat_shape = x->shape();
    for (size_t i = static_cast<size_t>(axis); i < stat_shape.size(); ++i) stat_shape[i] = 1;
    int32_t stat_type = IsFloat(stash_type_) ? stash_type_ : 1;
    if (kind_ == NormKind::kLayer && ctx.OutputRequested(1)) {
      ONNXKIT_RETURN_IF_ERROR(StoreOutput(ctx, 1, stat_type, stat_shape, mean));
    }
    if (kind_ == NormKind::kLayer && ctx.OutputRequested(2)) {
      ONNXKIT_RETURN_IF_ERROR(StoreOutput(ctx, 2, stat_type, stat_shape, inv_std));
    }
    return absl::OkStatus();
  }

 private:
  NormKind kind_;
  int64_t axis_;
  double epsilon_;
  int32_t stash_type_;
};

// InstanceNormalization (groups = channels, per-channel scale) and
// GroupNormalization (per-group scale before opset 21, per-channel after).
class GroupNormKernel : public Kernel {
 public:
  GroupNormKernel(int64_t num_groups, double epsilon, bool per_channel_scale)
      : num_groups_(num_groups), epsilon_(epsilon), per_channel_scale_(per_channel_scale) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bias, ctx.Input(2));
    for (const Tensor* t : {x, scale, bias}) ONNXKIT_RETURN_IF_ERROR(CheckFloat(*t, "input"));
    if (x->rank() < 2)
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(*x), " needs rank >= 2"));
    int64_t channels = x->dim(1);
    int64_t groups = num_groups_ == 0 ? channels : num_groups_;
    if (groups < 1 || channels % groups != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_groups ", groups, " must be positive and divide the ", channels, " channels"));
    }
    int64_t params = per_channel_scale_ ? channels : groups;
    for (const Tensor* t : {scale, bias}) {
      if (t->rank() != 1 || t->dim(0) != params) {
        return absl::InvalidArgumentError(
            absl::StrCat("scale and bias must be [", params, "], got ", DescribeTensor(*t)));
      }
    }
    int64_t spatial = channels == 0 ? 0 : x->size() / std::max<int64_t>(x->dim(0), 1) / channels;
    BlockNorm b{x->dim(0) * groups, channels / groups * spatial};
    std::vector<double> y, mean, inv_std;
    NormalizeBlocks(FloatsAsDoubles(*x), b, epsilon_, false, y, mean, inv_std);
    std::vector<double> s = FloatsAsDoubles(*scale), bv = FloatsAsDoubles(*bias);
    for (size_t i = 0; i < y.size(); ++i) {
      int64_t c = spatial == 0 ? 0 : (static_cast<int64_t>(i) / spatial) % channels;
      size_t p = static_cast<size_t>(per_channel_scale_ ? c : c / (channels / groups));
      y[i] = y[i] * s[p] + bv[p];
    }
    return StoreOutput(ctx, 0, x->dtype(), x->shape(), y);
  }

 private:
  int64_t num_groups_;  // 0: one group per channel (InstanceNormalization)
  double epsilon_;
  bool per_channel_scale_;
};

// --- LRN, LpNormalization, MeanVarianceNormalization ---

class LrnKernel : public Kernel {
 public:
  LrnKernel(double alpha, double beta, double bias, int64_t size)
      : alpha_(alpha), beta_(beta), bias_(bias), size_(size) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_RETURN_IF_ERROR(CheckFloat(*x, "X"));
    if (x->rank() < 2)
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(*x), " needs rank >= 2"));
    int64_t channels = x->dim(1);
    int64_t inner = channels == 0 ? 0 : x->size() / std::max<int64_t>(x->dim(0), 1) / channels;
    std::vector<double> xv = FloatsAsDoubles(*x), y(xv.size());
    int64_t lo = (size_ - 1) / 2, hi = size_ - 1 - lo;  // window [c - lo, c + hi]
    for (int64_t n = 0; n < x->dim(0); ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t i = 0; i < inner; ++i) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(channels - 1, c + hi); ++k) {
            double v = xv[static_cast<size_t>((n * channels + k) * inner + i)];
            sq += v * v;
          }
          size_t at = static_cast<size_t>((n * channels + c) * inner + i);
          y[at] = xv[at] / std::pow(bias_ + alpha_ / static_cast<double>(size_) * sq, beta_);
        }
      }
    }
    return StoreOutput(ctx, 0, x->dtype(), x->shape(), y);
  }

 private:
  double alpha_, beta_, bias_;
  int64_t size_;
};

// The group of each element when `axes` are reduced (keepdims layout), and
// the number of groups.
std::vector<int64_t> ReducedGroups(const std::vector<int64_t>& shape, const std::vector<bool>& reduced,
                                   int64_t* groups) {
  std::vector<int64_t> kept = shape;
  *groups = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (reduced[i]) kept[i] = 1;
    *groups *= kept[i];
  }
  return BroadcastIndices(kept, shape);
}

class LpNormKernel : public Kernel {
 public:
  LpNormKernel(int64_t axis, int64_t p) : axis_(axis), p_(p) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_RETURN_IF_ERROR(CheckFloat(*x, "input"));
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    std::vector<bool> reduced(static_cast<size_t>(x->rank()), false);
    reduced[static_cast<size_t>(axis)] = true;
    int64_t groups = 0;
    std::vector<int64_t> group = ReducedGroups(x->shape(), reduced, &groups);
    std::vector<double> xv = FloatsAsDoubles(*x), norm(static_cast<size_t>(groups), 0), y(xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      norm[static_cast<size_t>(group[i])] += p_ == 1 ? std::abs(xv[i]) : xv[i] * xv[i];
    if (p_ == 2) {
      for (double& n : norm) n = std::sqrt(n);
    }
    for (size_t i = 0; i < xv.size(); ++i) {
      double n = norm[static_cast<size_t>(group[i])];
      y[i] = n == 0 ? 0 : xv[i] / n;
    }
    return StoreOutput(ctx, 0, x->dtype(), x->shape(), y);
  }

 private:
  int64_t axis_, p_;
};

class MvnKernel : public Kernel {
 public:
  explicit MvnKernel(std::vector<int64_t> axes) : axes_(std::move(axes)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_RETURN_IF_ERROR(CheckFloat(*x, "X"));
    std::vector<bool> reduced(static_cast<size_t>(x->rank()), false);
    for (int64_t a : axes_) {
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a, x->rank(), "axes value"));
      reduced[static_cast<size_t>(axis)] = true;
    }
    int64_t groups = 0;
    std::vector<int64_t> group = ReducedGroups(x->shape(), reduced, &groups);
    std::vector<double> xv = FloatsAsDoubles(*x), mean, var, y(xv.size());
    GroupMoments(xv, group, groups, mean, var);
    // As the function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
    for (size_t i = 0; i < xv.size(); ++i) {
      size_t g = static_cast<size_t>(group[i]);
      y[i] = (xv[i] - mean[g]) / (std::sqrt(var[g]) + 1e-9);
    }
    return StoreOutput(ctx, 0, x->dtype(), x->shape(), y);
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

std::vector<double> FloatsAsDoubles(const Tensor& t) {
  std::vector<double> out;
  (void)VisitFloat(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    std::vector<double> storage;
    const double* p = ElementsAs<T, double>(t, storage);
    out.assign(p, p + t.size());
    return absl::OkStatus();
  });
  return out;
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeBatchNormalization(const ir::Node& node, const KernelInfo& info) {
  bool spatial = info.opset >= 9 || AttrInt(node, "spatial", 1) != 0;
  bool training = info.opset >= 14 && AttrInt(node, "training_mode", 0) != 0;
  return std::unique_ptr<Kernel>(new BatchNormKernel(
      AttrFloat(node, "epsilon", 1e-5f), AttrFloat(node, "momentum", 0.9f), spatial, training, info.opset));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeInstanceNormalization(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new GroupNormKernel(0, AttrFloat(node, "epsilon", 1e-5f), true));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLayerNormalization(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new AxisNormKernel(NormKind::kLayer, AttrInt(node, "axis", -1),
                                                    AttrFloat(node, "epsilon", 1e-5f),
                                                    static_cast<int32_t>(AttrInt(node, "stash_type", 1))));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRMSNormalization(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new AxisNormKernel(NormKind::kRms, AttrInt(node, "axis", -1),
                                                    AttrFloat(node, "epsilon", 1e-5f),
                                                    static_cast<int32_t>(AttrInt(node, "stash_type", 1))));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGroupNormalization(const ir::Node& node, const KernelInfo& info) {
  auto groups = node.GetInt("num_groups");
  if (!groups || *groups < 1)
    return absl::InvalidArgumentError("num_groups is required and must be positive");
  return std::unique_ptr<Kernel>(
      new GroupNormKernel(*groups, AttrFloat(node, "epsilon", 1e-5f), info.opset >= 21));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLRN(const ir::Node& node, const KernelInfo&) {
  auto size = node.GetInt("size");
  if (!size || *size < 1) return absl::InvalidArgumentError("size is required and must be positive");
  return std::unique_ptr<Kernel>(new LrnKernel(
      AttrFloat(node, "alpha", 1e-4f), AttrFloat(node, "beta", 0.75f), AttrFloat(node, "bias", 1.0f), *size));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLpNormalization(const ir::Node& node, const KernelInfo&) {
  int64_t p = AttrInt(node, "p", 2);
  if (p != 1 && p != 2) return absl::InvalidArgumentError(absl::StrCat("p must be 1 or 2, got ", p));
  return std::unique_ptr<Kernel>(new LpNormKernel(AttrInt(node, "axis", -1), p));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMeanVarianceNormalization(const ir::Node& node,
                                                                      const KernelInfo&) {
  return std::unique_ptr<Kernel>(new MvnKernel(AttrInts(node, "axes", {0, 2, 3})));
}

}  // namespace onnxkit::runner::reference
