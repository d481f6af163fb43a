// cpu layout kernels: Transpose as a view of its input where only axes of
// length 1 move, as block copies where trailing axes of at least 64 bytes
// stay in place, else as a oneDNN reorder into a destination
// desc with permuted strides (8-byte types move as pairs of int32; a
// Transpose of a constant is folded by the session, so it never runs here), Concat as
// block copies, inference Dropout as its input, and constant-mode Pad
// (PadKernel). Types the kernels cannot
// move, Transpose of ranks above 6 or empty tensors, and invalid attributes
// (the reference reports them) run on the reference kernels.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/data_type.h"
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
    // A permutation that only moves axes of length 1 leaves the elements in
    // order: the output is the input's bytes under the new shape.
    if (!x->is_string() && KeepsOrder(*x, perm)) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor y, x->Reshaped(out_shape));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    // Permutations that keep trailing axes in place move contiguous blocks.
    int kept = rank;
    while (kept > 0 && perm[static_cast<size_t>(kept - 1)] == kept - 1) --kept;
    int64_t block_bytes = static_cast<int64_t>(DataTypeBits(x->dtype()) / 8);
    for (int i = kept; i < rank; ++i) block_bytes *= x->dim(i);
    if (kept < rank && block_bytes >= kMinBlockBytes && DataTypeBits(x->dtype()) % 8 == 0 &&
        !x->is_string()) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), out_shape));
      MoveBlocks(*x, perm, out_shape, kept, block_bytes, *y);
      return absl::OkStatus();
    }
    if (DataTypeBits(x->dtype()) == 16) {
      // 2-byte elements (float16, bfloat16, 16-bit integers): oneDNN 2.6
      // reorders float16 on its reference path; moved here as words.
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), out_shape));
      MoveWords(*x, perm, out_shape, *y);
      return absl::OkStatus();
    }
    if (x->shape() != shape_ || x->dtype() != dtype_ || !primitive_) {
      ONNXKIT_RETURN_IF_ERROR(Build(*x, perm, out_shape, *move));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), out_shape));
    dnnl::memory src, dst;
    ONNXKIT_RETURN_IF_ERROR(Guard("transpose", [&] {
      src = dnnl::memory(src_, Engine(), const_cast<void*>(x->raw()));
      dst = dnnl::memory(dst_, Engine(), y->mutable_raw());
    }));
    return Execute("transpose", primitive_, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  }

 private:
  // Blocks of at least this many bytes are copied with memcpy.
  static constexpr int64_t kMinBlockBytes = 64;

  // y = transpose(x) for 2-byte elements: each output row (the last output
  // axis) gathers elements a fixed source stride apart; rows over the
  // threads for large tensors.
  static void MoveWords(const Tensor& x, const std::vector<int64_t>& perm,
                        const std::vector<int64_t>& out_shape, Tensor& y) {
    const int rank = x.rank();
    std::vector<int64_t> in_stride(static_cast<size_t>(rank));
    int64_t stride = 1;
    for (int i = rank; i-- > 0;) {
      in_stride[static_cast<size_t>(i)] = stride;
      stride *= x.dim(i);
    }
    std::vector<int64_t> src_stride(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i)
      src_stride[static_cast<size_t>(i)] = in_stride[static_cast<size_t>(perm[static_cast<size_t>(i)])];
    const int64_t n = out_shape.back();
    const int64_t step = src_stride.back();
    const int64_t rows = y.size() / n;
    const uint16_t* src = static_cast<const uint16_t*>(x.raw());
    uint16_t* dst = static_cast<uint16_t*>(y.mutable_raw());
    auto row = [&](int64_t r) {
      int64_t base = 0, rest = r;
      for (int i = rank - 1; i-- > 0;) {
        const int64_t d = out_shape[static_cast<size_t>(i)];
        base += (rest % d) * src_stride[static_cast<size_t>(i)];
        rest /= d;
      }
      const uint16_t* in = src + base;
      uint16_t* out = dst + r * n;
      for (int64_t j = 0; j < n; ++j) out[j] = in[j * step];
    };
    const bool parallel = y.size() > (1 << 16) && omp_get_max_threads() > 1;
    if (!parallel) {
      for (int64_t r = 0; r < rows; ++r) row(r);
      return;
    }
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) row(r);
  }

  // y = transpose(x) where the axes from `kept` on stay in place: one
  // memcpy of `block_bytes` per index of the leading output axes, in output
  // order, from the source offset the permuted strides give.
  static void MoveBlocks(const Tensor& x, const std::vector<int64_t>& perm,
                         const std::vector<int64_t>& out_shape, int kept, int64_t block_bytes, Tensor& y) {
    std::vector<int64_t> x_stride(static_cast<size_t>(kept));  // in blocks
    int64_t stride = 1;
    for (int i = kept; i-- > 0;) {
      x_stride[static_cast<size_t>(i)] = stride;
      stride *= x.dim(i);
    }
    std::vector<int64_t> step(static_cast<size_t>(kept));  // source step of output axis i
    for (int i = 0; i < kept; ++i)
      step[static_cast<size_t>(i)] = x_stride[static_cast<size_t>(perm[static_cast<size_t>(i)])];
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(y.mutable_raw());
    std::vector<int64_t> index(static_cast<size_t>(kept), 0);
    int64_t blocks = stride, from = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      std::memcpy(dst + b * block_bytes, src + from * block_bytes, static_cast<size_t>(block_bytes));
      for (int i = kept; i-- > 0;) {  // next output index (odometer)
        size_t u = static_cast<size_t>(i);
        from += step[u];
        if (++index[u] < out_shape[u]) break;
        from -= step[u] * out_shape[u];
        index[u] = 0;
      }
    }
  }

  // True when the axes of `x` longer than 1 keep their relative order.
  static bool KeepsOrder(const Tensor& x, const std::vector<int64_t>& perm) {
    int64_t last = -1;
    for (int64_t p : perm) {
      if (x.dim(static_cast<int>(p)) == 1) continue;
      if (p < last) return false;
      last = p;
    }
    return true;
  }

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

// One input's part of each output row: its bytes and the size of its block
// (axis extent x inner elements).
struct ConcatBlock {
  const char* data;
  int64_t bytes;
};

// memcpy(dst, src, n), with the sizes of one to four 4-byte elements copied
// inline (a last axis joined from ones and twos: no call per block).
inline void CopyBlock(char* dst, const char* src, size_t n) {
  switch (n) {
    case 4:
      std::memcpy(dst, src, 4);
      break;
    case 8:
      std::memcpy(dst, src, 8);
      break;
    case 12:
      std::memcpy(dst, src, 12);
      break;
    case 16:
      std::memcpy(dst, src, 16);
      break;
    default:
      std::memcpy(dst, src, n);
  }
}

// Copies bytes [begin, end) of a Concat output whose rows (`row` bytes) are
// the inputs' blocks in input order.
void CopyConcatRange(const std::vector<ConcatBlock>& blocks, int64_t row, char* y, int64_t begin,
                     int64_t end) {
  for (int64_t o = begin / row; o * row < end; ++o) {
    int64_t at = o * row;  // output offset of the current block
    for (const ConcatBlock& b : blocks) {
      int64_t from = std::max(at, begin), to = std::min(at + b.bytes, end);
      const char* src = b.data + o * b.bytes + (from - at);
      // An input its producer wrote in place (Session's joins) is there already.
      if (from < to && src != y + from) CopyBlock(y + from, src, static_cast<size_t>(to - from));
      at += b.bytes;
    }
  }
}

// Concat of any fixed-size element type of at least one byte as memcpy of
// each input's block per outer index; large outputs split into contiguous
// byte ranges, one per OpenMP thread. Strings, sub-byte types, opset 1..3
// (optional axis) and invalid inputs run on the reference kernel.
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
    int64_t rank = first.rank();
    int bits = first.is_string() ? 0 : DataTypeBits(first.dtype());
    if (bits < 8 || bits % 8 != 0 || rank < 1 || *axis_ < -rank || *axis_ >= rank) return Fallback(ctx);
    size_t axis = static_cast<size_t>(*axis_ < 0 ? *axis_ + rank : *axis_);
    std::vector<int64_t> out_shape = first.shape();
    out_shape[axis] = 0;
    for (const Tensor* x : xs) {
      if (x->dtype() != first.dtype() || x->is_string() || x->rank() != rank) return Fallback(ctx);
      for (size_t d = 0; d < out_shape.size(); ++d) {
        if (d != axis && x->shape()[d] != first.shape()[d]) return Fallback(ctx);
      }
      out_shape[axis] += x->shape()[axis];
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, first.dtype(), out_shape));
    if (y->size() == 0) return absl::OkStatus();
    int64_t inner_bytes = bits / 8;
    for (size_t d = axis + 1; d < out_shape.size(); ++d) inner_bytes *= out_shape[d];
    std::vector<ConcatBlock> blocks;
    blocks.reserve(xs.size());
    for (const Tensor* x : xs) {
      int64_t bytes = x->shape()[axis] * inner_bytes;
      if (bytes > 0) blocks.push_back({static_cast<const char*>(x->raw()), bytes});
    }
    int64_t row = out_shape[axis] * inner_bytes;
    int64_t total = static_cast<int64_t>(y->nbytes());
    char* out = static_cast<char*>(y->mutable_raw());
    // At least kMinBytesPerThread bytes per thread, so that small outputs
    // stay on the calling thread.
    constexpr int64_t kMinBytesPerThread = int64_t{1} << 18;
    int64_t threads = std::min<int64_t>(omp_get_max_threads(), total / kMinBytesPerThread);
    if (threads <= 1) {
      CopyConcatRange(blocks, row, out, 0, total);
      return absl::OkStatus();
    }
#pragma omp parallel num_threads(static_cast <int>(threads))
    {
      // 64-byte aligned range boundaries keep threads off each other's cache lines.
      int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      int64_t begin = t == 0 ? 0 : total / n * t / 64 * 64;
      int64_t end = t + 1 == n ? total : total / n * (t + 1) / 64 * 64;
      CopyConcatRange(blocks, row, out, begin, end);
    }
    return absl::OkStatus();
  }

 private:
  std::optional<int64_t> axis_;
};

// Fills `mask` with ones of its type (bool, float, double, float16,
// bfloat16); false for other types.
bool FillOnes(Tensor& mask) {
  int64_t n = mask.size();
  switch (mask.dtype()) {
    case pb::kBool:
      std::memset(mask.mutable_raw(), 1, static_cast<size_t>(n));
      return true;
    case pb::kFloat:
      std::fill_n(mask.mutable_data<float>(), n, 1.f);
      return true;
    case pb::kDouble:
      std::fill_n(mask.mutable_data<double>(), n, 1.0);
      return true;
    case pb::kFloat16:
      std::fill_n(mask.mutable_data<uint16_t>(), n, uint16_t{0x3c00});
      return true;
    case pb::kBfloat16:
      std::fill_n(mask.mutable_data<uint16_t>(), n, uint16_t{0x3f80});
      return true;
    default:
      return false;
  }
}

// Dropout in inference (opsets before 12 always; from 12 when training_mode
// is absent or false): the output is the input itself, and a requested mask
// all ones (the input's type before opset 10, bool from 10). Training,
// malformed ratio / training_mode inputs and masks of other types run on the
// reference kernel.
class DropoutKernel : public CpuKernel {
 public:
  // The mask is all ones in inference: kept from run to run (filled again
  // only when its shape or type changes), unless the graph returns it.
  DropoutKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        opset_(info.opset),
        keep_mask_(node.num_outputs() > 1 && node.output(1) != nullptr && !node.output(1)->IsGraphOutput()) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    int32_t mask_type = opset_ < 10 ? x->dtype() : pb::kBool;
    bool mask = ctx.OutputRequested(1);
    if (mask && mask_type != pb::kBool && mask_type != pb::kFloat && mask_type != pb::kDouble &&
        mask_type != pb::kFloat16 && mask_type != pb::kBfloat16) {
      return Fallback(ctx);
    }
    if (opset_ >= 12) {
      absl::StatusOr<const Tensor*> ratio = ctx.OptionalInput(1);
      if (!ratio.ok()) return Fallback(ctx);
      if (*ratio != nullptr) {
        int32_t type = (*ratio)->dtype();
        bool floating =
            type == pb::kFloat || type == pb::kDouble || type == pb::kFloat16 || type == pb::kBfloat16;
        if (!floating || (*ratio)->size() != 1) return Fallback(ctx);
      }
      absl::StatusOr<const Tensor*> training = ctx.OptionalInput(2);
      if (!training.ok()) return Fallback(ctx);
      const Tensor* t = *training;
      if (t != nullptr && (t->dtype() != pb::kBool || t->size() != 1 || t->data<bool>()[0]))
        return Fallback(ctx);
    }
    if (mask && keep_mask_) {
      if (!mask_.defined() || mask_.dtype() != mask_type || mask_.shape() != x->shape()) {
        ONNXKIT_ASSIGN_OR_RETURN(mask_, Tensor::AllocateUninitialized(mask_type, x->shape()));
        if (!FillOnes(mask_)) return absl::InternalError("unexpected Dropout mask type");
      }
      ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(1, RtValue::FromTensor(mask_)));
    } else if (mask) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * m, ctx.AllocateOutputUninitialized(1, mask_type, x->shape()));
      if (!FillOnes(*m)) return absl::InternalError("unexpected Dropout mask type");
    }
    return ctx.SetOutput(0, RtValue::FromTensor(*x));
  }

 private:
  int64_t opset_;
  bool keep_mask_;
  Tensor mask_;
};

// Pad in constant mode (the pads an attribute before opset 11, an input
// from 11, no axes input) with non-negative pads over fixed-size types:
// all-zero pads give the input itself (exporters emit such Pads before
// pooling); else the output is filled with the value and each row of the
// input's last axis copied into place, rows split among the threads for
// large outputs. Other modes, negative pads and axes run on the reference
// kernel.
class PadKernel : public CpuKernel {
 public:
  PadKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        constant_(node.GetString("mode").value_or("constant") == "constant"),
        attr_pads_(info.opset < 11 ? node.GetInts(info.opset < 2 ? "paddings" : "pads") : std::nullopt),
        attr_value_(node.GetFloat("value").value_or(0.f)),
        opset_(info.opset) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!constant_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    const int bits = x->is_string() ? 0 : DataTypeBits(x->dtype());
    if (bits < 8 || bits % 8 != 0) return Fallback(ctx);
    const size_t rank = static_cast<size_t>(x->rank());
    std::vector<int64_t> pads;
    if (opset_ < 11) {
      if (!attr_pads_) return Fallback(ctx);
      pads = *attr_pads_;
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* p, ctx.Input(1));
      absl::StatusOr<const Tensor*> axes = ctx.num_inputs() > 3 ? ctx.OptionalInput(3) : nullptr;
      if (!axes.ok() || *axes != nullptr || p->dtype() != pb::kInt64 || p->rank() != 1) return Fallback(ctx);
      pads.assign(p->data<int64_t>(), p->data<int64_t>() + p->size());
    }
    if (pads.size() != 2 * rank) return Fallback(ctx);
    bool zero = true;
    for (int64_t v : pads) {
      if (v < 0 || v > (int64_t{1} << 40)) return Fallback(ctx);
      zero = zero && v == 0;
    }
    // The value's bytes (none: zero).
    const size_t esize = static_cast<size_t>(bits / 8);
    const void* value = nullptr;
    float attr_value = attr_value_;
    if (opset_ < 11 && attr_value_ != 0) {
      if (x->dtype() != pb::kFloat) return Fallback(ctx);
      value = &attr_value;
    } else if (opset_ >= 11 && ctx.num_inputs() > 2) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* v, ctx.OptionalInput(2));
      if (v != nullptr && (v->dtype() != x->dtype() || v->size() != 1)) return Fallback(ctx);
      if (v != nullptr) value = v->raw();
    }
    if (zero) return ctx.SetOutput(0, RtValue::FromTensor(*x));
    std::vector<int64_t> out_shape(rank);
    for (size_t d = 0; d < rank; ++d) out_shape[d] = x->dim(static_cast<int>(d)) + pads[d] + pads[d + rank];
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, x->dtype(), out_shape));
    char* out = static_cast<char*>(y->mutable_raw());
    const size_t total = y->nbytes();
    bool zero_value = true;
    for (size_t b = 0; value != nullptr && b < esize; ++b)
      zero_value = zero_value && static_cast<const char*>(value)[b] == 0;
    if (zero_value) {
      std::memset(out, 0, total);
    } else {
      for (size_t at = 0; at < total; at += esize) std::memcpy(out + at, value, esize);
    }
    if (x->size() == 0) return absl::OkStatus();
    // Output strides in bytes; the offset of the input's first element.
    std::vector<int64_t> stride(rank);
    int64_t step = static_cast<int64_t>(esize);
    int64_t base = 0;
    for (size_t d = rank; d-- > 0;) {
      stride[d] = step;
      base += pads[d] * step;
      step *= out_shape[d];
    }
    const int64_t row_len = x->dim(static_cast<int>(rank) - 1);
    const size_t row_bytes = static_cast<size_t>(row_len) * esize;
    const int64_t rows = x->size() / row_len;
    const char* in = static_cast<const char*>(x->raw());
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        // The row's index over the leading axes, last axis first.
        int64_t offset = base, rest = r;
        for (size_t d = rank - 1; d-- > 0;) {
          const int64_t dim = x->dim(static_cast<int>(d));
          offset += (rest % dim) * stride[d];
          rest /= dim;
        }
        std::memcpy(out + offset, in + static_cast<size_t>(r) * row_bytes, row_bytes);
      }
    };
    constexpr int64_t kMinBytesPerThread = 1 << 20;
    const int64_t threads =
        std::min<int64_t>(omp_get_max_threads(), static_cast<int64_t>(total) / kMinBytesPerThread);
    if (threads <= 1) {
      copy_rows(0, rows);
    } else {
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
      for (int64_t t = 0; t < threads; ++t) copy_rows(rows * t / threads, rows * (t + 1) / threads);
    }
    return absl::OkStatus();
  }

 private:
  bool constant_;
  std::optional<std::vector<int64_t>> attr_pads_;
  float attr_value_;
  int64_t opset_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTranspose(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<TransposeKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeConcat(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<ConcatKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeDropout(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<DropoutKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakePad(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<PadKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
