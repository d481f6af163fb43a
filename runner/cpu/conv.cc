// cpu Conv and ConvTranspose (oneDNN convolution / deconvolution on float32
// tensors of rank 3 to 5: 1-D to 3-D, any group, stride, dilation, padding
// and auto_pad), and QLinearConv / ConvInteger (oneDNN int8 convolution).
// The geometry is the reference kernels' (resolved per input shape);
// everything oneDNN does not cover falls back to them.
//
// Layouts: the runner's tensors are plain (NCHW). Pointwise convolutions
// (grouped ones too) of stride 1 over at least 100 positions run plain
// (oneDNN's GEMM path beats a blocked convolution plus reorders there; a
// strided one would gather its source first, about 4x slower), but for wide
// ones widening the channels on small images (conv_common.h's
// kBlockedPointwiseMinWeights), which run channel-blocked; depthwise ones run
// channel-blocked (nChw16c: the cheapest reorders and oneDNN's fastest
// depthwise kernel); the others let oneDNN choose (format_tag::any, NHWC
// here). The source is reordered in and the destination out, which costs
// less than the plain path loses on spatial kernels; between plain and
// channels-last, or channel blocks padded past the channels, the backend's
// transposes do it (conv_shuffle.cc, quicker than oneDNN's reorders).
// Constant weights are reordered once.
//
// Fused chains (runner/fusion.h): a Conv with folded affine nodes and
// post-ops (ConvKernel), several Convs in a row whose intermediate values
// stay in oneDNN's layouts (conv_sequence.cc), and a BatchNormalization
// with per-channel Mul / Add and an activation, possibly over a Concat
// (AffineChainKernel). A single
// Conv's activations run in ApplyPostOps, which keeps NaN as the reference
// does (oneDNN's relu and clip post-ops do not); oneDNN only adds a lone
// residual. Sequences choose per run (see conv_sequence.cc).
#include "runner/cpu/conv.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv_common.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/threads.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;
using reference::Window;
using reference::WindowAttrs;

// A convolution-like primitive for one set of input shapes. *_user are the
// plain layouts of the runner's tensors (wei_user may be strided), src, dst
// and wei the primitive's.
struct ConvPlan {
  dnnl::memory::desc src_user, dst_user, wei_user;
  dnnl::memory::desc bias;  // zero when there is no bias
  dnnl::memory::desc src, dst, wei;
  std::vector<int64_t> y_shape;
  dnnl::primitive primitive;
  dnnl::reorder src_in, dst_out;  // empty where the layouts agree
  // They run as the backend's transposes (OwnTranspose: quicker).
  bool own_src_in = false, own_dst_out = false;
  LayoutCopyKeeper src_keeper;  // src_in's result, for the run's later readers of X
  // With a sum post-op (a fused residual Add) the destination starts as the
  // residual: dst_in reorders it in where the layouts differ.
  bool sum = false;
  dnnl::reorder dst_in;
  // The kernel applies a chain's activations and residual itself, after the
  // primitive (oneDNN's GEMM convolution on plain layouts runs eltwise
  // post-ops one element at a time).
  bool own_post_ops = false;
  // Arguments fixed at planning (zero points) and the values they hold.
  std::unordered_map<int, dnnl::memory> extra_args;
  std::vector<int32_t> zero_points = std::vector<int32_t>(2, 0);
  // Non-constant weights are reordered here on every run.
  dnnl::reorder wei_in;
  dnnl::memory wei_memory;
  // Constant weights in the primitive's layout.
  PreparedWeight weight;
  // The arguments' memory objects, re-pointed at each run's buffers.
  HeldMemory x_mem, y_mem, src_mem, dst_mem, bias_mem, w_mem;

  // Takes the layouts the primitive chose and creates the reorders it needs.
  // Throws dnnl::error: call inside Guard.
  template <typename PrimitiveDesc>
  void Finish(const PrimitiveDesc& pd, dnnl::primitive p);
};

// Base of the convolution kernels: input 0 is the source, input
// `weight_input` the weights. Subclasses plan in Build and run through
// RunPlan.
class ConvLikeKernel : public CpuKernel {
 public:
  ConvLikeKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback, int weight_input = 1);

 protected:
  // Fills `plan` for the inputs of `ctx`; false when oneDNN does not cover
  // them (then the reference kernel runs, and reports any error). `bf16`:
  // in bfloat16 where oneDNN can (float kernels).
  virtual bool Build(KernelContext& ctx, ConvPlan& plan, bool bf16) = 0;

  // The plan for the inputs of `ctx` (the bfloat16 one with `bf16`),
  // rebuilt when an input's type or shape changed since the last call; null
  // when there is none.
  ConvPlan* PlanFor(KernelContext& ctx, bool bf16 = false);

  bool constant_weights() const { return constant_weights_; }

  // Allocates output 0 (`y_dtype`, plan's shape) and runs the plan on x, w
  // and the optional bias b; with a sum post-op, `residual` (of the output's
  // type and shape) is what the convolution's result is added to.
  absl::Status RunPlan(KernelContext& ctx, ConvPlan& plan, const Tensor& x, const Tensor& w, const Tensor* b,
                       int32_t y_dtype, const Tensor* residual = nullptr);

  // Called by RunPlan with the computed output.
  virtual absl::Status AfterRun(KernelContext&, const ConvPlan&, Tensor&) { return absl::OkStatus(); }

 private:
  bool constant_weights_;
  InputKey key_;
  // The plans for key_: float32 (or the integer kernels') and bfloat16.
  struct Slot {
    bool built = false;
    bool supported = false;
    ConvPlan plan;
  };
  Slot slots_[2];
};

template <typename PrimitiveDesc>
void ConvPlan::Finish(const PrimitiveDesc& pd, dnnl::primitive p) {
  src = pd.src_desc();
  dst = pd.dst_desc();
  wei = pd.weights_desc();
  primitive = std::move(p);
  if (src != src_user)
    src_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_user, Engine(), src));
  if (dst != dst_user)
    dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), dst, Engine(), dst_user));
  own_src_in = src_in && OwnTranspose(src_user, src);
  own_dst_out = dst_out && OwnTranspose(dst, dst_user);
  if (sum && dst != dst_user)
    dst_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), dst_user, Engine(), dst));
}

bool AllEqual(const std::vector<int64_t>& v, int64_t value) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == value; });
}

// Inputs x, w and the optional bias b of a float convolution node with
// `node_inputs` inputs (the first of ctx's); true when x and w are
// non-empty float32 tensors of one rank in 3..5 and b, when present, a
// float32 vector.
bool FloatOperands(KernelContext& ctx, int node_inputs, const Tensor** x, const Tensor** w,
                   const Tensor** b) {
  absl::StatusOr<const Tensor*> xs = ctx.Input(0), ws = ctx.Input(1);
  absl::StatusOr<const Tensor*> bs = node_inputs > 2 ? ctx.OptionalInput(2) : nullptr;
  if (!xs.ok() || !ws.ok() || !bs.ok()) return false;
  *x = *xs;
  *w = *ws;
  *b = *bs;
  if ((*x)->dtype() != pb::kFloat || (*w)->dtype() != pb::kFloat) return false;
  if ((*x)->rank() < 3 || (*x)->rank() > 5 || (*w)->rank() != (*x)->rank()) return false;
  if ((*x)->size() == 0 || (*w)->size() == 0) return false;
  return *b == nullptr || ((*b)->dtype() == pb::kFloat && (*b)->rank() == 1);
}

ConvLikeKernel::ConvLikeKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback, int weight_input)
    : CpuKernel(std::move(fallback)), constant_weights_(IsSessionConstantInput(node, weight_input)) {}

ConvPlan* ConvLikeKernel::PlanFor(KernelContext& ctx, bool bf16) {
  const int changed = UpdateInputKey(ctx, key_);
  if (changed < 0) return nullptr;
  if (changed > 0) {
    slots_[0] = Slot();
    slots_[1] = Slot();
  }
  Slot& slot = slots_[bf16 ? 1 : 0];
  if (!slot.built) {
    slot.supported = Build(ctx, slot.plan, bf16);
    slot.built = true;
  }
  return slot.supported ? &slot.plan : nullptr;
}

absl::Status ConvLikeKernel::RunPlan(KernelContext& ctx, ConvPlan& p, const Tensor& x, const Tensor& w,
                                     const Tensor* b, int32_t y_dtype, const Tensor* residual) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_dtype, p.y_shape));
  memory wei;
  if (constant_weights_) {
    ONNXKIT_ASSIGN_OR_RETURN(wei, p.weight.Get(w, p.wei_user, p.wei));
  }
  // X reordered: shared with the run's later readers of X in the same layout.
  const RtValue* x_value = ctx.Value(0);
  const bool x_shared =
      p.src_in && x_value != nullptr && x_value->is_tensor() && x_value->tensor().raw() == x.raw();
  const void* shared = x_shared ? FindLayoutCopy(x_value, p.src) : nullptr;
  void* src_buffer = shared != nullptr                   ? const_cast<void*>(shared)
                     : x_shared && ctx.InputReadLater(0) ? p.src_keeper.Keep(x_value, p.src)
                                                         : nullptr;
  if (p.src_in && src_buffer == nullptr) src_buffer = ThreadScratch(0, p.src.get_size());
  void* dst_buffer = p.dst_out ? ThreadScratch(1, p.dst.get_size()) : nullptr;
  if ((p.src_in && src_buffer == nullptr) || (p.dst_out && dst_buffer == nullptr)) {
    return absl::ResourceExhaustedError("out of memory for convolution scratch space");
  }
  std::unordered_map<int, memory> args = p.extra_args;
  memory x_user, y_user, w_user;
  ONNXKIT_RETURN_IF_ERROR(Guard("convolution memory", [&] {
    x_user = p.x_mem.At(x, p.src_user);
    y_user = p.y_mem.At(*y, p.dst_user);
    args[DNNL_ARG_SRC] = p.src_in ? p.src_mem.At(src_buffer, p.src) : x_user;
    args[DNNL_ARG_DST] = p.dst_out ? p.dst_mem.At(dst_buffer, p.dst) : y_user;
    if (b != nullptr) args[DNNL_ARG_BIAS] = p.bias_mem.At(*b, p.bias);
    if (!constant_weights_) {
      w_user = p.w_mem.At(w, p.wei_user);
      if (p.wei == p.wei_user) {
        wei = w_user;
      } else if (!p.wei_in) {
        p.wei_memory = memory(p.wei, Engine());
        p.wei_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p.wei_user, Engine(), p.wei));
      }
    }
  }));
  if (!constant_weights_ && p.wei_in) {
    ONNXKIT_RETURN_IF_ERROR(
        Execute("weight reorder", p.wei_in, {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, p.wei_memory}}));
    wei = p.wei_memory;
  }
  args[DNNL_ARG_WEIGHTS] = wei;
  if (p.sum) {
    if (residual == nullptr || residual->dtype() != y->dtype() || residual->shape() != y->shape()) {
      return absl::InternalError("convolution residual does not match the output");
    }
    if (p.dst_in) {
      memory r_user;
      ONNXKIT_RETURN_IF_ERROR(Guard("residual memory", [&] { r_user = UserMemory(*residual, p.dst_user); }));
      ONNXKIT_RETURN_IF_ERROR(Execute("residual reorder", p.dst_in,
                                      {{DNNL_ARG_FROM, r_user}, {DNNL_ARG_TO, args[DNNL_ARG_DST]}}));
    } else {
      std::memcpy(y->mutable_raw(), residual->raw(), static_cast<size_t>(y->size()) * sizeof(float));
    }
  }
  if (shared != nullptr) {
    // (reordered already)
  } else if (p.own_src_in) {
    ONNXKIT_RETURN_IF_ERROR(
        TransposeChannels(p.src_user, p.src, x.data<float>(), static_cast<float*>(src_buffer)));
  } else if (p.src_in) {
    ONNXKIT_RETURN_IF_ERROR(
        Execute("source reorder", p.src_in, {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, args[DNNL_ARG_SRC]}}));
  }
  ONNXKIT_RETURN_IF_ERROR(Execute("convolution", p.primitive, args));
  if (p.own_dst_out) {
    ONNXKIT_RETURN_IF_ERROR(TransposeChannels(p.dst, p.dst_user, static_cast<const float*>(dst_buffer),
                                              y->mutable_data<float>()));
  } else if (p.dst_out) {
    ONNXKIT_RETURN_IF_ERROR(Execute("destination reorder", p.dst_out,
                                    {{DNNL_ARG_FROM, args[DNNL_ARG_DST]}, {DNNL_ARG_TO, y_user}}));
  }
  return AfterRun(ctx, p, *y);
}

// A float Conv/ConvTranspose kernel: plans, runs, or falls back.
//
// bfloat16 (KernelInfo::bf16, constant weights): oneDNN's bfloat16
// convolutions multiply pairs of values, a padded one among them, so an
// infinity could meet a zero and make NaN where the float32 convolution
// keeps it. They run only when X holds no NaN or infinity (checked every
// run), and the weights none (checked when planning); else float32.
class FloatConvKernel : public ConvLikeKernel {
 public:
  FloatConvKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback)
      : ConvLikeKernel(node, std::move(fallback)),
        node_inputs_(node.num_inputs()),
        bf16_(info.bf16 && constant_weights()) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor *x, *w, *b;
    if (!FloatOperands(ctx, node_inputs_, &x, &w, &b)) return Fallback(ctx);
    ConvPlan* plan = bf16_ && Bf16Pays(*x) && AllFinite(*x) ? PlanFor(ctx, true) : nullptr;
    if (plan == nullptr) plan = PlanFor(ctx, false);
    if (plan == nullptr) return Fallback(ctx);
    return RunPlanned(ctx, *plan, *x, *w, b);
  }

 protected:
  // False where the bfloat16 kernels are not worth X's finiteness check.
  virtual bool Bf16Pays(const Tensor& /*x*/) const { return true; }
  // Runs the plan (subclasses may substitute operands).
  virtual absl::Status RunPlanned(KernelContext& ctx, ConvPlan& plan, const Tensor& x, const Tensor& w,
                                  const Tensor* b) {
    return RunPlan(ctx, plan, x, w, b, pb::kFloat);
  }

  // The convolution types of a plan: bfloat16 first with `bf16` and finite
  // weights `w`, then float32.
  static std::vector<memory::data_type> Types(bool bf16, const Tensor& w) {
    if (bf16 && AllFinite(w)) return {memory::data_type::bf16, memory::data_type::f32};
    return {memory::data_type::f32};
  }

  int node_inputs_;
  bool bf16_;
};

// --- Conv ---

class ConvKernel : public FloatConvKernel {
 public:
  ConvKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback,
             WindowAttrs attrs, ConvChainSpec chain = {})
      : FloatConvKernel(node, info, std::move(fallback)),
        attrs_(std::move(attrs)),
        group_(reference::AttrInt(node, "group", 1)),
        chain_(std::move(chain)) {}

 protected:
  bool Build(KernelContext& ctx, ConvPlan& plan, bool bf16) override {
    const Tensor *px, *pw, *b;
    if (!FloatOperands(ctx, node_inputs_, &px, &pw, &b)) return false;
    const Tensor &x = *px, &w = *pw;
    std::optional<ConvGeometry> geometry = ResolveConv(x.shape(), w, b, group_, attrs_);
    if (!geometry) return false;
    int64_t c = x.dim(1), m = w.dim(0);
    const std::vector<int64_t>& kernel = geometry->kernel;
    const Window* win = &geometry->window;
    const std::vector<int64_t>& y_shape = geometry->y_shape;
    // oneDNN skips padded taps; the definition multiplies the padding's
    // zeros too, so a NaN or infinite weight makes NaN at the border: such
    // a Conv runs the unfused way.
    const bool padded =
        std::any_of(win->pad_begin.begin(), win->pad_begin.end(), [](int64_t p) { return p != 0; }) ||
        std::any_of(win->pad_end.begin(), win->pad_end.end(), [](int64_t p) { return p != 0; });
    if (padded && !AllFinite(w)) return false;
    if (!chain_.linear.empty()) {
      if (!FoldLinear(ctx, x.rank(), w, b)) return false;
      b = &folded_b_;
    }
    if (!ResolvePostOps(ctx, y_shape)) return false;
    dnnl::post_ops post_ops;
    if (!Guard("post-ops", [&] { post_ops = DnnlPostOps(resolved_); }).ok()) return false;

    memory::dims wdims = WeightDims(group_, m, c, kernel);
    plan.src_user = PlainDesc(x.shape(), memory::data_type::f32);
    plan.dst_user = PlainDesc(y_shape, memory::data_type::f32);
    plan.wei_user = memory::desc(wdims, memory::data_type::f32, PlainTag(static_cast<int>(wdims.size())));
    if (b != nullptr) plan.bias = PlainDesc(b->shape(), memory::data_type::f32);
    plan.y_shape = y_shape;
    bool pointwise = !(group_ > 1 && group_ == c) && AllEqual(kernel, 1) && AllEqual(win->strides, 1) &&
                     AllEqual(win->pad_begin, 0) && AllEqual(win->pad_end, 0) &&
                     win->out_size >= kPlainPointwiseMinPositions;
    bool depthwise = group_ > 1 && group_ == c;
    const bool blocked_pointwise = pointwise && group_ == 1 && m > c &&
                                   c * m >= kBlockedPointwiseMinWeights &&
                                   win->out_size <= kBlockedPointwiseMaxPositions;
    std::vector<memory::format_tag> tags = {memory::format_tag::any};
    if (pointwise) tags = {PlainTag(x.rank()), memory::format_tag::any};
    if (blocked_pointwise) tags = {Blocked16Tag(x.rank()), memory::format_tag::any};
    if (depthwise) tags = {Blocked16Tag(x.rank()), memory::format_tag::any};
    // bfloat16 source and weights first where asked (the result float32),
    // then float32.
    // On AMX, oneDNN 2.6's fast bfloat16 kernels (brgemm) take
    // channels-last; other layouts would get the AVX512_BF16 ones.
    std::vector<std::pair<memory::data_type, memory::format_tag>> candidates;
    for (memory::data_type xt : Types(bf16 && !depthwise, chain_.linear.empty() ? w : folded_w_)) {
      if (xt == memory::data_type::bf16 && AmxSupported())
        candidates.emplace_back(xt, ChannelsLastTag(x.rank()));
      for (memory::format_tag tag : tags) candidates.emplace_back(xt, tag);
    }
    for (size_t n = 0; n < candidates.size(); ++n) {
      // (Named copies: a lambda may not capture structured bindings before C++20.)
      const memory::data_type xt = candidates[n].first;
      const memory::format_tag tag = candidates[n].second;
      bool last = n + 1 == candidates.size();
      bool planned = false;
      absl::Status s = Guard("convolution", [&] {
        dnnl::convolution_forward::desc d =
            ConvDesc(x.shape(), y_shape, wdims, plan.bias, *win, xt, xt, memory::data_type::f32, tag);
        // Plain layouts (oneDNN's GEMM convolution runs post-ops one element
        // at a time) and activations (see HasActivation): the post-ops run
        // after the primitive (ApplyPostOps). A lone residual sum stays
        // oneDNN's.
        bool own = !resolved_.empty() && (tag == PlainTag(x.rank()) || HasActivation(resolved_));
        dnnl::primitive_attr attr;
        if (!own) attr.set_post_ops(post_ops);
        dnnl::convolution_forward::primitive_desc pd(d, attr, Engine());
        if (!last && IsReference(pd)) return;  // a slow generic kernel: try the next layout
        plan.own_post_ops = own;
        plan.sum = !own && std::any_of(resolved_.begin(), resolved_.end(),
                                       [](const ResolvedPostOp& op) { return op.sum; });
        plan.Finish(pd, dnnl::convolution_forward(pd));
        planned = true;
      });
      if (s.ok() && planned) return true;
    }
    return false;
  }

  // Depthwise convolutions stay float32: oneDNN 2.6's bfloat16 ones are
  // slower (1.2-1.6x on AVX512_BF16; AMX has none).
  bool Bf16Pays(const Tensor& x) const override {
    return !(group_ > 1 && x.rank() > 1 && group_ == x.dim(1));
  }

  absl::Status RunPlanned(KernelContext& ctx, ConvPlan& plan, const Tensor& x, const Tensor& w,
                          const Tensor* b) override {
    const Tensor* residual = nullptr;
    for (const ConvChainSpec::PostOp& op : chain_.ops) {
      if (op.sum) {
        ONNXKIT_ASSIGN_OR_RETURN(residual, ctx.Input(op.residual));
      }
    }
    if (plan.own_post_ops) residual = nullptr;  // added by AfterRun
    if (!chain_.linear.empty()) return RunPlan(ctx, plan, x, folded_w_, &folded_b_, pb::kFloat, residual);
    return RunPlan(ctx, plan, x, w, b, pb::kFloat, residual);
  }

  absl::Status AfterRun(KernelContext& ctx, const ConvPlan& plan, Tensor& y) override {
    if (!plan.own_post_ops) return absl::OkStatus();
    const Tensor* residual = nullptr;
    for (const ConvChainSpec::PostOp& op : chain_.ops) {
      if (op.sum) {
        ONNXKIT_ASSIGN_OR_RETURN(residual, ctx.Input(op.residual));
      }
    }
    if (residual != nullptr && (residual->dtype() != pb::kFloat || residual->shape() != y.shape())) {
      return absl::InternalError("convolution residual does not match the output");
    }
    ApplyPostOps(y, residual, resolved_);
    return absl::OkStatus();
  }

 private:
  // Folds the linear nodes into folded_w_ / folded_b_ (once: their
  // parameters and the weights are constant).
  bool FoldLinear(KernelContext& ctx, int rank, const Tensor& w, const Tensor* b) {
    if (folded_from_ == w.raw() && folded_w_.defined()) return true;
    if (!FoldLinearInto(ctx, chain_, rank, w, b, &folded_w_, &folded_b_)) return false;
    folded_from_ = w.raw();
    return true;
  }

  bool ResolvePostOps(KernelContext& ctx, const std::vector<int64_t>& y_shape) {
    return ResolveChainPostOps(ctx, chain_, y_shape, &resolved_);
  }

  WindowAttrs attrs_;
  int64_t group_;
  ConvChainSpec chain_;
  std::vector<ResolvedPostOp> resolved_;
  Tensor folded_w_, folded_b_;
  const void* folded_from_ = nullptr;
};

// --- ConvTranspose ---

// The output spatial dims and the pads of a ConvTranspose, resolved as the
// reference kernel does: pad_end is ONNX's end pad less output_padding.
std::atomic<int64_t> g_deconvolution_products{0};

struct DeconvGeometry {
  std::vector<int64_t> out, strides, dilations, pad_begin, pad_end;
};

class ConvTransposeKernel : public FloatConvKernel {
 public:
  ConvTransposeKernel(const ir::Node& node, const KernelInfo& info, std::unique_ptr<Kernel> fallback,
                      WindowAttrs attrs)
      : FloatConvKernel(node, info, std::move(fallback)),
        attrs_(std::move(attrs)),
        group_(reference::AttrInt(node, "group", 1)),
        output_padding_(reference::AttrInts(node, "output_padding")),
        output_shape_(reference::AttrInts(node, "output_shape")) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(bool done, RunAsProduct(ctx));
    return done ? absl::OkStatus() : FloatConvKernel::Run(ctx);
  }

 protected:
  bool Build(KernelContext& ctx, ConvPlan& plan, bool bf16) override {
    const Tensor *px, *pw, *b;
    if (!FloatOperands(ctx, node_inputs_, &px, &pw, &b)) return false;
    const Tensor &x = *px, &w = *pw;
    int64_t c = x.dim(1), mg = w.dim(1);
    if (group_ < 1 || w.dim(0) != c || c % group_ != 0 || mg > (int64_t{1} << 40) / group_) return false;
    int64_t m = mg * group_;
    if (m == 0 || (b != nullptr && b->dim(0) != m)) return false;
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) return false;
    std::optional<DeconvGeometry> g = Resolve(x, kernel);
    if (!g) return false;
    std::vector<int64_t> y_shape = {x.dim(0), m};
    y_shape.insert(y_shape.end(), g->out.begin(), g->out.end());

    // ONNX weights are [C, M/G, k...]: as oneDNN's [G, M/G, C/G, k...] the
    // input-channel dim is the outer one.
    memory::dims wdims = WeightDims(group_, m, c, kernel);
    int64_t taps = 1;
    for (int64_t k : kernel) taps *= k;
    memory::dims wstrides(wdims.size());
    size_t o = group_ > 1 ? 1 : 0;
    for (size_t i = wdims.size(); i-- > o + 2;)
      wstrides[i] = i + 1 < wdims.size() ? wstrides[i + 1] * wdims[i + 1] : 1;
    wstrides[o] = taps;
    wstrides[o + 1] = mg * taps;
    if (group_ > 1) wstrides[0] = (c / group_) * mg * taps;
    plan.src_user = PlainDesc(x.shape(), memory::data_type::f32);
    plan.dst_user = PlainDesc(y_shape, memory::data_type::f32);
    plan.wei_user = memory::desc(wdims, memory::data_type::f32, wstrides);
    if (b != nullptr) plan.bias = PlainDesc(b->shape(), memory::data_type::f32);
    plan.y_shape = y_shape;
    // bfloat16 source and weights first where asked (the result float32).
    for (memory::data_type xt : Types(bf16, w)) {
      bool planned = false;
      absl::Status s = Guard("deconvolution", [&] {
        memory::desc src(Dims(x.shape()), xt, memory::format_tag::any);
        memory::desc dst(Dims(y_shape), memory::data_type::f32, memory::format_tag::any);
        memory::desc wei(wdims, xt, memory::format_tag::any);
        dnnl::deconvolution_forward::desc d(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src, wei, plan.bias,
            dst, Dims(g->strides), Minus1(g->dilations), Dims(g->pad_begin), Dims(g->pad_end));
        dnnl::deconvolution_forward::primitive_desc pd(d, Engine());
        if (xt != memory::data_type::f32 && IsReference(pd)) return;
        plan.Finish(pd, dnnl::deconvolution_forward(pd));
        planned = true;
      });
      if (s.ok() && planned) return true;
    }
    return false;
  }

 private:
  std::optional<DeconvGeometry> Resolve(const Tensor& x, const std::vector<int64_t>& kernel) const {
    size_t r = kernel.size();
    auto fits = [&](const std::vector<int64_t>& v, size_t n) { return v.empty() || v.size() == n; };
    if (!fits(attrs_.strides, r) || !fits(attrs_.dilations, r) || !fits(output_padding_, r) ||
        !fits(attrs_.pads, 2 * r)) {
      return std::nullopt;
    }
    if (!output_shape_.empty() && output_shape_.size() != r && output_shape_.size() != r + 2)
      return std::nullopt;
    bool same = attrs_.auto_pad == "SAME_UPPER" || attrs_.auto_pad == "SAME_LOWER";
    constexpr int64_t kLimit = int64_t{1} << 40;  // keeps the arithmetic below far from overflow
    DeconvGeometry g;
    g.strides = attrs_.strides.empty() ? std::vector<int64_t>(r, 1) : attrs_.strides;
    g.dilations = attrs_.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs_.dilations;
    for (size_t d = 0; d < r; ++d) {
      int64_t in = x.dim(static_cast<int>(d) + 2), k = kernel[d], s = g.strides[d], dil = g.dilations[d];
      int64_t op = output_padding_.empty() ? 0 : output_padding_[d];
      if (op < 0 || op > kLimit || in > kLimit || k > kLimit || s > kLimit / in || dil > kLimit / k)
        return std::nullopt;
      int64_t full = s * (in - 1) + (k - 1) * dil + op + 1;
      int64_t begin = 0, end = 0, out = 0;
      if (!output_shape_.empty() || same) {
        out = !output_shape_.empty() ? output_shape_[output_shape_.size() - r + d] : in * s;
        if (out <= 0 || out > kLimit) return std::nullopt;
        int64_t total = full - out;
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor
        begin = attrs_.auto_pad == "SAME_UPPER" ? half : total - half;
        end = total - begin;
      } else {
        if (!attrs_.pads.empty()) {
          begin = attrs_.pads[d];
          end = attrs_.pads[d + r];
        }
        if (begin > kLimit || end > kLimit) return std::nullopt;
        out = full - begin - end;
        if (out <= 0) return std::nullopt;
      }
      g.out.push_back(out);
      g.pad_begin.push_back(begin);
      g.pad_end.push_back(end - op);
    }
    return g;
  }

  // A 2-D ConvTranspose whose kernel equals its strides, without padding,
  // dilation or groups (the 2x2 stride-2 upsampling of U-Nets), is a
  // product and a shuffle: each output pixel takes one input pixel times
  // one tap, so Z = W'X (W' the weights as [M * kh * kw, C], X an image as
  // [C, H * W]) holds every output value before the bias, and output row
  // (m, h * kh + i) interleaves the kw rows ((m * kh + i) * kw + j, h) of
  // Z. One oneDNN matmul per image, the shuffle (bias added) over the
  // threads. False where it does not apply (or with bf16).
  absl::StatusOr<bool> RunAsProduct(KernelContext& ctx) {
    if (bf16_) return false;
    const Tensor *px, *pw, *b;
    if (!FloatOperands(ctx, node_inputs_, &px, &pw, &b)) return false;
    const Tensor &x = *px, &w = *pw;
    if (x.rank() != 4 || group_ != 1 || w.dim(0) != x.dim(1)) return false;
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
    const int64_t m = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    const std::vector<int64_t> kernel = {kh, kw};
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) return false;
    if (b != nullptr && b->dim(0) != m) return false;
    std::optional<DeconvGeometry> g = Resolve(x, kernel);
    if (!g) return false;
    for (size_t d = 0; d < 2; ++d) {
      if (g->strides[d] != kernel[d] || g->dilations[d] != 1 || g->pad_begin[d] != 0 || g->pad_end[d] != 0 ||
          g->out[d] != x.dim(static_cast<int>(d) + 2) * kernel[d])
        return false;
    }
    const int64_t rows = m * kh * kw, plane = h * wd;
    // Z of one image; the limits keep oneDNN's 32-bit offsets and the
    // scratch allocation sane.
    if (rows > (int64_t{1} << 20) || plane > (int64_t{1} << 28) || rows * plane > (int64_t{1} << 30))
      return false;
    if (!product_ || rows != product_rows_ || c != product_c_ || plane != product_plane_) {
      product_ = dnnl::matmul();
      absl::Status built = Guard("deconvolution as a product", [&] {
        memory::desc a({rows, c}, memory::data_type::f32, memory::format_tag::ab);
        memory::desc bm({c, plane}, memory::data_type::f32, memory::format_tag::ab);
        memory::desc z({rows, plane}, memory::data_type::f32, memory::format_tag::ab);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, bm, z), Engine());
        product_ = dnnl::matmul(pd);
        product_a_ = a;
        product_b_ = bm;
        product_z_ = z;
      });
      if (!built.ok()) {
        product_ = dnnl::matmul();
        return false;
      }
      product_rows_ = rows;
      product_c_ = c;
      product_plane_ = plane;
      weights_of_ = nullptr;
    }
    // W' (kept while the weights are the session's constant ones).
    if (!constant_weights() || weights_of_ != w.raw()) {
      std::shared_ptr<Buffer> t = Buffer::Allocate(static_cast<size_t>(rows * c) * sizeof(float), false);
      if (t == nullptr) return false;
      float* dst = static_cast<float*>(t->data());
      const float* src = w.data<float>();
      for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t r = 0; r < rows; ++r) dst[r * c + ci] = src[ci * rows + r];
      }
      product_weights_ = std::move(t);
      weights_of_ = w.raw();
    }
    std::shared_ptr<Buffer> z = Buffer::Allocate(static_cast<size_t>(rows * plane) * sizeof(float), false);
    if (z == nullptr) return false;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutputUninitialized(0, pb::kFloat, {n, m, h * kh, wd * kw}));
    const int64_t oh = h * kh, ow = wd * kw;
    const float* bias = b != nullptr ? b->data<float>() : nullptr;
    g_deconvolution_products.fetch_add(1, std::memory_order_relaxed);
    for (int64_t img = 0; img < n; ++img) {
      std::unordered_map<int, memory> args;
      ONNXKIT_RETURN_IF_ERROR(Guard("deconvolution as a product", [&] {
        args[DNNL_ARG_SRC] = memory(product_a_, Engine(), product_weights_->data());
        args[DNNL_ARG_WEIGHTS] =
            memory(product_b_, Engine(), const_cast<float*>(x.data<float>() + img * c * plane));
        args[DNNL_ARG_DST] = memory(product_z_, Engine(), z->data());
      }));
      ONNXKIT_RETURN_IF_ERROR(Execute("deconvolution as a product", product_, args));
      const float* zd = static_cast<const float*>(z->data());
      float* yd = y->mutable_data<float>() + img * m * oh * ow;
      auto shuffle_row = [&](int64_t r) {
        const int64_t mm = r / oh, oy = r % oh, hh = oy / kh, i = oy % kh;
        const float* from = zd + ((mm * kh + i) * kw) * plane + hh * wd;
        const float add = bias != nullptr ? bias[mm] : 0.f;
        float* out = yd + r * ow;
        if (kw == 2) {
          const float* z0 = from;
          const float* z1 = from + plane;
          for (int64_t k = 0; k < wd; ++k) {
            out[2 * k] = z0[k] + add;
            out[2 * k + 1] = z1[k] + add;
          }
          return;
        }
        for (int64_t k = 0; k < wd; ++k) {
          for (int64_t j = 0; j < kw; ++j) out[k * kw + j] = from[j * plane + k] + add;
        }
      };
      const int64_t out_rows = m * oh;
      const int threads =
          static_cast<int>(std::min<int64_t>(omp_get_max_threads(), out_rows * ow / (int64_t{1} << 16) + 1));
      if (threads <= 1) {  // no OpenMP region (see ParallelFor)
        for (int64_t r = 0; r < out_rows; ++r) shuffle_row(r);
      } else {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t r = 0; r < out_rows; ++r) shuffle_row(r);
      }
    }
    return true;
  }

  WindowAttrs attrs_;
  int64_t group_;
  std::vector<int64_t> output_padding_;
  std::vector<int64_t> output_shape_;
  // RunAsProduct's primitive, the sizes it was built for and W'.
  dnnl::matmul product_;
  int64_t product_rows_ = 0, product_c_ = 0, product_plane_ = 0;
  memory::desc product_a_, product_b_, product_z_;
  std::shared_ptr<Buffer> product_weights_;
  const void* weights_of_ = nullptr;  // the weights W' was made from
};

// --- QLinearConv and ConvInteger ---

// Where the operands of an integer convolution are (-1: none).
struct IntegerConvInputs {
  int x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias;
};
constexpr IntegerConvInputs kQLinearConvInputs = {1, 2, 3, 4, 5, 6, 7, 8};
constexpr IntegerConvInputs kConvIntegerInputs = {-1, 2, 1, -1, 3, -1, -1, -1};

bool IsInt8(const Tensor& t) { return t.dtype() == pb::kInt8 || t.dtype() == pb::kUint8; }

// True when oneDNN's int8 kernels accumulate u8 x s8 products exactly: with
// VNNI (or AMX). Without it they sum pairs of products in saturating int16.
bool ExactInt8Products() {
  auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  auto has = [&](dnnl::cpu_isa want) {
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  return has(dnnl::cpu_isa::avx512_core_vnni) || has(dnnl::cpu_isa::avx2_vnni);
}

int32_t Int8At(const Tensor& t, int64_t i) {
  return t.dtype() == pb::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

// The single float value of a scale tensor with 1 or `n` elements, or all.
bool ReadScales(const Tensor* t, int64_t n, std::vector<double>& out) {
  if (t == nullptr || t->dtype() != pb::kFloat || t->rank() > 1 || (t->size() != 1 && t->size() != n))
    return false;
  out.assign(t->data<float>(), t->data<float>() + t->size());
  return true;
}

// oneDNN's int8 convolution (s8 weights; src and dst zero points; constant
// output scales). Weights must be s8 without zero point, or u8 with zero
// point 128 (shifted to s8 exactly); scales and zero points must be
// constant for the session, and the CPU must have VNNI. Everything else
// falls back. QLinearConv's requantization runs in float: an output may
// differ from the reference's (double) by one where it falls near a tie.
class IntegerConvKernel : public ConvLikeKernel {
 public:
  IntegerConvKernel(const ir::Node& node, std::unique_ptr<Kernel> fallback, WindowAttrs attrs,
                    IntegerConvInputs in)
      : ConvLikeKernel(node, std::move(fallback), in.w),
        attrs_(std::move(attrs)),
        group_(reference::AttrInt(node, "group", 1)),
        in_(in) {
    for (int i : {in.x_scale, in.x_zp, in.w, in.w_scale, in.w_zp, in.y_scale, in.y_zp}) {
      if (i >= 0 && i < node.num_inputs() && node.inputs()[static_cast<size_t>(i)] != nullptr) {
        parameters_constant_ = parameters_constant_ && IsSessionConstantInput(node, i);
      }
    }
  }

  absl::Status Run(KernelContext& ctx) override {
    ConvPlan* plan = parameters_constant_ ? PlanFor(ctx) : nullptr;
    if (plan == nullptr) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(in_.w));
    const Tensor* b = nullptr;
    if (in_.bias >= 0) {
      ONNXKIT_ASSIGN_OR_RETURN(b, ctx.OptionalInput(in_.bias));
    }
    return RunPlan(ctx, *plan, *x, shifted_.defined() ? shifted_ : *w, b, y_dtype_);
  }

 protected:
  bool Build(KernelContext& ctx, ConvPlan& plan, bool /*bf16*/) override {
    auto get = [&](int i) -> const Tensor* {
      if (i < 0) return nullptr;
      absl::StatusOr<const Tensor*> t = ctx.OptionalInput(i);
      return t.ok() ? *t : nullptr;
    };
    const Tensor *x = get(0), *w = get(in_.w), *x_zp = get(in_.x_zp), *w_zp = get(in_.w_zp);
    const Tensor *y_zp = get(in_.y_zp), *b = get(in_.bias);
    if (x == nullptr || w == nullptr || !IsInt8(*x) || !IsInt8(*w) || !ExactInt8Products()) return false;
    if (x->rank() < 3 || x->rank() > 5 || w->rank() != x->rank() || x->size() == 0 || w->size() == 0)
      return false;
    int64_t c = x->dim(1), m = w->dim(0);
    if (group_ < 1 || c != w->dim(1) * group_ || m % group_ != 0) return false;
    std::vector<int64_t> kernel(w->shape().begin() + 2, w->shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) return false;
    std::vector<int64_t> in(x->shape().begin() + 2, x->shape().end());
    absl::StatusOr<Window> win = reference::ResolveWindow(attrs_, in, kernel);
    if (!win.ok() || win->out_size == 0) return false;
    // Zero points: scalar src/dst ones; weights' must make them s8 exactly.
    if (x_zp != nullptr && (x_zp->dtype() != x->dtype() || x_zp->size() != 1 || x_zp->rank() > 1))
      return false;
    int32_t w_shift = w->dtype() == pb::kUint8 ? 128 : 0;
    if (w_zp == nullptr ? w_shift != 0 : (w_zp->dtype() != w->dtype() || w_zp->rank() > 1)) return false;
    for (int64_t i = 0; w_zp != nullptr && i < w_zp->size(); ++i) {
      if (Int8At(*w_zp, i) != w_shift || (w_zp->size() != 1 && w_zp->size() != m)) return false;
    }
    std::vector<float> scales;
    if (in_.y_scale >= 0) {
      std::vector<double> xs, ws, ys;
      if (!ReadScales(get(in_.x_scale), 1, xs) || !ReadScales(get(in_.w_scale), m, ws) ||
          !ReadScales(get(in_.y_scale), 1, ys)) {
        return false;
      }
      if (y_zp != nullptr && (!IsInt8(*y_zp) || y_zp->size() != 1 || y_zp->rank() > 1)) return false;
      // As the reference rounds it: (x_scale * w_scale) / y_scale, each in float.
      for (double v : ws) scales.push_back(static_cast<float>(static_cast<float>(xs[0] * v) / ys[0]));
      y_dtype_ = y_zp != nullptr ? y_zp->dtype() : x->dtype();
      if (b != nullptr && (b->dtype() != pb::kInt32 || b->rank() != 1 || b->dim(0) != m)) return false;
    } else {
      y_dtype_ = pb::kInt32;
    }
    if (w_shift != 0 && !Shift(*w)) return false;
    std::vector<int64_t> y_shape = {x->dim(0), m};
    y_shape.insert(y_shape.end(), win->out.begin(), win->out.end());
    memory::dims wdims = WeightDims(group_, m, c, kernel);
    memory::data_type xt = *DnnlType(x->dtype()), yt = *DnnlType(y_dtype_), s8 = memory::data_type::s8;
    plan.src_user = PlainDesc(x->shape(), xt);
    plan.dst_user = PlainDesc(y_shape, yt);
    plan.wei_user = memory::desc(wdims, s8, PlainTag(static_cast<int>(wdims.size())));
    if (b != nullptr) plan.bias = PlainDesc(b->shape(), memory::data_type::s32);
    plan.y_shape = y_shape;
    plan.zero_points = {x_zp != nullptr ? Int8At(*x_zp, 0) : 0, y_zp != nullptr ? Int8At(*y_zp, 0) : 0};
    absl::Status s = Guard("integer convolution", [&] {
      dnnl::primitive_attr attr;
      if (!scales.empty()) attr.set_output_scales(scales.size() > 1 ? 1 << 1 : 0, scales);
      memory::desc zp_desc({1}, memory::data_type::s32, memory::format_tag::a);
      if (plan.zero_points[0] != 0) {
        attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
        plan.extra_args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] =
            memory(zp_desc, Engine(), &plan.zero_points[0]);
      }
      if (plan.zero_points[1] != 0) {
        attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
        plan.extra_args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] =
            memory(zp_desc, Engine(), &plan.zero_points[1]);
      }
      dnnl::convolution_forward::desc d =
          ConvDesc(x->shape(), y_shape, wdims, plan.bias, *win, xt, s8, yt, memory::format_tag::any);
      dnnl::convolution_forward::primitive_desc pd(d, attr, Engine());
      plan.Finish(pd, dnnl::convolution_forward(pd));
    });
    return s.ok();
  }

 private:
  // u8 weights with zero point 128 as the s8 values w - 128, computed once
  // per weight buffer (the weights are constant).
  bool Shift(const Tensor& w) {
    if (shifted_.defined() && shifted_from_ == w.raw()) return true;
    absl::StatusOr<Tensor> t = Tensor::AllocateUninitialized(pb::kInt8, w.shape());
    if (!t.ok()) return false;
    for (int64_t i = 0; i < w.size(); ++i) {
      t->mutable_data<int8_t>()[i] = static_cast<int8_t>(static_cast<int32_t>(w.data<uint8_t>()[i]) - 128);
    }
    shifted_ = *std::move(t);
    shifted_from_ = w.raw();
    return true;
  }

  WindowAttrs attrs_;
  int64_t group_;
  IntegerConvInputs in_;
  bool parameters_constant_ = true;
  int32_t y_dtype_ = 0;
  Tensor shifted_;
  const void* shifted_from_ = nullptr;
};

template <typename K>
absl::StatusOr<std::unique_ptr<Kernel>> MakeConvLike(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, reference::ParseWindowAttrs(node));
  attrs.ceil_mode = false;  // not a convolution attribute
  return std::unique_ptr<Kernel>(new K(node, info, std::move(fallback), std::move(attrs)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeConv(const ir::Node& node, const KernelInfo& info) {
  return MakeConvLike<ConvKernel>(node, info);
}

namespace {

// True when chain node k is the Mul of a SiLU or a HardSwish written out:
// after its gate (a Sigmoid or a HardSigmoid; FindConvChains checks the
// HardSigmoid's alpha and beta), reading the gate's input from inside the
// chain.
bool IsGatedMul(const FusionChain& chain, size_t k) {
  return k >= 2 && k < chain.nodes.size() && chain.nodes[k]->op_type() == "Mul" &&
         (chain.nodes[k - 1]->op_type() == "Sigmoid" || chain.nodes[k - 1]->op_type() == "HardSigmoid") &&
         chain.InnerInput(k) >= 0 && chain.inner_source[k] == static_cast<int>(k) - 2;
}

}  // namespace

// Adds chain node k (not a Conv) to `spec`, the description of what follows
// a Conv (or heads an affine chain). `linear_ok`: the node may fold into the
// weights (the Conv's weights are constant) or the channel map.
absl::Status AddChainNode(const FusionChain& chain, size_t k, int64_t opset, bool linear_ok,
                          ConvChainSpec& spec) {
  const ir::Node& node = *chain.nodes[k];
  int offset = chain.input_offset[k];
  const std::string& op = node.op_type();
  using Linear = ConvChainSpec::LinearOp;
  if (op == "BatchNormalization") {
    spec.linear.push_back({Linear::Kind::kBatchNorm, offset + 1, node.GetFloat("epsilon").value_or(1e-5f)});
    return absl::OkStatus();
  }
  // SiLU and HardSwish written out: the gate adds nothing, the Mul of its
  // input by it is swish or hardswish.
  if (op == "Sigmoid" || op == "HardSigmoid") {
    if (!IsGatedMul(chain, k + 1))
      return absl::InternalError("a fused chain takes a Sigmoid or HardSigmoid only as a gate of its input");
    return absl::OkStatus();
  }
  if (IsGatedMul(chain, k)) {
    ConvChainSpec::PostOp post;
    if (chain.nodes[k - 1]->op_type() == "Sigmoid") {
      post.alg = dnnl::algorithm::eltwise_swish;
      post.alpha = 1;
    } else {
      post.alg = dnnl::algorithm::eltwise_hardswish;
    }
    spec.ops.push_back(post);
    return absl::OkStatus();
  }
  // Mul, and Add before any post-op, by a constant: folded (see FindConvChains).
  int other = chain.chained_input[k] == 0 ? 1 : 0;
  if ((op == "Mul" || op == "Add") && spec.ops.empty() && linear_ok && IsSessionConstantInput(node, other)) {
    spec.linear.push_back({op == "Mul" ? Linear::Kind::kMul : Linear::Kind::kAdd, offset + other, 0});
    return absl::OkStatus();
  }
  ConvChainSpec::PostOp post;
  if (op == "Relu") {
    post.alg = dnnl::algorithm::eltwise_relu;
  } else if (op == "LeakyRelu") {
    post.alg = dnnl::algorithm::eltwise_relu;
    post.alpha = node.GetFloat("alpha").value_or(0.01f);
  } else if (op == "HardSwish") {
    post.alg = dnnl::algorithm::eltwise_hardswish;
  } else if (op == "Clip") {
    post.alg = dnnl::algorithm::eltwise_clip_v2;
    // Opset 6-10 bounds default to the float range; opset 1 left them open.
    float open = std::numeric_limits<float>::infinity();
    float bound = opset >= 6 ? FLT_MAX : open;
    post.alpha = opset < 11 ? node.GetFloat("min").value_or(-bound) : -open;
    post.beta = opset < 11 ? node.GetFloat("max").value_or(bound) : open;
    if (opset >= 11) {
      if (node.num_inputs() > 1) post.lo_input = offset + 1;
      if (node.num_inputs() > 2) post.hi_input = offset + 2;
    }
  } else if (op == "Add" || op == "Sum") {
    post.sum = true;
    post.residual = offset + other;
  } else {
    return absl::InternalError(absl::StrCat("a fused chain cannot take ", op));
  }
  spec.ops.push_back(post);
  return absl::OkStatus();
}

// A BatchNormalization (inference), Mul / Add by per-channel constants and
// an activation as one pass over float tensors of rank >= 2:
// y = act(x * scale[c] + shift[c]), the channel map accumulated in double
// once (the parameters are constant). With `concat_inputs` > 0 a Concat
// (along `axis`) of that many inputs heads the chain: each channel of y is
// computed from its channel of the Concat's input, the joined tensor never
// made. Anything else (a Concat along another axis, inputs of other types
// or of mismatched shapes) runs node by node.
class AffineChainKernel : public CpuKernel {
 public:
  AffineChainKernel(ConvChainSpec spec, int concat_inputs, int64_t axis, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), spec_(std::move(spec)), concat_inputs_(concat_inputs), axis_(axis) {}

  absl::Status Run(KernelContext& ctx) override {
    if (!Sources(ctx)) return Fallback(ctx);
    if (out_shape_ != shape_) {
      supported_ = Build(ctx);
      shape_ = out_shape_;
    }
    if (!supported_) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out_shape_));
    const int64_t channels = out_shape_[1], planes = out_shape_[0] * channels, inner = y->size() / planes;
    float* py = y->mutable_data<float>();
    const ResolvedPostOp* ops = resolved_.data();
    const size_t num_ops = resolved_.size();
    const float* const* src = src_.data();
    const int64_t* src_channels = src_channels_.data();
    const int64_t* source_of = source_of_.data();
    ParallelFor(planes, planes > 1 && y->size() > 65536, [&](int64_t p) {
      const int64_t n = p / channels, c = p % channels;
      // Channel c of the joined tensor is channel c - first of input i.
      const int64_t i = source_of[2 * c], first = source_of[2 * c + 1];
      const float* x = src[i] + (n * src_channels[i] + c - first) * inner;
      AffineRow(x, py + p * inner, inner, scale_[static_cast<size_t>(c)], shift_[static_cast<size_t>(c)]);
      ApplyPostOpsTo(py + p * inner, nullptr, inner, ops, num_ops);
    });
    return absl::OkStatus();
  }

 private:
  __attribute__((target_clones("avx512f", "avx2", "default"))) static void AffineRow(const float* x, float* y,
                                                                                     int64_t n, float a,
                                                                                     float b) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
  }

  // Reads the inputs the pass computes from (X, or the Concat's inputs) into
  // src_ / src_channels_ and the result's shape into out_shape_, and maps
  // each result channel to its input (source_of_, redone when the inputs'
  // channels change). False when the fused pass cannot take them.
  bool Sources(KernelContext& ctx) {
    const int count = concat_inputs_ > 0 ? concat_inputs_ : 1;
    src_.clear();
    channels_now_.clear();
    int64_t total = 0;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<const Tensor*> in = ctx.Input(i);
      if (!in.ok() || *in == nullptr) return false;
      const Tensor& x = **in;
      if (x.dtype() != pb::kFloat || x.rank() < 2) return false;
      if (i == 0) {
        if (concat_inputs_ > 0 &&
            (axis_ < -x.rank() || axis_ >= x.rank() || (axis_ + x.rank()) % x.rank() != 1))
          return false;
        out_shape_ = x.shape();
      } else {
        if (x.rank() != static_cast<int64_t>(out_shape_.size())) return false;
        for (int64_t d = 0; d < x.rank(); ++d) {
          if (d != 1 && x.dim(d) != out_shape_[static_cast<size_t>(d)]) return false;
        }
      }
      if (__builtin_add_overflow(total, x.dim(1), &total)) return false;
      src_.push_back(x.data<float>());
      channels_now_.push_back(x.dim(1));
    }
    out_shape_[1] = total;
    int64_t elements = 1;
    for (int64_t d : out_shape_) {
      if (__builtin_mul_overflow(elements, d, &elements)) return false;
    }
    if (elements == 0) return false;
    if (channels_now_ != src_channels_) {
      src_channels_ = channels_now_;
      source_of_.clear();
      int64_t first = 0;
      for (size_t i = 0; i < src_channels_.size(); ++i) {
        for (int64_t c = 0; c < src_channels_[i]; ++c)
          source_of_.insert(source_of_.end(), {static_cast<int64_t>(i), first});
        first += src_channels_[i];
      }
    }
    return true;
  }

  bool Build(KernelContext& ctx) {
    const int64_t m = out_shape_[1];
    std::vector<double> scale(static_cast<size_t>(m), 1.0), shift(static_cast<size_t>(m), 0.0);
    const int rank = static_cast<int>(out_shape_.size());
    if (!ChannelAffine(ctx, spec_, rank, m, scale, shift)) return false;
    if (!ResolveChainPostOps(ctx, spec_, out_shape_, &resolved_)) return false;
    for (const ResolvedPostOp& op : resolved_) {
      if (op.sum) return false;
    }
    scale_.assign(scale.begin(), scale.end());
    shift_.assign(shift.begin(), shift.end());
    return true;
  }

  ConvChainSpec spec_;
  int concat_inputs_;
  int64_t axis_;
  std::vector<int64_t> shape_, out_shape_;
  bool supported_ = false;
  std::vector<float> scale_, shift_;
  std::vector<ResolvedPostOp> resolved_;
  std::vector<const float*> src_;
  std::vector<int64_t> src_channels_, channels_now_;
  // Per result channel: its input and the first result channel of that input.
  std::vector<int64_t> source_of_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeConvChain(const FusionChain& chain, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeChainKernel(chain, Backend::kCpu, info));
  const bool concat_head = chain.head().op_type() == "Concat";
  if (chain.head().op_type() == "BatchNormalization" || concat_head) {
    ConvChainSpec spec;
    for (size_t k = concat_head ? 1 : 0; k < chain.nodes.size(); ++k) {
      ONNXKIT_RETURN_IF_ERROR(AddChainNode(chain, k, info.opset, /*linear_ok=*/true, spec));
    }
    const int concat_inputs = concat_head ? chain.head().num_inputs() : 0;
    const int64_t axis = concat_head ? chain.head().GetInt("axis").value_or(1) : 1;
    return std::unique_ptr<Kernel>(
        new AffineChainKernel(std::move(spec), concat_inputs, axis, std::move(fallback)));
  }
  std::vector<SequenceStage> stages;
  bool conv_constant = false;  // the current stage's weights (and bias) are constant
  std::vector<int> stage_of(chain.nodes.size(), -1);  // the stage each node belongs to
  std::optional<WindowAttrs> pool;  // a MaxPool ending the chain
  bool global_pool = false;         // a GlobalAveragePool ends it
  int shuffle_shape = -1, shuffle_back = -1;  // a channel shuffle before the next Conv
  // Branches joined by a Concat (then possibly a MaxPool).
  const size_t n = chain.nodes.size();
  const bool pooled_concat = n >= 2 && chain.tail().op_type() == "MaxPool" && chain.nodes[n - 2]->op_type() == "Concat";
  const bool concat = chain.tail().op_type() == "Concat" || pooled_concat;
  const size_t concat_at = pooled_concat ? n - 2 : n - 1;
  std::vector<int> branch_of_input;  // for a Concat: the branch (stage) making each input
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const ir::Node& node = *chain.nodes[k];
    if (concat && k == concat_at) {
      for (int j = 0; j < node.num_inputs(); ++j) {
        int source = j == chain.chained_input[k] ? static_cast<int>(k) - 1
                     : j == chain.InnerInput(k)  ? chain.inner_source[k]
                                                 : -1;
        if (source < 0) return absl::InternalError("a Concat chain must join its branches");
        branch_of_input.push_back(stage_of[static_cast<size_t>(source)]);
      }
      continue;
    }
    if (node.op_type() == "MaxPool") {
      if (k + 1 != chain.nodes.size() || stages.empty())
        return absl::InternalError("a MaxPool must end a Conv chain");
      ONNXKIT_ASSIGN_OR_RETURN(pool, reference::ParseWindowAttrs(node));
      continue;
    }
    if (node.op_type() == "GlobalAveragePool" && k + 1 == n) {
      if (stages.empty()) return absl::InternalError("a GlobalAveragePool must end a Conv chain");
      pool = WindowAttrs();
      global_pool = true;
      continue;
    }
    stage_of[k] = static_cast<int>(stages.size()) - (node.op_type() == "Conv" ? 0 : 1);
    if (node.op_type() == "GlobalAveragePool") {
      // Squeeze-and-excitation (FindConvChains checked its nodes): GAP, 1x1
      // Conv, activation (one node, or a gate and its Mul), 1x1 Conv, gate,
      // Mul.
      if (stages.empty() || stages.back().se.has_value() || k + 6 > n)
        return absl::InternalError("a squeeze-and-excitation must follow a Conv stage");
      SqueezeExcite se;
      const ir::Node& squeeze = *chain.nodes[k + 1];
      se.w1 = chain.input_offset[k + 1] + 1;
      se.b1 = squeeze.num_inputs() > 2 && squeeze.input(2) != nullptr ? chain.input_offset[k + 1] + 2 : -1;
      size_t at = k + 2;
      const std::string& act = chain.nodes[at]->op_type();
      if (act == "Relu" || act == "HardSwish") {
        se.act = act == "Relu" ? SqueezeExcite::Act::kRelu : SqueezeExcite::Act::kHardSwish;
        at += 1;
      } else if (IsGatedMul(chain, at + 1)) {
        se.act = act == "Sigmoid" ? SqueezeExcite::Act::kSwish : SqueezeExcite::Act::kHardSwish;
        at += 2;
      } else {
        return absl::InternalError("a squeeze-and-excitation needs an activation after its first Conv");
      }
      if (at + 3 > n || chain.nodes[at]->op_type() != "Conv" || chain.nodes[at + 2]->op_type() != "Mul")
        return absl::InternalError("a squeeze-and-excitation must end with a Conv, a gate and a Mul");
      const ir::Node& excite = *chain.nodes[at];
      se.w2 = chain.input_offset[at] + 1;
      se.b2 = excite.num_inputs() > 2 && excite.input(2) != nullptr ? chain.input_offset[at] + 2 : -1;
      const ir::Node& gate = *chain.nodes[at + 1];
      se.hard_gate = gate.op_type() == "HardSigmoid";
      se.alpha = gate.GetFloat("alpha").value_or(0.2f);
      se.beta = gate.GetFloat("beta").value_or(0.5f);
      for (size_t j = k; j <= at + 2; ++j) stage_of[j] = static_cast<int>(stages.size()) - 1;
      stages.back().se = se;
      k = at + 2;
      continue;
    }
    if (!concat && node.op_type() == "AveragePool") {
      // A pooled join (FindConvChains): the AveragePool, then the Concat
      // taking the stage's result first and the pooled value second.
      if (stages.empty() || k + 1 >= n || chain.nodes[k + 1]->op_type() != "Concat" || stages.back().join ||
          chain.chained_input[k + 1] != 1 || chain.InnerInput(k + 1) != 0)
        return absl::InternalError("an AveragePool in a Conv chain must be joined by the Concat after it");
      SequenceStage::PoolJoin join;
      ONNXKIT_ASSIGN_OR_RETURN(join.attrs, reference::ParseWindowAttrs(node));
      join.count_include_pad = reference::AttrInt(node, "count_include_pad", 0) != 0;
      if (chain.InnerInput(k) == 0 && chain.inner_source[k] >= 0) {
        join.source = stage_of[static_cast<size_t>(chain.inner_source[k])];
        if (join.source < 0 || join.source + 1 >= static_cast<int>(stages.size()))
          return absl::InternalError("a pooled join must read a finished stage");
      } else if (node.input(0) == chain.head().input(0)) {
        join.reads_x = true;
      } else {
        return absl::InternalError("a pooled join must read a value of the chain or its X");
      }
      join.ops_from = stages.back().spec.ops.size();
      stages.back().join = join;
      stage_of[k + 1] = stage_of[k];
      ++k;  // the Concat
      continue;
    }
    if (node.op_type() == "Reshape" || node.op_type() == "Transpose") {
      // A channel shuffle before the next Conv (FindConvChains checked its shape).
      if (stages.empty()) return absl::InternalError("a Conv chain must start with a Conv");
      if (node.op_type() == "Reshape") (shuffle_shape < 0 ? shuffle_shape : shuffle_back) = chain.input_offset[k] + 1;
      continue;
    }
    if (node.op_type() == "Conv") {
      SequenceStage stage;
      stage.shuffle_shape = shuffle_shape;
      stage.shuffle_back = shuffle_back;
      if ((shuffle_shape < 0) != (shuffle_back < 0)) return absl::InternalError("an incomplete channel shuffle");
      shuffle_shape = shuffle_back = -1;
      // The block's first Conv after a projection shortcut reads the
      // block's input, an earlier stage's result (FindConvChains).
      // Or, after a shortcut at the head of the chain, X again.
      if (k > 0 && chain.chained_input[k] < 0 && !concat && chain.InnerInput(k) < 0) {
        if (node.input(0) != chain.head().input(0))
          return absl::InternalError("a Conv inside a chain must read a value of the chain or its X");
        stage.reads_x = true;
      } else if (k > 0 && chain.chained_input[k] < 0 && !concat) {
        if (chain.InnerInput(k) != 0 || chain.inner_source[k] < 0)
          return absl::InternalError("a Conv inside a chain must read a value of the chain");
        stage.source = stage_of[static_cast<size_t>(chain.inner_source[k])];
        if (stage.source < 0 || stage.source + 1 >= static_cast<int>(stages.size()))
          return absl::InternalError("a Conv reading an earlier stage must follow a finished stage");
      }
      stage.base = chain.input_offset[k];
      stage.node_inputs = node.num_inputs();
      stage.group = reference::AttrInt(node, "group", 1);
      ONNXKIT_ASSIGN_OR_RETURN(stage.attrs, reference::ParseWindowAttrs(node));
      stage.attrs.ceil_mode = false;
      stages.push_back(std::move(stage));
      conv_constant = IsSessionConstantInput(node, 1) &&
                      (node.num_inputs() < 3 || node.input(2) == nullptr || IsSessionConstantInput(node, 2));
      continue;
    }
    if (stages.empty()) return absl::InternalError("a Conv chain must start with a Conv");
    ONNXKIT_RETURN_IF_ERROR(AddChainNode(chain, k, info.opset, conv_constant, stages.back().spec));
    if (chain.InnerInput(k) >= 0 && !concat && !IsGatedMul(chain, k)) {
      // A residual from inside the chain: the result of the stage its
      // source node ends (the next node is a Conv).
      ConvChainSpec::PostOp& op = stages.back().spec.ops.back();
      op.residual_stage = stage_of[static_cast<size_t>(chain.inner_source[k])];
      if (!op.sum || op.residual_stage < 0 || op.residual_stage + 1 >= static_cast<int>(stages.size()))
        return absl::InternalError("a residual from inside a Conv chain must follow a finished stage");
    }
  }
  if (concat) {
    std::vector<int> sorted = branch_of_input;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] != static_cast<int>(i) || stages.size() != sorted.size())
        return absl::InternalError("a Concat chain must join one branch per input");
    }
    int64_t axis = chain.nodes[concat_at]->GetInt("axis").value_or(1);
    return MakeConvConcat(std::move(stages), std::move(branch_of_input), axis, std::move(fallback),
                          std::move(pool), info.bf16);
  }
  if (stages.size() > 1 || pool.has_value()) {
    return MakeConvSequence(std::move(stages), std::move(fallback), std::move(pool), info.bf16, global_pool);
  }
  const ir::Node& head = chain.head();
  return std::unique_ptr<Kernel>(
      new ConvKernel(head, info, std::move(fallback), std::move(stages[0].attrs), std::move(stages[0].spec)));
}

int64_t DeconvolutionProducts() { return g_deconvolution_products.load(std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<Kernel>> MakeConvTranspose(const ir::Node& node, const KernelInfo& info) {
  return MakeConvLike<ConvTransposeKernel>(node, info);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeQLinearConv(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, reference::ParseWindowAttrs(node));
  attrs.ceil_mode = false;
  return std::unique_ptr<Kernel>(
      new IntegerConvKernel(node, std::move(fallback), std::move(attrs), kQLinearConvInputs));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeConvInteger(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, reference::ParseWindowAttrs(node));
  attrs.ceil_mode = false;
  return std::unique_ptr<Kernel>(
      new IntegerConvKernel(node, std::move(fallback), std::move(attrs), kConvIntegerInputs));
}

}  // namespace onnxkit::runner::cpu
