// Kernel tables, expanded from the per-family .def files.
#include "runner/kernel_registry.h"

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "runner/cpu/families.h"
#include "runner/reference/families.h"

namespace onnxkit::runner {
namespace {

using namespace reference;  // NOLINT: kernel factories of the tables

constexpr KernelEntry kReferenceKernels[] = {
#define ONNXKIT_KERNEL(domain, op, since, until, factory) {domain, op, since, until, factory},
#include "runner/reference/all_kernels.def"
#undef ONNXKIT_KERNEL
};

constexpr KernelEntry kCpuKernels[] = {
#define ONNXKIT_KERNEL(domain, op, since, until, factory) {domain, op, since, until, cpu::factory},
#include "runner/cpu/all_kernels.def"
#undef ONNXKIT_KERNEL
};

std::string_view Canonical(std::string_view domain) { return domain == "ai.onnx" ? "" : domain; }

}  // namespace

std::span<const KernelEntry> KernelTable(Backend backend) {
  switch (backend) {
    case Backend::kReference:
      return kReferenceKernels;
    case Backend::kCpu:
      return kCpuKernels;
    default:
      return {};
  }
}

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kReference: return "reference";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

absl::StatusOr<const KernelEntry*> FindKernel(Backend backend, std::string_view domain, std::string_view op,
                                              int64_t opset) {
  domain = Canonical(domain);
  bool op_known = false;
  for (const KernelEntry& e : KernelTable(backend)) {
    if (e.op != op || Canonical(e.domain) != domain) continue;
    op_known = true;
    if (opset >= e.since && opset <= e.until) return &e;
  }
  // The cpu backend runs what it has no kernel for on the reference kernels.
  if (backend == Backend::kCpu) return FindKernel(Backend::kReference, domain, op, opset);
  std::string what = absl::StrCat(domain.empty() ? "ai.onnx" : Sv(domain), "::", Sv(op));
  if (op_known) {
    return absl::UnimplementedError(absl::StrCat("the ", Sv(BackendName(backend)), " backend has no kernel for ",
                                                 what, " at opset ", opset));
  }
  return absl::UnimplementedError(
      absl::StrCat("the ", Sv(BackendName(backend)), " backend does not implement ", what));
}

}  // namespace onnxkit::runner
