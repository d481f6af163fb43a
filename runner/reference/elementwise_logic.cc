// Reference kernels: And, Or, Xor, Equal, Greater, GreaterOrEqual, Less,
// LessOrEqual (bool results; the legacy broadcast/axis attributes below
// opset 7), BitwiseAnd/Or/Xor, BitShift and Where.
#include <type_traits>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/elementwise.h"

namespace onnxkit::runner::reference {
namespace {

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

bool IsBoolOp(LogicOp op) { return op == LogicOp::kAnd || op == LogicOp::kOr || op == LogicOp::kXor; }
bool IsBitwiseOp(LogicOp op) {
  return op == LogicOp::kBitwiseAnd || op == LogicOp::kBitwiseOr || op == LogicOp::kBitwiseXor;
}

class LogicKernel : public Kernel {
 public:
  LogicKernel(LogicOp op, bool legacy) : op_(op), legacy_(legacy) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != b->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input types differ: ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
    }
    const int32_t dtype = a->dtype();
    const bool supported = IsBoolOp(op_)      ? dtype == pb::kBool
                           : IsBitwiseOp(op_) ? IsIntegerType(dtype)
                           : op_ == LogicOp::kEqual ? dtype == pb::kString || dtype == pb::kBool || IsNumber(dtype)
                                                    : IsNumber(dtype);
    if (!supported) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.node().op_type(), " does not support element type ",
                                                     Sv(DataTypeName(dtype))));
    }
    ONNXKIT_ASSIGN_OR_RETURN(BinaryShapes shapes, ResolveBinaryShapes(ctx.node(), legacy_, a->shape(), b->shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, IsBitwiseOp(op_) ? dtype : int32_t{pb::kBool}, shapes.out));
    if (dtype == pb::kString) {
      const std::vector<std::string>& sa = a->strings();
      const std::vector<std::string>& sb = b->strings();
      bool* py = y->mutable_data<bool>();
      ForEachBroadcast2(shapes.out, a->shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
        py[o] = sa[static_cast<size_t>(i)] == sb[static_cast<size_t>(j)];
      });
      return absl::OkStatus();
    }
    return VisitNumeric(dtype, [&](auto tag) -> absl::Status {
      RunTyped<decltype(tag)>(*a, *b, shapes, y);
      return absl::OkStatus();
    });
  }

 private:
  static bool IsIntegerType(int32_t dtype) {
    switch (dtype) {
      case pb::kInt8: case pb::kInt16: case pb::kInt32: case pb::kInt64:
      case pb::kUint8: case pb::kUint16: case pb::kUint32: case pb::kUint64: return true;
      default: return false;
    }
  }
  static bool IsNumber(int32_t dtype) {
    return IsIntegerType(dtype) || dtype == pb::kFloat || dtype == pb::kDouble || dtype == pb::kFloat16 ||
           dtype == pb::kBfloat16;
  }

  template <typename T>
  void RunTyped(const Tensor& a, const Tensor& b, const BinaryShapes& shapes, Tensor* y) const {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const LogicOp op = op_;
    if constexpr (kIsInt<T>) {
      if (IsBitwiseOp(op)) {
        T* py = y->mutable_data<T>();
        ForEachBroadcast2(shapes.out, a.shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
          py[o] = static_cast<T>(op == LogicOp::kBitwiseAnd ? pa[i] & pb[j]
                                 : op == LogicOp::kBitwiseOr ? pa[i] | pb[j]
                                                             : pa[i] ^ pb[j]);
        });
        return;
      }
    }
    bool* py = y->mutable_data<bool>();
    // The op fixed per loop (a runtime choice per element kept the loops
    // scalar and branchy), and the common steps of a broadcast run fixed
    // too (runtime steps kept them from vectorizing).
    auto each = [&](auto fn) {
      BroadcastRuns runs(shapes.out, {a.shape(), shapes.b});
      while (runs.Next()) {
        bool* r = py + runs.out_offset();
        const int64_t i = runs.offset(0), j = runs.offset(1), n = runs.length();
        const int64_t si = runs.step(0), sj = runs.step(1);
        // (An output is a buffer of its own or its input's exactly: the
        // loops carry no dependence.)
        if (si == 1 && sj == 1) {
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) r[k] = fn(i + k, j + k);
        } else if (si == 1 && sj == 0) {
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) r[k] = fn(i + k, j);
        } else if (si == 0 && sj == 1) {
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) r[k] = fn(i, j + k);
        } else {
          for (int64_t k = 0; k < n; ++k) r[k] = fn(i + k * si, j + k * sj);
        }
      }
    };
    if constexpr (std::is_same_v<T, bool>) {
      // Bool bytes are read as bytes: a model may hold values other than 0/1.
      const uint8_t* ba = a.data<uint8_t>();
      const uint8_t* bb = b.data<uint8_t>();
      switch (op) {
        case LogicOp::kAnd:
          each([&](int64_t i, int64_t j) { return (ba[i] != 0) & (bb[j] != 0); });
          break;
        case LogicOp::kOr:
          each([&](int64_t i, int64_t j) { return (ba[i] != 0) | (bb[j] != 0); });
          break;
        case LogicOp::kXor:
          each([&](int64_t i, int64_t j) { return (ba[i] != 0) != (bb[j] != 0); });
          break;
        default:
          each([&](int64_t i, int64_t j) { return (ba[i] != 0) == (bb[j] != 0); });
          break;
      }
      return;
    }
    using C = ComputeT<T>;
    auto x = [&](int64_t i) { return static_cast<C>(pa[i]); };
    auto z = [&](int64_t j) { return static_cast<C>(pb[j]); };
    switch (op) {
      case LogicOp::kEqual:
        each([&](int64_t i, int64_t j) { return x(i) == z(j); });
        break;
      case LogicOp::kGreater:
        each([&](int64_t i, int64_t j) { return x(i) > z(j); });
        break;
      case LogicOp::kGreaterOrEqual:
        each([&](int64_t i, int64_t j) { return x(i) >= z(j); });
        break;
      case LogicOp::kLess:
        each([&](int64_t i, int64_t j) { return x(i) < z(j); });
        break;
      case LogicOp::kLessOrEqual:
        each([&](int64_t i, int64_t j) { return x(i) <= z(j); });
        break;
      default:
        each([](int64_t, int64_t) { return false; });
        break;
    }
  }

  LogicOp op_;
  bool legacy_;
};

class BitShiftKernel : public Kernel {
 public:
  explicit BitShiftKernel(bool left) : left_(left) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != b->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input types differ: ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
    }
    const int32_t dtype = a->dtype();
    if (dtype != pb::kUint8 && dtype != pb::kUint16 && dtype != pb::kUint32 && dtype != pb::kUint64) {
      return absl::InvalidArgumentError(
          absl::StrCat("BitShift needs unsigned integer inputs, got ", Sv(DataTypeName(dtype))));
    }
    ONNXKIT_ASSIGN_OR_RETURN(BinaryShapes shapes, ResolveBinaryShapes(ctx.node(), false, a->shape(), b->shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, shapes.out));
    return VisitNumeric(dtype, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
        const T* pa = a->data<T>();
        const T* pb = b->data<T>();
        T* py = y->mutable_data<T>();
        const bool left = left_;
        ForEachBroadcast2(shapes.out, a->shape(), shapes.b, [&](int64_t o, int64_t i, int64_t j) {
          uint64_t x = pa[i], s = pb[j];
          // Shifting by the width or more gives 0 (numpy's result), not undefined behavior.
          py[o] = static_cast<T>(s >= sizeof(T) * 8 ? 0 : left ? x << s : x >> s);
        });
      }
      return absl::OkStatus();
    });
  }

 private:
  bool left_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> CreateLogicKernel(LogicOp op, const ir::Node&, const KernelInfo& info) {
  return std::unique_ptr<Kernel>(new LogicKernel(op, info.opset < 7));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeBitShift(const ir::Node& node, const KernelInfo&) {
  std::optional<std::string> direction = node.GetString("direction");
  if (!direction || (*direction != "LEFT" && *direction != "RIGHT")) {
    return absl::InvalidArgumentError(absl::StrCat("attribute direction must be \"LEFT\" or \"RIGHT\", got ",
                                                   direction ? absl::StrCat("\"", *direction, "\"") : "none"));
  }
  return std::unique_ptr<Kernel>(new BitShiftKernel(*direction == "LEFT"));
}

absl::Status Where(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* y, ctx.Input(2));
  if (cond->dtype() != pb::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("condition must be bool, got ", DescribeTensor(*cond)));
  }
  if (x->dtype() != y->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("X and Y types differ: ", DescribeTensor(*x), " and ", DescribeTensor(*y)));
  }
  std::vector<std::vector<int64_t>> shapes = {cond->shape(), x->shape(), y->shape()};
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x->dtype(), out_shape));
  const uint8_t* pc = cond->data<uint8_t>();  // bool bytes, any nonzero is true
  ElementCopier from_x(*x, *out), from_y(*y, *out);
  BroadcastRuns runs(out_shape, shapes);
  while (runs.Next()) {
    for (int64_t j = 0; j < runs.length(); ++j) {
      int64_t o = runs.out_offset() + j;
      if (pc[runs.offset(0) + j * runs.step(0)]) {
        from_x.Copy(runs.offset(1) + j * runs.step(1), o);
      } else {
        from_y.Copy(runs.offset(2) + j * runs.step(2), o);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
