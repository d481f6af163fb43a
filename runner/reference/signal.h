// Reference kernels: signal processing ops (factories listed in signal.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_
#define ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_

#include <cstdint>
#include <vector>

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// signal_dft.cc: DFT (opset 17: axis attribute; opset 20: axis input) and STFT.
absl::Status Dft17(KernelContext& ctx);
absl::Status Dft20(KernelContext& ctx);
absl::Status Stft(KernelContext& ctx);

struct Cplx {
  double re = 0, im = 0;
};

// How the kernels above compute one transform of length `len`: the
// reference's direct sums, or (the cpu backend) a fast transform over the
// same lines, windows and scaling.
class Fourier {
 public:
  // The longest transform (its tables and scratch stay under 1 GiB).
  static constexpr int64_t kMaxLength = int64_t{1} << 23;

  virtual ~Fourier() = default;
  // The next Apply calls transform `len` values with exp(sign * 2 pi i jk / len);
  // ResourceExhausted past kMaxLength.
  virtual absl::Status Prepare(int64_t len, int sign) = 0;
  // out[j] = sum_k z[k] * exp(sign * 2 pi i jk / len) for j in [0, bins),
  // bins <= len = z.size().
  virtual void Apply(const std::vector<Cplx>& z, int64_t bins, std::vector<Cplx>* out) = 0;
};
absl::Status Dft17With(KernelContext& ctx, Fourier& fourier);
absl::Status Dft20With(KernelContext& ctx, Fourier& fourier);
absl::Status StftWith(KernelContext& ctx, Fourier& fourier);

// signal_windows.cc: window functions and the mel filter bank.
absl::Status HannWindow(KernelContext& ctx);
absl::Status HammingWindow(KernelContext& ctx);
absl::Status BlackmanWindow(KernelContext& ctx);
absl::Status MelWeightMatrix(KernelContext& ctx);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_
