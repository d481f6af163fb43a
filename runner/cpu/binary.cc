// cpu broadcasting binary kernels on float tensors: Add, Sub, Mul, Div on
// oneDNN's binary primitive (ranks padded with leading 1s; a broadcasting
// loop where oneDNN has only its slow reference code), Pow with a
// one-element constant exponent on eltwise_pow (squares and cubes on an
// element loop), two-input Max / Min on a
// broadcasting loop (NaN propagates, which oneDNN's max/min does not
// promise), and Sum of equally shaped inputs on an element loop. Other
// types, ranks above 6, empty tensors, shapes that do not broadcast,
// variadic Max / Min and broadcasting Sum run on the reference kernels.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/cpu/vector_math.h"

namespace onnxkit::runner::cpu {
namespace {

using dt = dnnl::memory::data_type;

// Shapes of a broadcast pair padded to one rank (at least 1), and the
// output shape as ONNX states it (unpadded rank).
struct Broadcast {
  std::vector<int64_t> a, b, out_padded, out;
};

// False when the shapes do not broadcast (the reference reports that).
bool ResolveBroadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, Broadcast& r) {
  size_t rank = std::max(a.size(), b.size());
  r.a.assign(rank - a.size(), 1);
  r.a.insert(r.a.end(), a.begin(), a.end());
  r.b.assign(rank - b.size(), 1);
  r.b.insert(r.b.end(), b.begin(), b.end());
  r.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (r.a[i] != r.b[i] && r.a[i] != 1 && r.b[i] != 1) return false;
    r.out[i] = r.a[i] == 1 ? r.b[i] : r.a[i];
  }
  if (rank == 0) {
    r.a = r.b = {1};
  }
  r.out_padded = rank == 0 ? std::vector<int64_t>{1} : r.out;
  return true;
}

bool Covered(const Tensor& t) { return t.dtype() == pb::kFloat && t.rank() <= 6 && t.size() > 0; }

// Visits out[o] = f(a[ia], b[ib]) over a padded broadcast, the last dim as
// the inner loop (stride 0 or 1 on each side).
template <typename F>
void ForEachPair(const Broadcast& s, const float* a, const float* b, float* out, F f) {
  size_t rank = s.out_padded.size();
  std::vector<int64_t> sa(rank), sb(rank), idx(rank, 0);
  int64_t ra = 1, rb = 1;
  for (size_t i = rank; i-- > 0;) {
    sa[i] = s.a[i] == 1 ? 0 : ra;
    sb[i] = s.b[i] == 1 ? 0 : rb;
    ra *= s.a[i];
    rb *= s.b[i];
  }
  int64_t inner = s.out_padded[rank - 1], ia_step = sa[rank - 1], ib_step = sb[rank - 1];
  int64_t outer = 1;
  for (size_t i = 0; i + 1 < rank; ++i) outer *= s.out_padded[i];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t ia = 0, ib = 0;
    for (size_t i = 0; i + 1 < rank; ++i) {
      ia += idx[i] * sa[i];
      ib += idx[i] * sb[i];
    }
    float* po = out + o * inner;
    const float* pa = a + ia;
    const float* pb = b + ib;
    if (ia_step == 1 && ib_step == 1) {  // separate loops so that each vectorizes
      for (int64_t j = 0; j < inner; ++j) po[j] = f(pa[j], pb[j]);
    } else if (ia_step == 1) {
      for (int64_t j = 0; j < inner; ++j) po[j] = f(pa[j], *pb);
    } else if (ib_step == 1) {
      for (int64_t j = 0; j < inner; ++j) po[j] = f(*pa, pb[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) po[j] = f(*pa, *pb);
    }
    for (size_t i = rank - 1; i-- > 0;) {  // next outer index
      if (++idx[i] < s.out_padded[i]) break;
      idx[i] = 0;
    }
  }
}

// True for oneDNN's reference implementations, which are much slower than
// a plain loop for the broadcasts they are picked for.
bool IsReferenceImpl(const dnnl::primitive_desc_base& pd) {
  return std::string_view(pd.impl_info_str()).substr(0, 3) == "ref";
}

// Results of at most this many elements are computed by the loop: calling
// oneDNN costs more than the arithmetic.
constexpr int64_t kSmallOutput = 1024;

// Add, Sub, Mul, Div: one oneDNN binary primitive per input shape pair, or
// the broadcasting loop where oneDNN only has its reference implementation
// (e.g. the first operand broadcast, or a broadcast last dim) and for small
// results.
class BinaryKernel : public CpuKernel {
 public:
  BinaryKernel(dnnl::algorithm a, bool commutative, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), alg_(a), commutative_(commutative) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (!Covered(*a) || !Covered(*b)) return Fallback(ctx);
    if (a->shape() != key_a_ || b->shape() != key_b_ || !built_) {
      key_a_ = a->shape();
      key_b_ = b->shape();
      built_ = true;
      ok_ = Build();
    }
    if (!ok_) return Fallback(ctx);
    // oneDNN's binary may write over its first source (in place).
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             loop_ ? ctx.AllocateOutputUninitialized(0, pb::kFloat, shapes_.out)
                                   : ctx.AllocateOutputReusing(0, swapped_ ? 1 : 0, pb::kFloat, shapes_.out));
    if (loop_) {
      Loop(a->data<float>(), b->data<float>(), y->mutable_data<float>());
      return absl::OkStatus();
    }
    const Tensor* s0 = swapped_ ? b : a;
    const Tensor* s1 = swapped_ ? a : b;
    args_[DNNL_ARG_SRC_0] = src0_memory_.At(*s0, src0_);
    args_[DNNL_ARG_SRC_1] = src1_memory_.At(*s1, src1_);
    args_[DNNL_ARG_DST] = dst_memory_.At(*y, dst_);
    return Execute("binary", primitive_, args_);
  }

 private:
  bool Build() {
    if (!ResolveBroadcast(key_a_, key_b_, shapes_)) return false;
    // oneDNN prefers the full-size operand first: swap when legal.
    swapped_ = commutative_ && shapes_.a != shapes_.out_padded && shapes_.b == shapes_.out_padded;
    src0_ = PlainDesc(swapped_ ? shapes_.b : shapes_.a, dt::f32);
    src1_ = PlainDesc(swapped_ ? shapes_.a : shapes_.b, dt::f32);
    dst_ = PlainDesc(shapes_.out_padded, dt::f32);
    loop_ = false;
    return Guard("binary",
                 [&] {
                   dnnl::binary::desc d(alg_, src0_, src1_, dst_);
                   dnnl::binary::primitive_desc pd(d, Engine());
                   loop_ = IsReferenceImpl(pd) ||
                           CheckedElementCount(shapes_.out_padded).value_or(kSmallOutput + 1) <= kSmallOutput;
                   if (!loop_) primitive_ = dnnl::binary(pd);
                 })
        .ok();
  }

  // The same operation in float (exactly as rounded as oneDNN's and the
  // reference's results).
  void Loop(const float* a, const float* b, float* y) const {
    switch (alg_) {
      case dnnl::algorithm::binary_add:
        ForEachPair(shapes_, a, b, y, [](float x, float z) { return x + z; });
        break;
      case dnnl::algorithm::binary_sub:
        ForEachPair(shapes_, a, b, y, [](float x, float z) { return x - z; });
        break;
      case dnnl::algorithm::binary_mul:
        ForEachPair(shapes_, a, b, y, [](float x, float z) { return x * z; });
        break;
      default:
        ForEachPair(shapes_, a, b, y, [](float x, float z) { return x / z; });
        break;
    }
  }

  dnnl::algorithm alg_;
  bool commutative_;
  bool built_ = false, ok_ = false, swapped_ = false, loop_ = false;
  std::vector<int64_t> key_a_, key_b_;
  Broadcast shapes_;
  dnnl::memory::desc src0_, src1_, dst_;
  dnnl::binary primitive_;
  HeldMemory src0_memory_, src1_memory_, dst_memory_;
  std::unordered_map<int, dnnl::memory> args_;
};

// True when x holds -infinity: pow(-inf, e) for non-integer e is +inf in C
// (the reference) but NaN in eltwise_pow.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool HasNegativeInfinity(const float* x,
                                                                                      int64_t n) {
  int found = 0;
#pragma omp simd reduction(| : found)
  for (int64_t i = 0; i < n; ++i) found |= x[i] == -std::numeric_limits<float>::infinity();
  return found != 0;
}

// y = x^2: the float product is the square rounded once, as the
// reference's pow in double rounded to float.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SquareRow(const float* x, float* y,
                                                                            int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
}

// Pow(x, e) with e a one-element float constant: x * x for e = 2, CubeRow
// (vector_math.h) for e = 3, else eltwise_pow (1 * x^e).
class PowKernel : public CpuKernel {
 public:
  PowKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), constant_exponent_(IsSessionConstantInput(node, 1)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* e, ctx.Input(1));
    if (!constant_exponent_ || !Covered(*x) || e->dtype() != pb::kFloat || e->size() != 1 ||
        e->rank() > x->rank()) {
      return Fallback(ctx);
    }
    float exponent = e->data<float>()[0];
    if (exponent != std::nearbyint(exponent) && HasNegativeInfinity(x->data<float>(), x->size())) {
      return Fallback(ctx);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, x->shape()));
    if (exponent == 2 || exponent == 3) {
      const float* px = x->data<float>();
      float* py = y->mutable_data<float>();
      constexpr int64_t kChunk = 16384;
      const int64_t total = x->size(), chunks = (total + kChunk - 1) / kChunk;
      ParallelFor(chunks, chunks > 1, [&](int64_t i) {
        const int64_t begin = i * kChunk, n = std::min(kChunk, total - begin);
        if (exponent == 2) {
          SquareRow(px + begin, py + begin, n);
        } else {
          CubeRow(px + begin, py + begin, n);
        }
      });
      return absl::OkStatus();
    }
    dnnl::memory::desc desc = PlainDesc(x->shape(), dt::f32);
    if (!primitive_ || desc != desc_ || exponent != exponent_) {
      ONNXKIT_RETURN_IF_ERROR(Guard("pow", [&] {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_pow, desc,
                                      1.f, exponent);
        primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, Engine()));
      }));
      desc_ = desc;
      exponent_ = exponent;
    }
    return Execute("pow", primitive_,
                   {{DNNL_ARG_SRC, UserMemory(*x, desc)}, {DNNL_ARG_DST, UserMemory(*y, desc)}});
  }

 private:
  bool constant_exponent_;
  float exponent_ = 0;
  dnnl::memory::desc desc_;
  dnnl::primitive primitive_;
};

// Two-input Max / Min with numpy's NaN propagation.
class MaxMinKernel : public CpuKernel {
 public:
  MaxMinKernel(bool max, std::unique_ptr<Kernel> fallback) : CpuKernel(std::move(fallback)), max_(max) {}

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_inputs() != 2) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    Broadcast s;
    if (!Covered(*a) || !Covered(*b) || !ResolveBroadcast(a->shape(), b->shape(), s)) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, s.out));
    float* py = y->mutable_data<float>();
    if (max_) {
      ForEachPair(s, a->data<float>(), b->data<float>(), py, [](float x, float z) {
        return x != x ? x : z != z ? z : (x < z ? z : x);
      });
    } else {
      ForEachPair(s, a->data<float>(), b->data<float>(), py, [](float x, float z) {
        return x != x ? x : z != z ? z : (z < x ? z : x);
      });
    }
    return absl::OkStatus();
  }

 private:
  bool max_;
};

// y[i] = x0[i] + x1[i], then y[i] += xk[i] for each further input: the
// reference's left-to-right order, so the sums are bit-identical.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SumChunk(const float* const* xs,
                                                                           int64_t inputs, int64_t offset,
                                                                           float* y, int64_t n) {
  const float* a = xs[0] + offset;
  const float* b = xs[1] + offset;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  for (int64_t k = 2; k < inputs; ++k) {
    const float* c = xs[k] + offset;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] += c[i];
  }
}

// Sum of float tensors of one shape, in chunks that stay in the L1 cache
// while each input is added; large tensors split the chunks across OpenMP
// threads. One input is the output itself. Broadcasting and other types run
// on the reference kernel.
class SumKernel : public CpuKernel {
 public:
  SumKernel(const ir::Node&, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    int inputs = ctx.num_inputs();
    if (inputs < 1) return Fallback(ctx);
    std::vector<const float*> xs(static_cast<size_t>(inputs));
    const Tensor* first = nullptr;
    for (int i = 0; i < inputs; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(i));
      if (first == nullptr) first = x;
      if (x->dtype() != pb::kFloat || x->shape() != first->shape()) return Fallback(ctx);
      xs[static_cast<size_t>(i)] = x->data<float>();
    }
    if (inputs == 1) return ctx.SetOutput(0, RtValue::FromTensor(*first));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputReusing(0, 0, pb::kFloat, first->shape()));
    constexpr int64_t kChunk = 4096;             // floats per pass over the inputs
    constexpr int64_t kMinChunksPerThread = 16;  // keeps small tensors on the calling thread
    int64_t total = y->size(), chunks = (total + kChunk - 1) / kChunk;
    float* py = y->mutable_data<float>();
    const float* const* px = xs.data();
    int64_t threads = std::min<int64_t>(omp_get_max_threads(), chunks / kMinChunksPerThread);
    if (threads <= 1) {
      for (int64_t c = 0; c < chunks; ++c)
        SumChunk(px, inputs, c * kChunk, py + c * kChunk, std::min(kChunk, total - c * kChunk));
      return absl::OkStatus();
    }
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      SumChunk(px, inputs, c * kChunk, py + c * kChunk, std::min(kChunk, total - c * kChunk));
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeBinary(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, MakeReferenceKernel(node, info));
  const std::string& op = node.op_type();
  Kernel* k = nullptr;
  if (op == "Add") k = new BinaryKernel(dnnl::algorithm::binary_add, true, std::move(fallback));
  if (op == "Sub") k = new BinaryKernel(dnnl::algorithm::binary_sub, false, std::move(fallback));
  if (op == "Mul") k = new BinaryKernel(dnnl::algorithm::binary_mul, true, std::move(fallback));
  if (op == "Div") k = new BinaryKernel(dnnl::algorithm::binary_div, false, std::move(fallback));
  if (op == "Max" || op == "Min") k = new MaxMinKernel(op == "Max", std::move(fallback));
  if (op == "Pow") k = new PowKernel(node, info, std::move(fallback));
  if (op == "Sum") k = new SumKernel(node, info, std::move(fallback));
  if (k == nullptr) return fallback;
  return std::unique_ptr<Kernel>(k);
}

}  // namespace onnxkit::runner::cpu
