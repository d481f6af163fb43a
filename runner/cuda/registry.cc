// The CUDA kernel table (kernels.def) and helpers the kernels share.
#include <string_view>

#include "absl/strings/str_cat.h"
#include "lib/base/strings.h"
#include "runner/cuda/kernels.h"
#include "runner/kernel_registry.h"

namespace onnxkit::runner::cuda {
namespace {

struct Entry {
  std::string_view domain;
  std::string_view op;
  int64_t since;
  int64_t until;
  Factory* factory;
};

constexpr Entry kKernels[] = {
#define ONNXKIT_KERNEL(domain, op, since, until, factory) {domain, op, since, until, &factory},
#include "runner/cuda/kernels.def"
#undef ONNXKIT_KERNEL
};

const Entry* Find(std::string_view domain, std::string_view op, int64_t opset) {
  if (domain == "ai.onnx") domain = "";
  for (const Entry& e : kKernels) {
    if (e.domain == domain && e.op == op && opset >= e.since && opset <= e.until) return &e;
  }
  return nullptr;
}

}  // namespace

bool HasKernel(std::string_view domain, std::string_view op, int64_t opset) {
  return Find(domain, op, opset) != nullptr;
}

std::vector<std::string_view> KernelOps() {
  std::vector<std::string_view> ops;
  for (const Entry& e : kKernels) ops.push_back(e.op);
  return ops;
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeKernel(const std::shared_ptr<Context>& context,
                                                       const ir::Node& node, const KernelInfo& info) {
  const Entry* entry = Find(node.domain(), node.op_type(), info.opset);
  if (entry == nullptr) return std::unique_ptr<CudaKernel>();
  return entry->factory(context, node, info);
}

std::optional<std::vector<const Tensor*>> TensorInputs(const KernelContext& ctx, int n) {
  std::vector<const Tensor*> tensors;
  for (int i = 0; i < n; ++i) {
    const RtValue* v = ctx.Value(i);
    if (v == nullptr || !v->is_tensor() || !v->tensor().defined()) return std::nullopt;
    tensors.push_back(&v->tensor());
  }
  return tensors;
}

absl::Status Launched(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(Sv(what), " on the device: ", cudaGetErrorString(error)));
}

std::optional<StridedGeometry> BroadcastGeometry(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (out.size() > static_cast<size_t>(kMaxRank) || in.size() > out.size()) return std::nullopt;
  StridedGeometry g;
  g.rank = static_cast<int>(out.size());
  const size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    g.dims[d] = out[d];
    if (d < lead) {
      g.a[d] = 0;
      continue;
    }
    const int64_t in_dim = in[d - lead];
    if (in_dim != out[d] && in_dim != 1) return std::nullopt;
    g.a[d] = in_dim == 1 ? 0 : stride;
    stride *= in_dim;
  }
  return g;
}

}  // namespace onnxkit::runner::cuda
