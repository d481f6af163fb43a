// cpu Einsum: a float32 contraction of two inputs as a batch of matrix
// products (oneDNN's sgemm). Labels in both inputs and the output are the
// batch, labels in both inputs only are contracted, labels in one input and
// the output are its free rows or columns. Each input is used in place when
// its axes already run batch, rows, contraction (or batch, contraction,
// rows: a transposed product), else copied into that order once; the
// product is written into the output directly when the output's labels run
// batch, A's free, B's free, else permuted into it. Sums over labels of one
// input only, repeated labels (diagonals), broadcast "..." dims of size 1
// against larger ones, other element types and other input counts run on
// the reference kernel, which also reports every error. Products are float32
// sums (the reference's are double).
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dnnl.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/math.h"
#include "runner/cpu/parallel_for.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/einsum_labels.h"

namespace onnxkit::runner::cpu {
namespace {

// dst = src with its axes reordered: dst axis i is src axis perm[i].
void Permute(const float* src, const std::vector<int64_t>& shape, const std::vector<size_t>& perm, float* dst) {
  const size_t rank = shape.size();
  std::vector<int64_t> src_strides(rank, 1), dims(rank);
  for (size_t i = rank; i-- > 1;) src_strides[i - 1] = src_strides[i] * shape[i];
  std::vector<int64_t> stride(rank);
  int64_t total = 1;
  for (size_t i = 0; i < rank; ++i) {
    dims[i] = shape[perm[i]];
    stride[i] = src_strides[perm[i]];
    total *= dims[i];
  }
  if (total == 0) return;
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t n = dims[rank - 1], step = stride[rank - 1];
  const int64_t rows = total / n;
  ParallelFor(rows, total >= (int64_t{1} << 16), [&](int64_t row) {
    int64_t rest = row, from = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      from += (rest % dims[d]) * stride[d];
      rest /= dims[d];
    }
    float* out = dst + row * n;
    for (int64_t j = 0; j < n; ++j) out[j] = src[from + j * step];
  });
}

// The axes of `labels` in the order of `order`: perm[i] is the axis of
// order[i].
std::vector<size_t> AxesOf(const std::vector<int>& labels, const std::vector<int>& order) {
  std::vector<size_t> perm;
  for (int l : order) perm.push_back(static_cast<size_t>(std::find(labels.begin(), labels.end(), l) - labels.begin()));
  return perm;
}

bool IsIdentity(const std::vector<size_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != i) return false;
  }
  return true;
}

bool HasRepeats(std::vector<int> labels) {
  std::sort(labels.begin(), labels.end());
  return std::adjacent_find(labels.begin(), labels.end()) != labels.end();
}

class EinsumKernel : public CpuKernel {
 public:
  EinsumKernel(const ir::Node& node, const KernelInfo&, std::unique_ptr<Kernel> fallback)
      : CpuKernel(std::move(fallback)), equation_(node.GetString("equation").value_or("")) {}

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_inputs() != 2) return Fallback(ctx);
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    if (a->dtype() != pb::kFloat || b->dtype() != pb::kFloat) return Fallback(ctx);
    absl::StatusOr<reference::EinsumLabels> labeled = reference::LabelEinsum(equation_, {a->shape(), b->shape()});
    if (!labeled.ok()) return Fallback(ctx);
    const std::vector<int>& la = labeled->inputs[0];
    const std::vector<int>& lb = labeled->inputs[1];
    const std::vector<int>& lo = labeled->output;
    if (HasRepeats(la) || HasRepeats(lb)) return Fallback(ctx);
    auto size = [&](int l) { return labeled->size.at(l); };
    for (size_t i = 0; i < la.size(); ++i) {
      if (a->dim(static_cast<int>(i)) != size(la[i])) return Fallback(ctx);  // a broadcast "..." dim
    }
    for (size_t i = 0; i < lb.size(); ++i) {
      if (b->dim(static_cast<int>(i)) != size(lb[i])) return Fallback(ctx);
    }
    auto in = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
    std::vector<int> batch, free_a, free_b, contract;
    for (int l : lo) {
      if (in(la, l) && in(lb, l)) {
        batch.push_back(l);
      } else if (in(la, l)) {
        free_a.push_back(l);
      } else {
        free_b.push_back(l);
      }
    }
    for (int l : la) {
      if (in(lb, l) && !in(lo, l)) contract.push_back(l);
      if (!in(lb, l) && !in(lo, l)) return Fallback(ctx);  // summed over A alone
    }
    for (int l : lb) {
      if (!in(la, l) && !in(lo, l)) return Fallback(ctx);
    }
    auto product = [&](const std::vector<int>& ls) {
      int64_t p = 1;
      for (int l : ls) p *= size(l);
      return p;
    };
    const int64_t batches = product(batch), m = product(free_a), n = product(free_b), k = product(contract);
    std::vector<int64_t> out_shape;
    for (int l : lo) out_shape.push_back(size(l));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutputUninitialized(0, pb::kFloat, out_shape));
    if (y->size() == 0) return absl::OkStatus();

    auto cat = [](std::vector<int> x, const std::vector<int>& y1, const std::vector<int>& y2) {
      x.insert(x.end(), y1.begin(), y1.end());
      x.insert(x.end(), y2.begin(), y2.end());
      return x;
    };
    // A as [batch, M, K] ('N') or [batch, K, M] ('T'), else copied.
    const float* pa = a->data<float>();
    char ta = 'N';
    std::vector<size_t> perm = AxesOf(la, cat(batch, free_a, contract));
    if (!IsIdentity(perm)) {
      if (IsIdentity(AxesOf(la, cat(batch, contract, free_a)))) {
        ta = 'T';
      } else {
        a_copy_.resize(static_cast<size_t>(a->size()));
        Permute(pa, a->shape(), perm, a_copy_.data());
        pa = a_copy_.data();
      }
    }
    const float* pb_ = b->data<float>();
    char tb = 'N';
    perm = AxesOf(lb, cat(batch, contract, free_b));
    if (!IsIdentity(perm)) {
      if (IsIdentity(AxesOf(lb, cat(batch, free_b, contract)))) {
        tb = 'T';
      } else {
        b_copy_.resize(static_cast<size_t>(b->size()));
        Permute(pb_, b->shape(), perm, b_copy_.data());
        pb_ = b_copy_.data();
      }
    }
    const std::vector<int> c_labels = cat(batch, free_a, free_b);
    const bool direct = c_labels == lo;
    float* pc = y->mutable_data<float>();
    if (!direct) {
      c_.resize(static_cast<size_t>(y->size()));
      pc = c_.data();
    }
    if (k == 0) {
      std::fill_n(pc, batches * m * n, 0.0f);
    } else {
      const int64_t lda = ta == 'N' ? k : m, ldb = tb == 'N' ? n : k;
      // Many small products: one thread each; few large ones: threads inside.
      const bool outer = batches >= 2 * omp_get_max_threads() && m * n * k < (int64_t{1} << 21);
      dnnl_status_t failed = dnnl_success;
      ParallelFor(batches, outer, [&](int64_t i) {
        dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, 1.0f, pa + i * m * k, lda, pb_ + i * k * n, ldb, 0.0f,
                                      pc + i * m * n, n);
        if (st != dnnl_success) failed = st;
      });
      if (failed != dnnl_success) return absl::InternalError("oneDNN sgemm failed in Einsum");
    }
    if (!direct) {
      std::vector<int64_t> c_shape;
      for (int l : c_labels) c_shape.push_back(size(l));
      Permute(pc, c_shape, AxesOf(c_labels, lo), y->mutable_data<float>());
    }
    return absl::OkStatus();
  }

 private:
  std::string equation_;
  std::vector<float> a_copy_, b_copy_, c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeEinsum(const ir::Node& node, const KernelInfo& info) {
  return MakeCpu<EinsumKernel>(node, info);
}

}  // namespace onnxkit::runner::cpu
