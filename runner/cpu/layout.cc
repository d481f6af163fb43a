// cpu layout kernels: Transpose as a oneDNN reorder into a destination desc
// with permuted strides (8-byte types move as pairs of int32; a Transpose of
// a constant is folded by the session, so it never runs here), and Concat on
// oneDNN's concat primitive with plain layouts. Types oneDNN cannot move,
// ranks above 6, empty tensors and invalid attributes (the reference
// reports them) run on the reference kernels.
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;

// The oneDNN type moving `dtype`'s elements and how many of them make one
// element (2 int32 for an 8-byte type); nullopt when there is none.
std::optional<std::pair<dt, int64_t>> MoveType(int32_t dtype) {
  if (dtype == pb::kInt64 || dtype == pb::kDouble || dtype == pb::kUint64)
    return std::make_pair(dt::s32, int64_t{2});
  if (dtype == pb::kUint32) return std::make_pair(dt::s32, int64_t{1});
  std::optional<dt> t = DnnlType(dtype);
  if (!t) return std::nullopt;
  return std::make_pair(*t, int64_t{1});
}

class TransposeKernel : public CpuKernel {
 public:
  TransposeKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), perm_(node.GetInts("perm")) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    std::optional<std::pair<dt, int64_t>> move = MoveType(x->dtype());
    int rank = x->rank();
    if (!move || x->size() == 0 || rank < 1 || rank + (move->second > 1 ? 1 : 0) > 6) return Fallback(ctx);
    std::vector<int64_t> perm = perm_.value_or(std::vector<int64_t>());
    if (!perm_) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    if (!IsPermutation(perm, rank)) return Fallback(ctx);
    std::vector<int64_t> out_shape(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i)
      out_shape[static_cast<size_t>(i)] = x->dim(static_cast<int>(perm[static_cast<size_t>(i)]));
    if (x->shape() != shape_ || x->dtype() != dtype_ || !primitive_) {
      ONNXKIT_RETURN_IF_ERROR(Build(*x, perm, out_shape, *move));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    dnnl::memory src, dst;
    ONNXKIT_RETURN_IF_ERROR(Guard("transpose", [&] {
      src = dnnl::memory(src_, Engine(), const_cast<void*>(x->raw()));
      dst = dnnl::memory(dst_, Engine(), y->mutable_raw());
    }));
    return Execute("transpose", primitive_, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  }

 private:
  static bool IsPermutation(const std::vector<int64_t>& perm, int rank) {
    if (static_cast<int>(perm.size()) != rank) return false;
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return false;
      seen[static_cast<size_t>(p)] = true;
    }
    return true;
  }

  // The source is plain; the destination desc has the source's dims with
  // the strides of the output's row-major layout (input dim perm[i] moves
  // with output dim i's stride).
  absl::Status Build(const Tensor& x, const std::vector<int64_t>& perm, const std::vector<int64_t>& out_shape,
                     std::pair<dt, int64_t> move) {
    size_t rank = out_shape.size();
    std::vector<int64_t> out_strides(rank);
    int64_t stride = move.second;
    for (size_t i = rank; i-- > 0;) {
      out_strides[i] = stride;
      stride *= out_shape[i];
    }
    dnnl::memory::dims dims(x.shape().begin(), x.shape().end()), strides(rank);
    for (size_t i = 0; i < rank; ++i) strides[static_cast<size_t>(perm[i])] = out_strides[i];
    if (move.second > 1) {  // the pair of int32 is an innermost dim
      dims.push_back(move.second);
      strides.push_back(1);
    }
    dnnl::memory::dims src_strides(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) src_strides[i - 1] = src_strides[i] * dims[i];
    ONNXKIT_RETURN_IF_ERROR(Guard("transpose", [&] {
      src_ = dnnl::memory::desc(dims, move.first, src_strides);
      dst_ = dnnl::memory::desc(dims, move.first, strides);
      primitive_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_, Engine(), dst_));
    }));
    shape_ = x.shape();
    dtype_ = x.dtype();
    return absl::OkStatus();
  }

  std::optional<std::vector<int64_t>> perm_;
  std::vector<int64_t> shape_;
  int32_t dtype_ = 0;
  dnnl::memory::desc src_, dst_;
  dnnl::reorder primitive_;
};

class ConcatKernel : public CpuKernel {
 public:
  ConcatKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), axis_(node.GetInt("axis")) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!axis_ || ctx.num_inputs() < 1) return Fallback(ctx);
    std::vector<const Tensor*> xs;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(i));
      xs.push_back(x);
    }
    const Tensor& first = *xs[0];
    std::optional<dt> type = DnnlType(first.dtype());
    int64_t rank = first.rank();
    if (!type || rank < 1 || rank > 6 || *axis_ < -rank || *axis_ >= rank) return Fallback(ctx);
    size_t axis = static_cast<size_t>(*axis_ < 0 ? *axis_ + rank : *axis_);
    std::vector<int64_t> out_shape = first.shape();
    out_shape[axis] = 0;
    std::vector<std::vector<int64_t>> key;
    for (const Tensor* x : xs) {
      if (x->dtype() != first.dtype() || x->rank() != rank || x->size() == 0) return Fallback(ctx);
      for (size_t d = 0; d < out_shape.size(); ++d) {
        if (d != axis && x->shape()[d] != first.shape()[d]) return Fallback(ctx);
      }
      out_shape[axis] += x->shape()[axis];
      key.push_back(x->shape());
    }
    key.push_back({first.dtype()});
    if (key != key_ || !primitive_) {
      std::vector<dnnl::memory::desc> srcs;
      for (const Tensor* x : xs) srcs.push_back(PlainDesc(x->shape(), *type));
      dst_ = PlainDesc(out_shape, *type);
      ONNXKIT_RETURN_IF_ERROR(Guard("concat", [&] {
        primitive_ = dnnl::concat(dnnl::concat::primitive_desc(dst_, static_cast<int>(axis), srcs, Engine()));
      }));
      srcs_ = srcs;
      key_ = key;
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, first.dtype(), out_shape));
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_DST, UserMemory(*y, dst_)}};
    for (size_t i = 0; i < xs.size(); ++i) {
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = UserMemory(*xs[i], srcs_[i]);
    }
    return Execute("concat", primitive_, args);
  }

 private:
  std::optional<int64_t> axis_;
  std::vector<std::vector<int64_t>> key_;
  std::vector<dnnl::memory::desc> srcs_;
  dnnl::memory::desc dst_;
  dnnl::concat primitive_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTranspose(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<TransposeKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeConcat(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ConcatKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
