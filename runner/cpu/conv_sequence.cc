// Conv sequences: a chain of several Convs (runner/fusion.h), each taking
// the previous one's result (after its post-ops) as X, run as one kernel.
// The values between them stay in the layouts oneDNN picks (channel-blocked
// or channels-last), so only the first source and the last result are
// reordered. Weights must be constant. Cases oneDNN does not cover run the
// chain node by node. A residual taken from inside the sequence (a ResNet
// block's input, runner/fusion.h's inner_input) stays in its stage's
// layout until the stage that adds it.
//
// NaN: oneDNN's relu and clip post-ops turn NaN into the bound. Each run
// first bounds every value the sequence will compute from the largest
// magnitude of X and of the residuals and from the weights (|conv| <=
// max|x| * max_o sum|w_o| + max|b|, activations and sums composed in
// order). When the bound stays far below the float range, no value can be
// NaN or infinite, and the activations run as oneDNN post-ops (the fast
// plan); otherwise (NaN or infinities in the inputs, or values that could
// overflow) they run in ApplyPostOps, which keeps NaN (the safe plan, built
// on first need). The scan reads X and the residuals only, not the larger
// values inside the sequence.
//
// Channel shuffles: a stage may read its source shuffled (runner/fusion.h).
// Such sequences run channels-last throughout, and the shuffle is the
// stage's source reorder, between strided 5-D views of the previous result
// and of the stage's source; the Reshapes' shapes (0 and -1 resolved as
// Reshape does) must be [N, G, C/G, H, W] and [N, C, H, W] of that result,
// else the chain runs node by node.
//
// Pooled joins: a stage (not the last) of a channels-last sequence may
// join an AveragePool of an earlier result, or of X, to its convolution's
// result along the channels (ShuffleNet's stride-2 units, runner/fusion.h):
// oneDNN's average pooling over that source (reordered channels-last
// float32 first where it is not: X, a bfloat16 result), the post-ops after the Concat applied to the pooled
// values in ApplyPostOps (NaN kept in either plan), then one pass writing both parts per pixel. Its bound is
// the larger of the convolution's and the source's (a mean is at most the largest value) after those
// post-ops.
//
// MaxPool: a chain may end with a MaxPool (runner/fusion.h). In the fast
// plan it runs as oneDNN's max pooling over the last convolution's result
// in that result's layout, so only the pooled (smaller) value is reordered
// to plain; on bounded values no NaN or infinity can occur, and the maximum
// is exact. oneDNN's max pooling skips NaN, so where the fast plan does not
// apply the chain runs node by node.
//
// GlobalAveragePool: a chain may end with one instead. It runs as oneDNN's
// average pooling (one window over the image) in the last result's layout,
// so only the means are reordered to plain; where the last stage's post-ops
// run in ApplyPostOps (the safe plan, or a SiLU) the sequence's plain
// result goes to a scratch tensor and its means (GlobalMeans, the
// reference's sums) make the kernel's result. A mean keeps NaN and
// infinities, so both plans apply.
//
// Squeeze-and-excitation: a stage (never the last) may end with one
// (runner/fusion.h). Its result is scaled in place, in the layout oneDNN
// gave it, before the next stage reads it: per channel, the mean in float
// in index order (GlobalAveragePool's sums), two 1x1 convolutions in double
// with their activation and gate as the reference computes them, then the
// product. NaN and infinities pass as through the nodes one by one, in
// either plan; the bound takes the gate as within [0, 1] when the squeezed
// values are bounded, else the safe plan runs.
//
// Swish: runs after the convolution in ApplyPostOps (SwishRow) in both
// plans, faster than oneDNN's post-op; before a squeeze-and-excitation it
// runs inside the channel sums, a block of channels at a time.
//
// Winograd: in the fast plan, 3x3 stride-1 convolutions over images of at
// least kWinogradMinPositions run as oneDNN's Winograd F(2x2, 3x3) (about
// half the multiplications), the sequence then channel-blocked throughout.
// Its transforms add and subtract neighbouring values, so a NaN or an
// infinity would spread to, or cancel into NaN at, outputs the direct
// convolution keeps finite or infinite: it runs only on bounded inputs, its
// stage's bound taken kWinogradGrowth times larger (the transforms grow a
// value by at most 4 * 2.25 * 9 = 81 times). The safe plan convolves
// directly.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/conv_common.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/threads.h"
#include "runner/cpu/vector_math.h"

namespace onnxkit::runner::cpu {
namespace {

using dnnl::memory;
using reference::Window;
using reference::WindowAttrs;

// Bounds below this keep every partial sum far from the float range (the
// rounding of a float sum grows it by far less than the factor left).
constexpr double kSafeBound = FLT_MAX / 16;
constexpr double kWinogradGrowth = 128;
std::atomic<int64_t> g_winograd_runs{0};
std::atomic<int64_t> g_strided_channels_last_runs{0};
std::atomic<int64_t> g_in_place_sums{0};
std::atomic<int64_t> g_measured_stages{0};
// Smaller images gain nothing from Winograd (ResNet-50's 14x14 stage lost a
// little to the blocked layout it imposes); Inception's 28x28 and 56x56 gain.
constexpr int64_t kWinogradMinPositions = 28 * 28;
// A Conv branch joined by a Concat (one stage) has its reorders in and out
// whatever its layout: SqueezeNet's 13x13 fire modules ran about 5% faster
// with their 3x3 expand convolutions as Winograd.
constexpr int64_t kBranchWinogradMinPositions = 13 * 13;
// Wide convolutions gain on small images too: ResNet-50's 3x3 stages of
// 256 channels at 14x14 and 512 at 7x7 ran about 9 % faster in all as
// Winograd (1 thread), where Inception-v2's of 128 to 224 channels at 14x14
// and 7x7 lost about 3 %.
constexpr int64_t kWinogradWideMinChannels = 256;
constexpr int64_t kWinogradWideMinPositions = 7 * 7;
// On two threads or more oneDNN's Winograd kernel scales worse than its
// direct one on small images (1.3-1.5 x from 1 to 2 threads on
// Inception-v2's 192-to-256-channel 14x14 convolution, 1.7-2.0 x direct):
// there a wide convolution needs as many input channels too (ResNet-50's
// 256 and 512 do; GoogLeNet's 128-to-256 and 160-to-320 ran 6 % faster in
// all directly on two threads, 3 % slower on one).
constexpr int64_t kWinogradWideMinInputChannelsThreaded = 256;
// Narrow outputs gain nothing either: DenseNet-121's 3x3 convolutions (32
// output channels) ran about 10 % slower as Winograd.
constexpr int64_t kWinogradMinOutputChannels = 64;
std::atomic<int64_t> g_winograd_min_output_channels{kWinogradMinOutputChannels};

// True when stage `s` may run as a Winograd convolution of weights `w`
// producing `y_shape`: 2-D, 3x3, group 1, stride and dilation 1.
// In bfloat16 sequences a stage competes with a bfloat16 direct
// convolution (about twice as fast as a float32 one), which beat float32
// Winograd on 64 channels at 56x56 and 28x28 and lost to it from 128
// channels at 28x28, and on 64 channels at 224x224 (1 thread, AVX512_BF16):
// it needs twice the channels, or an image of at least this many positions.
constexpr int64_t kBf16WinogradMinPositions = 112 * 112;

bool WinogradCandidate(const SequenceStage& s, const Tensor& w, const std::vector<int64_t>& y_shape,
                       const Window& win, int64_t min_positions, bool bf16) {
  if (s.group != 1 || w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3 || y_shape.size() != 4) return false;
  for (int64_t v : win.strides) {
    if (v != 1) return false;
  }
  for (int64_t v : win.dilations) {
    if (v != 1) return false;
  }
  const int64_t min_channels = g_winograd_min_output_channels.load(std::memory_order_relaxed);
  const int64_t positions = y_shape[2] * y_shape[3];
  if (bf16 && (AmxSupported() || (w.dim(0) < 2 * min_channels && positions < kBf16WinogradMinPositions)))
    return false;
  const bool wide_input = omp_get_max_threads() < 2 || w.dim(1) >= kWinogradWideMinInputChannelsThreaded;
  if (w.dim(0) >= kWinogradWideMinChannels && wide_input && positions >= kWinogradWideMinPositions)
    return true;
  return w.dim(0) >= min_channels && positions >= min_positions;
}

// Narrowing pointwise convolutions that start a sequence run on plain
// tensors from this many output positions (oneDNN 2.6's GEMM convolution
// matches its blocked one from 28x28 images on; on 14x14 ones it is about
// 10 % slower).
constexpr int64_t kNarrowingMinPositions = 28 * 28;

// The layouts of a stage's result that squeeze-and-excitation reads and
// scales in place: plain, channels-last, or channels in blocks of 8 or 16
// (the last block padded with zeros).
enum class SeLayout { kPlain, kChannelsLast, kBlocked };

// The layout of the float desc `d` (rank 3 to 5) and its channel block, or
// nullopt.
std::optional<std::pair<SeLayout, int64_t>> SeLayoutOf(const memory::desc& d) {
  using tag = memory::format_tag;
  const int rank = d.data.ndims;
  if (d.data_type() != memory::data_type::f32 || rank < 3 || rank > 5) return std::nullopt;
  const tag blocked8 = rank == 3 ? tag::nCw8c : rank == 4 ? tag::nChw8c : tag::nCdhw8c;
  const memory::dims dims = d.dims();
  for (auto [t, layout, block] : {std::tuple{PlainTag(rank), SeLayout::kPlain, int64_t{1}},
                                  std::tuple{ChannelsLastTag(rank), SeLayout::kChannelsLast, int64_t{1}},
                                  std::tuple{Blocked16Tag(rank), SeLayout::kBlocked, int64_t{16}},
                                  std::tuple{blocked8, SeLayout::kBlocked, int64_t{8}}}) {
    if (d == memory::desc(dims, memory::data_type::f32, t)) return std::make_pair(layout, block);
  }
  return std::nullopt;
}

// Images of at least this many values have their channel sums and scaling
// split over the threads (by channel or block of channels: each sum keeps
// its order); channels-last ones run on the calling thread.
constexpr int64_t kSeParallelElements = int64_t{1} << 16;

// The reference's sigmoid and clamp to [0, 1], in double.
double SeSigmoid(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}
double SeClamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

// out[o] = b[o] + sum_i w[o, i] in[i] for a 1x1 convolution of `in` (ni
// values), each output summed in double (in vector lanes) and rounded to
// float once.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SeConv(const float* w, const float* b,
                                                                         const float* in, int64_t no,
                                                                         int64_t ni, float* out) {
  for (int64_t o = 0; o < no; ++o) {
    const float* row = w + o * ni;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < ni; ++i) acc += static_cast<double>(row[i]) * static_cast<double>(in[i]);
    out[o] = static_cast<float>(acc + (b != nullptr ? b[o] : 0.0));
  }
}

// The sums over hw positions of one block of B channels (x holds
// position p's B values at p * B), each in float in index order, into
// acc[0 .. B - 1]. B is a constant so that the sums stay in a register.
template <int B>
inline void BlockSums(const float* x, int64_t hw, float* acc) {
  float sum[B] = {};
  for (int64_t p = 0; p < hw; ++p) {
#pragma omp simd
    for (int j = 0; j < B; ++j) sum[j] += x[p * B + j];
  }
  for (int j = 0; j < B; ++j) acc[j] = sum[j];
}

// x[p * B + j] *= g[j] over hw positions.
template <int B>
inline void ScaleBlocks(float* x, int64_t hw, const float* g) {
  float gate[B];
  for (int j = 0; j < B; ++j) gate[j] = g[j];
  for (int64_t p = 0; p < hw; ++p) {
#pragma omp simd
    for (int j = 0; j < B; ++j) x[p * B + j] *= gate[j];
  }
}

// Squeeze-and-excitation of image x (c channels of hw positions, in
// `layout` with channel blocks of `block` (at most 16); any spatial rank)
// in place, as the nodes compute it one by one: each channel's
// mean summed in float in index order (GlobalAveragePool), the two 1x1
// convolutions in double, the activation and the gate in double rounded to
// float (a written-out Mul of two floats in float), then x times the gate.
// NaN and infinities pass as through those nodes. `swish_first`: the
// stage's swish (SwishRow) is applied to each channel or block of channels
// just before its sum, while it is in cache (not in channels-last layout).
// `scratch` holds 2 * c + squeezed floats.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SqueezeExciteImage(
    float* x, SeLayout layout, int64_t block, int64_t c, int64_t hw, const SqueezeExcite& se,
    const Tensor& w1, const Tensor* b1, const Tensor& w2, const Tensor* b2, bool swish_first,
    float* scratch) {
  const int64_t squeezed = w1.dim(0);
  float* mean = scratch;
  float* gate = scratch + c;
  float* hidden = scratch + 2 * c;
  std::fill_n(mean, c, 0.0f);
  if (layout == SeLayout::kPlain) {
    ParallelFor(c, c > 1 && c * hw >= kSeParallelElements, [&](int64_t ch) {
      if (swish_first) SwishRow(x + ch * hw, hw);
      float acc = 0;
      for (int64_t p = 0; p < hw; ++p) acc += x[ch * hw + p];
      mean[ch] = acc;
    });
  } else if (layout == SeLayout::kChannelsLast) {
    for (int64_t p = 0; p < hw; ++p) {
#pragma omp simd
      for (int64_t ch = 0; ch < c; ++ch) mean[ch] += x[p * c + ch];
    }
  } else {
    const int64_t blocks = (c + block - 1) / block;
    ParallelFor(blocks, blocks > 1 && c * hw >= kSeParallelElements, [&](int64_t b) {
      const int64_t first = b * block;
      float acc[16] = {};
      float* xb = x + first * hw;
      if (swish_first) SwishRow(xb, hw * block);
      if (block == 16) {
        BlockSums<16>(xb, hw, acc);
      } else {
        BlockSums<8>(xb, hw, acc);
      }
      for (int64_t j = 0; j < block && first + j < c; ++j) mean[first + j] = acc[j];
    });
  }
  const float count = static_cast<float>(hw);
  for (int64_t ch = 0; ch < c; ++ch) mean[ch] /= count;
  SeConv(w1.data<float>(), b1 != nullptr ? b1->data<float>() : nullptr, mean, squeezed, c, hidden);
  for (int64_t r = 0; r < squeezed; ++r) {
    const float z = hidden[r];
    switch (se.act) {
      case SqueezeExcite::Act::kRelu:
        hidden[r] = z < 0 ? 0.0f : z;
        break;
      case SqueezeExcite::Act::kSwish:
        hidden[r] = z * static_cast<float>(SeSigmoid(z));
        break;
      case SqueezeExcite::Act::kHardSwish:
        hidden[r] = static_cast<float>(z * SeClamp01(static_cast<double>(z) / 6 + 0.5));
        break;
    }
  }
  SeConv(w2.data<float>(), b2 != nullptr ? b2->data<float>() : nullptr, hidden, c, squeezed, gate);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double z = gate[ch];
    gate[ch] = static_cast<float>(se.hard_gate ? SeClamp01(static_cast<double>(se.alpha) * z + se.beta)
                                               : SeSigmoid(z));
  }
  if (layout == SeLayout::kPlain) {
    ParallelFor(c, c > 1 && c * hw >= kSeParallelElements, [&](int64_t ch) {
      const float g = gate[ch];
#pragma omp simd
      for (int64_t p = 0; p < hw; ++p) x[ch * hw + p] *= g;
    });
  } else if (layout == SeLayout::kChannelsLast) {
    for (int64_t p = 0; p < hw; ++p) {
#pragma omp simd
      for (int64_t ch = 0; ch < c; ++ch) x[p * c + ch] *= gate[ch];
    }
  } else {
    const int64_t blocks = (c + block - 1) / block;
    ParallelFor(blocks, blocks > 1 && c * hw >= kSeParallelElements, [&](int64_t b) {
      const int64_t first = b * block;
      float g[16] = {};  // the padding channels stay zero: times 0 is 0 there
      for (int64_t j = 0; j < block && first + j < c; ++j) g[j] = gate[first + j];
      float* xb = x + first * hw;
      if (block == 16) {
        ScaleBlocks<16>(xb, hw, g);
      } else {
        ScaleBlocks<8>(xb, hw, g);
      }
    });
  }
}

// A stage planned for one set of input shapes, in one mode.
struct StagePlan {
  std::vector<ResolvedPostOp> resolved;
  std::vector<int64_t> y_shape;
  memory::desc src, dst, wei, wei_user, bias;
  dnnl::primitive primitive;
  dnnl::reorder src_in;       // from the previous stage's destination (or X) to src
  bool own_src_in = false;    // src_in runs as TransposeChannels
  LayoutCopyKeeper src_keeper;  // src_in's result from X, for X's later readers
  int residual = -1;          // input index of a residual (sum post-op)
  dnnl::reorder residual_in;  // plain residual into dst's layout, where dst is not plain
  int residual_stage = -1;    // or the stage whose result is the residual
  dnnl::reorder inner_in;     // that result into dst's layout, where they differ
  dnnl::reorder inner_plain;  // or into plain Y's, for the last stage's own post-ops
  // The post-ops run in ApplyPostOps (the last stage's over Y, an inner
  // stage's over dst, the residual reordered into a scratch buffer of dst's
  // layout); else they are oneDNN's post-ops.
  bool own = false;
  bool winograd = false;
  bool strided_channels_last = false;  // planned channels-last in a channel-blocked sequence
  // dst's layout and channel block, for a squeeze-and-excitation
  SeLayout se_layout = SeLayout::kPlain;
  int64_t se_block = 1;
  // A channel shuffle of the source (SequenceStage::shuffle_shape): src_in
  // reorders shuffle_from, the previous result as [N, C/G, G, H, W], into
  // shuffle_to, src as the same.
  bool shuffle = false;
  memory::desc shuffle_from, shuffle_to;
  // The shuffle runs on ShuffleChannelsLast (groups), not the reorder.
  int64_t own_shuffle = 0;
  // A pooled join (SequenceStage::join): `joined` ([N, C + C', H, W],
  // channels-last, out_shape) holds dst (the convolution's result after
  // its post-ops) and then join_pool's result (pool_dst, its post-ops from
  // the join's ops_from on applied); join_src_in reorders the pooled source
  // (X, or a result in another layout or in bfloat16) into pool_src.
  bool join = false;
  memory::desc joined, pool_src, pool_dst;
  dnnl::primitive join_pool;
  dnnl::reorder join_src_in;
  std::vector<int64_t> out_shape;  // the stage's result: y_shape unless joined
  PreparedWeight weight;
};

// The desc of stage s's result.
const memory::desc& ResultDesc(const StagePlan& s) { return s.join ? s.joined : s.dst; }

// joined[p] = (a[p], b[p]) for each of `pixels` pixels of channels-last
// tensors of ca and cb channels.
void JoinChannels(const float* a, int64_t ca, const float* b, int64_t cb, int64_t pixels, float* joined) {
  for (int64_t p = 0; p < pixels; ++p) {
    float* out = joined + p * (ca + cb);
    std::memcpy(out, a + p * ca, static_cast<size_t>(ca) * sizeof(float));
    std::memcpy(out + ca, b + p * cb, static_cast<size_t>(cb) * sizeof(float));
  }
}

struct SequencePlan {
  bool built = false, supported = false;
  std::vector<StagePlan> stages;
  bool own_last = false;  // the last stage's post-ops run after the reorder out
  // A MaxPool ending the sequence (fast plan only), or a GlobalAveragePool,
  // over the last stage's destination in its layout, into pool_dst.
  dnnl::primitive pool;
  memory::desc pool_dst;
  // A GlobalAveragePool that oneDNN's pooling cannot take (the last stage's
  // post-ops run in ApplyPostOps, over the plain result): the sequence's
  // plain result (of y_shape) goes to a scratch tensor, whose means
  // (GlobalMeans) make the kernel's result.
  bool means_after = false;
  std::vector<int64_t> y_shape;  // the kernel's result (with means_after, the sequence's)
  memory::desc y_plain;
  dnnl::reorder dst_out;
  bool own_out = false;  // dst_out runs as TransposeChannels
};

// A stage's folded weights and what bounds its result, prepared once.
struct StageWeights {
  Tensor folded_w, folded_b;
  const void* folded_from = nullptr;
  const void* stats_from = nullptr;
  double l1 = 0;    // max over output channels of sum |w|
  double bias = 0;  // max |b|
  // The same for the squeeze-and-excitation's two convolutions.
  const void* se_from = nullptr;
  double se_l1[2] = {0, 0}, se_bias[2] = {0, 0};
};

class ConvSequenceKernel : public CpuKernel {
 public:
  // `plain_pointwise`: a lone pointwise stage may run on plain tensors.
  // `winograd_min_positions`: the smallest image a Winograd stage may have.
  // `bf16`: the convolutions compute in bfloat16 where oneDNN has a kernel.
  // `global_pool`: `pool` is a GlobalAveragePool.
  ConvSequenceKernel(std::vector<SequenceStage> stages, std::unique_ptr<Kernel> fallback,
                     std::optional<WindowAttrs> pool, bool bf16, bool plain_pointwise = false,
                     int64_t winograd_min_positions = kWinogradMinPositions, bool global_pool = false)
      : CpuKernel(std::move(fallback)),
        stages_(std::move(stages)),
        weights_(stages_.size()),
        pool_(std::move(pool)),
        global_pool_(global_pool),
        bf16_(bf16),
        plain_pointwise_(plain_pointwise),
        winograd_min_positions_(winograd_min_positions) {}

  absl::Status Run(KernelContext& ctx) override {
    Checks checks;
    SequencePlan* plan = Prepare(ctx, &checks);
    if (plan == nullptr) return Fallback(ctx);
    const std::vector<int64_t> y_shape = ResultShape(*plan);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, y_shape));
    bool unbounded = false;
    ONNXKIT_RETURN_IF_ERROR(RunPlan(ctx, *plan, y->mutable_data<float>(), &checks, &unbounded));
    if (!unbounded) return absl::OkStatus();
    // A value measured on the way was too large (or not finite) to rule out
    // overflow further on: the whole sequence runs again in the safe plan.
    // Where that plan is not supported, node by node (its output replaces Y).
    SequencePlan* safe = SafePlan(ctx);
    if (safe == nullptr || ResultShape(*safe) != y_shape) return Fallback(ctx);
    return RunPlan(ctx, *safe, y->mutable_data<float>());
  }

  // Where the bound of the sequence's values from X (BoundedStages) gives out
  // before the last stage of a long sequence (it grows with every stage's
  // weights), the fast plan runs on while the values actually computed
  // stay small: from stage `from` on, before each stage whose bound from
  // its inputs' bounds would be too large, the largest magnitude of those
  // inputs is measured and the bound starts again from it.
  struct Checks {
    size_t from = SIZE_MAX;       // SIZE_MAX: none (every value bounded from X)
    std::vector<double> results;  // the bounds of stages before `from`
    double x_bound = 0;
  };

  // The kernel's result shape under `plan`.
  static std::vector<int64_t> ResultShape(const SequencePlan& plan) {
    std::vector<int64_t> shape = plan.y_shape;
    if (plan.means_after) std::fill(shape.begin() + 2, shape.end(), 1);
    return shape;
  }

  // Execute, then with means_after the means of the sequence's result
  // (held in means_scratch_) into y.
  absl::Status RunPlan(KernelContext& ctx, SequencePlan& plan, float* y, const Checks* checks = nullptr,
                       bool* unbounded = nullptr) {
    if (!plan.means_after) return Execute(ctx, plan, y, checks, unbounded);
    const size_t bytes = plan.y_plain.get_size();
    if (means_scratch_ == nullptr || means_scratch_->size() < bytes) {
      means_scratch_.reset();  // release before allocating the larger one
      means_scratch_ = Buffer::Allocate(bytes, /*zero_fill=*/false);
      if (means_scratch_ == nullptr) return absl::ResourceExhaustedError("out of memory for a pooled result");
    }
    float* full = static_cast<float*>(means_scratch_->data());
    ONNXKIT_RETURN_IF_ERROR(Execute(ctx, plan, full, checks, unbounded));
    if (unbounded != nullptr && *unbounded) return absl::OkStatus();
    const int64_t planes = plan.y_shape[0] * plan.y_shape[1];
    const int64_t size = static_cast<int64_t>(bytes / sizeof(float));
    GlobalMeans(full, planes, planes > 0 ? size / planes : 0, y);
    return absl::OkStatus();
  }

  // The plan for the inputs of `ctx`; null where the chain must run node by
  // node (the fallback). With `checks` (not for a MaxPool),
  // the fast plan may come back with checks to make as it runs.
  SequencePlan* Prepare(KernelContext& ctx, Checks* checks = nullptr) {
    const int changed = UpdateInputKey(ctx, key_);
    if (changed < 0) return nullptr;
    if (changed > 0) {
      plans_[0] = SequencePlan();
      plans_[1] = SequencePlan();
    }
    SequencePlan& fast = plans_[0];
    if (!fast.built) {
      fast.supported = Build(ctx, /*safe=*/false, fast);
      fast.built = true;
    }
    if (fast.supported) {
      std::vector<double> results;
      double x_bound = 0;
      const size_t bounded = BoundedStages(ctx, fast, &results, &x_bound);
      if (bounded == stages_.size()) return &fast;
      if (checks != nullptr && bounded > 0 && (!pool_.has_value() || global_pool_)) {
        checks->from = bounded;
        checks->results = std::move(results);
        checks->x_bound = x_bound;
        return &fast;
      }
    }
    // oneDNN's max pooling skips NaN and may start from the lowest finite
    // float: a MaxPool runs fused only on bounded values.
    if (pool_.has_value() && !global_pool_) return nullptr;
    return SafePlan(ctx);
  }

  // The plan that holds for any values: activations in ApplyPostOps, no
  // Winograd, float32.
  SequencePlan* SafePlan(KernelContext& ctx) {
    SequencePlan& plan = plans_[1];
    if (!plan.built) {
      plan.supported = Build(ctx, /*safe=*/true, plan);
      plan.built = true;
    }
    return plan.supported ? &plan : nullptr;
  }

 private:
  // The weights and bias of stage k (folded when it has a BatchNormalization).
  bool Operands(KernelContext& ctx, size_t k, const Tensor** w, const Tensor** b) {
    const SequenceStage& s = stages_[k];
    StageWeights& sw = weights_[k];
    absl::StatusOr<const Tensor*> ws = ctx.Input(s.base + 1);
    absl::StatusOr<const Tensor*> bs = s.node_inputs > 2 ? ctx.OptionalInput(s.base + 2) : nullptr;
    if (!ws.ok() || !bs.ok()) return false;
    *w = *ws;
    *b = *bs;
    if ((*w)->dtype() != pb::kFloat || (*w)->size() == 0) return false;
    if (*b != nullptr && ((*b)->dtype() != pb::kFloat || (*b)->rank() != 1)) return false;
    if (!s.spec.linear.empty()) {
      if (sw.folded_from != (*w)->raw() || !sw.folded_w.defined()) {
        if ((*w)->rank() < 1 || (*w)->dim(0) == 0 ||
            !FoldLinearInto(ctx, s.spec, (*w)->rank(), **w, *b, &sw.folded_w, &sw.folded_b)) {
          return false;
        }
        sw.folded_from = (*w)->raw();
      }
      *w = &sw.folded_w;
      *b = &sw.folded_b;
    }
    return true;
  }

  // The squeeze-and-excitation operands of stage k for a result of c
  // channels and `rank`: W1 [r, c, 1, ...], W2 [c, r, 1, ...], biases [r]
  // and [c] (or null), all float; false otherwise. Computes their
  // statistics once.
  bool SeOperands(KernelContext& ctx, size_t k, int rank, int64_t c, const Tensor** w1, const Tensor** b1,
                  const Tensor** w2, const Tensor** b2) {
    const SqueezeExcite& se = *stages_[k].se;
    absl::StatusOr<const Tensor*> t[4] = {ctx.Input(se.w1), se.b1 >= 0 ? ctx.OptionalInput(se.b1) : nullptr,
                                          ctx.Input(se.w2), se.b2 >= 0 ? ctx.OptionalInput(se.b2) : nullptr};
    for (const auto& v : t) {
      if (!v.ok() || (*v != nullptr && (*v)->dtype() != pb::kFloat)) return false;
    }
    *w1 = *t[0], *b1 = *t[1], *w2 = *t[2], *b2 = *t[3];
    if (*w1 == nullptr || *w2 == nullptr) return false;
    const int64_t r = (*w1)->rank() == rank ? (*w1)->dim(0) : 0;
    std::vector<int64_t> squeeze(static_cast<size_t>(rank), 1), excite(static_cast<size_t>(rank), 1);
    squeeze[0] = excite[1] = r;
    squeeze[1] = excite[0] = c;
    if (r == 0 || (*w1)->shape() != squeeze || (*w2)->shape() != excite ||
        (*b1 != nullptr && (*b1)->shape() != std::vector<int64_t>{r}) ||
        (*b2 != nullptr && (*b2)->shape() != std::vector<int64_t>{c}))
      return false;
    StageWeights& sw = weights_[k];
    if (sw.se_from != (*w1)->raw()) {
      const Tensor* ws[2] = {*w1, *w2};
      const Tensor* bs[2] = {*b1, *b2};
      for (int i = 0; i < 2; ++i) {
        const int64_t rows = ws[i]->dim(0), cols = ws[i]->dim(1);
        double l1 = 0;
        for (int64_t o = 0; o < rows; ++o) {
          double sum = 0;
          for (int64_t j = 0; j < cols; ++j) sum += std::fabs(ws[i]->data<float>()[o * cols + j]);
          l1 = std::max(l1, sum);
        }
        sw.se_l1[i] = std::isfinite(l1) ? l1 : std::numeric_limits<double>::infinity();
        sw.se_bias[i] = bs[i] != nullptr ? MaxAbs(bs[i]->data<float>(), bs[i]->size()) : 0;
      }
      sw.se_from = (*w1)->raw();
    }
    return true;
  }

  // Bounds stage k's result before its post-ops from `in`, the bound of
  // its source; computes the weight statistics once.
  double ConvBound(size_t k, const Tensor& w, const Tensor* b, double in) {
    StageWeights& sw = weights_[k];
    if (sw.stats_from != w.raw()) {
      int64_t m = w.dim(0), per_channel = w.size() / m;
      sw.l1 = 0;
      for (int64_t o = 0; o < m; ++o) {
        double sum = 0;
        for (int64_t i = 0; i < per_channel; ++i) sum += std::fabs(w.data<float>()[o * per_channel + i]);
        sw.l1 = std::max(sw.l1, sum);
      }
      sw.bias = b != nullptr ? MaxAbs(b->data<float>(), b->size()) : 0;
      if (!std::isfinite(sw.l1)) sw.l1 = std::numeric_limits<double>::infinity();
      sw.stats_from = w.raw();
    }
    return in * sw.l1 + sw.bias;
  }

  // The bound of an activation's result from `bound`, its input's (infinity
  // for a residual sum, which a join's pooled part cannot have).
  static double ActivationBound(double bound, const ResolvedPostOp& op) {
    if (op.sum) return std::numeric_limits<double>::infinity();
    if (op.alg == dnnl::algorithm::eltwise_relu)
      return bound * std::max(1.0, std::fabs(static_cast<double>(op.alpha)));
    if (op.alg == dnnl::algorithm::eltwise_swish || op.alg == dnnl::algorithm::eltwise_hardswish)
      return std::max(bound, 0.4);
    double lo = std::fabs(op.alpha), hi = std::fabs(op.beta);
    return std::isfinite(lo) && std::isfinite(hi)
               ? std::max(lo, hi)
               : std::max({bound, std::isfinite(lo) ? lo : 0.0, std::isfinite(hi) ? hi : 0.0});
  }

  // The bound of stage k's result (after its post-ops) from `in`, its
  // source's bound, `results`, the earlier stages' bounds, and X (`x`,
  // bounded by `x_bound`); infinity where it reaches kSafeBound (or, for a
  // Winograd stage, where the transforms could), or the operands changed.
  double StageBound(KernelContext& ctx, const SequencePlan& plan, size_t k, double in,
                    const std::vector<double>& results, const Tensor& x, double x_bound) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const Tensor *w, *b;
    if (!(in < kSafeBound) || !Operands(ctx, k, &w, &b)) return kInf;
    double bound = ConvBound(k, *w, b, in);
    if (plan.stages[k].winograd && !(bound * kWinogradGrowth < kSafeBound)) return kInf;
    for (const ResolvedPostOp& op : plan.stages[k].resolved) {
      if (!(bound < kSafeBound)) return kInf;
      if (op.sum && plan.stages[k].residual_stage >= 0) {
        bound += results[static_cast<size_t>(plan.stages[k].residual_stage)];
      } else if (op.sum) {
        absl::StatusOr<const Tensor*> r = ctx.Input(plan.stages[k].residual);
        if (!r.ok()) return kInf;
        // A residual that is X itself (an identity shortcut) is not read twice.
        bool is_x = (*r)->raw() == x.raw() && (*r)->size() == x.size();
        bound += is_x ? x_bound : InputMaxAbs(ctx, plan.stages[k].residual, **r);
      } else {
        // |swish(x)| <= max(|x|, 0.279), |hardswish(x)| <= max(|x|, 0.375);
        // clip to [alpha, beta]: within the bounds, or the value.
        bound = ActivationBound(bound, op);
      }
    }
    if (!(bound < kSafeBound)) return kInf;
    if (stages_[k].join.has_value()) {
      // The pooled part: a mean of the source's values, then the
      // activations after the Concat.
      const SequenceStage::PoolJoin& join = *stages_[k].join;
      double pooled = join.reads_x ? x_bound : results[static_cast<size_t>(join.source)];
      const std::vector<ResolvedPostOp>& ops = plan.stages[k].resolved;
      for (size_t i = join.ops_from; i < ops.size(); ++i) pooled = ActivationBound(pooled, ops[i]);
      if (!(pooled < kSafeBound)) return kInf;
      bound = std::max(bound, pooled);
    }
    if (stages_[k].se.has_value()) {
      // The gate is finite and within [0, 1] when the squeeze and its
      // activation stay bounded (a mean is at most the largest value):
      // the result then stays within `bound`.
      const Tensor *w1, *b1, *w2, *b2;
      if (!SeOperands(ctx, k, static_cast<int>(plan.stages[k].y_shape.size()), plan.stages[k].y_shape[1], &w1,
                      &b1, &w2, &b2))
        return kInf;
      const StageWeights& sw = weights_[k];
      const double hidden = std::max(bound * sw.se_l1[0] + sw.se_bias[0], 0.4);
      if (hidden >= kSafeBound || hidden * sw.se_l1[1] + sw.se_bias[1] >= kSafeBound) return kInf;
    }
    return bound;
  }

  // How many stages, from the first, compute only values below kSafeBound
  // in magnitude (so none is NaN or infinite) for the inputs of `ctx`;
  // `results` gets those stages' bounds.
  size_t BoundedStages(KernelContext& ctx, const SequencePlan& plan, std::vector<double>* results,
                       double* x_bound_out) {
    results->clear();
    absl::StatusOr<const Tensor*> x = ctx.Input(0);
    if (!x.ok()) return 0;
    const double x_bound = InputMaxAbs(ctx, 0, **x);
    *x_bound_out = x_bound;
    for (size_t k = 0; k < stages_.size(); ++k) {
      const int source = stages_[k].source;
      const double in = source >= 0                      ? (*results)[static_cast<size_t>(source)]
                        : (k > 0 && !stages_[k].reads_x) ? results->back()
                                                         : x_bound;
      const double bound = StageBound(ctx, plan, k, in, *results, **x, x_bound);
      if (!(bound < kSafeBound)) return k;
      results->push_back(bound);
    }
    return stages_.size();
  }

  // The largest magnitude in `m`, a float32 or bfloat16 result of the
  // sequence (its blocked padding is zero); infinity when one is not finite.
  static double Measure(const memory& m) {
    const memory::desc d = m.get_desc();
    if (d.data_type() == memory::data_type::bf16) {
      return MaxAbsBf16(static_cast<const uint16_t*>(m.get_data_handle()),
                        static_cast<int64_t>(d.get_size() / sizeof(uint16_t)));
    }
    if (d.data_type() != memory::data_type::f32) return std::numeric_limits<double>::infinity();
    return MaxAbs(static_cast<const float*>(m.get_data_handle()),
                  static_cast<int64_t>(d.get_size() / sizeof(float)));
  }

  // Plans every stage. `safe`: activations run in ApplyPostOps; else as
  // oneDNN post-ops, but for stages with three post-ops (oneDNN 2.6's jit
  // convolutions drop the activation of eltwise + sum + eltwise).
  bool Build(KernelContext& ctx, bool safe, SequencePlan& plan) {
    absl::StatusOr<const Tensor*> xs = ctx.Input(0);
    if (!xs.ok() || (*xs)->dtype() != pb::kFloat || (*xs)->rank() < 3 || (*xs)->rank() > 5 ||
        (*xs)->size() == 0)
      return false;
    std::vector<int64_t> x_shape = (*xs)->shape();
    const int rank = static_cast<int>(x_shape.size());
    memory::desc current = PlainDesc(x_shape, memory::data_type::f32);
    bool has_depthwise = false;
    bool has_shuffle = false;
    // Depthwise stages stay float32 in bfloat16 sequences: oneDNN 2.6's
    // bfloat16 depthwise kernels are slower than its float32 ones (1.2-1.6x
    // on AVX512_BF16; AMX has none), so the stages they read write float32.
    std::vector<bool> depthwise(stages_.size(), false), feeds_depthwise(stages_.size(), false);
    {
      // Each stage's result channels; a stage reads the previous one's or its source's.
      std::vector<int64_t> out(stages_.size(), 0);
      for (size_t k = 0; k < stages_.size(); ++k) {
        const SequenceStage& s = stages_[k];
        if (s.source >= static_cast<int>(k)) return false;
        const int64_t channels = s.source >= 0           ? out[static_cast<size_t>(s.source)]
                                 : (k > 0 && !s.reads_x) ? out[k - 1]
                                                         : x_shape[1];
        has_shuffle = has_shuffle || s.shuffle_shape >= 0;
        absl::StatusOr<const Tensor*> w = ctx.Input(s.base + 1);
        if (!w.ok() || (*w)->rank() < 2) return false;
        if (s.group > 1 && s.group == channels) {
          has_depthwise = true;
          depthwise[k] = true;
          // The stage it reads writes float32 for it (see below).
          const int64_t from = s.source >= 0           ? s.source
                               : (k > 0 && !s.reads_x) ? static_cast<int64_t>(k) - 1
                                                       : -1;
          if (from >= 0) feeds_depthwise[static_cast<size_t>(from)] = true;
        }
        out[k] = (*w)->dim(0);
        if (s.join) {
          if (s.join->source >= static_cast<int>(k)) return false;
          out[k] += s.join->reads_x ? x_shape[1] : out[static_cast<size_t>(s.join->source)];
        }
      }
    }
    // The stages that run as Winograd convolutions (fast plan only).
    std::vector<bool> winograd(stages_.size(), false);
    bool has_winograd = false;
    {
      std::vector<int64_t> shape = x_shape;
      std::vector<std::vector<int64_t>> shapes(stages_.size());  // each stage's result
      for (size_t k = 0; k < stages_.size(); ++k) {
        const Tensor *w, *b;
        if (!Operands(ctx, k, &w, &b) || w->rank() != rank) return false;
        if (stages_[k].source >= 0) shape = shapes[static_cast<size_t>(stages_[k].source)];
        if (stages_[k].reads_x) shape = x_shape;
        std::optional<ConvGeometry> geometry = ResolveConv(shape, *w, b, stages_[k].group, stages_[k].attrs);
        if (!geometry) return false;
        winograd[k] = !safe && !has_shuffle &&
                      WinogradCandidate(stages_[k], *w, geometry->y_shape, geometry->window,
                                        winograd_min_positions_, bf16_);
        has_winograd = has_winograd || winograd[k];
        shape = geometry->y_shape;
        if (stages_[k].join) {
          const std::vector<int64_t>& pooled =
              stages_[k].join->reads_x ? x_shape : shapes[static_cast<size_t>(stages_[k].join->source)];
          if (pooled.size() != shape.size()) return false;
          shape[1] += pooled[1];
        }
        shapes[k] = shape;
      }
    }
    plan.stages.assign(stages_.size(), StagePlan());
    for (size_t k = 0; k < stages_.size(); ++k) {
      const SequenceStage& stage = stages_[k];
      StagePlan& s = plan.stages[k];
      const bool last = k + 1 == stages_.size();
      const Tensor *w, *b;
      if (!Operands(ctx, k, &w, &b) || w->rank() != rank) return false;
      if (stage.source >= 0) {
        // An earlier stage's result, in the layout that stage wrote.
        const StagePlan& from = plan.stages[static_cast<size_t>(stage.source)];
        x_shape = from.out_shape;
        current = ResultDesc(from);
      } else if (stage.reads_x) {
        x_shape = (*xs)->shape();
        current = PlainDesc(x_shape, memory::data_type::f32);
      }
      std::optional<ConvGeometry> geometry = ResolveConv(x_shape, *w, b, stage.group, stage.attrs);
      if (!geometry) return false;
      int64_t c = x_shape[1], m = w->dim(0);
      const std::vector<int64_t>& kernel = geometry->kernel;
      const Window* win = &geometry->window;
      s.y_shape = geometry->y_shape;
      if (!ResolveChainPostOps(ctx, stage.spec, s.y_shape, &s.resolved)) return false;
      s.own =
          HasActivation(s.resolved) && (safe || s.resolved.size() > 2 || (!bf16_ && HasSwish(s.resolved)));
      plan.own_last = last && s.own;
      s.residual = -1;
      s.residual_stage = -1;
      for (const ConvChainSpec::PostOp& op : stage.spec.ops) {
        if (op.sum && op.residual_stage >= 0) {
          s.residual_stage = op.residual_stage;
        } else if (op.sum) {
          s.residual = op.residual;
        }
      }
      if (s.residual_stage >= static_cast<int>(k) ||
          (s.residual_stage >= 0 &&
           plan.stages[static_cast<size_t>(s.residual_stage)].out_shape != s.y_shape))
        return false;
      memory::dims wdims = WeightDims(stage.group, m, c, kernel);
      s.wei_user = memory::desc(wdims, memory::data_type::f32, PlainTag(static_cast<int>(wdims.size())));
      s.bias = b != nullptr ? PlainDesc(b->shape(), memory::data_type::f32) : memory::desc();
      // Sequences with a depthwise or a Winograd convolution run
      // channel-blocked (the layout of both kernels, no reorders between
      // stages; strided 3x3 convolutions excepted, below); the others in the
      // layout oneDNN picks (NHWC here).
      // A Winograd stage oneDNN does not take convolves directly.
      using Candidate = std::pair<memory::format_tag, dnnl::algorithm>;
      const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
      std::vector<Candidate> tags = {{memory::format_tag::any, direct}};
      if (has_depthwise || has_winograd) tags = {{Blocked16Tag(rank), direct}, {memory::format_tag::any, direct}};
      // A lone pointwise convolution over enough positions: oneDNN's GEMM
      // convolution on plain tensors (as runner/cpu/conv.cc's kernel), its
      // post-ops then ApplyPostOps' (the GEMM convolution runs them one
      // element at a time). So too the first of a sequence when it narrows
      // the channels of an image of at least kNarrowingMinPositions (a
      // DenseNet bottleneck over the concatenated features): there the GEMM
      // is as fast, and reordering its narrower result costs less than
      // reordering the wide source.
      const bool narrowing = k == 0 && stages_.size() > 1 && m < c && !has_depthwise && !has_winograd &&
                             !has_shuffle && !bf16_ && win->out_size >= kNarrowingMinPositions;
      const bool plain_first =
          ((plain_pointwise_ && stages_.size() == 1) || narrowing) && stage.group == 1 &&
          std::all_of(kernel.begin(), kernel.end(), [](int64_t v) { return v == 1; }) &&
          std::all_of(win->strides.begin(), win->strides.end(), [](int64_t v) { return v == 1; }) &&
          std::all_of(win->pad_begin.begin(), win->pad_begin.end(), [](int64_t v) { return v == 0; }) &&
          std::all_of(win->pad_end.begin(), win->pad_end.end(), [](int64_t v) { return v == 0; }) &&
          win->out_size >= kPlainPointwiseMinPositions;
      if (plain_first) tags = {{PlainTag(rank), direct}, {memory::format_tag::any, direct}};
      // Sequences with a channel shuffle run channels-last throughout: the
      // shuffle is then one reorder between strided views (a blocked layout
      // cannot express it when the channels do not fill whole blocks).
      if (has_shuffle) tags = {{ChannelsLastTag(rank), direct}, {memory::format_tag::any, direct}};
      s.shuffle = stage.shuffle_shape >= 0;
      if (s.shuffle && !ShuffleViews(ctx, stage, x_shape, current, &s.shuffle_from)) return false;
      const bool own_by_mode = s.own;
      // The candidates in order. A Winograd stage first (float32: on the
      // large images it is chosen for it beats a bfloat16 direct one). Then
      // in bfloat16 where asked, in the fast plan only (bounded values:
      // oneDNN's bfloat16 convolutions multiply pairs of values, a padded
      // one among them, so an infinity could meet a zero and make NaN): the
      // source and weights in bfloat16, and an inner stage's result too
      // unless its post-ops run here (they read floats); the last result is
      // float32. Then float32.
      struct Choice {
        memory::format_tag tag;
        dnnl::algorithm alg;
        memory::data_type type;
        memory::format_tag dst_tag = memory::format_tag::undef;  // undef: `tag`
      };
      std::vector<Choice> candidates;
      if (winograd[k]) {
        candidates.push_back(
            {Blocked16Tag(rank), dnnl::algorithm::convolution_winograd, memory::data_type::f32});
      }
      if (bf16_ && !safe && !depthwise[k]) {
        // On AMX, oneDNN 2.6's fast bfloat16 kernels (brgemm) read and write
        // channels-last; channel blocks would take the older AVX512_BF16 ones.
        if (AmxSupported() && !has_shuffle && !plain_first)
          candidates.push_back({ChannelsLastTag(rank), direct, memory::data_type::bf16});
        for (const auto& [tag, alg] : tags) candidates.push_back({tag, alg, memory::data_type::bf16});
      }
      // The first convolution of a channel-blocked sequence over an image
      // of few channels (a network's stem: 3) reads the plain image and
      // writes channel blocks, as oneDNN's first-layer kernel does, rather
      // than have both reordered.
      if (k == 0 && c < 16 && stage.group == 1 && (has_depthwise || has_winograd) && !has_shuffle &&
          !s.shuffle) {
        candidates.push_back({PlainTag(rank), direct, memory::data_type::f32, Blocked16Tag(rank)});
      }
      // A grouped convolution (RegNet, ResNeXt) in a sequence of oneDNN's
      // choice: channels-last like the convolutions around it (oneDNN picks
      // channel blocks for it, so its source and result would be reordered)
      // where oneDNN 2.6's channels-last grouped kernel keeps up: groups of
      // at least 16 channels, over at most 14x14 positions or at most 128
      // channels (it is 2-3 times slower on wider 28x28 images, and on
      // narrower groups).
      if (tags.size() == 1 && !winograd[k] && stage.group > 1 && stage.group < c && c / stage.group >= 16 &&
          (win->out_size <= 14 * 14 || c <= 128)) {
        candidates.push_back({ChannelsLastTag(rank), direct, memory::data_type::f32});
      }
      // A strided 3x3 convolution in a channel-blocked sequence (the first of
      // a ResNet stage, Inception's reductions): channels-last first, where
      // oneDNN 2.6's kernel is 10-20 % quicker than its channel-blocked
      // direct one on 64 to 512 channels, more than the reorders in and out
      // cost (ResNet-50 2-3 % faster at 1 and 2 threads, Inception-v2 4 % at 2).
      const bool strided_channels_last = tags.size() == 2 && tags[0].first == Blocked16Tag(rank) &&
                                         stage.group == 1 && rank == 4 && c >= 64 && kernel[0] == 3 &&
                                         kernel[1] == 3 && win->strides[0] == 2 && win->strides[1] == 2 &&
                                         !stage.se.has_value() && !stage.join && !s.shuffle;
      if (strided_channels_last)
        candidates.push_back({ChannelsLastTag(rank), direct, memory::data_type::f32});
      for (const auto& [tag, alg] : tags) candidates.push_back({tag, alg, memory::data_type::f32});
      // A squeeze-and-excitation reads its stage's result in place: a
      // layout it cannot read is passed over for channels-last, then plain.
      if (stage.se.has_value()) {
        candidates.push_back({ChannelsLastTag(rank), direct, memory::data_type::f32});
        candidates.push_back({PlainTag(rank), direct, memory::data_type::f32});
      }
      bool planned = false;
      for (size_t n = 0; n < candidates.size() && !planned; ++n) {
        const Choice& cand = candidates[n];
        const memory::data_type xt = cand.type;
        bool last_tag = n + 1 == candidates.size();
        bool is_winograd = cand.alg != direct;
        bool is_bf16 = xt == memory::data_type::bf16;
        absl::Status status = Guard("convolution", [&] {
          s.own = own_by_mode || (cand.tag == PlainTag(rank) && cand.dst_tag == memory::format_tag::undef &&
                                  !s.resolved.empty());
          // (A pooled join writes float32: the join's own pass reads it.)
          const memory::data_type yt =
              is_bf16 && !last && !s.own && !stage.se.has_value() && !stage.join && !feeds_depthwise[k]
                  ? xt
                  : memory::data_type::f32;
          dnnl::convolution_forward::desc d =
              ConvDesc(x_shape, s.y_shape, wdims, s.bias, *win, xt, xt, yt, cand.tag, cand.alg, cand.dst_tag);
          plan.own_last = last && s.own;
          dnnl::primitive_attr attr;
          if (!s.own) attr.set_post_ops(DnnlPostOps(s.resolved));
          dnnl::convolution_forward::primitive_desc pd(d, attr, Engine());
          if (!last_tag && IsReference(pd)) return;
          if (stage.se.has_value() && !SeLayoutOf(pd.dst_desc())) return;
          // An inner stage's own activations also run over dst's zero padding.
          int64_t elements = 1;
          for (int64_t dim : s.y_shape) elements *= dim;
          if (s.own && !last && !KeepsZero(s.resolved) &&
              pd.dst_desc().get_size() != static_cast<size_t>(elements) * sizeof(float)) {
            return;
          }
          s.src = pd.src_desc();
          s.dst = pd.dst_desc();
          s.wei = pd.weights_desc();
          s.winograd = is_winograd;
          s.strided_channels_last = strided_channels_last && cand.tag == ChannelsLastTag(rank);
          s.primitive = dnnl::convolution_forward(pd);
          if (s.shuffle) {
            // The shuffled view of the source into s.src: Y[n, i * G + j] = X[n, j * C/G + i].
            std::optional<memory::desc> to = ChannelView(s.src, s.shuffle_from.data.dims[2], /*source=*/false);
            if (!to) return;
            s.shuffle_to = *to;
            s.src_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), s.shuffle_from, Engine(), s.shuffle_to));
            const int64_t groups = s.shuffle_from.data.dims[2];
            s.own_shuffle = OwnShuffle(current, s.src, groups) ? groups : 0;
          } else {
            s.src_in = s.src != current
                           ? dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), current, Engine(), s.src))
                           : dnnl::reorder();
            s.own_src_in = s.src_in && OwnTranspose(current, s.src);
          }
          memory::desc plain_y = PlainDesc(s.y_shape, memory::data_type::f32);
          bool reordered = s.residual >= 0 && !(s.own && last);
          s.residual_in =
              reordered && s.dst != plain_y
                  ? dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), plain_y, Engine(), s.dst))
                  : dnnl::reorder();
          s.inner_in = s.inner_plain = dnnl::reorder();
          if (s.residual_stage >= 0) {
            const memory::desc& from = ResultDesc(plan.stages[static_cast<size_t>(s.residual_stage)]);
            const memory::desc& to = s.own && last ? plain_y : s.dst;
            (s.own && last ? s.inner_plain : s.inner_in) =
                from != to ? dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to))
                           : dnnl::reorder();
          }
          planned = true;
        });
        // oneDNN refuses Winograd for geometries its kernel does not cover,
        // and may refuse bfloat16.
        if (!status.ok() && !is_winograd && !is_bf16) return false;
      }
      if (!planned) return false;
      if (stage.se.has_value()) {
        // Scaled in place, in dst's layout, before the next stage reads it.
        const Tensor *w1, *b1, *w2, *b2;
        std::optional<std::pair<SeLayout, int64_t>> layout = SeLayoutOf(s.dst);
        if (last || !layout ||
            !SeOperands(ctx, k, static_cast<int>(s.y_shape.size()), s.y_shape[1], &w1, &b1, &w2, &b2))
          return false;
        s.se_layout = layout->first;
        s.se_block = layout->second;
      }
      s.out_shape = s.y_shape;
      if (stage.join && !BuildJoin(k, **xs, plan)) return false;
      current = ResultDesc(s);
      x_shape = s.out_shape;
    }
    if (pool_.has_value() && !BuildPool(x_shape, plan, current)) {
      if (!global_pool_ || x_shape.size() < 3) return false;
      plan.means_after = true;
    }
    plan.y_shape = x_shape;
    plan.y_plain = PlainDesc(x_shape, memory::data_type::f32);
    return Guard("reorder",
                 [&] {
                   plan.dst_out = current != plan.y_plain ? dnnl::reorder(dnnl::reorder::primitive_desc(
                                                                Engine(), current, Engine(), plan.y_plain))
                                                          : dnnl::reorder();
                   plan.own_out = plan.dst_out && OwnTranspose(current, plan.y_plain);
                 })
        .ok();
  }

  // Plans stage k's pooled join (its convolution planned): the AveragePool
  // of its source, channels-last like the convolution's result, and the
  // joined result.
  bool BuildJoin(size_t k, const Tensor& x, SequencePlan& plan) {
    const SequenceStage::PoolJoin& join = *stages_[k].join;
    StagePlan& s = plan.stages[k];
    // Not the last stage (FindConvChains), no squeeze-and-excitation, and
    // the convolution's result float32 channels-last.
    if (k + 1 == stages_.size() || stages_[k].se.has_value() || !DenseChannelsLast(s.dst) ||
        s.y_shape.size() != 4)
      return false;
    std::vector<int64_t> in_shape =
        join.reads_x ? x.shape() : plan.stages[static_cast<size_t>(join.source)].out_shape;
    if (in_shape.size() != 4 || in_shape[0] != s.y_shape[0]) return false;
    std::vector<int64_t> in(in_shape.begin() + 2, in_shape.end());
    memory::dims pad_end;
    std::optional<Window> w = DnnlPoolWindow(join.attrs, in, join.attrs.kernel_shape, &pad_end);
    if (!w || w->out.size() != 2 || w->out[0] != s.y_shape[2] || w->out[1] != s.y_shape[3]) return false;
    // With count_include_pad, padding ceil_mode adds would count in oneDNN's divisor, not in ONNX's.
    for (size_t d = 0; d < 2; ++d) {
      if (join.count_include_pad && pad_end[d] > w->pad_end[d]) return false;
    }
    const std::vector<int64_t> pooled_shape = {in_shape[0], in_shape[1], w->out[0], w->out[1]};
    s.out_shape = s.y_shape;
    s.out_shape[1] += in_shape[1];
    const memory::desc source = join.reads_x ? PlainDesc(in_shape, memory::data_type::f32)
                                             : ResultDesc(plan.stages[static_cast<size_t>(join.source)]);
    absl::Status status = Guard("pooling", [&] {
      s.pool_src = memory::desc(Dims(in_shape), memory::data_type::f32, ChannelsLastTag(4));
      s.pool_dst = memory::desc(Dims(pooled_shape), memory::data_type::f32, ChannelsLastTag(4));
      s.joined = memory::desc(Dims(s.out_shape), memory::data_type::f32, ChannelsLastTag(4));
      if (source != s.pool_src) {
        s.join_src_in = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), source, Engine(), s.pool_src));
      }
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference,
                                       join.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                              : dnnl::algorithm::pooling_avg_exclude_padding,
                                       s.pool_src, s.pool_dst, Dims(w->strides), Dims(w->kernel),
                                       Minus1(w->dilations), Dims(w->pad_begin), pad_end);
      dnnl::pooling_v2_forward::primitive_desc pd(d, Engine());
      if (IsReference(pd)) return;
      s.join_pool = dnnl::pooling_v2_forward(pd);
    });
    if (!status.ok() || !s.join_pool) return false;
    s.join = true;
    return true;
  }

  // Plans the MaxPool (or the GlobalAveragePool: one window over the whole
  // image) over `current` (of `shape`), the last stage's destination; on
  // success `current` and `shape` become its result's.
  bool BuildPool(std::vector<int64_t>& shape, SequencePlan& plan, memory::desc& current) {
    if (plan.own_last || shape.size() < 3) return false;
    std::vector<int64_t> in(shape.begin() + 2, shape.end());
    memory::dims pad_end;
    std::optional<Window> w;
    if (global_pool_) {
      w = Window();
      w->in = in;
      w->kernel = in;
      w->strides = w->dilations = w->out = std::vector<int64_t>(in.size(), 1);
      w->pad_begin = std::vector<int64_t>(in.size(), 0);
      pad_end = memory::dims(in.size(), 0);
    } else {
      w = DnnlPoolWindow(*pool_, in, pool_->kernel_shape, &pad_end);
    }
    if (!w) return false;
    std::vector<int64_t> y_shape = {shape[0], shape[1]};
    y_shape.insert(y_shape.end(), w->out.begin(), w->out.end());
    memory::dims dilations = Minus1(w->dilations);
    absl::Status s = Guard("pooling", [&] {
      memory::desc dst(Dims(y_shape), memory::data_type::f32, memory::format_tag::any);
      dnnl::pooling_v2_forward::desc d(
          dnnl::prop_kind::forward_inference,
          global_pool_ ? dnnl::algorithm::pooling_avg_exclude_padding : dnnl::algorithm::pooling_max, current,
          dst, Dims(w->strides), Dims(w->kernel), dilations, Dims(w->pad_begin), pad_end);
      dnnl::pooling_v2_forward::primitive_desc pd(d, Engine());
      if (IsReference(pd)) return;
      plan.pool = dnnl::pooling_v2_forward(pd);
      plan.pool_dst = pd.dst_desc();
    });
    if (!s.ok() || !plan.pool) return false;
    current = plan.pool_dst;
    shape = std::move(y_shape);
    return true;
  }

  // The lowest scratch slot not in `busy`.
  static int FreeSlot(const std::vector<int>& busy) {
    for (int slot = 0; slot < kScratchSlots; ++slot) {
      if (std::find(busy.begin(), busy.end(), slot) == busy.end()) return slot;
    }
    return -1;
  }

  static absl::StatusOr<memory> ScratchMemory(const memory::desc& desc, int slot) {
    void* buffer = slot >= 0 ? ThreadScratch(slot, desc.get_size()) : nullptr;
    if (buffer == nullptr) return absl::ResourceExhaustedError("out of memory for convolution scratch space");
    memory m;
    ONNXKIT_RETURN_IF_ERROR(Guard("convolution memory", [&] { m = memory(desc, Engine(), buffer); }));
    return m;
  }

  // The residual of stage s (of `plan`'s stage k) before its primitive
  // runs: into dst for oneDNN's sum, or, for an inner stage's own post-ops,
  // returned in dst's layout (a scratch slot not in `busy` where reordered).
  // `inner`: the result of the stage s adds, where it is one of the sequence.
  absl::StatusOr<const float*> StageResidual(KernelContext& ctx, StagePlan& s, bool last, const memory& dst,
                                             const memory* inner, const std::vector<int>& busy) {
    if ((s.residual < 0 && inner == nullptr) || (last && s.own)) return nullptr;
    memory r_user;
    if (inner != nullptr) {
      r_user = *inner;
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* r, ctx.Input(s.residual));
      if (r->dtype() != pb::kFloat || r->shape() != s.y_shape) return absl::InternalError("residual changed");
      ONNXKIT_RETURN_IF_ERROR(Guard(
          "residual memory", [&] { r_user = UserMemory(*r, PlainDesc(r->shape(), memory::data_type::f32)); }));
    }
    const dnnl::reorder& in = inner != nullptr ? s.inner_in : s.residual_in;
    if (s.own && !in) return static_cast<const float*>(r_user.get_data_handle());
    if (s.own) {
      ONNXKIT_ASSIGN_OR_RETURN(memory r_own, ScratchMemory(s.dst, FreeSlot(busy)));
      ONNXKIT_RETURN_IF_ERROR(
          cpu::Execute("residual reorder", in, {{DNNL_ARG_FROM, r_user}, {DNNL_ARG_TO, r_own}}));
      return static_cast<const float*>(r_own.get_data_handle());
    }
    if (in) {
      ONNXKIT_RETURN_IF_ERROR(
          cpu::Execute("residual reorder", in, {{DNNL_ARG_FROM, r_user}, {DNNL_ARG_TO, dst}}));
    } else {
      CopyAmongThreads(dst.get_data_handle(), r_user.get_data_handle(), s.dst.get_size());
    }
    return nullptr;
  }

  // Stage k's pooled join: pools its source, applies the post-ops after the
  // Concat to the pooled values and writes both parts into the joined
  // result (results[k], in a free slot). `conv` holds the convolution's
  // result (slot conv_slot).
  absl::Status RunJoin(size_t k, SequencePlan& plan, const memory& x_memory, std::vector<memory>& results,
                       std::vector<int>& result_slot, const memory& conv, int conv_slot) {
    const SequenceStage::PoolJoin& join = *stages_[k].join;
    StagePlan& s = plan.stages[k];
    std::vector<int> busy = {conv_slot};
    for (size_t j = 0; j < k; ++j) {
      if (result_slot[j] >= 0 && ReadLater(plan, j, k)) busy.push_back(result_slot[j]);
    }
    memory source = join.reads_x ? x_memory : results[static_cast<size_t>(join.source)];
    if (s.join_src_in) {
      const int slot = FreeSlot(busy);
      ONNXKIT_ASSIGN_OR_RETURN(memory nhwc, ScratchMemory(s.pool_src, slot));
      busy.push_back(slot);
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("pooling source reorder", s.join_src_in,
                                           {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, nhwc}}));
      source = nhwc;
    }
    const int pooled_slot = FreeSlot(busy);
    ONNXKIT_ASSIGN_OR_RETURN(memory pooled, ScratchMemory(s.pool_dst, pooled_slot));
    busy.push_back(pooled_slot);
    ONNXKIT_RETURN_IF_ERROR(
        cpu::Execute("pooling", s.join_pool, {{DNNL_ARG_SRC, source}, {DNNL_ARG_DST, pooled}}));
    const int64_t pixels = s.y_shape[0] * s.y_shape[2] * s.y_shape[3];
    const int64_t ca = s.y_shape[1], cb = s.out_shape[1] - s.y_shape[1];
    float* pooled_data = static_cast<float*>(pooled.get_data_handle());
    if (join.ops_from < s.resolved.size()) {
      ApplyPostOpsTo(pooled_data, nullptr, pixels * cb, s.resolved.data() + join.ops_from,
                     s.resolved.size() - join.ops_from);
    }
    const int joined_slot = FreeSlot(busy);
    ONNXKIT_ASSIGN_OR_RETURN(memory joined, ScratchMemory(s.joined, joined_slot));
    JoinChannels(static_cast<const float*>(conv.get_data_handle()), ca, pooled_data, cb, pixels,
                 static_cast<float*>(joined.get_data_handle()));
    results[k] = joined;
    result_slot[k] = joined_slot;
    return absl::OkStatus();
  }

  // True when a stage from `k` on adds stage j's result or convolves it.
  bool ReadLater(const SequencePlan& plan, size_t j, size_t k) const {
    for (size_t t = k; t < plan.stages.size(); ++t) {
      if (plan.stages[t].residual_stage == static_cast<int>(j) || stages_[t].source == static_cast<int>(j) ||
          (stages_[t].join && stages_[t].join->source == static_cast<int>(j)))
        return true;
    }
    return false;
  }

 public:
  // Runs `plan` (from Prepare) into y, plain, of plan.y_shape. With
  // `checks` (from Prepare), stops early with `unbounded` set where a
  // measured value cannot rule out overflow further on.
  absl::Status Execute(KernelContext& ctx, SequencePlan& plan, float* y, const Checks* checks = nullptr,
                       bool* unbounded = nullptr) {
    int64_t y_size = 1;
    for (int64_t d : plan.y_shape) y_size *= d;
    auto y_memory = [&](memory* m) {
      return Guard("convolution memory", [&] { *m = memory(plan.y_plain, Engine(), y); });
    };
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    const StagePlan& final_stage = plan.stages.back();
    memory current;
    int current_slot = -1;  // scratch slot holding `current`; -1: a tensor
    // Each stage's result and its slot, while a later stage adds it.
    std::vector<memory> results(plan.stages.size());
    std::vector<int> result_slot(plan.stages.size(), -1);
    // The stages' bounds, for `checks`.
    std::vector<double> bounds;
    const bool checked = checks != nullptr && checks->from < plan.stages.size();
    if (checked) {
      if (unbounded == nullptr || checks->from == 0 || checks->results.size() != checks->from)
        return absl::InternalError("convolution checks without their bounds");
      bounds = checks->results;
      bounds.resize(plan.stages.size(), std::numeric_limits<double>::infinity());
    }
    memory x_memory;
    ONNXKIT_RETURN_IF_ERROR(Guard("convolution memory", [&] {
      x_memory = UserMemory(*x, PlainDesc(x->shape(), memory::data_type::f32));
    }));
    current = x_memory;
    for (size_t k = 0; k < plan.stages.size(); ++k) {
      StagePlan& s = plan.stages[k];
      const bool last = k + 1 == plan.stages.size();
      const Tensor *w, *b;
      if (!Operands(ctx, k, &w, &b)) return absl::InternalError("convolution operands changed");
      ONNXKIT_ASSIGN_OR_RETURN(memory wei, s.weight.Get(*w, s.wei_user, s.wei));
      if (stages_[k].source >= 0) {
        current = results[static_cast<size_t>(stages_[k].source)];
        current_slot = result_slot[static_cast<size_t>(stages_[k].source)];
      } else if (stages_[k].reads_x) {
        current = x_memory;
        current_slot = -1;
      }
      if (checked && k >= checks->from) {
        const int source = stages_[k].source >= 0 ? stages_[k].source : static_cast<int>(k) - 1;
        const bool from_x = stages_[k].reads_x;
        auto stage_bound = [&] {
          const double in = from_x ? checks->x_bound : bounds[static_cast<size_t>(source)];
          return StageBound(ctx, plan, k, in, bounds, *x, checks->x_bound);
        };
        double bound = stage_bound();
        if (!(bound < kSafeBound)) {
          // Measured: the source (X's largest magnitude is known), and a
          // residual from inside the sequence.
          if (!from_x) bounds[static_cast<size_t>(source)] = Measure(current);
          if (s.residual_stage >= 0) {
            const size_t r = static_cast<size_t>(s.residual_stage);
            bounds[r] = Measure(results[r]);
          }
          if (stages_[k].join && !stages_[k].join->reads_x) {
            const size_t r = static_cast<size_t>(stages_[k].join->source);
            bounds[r] = Measure(results[r]);
          }
          g_measured_stages.fetch_add(1, std::memory_order_relaxed);
          bound = stage_bound();
        }
        if (!(bound < kSafeBound)) {
          *unbounded = true;
          return absl::OkStatus();
        }
        bounds[k] = bound;
      }
      std::vector<int> busy = {current_slot};
      for (size_t j = 0; j < k; ++j) {
        if (result_slot[j] >= 0 && ReadLater(plan, j, k)) busy.push_back(result_slot[j]);
      }
      int src_slot = current_slot;
      memory src = current;
      // X reordered: shared with the later readers of X in the same layout
      // (this sequence's own, or the run's other kernels').
      const bool x_reordered = s.src_in && !s.shuffle && s.own_shuffle == 0 && current_slot == -1 &&
                               current.get_data_handle() == x_memory.get_data_handle();
      const void* shared = x_reordered ? FindLayoutCopy(ctx.Value(0), s.src) : nullptr;
      void* kept = nullptr;
      if (x_reordered && shared == nullptr) {
        bool later = ctx.InputReadLater(0);
        for (size_t j = k + 1; j < plan.stages.size() && !later; ++j)
          later = stages_[j].reads_x && plan.stages[j].src == s.src;
        if (later) kept = s.src_keeper.Keep(ctx.Value(0), s.src);
      }
      if (shared != nullptr || kept != nullptr) {
        ONNXKIT_RETURN_IF_ERROR(Guard("convolution memory", [&] {
          src = memory(s.src, Engine(), shared != nullptr ? const_cast<void*>(shared) : kept);
        }));  // (src_slot stays -1: X's)
      }
      if (s.src_in && shared == nullptr) {
        if (kept == nullptr) {
          src_slot = FreeSlot(busy);
          ONNXKIT_ASSIGN_OR_RETURN(src, ScratchMemory(s.src, src_slot));
          busy.push_back(src_slot);
        }
        memory from = current, to = src;
        if (s.own_shuffle > 0) {
          ShuffleChannelsLast(s.src, s.own_shuffle, static_cast<const float*>(current.get_data_handle()),
                              static_cast<float*>(src.get_data_handle()));
        } else if (s.own_src_in) {
          ONNXKIT_RETURN_IF_ERROR(TransposeChannels(current.get_desc(), s.src,
                                                    static_cast<const float*>(current.get_data_handle()),
                                                    static_cast<float*>(src.get_data_handle())));
        } else {
          if (s.shuffle) {
            ONNXKIT_RETURN_IF_ERROR(Guard("shuffle memory", [&] {
              from = memory(s.shuffle_from, Engine(), current.get_data_handle());
              to = memory(s.shuffle_to, Engine(), src.get_data_handle());
            }));
          }
          ONNXKIT_RETURN_IF_ERROR(
              cpu::Execute("source reorder", s.src_in, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}));
        }
      }
      // The last stage writes Y directly where its layout is plain.
      memory dst;
      int dst_slot = -1;
      const memory* inner = s.residual_stage >= 0 ? &results[static_cast<size_t>(s.residual_stage)] : nullptr;
      // A residual from inside the sequence in dst's layout that nothing
      // reads afterwards (nor this stage as its source or pooled join) is
      // summed in place: the convolution adds onto it (oneDNN's sum
      // post-op) instead of onto a copy (a ResNet block's input, at every
      // identity block).
      const int r = s.residual_stage;
      const int in_place = inner != nullptr && !(last && !plan.pool && !plan.dst_out) && !s.own &&
                                   result_slot[static_cast<size_t>(r)] >= 0 &&
                                   result_slot[static_cast<size_t>(r)] != src_slot &&
                                   inner->get_desc() == s.dst &&
                                   !(stages_[k].join && stages_[k].join->source == r) &&
                                   !ReadLater(plan, static_cast<size_t>(r), k + 1)
                               ? result_slot[static_cast<size_t>(r)]
                               : -1;
      if (last && !plan.pool && !plan.dst_out) {
        ONNXKIT_RETURN_IF_ERROR(y_memory(&dst));
      } else if (in_place >= 0) {
        dst_slot = in_place;
        dst = *inner;
        g_in_place_sums.fetch_add(1, std::memory_order_relaxed);
      } else {
        dst_slot = FreeSlot(busy);
        ONNXKIT_ASSIGN_OR_RETURN(dst, ScratchMemory(s.dst, dst_slot));
        busy.push_back(dst_slot);
      }
      const float* residual = nullptr;
      if (in_place < 0) {
        ONNXKIT_ASSIGN_OR_RETURN(residual, StageResidual(ctx, s, last, dst, inner, busy));
      }
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
      if (b != nullptr) {
        ONNXKIT_RETURN_IF_ERROR(
            Guard("convolution memory", [&] { args[DNNL_ARG_BIAS] = UserMemory(*b, s.bias); }));
      }
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("convolution", s.primitive, args));
      if (s.winograd) g_winograd_runs.fetch_add(1, std::memory_order_relaxed);
      if (s.strided_channels_last) g_strided_channels_last_runs.fetch_add(1, std::memory_order_relaxed);
      // A lone swish before a squeeze-and-excitation runs in its channel sums.
      const bool swish_in_se = stages_[k].se.has_value() && s.se_layout != SeLayout::kChannelsLast &&
                               s.resolved.size() == 1 && HasSwish(s.resolved);
      if (s.own && !last && !swish_in_se) {
        ApplyPostOps(static_cast<float*>(dst.get_data_handle()), residual,
                     static_cast<int64_t>(s.dst.get_size() / sizeof(float)), s.resolved);
      }
      if (stages_[k].se.has_value()) {
        const Tensor *w1, *b1, *w2, *b2;
        const int64_t c = s.y_shape[1];
        int64_t hw = 1;
        for (size_t d = 2; d < s.y_shape.size(); ++d) hw *= s.y_shape[d];
        if (!SeOperands(ctx, k, static_cast<int>(s.y_shape.size()), c, &w1, &b1, &w2, &b2))
          return absl::InternalError("squeeze-and-excitation operands changed");
        se_scratch_.resize(static_cast<size_t>(2 * c + w1->dim(0)));
        // An image's floats in dst (blocked: padded to whole blocks).
        const int64_t image = (c + s.se_block - 1) / s.se_block * s.se_block * hw;
        float* data = static_cast<float*>(dst.get_data_handle());
        for (int64_t i = 0; i < s.y_shape[0]; ++i) {
          SqueezeExciteImage(data + i * image, s.se_layout, s.se_block, c, hw, *stages_[k].se, *w1, b1, *w2,
                             b2, s.own && swish_in_se, se_scratch_.data());
        }
      }
      if (s.join) {
        ONNXKIT_RETURN_IF_ERROR(RunJoin(k, plan, x_memory, results, result_slot, dst, dst_slot));
        current = results[k];
        current_slot = result_slot[k];
        continue;
      }
      current = dst;
      current_slot = dst_slot;
      results[k] = dst;
      result_slot[k] = dst_slot;
    }
    if (plan.pool) {
      memory pooled;
      int pooled_slot = -1;
      if (!plan.dst_out) {
        ONNXKIT_RETURN_IF_ERROR(y_memory(&pooled));
      } else {
        pooled_slot = FreeSlot({current_slot});
        ONNXKIT_ASSIGN_OR_RETURN(pooled, ScratchMemory(plan.pool_dst, pooled_slot));
      }
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("pooling", plan.pool, {{DNNL_ARG_SRC, current}, {DNNL_ARG_DST, pooled}}));
      current = pooled;
      current_slot = pooled_slot;
    }
    if (plan.own_out) {
      ONNXKIT_RETURN_IF_ERROR(TransposeChannels(current.get_desc(), plan.y_plain,
                                                static_cast<const float*>(current.get_data_handle()), y));
    } else if (plan.dst_out) {
      memory y_user;
      ONNXKIT_RETURN_IF_ERROR(y_memory(&y_user));
      ONNXKIT_RETURN_IF_ERROR(cpu::Execute("destination reorder", plan.dst_out,
                                           {{DNNL_ARG_FROM, current}, {DNNL_ARG_TO, y_user}}));
    }
    if (plan.own_last && final_stage.residual_stage >= 0) {
      // The residual from inside the sequence, in Y's plain layout.
      const memory& r = results[static_cast<size_t>(final_stage.residual_stage)];
      memory r_plain = r;
      if (final_stage.inner_plain) {
        int held = result_slot[static_cast<size_t>(final_stage.residual_stage)];
        ONNXKIT_ASSIGN_OR_RETURN(r_plain, ScratchMemory(plan.y_plain, FreeSlot({held})));
        ONNXKIT_RETURN_IF_ERROR(cpu::Execute("residual reorder", final_stage.inner_plain,
                                             {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, r_plain}}));
      }
      ApplyPostOps(y, static_cast<const float*>(r_plain.get_data_handle()), y_size,
                   final_stage.resolved);
    } else if (plan.own_last) {
      const Tensor* residual = nullptr;
      if (final_stage.residual >= 0) {
        ONNXKIT_ASSIGN_OR_RETURN(residual, ctx.Input(final_stage.residual));
      }
      if (residual != nullptr && (residual->dtype() != pb::kFloat || residual->shape() != plan.y_shape))
        return absl::InternalError("residual changed");
      ApplyPostOps(y, residual != nullptr ? residual->data<float>() : nullptr, y_size, final_stage.resolved);
    }
    return absl::OkStatus();
  }

 private:
  std::vector<SequenceStage> stages_;
  std::vector<StageWeights> weights_;
  std::vector<float> se_scratch_;  // squeeze-and-excitation's means, gates and hidden values
  InputKey key_;
  SequencePlan plans_[2];  // fast, safe
  std::optional<WindowAttrs> pool_;
  bool global_pool_;
  std::shared_ptr<Buffer> means_scratch_;  // RunPlan's
  bool bf16_;
  bool plain_pointwise_;
  int64_t winograd_min_positions_;
};

// Two Conv branches reading the same X whose results a Concat joins along
// the channels (a SqueezeNet fire module's expand convolutions): each runs
// as a one-stage sequence writing straight into its channels of the
// Concat's result, which for a batch of one are contiguous; the Concat
// copies nothing.
class ConvConcatKernel : public CpuKernel {
 public:
  // branches_[order[i]] makes the Concat's input i.
  ConvConcatKernel(std::vector<std::unique_ptr<ConvSequenceKernel>> branches, std::vector<int> order,
                   int64_t axis, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), branches_(std::move(branches)), order_(std::move(order)), axis_(axis) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<SequencePlan*> plans;
    for (const std::unique_ptr<ConvSequenceKernel>& branch : branches_) {
      plans.push_back(branch->Prepare(ctx));
      if (plans.back() == nullptr) return Fallback(ctx);
    }
    const std::vector<int64_t>& first = plans[static_cast<size_t>(order_[0])]->y_shape;
    const int64_t rank = static_cast<int64_t>(first.size());
    if (rank < 3 || first[0] != 1 || (axis_ < 0 ? axis_ + rank : axis_) != 1) return Fallback(ctx);
    std::vector<int64_t> y_shape = first;
    y_shape[1] = 0;
    for (const SequencePlan* plan : plans) {
      if (plan->y_shape.size() != first.size()) return Fallback(ctx);
      for (int64_t d = 0; d < rank; ++d) {
        if (d != 1 && plan->y_shape[static_cast<size_t>(d)] != first[static_cast<size_t>(d)]) return Fallback(ctx);
      }
      y_shape[1] += plan->y_shape[1];
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, y_shape));
    float* out = y->mutable_data<float>();
    for (int b : order_) {
      SequencePlan& plan = *plans[static_cast<size_t>(b)];
      ONNXKIT_RETURN_IF_ERROR(branches_[static_cast<size_t>(b)]->Execute(ctx, plan, out));
      int64_t size = 1;
      for (int64_t d : plan.y_shape) size *= d;
      out += size;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<ConvSequenceKernel>> branches_;
  std::vector<int> order_;
  int64_t axis_;
};

}  // namespace

std::unique_ptr<Kernel> MakeConvConcat(std::vector<SequenceStage> branches, std::vector<int> order,
                                       int64_t axis, std::unique_ptr<Kernel> fallback,
                                       std::optional<WindowAttrs> pool, bool bf16) {
  std::vector<std::unique_ptr<ConvSequenceKernel>> kernels;
  for (SequenceStage& stage : branches) {
    std::vector<SequenceStage> one;
    one.push_back(std::move(stage));
    kernels.push_back(std::make_unique<ConvSequenceKernel>(std::move(one), nullptr, pool, bf16,
                                                           /*plain_pointwise=*/!pool.has_value(),
                                                           kBranchWinogradMinPositions));
  }
  return std::unique_ptr<Kernel>(
      new ConvConcatKernel(std::move(kernels), std::move(order), axis, std::move(fallback)));
}

bool WinogradSupported() {
  // The ISA values are bit sets: each one holds the bits of those it extends.
  const int avx512 = static_cast<int>(dnnl::cpu_isa::avx512_core);
  return (static_cast<int>(dnnl::get_effective_cpu_isa()) & avx512) == avx512;
}

int64_t WinogradConvolutionRuns() { return g_winograd_runs.load(std::memory_order_relaxed); }
int64_t StridedChannelsLastRuns() { return g_strided_channels_last_runs.load(std::memory_order_relaxed); }
int64_t InPlaceResidualSums() { return g_in_place_sums.load(std::memory_order_relaxed); }

int64_t MeasuredConvolutionStages() { return g_measured_stages.load(std::memory_order_relaxed); }

int64_t SetWinogradMinOutputChannels(int64_t channels) {
  return g_winograd_min_output_channels.exchange(channels, std::memory_order_relaxed);
}

std::unique_ptr<Kernel> MakeConvSequence(std::vector<SequenceStage> stages, std::unique_ptr<Kernel> fallback,
                                         std::optional<WindowAttrs> pool, bool bf16, bool global_pool) {
  const bool global = global_pool && pool.has_value();
  return std::unique_ptr<Kernel>(new ConvSequenceKernel(std::move(stages), std::move(fallback),
                                                        std::move(pool), bf16, /*plain_pointwise=*/false,
                                                        kWinogradMinPositions, global));
}

}  // namespace onnxkit::runner::cpu
