// Kernel tables, one per backend, looked up by (domain, op, opset).
//
// Tables are X-macro files, one per op family (runner/reference/<family>.def):
//   ONNXKIT_KERNEL("", "Relu", 6, kLatest, MakeFn<Relu>)
// covers opsets [6, kLatest] of ai.onnx Relu. Ranges of one op must not overlap.
#ifndef ONNXKIT_RUNNER_KERNEL_REGISTRY_H_
#define ONNXKIT_RUNNER_KERNEL_REGISTRY_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner {

inline constexpr int64_t kLatest = 1000;

enum class Backend { kReference, kCpu, kCuda };

struct KernelEntry {
  std::string_view domain;  // "" for ai.onnx
  std::string_view op;
  int64_t since;
  int64_t until;
  KernelFactory factory;
};

std::span<const KernelEntry> KernelTable(Backend backend);

// The kernel for `op` at `opset` of `domain` ("" and "ai.onnx" are the same);
// Unimplemented naming the op, opset and backend when there is none. The cpu
// backend falls back to the reference kernels for ops it does not cover.
absl::StatusOr<const KernelEntry*> FindKernel(Backend backend, std::string_view domain, std::string_view op,
                                              int64_t opset);

std::string_view BackendName(Backend backend);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_KERNEL_REGISTRY_H_
