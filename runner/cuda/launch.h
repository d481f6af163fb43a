// Launchers of the CUDA backend's own device kernels (elementwise.cu,
// layout.cu), for the kernel classes. Element types are ONNX
// TensorProto.DataType numbers; the functions queue work on `stream` and
// return the launch error, if any. Floating-point element types (float,
// float16, bfloat16) are computed in float.
#ifndef ONNXKIT_RUNNER_CUDA_LAUNCH_H_
#define ONNXKIT_RUNNER_CUDA_LAUNCH_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace onnxkit::runner::cuda {

inline constexpr int32_t kFloat = 1;
inline constexpr int32_t kInt32 = 6;
inline constexpr int32_t kInt64 = 7;
inline constexpr int32_t kBool = 9;
inline constexpr int32_t kFloat16 = 10;
inline constexpr int32_t kBFloat16 = 16;

// float, float16 or bfloat16.
inline bool IsFloatType(int32_t dtype) { return dtype == kFloat || dtype == kFloat16 || dtype == kBFloat16; }

// The highest rank the strided kernels handle (higher ranks run on the cpu).
inline constexpr int kMaxRank = 8;

// Output coordinates to input element offsets: the output has `dims`
// (row-major); output coordinate c reads input element sum(c[i] * a[i])
// (and sum(c[i] * b[i]) for the second operand). Stride 0 broadcasts.
struct StridedGeometry {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a[kMaxRank] = {};
  int64_t b[kMaxRank] = {};
};

enum class UnaryOp {
  kRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kAbs, kNeg, kReciprocal,
  kLeakyRelu, kElu, kErf, kGelu, kGeluTanh, kFloor, kCeil, kHardSigmoid,
};
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };

// y[i] = op(x[i]) for n elements of a floating-point type; alpha and beta
// are the op's attributes (LeakyRelu/Elu alpha, HardSigmoid alpha and beta).
cudaError_t LaunchUnary(UnaryOp op, int32_t dtype, const void* x, void* y, int64_t n, float alpha, float beta,
                        cudaStream_t stream);
// y = op(a, b) over n output elements of a floating-point type; `geometry`
// rank 0: a, b and y have the same shape.
cudaError_t LaunchBinary(BinaryOp op, int32_t dtype, const void* a, const void* b, void* y, int64_t n,
                         const StridedGeometry& geometry, cudaStream_t stream);
// Whether LaunchCast converts `from` to `to` (float, float16, bfloat16,
// int32, int64, bool, in any pair).
bool CastSupported(int32_t from, int32_t to);
cudaError_t LaunchCast(int32_t from, int32_t to, const void* x, void* y, int64_t n, cudaStream_t stream);
// y[c] = x[sum(c[i] * geometry.a[i])] for n output elements of elem_bytes
// (1, 2, 4 or 8): Transpose (permuted strides) and broadcasting (stride 0).
cudaError_t LaunchStridedCopy(int elem_bytes, const void* x, void* y, int64_t n, const StridedGeometry& geometry,
                              cudaStream_t stream);
// Softmax (or LogSoftmax) of rows of `len` elements `inner` apart: element
// j of row (o, i) is at (o * len + j) * inner + i; outer * inner rows.
cudaError_t LaunchSoftmax(int32_t dtype, bool log, const void* x, void* y, int64_t outer, int64_t len,
                          int64_t inner, cudaStream_t stream);

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_LAUNCH_H_
