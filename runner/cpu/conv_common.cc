// Shared pieces of the cpu convolution kernels (see conv_common.h).
#include "runner/cpu/conv_common.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "runner/cpu/conv.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/vector_math.h"

namespace onnxkit::runner::cpu {

using dnnl::memory;
using reference::Window;
using reference::WindowAttrs;

memory::dims Minus1(const std::vector<int64_t>& v) {
  memory::dims d;
  for (int64_t x : v) d.push_back(x - 1);
  return d;
}

// The channel-blocked (16) layout of activations of `rank` 3..5.
memory::format_tag Blocked16Tag(int rank) {
  return rank == 3   ? memory::format_tag::nCw16c
         : rank == 4 ? memory::format_tag::nChw16c
                     : memory::format_tag::nCdhw16c;
}

memory::format_tag ChannelsLastTag(int rank) {
  return rank == 3 ? memory::format_tag::nwc : rank == 4 ? memory::format_tag::nhwc : memory::format_tag::ndhwc;
}

// True when oneDNN picked its generic reference implementation.
bool IsReference(const dnnl::primitive_desc_base& pd) {
  std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) == 0;
}

// Weights dims of oneDNN: [O, I, k...] or, grouped, [G, O/G, I/G, k...].
memory::dims WeightDims(int64_t group, int64_t out_c, int64_t in_c, const std::vector<int64_t>& kernel) {
  memory::dims d;
  if (group > 1) d.push_back(group);
  d.push_back(out_c / group);
  d.push_back(in_c / group);
  d.insert(d.end(), kernel.begin(), kernel.end());
  return d;
}

// An inference convolution of X (`x_shape`) into Y (`y_shape`) over the
// window `win`: source and destination in layout `tag`, weights in the
// layout oneDNN picks. Throws dnnl::error: call inside Guard.
dnnl::convolution_forward::desc ConvDesc(const std::vector<int64_t>& x_shape,
                                         const std::vector<int64_t>& y_shape, const memory::dims& wdims,
                                         const memory::desc& bias, const Window& win, memory::data_type xt,
                                         memory::data_type wt, memory::data_type yt, memory::format_tag tag,
                                         dnnl::algorithm algorithm, memory::format_tag dst_tag) {
  memory::desc src(Dims(x_shape), xt, tag);
  memory::desc dst(Dims(y_shape), yt, dst_tag == memory::format_tag::undef ? tag : dst_tag);
  memory::desc wei(wdims, wt, memory::format_tag::any);
  return dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_inference, algorithm, src, wei, bias, dst,
      Dims(win.strides), Minus1(win.dilations), Dims(win.pad_begin), Dims(win.pad_end));
}

void* ThreadScratch(int slot, size_t bytes) {
  thread_local std::shared_ptr<Buffer> slots[kScratchSlots];
  std::shared_ptr<Buffer>& s = slots[slot < 0 || slot >= kScratchSlots ? 0 : slot];
  if (s != nullptr && s->size() >= bytes) return s->data();
  s.reset();  // release before allocating the larger one
  s = Buffer::Allocate(bytes, /*zero_fill=*/false);
  return s != nullptr ? s->data() : nullptr;
}

namespace {

std::atomic<int64_t> g_shared_layout_copies{0};
std::atomic<int64_t> g_kept_layout_copies{0};
std::atomic<int64_t> g_shared_input_bounds{0};

struct LayoutCopy final : RtValue::Derived {
  static constexpr char kKind = 0;
  LayoutCopy(dnnl::memory::desc d, std::shared_ptr<Buffer> b, std::shared_ptr<bool> f)
      : Derived(&kKind), desc(std::move(d)), buffer(std::move(b)), found(std::move(f)) {}
  dnnl::memory::desc desc;
  std::shared_ptr<Buffer> buffer;
  std::shared_ptr<bool> found;  // shared with the keeper
};

}  // namespace

const void* FindLayoutCopy(const RtValue* value, const dnnl::memory::desc& desc) {
  if (value == nullptr) return nullptr;
  for (const std::shared_ptr<const RtValue::Derived>& d : value->derived()) {
    if (d->kind() != &LayoutCopy::kKind) continue;
    const auto* copy = static_cast<const LayoutCopy*>(d.get());
    if (copy->desc == desc) {
      *copy->found = true;
      g_shared_layout_copies.fetch_add(1, std::memory_order_relaxed);
      return copy->buffer->data();
    }
  }
  return nullptr;
}

void* LayoutCopyKeeper::Keep(const RtValue* value, const dnnl::memory::desc& desc) {
  if (useless_ || value == nullptr || !value->is_tensor()) return nullptr;
  if (last_found_ != nullptr && !*last_found_) {
    useless_ = true;
    last_found_.reset();
    return nullptr;
  }
  std::shared_ptr<Buffer> buffer = Buffer::Allocate(desc.get_size(), /*zero_fill=*/false);
  if (buffer == nullptr) return nullptr;
  void* data = buffer->data();
  last_found_ = std::make_shared<bool>(false);
  g_kept_layout_copies.fetch_add(1, std::memory_order_relaxed);
  value->AddDerived(std::make_shared<const LayoutCopy>(desc, std::move(buffer), last_found_));
  return data;
}

namespace {

struct MaxAbsOf final : RtValue::Derived {
  static constexpr char kKind = 0;
  explicit MaxAbsOf(double v) : Derived(&kKind), value(v) {}
  double value;
};

}  // namespace

double InputMaxAbs(const KernelContext& ctx, int i, const Tensor& t) {
  const RtValue* value = ctx.Value(i);
  const bool same = value != nullptr && value->is_tensor() && value->tensor().raw() == t.raw() &&
                    value->tensor().size() == t.size();
  if (same) {
    for (const std::shared_ptr<const RtValue::Derived>& d : value->derived()) {
      if (d->kind() != &MaxAbsOf::kKind) continue;
      g_shared_input_bounds.fetch_add(1, std::memory_order_relaxed);
      return static_cast<const MaxAbsOf*>(d.get())->value;
    }
  }
  const double m = MaxAbs(t.data<float>(), t.size());
  if (same && ctx.InputReadLater(i)) value->AddDerived(std::make_shared<const MaxAbsOf>(m));
  return m;
}

int64_t SharedInputBounds() { return g_shared_input_bounds.load(std::memory_order_relaxed); }
int64_t KeptLayoutCopies() { return g_kept_layout_copies.load(std::memory_order_relaxed); }
int64_t SharedLayoutCopies() { return g_shared_layout_copies.load(std::memory_order_relaxed); }

void CopyAmongThreads(void* dst, const void* src, size_t bytes) {
  // Below 1 MiB one thread copies faster than two are woken.
  constexpr size_t kMinBytes = size_t{1} << 20, kLine = 64;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || bytes < kMinBytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const size_t lines = (bytes + kLine - 1) / kLine;
#pragma omp parallel num_threads(threads)
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num()),
                 n = static_cast<size_t>(omp_get_num_threads());
    const size_t begin = std::min(bytes, lines * t / n * kLine),
                 end = std::min(bytes, lines * (t + 1) / n * kLine);
    if (end > begin)
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  }
}

// y = ops(y) in order: relu with slope alpha, clip to [alpha, beta], swish
// (y * sigmoid(y)), hardswish, or + residual. NaN stays NaN, as in the reference
// kernels.
namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void ApplyPostOpsChunk(
    float* y, const float* residual, int64_t n, const ResolvedPostOp* ops, size_t num_ops) {
  for (size_t k = 0; k < num_ops; ++k) {
    const ResolvedPostOp& op = ops[k];
    if (op.sum) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] += residual[i];
    } else if (op.alg == dnnl::algorithm::eltwise_relu && op.alpha == 0) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0 ? 0.0f : y[i];
    } else if (op.alg == dnnl::algorithm::eltwise_swish) {
      SwishRow(y, n);
    } else if (op.alg == dnnl::algorithm::eltwise_hardswish) {
      // In double, as the reference: x * clamp(x / 6 + 1/2, 0, 1).
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        const double x = y[i], t = x / 6 + 0.5;
        y[i] = static_cast<float>(x * (t < 0 ? 0.0 : t > 1 ? 1.0 : t));
      }
    } else if (op.alg == dnnl::algorithm::eltwise_relu) {
      float a = op.alpha;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0 ? a * y[i] : y[i];
    } else {
      float lo = op.alpha, hi = op.beta;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        float v = y[i] < lo ? lo : y[i];
        y[i] = v > hi ? hi : v;
      }
    }
  }
}

// The largest |x[i]|, or infinity when x holds NaN or an infinity.
__attribute__((target_clones("avx512f", "avx2", "default"))) double MaxAbsChunk(const float* x, int64_t n) {
  float m = 0;
  int bad = 0;
#pragma omp simd reduction(max : m) reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) {
    float a = std::fabs(x[i]);
    m = a > m ? a : m;
    bad |= !(a <= FLT_MAX);
  }
  return bad != 0 ? std::numeric_limits<double>::infinity() : m;
}

}  // namespace

int UpdateInputKey(KernelContext& ctx, InputKey& key) {
  const size_t n = static_cast<size_t>(ctx.num_inputs());
  bool same = key.size() == n;
  for (size_t i = 0; i < n && same; ++i) {
    absl::StatusOr<const Tensor*> t = ctx.OptionalInput(static_cast<int>(i));
    if (!t.ok()) return -1;
    same = *t != nullptr ? key[i].first == (*t)->dtype() && key[i].second == (*t)->shape()
                         : key[i].first == 0 && key[i].second.empty();
  }
  if (same) return 0;
  InputKey fresh;
  fresh.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<const Tensor*> t = ctx.OptionalInput(static_cast<int>(i));
    if (!t.ok()) return -1;
    fresh.emplace_back(*t != nullptr ? (*t)->dtype() : 0,
                       *t != nullptr ? (*t)->shape() : std::vector<int64_t>{});
  }
  key = std::move(fresh);
  return 1;
}

double MaxAbs(const float* x, int64_t n) {
  // A thread for each 64K floats begun, each scanning an equal share (in
  // whole vectors): chunks of a fixed size left one thread a chunk more.
  constexpr int64_t kPerThread = int64_t{1} << 16;
  const int64_t threads = std::min<int64_t>(omp_get_max_threads(), (n + kPerThread - 1) / kPerThread);
  if (threads <= 1) return MaxAbsChunk(x, n);
  const int64_t vectors = (n + 15) / 16;
  double m = 0;
#pragma omp parallel num_threads(static_cast <int>(threads)) reduction(max : m)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t begin = std::min(n, vectors * t / threads * 16),
                  end = std::min(n, vectors * (t + 1) / threads * 16);
    m = std::max(m, MaxAbsChunk(x + begin, end - begin));
  }
  return m;
}

double MaxAbsBf16(const uint16_t* x, int64_t n) {
  // A bfloat16's magnitude bits order as its magnitude; from 0x7f80 on,
  // infinity and NaN.
  uint16_t m = 0;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t a = static_cast<uint16_t>(x[i] & 0x7fffu);
    m = a > m ? a : m;
  }
  if (m >= 0x7f80u) return std::numeric_limits<double>::infinity();
  const uint32_t bits = static_cast<uint32_t>(m) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

void ApplyPostOpsTo(float* y, const float* residual, int64_t n, const ResolvedPostOp* ops, size_t num_ops) {
  ApplyPostOpsChunk(y, residual, n, ops, num_ops);
}

// The post-ops over `total` floats at py (a residual, when one is added, of
// the same layout at pr).
void ApplyPostOps(float* py, const float* pr, int64_t total, const std::vector<ResolvedPostOp>& ops) {
  constexpr int64_t kChunk = 4096;
  int64_t chunks = (total + kChunk - 1) / kChunk;
  ParallelFor(chunks, chunks > 16, [&](int64_t c) {
    ApplyPostOpsChunk(py + c * kChunk, pr != nullptr ? pr + c * kChunk : nullptr,
                      std::min(kChunk, total - c * kChunk), ops.data(), ops.size());
  });
}

void ApplyPostOps(Tensor& y, const Tensor* residual, const std::vector<ResolvedPostOp>& ops) {
  ApplyPostOps(y.mutable_data<float>(), residual != nullptr ? residual->data<float>() : nullptr, y.size(),
               ops);
}

bool HasActivation(const std::vector<ResolvedPostOp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const ResolvedPostOp& op) { return !op.sum; });
}

bool HasSwish(const std::vector<ResolvedPostOp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const ResolvedPostOp& op) {
    return !op.sum && op.alg == dnnl::algorithm::eltwise_swish;
  });
}

// True when every activation of `ops` maps 0 to 0 (so the zero padding of a
// blocked layout stays zero when ApplyPostOps runs over it).
bool KeepsZero(const std::vector<ResolvedPostOp>& ops) {
  return std::all_of(ops.begin(), ops.end(), [](const ResolvedPostOp& op) {
    return op.sum || op.alg != dnnl::algorithm::eltwise_clip_v2 || (op.alpha <= 0 && op.beta >= 0);
  });
}

std::optional<ConvGeometry> ResolveConv(const std::vector<int64_t>& x_shape, const Tensor& w, const Tensor* b,
                                        int64_t group, const WindowAttrs& attrs) {
  int64_t c = x_shape[1], m = w.dim(0);
  if (group < 1 || c != w.dim(1) * group || m % group != 0 || (b != nullptr && b->dim(0) != m))
    return std::nullopt;
  ConvGeometry g;
  g.kernel.assign(w.shape().begin() + 2, w.shape().end());
  if (!attrs.kernel_shape.empty() && attrs.kernel_shape != g.kernel) return std::nullopt;
  std::vector<int64_t> in(x_shape.begin() + 2, x_shape.end());
  absl::StatusOr<Window> win = reference::ResolveWindow(attrs, in, g.kernel);
  if (!win.ok() || win->out_size == 0) return std::nullopt;
  g.window = *std::move(win);
  g.y_shape = {x_shape[0], m};
  g.y_shape.insert(g.y_shape.end(), g.window.out.begin(), g.window.out.end());
  return g;
}

// The values of `t` as one per channel of an output of rank `rank` with `m`
// channels, when broadcasting `t` to it varies along the channels only (a
// scalar, [m, 1, 1], [1, m, 1, 1]...); nullopt otherwise.
static std::optional<std::vector<double>> PerChannel(const Tensor& t, int rank, int64_t m) {
  if (t.dtype() != pb::kFloat || t.rank() > rank) return std::nullopt;
  for (int a = 0; a < t.rank(); ++a) {
    int axis = rank - t.rank() + a;
    if (t.dim(a) != 1 && (axis != 1 || t.dim(a) != m)) return std::nullopt;
  }
  std::vector<double> v(static_cast<size_t>(m));
  for (int64_t o = 0; o < m; ++o) v[static_cast<size_t>(o)] = t.data<float>()[t.size() == 1 ? 0 : o];
  return v;
}

// The per-channel map y = x * scale[o] + shift[o] of the linear nodes of
// `spec` applied, in order, to a value of rank `rank` with `m` channels
// (scale and shift come in as the map so far). False when a parameter is not
// per channel or not float.
bool ChannelAffine(KernelContext& ctx, const ConvChainSpec& spec, int rank, int64_t m,
                   std::vector<double>& scale, std::vector<double>& shift) {
  for (const ConvChainSpec::LinearOp& op : spec.linear) {
    if (op.kind == ConvChainSpec::LinearOp::Kind::kBatchNorm) {
      const Tensor* p[4];
      for (int i = 0; i < 4; ++i) {
        absl::StatusOr<const Tensor*> t = ctx.Input(op.input + i);
        if (!t.ok() || (*t)->dtype() != pb::kFloat || (*t)->size() != m) return false;
        p[i] = *t;
      }
      for (size_t o = 0; o < scale.size(); ++o) {
        double s =
            p[0]->data<float>()[o] / std::sqrt(static_cast<double>(p[3]->data<float>()[o]) + op.epsilon);
        scale[o] *= s;
        shift[o] = (shift[o] - p[2]->data<float>()[o]) * s + p[1]->data<float>()[o];
      }
      continue;
    }
    absl::StatusOr<const Tensor*> t = ctx.Input(op.input);
    if (!t.ok()) return false;
    std::optional<std::vector<double>> c = PerChannel(**t, rank, m);
    if (!c) return false;
    for (size_t o = 0; o < scale.size(); ++o) {
      if (op.kind == ConvChainSpec::LinearOp::Kind::kMul) {
        scale[o] *= (*c)[o];
        shift[o] *= (*c)[o];
      } else {
        shift[o] += (*c)[o];
      }
    }
  }
  // An infinite factor or shift (a BatchNormalization with var 0 and
  // epsilon 0, a Mul by inf) as one affine step would make NaN of inf - inf
  // or 0 x inf where the unfused ops give +-inf: the chain runs unfused
  // then. So does a step that overflows float.
  for (size_t o = 0; o < scale.size(); ++o) {
    if (!std::isfinite(scale[o]) || !std::isfinite(shift[o]) ||
        std::fabs(scale[o]) > std::numeric_limits<float>::max() ||
        std::fabs(shift[o]) > std::numeric_limits<float>::max()) {
      return false;
    }
  }
  return true;
}

bool FoldLinearInto(KernelContext& ctx, const ConvChainSpec& spec, int rank, const Tensor& w, const Tensor* b,
                    Tensor* folded_w, Tensor* folded_b) {
  int64_t m = w.dim(0);
  std::vector<double> scale(static_cast<size_t>(m), 1.0), shift(static_cast<size_t>(m), 0.0);
  for (int64_t o = 0; b != nullptr && o < m; ++o) shift[static_cast<size_t>(o)] = b->data<float>()[o];
  if (!ChannelAffine(ctx, spec, rank, m, scale, shift)) return false;
  absl::StatusOr<Tensor> fw = Tensor::AllocateUninitialized(pb::kFloat, w.shape());
  absl::StatusOr<Tensor> fb = Tensor::AllocateUninitialized(pb::kFloat, {m});
  if (!fw.ok() || !fb.ok()) return false;
  int64_t per_channel = w.size() / m;
  const float* src = w.data<float>();
  float* dst = fw->mutable_data<float>();
  for (int64_t o = 0; o < m; ++o) {
    double s = scale[static_cast<size_t>(o)];
    for (int64_t i = 0; i < per_channel; ++i) {
      const float v = src[o * per_channel + i];
      dst[o * per_channel + i] = static_cast<float>(v * s);
      if (std::isfinite(v) && !std::isfinite(dst[o * per_channel + i])) return false;
    }
    fb->mutable_data<float>()[o] = static_cast<float>(shift[static_cast<size_t>(o)]);
  }
  *folded_w = *std::move(fw);
  *folded_b = *std::move(fb);
  return true;
}

// Reads the post-ops of `spec` for one plan (Clip's bounds); false when a
// bound or the residual is not what a fused kernel can take.
bool ResolveChainPostOps(KernelContext& ctx, const ConvChainSpec& spec, const std::vector<int64_t>& y_shape,
                         std::vector<ResolvedPostOp>* resolved) {
  resolved->clear();
  for (const ConvChainSpec::PostOp& op : spec.ops) {
    ResolvedPostOp r{op.sum, op.alg, op.alpha, op.beta};
    if (op.sum && op.residual_stage < 0) {
      absl::StatusOr<const Tensor*> t = ctx.Input(op.residual);
      if (!t.ok() || (*t)->dtype() != pb::kFloat || (*t)->shape() != y_shape) return false;
    }
    for (int i : {op.lo_input, op.hi_input}) {
      if (i < 0) continue;
      absl::StatusOr<const Tensor*> t = ctx.OptionalInput(i);
      if (!t.ok()) return false;
      if (*t == nullptr) continue;
      if ((*t)->dtype() != pb::kFloat || (*t)->size() != 1) return false;
      (i == op.lo_input ? r.alpha : r.beta) = (*t)->data<float>()[0];
    }
    // lo > hi gives hi everywhere in ONNX, which clip_v2 does not.
    if (!op.sum && op.alg == dnnl::algorithm::eltwise_clip_v2 &&
        (std::isnan(r.alpha) || std::isnan(r.beta) || r.alpha > r.beta))
      return false;
    resolved->push_back(r);
  }
  return true;
}

// The post-ops as oneDNN's. Throws dnnl::error: call inside Guard.
dnnl::post_ops DnnlPostOps(const std::vector<ResolvedPostOp>& ops) {
  dnnl::post_ops post_ops;
  for (const ResolvedPostOp& op : ops) {
    if (op.sum) {
      post_ops.append_sum(1.0f);
    } else {
      post_ops.append_eltwise(1.0f, op.alg, op.alpha, op.beta);
    }
  }
  return post_ops;
}

}  // namespace onnxkit::runner::cpu
