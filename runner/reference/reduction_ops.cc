// Reference kernels: the Reduce* ops (axes as an attribute, or as an input
// from opset 13 for ReduceSum and 18 for the others; keepdims;
// noop_with_empty_axes; reductions over an empty set give the identity of
// the operation) and ArgMax / ArgMin (select_last_index).
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/reduction.h"

namespace onnxkit::runner::reference {
namespace {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Element types each op accepts (the union over its opset versions).
bool ReduceTypeOk(ReduceOp op, int32_t dtype) {
  switch (dtype) {
    case 1: case 6: case 7: case 10: case 11: case 12: case 13: case 16: return true;
    case 2: case 3: case 9: return op == ReduceOp::kMax || op == ReduceOp::kMin;
    default: return false;
  }
}

template <typename T>
absl::Status ReduceTyped(ReduceOp op, const Tensor& x, const std::vector<int64_t>& group, int64_t groups, Tensor* y) {
  const T* px = x.data<T>();
  T* py = y->mutable_data<T>();
  size_t ng = static_cast<size_t>(groups);
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
    bool is_max = op == ReduceOp::kMax;
    // bool accumulates as uint8_t (std::vector<bool> has no references).
    using C = std::conditional_t<std::is_same_v<T, bool>, uint8_t,
                                 std::conditional_t<std::is_integral_v<T>, T, ComputeT<T>>>;
    C init;
    if constexpr (std::is_same_v<T, bool>) {
      init = is_max ? 0 : 1;
    } else if constexpr (std::is_integral_v<T>) {
      init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    } else {
      init = is_max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    }
    std::vector<C> acc(ng, init);
    for (int64_t i = 0; i < x.size(); ++i) {
      C v = static_cast<C>(px[i]);
      C& a = acc[static_cast<size_t>(group[static_cast<size_t>(i)])];
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(v) || std::isnan(a)) {
          a = std::isnan(a) ? a : v;
          continue;
        }
      }
      if (is_max ? v > a : v < a) a = v;
    }
    for (size_t g = 0; g < ng; ++g) py[g] = static_cast<T>(acc[g]);
    return absl::OkStatus();
  }
  if constexpr (std::is_same_v<T, bool>) {
    return absl::UnimplementedError("this reduction does not support bool");
  } else {
    if constexpr (std::is_integral_v<T>) {
      // Exact wrapping arithmetic where the result is an integer anyway.
      if (op == ReduceOp::kSum || op == ReduceOp::kProd || op == ReduceOp::kSumSquare || op == ReduceOp::kL1) {
        std::vector<uint64_t> acc(ng, op == ReduceOp::kProd ? 1 : 0);
        for (int64_t i = 0; i < x.size(); ++i) {
          int64_t s = static_cast<int64_t>(px[i]);
          uint64_t v = static_cast<uint64_t>(s);
          if (op == ReduceOp::kL1 && s < 0) v = static_cast<uint64_t>(0) - v;
          uint64_t& a = acc[static_cast<size_t>(group[static_cast<size_t>(i)])];
          if (op == ReduceOp::kProd) {
            a *= v;
          } else {
            a += op == ReduceOp::kSumSquare ? v * v : v;
          }
        }
        for (size_t g = 0; g < ng; ++g) py[g] = static_cast<T>(acc[g]);
        return absl::OkStatus();
      }
    }
    std::vector<double> acc(ng, op == ReduceOp::kProd ? 1.0 : 0.0);
    std::vector<double> shift(op == ReduceOp::kLogSumExp ? ng : 0, -std::numeric_limits<double>::infinity());
    auto value = [&](int64_t i) { return static_cast<double>(static_cast<ComputeT<T>>(px[i])); };
    for (int64_t i = 0; i < static_cast<int64_t>(shift.size() > 0 ? x.size() : 0); ++i) {
      double& s = shift[static_cast<size_t>(group[static_cast<size_t>(i)])];
      s = std::max(s, value(i));
    }
    for (int64_t i = 0; i < x.size(); ++i) {
      double v = value(i);
      size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
      switch (op) {
        case ReduceOp::kProd: acc[g] *= v; break;
        case ReduceOp::kL1: acc[g] += std::abs(v); break;
        case ReduceOp::kL2: case ReduceOp::kSumSquare: acc[g] += v * v; break;
        case ReduceOp::kLogSumExp: acc[g] += std::isinf(shift[g]) ? std::exp(v) : std::exp(v - shift[g]); break;
        default: acc[g] += v; break;
      }
    }
    int64_t count = groups > 0 ? x.size() / groups : 0;
    for (size_t g = 0; g < ng; ++g) {
      double r = acc[g];
      switch (op) {
        case ReduceOp::kMean: r = r / static_cast<double>(count); break;
        case ReduceOp::kL2: r = std::sqrt(r); break;
        case ReduceOp::kLogSum: r = std::log(r); break;
        case ReduceOp::kLogSumExp: r = std::log(r) + (std::isinf(shift[g]) ? 0.0 : shift[g]); break;
        default: break;
      }
      py[g] = static_cast<T>(r);
    }
    return absl::OkStatus();
  }
}

class ReduceKernel : public Kernel {
 public:
  ReduceKernel(ReduceOp op, bool axes_input, std::optional<std::vector<int64_t>> axes_attr, bool keepdims, bool noop)
      : op_(op), axes_input_(axes_input), axes_attr_(std::move(axes_attr)), keepdims_(keepdims), noop_(noop) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!ReduceTypeOk(op_, x->dtype())) {
      return absl::UnimplementedError(absl::StrCat("reduction does not support ", DescribeTensor(*x)));
    }
    std::vector<int64_t> axes;
    bool have_axes = false;
    if (axes_input_) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.OptionalInput(1));
      if (a != nullptr) {
        if (a->rank() > 1) return absl::InvalidArgumentError(absl::StrCat("axes ", DescribeTensor(*a), " must be 1-D"));
        ONNXKIT_ASSIGN_OR_RETURN(axes, ReadInt64s(*a));
        have_axes = !axes.empty();
      }
    } else if (axes_attr_) {
      axes = *axes_attr_;
      have_axes = !axes.empty();
    }
    std::vector<bool> reduced(static_cast<size_t>(x->rank()), !have_axes && !noop_);
    for (int64_t a : axes) {
      ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a, x->rank(), "axes value"));
      if (reduced[static_cast<size_t>(axis)]) {
        return absl::InvalidArgumentError(absl::StrCat("axes value ", a, " is repeated"));
      }
      reduced[static_cast<size_t>(axis)] = true;
    }
    std::vector<int64_t> kept = x->shape(), out_shape;
    int64_t groups = 1;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (reduced[i]) kept[i] = 1;
      groups *= kept[i];
      if (!reduced[i] || keepdims_) out_shape.push_back(kept[i]);
    }
    std::vector<int64_t> group = BroadcastIndices(kept, x->shape());
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
      return ReduceTyped<decltype(tag)>(op_, *x, group, groups, y);
    });
  }

 private:
  ReduceOp op_;
  bool axes_input_;
  std::optional<std::vector<int64_t>> axes_attr_;
  bool keepdims_, noop_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeReduce(const ir::Node& node, const KernelInfo& info, ReduceOp op) {
  int64_t input_since = op == ReduceOp::kSum ? 13 : 18;
  bool axes_input = info.opset >= input_since;
  std::optional<std::vector<int64_t>> axes_attr;
  if (!axes_input) axes_attr = node.GetInts("axes");
  return std::unique_ptr<Kernel>(new ReduceKernel(op, axes_input, std::move(axes_attr), AttrInt(node, "keepdims", 1) != 0,
                                                  axes_input && AttrInt(node, "noop_with_empty_axes", 0) != 0));
}

class ArgKernel : public Kernel {
 public:
  ArgKernel(bool is_max, int64_t axis, bool keepdims, bool last) : is_max_(is_max), axis_(axis), keepdims_(keepdims), last_(last) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    int64_t outer = 1, n = x->dim(static_cast<int>(axis)), inner = 1;
    std::vector<int64_t> out_shape;
    for (int i = 0; i < x->rank(); ++i) {
      if (i < axis) outer *= x->dim(i);
      if (i > axis) inner *= x->dim(i);
      if (i != axis) {
        out_shape.push_back(x->dim(i));
      } else if (keepdims_) {
        out_shape.push_back(1);
      }
    }
    if (n == 0 && outer * inner > 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot take the arg-extremum over empty axis ", axis, " of ",
                                                     DescribeTensor(*x)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, out_shape));
    return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using C = std::conditional_t<std::is_integral_v<T>, T, ComputeT<T>>;
      const T* px = x->data<T>();
      int64_t* py = y->mutable_data<int64_t>();
      // The axis outermost, the inner positions contiguous: each position
      // sees the values k = 0, 1, ... in order, as a scan per position would.
      using S = std::conditional_t<std::is_same_v<C, bool>, unsigned char, C>;  // not std::vector<bool>
      std::vector<S> bv(static_cast<size_t>(inner));
      // The comparison fixed per call and taken without branches.
      auto scan = [&](auto better) {
        for (int64_t o = 0; o < outer; ++o) {
          const T* p = px + o * n * inner;
          int64_t* best = py + o * inner;
          S* values = bv.data();
          for (int64_t i = 0; i < inner; ++i) {
            values[i] = static_cast<S>(static_cast<C>(p[i]));
            best[i] = 0;
          }
          for (int64_t k = 1; k < n; ++k) {
            const T* row = p + k * inner;
            for (int64_t i = 0; i < inner; ++i) {
              const C v = static_cast<C>(row[i]);
              const bool take = better(v, static_cast<C>(values[i]));
              best[i] = take ? k : best[i];
              values[i] = take ? static_cast<S>(v) : values[i];
            }
          }
        }
      };
      if (is_max_ && !last_) {
        scan([](C v, C b) { return v > b; });
      } else if (is_max_) {
        scan([](C v, C b) { return v >= b; });
      } else if (!last_) {
        scan([](C v, C b) { return v < b; });
      } else {
        scan([](C v, C b) { return v <= b; });
      }
      return absl::OkStatus();
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeArg(const ir::Node& node, bool is_max) {
  return std::unique_ptr<Kernel>(new ArgKernel(is_max, AttrInt(node, "axis", 0), AttrInt(node, "keepdims", 1) != 0,
                                               AttrInt(node, "select_last_index", 0) != 0));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceSum(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kSum);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMean(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kMean);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMax(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kMax);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceMin(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kMin);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceProd(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kProd);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceL1(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kL1);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceL2(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kL2);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceLogSum(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kLogSum);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceLogSumExp(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kLogSumExp);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeReduceSumSquare(const ir::Node& n, const KernelInfo& i) {
  return MakeReduce(n, i, ReduceOp::kSumSquare);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeArgMax(const ir::Node& n, const KernelInfo&) {
  return MakeArg(n, true);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeArgMin(const ir::Node& n, const KernelInfo&) {
  return MakeArg(n, false);
}

}  // namespace onnxkit::runner::reference
