// cpu kernels of quantized chains (runner/fusion.h): QDQ models in int8.
//
// Weighted chains (DequantizeLinear -> Conv / MatMul / Gemm -> [Relu] ->
// QuantizeLinear) run as one oneDNN int8 convolution or matmul from the
// quantized source to the quantized result: u8 or s8 source with its zero
// point, s8 weights (u8 weights with zero point 128 are shifted to s8
// exactly) with one scale or one per output channel, reordered once into
// the primitive's layout, and the requantization fused as constant output
// scales x_scale * w_scale[c] / y_scale, a float bias in accumulator units
// (b[c] / (x_scale * w_scale[c])), the Relu as a post-op and the result's
// zero point. Lookup chains (DequantizeLinear -> unary op ->
// QuantizeLinear) run as a 256-entry table computed once by the chain's own
// kernels, so they match the node-by-node result exactly.
//
// Accuracy: the reference computes the chain in float (the dequantized
// values, a float convolution, then rounding to the quantized grid); this
// computes the same real number with an exact int32 accumulation and one
// float scaling. Both round to nearest-even, so they agree except where the
// real value lies within float rounding error of a rounding tie: there the
// result may differ by one quantization step (1 in the integer output,
// y_scale after dequantization), never more.
//
// Anything else (other types, per-channel parameters of the activations,
// weight zero points other than 0 / 128, a CPU without VNNI, where oneDNN's
// u8 x s8 products saturate) runs the chain node by node.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/quantize_rows.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

bool IsInt8Type(int32_t t) { return t == pb::kInt8 || t == pb::kUint8; }

int32_t Int8Value(const Tensor& t, int64_t i) {
  return t.dtype() == pb::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

// A one-element float32 tensor's value.
std::optional<float> ScalarFloat(const Tensor* t) {
  if (t == nullptr || t->dtype() != pb::kFloat || t->size() != 1 || t->rank() > 1) return std::nullopt;
  return t->data<float>()[0];
}

const Tensor* OptionalTensor(KernelContext& ctx, int i) {
  absl::StatusOr<const Tensor*> t = ctx.OptionalInput(i);
  return t.ok() ? *t : nullptr;
}

// Channels-last storage (FusionChain::nhwc_in / nhwc_out): the logical
// shape [N, C, H, W] of a tensor held as [N, H, W, C], and back.
std::vector<int64_t> LogicalShape(const std::vector<int64_t>& nhwc) { return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]}; }
std::vector<int64_t> StoredShape(const std::vector<int64_t>& nchw) { return {nchw[0], nchw[2], nchw[3], nchw[1]}; }

// Copies 8-bit `n` x `c` x `hw` values between plain (n, c, hw) and
// channels-last (n, hw, c) order, through `table` when given.
void Transpose8(const uint8_t* in, uint8_t* out, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                const uint8_t* table = nullptr, uint8_t flip = 0) {
  for (int64_t b = 0; b < n; ++b) {
    const uint8_t* src = in + b * c * hw;
    uint8_t* dst = out + b * c * hw;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t plain = ch * hw + p, last = p * c + ch;
        uint8_t v = src[to_nhwc ? plain : last];
        dst[to_nhwc ? last : plain] = table != nullptr ? table[v ^ flip] : v;
      }
    }
  }
}

// `n` x `c` x `hw` elements of `bytes` bytes each between plain and
// channels-last order (a node run plainly may give a wider quantized type,
// 16-bit say, than the 8-bit ones the fused kernels store channels-last).
void TransposeElements(const std::byte* in, std::byte* out, size_t bytes, int64_t n, int64_t c, int64_t hw,
                       bool to_nhwc) {
  for (int64_t b = 0; b < n; ++b) {
    const std::byte* src = in + static_cast<size_t>(b * c * hw) * bytes;
    std::byte* dst = out + static_cast<size_t>(b * c * hw) * bytes;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t plain = ch * hw + p, last = p * c + ch;
        std::memcpy(dst + static_cast<size_t>(to_nhwc ? last : plain) * bytes,
                    src + static_cast<size_t>(to_nhwc ? plain : last) * bytes, bytes);
      }
    }
  }
}

// `t` (4-D) stored the other way: to channels-last, or from it.
absl::StatusOr<Tensor> Relayout(const Tensor& t, bool to_nhwc) {
  if (t.rank() != 4 || (t.size() != 0 && t.nbytes() % static_cast<size_t>(t.size()) != 0)) {
    return absl::InternalError("a channels-last value is not a 4-D tensor of whole-byte elements");
  }
  std::vector<int64_t> shape = to_nhwc ? StoredShape(t.shape()) : LogicalShape(t.shape());
  ONNXKIT_ASSIGN_OR_RETURN(Tensor out, Tensor::AllocateUninitialized(t.dtype(), shape));
  if (t.size() == 0) return out;
  const size_t bytes = t.nbytes() / static_cast<size_t>(t.size());
  const std::vector<int64_t>& logical = to_nhwc ? t.shape() : shape;
  if (bytes == 1) {
    Transpose8(static_cast<const uint8_t*>(t.raw()), static_cast<uint8_t*>(out.mutable_raw()), logical[0],
               logical[1], logical[2] * logical[3], to_nhwc);
  } else {
    TransposeElements(static_cast<const std::byte*>(t.raw()), static_cast<std::byte*>(out.mutable_raw()),
                      bytes, logical[0], logical[1], logical[2] * logical[3], to_nhwc);
  }
  return out;
}

// Runs `run` (a chain's node-by-node kernel) on plain copies of the
// channels-last inputs: the inputs `sources` and every other input holding
// the same value. Stores output 0 channels-last when `out_nhwc`.
absl::Status RunPlain(KernelContext& ctx, const std::vector<int>& sources, bool out_nhwc,
                      const std::function<absl::Status(KernelContext&)>& run) {
  std::vector<const RtValue*> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.Value(i));
  std::vector<RtValue> plain(sources.size());  // sized once: `inputs` points into it
  for (size_t s = 0; s < sources.size(); ++s) {
    const RtValue* stored = ctx.Value(sources[s]);
    if (stored == nullptr || !stored->is_tensor()) continue;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Relayout(stored->tensor(), /*to_nhwc=*/false));
    plain[s] = RtValue::FromTensor(std::move(t));
    for (const RtValue*& in : inputs) in = in == stored ? &plain[s] : in;
  }
  std::vector<RtValue> outputs(static_cast<size_t>(ctx.num_outputs()));
  KernelContext sub(ctx.node(), ctx.opset(), std::move(inputs), &outputs, ctx.subgraphs());
  ONNXKIT_RETURN_IF_ERROR(run(sub));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i == 0 && out_nhwc && outputs[i].is_tensor()) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Relayout(outputs[i].tensor(), /*to_nhwc=*/true));
      outputs[i] = RtValue::FromTensor(std::move(t));
    }
    if (outputs[i].defined()) ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(static_cast<int>(i), std::move(outputs[i])));
  }
  return absl::OkStatus();
}

// Where a weighted chain's operands are among the fused kernel's inputs.
struct WeightedLayout {
  int extra = 0;     // index of the first extra input (kQxData)
  int bias = -1;     // the float bias (Conv / Gemm input 2), -1: none
  int y_scale = -1;  // the QuantizeLinear's scale and zero point
  int y_zp = -1;
  bool relu = false;
  int64_t w_axis = 0;  // the weights' DequantizeLinear axis (normalized later)
};

// The resolved constants of a weighted chain.
struct WeightedParams {
  int32_t x_type = 0, y_type = 0;
  int32_t x_zp = 0, y_zp = 0;
  std::vector<float> scales;    // x_scale * w_scale[c] / y_scale (1 or per channel)
  std::vector<float> bias_acc;  // bias in accumulator units; empty: none
  Tensor weights;               // s8
};

// The parameters of a weighted chain with `channels` output channels and
// per-channel weight axis `channel_axis` (of the weights' rank); false when
// they are not covered. `bias`: the float bias (size `channels`, or 1 to
// broadcast), times `bias_factor`; `scale_factor` multiplies the result.
bool ResolveParams(KernelContext& ctx, const WeightedLayout& in, int64_t channels, int64_t channel_axis,
                   const Tensor* bias, float scale_factor, float bias_factor, WeightedParams& p) {
  const Tensor* x = OptionalTensor(ctx, in.extra + kQxData);
  const Tensor* x_zp = OptionalTensor(ctx, in.extra + kQxZeroPoint);
  const Tensor* w = OptionalTensor(ctx, in.extra + kQwData);
  const Tensor* w_scale = OptionalTensor(ctx, in.extra + kQwScale);
  const Tensor* w_zp = OptionalTensor(ctx, in.extra + kQwZeroPoint);
  const Tensor* y_zp = in.y_zp >= 0 ? OptionalTensor(ctx, in.y_zp) : nullptr;
  std::optional<float> xs = ScalarFloat(OptionalTensor(ctx, in.extra + kQxScale));
  // No QuantizeLinear (y_scale < 0): a float32 result, scaled by 1.
  std::optional<float> ys = in.y_scale >= 0 ? ScalarFloat(OptionalTensor(ctx, in.y_scale)) : std::optional<float>(1.f);
  if (x == nullptr || w == nullptr || !xs || !ys || !IsInt8Type(x->dtype()) || !IsInt8Type(w->dtype())) return false;
  if (!(*xs > 0) || !(*ys > 0) || !std::isfinite(*xs) || !std::isfinite(*ys)) return false;
  if (x_zp != nullptr && (x_zp->dtype() != x->dtype() || x_zp->size() != 1 || x_zp->rank() > 1)) return false;
  if (y_zp != nullptr && (!IsInt8Type(y_zp->dtype()) || y_zp->size() != 1 || y_zp->rank() > 1)) return false;
  p.x_type = x->dtype();
  p.y_type = in.y_scale < 0 ? pb::kFloat : y_zp != nullptr ? y_zp->dtype() : pb::kUint8;
  p.x_zp = x_zp != nullptr ? Int8Value(*x_zp, 0) : 0;
  p.y_zp = y_zp != nullptr ? Int8Value(*y_zp, 0) : 0;
  // Weight scales: one, or one per channel along the output-channel axis.
  if (w_scale == nullptr || w_scale->dtype() != pb::kFloat || w_scale->rank() > 1) return false;
  const int64_t n = w_scale->size();
  if (n != 1 && (n != channels || channel_axis < 0 || w->dim(static_cast<int>(channel_axis)) != channels))
    return false;
  // Weight zero points: 0 (s8) or 128 (u8, shifted to s8), one or per channel.
  const int32_t shift = w->dtype() == pb::kUint8 ? 128 : 0;
  if (w_zp == nullptr ? shift != 0
                      : (w_zp->dtype() != w->dtype() || w_zp->rank() > 1 || (w_zp->size() != 1 && w_zp->size() != n)))
    return false;
  for (int64_t i = 0; w_zp != nullptr && i < w_zp->size(); ++i) {
    if (Int8Value(*w_zp, i) != shift) return false;
  }
  if (bias != nullptr && (bias->dtype() != pb::kFloat || (bias->size() != channels && bias->size() != 1)))
    return false;
  p.scales.clear();
  p.bias_acc.clear();
  for (int64_t c = 0; c < channels; ++c) {
    double ws = w_scale->data<float>()[n == 1 ? 0 : c];
    if (!(ws > 0) || !std::isfinite(ws)) return false;
    double acc_scale = static_cast<double>(*xs) * ws * scale_factor;
    if (n > 1 || c == 0) p.scales.push_back(static_cast<float>(acc_scale / *ys));
    if (bias != nullptr) {
      double b = bias->data<float>()[bias->size() == 1 ? 0 : c];
      p.bias_acc.push_back(static_cast<float>(b * bias_factor / acc_scale));
    }
  }
  absl::StatusOr<Tensor> s8 = Tensor::AllocateUninitialized(pb::kInt8, w->shape());
  if (!s8.ok()) return false;
  for (int64_t i = 0; i < w->size(); ++i) {
    s8->mutable_data<int8_t>()[i] = static_cast<int8_t>(Int8Value(*w, i) - shift);
  }
  p.weights = *std::move(s8);
  return true;
}

// True when oneDNN's int8 kernels accumulate u8 x s8 products exactly: with
// VNNI (or AMX). Without it they sum pairs of products in saturating int16.
bool ExactProducts() {
  static const bool exact = [] {
  auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  auto has = [&](dnnl::cpu_isa want) {
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  return has(dnnl::cpu_isa::avx512_core_vnni) || has(dnnl::cpu_isa::avx2_vnni);
  }();
  return exact;
}

// One int8 primitive for one source shape, with the reorders of the source
// and result between the runner's plain layout and the primitive's.
struct Int8Plan {
  std::vector<int64_t> x_shape, y_shape;
  memory::desc src_user, dst_user, src, dst;
  dnnl::primitive primitive;
  dnnl::reorder src_in, dst_out;
  memory src_buffer, dst_buffer;
  std::unordered_map<int, memory> args;  // weights, bias, zero points

  // Throws dnnl::error: call inside Guard.
  template <typename PrimitiveDesc>
  void Finish(const PrimitiveDesc& pd, dnnl::primitive p) {
    src = pd.src_desc();
    dst = pd.dst_desc();
    primitive = std::move(p);
    if (src != src_user) {
      src_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_user, Engine(), src));
      src_buffer = memory(src, Engine());
    }
    if (dst != dst_user) {
      dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), dst, Engine(), dst_user));
      dst_buffer = memory(dst, Engine());
    }
  }
};

// Base of the weighted kernels: resolves the parameters once, plans per
// source shape (Build), and runs the plan.
class WeightedKernel : public CpuKernel {
 public:
  WeightedKernel(WeightedLayout layout, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), in_(layout) {}

  // Channels-last source and result (FusionChain::nhwc_in / nhwc_out).
  void SetLayouts(bool nhwc_in, bool nhwc_out) {
    nhwc_in_ = nhwc_in;
    nhwc_out_ = nhwc_out;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* x = OptionalTensor(ctx, in_.extra + kQxData);
    if (x == nullptr || !ExactProducts()) return PlainFallback(ctx);
    if (nhwc_in_ && x->rank() != 4) return absl::InternalError("a channels-last quantized source is not 4-D");
    if (state_ == 0) state_ = Resolve(ctx, params_) ? 1 : -1;
    if (state_ < 0 || x->dtype() != params_.x_type) return PlainFallback(ctx);
    if (!plan_built_ || x->shape() != plan_.x_shape) {
      plan_ = Int8Plan();
      plan_ok_ = x->size() > 0 && Build(nhwc_in_ ? LogicalShape(x->shape()) : x->shape(), x->dtype(), plan_);
      plan_built_ = true;
      plan_.x_shape = x->shape();
    }
    if (!plan_ok_) return PlainFallback(ctx);
    return Execute(ctx, *x);
  }

 protected:
  // Fills the parameters from the first run's inputs; false: not covered.
  virtual bool Resolve(KernelContext& ctx, WeightedParams& p) = 0;
  // Plans for a source of (logical) shape `x_shape` and type `x_type`;
  // false: not covered.
  virtual bool Build(const std::vector<int64_t>& x_shape, int32_t x_type, Int8Plan& plan) = 0;

  // The user-side descriptions of the source and result of logical shapes
  // `x_shape` and `y_shape`: plain, or channels-last where planned so.
  memory::desc SourceDesc(const std::vector<int64_t>& x_shape, dt type) const {
    return nhwc_in_ ? memory::desc(Dims(x_shape), type, tag::acdb) : PlainDesc(x_shape, type);
  }
  memory::desc ResultDesc(const std::vector<int64_t>& y_shape, dt type) const {
    return nhwc_out_ ? memory::desc(Dims(y_shape), type, tag::acdb) : PlainDesc(y_shape, type);
  }

  // The primitive attributes of the fused requantization. Throws dnnl::error.
  dnnl::primitive_attr Attributes(int per_channel_mask) {
    dnnl::primitive_attr attr;
    attr.set_output_scales(params_.scales.size() > 1 ? per_channel_mask : 0, params_.scales);
    if (params_.x_zp != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (params_.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    if (in_.relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    return attr;
  }

  // Adds the weights (reordered from `user` into `want` once), the bias and
  // the zero points to the plan's arguments. Throws dnnl::error.
  void BindConstants(Int8Plan& plan, const memory::desc& user, const memory::desc& want,
                     const memory::desc& bias) {
    if (!prepared_ || prepared_.get_desc() != want) {
      memory from(user, Engine(), const_cast<void*>(params_.weights.raw()));
      prepared_ = memory(want, Engine());
      dnnl::reorder(from, prepared_).execute(Stream(), from, prepared_);
      Stream().wait();
    }
    plan.args[DNNL_ARG_WEIGHTS] = prepared_;
    if (!params_.bias_acc.empty()) plan.args[DNNL_ARG_BIAS] = memory(bias, Engine(), params_.bias_acc.data());
    memory::desc zp({1}, dt::s32, tag::a);
    if (params_.x_zp != 0) plan.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory(zp, Engine(), &params_.x_zp);
    if (params_.y_zp != 0) plan.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = memory(zp, Engine(), &params_.y_zp);
  }

  const WeightedLayout& layout() const { return in_; }
  const WeightedParams& params() const { return params_; }

 private:
  absl::Status PlainFallback(KernelContext& ctx) {
    if (!nhwc_in_ && !nhwc_out_) return Fallback(ctx);
    return RunPlain(ctx, nhwc_in_ ? std::vector<int>{in_.extra + kQxData} : std::vector<int>{}, nhwc_out_,
                    [this](KernelContext& sub) { return Fallback(sub); });
  }

  absl::Status Execute(KernelContext& ctx, const Tensor& x) {
    Int8Plan& p = plan_;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(
                                             0, params_.y_type, nhwc_out_ ? StoredShape(p.y_shape) : p.y_shape));
    std::unordered_map<int, memory> args = p.args;
    memory x_user, y_user;
    ONNXKIT_RETURN_IF_ERROR(Guard("int8 memory", [&] {
      x_user = UserMemory(x, p.src_user);
      y_user = UserMemory(*y, p.dst_user);
    }));
    args[DNNL_ARG_SRC] = p.src_in ? p.src_buffer : x_user;
    args[DNNL_ARG_DST] = p.dst_out ? p.dst_buffer : y_user;
    if (p.src_in) {
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("int8 source reorder", p.src_in,
                                           {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, p.src_buffer}}));
    }
    ONNXKIT_RETURN_IF_ERROR(cpu::Execute("int8 primitive", p.primitive, args));
    if (p.dst_out) {
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("int8 result reorder", p.dst_out,
                                           {{DNNL_ARG_FROM, p.dst_buffer}, {DNNL_ARG_TO, y_user}}));
    }
    return absl::OkStatus();
  }

  WeightedLayout in_;
  bool nhwc_in_ = false, nhwc_out_ = false;
  int state_ = 0;  // parameters: 0 unresolved, 1 covered, -1 not covered
  WeightedParams params_;
  bool plan_built_ = false;
  bool plan_ok_ = false;
  Int8Plan plan_;
  memory prepared_;
};

// Weights dims of oneDNN: [O, I, k...] or, grouped, [G, O/G, I/G, k...].
memory::dims GroupedWeightDims(int64_t group, const std::vector<int64_t>& w_shape) {
  memory::dims d;
  if (group > 1) d.push_back(group);
  d.push_back(w_shape[0] / group);
  d.insert(d.end(), w_shape.begin() + 1, w_shape.end());
  return d;
}

class QuantizedConvKernel : public WeightedKernel {
 public:
  QuantizedConvKernel(WeightedLayout layout, reference::WindowAttrs attrs, int64_t group,
                      std::unique_ptr<Kernel> fallback)
      : WeightedKernel(layout, std::move(fallback)), attrs_(std::move(attrs)), group_(group) {}

 protected:
  bool Resolve(KernelContext& ctx, WeightedParams& p) override {
    const Tensor* w = OptionalTensor(ctx, layout().extra + kQwData);
    if (w == nullptr || w->rank() < 3 || w->rank() > 5 || w->size() == 0 || group_ < 1) return false;
    int64_t axis = layout().w_axis < 0 ? layout().w_axis + w->rank() : layout().w_axis;
    const Tensor* bias = layout().bias >= 0 ? OptionalTensor(ctx, layout().bias) : nullptr;
    if (bias != nullptr && bias->rank() != 1) return false;
    return ResolveParams(ctx, layout(), w->dim(0), axis == 0 ? 0 : -1, bias, 1.0f, 1.0f, p);
  }

  bool Build(const std::vector<int64_t>& x_shape, int32_t x_type, Int8Plan& plan) override {
    const Tensor& w = params().weights;
    if (static_cast<int>(x_shape.size()) != w.rank()) return false;
    const int64_t c = x_shape[1], m = w.dim(0);
    if (c != w.dim(1) * group_ || m % group_ != 0) return false;
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) return false;
    std::vector<int64_t> spatial(x_shape.begin() + 2, x_shape.end());
    absl::StatusOr<reference::Window> win = reference::ResolveWindow(attrs_, spatial, kernel);
    if (!win.ok() || win->out_size == 0) return false;
    plan.y_shape = {x_shape[0], m};
    plan.y_shape.insert(plan.y_shape.end(), win->out.begin(), win->out.end());
    const dt xt = *DnnlType(x_type), yt = *DnnlType(params().y_type);
    plan.src_user = SourceDesc(x_shape, xt);
    plan.dst_user = ResultDesc(plan.y_shape, yt);
    const memory::dims wdims = GroupedWeightDims(group_, w.shape());
    memory::dims dil;
    for (int64_t d : win->dilations) dil.push_back(d - 1);
    return Guard("int8 convolution", [&] {
             memory::desc bias = params().bias_acc.empty() ? memory::desc()
                                                           : memory::desc({m}, dt::f32, tag::a);
             dnnl::convolution_forward::desc d(
                 dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                 memory::desc(Dims(x_shape), xt, tag::any), memory::desc(wdims, dt::s8, tag::any), bias,
                 memory::desc(Dims(plan.y_shape), yt, tag::any), Dims(win->strides), dil,
                 Dims(win->pad_begin), Dims(win->pad_end));
             dnnl::convolution_forward::primitive_desc pd(d, Attributes(0b10), Engine());
             plan.Finish(pd, dnnl::convolution_forward(pd));
             BindConstants(plan, memory::desc(wdims, dt::s8, PlainTag(static_cast<int>(wdims.size()))),
                           pd.weights_desc(), bias);
           })
        .ok();
  }

 private:
  reference::WindowAttrs attrs_;
  int64_t group_;
};

// MatMul (A [..., K] x B [K, N]) and Gemm (A [M, K], B [K, N] or [N, K]
// with transB, alpha, and beta * C with C of N elements or one).
class QuantizedMatMulKernel : public WeightedKernel {
 public:
  QuantizedMatMulKernel(WeightedLayout layout, bool gemm, bool trans_b, float alpha, float beta,
                        std::unique_ptr<Kernel> fallback)
      : WeightedKernel(layout, std::move(fallback)), gemm_(gemm), trans_b_(trans_b), alpha_(alpha), beta_(beta) {}

 protected:
  bool Resolve(KernelContext& ctx, WeightedParams& p) override {
    const Tensor* w = OptionalTensor(ctx, layout().extra + kQwData);
    if (w == nullptr || w->rank() != 2 || w->size() == 0 || !(alpha_ != 0) || !std::isfinite(alpha_)) return false;
    const int n_axis = trans_b_ ? 0 : 1;
    int64_t axis = layout().w_axis < 0 ? layout().w_axis + 2 : layout().w_axis;
    const Tensor* bias = layout().bias >= 0 ? OptionalTensor(ctx, layout().bias) : nullptr;
    if (bias != nullptr && (bias->rank() > 2 || (bias->size() > 1 && bias->dim(bias->rank() - 1) != w->dim(n_axis))))
      return false;
    return ResolveParams(ctx, layout(), w->dim(n_axis), axis == n_axis ? n_axis : -1, bias, alpha_, beta_, p);
  }

  bool Build(const std::vector<int64_t>& x_shape, int32_t x_type, Int8Plan& plan) override {
    const Tensor& w = params().weights;
    const int64_t k = trans_b_ ? w.dim(1) : w.dim(0), n = trans_b_ ? w.dim(0) : w.dim(1);
    const size_t rank = x_shape.size();
    if (rank < 2 || (gemm_ && rank != 2) || x_shape.back() != k || k > kMaxK) return false;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < rank; ++i) rows *= x_shape[i];
    plan.y_shape = x_shape;
    plan.y_shape.back() = n;
    const dt xt = *DnnlType(x_type), yt = *DnnlType(params().y_type);
    return Guard("int8 matmul", [&] {
             plan.src_user = memory::desc({rows, k}, xt, tag::ab);
             plan.dst_user = memory::desc({rows, n}, yt, tag::ab);
             memory::desc bias =
                 params().bias_acc.empty() ? memory::desc() : memory::desc({1, n}, dt::f32, tag::ab);
             dnnl::matmul::desc d(plan.src_user, memory::desc({k, n}, dt::s8, tag::any), bias, plan.dst_user);
             dnnl::matmul::primitive_desc pd(d, Attributes(0b10), Engine());
             plan.Finish(pd, dnnl::matmul(pd));
             BindConstants(plan, memory::desc({k, n}, dt::s8, trans_b_ ? tag::ba : tag::ab), pd.weights_desc(),
                           bias);
           })
        .ok();
  }

 private:
  // |(a - za) * b| <= 255 * 128: rows up to this length cannot overflow int32.
  static constexpr int64_t kMaxK = 65536;
  bool gemm_, trans_b_;
  float alpha_, beta_;
};

// out[i] = table[in[i] ^ flip]: 64 bytes at a time with AVX-512 VBMI byte
// permutes (two 128-entry halves, chosen by the top bit), else one by one.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void LookupVbmi(const uint8_t* in, uint8_t* out, int64_t n,
                                                                       const uint8_t* table, uint8_t flip) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(in + i), f);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
  for (; i < n; ++i) out[i] = table[in[i] ^ flip];
}

void Lookup(const uint8_t* in, uint8_t* out, int64_t n, const uint8_t* table, uint8_t flip) {
  static const bool vbmi = __builtin_cpu_supports("avx512vbmi");
  if (vbmi) return LookupVbmi(in, out, n, table, flip);
  for (int64_t i = 0; i < n; ++i) out[i] = table[in[i] ^ flip];
}

// MatMul of two quantized activations (the weighted chain whose weights
// are the second activation: attention's Q K^T and P V), A [..., M, K] x
// B [..., K, N] with equal batch dims or a 2-D B: a oneDNN int8 matmul
// into int32 with A's zero point fused and B shifted to s8 (u8 - 128 with
// its zero point moved alike), then B's zero point's share zb * sum_k(A -
// za) removed per row, the exact sum scaled by sa * sb and quantized with
// the reference's QuantizeLinear arithmetic. Tolerance as for the weighted
// chains: one step where float rounding meets a tie.
class ActivationMatMulKernel : public CpuKernel {
 public:
  ActivationMatMulKernel(int extra, int y_scale, int y_zp, bool relu, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), extra_(extra), y_scale_(y_scale), y_zp_(y_zp), relu_(relu) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* a = OptionalTensor(ctx, extra_ + kQxData);
    const Tensor* b = OptionalTensor(ctx, extra_ + kQwData);
    if (a == nullptr || b == nullptr || !ExactProducts() || !IsInt8Type(a->dtype()) || !IsInt8Type(b->dtype()))
      return Fallback(ctx);
    std::optional<float> sa = ScalarFloat(OptionalTensor(ctx, extra_ + kQxScale));
    std::optional<float> sb = ScalarFloat(OptionalTensor(ctx, extra_ + kQwScale));
    std::optional<float> sy = ScalarFloat(y_scale_ >= 0 ? OptionalTensor(ctx, y_scale_) : nullptr);
    int32_t za = 0, zb = 0, zy = 0, y_type = pb::kUint8;
    if (!sa || !sb || !sy || !(*sa > 0) || !(*sb > 0) || !(*sy > 0) || !std::isfinite(*sa * *sb) ||
        !std::isfinite(*sy) || !ZeroPoint(OptionalTensor(ctx, extra_ + kQxZeroPoint), a->dtype(), za) ||
        !ZeroPoint(OptionalTensor(ctx, extra_ + kQwZeroPoint), b->dtype(), zb)) {
      return Fallback(ctx);
    }
    if (const Tensor* t = y_zp_ >= 0 ? OptionalTensor(ctx, y_zp_) : nullptr) {
      if (!IsInt8Type(t->dtype()) || !ZeroPoint(t, t->dtype(), zy)) return Fallback(ctx);
      y_type = t->dtype();
    }
    const int ra = a->rank(), rb = b->rank();
    if (ra < 2 || rb < 2) return Fallback(ctx);
    const int64_t m = a->dim(ra - 2), k = a->dim(ra - 1), n = b->dim(rb - 1);
    if (b->dim(rb - 2) != k || k > kMaxK || a->size() == 0 || b->size() == 0) return Fallback(ctx);
    std::vector<int64_t> y_shape = a->shape();
    y_shape.back() = n;
    int64_t batch = 1;
    const bool shared_b = rb == 2;
    if (!shared_b) {
      if (ra != rb || !std::equal(a->shape().begin(), a->shape().end() - 2, b->shape().begin())) return Fallback(ctx);
      for (int i = 0; i + 2 < ra; ++i) batch *= a->dim(i);
    }
    const int64_t rows = a->size() / k;  // batch * m, or every row of A against a 2-D B
    if (!plan_ || a->shape() != a_shape_ || b->shape() != b_shape_ || a->dtype() != a_type_ || (za != 0) != with_za_) {
      plan_ok_ = Plan(*a, shared_b ? memory::dims{rows, k} : memory::dims{batch, m, k},
                      shared_b ? memory::dims{k, n} : memory::dims{batch, k, n},
                      shared_b ? memory::dims{rows, n} : memory::dims{batch, m, n}, za != 0);
      a_shape_ = a->shape();
      b_shape_ = b->shape();
      a_type_ = a->dtype();
      with_za_ = za != 0;
    }
    if (!plan_ok_) return Fallback(ctx);
    // B as s8: u8 values and zero point moved down by 128 (exact).
    b_s8_.resize(static_cast<size_t>(b->size()));
    const uint8_t* bb = static_cast<const uint8_t*>(b->raw());
    const uint8_t flip = b->dtype() == pb::kUint8 ? 0x80 : 0;
    for (int64_t i = 0; i < b->size(); ++i) b_s8_[static_cast<size_t>(i)] = static_cast<int8_t>(bb[i] ^ flip);
    if (flip != 0) zb -= 128;
    acc_.resize(static_cast<size_t>(rows * n));
    ONNXKIT_RETURN_IF_ERROR(Guard("int8 activation matmul", [&] {
      memory am(src_, Engine(), const_cast<void*>(a->raw()));
      memory bm(wei_, Engine(), b_s8_.data());
      memory cm(dst_, Engine(), acc_.data());
      std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
      if (za != 0) {
        args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory(memory::desc({1}, dt::s32, tag::a), Engine(), &za);
      }
      primitive_.execute(Stream(), args);
      Stream().wait();
    }));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type, y_shape));
    // One multiplier sa * sb / sy, as the weighted kernels' output scales.
    const float mult = static_cast<float>(static_cast<double>(*sa) * *sb / *sy);
    for (int64_t r = 0; r < rows; ++r) {
      // |zb * sum(a - za)| <= 128 * 255 * kMaxK, and c[j] - shift is the
      // exact sum of products, within int32 by kMaxK.
      const int32_t shift = zb * (RowSum(*a, r * k, k) - static_cast<int32_t>(k) * za);
      const int32_t* c = acc_.data() + r * n;
      if (y_type == pb::kUint8) {
        Requantize(c, shift, mult, static_cast<float>(zy), 0.f, 255.f, relu_, y->mutable_data<uint8_t>() + r * n, n);
      } else {
        Requantize(c, shift, mult, static_cast<float>(zy), -128.f, 127.f, relu_, y->mutable_data<int8_t>() + r * n, n);
      }
    }
    return absl::OkStatus();
  }

 private:
  // |(a - za) * (b - zb)| <= 255 * 255: sums of up to this many fit in int32.
  static constexpr int64_t kMaxK = 32768;

  // y[j] = saturate(round_half_even(max?(c[j] - shift) * mult) + zy).
  template <typename Q>
  static void Requantize(const int32_t* c, int32_t shift, float mult, float zy, float lo, float hi, bool relu, Q* y,
                         int64_t n) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      float q = static_cast<float>(c[j] - shift) * mult;
      q = relu && q < 0 ? 0.f : q;
      float v = __builtin_rintf(q) + zy;
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      y[j] = static_cast<Q>(static_cast<int32_t>(v));
    }
  }

  // The sum of elements [begin, begin + k) of an 8-bit tensor.
  static int32_t RowSum(const Tensor& t, int64_t begin, int64_t k) {
    int32_t sum = 0;
    if (t.dtype() == pb::kUint8) {
      const uint8_t* p = t.data<uint8_t>() + begin;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < k; ++i) sum += p[i];
    } else {
      const int8_t* p = t.data<int8_t>() + begin;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < k; ++i) sum += p[i];
    }
    return sum;
  }

  static bool ZeroPoint(const Tensor* z, int32_t type, int32_t& v) {
    if (z == nullptr) return v = 0, type == pb::kUint8 || type == pb::kInt8;
    if (z->dtype() != type || z->size() != 1 || z->rank() > 1) return false;
    v = Int8Value(*z, 0);
    return true;
  }

  bool Plan(const Tensor& a, const memory::dims& ad, const memory::dims& bd, const memory::dims& cd, bool with_za) {
    plan_ = true;
    const tag t = ad.size() == 2 ? tag::ab : tag::abc;
    return Guard("int8 activation matmul", [&] {
             src_ = memory::desc(ad, *DnnlType(a.dtype()), t);
             wei_ = memory::desc(bd, dt::s8, t);
             dst_ = memory::desc(cd, dt::s32, t);
             dnnl::primitive_attr attr;
             if (with_za) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
             dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_, wei_, dst_), attr, Engine());
             primitive_ = dnnl::matmul(pd);
           })
        .ok();
  }

  int extra_, y_scale_, y_zp_;
  bool relu_;
  bool plan_ = false, plan_ok_ = false, with_za_ = false;
  std::vector<int64_t> a_shape_, b_shape_;
  int32_t a_type_ = 0;
  memory::desc src_, wei_, dst_;
  dnnl::primitive primitive_;
  std::vector<int8_t> b_s8_;
  std::vector<int32_t> acc_;
};

// Runs `probe` (a chain ending in QuantizeLinear, run as `ctx`'s node) with
// the 256 values of `x_type` in ascending order as input `probe_slot`
// (dequantized with `scale` and `zp` first when `dequantize`), the other
// inputs `inputs`; fills `table` (entry v: the result for the source byte
// v ^ flip) and the result type. False when it does not give 256 8-bit
// values.
bool ProbeTable(KernelContext& ctx, Kernel& probe, std::vector<const RtValue*> inputs, int probe_slot, bool dequantize,
                const Tensor* scale, const Tensor* zp, int32_t x_type, uint8_t table[256], int32_t* y_type) {
  absl::StatusOr<Tensor> all = Tensor::AllocateUninitialized(x_type, {256});
  if (!all.ok()) return false;
  for (int v = 0; v < 256; ++v) {
    // Entry v holds the source byte v ^ flip: the values in ascending order.
    int value = x_type == pb::kInt8 ? v - 128 : v;
    static_cast<uint8_t*>(all->mutable_raw())[v] = static_cast<uint8_t>(value);
  }
  if (dequantize) {  // the chain starts after the DequantizeLinear: probe with its result
    std::optional<float> s = ScalarFloat(scale);
    if (!s || (zp != nullptr && zp->dtype() != x_type) || (zp == nullptr && x_type != pb::kUint8)) return false;
    absl::StatusOr<Tensor> floats = Tensor::AllocateUninitialized(pb::kFloat, {256});
    if (!floats.ok()) return false;
    DequantizeByteRow(all->raw(), x_type, floats->mutable_data<float>(), 256, *s, zp != nullptr ? Int8Value(*zp, 0) : 0);
    all = *std::move(floats);
  }
  RtValue values = RtValue::FromTensor(*std::move(all));
  if (probe_slot < 0 || probe_slot >= static_cast<int>(inputs.size())) return false;
  inputs[static_cast<size_t>(probe_slot)] = &values;
  std::vector<RtValue> outputs(static_cast<size_t>(ctx.num_outputs()));
  KernelContext sub(ctx.node(), ctx.opset(), std::move(inputs), &outputs, ctx.subgraphs());
  if (!probe.Run(sub).ok()) return false;
  if (outputs.empty() || !outputs[0].is_tensor()) return false;
  const Tensor& y = outputs[0].tensor();
  if (!IsInt8Type(y.dtype()) || y.size() != 256) return false;
  std::memcpy(table, y.raw(), 256);
  *y_type = y.dtype();
  return true;
}

// True when `table` maps every byte to itself.
bool IdentityTable(const uint8_t table[256], int32_t x_type, int32_t y_type) {
  const int flip = x_type == pb::kInt8 ? 0x80 : 0;
  bool identity = x_type == y_type;
  for (int byte = 0; byte < 256; ++byte) identity = identity && table[byte ^ flip] == byte;
  return identity;
}

// DequantizeLinear -> Relu / Clip / Identity -> MaxPool -> QuantizeLinear
// (runner/fusion.h's pooling chains): the 8-bit source max-pooled by the
// cpu MaxPool kernel, then looked up in the table of the chain without its
// MaxPool. Exact when the table is non-decreasing over the ascending source
// values and QuantizeLinear's scale is positive (checked; else node by
// node): if the maximum float value comes from element i and the largest
// source is element m, then Q(f(x_i)) >= Q(f(x_m)) (Q non-decreasing) and
// table(x_i) <= table(x_m) (x_i <= x_m), so both give the same result.
__attribute__((target("avx2"))) void MaxRow8Avx2(uint8_t* out, const uint8_t* in, int64_t n, bool s8) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + k));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + k));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                        s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b));
  }
  for (; k < n; ++k) {
    out[k] = s8 ? static_cast<uint8_t>(std::max(static_cast<int8_t>(out[k]), static_cast<int8_t>(in[k])))
                : std::max(out[k], in[k]);
  }
}

// out[k] = max(out[k], in[k]) over `n` bytes, signed when `s8`.
void MaxRow8(uint8_t* __restrict out, const uint8_t* __restrict in, int64_t n, bool s8) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return MaxRow8Avx2(out, in, n, s8);
  if (s8) {
    int8_t* __restrict o = reinterpret_cast<int8_t*>(out);
    const int8_t* __restrict v = reinterpret_cast<const int8_t*>(in);
    for (int64_t k = 0; k < n; ++k) o[k] = std::max(o[k], v[k]);
    return;
  }
  for (int64_t k = 0; k < n; ++k) out[k] = std::max(out[k], in[k]);
}

class PoolChainKernel : public CpuKernel {
 public:
  static absl::StatusOr<std::unique_ptr<Kernel>> Make(const FusionChain& chain, const KernelInfo& info,
                                                      std::unique_ptr<Kernel> fallback) {
    auto kernel = std::unique_ptr<PoolChainKernel>(new PoolChainKernel(std::move(fallback)));
    auto probe = std::make_unique<FusionChain>();
    probe->kind = FusionKind::kQuantized;
    for (size_t k = 0; k < chain.nodes.size(); ++k) {
      if (chain.nodes[k]->op_type() == "MaxPool") {
        kernel->pool_ = k;
        continue;
      }
      probe->input_offset.push_back(probe->num_inputs);
      kernel->source_offset_.push_back(chain.input_offset[k]);
      probe->nodes.push_back(chain.nodes[k]);
      probe->chained_input.push_back(probe->nodes.size() == 1 ? -1 : 0);
      probe->num_inputs += chain.nodes[k]->num_inputs();
    }
    kernel->bypass_ = !chain.bypass.empty();
    kernel->nhwc_in_ = chain.nhwc_in;
    kernel->nhwc_out_ = chain.nhwc_out;
    kernel->x_slot_ = kernel->bypass_ ? chain.num_inputs : 0;
    if ((kernel->pool_ == 0) != kernel->bypass_ || probe->nodes.size() + 1 != chain.nodes.size())
      return absl::InternalError("a quantized pooling chain without one MaxPool");
    const ir::Node& pool = *chain.nodes[kernel->pool_];
    ONNXKIT_ASSIGN_OR_RETURN(const KernelEntry* entry, FindKernel(Backend::kCpu, pool.domain(), pool.op_type(), info.opset));
    ONNXKIT_ASSIGN_OR_RETURN(kernel->pool_kernel_, entry->factory(pool, info));
    ONNXKIT_ASSIGN_OR_RETURN(kernel->probe_, MakeChainKernel(*probe, Backend::kCpu, info, /*counted=*/false));
    kernel->pool_node_ = &pool;
    kernel->q_offset_ = chain.input_offset.back();
    ONNXKIT_ASSIGN_OR_RETURN(kernel->attrs_, reference::ParseWindowAttrs(pool));
    kernel->probe_chain_ = std::move(probe);
    return std::unique_ptr<Kernel>(std::move(kernel));
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* x = OptionalTensor(ctx, x_slot_);
    if (x == nullptr || !IsInt8Type(x->dtype()) || x->rank() < 3) return PlainFallback(ctx);
    if ((nhwc_in_ || nhwc_out_) && x->rank() != 4)
      return absl::InternalError("a channels-last quantized value is not 4-D");
    if (x->dtype() != x_type_) {
      x_type_ = x->dtype();
      ok_ = BuildTable(ctx);
    }
    if (!ok_) return PlainFallback(ctx);
    const std::vector<int64_t> logical = nhwc_in_ ? LogicalShape(x->shape()) : x->shape();
    if (logical != shape_) {
      shape_ = logical;
      windows_ok_ = EveryWindowHoldsAnElement();
    }
    if (!windows_ok_) return PlainFallback(ctx);
    if (nhwc_in_ || nhwc_out_) return RunChannelsLast(ctx, *x);
    std::vector<RtValue> pooled(static_cast<size_t>(pool_node_->num_outputs()));
    KernelContext sub(*pool_node_, ctx.opset(), {ctx.Value(x_slot_)}, &pooled, ctx.subgraphs());
    ONNXKIT_RETURN_IF_ERROR(pool_kernel_->Run(sub));
    if (pooled.empty() || !pooled[0].is_tensor() || pooled[0].tensor().dtype() != x_type_)
      return absl::InternalError("8-bit max pooling changed the element type");
    if (identity_) return ctx.SetOutput(0, std::move(pooled[0]));
    const Tensor& p = pooled[0].tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type_, p.shape()));
    Lookup(static_cast<const uint8_t*>(p.raw()), static_cast<uint8_t*>(y->mutable_raw()), p.size(), table_,
           x_type_ == pb::kInt8 ? 0x80 : 0);
    return absl::OkStatus();
  }

 private:
  explicit PoolChainKernel(std::unique_ptr<Kernel> fallback) : CpuKernel(std::move(fallback)) {}

  absl::Status PlainFallback(KernelContext& ctx) {
    if (!nhwc_in_ && !nhwc_out_) return Fallback(ctx);
    return RunPlain(ctx, nhwc_in_ ? std::vector<int>{x_slot_} : std::vector<int>{}, nhwc_out_,
                    [this](KernelContext& sub) { return Fallback(sub); });
  }

  // 2-D max pooling of channels-last 8-bit values (a plain source or
  // result changes layout on the way), each output row of C bytes the
  // maximum of the rows its window reads, then looked up in the table.
  absl::Status RunChannelsLast(KernelContext& ctx, const Tensor& x) {
    const int64_t n = shape_[0], c = shape_[1], h = shape_[2], w = shape_[3];
    absl::StatusOr<reference::Window> win =
        reference::ResolveWindow(attrs_, std::span<const int64_t>(shape_.data() + 2, 2), attrs_.kernel_shape);
    if (!win.ok()) return PlainFallback(ctx);
    const int64_t oh = win->out[0], ow = win->out[1];
    const uint8_t* src = static_cast<const uint8_t*>(x.raw());
    std::vector<uint8_t> staged;
    if (!nhwc_in_) {  // the source to channels-last first
      staged.resize(static_cast<size_t>(x.size()));
      Transpose8(src, staged.data(), n, c, h * w, /*to_nhwc=*/true);
      src = staged.data();
    }
    const std::vector<int64_t> out_logical = {n, c, oh, ow};
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(
                                             0, y_type_, nhwc_out_ ? StoredShape(out_logical) : out_logical));
    std::vector<uint8_t> pooled;
    uint8_t* dst = static_cast<uint8_t*>(y->mutable_raw());
    if (!nhwc_out_) {
      pooled.resize(static_cast<size_t>(y->size()));
      dst = pooled.data();
    }
    const bool s8 = x_type_ == pb::kInt8;
    ParallelFor(n * oh, n * oh * ow * c > (1 << 16), [&](int64_t row) {
      const int64_t b = row / oh, i = row % oh;
      for (int64_t j = 0; j < ow; ++j) {
        uint8_t* out = dst + ((b * oh + i) * ow + j) * c;
        bool first = true;
        for (int64_t ki = 0; ki < win->kernel[0]; ++ki) {
          const int64_t yi = i * win->strides[0] - win->pad_begin[0] + ki * win->dilations[0];
          if (yi < 0 || yi >= h) continue;
          for (int64_t kj = 0; kj < win->kernel[1]; ++kj) {
            const int64_t xj = j * win->strides[1] - win->pad_begin[1] + kj * win->dilations[1];
            if (xj < 0 || xj >= w) continue;
            const uint8_t* in = src + ((b * h + yi) * w + xj) * c;
            if (first) {
              std::memcpy(out, in, static_cast<size_t>(c));
              first = false;
            } else {
              MaxRow8(out, in, c, s8);
            }
          }
        }
        if (!identity_) Lookup(out, out, c, table_, s8 ? 0x80 : 0);
      }
    });
    if (!nhwc_out_) {
      Transpose8(dst, static_cast<uint8_t*>(y->mutable_raw()), n, c, oh * ow, /*to_nhwc=*/false);
    }
    return absl::OkStatus();
  }

  bool BuildTable(KernelContext& ctx) {
    std::vector<const RtValue*> inputs;
    for (size_t k = 0; k < probe_chain_->nodes.size(); ++k) {
      for (int j = 0; j < probe_chain_->nodes[k]->num_inputs(); ++j) {
        const RtValue* v = ctx.Value(source_offset_[k] + j);
        const Tensor* t = v != nullptr && v->is_tensor() ? &v->tensor() : nullptr;
        // (The probe's slot: the source, or after a bypassed
        // DequantizeLinear the QuantizeLinear's input.)
        if (!(k == 0 && j == 0) && t != nullptr && (t->size() != 1 || t->rank() > 1)) return false;
        // Finite bounds and scales (a NaN bound would not commute with the maximum).
        if (t != nullptr && t->dtype() == pb::kFloat && t->size() == 1 && !std::isfinite(t->data<float>()[0]))
          return false;
        inputs.push_back(v);
      }
    }
    const Tensor* scale = bypass_ ? OptionalTensor(ctx, x_slot_ + 1) : nullptr;
    const Tensor* zp = bypass_ ? OptionalTensor(ctx, x_slot_ + 2) : nullptr;
    if (!ProbeTable(ctx, *probe_, std::move(inputs), 0, bypass_, scale, zp, x_type_, table_, &y_type_)) return false;
    identity_ = IdentityTable(table_, x_type_, y_type_);
    // QuantizeLinear non-decreasing (a positive scale), and the table
    // non-decreasing over the ascending source values (entry v).
    std::optional<float> y_scale = ScalarFloat(OptionalTensor(ctx, q_offset_ + 1));
    if (!y_scale || !(*y_scale > 0)) return false;
    for (int v = 0; v + 1 < 256; ++v) {
      const int a = y_type_ == pb::kInt8 ? static_cast<int8_t>(table_[v]) : table_[v];
      const int b = y_type_ == pb::kInt8 ? static_cast<int8_t>(table_[v + 1]) : table_[v + 1];
      if (a > b) return false;
    }
    return true;
  }

  // True when every output window of the pooling reads at least one
  // element of `x` (an empty window gives -inf in float, which no table
  // entry stands for).
  bool EveryWindowHoldsAnElement() const {
    std::vector<int64_t> spatial(shape_.begin() + 2, shape_.end());
    absl::StatusOr<reference::Window> w = reference::ResolveWindow(attrs_, spatial, attrs_.kernel_shape);
    if (!w.ok()) return false;
    for (size_t d = 0; d < spatial.size(); ++d) {
      for (int64_t o = 0; o < w->out[d]; ++o) {
        bool reads = false;
        for (int64_t k = 0; k < w->kernel[d] && !reads; ++k) {
          const int64_t i = o * w->strides[d] - w->pad_begin[d] + k * w->dilations[d];
          reads = i >= 0 && i < w->in[d];
        }
        if (!reads) return false;
      }
    }
    return true;
  }

  size_t pool_ = 0;
  bool nhwc_in_ = false, nhwc_out_ = false;
  bool bypass_ = false;  // the DequantizeLinear is outside the chain: the source is an extra input
  int x_slot_ = 0;
  const ir::Node* pool_node_ = nullptr;
  reference::WindowAttrs attrs_;
  std::vector<int64_t> shape_;
  bool windows_ok_ = false;
  std::unique_ptr<FusionChain> probe_chain_;  // outlives probe_ (declared first), which refers to it
  std::unique_ptr<Kernel> pool_kernel_, probe_;
  std::vector<int> source_offset_;            // per probe node: its first input in the fused kernel
  int q_offset_ = 0;                          // the QuantizeLinear's first input
  int32_t x_type_ = 0, y_type_ = 0;
  bool ok_ = false, identity_ = false;
  uint8_t table_[256] = {};
};

// Sum of `n` bytes, each XORed with `flip` first (signed bytes counted
// from -128: the caller subtracts 128 per byte).
__attribute__((target("avx2"))) int64_t SumBytesAvx2(const uint8_t* p, int64_t n, uint8_t flip) {
  const __m256i f = _mm256_set1_epi8(static_cast<char>(flip)), zero = _mm256_setzero_si256();
  __m256i acc = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), f);
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(v, zero));
  }
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  int64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) sum += p[i] ^ flip;
  return sum;
}

int64_t SumBytes(const uint8_t* p, int64_t n, uint8_t flip) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return SumBytesAvx2(p, n, flip);
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i] ^ flip;
  return sum;
}

// acc[k] += in[k] ^ flip over a row of `n` bytes.
__attribute__((target("avx2"))) void AddBytesAvx2(int32_t* acc, const uint8_t* in, int64_t n, uint8_t flip) {
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)), f);
    __m256i* lo = reinterpret_cast<__m256i*>(acc + k);
    __m256i* hi = reinterpret_cast<__m256i*>(acc + k + 8);
    _mm256_storeu_si256(lo, _mm256_add_epi32(_mm256_loadu_si256(lo), _mm256_cvtepu8_epi32(v)));
    _mm256_storeu_si256(hi,
                        _mm256_add_epi32(_mm256_loadu_si256(hi), _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))));
  }
  for (; k < n; ++k) acc[k] += in[k] ^ flip;
}

void AddBytes(int32_t* acc, const uint8_t* in, int64_t n, uint8_t flip) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return AddBytesAvx2(acc, in, n, flip);
  for (int64_t k = 0; k < n; ++k) acc[k] += in[k] ^ flip;
}

// GlobalAveragePool of a dequantized 8-bit tensor, then QuantizeLinear: the
// 8-bit values of each channel summed exactly, the mean dequantized in
// double, then quantized with the reference's arithmetic. The reference
// sums float32 products, so a mean within a float rounding of a tie may go
// the other way: one step. A channels-last source sums rows of C bytes; the
// result [N, C, 1, 1] has the same bytes in either layout.
class GlobalAveragePoolKernel : public CpuKernel {
 public:
  GlobalAveragePoolKernel(const FusionChain& chain, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        x_slot_(chain.num_inputs),
        q_offset_(chain.input_offset.back()),
        nhwc_in_(chain.nhwc_in),
        nhwc_out_(chain.nhwc_out) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* x = OptionalTensor(ctx, x_slot_);
    if (x == nullptr || !IsInt8Type(x->dtype()) || x->rank() < 3) return PlainFallback(ctx);
    if ((nhwc_in_ || nhwc_out_) && x->rank() != 4)
      return absl::InternalError("a channels-last quantized value is not 4-D");
    std::optional<float> xs = ScalarFloat(OptionalTensor(ctx, x_slot_ + 1));
    std::optional<float> ys = ScalarFloat(OptionalTensor(ctx, q_offset_ + 1));
    const Tensor* xz = OptionalTensor(ctx, x_slot_ + 2);
    const Tensor* yz = OptionalTensor(ctx, q_offset_ + 2);
    auto zero_point = [](const Tensor* z, int32_t type, int32_t& v) {
      if (z == nullptr) return v = 0, type == pb::kUint8;
      if (z->dtype() != type || z->size() != 1 || z->rank() > 1) return false;
      v = Int8Value(*z, 0);
      return true;
    };
    int32_t zx = 0, zy = 0;
    const int32_t y_type = yz != nullptr ? yz->dtype() : pb::kUint8;
    if (!xs || !ys || !zero_point(xz, x->dtype(), zx) || !IsInt8Type(y_type) || !zero_point(yz, y_type, zy))
      return PlainFallback(ctx);
    const std::vector<int64_t> logical = nhwc_in_ ? LogicalShape(x->shape()) : x->shape();
    const int64_t n = logical[0], c = logical[1];
    const int64_t spatial = n * c == 0 ? 0 : x->size() / (n * c);
    // int32 row sums: at most 2^23 bytes of 255 each.
    if (spatial == 0 || spatial > (int64_t{1} << 23)) return PlainFallback(ctx);
    std::vector<int64_t> out_logical(logical.size(), 1);
    out_logical[0] = n;
    out_logical[1] = c;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(
                                             0, y_type, nhwc_out_ ? StoredShape(out_logical) : out_logical));
    const uint8_t flip = x->dtype() == pb::kInt8 ? 0x80 : 0;
    const int32_t offset = x->dtype() == pb::kInt8 ? 128 : 0;  // the flipped bytes count from -128
    const uint8_t* in = static_cast<const uint8_t*>(x->raw());
    std::vector<float> means(static_cast<size_t>(n * c));
    ParallelFor(n, x->size() > (1 << 18), [&](int64_t b) {
      std::vector<int64_t> sums(static_cast<size_t>(c));
      const uint8_t* src = in + b * c * spatial;
      if (nhwc_in_) {
        std::vector<int32_t> acc(static_cast<size_t>(c), 0);
        for (int64_t p = 0; p < spatial; ++p) AddBytes(acc.data(), src + p * c, c, flip);
        for (int64_t k = 0; k < c; ++k) sums[static_cast<size_t>(k)] = acc[static_cast<size_t>(k)];
      } else {
        for (int64_t k = 0; k < c; ++k)
          sums[static_cast<size_t>(k)] = SumBytes(src + k * spatial, spatial, flip);
      }
      for (int64_t k = 0; k < c; ++k) {
        const double q =
            static_cast<double>(sums[static_cast<size_t>(k)]) / static_cast<double>(spatial) - offset;
        means[static_cast<size_t>(b * c + k)] = static_cast<float>((q - zx) * static_cast<double>(*xs));
      }
    });
    QuantizeFloatRow(means.data(), y->mutable_raw(), y_type, n * c, *ys, zy);
    return absl::OkStatus();
  }

 private:
  absl::Status PlainFallback(KernelContext& ctx) {
    if (!nhwc_in_ && !nhwc_out_) return Fallback(ctx);
    return RunPlain(ctx, nhwc_in_ ? std::vector<int>{x_slot_} : std::vector<int>{}, nhwc_out_,
                    [this](KernelContext& sub) { return Fallback(sub); });
  }

  int x_slot_, q_offset_;
  bool nhwc_in_, nhwc_out_;
};

// Concat of dequantized 8-bit tensors, then QuantizeLinear: each input
// requantized by a 256-entry table computed with the reference's
// DequantizeLinear and QuantizeLinear arithmetic (so exact; the identity,
// a plain copy, when its parameters are the output's), written at its
// offset along the axis.
class ConcatChainKernel : public CpuKernel {
 public:
  ConcatChainKernel(const FusionChain& chain, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        n_(chain.nodes.front()->num_inputs()),
        axis_(chain.nodes.front()->GetInt("axis").value_or(0)),
        nhwc_(chain.nhwc_in),
        extra_(chain.num_inputs),
        q_offset_(chain.input_offset.back()) {}

  absl::Status Run(KernelContext& ctx) override {
    std::optional<float> ys = ScalarFloat(OptionalTensor(ctx, q_offset_ + 1));
    const Tensor* y_zp = OptionalTensor(ctx, q_offset_ + 2);
    if (!ys || !(*ys > 0) || !std::isfinite(*ys) ||
        (y_zp != nullptr && (!IsInt8Type(y_zp->dtype()) || y_zp->size() != 1 || y_zp->rank() > 1))) {
      return PlainFallback(ctx);
    }
    const int32_t y_type = y_zp != nullptr ? y_zp->dtype() : pb::kUint8;
    const int32_t zy = y_zp != nullptr ? Int8Value(*y_zp, 0) : 0;
    std::vector<const Tensor*> x(static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      x[static_cast<size_t>(i)] = OptionalTensor(ctx, extra_ + 3 * i);
      if (x[static_cast<size_t>(i)] == nullptr || !IsInt8Type(x[static_cast<size_t>(i)]->dtype())) return PlainFallback(ctx);
    }
    const int rank = x[0]->rank();
    int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (rank < 1 || axis < 0 || axis >= rank) return PlainFallback(ctx);
    if (nhwc_) {  // stored [N, H, W, C]: the logical axis's place
      if (rank != 4) return absl::InternalError("a channels-last quantized value is not 4-D");
      static constexpr int64_t kStored[4] = {0, 3, 1, 2};
      axis = kStored[axis];
    }
    std::vector<int64_t> y_shape = x[0]->shape();
    y_shape[static_cast<size_t>(axis)] = 0;
    for (const Tensor* t : x) {
      if (t->rank() != rank) return PlainFallback(ctx);
      for (int d = 0; d < rank; ++d) {
        if (d != axis && t->dim(d) != x[0]->dim(d)) return PlainFallback(ctx);
      }
      y_shape[static_cast<size_t>(axis)] += t->dim(static_cast<int>(axis));
    }
    // One table per input (rebuilt when a type changes; the parameters are constant).
    if (tables_.size() != static_cast<size_t>(n_)) tables_.assign(static_cast<size_t>(n_), Table());
    for (int i = 0; i < n_; ++i) {
      Table& t = tables_[static_cast<size_t>(i)];
      if (t.x_type != x[static_cast<size_t>(i)]->dtype() || t.y_type != y_type) {
        t.x_type = x[static_cast<size_t>(i)]->dtype();
        t.y_type = y_type;
        t.ok = BuildTable(ctx, i, *ys, zy, t);
      }
      if (!t.ok) return PlainFallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type, y_shape));
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= y_shape[static_cast<size_t>(d)];
    const int64_t row = y->size() / std::max<int64_t>(outer, 1);
    uint8_t* out = static_cast<uint8_t*>(y->mutable_raw());
    int64_t offset = 0;
    for (int i = 0; i < n_; ++i) {
      const Tensor& t = *x[static_cast<size_t>(i)];
      const Table& table = tables_[static_cast<size_t>(i)];
      const int64_t part = outer > 0 ? t.size() / outer : 0;
      const uint8_t* in = static_cast<const uint8_t*>(t.raw());
      const uint8_t flip = t.dtype() == pb::kInt8 ? 0x80 : 0;
      for (int64_t o = 0; o < outer && part > 0; ++o) {
        if (table.identity) {
          std::memcpy(out + o * row + offset, in + o * part, static_cast<size_t>(part));
        } else {
          Lookup(in + o * part, out + o * row + offset, part, table.entries, flip);
        }
      }
      offset += part;
    }
    return absl::OkStatus();
  }

 private:
  struct Table {
    int32_t x_type = 0, y_type = 0;
    bool ok = false, identity = false;
    uint8_t entries[256] = {};
  };

  // The node-by-node run, on plain copies of channels-last inputs.
  absl::Status PlainFallback(KernelContext& ctx) {
    if (!nhwc_) return Fallback(ctx);
    std::vector<int> sources;
    for (int i = 0; i < n_; ++i) sources.push_back(extra_ + 3 * i);
    return RunPlain(ctx, sources, true, [this](KernelContext& sub) { return Fallback(sub); });
  }

  // Entry v: QuantizeLinear(DequantizeLinear(the source byte v ^ flip)).
  bool BuildTable(KernelContext& ctx, int i, float ys, int32_t zy, Table& t) {
    std::optional<float> xs = ScalarFloat(OptionalTensor(ctx, extra_ + 3 * i + 1));
    const Tensor* zp = OptionalTensor(ctx, extra_ + 3 * i + 2);
    if (!xs || (zp != nullptr && (zp->dtype() != t.x_type || zp->size() != 1 || zp->rank() > 1)) ||
        (zp == nullptr && t.x_type != pb::kUint8)) {
      return false;
    }
    uint8_t bytes[256];
    for (int v = 0; v < 256; ++v) bytes[v] = static_cast<uint8_t>(t.x_type == pb::kInt8 ? v - 128 : v);
    float values[256];
    DequantizeByteRow(bytes, t.x_type, values, 256, *xs, zp != nullptr ? Int8Value(*zp, 0) : 0);
    QuantizeFloatRow(values, t.entries, t.y_type, 256, ys, zy);
    t.identity = IdentityTable(t.entries, t.x_type, t.y_type);
    return true;
  }

  int n_;
  int64_t axis_;
  bool nhwc_;  // every input and the result channels-last (PlanQuantizedLayouts)
  int extra_, q_offset_;
  std::vector<Table> tables_;
};

// DequantizeLinear -> elementwise ops -> QuantizeLinear as a table over the
// 256 source values, computed once by running the chain on all of them
// (the chain's nodes after a bypassed DequantizeLinear on their dequantized
// values).
class TableKernel : public CpuKernel {
 public:
  TableKernel(const FusionChain& chain, std::unique_ptr<Kernel> probe, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        probe_(std::move(probe)),
        q_offset_(chain.input_offset.back()),
        x_slot_(chain.bypass.empty() ? 0 : chain.num_inputs),
        probe_slot_(chain.bypass.empty() ? 0 : chain.bypass[0].slot),
        nhwc_in_(chain.nhwc_in),
        nhwc_out_(chain.nhwc_out) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* x = OptionalTensor(ctx, x_slot_);
    // (A one-element constant of rank 1 would make a scalar's result 1-D.)
    if (x == nullptr || !IsInt8Type(x->dtype()) || x->rank() == 0) return PlainFallback(ctx);
    if (x->dtype() != x_type_) {
      x_type_ = x->dtype();
      ok_ = BuildTable(ctx);
    }
    if (!ok_) return PlainFallback(ctx);
    // An identity table (a Relu after a result quantized from zero, a Clip
    // within the grid's range): the result is the source.
    if (identity_ && nhwc_in_ == nhwc_out_) return ctx.SetOutput(0, *ctx.Value(x_slot_));
    const uint8_t* in = static_cast<const uint8_t*>(x->raw());
    const uint8_t* table = table_;
    const uint8_t flip = x_type_ == pb::kInt8 ? 0x80 : 0;  // s8 bytes index from -128
    if (nhwc_in_ != nhwc_out_) {  // the lookup and the change of layout in one pass
      if (x->rank() != 4) return absl::InternalError("a channels-last quantized value is not 4-D");
      const std::vector<int64_t> logical = nhwc_in_ ? LogicalShape(x->shape()) : x->shape();
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(
                                               0, y_type_, nhwc_out_ ? StoredShape(logical) : logical));
      Transpose8(in, static_cast<uint8_t*>(y->mutable_raw()), logical[0], logical[1], logical[2] * logical[3],
                 nhwc_out_, table, flip);
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type_, x->shape()));
    uint8_t* out = static_cast<uint8_t*>(y->mutable_raw());
    const int64_t n = x->size();
    constexpr int64_t kChunk = int64_t{1} << 16;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    ParallelFor(chunks, n > (1 << 18), [&](int64_t c) {
      const int64_t begin = c * kChunk;
      Lookup(in + begin, out + begin, std::min(kChunk, n - begin), table, flip);
    });
    return absl::OkStatus();
  }

 private:
  bool BuildTable(KernelContext& ctx) {
    // Per-tensor parameters and one-element constants only (a table per
    // channel is not worth it; a longer constant would broadcast).
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = OptionalTensor(ctx, i);
      if (i != x_slot_ && i != probe_slot_ && t != nullptr && (t->size() != 1 || t->rank() > 1)) return false;
    }
    std::vector<const RtValue*> inputs;
    for (int i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.Value(i));
    const Tensor* scale = x_slot_ != 0 ? OptionalTensor(ctx, x_slot_ + 1) : nullptr;
    const Tensor* zp = x_slot_ != 0 ? OptionalTensor(ctx, x_slot_ + 2) : nullptr;
    if (!ProbeTable(ctx, *probe_, std::move(inputs), probe_slot_, x_slot_ != 0, scale, zp, x_type_, table_, &y_type_))
      return false;
    identity_ = IdentityTable(table_, x_type_, y_type_);
    return true;
  }

  absl::Status PlainFallback(KernelContext& ctx) {
    if (!nhwc_in_ && !nhwc_out_) return Fallback(ctx);
    return RunPlain(ctx, nhwc_in_ ? std::vector<int>{x_slot_} : std::vector<int>{}, nhwc_out_,
                    [this](KernelContext& sub) { return Fallback(sub); });
  }

  std::unique_ptr<Kernel> probe_;
  int q_offset_;
  int x_slot_;      // the quantized source
  int probe_slot_;  // where the probe's 256 values go: the source, or the bypassed DequantizeLinear's result
  bool nhwc_in_, nhwc_out_;
  int32_t x_type_ = 0, y_type_ = 0;
  bool ok_ = false;
  bool identity_ = false;
  uint8_t table_[256] = {};
};

// Add / Sub / Mul / Div of dequantized values (per tensor) or float
// constants, then QuantizeLinear, in one pass over chunks: each operand
// dequantized into a float row, the op in float, the result quantized. The
// same float operations as the node-by-node run: exact. The smaller operand
// may broadcast over the leading dims of the larger (a bias, a scalar).
class BinaryKernel : public CpuKernel {
 public:
  enum class Op { kAdd, kSub, kMul, kDiv };

  BinaryKernel(Op op, int extra, int q_offset, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), op_(op), extra_(extra), q_offset_(q_offset) {}

  absl::Status Run(KernelContext& ctx) override {
    Operand a, b;
    std::optional<float> ys = ScalarFloat(OptionalTensor(ctx, q_offset_ + 1));
    const Tensor* y_zp = OptionalTensor(ctx, q_offset_ + 2);
    if (!Resolve(ctx, 0, a) || !Resolve(ctx, 1, b) || !ys ||
        (y_zp != nullptr && (!IsInt8Type(y_zp->dtype()) || y_zp->size() != 1 || y_zp->rank() > 1))) {
      return Fallback(ctx);
    }
    const int32_t y_type = y_zp != nullptr ? y_zp->dtype() : pb::kUint8;
    const int32_t zy = y_zp != nullptr ? Int8Value(*y_zp, 0) : 0;
    if (a.quantized && b.quantized && a.t->dtype() == y_type && b.t->dtype() == y_type &&
        a.t->shape() == b.t->shape()) {  // one fused pass
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type, a.t->shape()));
      const uint8_t* pa = static_cast<const uint8_t*>(a.t->raw());
      const uint8_t* pb = static_cast<const uint8_t*>(b.t->raw());
      uint8_t* py = static_cast<uint8_t*>(y->mutable_raw());
      const int64_t total = a.t->size(), chunks = (total + kFusedChunk - 1) / kFusedChunk;
      ParallelFor(chunks, total > (1 << 18), [&](int64_t c) {
        const int64_t begin = c * kFusedChunk, n = std::min(kFusedChunk, total - begin);
        BinaryByteRow(static_cast<int>(op_), pa + begin, pb + begin, py + begin, y_type, n, a.scale, a.zp, b.scale,
                      b.zp, *ys, zy);
      });
      return absl::OkStatus();
    }
    const Operand& big = a.t->size() >= b.t->size() ? a : b;
    const Operand& small = a.t->size() >= b.t->size() ? b : a;
    if (!SuffixOf(small.t->shape(), big.t->shape()) || big.t->size() == 0) return Fallback(ctx);
    if (big.quantized && big.t->dtype() == y_type) return RunMixed(ctx, a, b, *ys, y_type, zy);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type, big.t->shape()));
    // Rows of the smaller operand's size (one row when it is a scalar), in
    // chunks of at most kChunk elements.
    const bool scalar = small.t->size() == 1 && big.t->size() > 1;
    const int64_t total = big.t->size(), period = scalar ? total : small.t->size();
    const int64_t per_row = (period + kChunk - 1) / kChunk, chunks = total / period * per_row;
    uint8_t* out = static_cast<uint8_t*>(y->mutable_raw());
    ParallelFor(chunks, total > (1 << 18), [&](int64_t c) {
      float fa[kChunk], fb[kChunk];
      const int64_t within = c % per_row * kChunk, begin = c / per_row * period + within;
      const int64_t n = std::min(kChunk, period - within);
      const bool a_scalar = scalar && a.t != big.t, b_scalar = scalar && b.t != big.t;
      const float* pa = Row(a, a.t == big.t ? begin : a_scalar ? 0 : within, a_scalar ? 1 : n, fa);
      const float* pb = Row(b, b.t == big.t ? begin : b_scalar ? 0 : within, b_scalar ? 1 : n, fb);
      Apply(pa, pb, a_scalar, b_scalar, fa, n);
      QuantizeFloatRow(fa, out + begin, y_type, n, *ys, zy);
    });
    return absl::OkStatus();
  }

 private:
  static constexpr int64_t kChunk = 1024;
  static constexpr int64_t kFusedChunk = 1 << 14;

  struct Operand {
    const Tensor* t = nullptr;  // quantized data or the float constant
    bool quantized = false;
    float scale = 1;
    int32_t zp = 0;
  };

  // The larger operand quantized (of the result's type), the smaller one a
  // float constant or dequantized once: one pass per row of the smaller
  // operand's size (a scalar repeated into a row).
  absl::Status RunMixed(KernelContext& ctx, const Operand& a, const Operand& b, float ys, int32_t y_type,
                        int32_t zy) {
    const bool q_first = a.t->size() >= b.t->size();
    const Operand& big = q_first ? a : b;
    const Operand& small = q_first ? b : a;
    const int64_t total = big.t->size();
    const int64_t period = small.t->size() == 1 ? std::min<int64_t>(total, kFusedChunk) : small.t->size();
    std::vector<float> row(static_cast<size_t>(period));
    if (small.t->size() == 1) {
      const float v = small.quantized ? static_cast<float>(Int8Value(*small.t, 0) - small.zp) * small.scale
                                      : small.t->data<float>()[0];
      std::fill(row.begin(), row.end(), v);
    } else if (small.quantized) {
      DequantizeByteRow(small.t->raw(), small.t->dtype(), row.data(), period, small.scale, small.zp);
    } else {
      std::copy(small.t->data<float>(), small.t->data<float>() + period, row.begin());
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, y_type, big.t->shape()));
    const uint8_t* q = static_cast<const uint8_t*>(big.t->raw());
    uint8_t* out = static_cast<uint8_t*>(y->mutable_raw());
    const int64_t per_row = (period + kFusedChunk - 1) / kFusedChunk;
    const int64_t chunks = (total + period - 1) / period * per_row;
    const float* f = row.data();
    ParallelFor(chunks, total > (1 << 18), [&](int64_t c) {
      const int64_t within = c % per_row * kFusedChunk, begin = c / per_row * period + within;
      const int64_t n = std::min({kFusedChunk, period - within, total - begin});
      if (n <= 0) return;
      BinaryByteFloatRow(static_cast<int>(op_), q_first, q + begin, f + within, out + begin, y_type, n, big.scale,
                         big.zp, ys, zy);
    });
    return absl::OkStatus();
  }

  bool Resolve(KernelContext& ctx, int i, Operand& o) {
    const Tensor* q = OptionalTensor(ctx, extra_ + 3 * i);
    if (q == nullptr) {  // a float constant
      o.t = OptionalTensor(ctx, i);
      return o.t != nullptr && o.t->dtype() == pb::kFloat;
    }
    const Tensor* zp = OptionalTensor(ctx, extra_ + 3 * i + 2);
    std::optional<float> scale = ScalarFloat(OptionalTensor(ctx, extra_ + 3 * i + 1));
    if (!IsInt8Type(q->dtype()) || !scale) return false;
    if (zp != nullptr && (zp->dtype() != q->dtype() || zp->size() != 1 || zp->rank() > 1)) return false;
    o = {q, true, *scale, zp != nullptr ? Int8Value(*zp, 0) : 0};
    return true;
  }

  // True when `small` (leading 1s dropped) is a suffix of `big`'s shape.
  static bool SuffixOf(const std::vector<int64_t>& small, const std::vector<int64_t>& big) {
    size_t first = 0;
    while (first < small.size() && small[first] == 1) ++first;
    const size_t n = small.size() - first;
    if (n > big.size()) return false;
    if (small.size() > big.size()) return false;  // would raise the result's rank
    return std::equal(small.begin() + static_cast<std::ptrdiff_t>(first), small.end(), big.end() - static_cast<std::ptrdiff_t>(n));
  }

  // Elements [begin, begin + n) of an operand as floats (in `buffer` when
  // dequantized).
  static const float* Row(const Operand& o, int64_t begin, int64_t n, float* buffer) {
    if (!o.quantized) return o.t->data<float>() + begin;
    DequantizeByteRow(static_cast<const uint8_t*>(o.t->raw()) + begin, o.t->dtype(), buffer, n, o.scale, o.zp);
    return buffer;
  }

  // out = a op b, a scalar operand repeated.
  void Apply(const float* a, const float* b, bool a_scalar, bool b_scalar, float* out, int64_t n) const {
    const float sa = a[0], sb = b[0];
    switch (op_) {
      case Op::kAdd: Loop(a, b, a_scalar, b_scalar, sa, sb, out, n, [](float x, float y) { return x + y; }); break;
      case Op::kSub: Loop(a, b, a_scalar, b_scalar, sa, sb, out, n, [](float x, float y) { return x - y; }); break;
      case Op::kMul: Loop(a, b, a_scalar, b_scalar, sa, sb, out, n, [](float x, float y) { return x * y; }); break;
      case Op::kDiv: Loop(a, b, a_scalar, b_scalar, sa, sb, out, n, [](float x, float y) { return x / y; }); break;
    }
  }

  template <typename F>
  static void Loop(const float* a, const float* b, bool a_scalar, bool b_scalar, float sa, float sb, float* out,
                   int64_t n, F f) {
    if (a_scalar) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(sa, b[i]);
    } else if (b_scalar) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], sb);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    }
  }

  Op op_;
  int extra_, q_offset_;
};

// DequantizeLinear -> data movement op -> QuantizeLinear with the same
// (per-tensor) scale and zero point on both sides: the op on the quantized
// tensor. Exact: for 8-bit q, ((q - zp) * s) / s rounds back to q - zp.
class MovementKernel : public CpuKernel {
 public:
  MovementKernel(const FusionChain& chain, std::unique_ptr<Kernel> op, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)),
        op_node_(*chain.nodes[1]),
        op_(std::move(op)),
        op_offset_(chain.input_offset[1]),
        q_offset_(chain.input_offset[2]) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* x = OptionalTensor(ctx, 0);
    if (x == nullptr || !IsInt8Type(x->dtype()) || !SameParameters(ctx, x->dtype())) return Fallback(ctx);
    std::vector<const RtValue*> inputs = {ctx.Value(0)};
    for (int j = 1; j < op_node_.num_inputs(); ++j) inputs.push_back(ctx.Value(op_offset_ + j));
    std::vector<RtValue> outputs(static_cast<size_t>(op_node_.num_outputs()));
    KernelContext sub(op_node_, ctx.opset(), std::move(inputs), &outputs, ctx.subgraphs());
    ONNXKIT_RETURN_IF_ERROR(op_->Run(sub));
    if (outputs.empty() || !outputs[0].is_tensor() || outputs[0].tensor().dtype() != x->dtype())
      return absl::InternalError("a quantized data movement op changed the element type");
    return ctx.SetOutput(0, std::move(outputs[0]));
  }

 private:
  bool SameParameters(KernelContext& ctx, int32_t type) {
    std::optional<float> s1 = ScalarFloat(OptionalTensor(ctx, 1)), s2 = ScalarFloat(OptionalTensor(ctx, q_offset_ + 1));
    if (!s1 || !s2 || *s1 != *s2 || !(*s1 >= 1e-30f) || !std::isfinite(*s1)) return false;
    const Tensor* z1 = OptionalTensor(ctx, 2);
    const Tensor* z2 = OptionalTensor(ctx, q_offset_ + 2);
    auto zero_point = [&](const Tensor* z, int32_t& v) {
      if (z == nullptr) return v = 0, type == pb::kUint8;
      if (z->dtype() != type || z->size() != 1 || z->rank() > 1) return false;
      v = Int8Value(*z, 0);
      return true;
    };
    int32_t v1 = 0, v2 = 0;
    return zero_point(z1, v1) && zero_point(z2, v2) && v1 == v2;
  }

  const ir::Node& op_node_;
  std::unique_ptr<Kernel> op_;
  int op_offset_, q_offset_;
};

}  // namespace

bool QuantizedChainsRunInt8() { return ExactProducts(); }

absl::StatusOr<std::unique_ptr<Kernel>> MakeQuantizedChain(const FusionChain& chain, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeBypassFallback(chain, Backend::kCpu, info));
  const std::string& head = chain.head().op_type();
  if (head == "Concat") return std::unique_ptr<Kernel>(new ConcatChainKernel(chain, std::move(fallback)));
  if (head == "GlobalAveragePool")
    return std::unique_ptr<Kernel>(new GlobalAveragePoolKernel(chain, std::move(fallback)));
  if ((head == "Add" || head == "Sub" || head == "Mul" || head == "Div") && chain.extra_inputs.size() == 6) {
    const BinaryKernel::Op op = head == "Add"   ? BinaryKernel::Op::kAdd
                                : head == "Sub" ? BinaryKernel::Op::kSub
                                : head == "Mul" ? BinaryKernel::Op::kMul
                                                : BinaryKernel::Op::kDiv;
    return std::unique_ptr<Kernel>(
        new BinaryKernel(op, chain.num_inputs, chain.input_offset.back(), std::move(fallback)));
  }
  if (chain.nodes.size() == 3 && head == "DequantizeLinear" && IsQuantizedMovementOp(*chain.nodes[1])) {
    const ir::Node& node = *chain.nodes[1];
    ONNXKIT_ASSIGN_OR_RETURN(const KernelEntry* entry,
                             FindKernel(Backend::kCpu, node.domain(), node.op_type(), info.opset));
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> op, entry->factory(node, info));
    return std::unique_ptr<Kernel>(new MovementKernel(chain, std::move(op), std::move(fallback)));
  }
  for (const ir::Node* n : chain.nodes) {
    if (n->op_type() == "MaxPool") return PoolChainKernel::Make(chain, info, std::move(fallback));
  }
  if (chain.extra_inputs.size() != kQuantizedExtras) {
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> probe,
                             MakeChainKernel(chain, Backend::kCpu, info, /*counted=*/false));
    return std::unique_ptr<Kernel>(new TableKernel(chain, std::move(probe), std::move(fallback)));
  }
  WeightedLayout layout;
  layout.extra = chain.num_inputs;
  const ir::Node* op = nullptr;
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const ir::Node& node = *chain.nodes[k];
    const int offset = chain.input_offset[k];
    if (node.op_type() == "Conv" || node.op_type() == "MatMul" || node.op_type() == "Gemm") {
      op = &node;
      if (node.num_inputs() > 2 && node.input(2) != nullptr && !node.input(2)->name().empty())
        layout.bias = offset + 2;
    } else if (node.op_type() == "Relu") {
      layout.relu = true;
    } else if (node.op_type() == "QuantizeLinear") {
      layout.y_scale = offset + 1;
      if (node.num_inputs() > 2 && node.input(2) != nullptr && !node.input(2)->name().empty())
        layout.y_zp = offset + 2;
    }
  }
  if (op == nullptr) return absl::InternalError("a quantized chain has no Conv, MatMul or Gemm");
  const ir::Node* dq_w = op->input(1)->producer();
  for (const FusionChain::Bypass& by : chain.bypass) {
    if (by.dequantize == dq_w && op->op_type() == "MatMul") {  // two activations
      return std::unique_ptr<Kernel>(
          new ActivationMatMulKernel(layout.extra, layout.y_scale, layout.y_zp, layout.relu, std::move(fallback)));
    }
  }
  layout.w_axis = dq_w != nullptr ? dq_w->GetInt("axis").value_or(1) : 1;
  if (op->op_type() == "Conv") {
    ONNXKIT_ASSIGN_OR_RETURN(reference::WindowAttrs attrs, reference::ParseWindowAttrs(*op));
    attrs.ceil_mode = false;
    auto kernel = std::make_unique<QuantizedConvKernel>(layout, std::move(attrs), reference::AttrInt(*op, "group", 1),
                                                        std::move(fallback));
    kernel->SetLayouts(chain.nhwc_in, chain.nhwc_out);
    return std::unique_ptr<Kernel>(std::move(kernel));
  }
  const bool gemm = op->op_type() == "Gemm";
  if (gemm && op->GetInt("transA").value_or(0) != 0) {
    return fallback;  // A transposed: not worth a plan of its own
  }
  return std::unique_ptr<Kernel>(new QuantizedMatMulKernel(layout, gemm, gemm && op->GetInt("transB").value_or(0) != 0,
                                                           gemm ? op->GetFloat("alpha").value_or(1.0f) : 1.0f,
                                                           gemm ? op->GetFloat("beta").value_or(1.0f) : 1.0f,
                                                           std::move(fallback)));
}

}  // namespace onnxkit::runner::cpu
