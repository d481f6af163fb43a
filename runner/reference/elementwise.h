// Reference kernels: elementwise ops (factories listed in elementwise.def).
//
//   elementwise_unary.cc   unary math and activations, Clip, IsNaN, IsInf,
//                          Not, BitwiseNot, PRelu
//   elementwise_arith.cc   Add, Sub, Mul, Div, Pow, Mod, Max, Min, Sum, Mean
//                          (and the broadcasting helpers below)
//   elementwise_logic.cc   And, Or, Xor, comparisons, BitShift, Bitwise*, Where
//   elementwise_cast.cc    Cast, CastLike, BitCast
//
// Ops whose opsets differ in semantics have one table entry per range: the
// legacy `broadcast`/`axis` attributes of opsets < 7, same-shape variadic
// ops before opset 8, Clip's attributes before opset 11.
#ifndef ONNXKIT_RUNNER_REFERENCE_ELEMENTWISE_H_
#define ONNXKIT_RUNNER_REFERENCE_ELEMENTWISE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// --- Unary ops (elementwise_unary.cc) ---

enum class UnaryOp {
  kAbs, kNeg, kExp, kLog, kSqrt, kReciprocal, kFloor, kCeil, kRound, kSign,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kErf, kSigmoid, kHardSigmoid, kHardSwish, kSoftplus, kSoftsign, kElu, kSelu, kCelu,
  kLeakyRelu, kThresholdedRelu, kRelu, kGelu, kMish, kSwish, kBitwiseNot, kNot,
};

absl::StatusOr<std::unique_ptr<Kernel>> CreateUnaryKernel(UnaryOp op, const ir::Node& node, const KernelInfo& info);
template <UnaryOp kOp>
absl::StatusOr<std::unique_ptr<Kernel>> MakeUnary(const ir::Node& node, const KernelInfo& info) {
  return CreateUnaryKernel(kOp, node, info);
}

// Clip with min/max attributes (opsets 1-10) and with min/max inputs (11+).
absl::StatusOr<std::unique_ptr<Kernel>> MakeClipAttr(const ir::Node& node, const KernelInfo& info);
absl::Status Clip(KernelContext& ctx);
absl::Status IsNaN(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeIsInf(const ir::Node& node, const KernelInfo& info);
// PRelu: slope of size 1 or per channel (opsets 1-6), unidirectional
// broadcasting (7+).
absl::Status PReluLegacy(KernelContext& ctx);
absl::Status PRelu(KernelContext& ctx);

// --- Arithmetic (elementwise_arith.cc) ---

enum class ArithOp { kAdd, kSub, kMul, kDiv, kPow };

// Numpy broadcasting (opset >= 7), or the legacy `broadcast`/`axis`
// attributes when `info.opset` < 7.
absl::StatusOr<std::unique_ptr<Kernel>> CreateArithKernel(ArithOp op, const ir::Node& node, const KernelInfo& info);
template <ArithOp kOp>
absl::StatusOr<std::unique_ptr<Kernel>> MakeArith(const ir::Node& node, const KernelInfo& info) {
  return CreateArithKernel(kOp, node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeMod(const ir::Node& node, const KernelInfo& info);

enum class VariadicOp { kMax, kMin, kSum, kMean };

// Numpy broadcasting (opset >= 8); before, all inputs must have one shape.
absl::StatusOr<std::unique_ptr<Kernel>> CreateVariadicKernel(VariadicOp op, const ir::Node& node,
                                                             const KernelInfo& info);
template <VariadicOp kOp>
absl::StatusOr<std::unique_ptr<Kernel>> MakeVariadic(const ir::Node& node, const KernelInfo& info) {
  return CreateVariadicKernel(kOp, node, info);
}

// --- Logic, comparison and bit ops (elementwise_logic.cc) ---

enum class LogicOp {
  kAnd, kOr, kXor, kEqual, kGreater, kGreaterOrEqual, kLess, kLessOrEqual,
  kBitwiseAnd, kBitwiseOr, kBitwiseXor,
};

absl::StatusOr<std::unique_ptr<Kernel>> CreateLogicKernel(LogicOp op, const ir::Node& node, const KernelInfo& info);
template <LogicOp kOp>
absl::StatusOr<std::unique_ptr<Kernel>> MakeLogic(const ir::Node& node, const KernelInfo& info) {
  return CreateLogicKernel(kOp, node, info);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeBitShift(const ir::Node& node, const KernelInfo& info);
absl::Status Where(KernelContext& ctx);

// --- Casts (elementwise_cast.cc) ---

absl::StatusOr<std::unique_ptr<Kernel>> MakeCast(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeCastLike(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeBitCast(const ir::Node& node, const KernelInfo& info);

// --- Broadcasting helpers shared by the files of this family ---

// The output shape of a binary op and the shape its second input takes for
// numpy broadcasting. Numpy broadcasting when `legacy` is false. Otherwise
// the rules of opsets < 7 (attributes of `node`): `broadcast`=0 needs equal
// shapes; `broadcast`=1 aligns B's dims with A's at `axis` (suffix when
// absent), B of one element acts as a scalar, and the result has A's shape.
struct BinaryShapes {
  std::vector<int64_t> out;
  std::vector<int64_t> b;  // B's shape as broadcast against A
};
absl::StatusOr<BinaryShapes> ResolveBinaryShapes(const ir::Node& node, bool legacy, const std::vector<int64_t>& a,
                                                 const std::vector<int64_t>& b);

// Walks the output of a broadcast op in runs along its last dimension (dims
// of one value dropped, and neighbouring dims every input steps through as
// through one merged, so a scalar against a tensor or two equal shapes
// make a single run): each
// run is `length` output elements starting at `out_offset`; input k reads
// element offset(k) + j * step(k) for j in [0, length) (step 0 or 1). Input
// shapes must broadcast to `out_shape` (checked by the caller).
class BroadcastRuns {
 public:
  BroadcastRuns(const std::vector<int64_t>& out_shape, const std::vector<std::vector<int64_t>>& in_shapes);
  // Advances to the next run; false when the output is exhausted.
  bool Next();
  int64_t out_offset() const { return out_offset_; }
  int64_t length() const { return length_; }
  int64_t offset(size_t k) const { return offsets_[k]; }
  int64_t step(size_t k) const { return steps_[k]; }

 private:
  std::vector<int64_t> outer_shape_;               // out_shape without its last dim
  std::vector<std::vector<int64_t>> in_strides_;   // per input, per outer dim (0: broadcast)
  std::vector<int64_t> counter_;
  std::vector<int64_t> offsets_, steps_;
  int64_t out_offset_ = 0, length_ = 0, runs_left_ = 0;
  bool started_ = false;
};

// Calls f(out_index, a_index, b_index) for every element of the output of
// a two-input broadcast, in row-major order.
template <typename F>
void ForEachBroadcast2(const std::vector<int64_t>& out_shape, const std::vector<int64_t>& a_shape,
                       const std::vector<int64_t>& b_shape, F&& f) {
  BroadcastRuns runs(out_shape, {a_shape, b_shape});
  while (runs.Next()) {
    const int64_t o = runs.out_offset(), ia = runs.offset(0), ib = runs.offset(1);
    const int64_t sa = runs.step(0), sb = runs.step(1);
    for (int64_t j = 0; j < runs.length(); ++j) f(o + j, ia + j * sa, ib + j * sb);
  }
}

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_ELEMENTWISE_H_
