// Fused attention of a transformer chain (attention.cc): MatMul, Div,
// Add (mask), Softmax over the last axis, MatMul.
#ifndef ONNXKIT_RUNNER_CPU_ATTENTION_H_
#define ONNXKIT_RUNNER_CPU_ATTENTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runner/fusion.h"
#include "runner/kernel.h"

namespace onnxkit::runner::cpu {

// The kernel of an attention chain; `fallback` runs the chain node by node
// for inputs it does not cover.
absl::StatusOr<std::unique_ptr<Kernel>> MakeAttentionChain(const FusionChain& chain, const KernelInfo& info,
                                                           std::unique_ptr<Kernel> fallback);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_ATTENTION_H_
