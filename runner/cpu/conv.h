// Factories of the cpu convolution/pooling/normalization kernels (conv.def).
#ifndef ONNXKIT_RUNNER_CPU_CONV_H_
#define ONNXKIT_RUNNER_CPU_CONV_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runner/fusion.h"
#include "runner/kernel.h"

namespace onnxkit::runner::cpu {

using Factory = absl::StatusOr<std::unique_ptr<Kernel>>(const ir::Node& node, const KernelInfo& info);

// conv.cc
Factory MakeConv;
Factory MakeConvTranspose;
Factory MakeQLinearConv;
Factory MakeConvInteger;
// A kernel running `chain` (a float Conv, then a folded BatchNormalization,
// activations and a residual Add applied to its result, NaN kept; see
// runner/fusion.h) as one convolution; for inputs oneDNN does not cover it
// runs the chain node by node.
absl::StatusOr<std::unique_ptr<Kernel>> MakeConvChain(const FusionChain& chain, const KernelInfo& info);
// A kernel running a quantized chain (runner/fusion.h) in int8 (qdq.cc);
// for inputs it does not cover it runs the chain node by node.
absl::StatusOr<std::unique_ptr<Kernel>> MakeQuantizedChain(const FusionChain& chain, const KernelInfo& info);
// False where the CPU lacks VNNI: weighted quantized chains then run node
// by node (oneDNN's u8 x s8 products would saturate).
bool QuantizedChainsRunInt8();
// conv_sequence.cc: whether oneDNN has a Winograd convolution on this CPU,
// and how many Winograd convolutions sequences have run in this process.
bool WinogradSupported();
int64_t WinogradConvolutionRuns();
// How many strided 3x3 convolutions of channel-blocked sequences have run
// channels-last in this process.
int64_t StridedChannelsLastRuns();
// How many residual sums of Conv sequences have added onto the residual in
// place (not onto a copy of it) in this process.
int64_t InPlaceResidualSums();
// conv_common.cc: how many copies of an input in another layout kernels
// kept with the value for the run's later readers (LayoutCopyKeeper), and
// how many times a kernel found one (FindLayoutCopy), in this process.
int64_t KeptLayoutCopies();
int64_t SharedLayoutCopies();
// How many times a Conv sequence took the largest magnitude of an input from
// an earlier reader of the value (InputMaxAbs) in this process.
int64_t SharedInputBounds();
// Stages of Conv sequences, over the process, before which the values
// computed so far were measured, the bound from the sequence's input
// having given out (runner/cpu/conv_sequence.cc).
int64_t MeasuredConvolutionStages();
// The fewest output channels a Winograd stage may have (default 64); returns
// the previous value. Sessions planned afterwards see it (tests use it to
// exercise the Winograd path on small convolutions).
int64_t SetWinogradMinOutputChannels(int64_t channels);
// conv.cc: ConvTransposes run as a product and a shuffle (kernel equal to
// the strides, no padding), in this process.
int64_t DeconvolutionProducts();
// pool.cc
Factory MakeMaxPool;
Factory MakeAveragePool;
Factory MakeGlobalAveragePool;
Factory MakeGlobalMaxPool;
Factory MakeResize;      // resize.cc
Factory MakeUpsample;    // resize.cc: Upsample as the Resize it is
Factory MakeGridSample;  // grid_sample.cc
// resize.cc: Resize runs on the backend's own loops (geometries oneDNN's
// resampling does not share), in this process.
int64_t OwnResizeRuns();
// grid_sample.cc: GridSample runs on the cpu kernel (not the reference's),
// in this process.
int64_t CpuGridSampleRuns();
// norm.cc
Factory MakeBatchNormalization;
Factory MakeLRN;

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_CONV_H_
