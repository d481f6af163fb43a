// How a row-major batched matrix product is handed to a column-major BLAS
// (the cuda backend's cuBLAS and cuBLASLt calls) without moving any data,
// including MatMul operands read through the Transposes that made them and
// results written through the Transpose that reads them. Pure arithmetic
// on shapes and strides, kept apart from the CUDA code so that it is
// tested on every machine.
#ifndef ONNXKIT_RUNNER_GEMM_GEOMETRY_H_
#define ONNXKIT_RUNNER_GEMM_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace onnxkit::runner {

// Row-major Y[i] (M x N) = op(A[i]) op(B[i]) for i in [0, batch). Matrix
// i of A starts stride_a elements after matrix i - 1 (0: one matrix for
// all); its stored rows are lda elements apart, and trans_a means
// op(A) = A^T (A is then stored as K rows of M). B likewise (K x N, or N x
// K stored when trans_b). Y is never transposed.
struct RowMajorProduct {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldy = 0;
  int64_t stride_a = 0, stride_b = 0, stride_y = 0;
  // The dims of the tensor Y is written into (Y's own dims, or Y's dims
  // through the permutation of a Transpose after the product).
  std::vector<int64_t> out_shape;
};

// The same product as the column-major call computes it: C = op(X) op(W)
// with C (rows x cols) = Y^T, X = B's memory and W = A's memory, in the
// order of cublasGemmStridedBatchedEx's arguments. X is stored
// (column-major) as x_rows x x_cols with leading dimension ldx, and W as
// w_rows x w_cols (what cuBLASLt's matrix layouts describe).
struct ColumnMajorCall {
  bool trans_x = false, trans_w = false;
  int64_t rows = 0, cols = 0, depth = 0, batch = 1;
  int64_t ldx = 0, stride_x = 0, ldw = 0, stride_w = 0, ldc = 0, stride_c = 0;
  int64_t x_rows = 0, x_cols = 0, w_rows = 0, w_cols = 0;
};
ColumnMajorCall ToColumnMajor(const RowMajorProduct& p);

// Packed operands: A is M x K (K x M when trans_a), B K x N (N x K when
// trans_b), Y M x N, matrices stride_a / stride_b / M * N elements apart.
RowMajorProduct PackedProduct(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t batch,
                              int64_t stride_a, int64_t stride_b);

// ONNX MatMul of packed tensors of shapes a_shape and b_shape read through
// the permutations perm_a and perm_b (a Transpose's perm; empty: none),
// with the result written through perm_y (nullopt: packed as MatMul's
// output). Both operands must have rank 2 or more after the permutation
// (and at most max_rank dims in all). nullopt when the product cannot be
// one strided batched call: a matrix with unit stride along neither its
// rows nor its columns, a batch that does not advance by one stride, a
// result whose rows are not contiguous, dims or strides past INT_MAX,
// shapes that do not multiply or K = 0.
std::optional<RowMajorProduct> PlanPermutedMatMul(const std::vector<int64_t>& a_shape,
                                                  const std::vector<int64_t>& perm_a,
                                                  const std::vector<int64_t>& b_shape,
                                                  const std::vector<int64_t>& perm_b,
                                                  const std::optional<std::vector<int64_t>>& perm_y,
                                                  int max_rank);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_GEMM_GEOMETRY_H_
