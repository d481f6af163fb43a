// cpu MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool: oneDNN
// pooling_v2 (dilations) on plain tensors of rank 3 to 5 (oneDNN's plain
// pooling kernels beat a reorder to blocked layouts here). The window is the
// reference kernels' (auto_pad, pads, ceil_mode resolved per input shape);
// ceil_mode becomes extra end padding.
//
// Falls back to the reference kernel when MaxPool's Indices output is
// requested, for types other than float32 (and int8/uint8 for MaxPool), when
// an output window holds no input element (the reference gives -inf/NaN
// there), and for AveragePool with count_include_pad where ceil_mode added
// padding (oneDNN would count it in the divisor; ONNX does not).
#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;
using reference::Window;
using reference::WindowAttrs;

enum class PoolMode { kMax, kAverage };

// True when every output position of dim d reads at least one input element.
bool EveryWindowReadsInput(const Window& w, size_t d) {
  for (int64_t o = 0; o < w.out[d]; ++o) {
    bool reads = false;
    for (int64_t k = 0; k < w.kernel[d] && !reads; ++k) {
      int64_t i = o * w.strides[d] - w.pad_begin[d] + k * w.dilations[d];
      reads = i >= 0 && i < w.in[d];
    }
    if (!reads) return false;
  }
  return true;
}

class PoolKernel : public CpuKernel {
 public:
  PoolKernel(std::unique_ptr<Kernel> fallback, PoolMode mode, bool global, bool count_include_pad,
             WindowAttrs attrs)
      : CpuKernel(std::move(fallback)),
        mode_(mode),
        global_(global),
        count_include_pad_(count_include_pad),
        attrs_(std::move(attrs)) {}

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_outputs() > 1 && ctx.OutputRequested(1)) return Fallback(ctx);  // Indices
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!built_ || x->shape() != shape_ || x->dtype() != dtype_) {
      primitive_ = dnnl::primitive();
      supported_ = Build(*x);
      built_ = true;
      shape_ = x->shape();
      dtype_ = x->dtype();
    }
    if (!supported_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), y_shape_));
    std::unordered_map<int, memory> args;
    ONNXKIT_RETURN_IF_ERROR(Guard("pooling memory", [&] {
      args[DNNL_ARG_SRC] = UserMemory(*x, src_);
      args[DNNL_ARG_DST] = UserMemory(*y, dst_);
    }));
    return Execute("pooling", primitive_, args);
  }

 private:
  bool Build(const Tensor& x) {
    std::optional<memory::data_type> dt = DnnlType(x.dtype());
    bool type_ok = x.dtype() == pb::kFloat ||
                   (mode_ == PoolMode::kMax && (x.dtype() == pb::kInt8 || x.dtype() == pb::kUint8));
    if (!dt || !type_ok || x.rank() < 3 || x.rank() > 5 || x.size() == 0) return false;
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel = global_ ? in : attrs_.kernel_shape;
    if (kernel.size() != in.size()) return false;
    absl::StatusOr<Window> resolved = reference::ResolveWindow(global_ ? WindowAttrs{} : attrs_, in, kernel);
    if (!resolved.ok() || resolved->out_size == 0) return false;
    const Window& w = *resolved;
    memory::dims pad_end;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!EveryWindowReadsInput(w, d)) return false;
      int64_t extent = (w.kernel[d] - 1) * w.dilations[d] + 1;
      // End padding the last window needs (more than pad_end under ceil_mode).
      int64_t needed = (w.out[d] - 1) * w.strides[d] + extent - w.in[d] - w.pad_begin[d];
      int64_t end = std::max(needed, w.pad_end[d]);
      if (end > w.pad_end[d] && mode_ == PoolMode::kAverage && count_include_pad_) return false;
      if ((w.in[d] + w.pad_begin[d] + end - extent) / w.strides[d] + 1 != w.out[d]) return false;
      pad_end.push_back(end);
    }
    y_shape_ = {x.dim(0), x.dim(1)};
    y_shape_.insert(y_shape_.end(), w.out.begin(), w.out.end());
    src_ = PlainDesc(x.shape(), *dt);
    dst_ = PlainDesc(y_shape_, *dt);
    dnnl::algorithm alg = mode_ == PoolMode::kMax ? dnnl::algorithm::pooling_max
                          : count_include_pad_    ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    memory::dims dilations;
    for (int64_t d : w.dilations) dilations.push_back(d - 1);
    absl::Status s = Guard("pooling", [&] {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_, dst_, Dims(w.strides),
                                       Dims(w.kernel), dilations, Dims(w.pad_begin), pad_end);
      primitive_ = dnnl::pooling_v2_forward(dnnl::pooling_v2_forward::primitive_desc(d, Engine()));
    });
    return s.ok();
  }

  PoolMode mode_;
  bool global_;
  bool count_include_pad_;
  WindowAttrs attrs_;
  bool built_ = false;
  bool supported_ = false;
  std::vector<int64_t> shape_;
  int32_t dtype_ = 0;
  std::vector<int64_t> y_shape_;
  memory::desc src_, dst_;
  dnnl::primitive primitive_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakePool(const ir::Node& node, const KernelInfo& info, PoolMode mode,
                                                 bool global) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  WindowAttrs attrs;
  if (!global) {
    ONNXKIT_ASSIGN_OR_RETURN(attrs, reference::ParseWindowAttrs(node));
  }
  bool count_include_pad =
      mode == PoolMode::kAverage && !global && reference::AttrInt(node, "count_include_pad", 0) != 0;
  return std::unique_ptr<Kernel>(
      new PoolKernel(std::move(fallback), mode, global, count_include_pad, std::move(attrs)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxPool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kMax, false);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeAveragePool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kAverage, false);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalAveragePool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kAverage, true);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeGlobalMaxPool(const ir::Node& node, const KernelInfo& info) {
  return MakePool(node, info, PoolMode::kMax, true);
}

}  // namespace onnxkit::runner::cpu
