// Pieces shared by the cpu convolution kernels (conv.cc) and the Conv
// sequences (conv_sequence.cc): oneDNN convolution descriptors, per-thread
// scratch buffers, the description of what a fused chain (runner/fusion.h)
// applies after a convolution, and the post-op pass, which keeps NaN.
//
// Only runner/cpu/*.cc include this header (dnnl.hpp is heavy).
#ifndef ONNXKIT_RUNNER_CPU_CONV_COMMON_H_
#define ONNXKIT_RUNNER_CPU_CONV_COMMON_H_

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/kernel.h"
#include "runner/reference/nn.h"
#include "runner/tensor.h"

namespace onnxkit::runner::cpu {

// Pointwise convolutions with at least this many output positions per
// image run on plain tensors.
constexpr int64_t kPlainPointwiseMinPositions = 100;
// But a lone one that widens the channels, with at least this many
// weights, on an image of at most kBlockedPointwiseMaxPositions runs
// channel-blocked: oneDNN's blocked 1x1 kernel beat its GEMM one there,
// the transposes in and out included (SqueezeNet's 512-to-1000 classifier
// at 13x13: 0.68 ms against 0.72, 1 thread, 0.36 against 0.38 on 2;
// MobileNet's 320-to-1280 at 7x7 by 0-3 %), where narrowing ones (576 to
// 64 or 96 at 14x14) lost 3-10 % and any on 28x28 or more up to 2 x.
constexpr int64_t kBlockedPointwiseMinWeights = 96 * 1024;
constexpr int64_t kBlockedPointwiseMaxPositions = 14 * 14;

// What a kernel's plans are cached under: the element type and shape of
// each of its inputs (type 0, no dims: omitted).
using InputKey = std::vector<std::pair<int32_t, std::vector<int64_t>>>;
// Brings `key` up to date with the inputs of `ctx`, allocating nothing when
// they did not change: 1 when it changed, 0 when not, -1 when an input
// cannot be read.
int UpdateInputKey(KernelContext& ctx, InputKey& key);

// Each value less one (ONNX dilations to oneDNN's).
dnnl::memory::dims Minus1(const std::vector<int64_t>& v);
// The channel-blocked (16) layout of activations of `rank` 3..5.
dnnl::memory::format_tag Blocked16Tag(int rank);
// The channels-last layout of activations of `rank` 3..5.
dnnl::memory::format_tag ChannelsLastTag(int rank);
// True when oneDNN picked its generic reference implementation.
bool IsReference(const dnnl::primitive_desc_base& pd);
// Weights dims of oneDNN: [O, I, k...] or, grouped, [G, O/G, I/G, k...].
dnnl::memory::dims WeightDims(int64_t group, int64_t out_c, int64_t in_c, const std::vector<int64_t>& kernel);
// An inference convolution of X (`x_shape`) into Y (`y_shape`) over the
// window `win`: source and destination in layout `tag` (the destination in
// `dst_tag` unless undef), weights in the layout oneDNN picks; direct
// convolution unless `algorithm` says otherwise. Throws dnnl::error: call
// inside Guard.
dnnl::convolution_forward::desc ConvDesc(
    const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape, const dnnl::memory::dims& wdims,
    const dnnl::memory::desc& bias, const reference::Window& win, dnnl::memory::data_type xt,
    dnnl::memory::data_type wt, dnnl::memory::data_type yt, dnnl::memory::format_tag tag,
    dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct,
    dnnl::memory::format_tag dst_tag = dnnl::memory::format_tag::undef);

// A 64-byte aligned buffer of at least `bytes` owned by the calling thread,
// for activations reordered in and out of a primitive's layout or passed
// between the convolutions of a sequence. Slots 0 .. kScratchSlots - 1 are
// distinct buffers; each keeps its largest size across calls, and its
// contents are only valid until the next call for the same slot. The
// buffers are tensor buffers: they count against the memory limit. Null when
// the allocation fails or would pass the limit.
constexpr int kScratchSlots = 6;
void* ThreadScratch(int slot, size_t bytes);
// A kernel's input read in another layout, shared with the kernels that
// read it after it in the same run (the branches of an Inception block
// reordering one tensor for their convolutions each): the copy of `value`
// (a tensor, read from its plain layout) in layout `desc` that an earlier
// kernel kept with it, or null.
const void* FindLayoutCopy(const RtValue* value, const dnnl::memory::desc& desc);
// Where a kernel keeps the copies it makes of an input for the run's later
// readers, while they use them: a buffer for the copy of `value` in layout
// `desc`, kept with the value (FindLayoutCopy), that the caller fills at
// once; null when no later reader found the copy kept in an earlier run
// (those readers read other layouts: the copy would only hold memory), or
// when it cannot be allocated. The caller then reorders into its scratch.
class LayoutCopyKeeper {
 public:
  void* Keep(const RtValue* value, const dnnl::memory::desc& desc);

 private:
  bool useless_ = false;
  std::shared_ptr<bool> last_found_;  // whether the last kept copy was found
};

// memcpy(dst, src, bytes), split among the threads in equal runs of whole
// cache lines where it is large enough to be worth waking them.
void CopyAmongThreads(void* dst, const void* src, size_t bytes);

// What follows a Conv in a fused chain (runner/fusion.h), as indices into
// the fused kernel's inputs.
struct ConvChainSpec {
  // Per-channel affine nodes folded into the weights and bias, in order: a
  // BatchNormalization (scale, B, mean and var are inputs input .. input +
  // 3), or a Mul / Add by a constant (input `input`) that varies only along
  // the channels.
  struct LinearOp {
    enum class Kind { kBatchNorm, kMul, kAdd } kind = Kind::kBatchNorm;
    int input = -1;
    double epsilon = 1e-5;
  };
  std::vector<LinearOp> linear;
  struct PostOp {
    bool sum = false;  // a residual Add (input `residual`), else an activation
    dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
    float alpha = 0, beta = 0;
    int lo_input = -1, hi_input = -1;  // Clip's bound inputs (opset 11+)
    int residual = -1;
    // In a sequence: the residual is the result of this earlier stage
    // (runner/fusion.h's inner_input), not an input.
    int residual_stage = -1;
  };
  std::vector<PostOp> ops;
};

// A post-op with its parameters read (Clip's bounds) for one plan.
struct ResolvedPostOp {
  bool sum = false;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
};

// The largest |x[i]| of n floats, or infinity when x holds NaN or an
// infinity (a parallel pass).
double MaxAbs(const float* x, int64_t n);
// MaxAbs of n bfloat16 values (their bits).
double MaxAbsBf16(const uint16_t* x, int64_t n);
// MaxAbs of input `i` of `ctx` (a float32 tensor), kept with the value for
// the run's later readers (the branches of an Inception block bounding
// their sequences by the same input) and taken from there.
double InputMaxAbs(const KernelContext& ctx, int i, const Tensor& t);
// True when no element of float tensor t is NaN or infinite.
inline bool AllFinite(const Tensor& t) { return MaxAbs(t.data<float>(), t.size()) <= FLT_MAX; }

// y = ops(y) in order over n floats: relu with slope alpha, clip to
// [alpha, beta], swish (y * sigmoid(y), runner/cpu/vector_math.h's
// sigmoid), hardswish (in double, as the reference), or + residual (same layout as y). NaN stays NaN, as in
// the reference kernels.
void ApplyPostOpsTo(float* y, const float* residual, int64_t n, const ResolvedPostOp* ops, size_t num_ops);
// The same in parallel chunks.
void ApplyPostOps(float* y, const float* residual, int64_t n, const std::vector<ResolvedPostOp>& ops);
void ApplyPostOps(Tensor& y, const Tensor* residual, const std::vector<ResolvedPostOp>& ops);

// True when `ops` hold an activation. oneDNN 2.6's jit activations (relu
// and clip as vmaxps / vminps against the bound) turn NaN into the bound,
// where ONNX keeps NaN: activations that may meet NaN run in ApplyPostOps.
bool HasActivation(const std::vector<ResolvedPostOp>& ops);
// True when `ops` hold a swish. oneDNN 2.6's jit swish (an exponential and a
// division per value inside the convolution's inner loop) costs more than
// the convolution itself on wide, shallow layers: ApplyPostOps' is faster.
bool HasSwish(const std::vector<ResolvedPostOp>& ops);
// True when every activation of `ops` maps 0 to 0 (so the zero padding of a
// blocked layout stays zero when ApplyPostOps runs over it).
bool KeepsZero(const std::vector<ResolvedPostOp>& ops);

// The geometry of a float convolution of X (`x_shape`) by w (and bias b);
// nullopt when w, b and the group do not fit X or the window is empty (the
// reference kernel then reports the error).
struct ConvGeometry {
  std::vector<int64_t> kernel;  // spatial kernel dims
  reference::Window window;
  std::vector<int64_t> y_shape;
};
std::optional<ConvGeometry> ResolveConv(const std::vector<int64_t>& x_shape, const Tensor& w, const Tensor* b,
                                        int64_t group, const reference::WindowAttrs& attrs);

// The per-channel map y = x * scale[o] + shift[o] of the linear nodes of
// `spec` applied, in order, to a value of rank `rank` with `m` channels
// (scale and shift come in as the map so far). False when a parameter is not
// per channel or not float.
bool ChannelAffine(KernelContext& ctx, const ConvChainSpec& spec, int rank, int64_t m,
                   std::vector<double>& scale, std::vector<double>& shift);
// Folds the linear nodes of `spec` (after a convolution with weights w and
// bias b, output rank `rank`) into folded_w / folded_b, accumulated in
// double. False when a parameter is not per channel or not float.
bool FoldLinearInto(KernelContext& ctx, const ConvChainSpec& spec, int rank, const Tensor& w, const Tensor* b,
                    Tensor* folded_w, Tensor* folded_b);
// Reads the post-ops of `spec` for one plan (Clip's bounds); false when a
// bound or the residual is not what a fused kernel can take.
bool ResolveChainPostOps(KernelContext& ctx, const ConvChainSpec& spec, const std::vector<int64_t>& y_shape,
                         std::vector<ResolvedPostOp>* resolved);
// The post-ops as oneDNN's. Throws dnnl::error: call inside Guard.
dnnl::post_ops DnnlPostOps(const std::vector<ResolvedPostOp>& ops);

// One convolution of a sequence: its node's inputs start at `base` of the
// fused kernel's inputs; the chain nodes after it until the next Conv are
// its post-ops.
// Squeeze-and-excitation after a stage's post-ops (runner/fusion.h): its
// result x scaled per channel by gate(W2 act(W1 mean(x) + b1) + b2), W1 and
// W2 1x1 convolutions read from inputs w1, w2 (biases b1, b2; -1: none).
struct SqueezeExcite {
  enum class Act { kRelu, kSwish, kHardSwish };
  int w1 = -1, b1 = -1, w2 = -1, b2 = -1;
  Act act = Act::kRelu;
  // The gate: Sigmoid, or HardSigmoid with alpha and beta.
  bool hard_gate = false;
  float alpha = 0.2f, beta = 0.5f;
};

struct SequenceStage {
  // The stage whose result this stage's Conv reads (a projection block's
  // first Conv reads the block's input, the shortcut having run between);
  // -1: the previous stage's (X for the first).
  int source = -1;
  // Or X, the sequence's input (a projection block at its head).
  bool reads_x = false;
  int base = 0;
  int node_inputs = 0;
  int64_t group = 1;
  reference::WindowAttrs attrs;
  ConvChainSpec spec;
  // A channel shuffle of the stage's source (runner/fusion.h): the inputs
  // holding the shapes of its Reshape to [N, G, C/G, H, W] and of its
  // Reshape back; -1: none.
  int shuffle_shape = -1, shuffle_back = -1;
  // Squeeze-and-excitation of the stage's result (never the last stage's).
  std::optional<SqueezeExcite> se;
  // A pooled join (never on the last stage; sequences running
  // channels-last): the stage's result is the Concat along the channels of
  // the convolution's result and an AveragePool of an earlier stage's result
  // (`source`) or of X (`reads_x`: ShuffleNet's stride-2 units); the
  // post-ops from `ops_from` on follow the Concat and apply to both parts.
  struct PoolJoin {
    reference::WindowAttrs attrs;
    bool count_include_pad = false;
    int source = -1;
    bool reads_x = false;
    size_t ops_from = 0;
  };
  std::optional<PoolJoin> join;
};

// conv_sequence.cc: a kernel running several Convs in a row (each taking
// the previous one's result, after its post-ops, as X) with constant
// weights, then, with `pool`, a MaxPool (its attributes) over the last
// result, or with `global_pool` (and `pool` set) a GlobalAveragePool;
// `fallback` runs the chain node by node. `bf16`: the convolutions compute
// in bfloat16 where oneDNN has a kernel (KernelInfo::bf16).
std::unique_ptr<Kernel> MakeConvSequence(std::vector<SequenceStage> stages, std::unique_ptr<Kernel> fallback,
                                         std::optional<reference::WindowAttrs> pool = std::nullopt,
                                         bool bf16 = false, bool global_pool = false);

// conv_sequence.cc: a kernel running Conv branches (one stage each) that
// read the same X and a Concat of their results along the channels (axis
// `axis`), each branch writing its channels of the result directly (batch
// 1); branch order[i] makes the Concat's input i. `fallback` runs the chain
// node by node.
// With `pool`, a MaxPool of the Concat's result follows: each branch pools
// its own channels.
std::unique_ptr<Kernel> MakeConvConcat(std::vector<SequenceStage> branches, std::vector<int> order,
                                       int64_t axis, std::unique_ptr<Kernel> fallback,
                                       std::optional<reference::WindowAttrs> pool = std::nullopt,
                                       bool bf16 = false);

// conv_shuffle.cc: the 4-D strided `desc` ([N, C, H, W], no blocking) as
// [N, C/G, G, H, W] (G = `groups`): with `source`, element (n, i, j) is
// channel j * C/G + i (the value a channel shuffle reads); else channel
// i * G + j (the value it writes). nullopt when `desc` is blocked or not 4-D.
std::optional<dnnl::memory::desc> ChannelView(const dnnl::memory::desc& desc, int64_t groups, bool source);
// Checks the shapes of `stage`'s channel shuffle (0 and -1 resolved as
// Reshape does) against its source (`x_shape`, held as `current`) and sets
// `from`, the view the shuffle reads.
bool ShuffleViews(KernelContext& ctx, const SequenceStage& stage, const std::vector<int64_t>& x_shape,
                  const dnnl::memory::desc& current, dnnl::memory::desc* from);

// conv_shuffle.cc: true when `desc` is a dense float32 [N, C, H, W] stored
// channels-last.
bool DenseChannelsLast(const dnnl::memory::desc& desc);
// conv_shuffle.cc: true when ShuffleChannelsLast can shuffle `from` (the
// source of a channel shuffle in `groups` groups) into `to` (both dense
// float [N, C, H, W] channels-last, G 2 or 4, AVX-512 present).
bool OwnShuffle(const dnnl::memory::desc& from, const dnnl::memory::desc& to, int64_t groups);
// Y[n, i * G + j, h, w] = X[n, j * C/G + i, h, w] over `desc` (as OwnShuffle
// accepted), pixels split among the threads for large tensors.
void ShuffleChannelsLast(const dnnl::memory::desc& desc, int64_t groups, const float* x, float* y);

// conv_shuffle.cc: true when TransposeChannels can reorder `from` into `to`
// quicker than oneDNN: dense float32 [N, C, H, W] of the same dims, one
// plain and the other channels-last or in 16-channel blocks whose last one
// is padded past the channels (with `blocks`, also blocks the channels
// fill), AVX-512 present. Into blocks the padding is written as zeros.
bool OwnTranspose(const dnnl::memory::desc& from, const dnnl::memory::desc& to, bool blocks = false);
// x (of `from`) into y (of `to`), as OwnTranspose accepted: matrix
// transposes in 16 x 16 tiles, 16-row strips split among the threads for
// large tensors. An error for other layouts.
absl::Status TransposeChannels(const dnnl::memory::desc& from, const dnnl::memory::desc& to, const float* x,
                               float* y);
// The same, true when x holds NaN or -inf (oneDNN's max pooling would skip
// NaN and start from the lowest finite float).
absl::StatusOr<bool> TransposeChannelsFindingNaN(const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                                 const float* x, float* y);

// pool.cc: GlobalAveragePool of `planes` planes of n floats at x into y
// (each plane summed in float in index order and divided by n, as the
// reference does), in parallel where there is enough work.
void GlobalMeans(const float* x, int64_t planes, int64_t n, float* y);

// pool.cc: the window of a pooling over spatial dims `in` resolved as the
// reference kernels do, with the end padding oneDNN needs (ceil_mode as
// extra end padding) in `pad_end`; nullopt when some output window reads
// no input element or oneDNN's output size would differ.
std::optional<reference::Window> DnnlPoolWindow(const reference::WindowAttrs& attrs,
                                                const std::vector<int64_t>& in,
                                                const std::vector<int64_t>& kernel, dnnl::memory::dims* pad_end);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_CONV_COMMON_H_
