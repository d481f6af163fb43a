// Reference kernels: signal processing ops (factories listed in signal.def).
#ifndef ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_
#define ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// signal_dft.cc: DFT (opset 17: axis attribute; opset 20: axis input) and STFT.
absl::Status Dft17(KernelContext& ctx);
absl::Status Dft20(KernelContext& ctx);
absl::Status Stft(KernelContext& ctx);

// signal_windows.cc: window functions and the mel filter bank.
absl::Status HannWindow(KernelContext& ctx);
absl::Status HammingWindow(KernelContext& ctx);
absl::Status BlackmanWindow(KernelContext& ctx);
absl::Status MelWeightMatrix(KernelContext& ctx);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_SIGNAL_H_
