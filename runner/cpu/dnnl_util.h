// Shared pieces of the cpu backend (oneDNN 2.6): the engine and stream,
// ONNX <-> oneDNN type and shape conversion, memory objects over runner
// tensors, and the one boundary where oneDNN's exceptions become Statuses.
//
// Only runner/cpu/*.cc include this header (dnnl.hpp is heavy).
#ifndef ONNXKIT_RUNNER_CPU_DNNL_UTIL_H_
#define ONNXKIT_RUNNER_CPU_DNNL_UTIL_H_

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "runner/kernel.h"
#include "runner/tensor.h"

namespace onnxkit::runner::cpu {

// The process-wide cpu engine and its (in-order) stream.
dnnl::engine& Engine();
dnnl::stream& Stream();

// The oneDNN type of an ONNX element type (float, float16, bfloat16, int8,
// uint8, int32); nullopt for the others.
std::optional<dnnl::memory::data_type> DnnlType(int32_t onnx_dtype);

dnnl::memory::dims Dims(const std::vector<int64_t>& shape);
// The plain row-major tag of a rank (a, ab, abc, ... up to 6); undef beyond.
dnnl::memory::format_tag PlainTag(int rank);
// A plain row-major descriptor of `shape` with element type `dt`.
dnnl::memory::desc PlainDesc(const std::vector<int64_t>& shape, dnnl::memory::data_type dt);

// A oneDNN memory object over a tensor's bytes (no copy). The tensor must be
// of a type DnnlType() maps and of rank 1..6 (rank 0 is viewed as [1]).
// Inputs are read-only by convention: oneDNN only reads SRC/WEIGHTS.
dnnl::memory UserMemory(const Tensor& t);
dnnl::memory UserMemory(const Tensor& t, const dnnl::memory::desc& desc);

// A oneDNN memory object kept for one argument of a primitive across runs
// and pointed at each run's buffer: creating one per run costs allocations
// that outweigh the primitive itself on small tensors. A kernel holds one per
// argument (a session runs one run at a time); two arguments never share one.
// Never throws: where oneDNN refuses, the object is empty and Execute fails.
class HeldMemory {
 public:
  dnnl::memory At(const void* data, const dnnl::memory::desc& desc);
  dnnl::memory At(const Tensor& t, const dnnl::memory::desc& desc) { return At(t.raw(), desc); }

 private:
  dnnl::memory memory_;
  dnnl::memory::desc desc_;
};

// Runs `f` (which creates or executes oneDNN objects) and turns oneDNN's
// exceptions into Statuses naming `what`. The only try/catch of the backend.
template <typename F>
absl::Status Guard(std::string_view what, F&& f) noexcept {
  try {
    f();
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN ", std::string(what), ": ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("oneDNN ", std::string(what), ": out of memory"));
  }
}

// Executes a primitive on the stream and waits for it.
absl::Status Execute(std::string_view what, const dnnl::primitive& p,
                     const std::unordered_map<int, dnnl::memory>& args);

// A weight prepared once (reordered into the layout a primitive wants) and
// reused while the source tensor's buffer and the wanted layout are
// unchanged. Only for inputs that are constant for the session (see
// IsSessionConstantInput in runner/kernel.h), whose buffers never change.
class PreparedWeight {
 public:
  // The memory for `src` in layout `want`; reorders on the first call and
  // whenever `src`'s buffer or `want` changed.
  absl::StatusOr<dnnl::memory> Get(const Tensor& src, const dnnl::memory::desc& src_desc,
                                   const dnnl::memory::desc& want);

 private:
  const void* source_ = nullptr;
  dnnl::memory::desc want_;
  dnnl::memory memory_;
};

// The reference kernel of a node: the fallback of cpu kernels for cases
// oneDNN does not cover (element types, attributes, ranks).
absl::StatusOr<std::unique_ptr<Kernel>> MakeReferenceKernel(const ir::Node& node, const KernelInfo& info);

// Base of cpu kernels that keep a reference fallback.
class CpuKernel : public Kernel {
 public:
  explicit CpuKernel(std::unique_ptr<Kernel> fallback) : fallback_(std::move(fallback)) {}

 protected:
  absl::Status Fallback(KernelContext& ctx) { return fallback_->Run(ctx); }

 private:
  std::unique_ptr<Kernel> fallback_;
};

// Factory for a CpuKernel subclass K constructed as K(node, info, fallback):
// ONNXKIT_KERNEL("", "Relu", 6, kLatest, MakeCpu<ReluKernel>).
template <typename K>
absl::StatusOr<std::unique_ptr<Kernel>> MakeCpu(const ir::Node& node, const KernelInfo& info) {
  absl::StatusOr<std::unique_ptr<Kernel>> fallback = MakeReferenceKernel(node, info);
  if (!fallback.ok()) return fallback.status();
  return std::unique_ptr<Kernel>(new K(node, info, std::move(*fallback)));
}


}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_DNNL_UTIL_H_
