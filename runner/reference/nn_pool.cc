// Reference kernels: MaxPool (with Indices), AveragePool, LpPool, their
// Global variants, and MaxUnpool. Windows come from the shared geometry
// (auto_pad, explicit pads, dilations, ceil_mode).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

enum class PoolMode { kMax, kAverage, kLp };

struct PoolOptions {
  PoolMode mode = PoolMode::kMax;
  bool global = false;
  bool count_include_pad = false;
  bool column_major_indices = false;  // storage_order = 1
  double p = 2;
};

// The index of a spatial position given row-major in `dims`, re-linearized
// column-major (first dim fastest).
int64_t ColumnMajor(int64_t row_major, const std::vector<int64_t>& dims) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    coords[d] = row_major % dims[d];
    row_major /= dims[d];
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    result += coords[d] * stride;
    stride *= dims[d];
  }
  return result;
}

// For count_include_pad: how many taps of each output position fall inside
// the explicitly padded input (positions added by ceil_mode do not count).
std::vector<int64_t> PaddedTapCounts(const Window& w) {
  size_t r = w.in.size();
  std::vector<std::vector<int64_t>> per_dim(r);
  for (size_t d = 0; d < r; ++d) {
    int64_t limit = w.in[d] + w.pad_begin[d] + w.pad_end[d];
    for (int64_t o = 0; o < w.out[d]; ++o) {
      int64_t n = 0;
      for (int64_t k = 0; k < w.kernel[d]; ++k) n += o * w.strides[d] + k * w.dilations[d] < limit;
      per_dim[d].push_back(n);
    }
  }
  std::vector<int64_t> counts(static_cast<size_t>(w.out_size), 1);
  std::vector<int64_t> pos(r, 0);
  for (int64_t o = 0; o < w.out_size; ++o) {
    for (size_t d = 0; d < r; ++d) counts[static_cast<size_t>(o)] *= per_dim[d][static_cast<size_t>(pos[d])];
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < w.out[d]) break;
      pos[d] = 0;
    }
  }
  return counts;
}

class PoolKernel : public Kernel {
 public:
  PoolKernel(WindowAttrs attrs, PoolOptions options) : attrs_(std::move(attrs)), options_(options) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->rank() < (options_.global ? 2 : 3)) {
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(*x), " needs a batch, a channel and ",
                                                     options_.global ? "any" : "at least one", " spatial dims"));
    }
    std::span<const int64_t> in(x->shape().data() + 2, x->shape().size() - 2);
    std::vector<int64_t> kernel = options_.global ? std::vector<int64_t>(in.begin(), in.end()) : attrs_.kernel_shape;
    if (kernel.size() != in.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel_shape ", ShapeString(kernel), " does not match X ", DescribeTensor(*x)));
    }
    WindowAttrs attrs = options_.global ? WindowAttrs{} : attrs_;
    ONNXKIT_ASSIGN_OR_RETURN(Window w, ResolveWindow(attrs, in, kernel));
    std::vector<int64_t> out_shape = {x->dim(0), x->dim(1)};
    out_shape.insert(out_shape.end(), w.out.begin(), w.out.end());
    if (!CheckedElementCount(out_shape)) return absl::InvalidArgumentError("output size overflows");
    bool is_float = x->dtype() == 1 || x->dtype() == 10 || x->dtype() == 11 || x->dtype() == 16;
    bool is_byte = x->dtype() == 2 || x->dtype() == 3;
    if (!is_float && !(is_byte && options_.mode == PoolMode::kMax)) {
      return absl::UnimplementedError(absl::StrCat("pooling does not support ", DescribeTensor(*x)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    int64_t* indices = nullptr;
    if (options_.mode == PoolMode::kMax && ctx.OutputRequested(1)) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * it, ctx.AllocateOutput(1, 7, out_shape));
      indices = it->mutable_data<int64_t>();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor taps_t, WindowTaps(w));
    const int64_t* taps = taps_t.data<int64_t>();
    std::vector<int64_t> padded_counts;
    if (options_.mode == PoolMode::kAverage && options_.count_include_pad) padded_counts = PaddedTapCounts(w);
    int64_t planes = x->dim(0) * x->dim(1);
    return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::UnimplementedError("pooling on bool");
      } else {
        using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
        const T* px = x->data<T>();
        T* py = y->mutable_data<T>();
        for (int64_t plane = 0; plane < planes; ++plane) {
          const T* xp = px + plane * w.in_size;
          for (int64_t o = 0; o < w.out_size; ++o) {
            C acc = options_.mode == PoolMode::kMax ? -std::numeric_limits<C>::infinity() : C{0};
            int64_t count = 0, best = -1;
            for (int64_t t = 0; t < w.kernel_size; ++t) {
              int64_t idx = taps[t * w.out_size + o];
              if (idx < 0) continue;
              C v = static_cast<C>(static_cast<ComputeT<T>>(xp[idx]));
              ++count;
              switch (options_.mode) {
                case PoolMode::kMax:
                  if (best < 0 || v > acc || (std::isnan(v) && !std::isnan(acc))) {
                    acc = v;
                    best = idx;
                  }
                  break;
                case PoolMode::kAverage: acc += v; break;
                case PoolMode::kLp: acc += static_cast<C>(std::pow(std::abs(static_cast<double>(v)), options_.p)); break;
              }
            }
            if (options_.mode == PoolMode::kAverage) {
              int64_t divisor = padded_counts.empty() ? count : padded_counts[static_cast<size_t>(o)];
              acc = divisor > 0 ? acc / static_cast<C>(divisor) : std::numeric_limits<C>::quiet_NaN();
            } else if (options_.mode == PoolMode::kLp) {
              acc = static_cast<C>(std::pow(static_cast<double>(acc), 1.0 / options_.p));
            }
            if constexpr (std::is_integral_v<T>) {
              py[plane * w.out_size + o] = best >= 0 ? xp[best] : std::numeric_limits<T>::lowest();
            } else {
              py[plane * w.out_size + o] = static_cast<T>(acc);
            }
            if (indices != nullptr) {
              int64_t local = best < 0 ? 0 : (options_.column_major_indices ? ColumnMajor(best, w.in) : best);
              indices[plane * w.out_size + o] = plane * w.in_size + local;
            }
          }
        }
        return absl::OkStatus();
      }
    });
  }

 private:
  WindowAttrs attrs_;
  PoolOptions options_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakePool(const ir::Node& node, const KernelInfo& info, PoolOptions options) {
  WindowAttrs attrs;
  if (!options.global) {
    ONNXKIT_ASSIGN_OR_RETURN(attrs, ParseWindowAttrs(node));
    if (attrs.kernel_shape.empty()) return absl::InvalidArgumentError("kernel_shape is required");
  }
  if (options.mode == PoolMode::kLp) {
    // p is a float attribute at opset 1, an int after.
    const ir::Attribute* p = node.FindAttribute("p");
    if (p != nullptr) {
      options.p = p->type() == pb::kAttrFloat ? static_cast<double>(p->proto.f)
                                                          : static_cast<double>(p->proto.i);
    }
    if (!(options.p > 0) || std::isinf(options.p)) {
      return absl::InvalidArgumentError(absl::StrCat("p must be positive, got ", options.p));
    }
  }
  return std::unique_ptr<Kernel>(new PoolKernel(std::move(attrs), options));
}

class MaxUnpoolKernel : public Kernel {
 public:
  explicit MaxUnpoolKernel(WindowAttrs attrs) : attrs_(std::move(attrs)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* shape_t, ctx.OptionalInput(2));
    if (x->rank() < 3 || ind->shape() != x->shape() || ind->dtype() != 7) {
      return absl::InvalidArgumentError(absl::StrCat("MaxUnpool needs X of rank >= 3 and int64 indices of its shape, got ",
                                                     DescribeTensor(*x), " and ", DescribeTensor(*ind)));
    }
    size_t r = static_cast<size_t>(x->rank() - 2);
    if (attrs_.kernel_shape.size() != r || (!attrs_.strides.empty() && attrs_.strides.size() != r) ||
        (!attrs_.pads.empty() && attrs_.pads.size() != 2 * r)) {
      return absl::InvalidArgumentError(absl::StrCat("kernel_shape, strides and pads do not fit X ", DescribeTensor(*x)));
    }
    // The unpooled shape: (in - 1) * stride + kernel - pads.
    std::vector<int64_t> inferred = {x->dim(0), x->dim(1)};
    for (size_t d = 0; d < r; ++d) {
      int64_t s = attrs_.strides.empty() ? 1 : attrs_.strides[d];
      int64_t pads = attrs_.pads.empty() ? 0 : attrs_.pads[d] + attrs_.pads[d + r];
      auto v = CheckedMul(std::max<int64_t>(x->dim(static_cast<int>(d) + 2) - 1, 0), s);
      if (v) v = CheckedAdd(*v, attrs_.kernel_shape[d]);
      if (!v || *v - pads < 0) return absl::InvalidArgumentError("MaxUnpool output dims are negative or overflow");
      inferred.push_back(*v - pads);
    }
    std::vector<int64_t> out_shape = inferred;
    if (shape_t != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(out_shape, ReadInt64s(*shape_t));
      bool fits = out_shape.size() == inferred.size();
      for (size_t d = 0; fits && d < out_shape.size(); ++d) fits = out_shape[d] >= inferred[d];
      if (!fits) {
        return absl::InvalidArgumentError(absl::StrCat("output_shape ", ShapeString(out_shape),
                                                       " must have rank ", inferred.size(), " and hold ",
                                                       ShapeString(inferred)));
      }
    }
    auto inferred_size = CheckedElementCount(inferred);
    if (!inferred_size || !CheckedElementCount(out_shape)) return absl::InvalidArgumentError("output size overflows");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    std::vector<int64_t> in_strides = Strides(inferred), out_strides = Strides(out_shape);
    size_t esize = x->nbytes() / static_cast<size_t>(std::max<int64_t>(x->size(), 1));
    if (!(x->dtype() == 1 || x->dtype() == 10 || x->dtype() == 11 || x->dtype() == 16)) {
      return absl::UnimplementedError(absl::StrCat("MaxUnpool does not support ", DescribeTensor(*x)));
    }
    const int64_t* pi = ind->data<int64_t>();
    for (int64_t i = 0; i < x->size(); ++i) {
      int64_t idx = pi[i];
      if (idx < 0 || idx >= *inferred_size) {
        return absl::InvalidArgumentError(absl::StrCat("index ", idx, " at ", i, " is outside the unpooled tensor ",
                                                       ShapeString(inferred)));
      }
      // Re-linearize into the (possibly larger) output shape.
      int64_t dst = 0;
      for (size_t d = 0; d < inferred.size(); ++d) {
        dst += (idx / in_strides[d]) * out_strides[d];
        idx %= in_strides[d];
      }
      std::memcpy(static_cast<char*>(y->mutable_raw()) + static_cast<size_t>(dst) * esize,
                  static_cast<const char*>(x->raw()) + static_cast<size_t>(i) * esize, esize);
    }
    return absl::OkStatus();
  }

 private:
  WindowAttrs attrs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxPool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kMax;
  o.column_major_indices = AttrInt(node, "storage_order", 0) != 0;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeAveragePool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kAverage;
  o.count_include_pad = AttrInt(node, "count_include_pad", 0) != 0;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLpPool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kLp;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalAveragePool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kAverage;
  o.global = true;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalMaxPool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kMax;
  o.global = true;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalLpPool(const ir::Node& node, const KernelInfo& info) {
  PoolOptions o;
  o.mode = PoolMode::kLp;
  o.global = true;
  return MakePool(node, info, o);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxUnpool(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseWindowAttrs(node));
  if (attrs.kernel_shape.empty()) return absl::InvalidArgumentError("kernel_shape is required");
  return std::unique_ptr<Kernel>(new MaxUnpoolKernel(std::move(attrs)));
}

}  // namespace onnxkit::runner::reference
