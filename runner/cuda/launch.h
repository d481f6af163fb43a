// Launchers of the CUDA backend's own device kernels (elementwise.cu,
// layout.cu), for the kernel classes. Element types are ONNX
// TensorProto.DataType numbers; the functions queue work on `stream` and
// return the launch error, if any. Floating-point element types (float,
// float16, bfloat16) are computed in float.
#ifndef ONNXKIT_RUNNER_CUDA_LAUNCH_H_
#define ONNXKIT_RUNNER_CUDA_LAUNCH_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "runner/reference/quant_scale_map.h"

namespace onnxkit::runner::cuda {

inline constexpr int32_t kFloat = 1;
inline constexpr int32_t kUint8 = 2;
inline constexpr int32_t kInt8 = 3;
inline constexpr int32_t kUint16 = 4;
inline constexpr int32_t kInt16 = 5;
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
  // LaunchBinary with rank 0: operand a reads element (i / a_div) %
  // a_period of output element i (a_period 0: element i), b likewise; the
  // broadcasts of a row (bias) or of one value per channel, without the
  // per-dim index arithmetic.
  int64_t a_div = 1, a_period = 0, b_div = 1, b_period = 0;
};

enum class UnaryOp {
  kRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kAbs, kNeg, kReciprocal,
  kLeakyRelu, kElu, kErf, kGelu, kGeluTanh, kFloor, kCeil, kHardSigmoid,
  kClip,  // alpha = low bound, beta = high bound; NaN stays NaN
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
// Element-wise nodes run as one kernel (LaunchChain): op k computes value
// k from operands that are earlier values (0 .. k-1) or inputs
// (kMaxChainOps + j); the result is the last value. Each value is rounded to
// the element type as a node's output would be.
inline constexpr int kMaxChainOps = 8;
inline constexpr int kMaxChainInputs = 8;
struct ChainOp {
  bool binary = false;
  UnaryOp unary = UnaryOp::kRelu;
  BinaryOp binary_op = BinaryOp::kAdd;
  int a = 0, b = 0;
  float alpha = 0, beta = 0;
};
// Input j read for output element i: element i (period 0, not strided),
// (i / div) % period, or, strided, sum(c[d] * strides[d]) over the output
// coordinates c (dims in ChainProgram).
struct ChainInput {
  const void* data = nullptr;
  int64_t div = 1, period = 0;
  bool strided = false;
  int64_t strides[kMaxRank] = {};
};
struct ChainProgram {
  int num_ops = 0;
  ChainOp ops[kMaxChainOps];
  int num_inputs = 0;
  ChainInput inputs[kMaxChainInputs];
  int rank = 0;
  int64_t dims[kMaxRank] = {};
};
cudaError_t LaunchChain(int32_t dtype, const ChainProgram& program, void* y, int64_t n, cudaStream_t stream);
// Softmax (or LogSoftmax) of the chain's result, as LaunchSoftmax of it
// (rows of `len` elements `inner` apart over the program's output
// elements), without storing the result.
cudaError_t LaunchChainSoftmax(int32_t dtype, const ChainProgram& program, bool log, void* y, int64_t outer,
                               int64_t len, int64_t inner, cudaStream_t stream);

// Comparisons and logic (elementwise.cu): y (bool, one byte) = op(a, b)
// over n output elements, operands placed as in LaunchBinary (`geometry`
// rank 0: a, b and y have the same shape). Float types compare in float
// (NaN compares unequal and unordered), int32 and int64 as integers, bool
// as bytes; kNot reads a only.
enum class CompareOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor, kNot };
cudaError_t LaunchCompare(CompareOp op, int32_t dtype, const void* a, const void* b, void* y, int64_t n,
                          const StridedGeometry& geometry, cudaStream_t stream);
// Where: y[i] = c[ic] ? x[ix] : y[iy] for elements of elem_bytes (1, 2, 4,
// 8); the output coordinates read the three operands through c, x and z
// strides over dims (stride 0 broadcasts).
struct WhereGeometry {
  int rank = 0;
  int64_t dims[kMaxRank] = {}, c[kMaxRank] = {}, x[kMaxRank] = {}, z[kMaxRank] = {};
};
cudaError_t LaunchWhere(int elem_bytes, const void* c, const void* x, const void* z, void* y, int64_t n,
                        const WhereGeometry& geometry, cudaStream_t stream);

// Reductions (reduce.cu): output element o (of `outputs`, row-major over
// kept_dims) reduces the `count` elements base + offset(r), where base is o
// read through kept_strides and offset(r) is r (contiguous) or r read
// through reduced_dims / reduced_strides.
enum class ReduceOp { kSum, kMean, kMax, kMin, kSumSquare, kL2 };
struct ReduceGeometry {
  int kept_rank = 0;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int reduced_rank = 0;
  int64_t reduced_dims[kMaxRank] = {}, reduced_strides[kMaxRank] = {};
  bool contiguous = false;
  int64_t outputs = 0, count = 0;
};
cudaError_t LaunchReduce(ReduceOp op, int32_t dtype, const void* x, void* y, const ReduceGeometry& g,
                         cudaStream_t stream);

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

// Pooling windows over 1 to 3 spatial dims (nn.cu). Coordinates are taken
// in the padded input: tap k of output position o along dim d sits at
// o * stride + k * dilation, which is input element (that - pad_begin) when
// it lies in [0, in); `limit` is in + pad_begin + pad_end (the taps that
// count_include_pad counts).
struct PoolGeometry {
  int rank = 0;
  int64_t planes = 0;  // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1}, pad_begin[3] = {}, limit[3] = {1, 1, 1};
  int64_t in_size = 1, out_size = 1;  // products of in and out
};
enum class PoolMode { kMax, kAverage, kAverageIncludePad };
cudaError_t LaunchPool(PoolMode mode, int32_t dtype, const void* x, void* y, const PoolGeometry& g,
                       cudaStream_t stream);
// BatchNormalization in inference: x has `total` elements laid out as
// [n, c, inner]; scale, bias, mean and var have c elements of x's type.
cudaError_t LaunchBatchNorm(int32_t dtype, const void* x, const void* scale, const void* bias, const void* mean,
                            const void* var, void* y, int64_t total, int64_t c, int64_t inner, float epsilon,
                            cudaStream_t stream);
// LayerNormalization of `rows` rows of `len` elements; scale and bias (null:
// none) have len elements of x's type.
cudaError_t LaunchLayerNorm(int32_t dtype, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                            int64_t len, float epsilon, cudaStream_t stream);
// LRN across the c channels of [n, c, inner].
cudaError_t LaunchLrn(int32_t dtype, const void* x, void* y, int64_t total, int64_t c, int64_t inner, int64_t size,
                      float alpha, float beta, float bias, cudaStream_t stream);
// Resize (nn.cu; experimental): output element o at coordinates c reads,
// per axis d, count[d][c_d] taps starting at entry first[d][c_d] of
// offset[d] (input element offsets along the axis, its stride included)
// and weight[d]; the result is the sum over the product of the axes' taps
// of the weights' product times the input element, or `extrapolation`
// where an axis has no tap (outside the input).
struct ResizeGeometry {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  const int64_t* first[kMaxRank] = {};
  const int64_t* count[kMaxRank] = {};
  const int64_t* offset[kMaxRank] = {};
  const float* weight[kMaxRank] = {};
  float extrapolation = 0;
};
cudaError_t LaunchResize(int32_t dtype, const void* x, void* y, int64_t n, const ResizeGeometry& g,
                         cudaStream_t stream);
// QuantizeLinear (nn.cu; experimental): y[i] = saturate(rint(x[i] / s) + z),
// s and z the elements map.Index(i) of the scale and the zero point (null:
// 0). x and the scale have floating-point type dtype, the quotient is
// rounded to it (as the reference backend's in numpy's promotion), a NaN
// quotient gives z; y_type is uint8, int8, uint16 or int16, z's type too.
cudaError_t LaunchQuantize(int32_t dtype, int32_t y_type, const void* x, const void* scale, const void* zp,
                           void* y, int64_t n, const reference::ScaleMap& map, cudaStream_t stream);
// DequantizeLinear (experimental): y[i] = float(x[i] - z) * s rounded to
// dtype, the scale's and y's floating-point type; x_type is uint8, int8,
// uint16, int16 or int32, z's type too.
cudaError_t LaunchDequantize(int32_t x_type, int32_t dtype, const void* x, const void* scale, const void* zp,
                             void* y, int64_t n, const reference::ScaleMap& map, cudaStream_t stream);
// y[o, j, i] = x[o, indices[j], i] for x of [outer, axis_len, inner];
// device indices of index_bytes (4 or 8). flag null: the indices are
// already in [0, axis_len). Else negative ones count from the end and one
// out of range sets *flag (its element is zero).
cudaError_t LaunchGather(int elem_bytes, const void* x, const void* indices, int index_bytes, void* y,
                         int64_t outer, int64_t axis_len, int64_t count, int64_t inner, int* flag,
                         cudaStream_t stream);

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_LAUNCH_H_
