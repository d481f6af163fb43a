// Single-precision matrix products with a constant right-hand side packed
// once: C[m, n] = A[m, k] B[k, n] (+ bias[n]).
//
// B is stored in panels of 48 columns (k rows of 48 floats each, the last
// panel padded with zeros), which the AVX-512 kernel streams while it keeps
// an 8 x 48 block of C in registers. While one panel is in use the next is
// prefetched into L2 a little at a time, so reading weights that are not in
// cache (every weight of a large model, once per run) overlaps the
// arithmetic. NaN and infinities propagate as in any sum of products: no
// comparison or clamping is involved.
//
// Used by the cpu MatMul kernel (runner/cpu/matmul.cc) for a constant 2-D B
// when the CPU has AVX-512 (PackedGemmAvailable()); oneDNN covers the rest.
#ifndef ONNXKIT_RUNNER_CPU_MATMUL_PACKED_H_
#define ONNXKIT_RUNNER_CPU_MATMUL_PACKED_H_

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "runner/tensor.h"

namespace onnxkit::runner::cpu {

// True when this CPU (and OS) runs the packed kernels.
bool PackedGemmAvailable();

// The largest k the packed path takes: a panel (k x 48 floats) must stay
// well inside L2 while the rows of A stream past it.
inline constexpr int64_t kPackedGemmMaxK = 4096;

class PackedMatrix {
 public:
  PackedMatrix() = default;

  // Packs the row-major k x n matrix `b`. ResourceExhausted when the packed
  // copy cannot be allocated; InvalidArgument for non-positive sizes.
  static absl::StatusOr<PackedMatrix> Pack(const float* b, int64_t k, int64_t n);
  // The same from B's transpose: `bt` is the row-major n x k matrix B^T
  // (a Gemm's transB weights).
  static absl::StatusOr<PackedMatrix> PackTransposed(const float* bt, int64_t k, int64_t n);
  // Makes this a k x n matrix to be written panel by panel through
  // mutable_panel (each panel k rows of kPanelWidth floats, zero in the
  // columns past n), reusing the storage when large enough: products by
  // weights computed anew on every run (4-bit weights dequantized).
  absl::Status Reshape(int64_t k, int64_t n);
  float* mutable_panel(int64_t p) { return data_.get() + p * k_ * kPanelWidth; }

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return panels_; }
  // Panel p: k rows of kPanelWidth floats.
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kPanelWidth; }

  static constexpr int64_t kPanelWidth = 48;

 private:
  // k x n in panels, uninitialized.
  static absl::StatusOr<PackedMatrix> Allocated(int64_t k, int64_t n);

  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int64_t k_ = 0, n_ = 0, panels_ = 0;
  int64_t capacity_ = 0;  // floats allocated
  std::unique_ptr<float[], Free> data_;
};

// The packed form of a session-constant 2-D float tensor, packed on first
// use and again only if the tensor's buffer changes.
class PackedWeightCache {
 public:
  // `b` is k x n, or n x k when `transposed` (B^T stored).
  absl::StatusOr<const PackedMatrix*> Get(const Tensor& b, bool transposed = false);

 private:
  const void* source_ = nullptr;
  PackedMatrix packed_;
};

// True when a MatMul of float A (any rank >= 1) by the 2-D float `b` runs
// packed on this CPU: k in [16, kPackedGemmMaxK], n >= 32 and at most a
// quarter more columns once padded to whole panels.
bool PackedGemmTakes(const Tensor& a, const Tensor& b);
// The same for the shape alone: k rows, n columns of B (CPU support included).
bool PackedGemmTakesShape(int64_t k, int64_t n);

// C = A B (+ bias when non-null, bias[j] added to column j). A has m rows
// of b.k() floats, `lda` floats apart; C has m rows of b.n() floats, `ldc`
// floats apart. Splits the panels over the OpenMP threads (from 2^18
// multiply-adds; smaller products run on the calling thread). Requires
// PackedGemmAvailable().
void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedMatrix& b, const float* bias, float* c,
                int64_t ldc);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_MATMUL_PACKED_H_
