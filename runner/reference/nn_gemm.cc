// Reference kernels: Gemm, MatMul (numpy batching, 1-D operands),
// MatMulInteger and Det, and the blocked matrix product the nn kernels share.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

// c0..c3[j] += a0..a3 * b[j] for j < n. Fixed-size inner chunks let the
// compiler vectorize without runtime alias checks.
template <typename C>
inline void Axpy4(int64_t n, C a0, C a1, C a2, C a3, const C* __restrict b, C* __restrict c0, C* __restrict c1,
                  C* __restrict c2, C* __restrict c3) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int u = 0; u < 8; ++u) {
      C bv = b[j + u];
      c0[j + u] += a0 * bv;
      c1[j + u] += a1 * bv;
      c2[j + u] += a2 * bv;
      c3[j + u] += a3 * bv;
    }
  }
  for (; j < n; ++j) {
    C bv = b[j];
    c0[j] += a0 * bv;
    c1[j] += a1 * bv;
    c2[j] += a2 * bv;
    c3[j] += a3 * bv;
  }
}

template <typename C>
inline void Axpy1(int64_t n, C a0, const C* __restrict b, C* __restrict c0) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int u = 0; u < 8; ++u) c0[j + u] += a0 * b[j + u];
  }
  for (; j < n; ++j) c0[j] += a0 * b[j];
}

}  // namespace

template <typename C>
void MatMulAccumulate(int64_t m, int64_t n, int64_t k_dim, const C* a, int64_t a_row, int64_t a_col, const C* b,
                      int64_t ldb, C* c, int64_t ldc, bool accumulate) {
  if (!accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, C{});
  }
  // Column blocks keep four rows of C in L1 while B's rows stream by.
  constexpr int64_t kBlockN = 512;
  for (int64_t j0 = 0; j0 < n; j0 += kBlockN) {
    int64_t nb = std::min(kBlockN, n - j0);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      C* c0 = c + i * ldc + j0;
      const C* ai = a + i * a_row;
      for (int64_t k = 0; k < k_dim; ++k) {
        const C* ak = ai + k * a_col;
        Axpy4<C>(nb, ak[0], ak[a_row], ak[2 * a_row], ak[3 * a_row], b + k * ldb + j0, c0, c0 + ldc, c0 + 2 * ldc,
                 c0 + 3 * ldc);
      }
    }
    for (; i < m; ++i) {
      C* c0 = c + i * ldc + j0;
      for (int64_t k = 0; k < k_dim; ++k) Axpy1<C>(nb, a[i * a_row + k * a_col], b + k * ldb + j0, c0);
    }
  }
}

template void MatMulAccumulate<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                                      float*, int64_t, bool);
template void MatMulAccumulate<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t, const double*,
                                       int64_t, double*, int64_t, bool);
template void MatMulAccumulate<uint64_t>(int64_t, int64_t, int64_t, const uint64_t*, int64_t, int64_t,
                                         const uint64_t*, int64_t, uint64_t*, int64_t, bool);

namespace {

// The accumulation type of a Gemm/MatMul element type: float for 16-bit
// floats, double for double, wrapping uint64 for integers.
template <typename T>
using MatT = std::conditional_t<std::is_integral_v<T>, uint64_t, ComputeT<T>>;

template <typename T>
const MatT<T>* AsMat(const Tensor& t, std::vector<MatT<T>>& storage) {
  using C = MatT<T>;
  if constexpr (std::is_integral_v<T>) {
    storage.resize(static_cast<size_t>(t.size()));
    const T* p = t.data<T>();
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<C>(static_cast<int64_t>(p[i]));
    return storage.data();
  } else {
    return ElementsAs<T, C>(t, storage);
  }
}

bool IsMatMulType(int32_t dtype) {
  switch (dtype) {
    case 1: case 6: case 7: case 10: case 11: case 12: case 13: case 16: return true;
    default: return false;
  }
}

class GemmKernel : public Kernel {
 public:
  GemmKernel(float alpha, float beta, bool trans_a, bool trans_b)
      : alpha_(alpha), beta_(beta), trans_a_(trans_a), trans_b_(trans_b) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* c, ctx.OptionalInput(2));
    if (a->rank() != 2 || b->rank() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gemm needs 2-D A and B, got ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
    }
    if (a->dtype() != b->dtype() || (c != nullptr && c->dtype() != a->dtype())) {
      return absl::InvalidArgumentError("Gemm inputs A, B and C must have one element type");
    }
    if (!IsMatMulType(a->dtype())) {
      return absl::UnimplementedError(absl::StrCat("Gemm does not support ", DescribeTensor(*a)));
    }
    int64_t m = trans_a_ ? a->dim(1) : a->dim(0);
    int64_t k = trans_a_ ? a->dim(0) : a->dim(1);
    int64_t kb = trans_b_ ? b->dim(1) : b->dim(0);
    int64_t n = trans_b_ ? b->dim(0) : b->dim(1);
    if (k != kb) {
      return absl::InvalidArgumentError(absl::StrCat("Gemm inner dims differ: A ", DescribeTensor(*a), " (transA ",
                                                     trans_a_, "), B ", DescribeTensor(*b), " (transB ", trans_b_, ")"));
    }
    std::vector<int64_t> out_shape = {m, n};
    std::vector<int64_t> c_index;
    if (c != nullptr) {
      std::vector<int64_t> shapes[] = {c->shape(), out_shape};
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> bshape, BroadcastShapes(shapes));
      if (bshape != out_shape || c->rank() > 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("Gemm C ", DescribeTensor(*c), " does not broadcast to [", m, ", ", n, "]"));
      }
      c_index = BroadcastIndices(c->shape(), out_shape);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), out_shape));
    return VisitNumeric(a->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::UnimplementedError("Gemm on bool");
      } else {
        using C = MatT<T>;
        std::vector<C> sa, sb, bt, acc(static_cast<size_t>(m * n));
        const C* pa = AsMat<T>(*a, sa);
        const C* pb = AsMat<T>(*b, sb);
        if (trans_b_) {  // rows of B must be contiguous: transpose it once
          bt.resize(static_cast<size_t>(k * n));
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < k; ++j) bt[static_cast<size_t>(j * n + i)] = pb[i * k + j];
          }
          pb = bt.data();
        }
        MatMulAccumulate<C>(m, n, k, pa, trans_a_ ? 1 : k, trans_a_ ? m : 1, pb, n, acc.data(), n, false);
        T* py = y->mutable_data<T>();
        const T* pc = c != nullptr ? c->data<T>() : nullptr;
        for (int64_t i = 0; i < m * n; ++i) {
          if constexpr (std::is_integral_v<T>) {
            if (alpha_ == 1.0f && beta_ == 1.0f) {
              uint64_t v = acc[static_cast<size_t>(i)];
              if (pc != nullptr) v += static_cast<uint64_t>(static_cast<int64_t>(pc[c_index[static_cast<size_t>(i)]]));
              py[i] = static_cast<T>(v);
            } else {
              double v = alpha_ * static_cast<double>(static_cast<T>(acc[static_cast<size_t>(i)]));
              if (pc != nullptr) v += beta_ * static_cast<double>(pc[c_index[static_cast<size_t>(i)]]);
              py[i] = static_cast<T>(v);
            }
          } else {
            C v = static_cast<C>(alpha_) * acc[static_cast<size_t>(i)];
            if (pc != nullptr) {
              v += static_cast<C>(beta_) * static_cast<C>(static_cast<ComputeT<T>>(pc[c_index[static_cast<size_t>(i)]]));
            }
            py[i] = static_cast<T>(v);
          }
        }
        return absl::OkStatus();
      }
    });
  }

 private:
  float alpha_, beta_;
  bool trans_a_, trans_b_;
};

// Batched product of a [.., m, k] and b [.., k, n] (already promoted from
// 1-D) with numpy batch broadcasting into y (element type T).
template <typename T>
absl::Status BatchedMatMul(const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape,
                           const MatT<T>* a, const MatT<T>* b, const std::vector<int64_t>& out_batch, T* y) {
  using C = MatT<T>;
  size_t ra = a_shape.size(), rb = b_shape.size();
  int64_t m = a_shape[ra - 2], k = a_shape[ra - 1], n = b_shape[rb - 1];
  std::vector<int64_t> a_batch(a_shape.begin(), a_shape.end() - 2), b_batch(b_shape.begin(), b_shape.end() - 2);
  std::vector<int64_t> ia = BroadcastIndices(a_batch, out_batch), ib = BroadcastIndices(b_batch, out_batch);
  std::vector<C> acc(static_cast<size_t>(m * n));
  for (size_t bi = 0; bi < ia.size(); ++bi) {
    MatMulAccumulate<C>(m, n, k, a + ia[bi] * m * k, k, 1, b + ib[bi] * k * n, n, acc.data(), n, false);
    T* out = y + static_cast<int64_t>(bi) * m * n;
    for (int64_t i = 0; i < m * n; ++i) out[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
  }
  return absl::OkStatus();
}

// Shapes of a numpy matmul: the promoted operand shapes, the broadcast batch
// dims, and the output shape (promoted dims removed again).
struct MatMulShapes {
  std::vector<int64_t> a, b, batch, out;
};

absl::StatusOr<MatMulShapes> ResolveMatMul(const Tensor& ta, const Tensor& tb, std::string_view op) {
  if (ta.rank() < 1 || tb.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(op), " needs operands of rank >= 1, got ", DescribeTensor(ta), " and ", DescribeTensor(tb)));
  }
  MatMulShapes s{ta.shape(), tb.shape(), {}, {}};
  if (ta.rank() == 1) s.a.insert(s.a.begin(), 1);
  if (tb.rank() == 1) s.b.push_back(1);
  if (s.a.back() != s.b[s.b.size() - 2]) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(op), " inner dims differ: ", DescribeTensor(ta), " and ", DescribeTensor(tb)));
  }
  std::vector<int64_t> shapes[] = {std::vector<int64_t>(s.a.begin(), s.a.end() - 2),
                                   std::vector<int64_t>(s.b.begin(), s.b.end() - 2)};
  ONNXKIT_ASSIGN_OR_RETURN(s.batch, BroadcastShapes(shapes));
  s.out = s.batch;
  if (ta.rank() > 1) s.out.push_back(s.a[s.a.size() - 2]);
  if (tb.rank() > 1) s.out.push_back(s.b.back());
  if (!CheckedElementCount(s.out)) return absl::InvalidArgumentError(absl::StrCat(Sv(op), " output size overflows"));
  return s;
}

// Integer operand minus its zero point (scalar, per-row of A given as [M]
// or [.., M, 1], per-column of B as [N] or [.., 1, N]) as wrapping uint64.
absl::StatusOr<std::vector<uint64_t>> Dequantize(const Tensor& x, const Tensor* zp, bool per_row,
                                                 std::string_view what) {
  std::vector<uint64_t> out(static_cast<size_t>(x.size()));
  std::vector<int64_t> zidx;
  if (zp != nullptr && zp->dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), " zero point ", DescribeTensor(*zp), " does not match ",
                                                   DescribeTensor(x)));
  }
  if (zp != nullptr && zp->size() > 1) {
    std::vector<int64_t> zshape = zp->shape();
    if (zshape.size() == 1 && per_row) zshape.push_back(1);
    std::vector<int64_t> shapes[] = {zshape, x.shape()};
    auto b = BroadcastShapes(shapes);
    if (!b.ok() || *b != x.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(what), " zero point ", DescribeTensor(*zp), " does not fit ", DescribeTensor(x)));
    }
    zidx = BroadcastIndices(zshape, x.shape());
  }
  auto load = [&](const Tensor& t, int64_t i) -> int64_t {
    return t.dtype() == 3 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
  };
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t z = 0;
    if (zp != nullptr && zp->size() > 0) z = load(*zp, zidx.empty() ? 0 : zidx[static_cast<size_t>(i)]);
    out[static_cast<size_t>(i)] = static_cast<uint64_t>(load(x, i) - z);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeGemm(const ir::Node& node, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new GemmKernel(AttrFloat(node, "alpha", 1.0f), AttrFloat(node, "beta", 1.0f),
                                                AttrInt(node, "transA", 0) != 0, AttrInt(node, "transB", 0) != 0));
}

absl::Status MatMul(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (a->dtype() != b->dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul operand types differ: ", DescribeTensor(*a), " and ", DescribeTensor(*b)));
  }
  if (!IsMatMulType(a->dtype())) return absl::UnimplementedError(absl::StrCat("MatMul on ", DescribeTensor(*a)));
  ONNXKIT_ASSIGN_OR_RETURN(MatMulShapes s, ResolveMatMul(*a, *b, "MatMul"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), s.out));
  return VisitNumeric(a->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t> ||
                  std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t>) {
      return absl::UnimplementedError("MatMul on this element type");
    } else {
      using C = MatT<T>;
      std::vector<C> va, vb;
      const C* pa = AsMat<T>(*a, va);
      const C* pb = AsMat<T>(*b, vb);
      return BatchedMatMul<T>(s.a, s.b, pa, pb, s.batch, y->mutable_data<T>());
    }
  });
}

absl::Status MatMulInteger(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a_zp, ctx.OptionalInput(2));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b_zp, ctx.OptionalInput(3));
  for (const Tensor* t : {a, b}) {
    if (t->dtype() != 2 && t->dtype() != 3) {
      return absl::InvalidArgumentError(absl::StrCat("MatMulInteger needs int8 or uint8 inputs, got ", DescribeTensor(*t)));
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(MatMulShapes s, ResolveMatMul(*a, *b, "MatMulInteger"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<uint64_t> va, Dequantize(*a, a_zp, a->rank() > 1, "A"));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<uint64_t> vb, Dequantize(*b, b_zp, false, "B"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 6, s.out));
  return BatchedMatMul<int32_t>(s.a, s.b, va.data(), vb.data(), s.batch, y->mutable_data<int32_t>());
}

absl::Status Det(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() < 2 || x->dim(x->rank() - 1) != x->dim(x->rank() - 2)) {
    return absl::InvalidArgumentError(absl::StrCat("Det needs square matrices [*, M, M], got ", DescribeTensor(*x)));
  }
  int64_t n = x->dim(x->rank() - 1);
  std::vector<int64_t> out_shape(x->shape().begin(), x->shape().end() - 2);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  return VisitFloat(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    std::vector<double> storage;
    const double* px = ElementsAs<T, double>(*x, storage);
    std::vector<double> lu(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < y->size(); ++b) {
      std::copy(px + b * n * n, px + (b + 1) * n * n, lu.begin());
      double det = 1;
      // LU with partial pivoting; each row swap flips the sign.
      for (int64_t c = 0; c < n && det != 0; ++c) {
        int64_t p = c;
        for (int64_t r = c + 1; r < n; ++r) {
          if (std::abs(lu[static_cast<size_t>(r * n + c)]) > std::abs(lu[static_cast<size_t>(p * n + c)])) p = r;
        }
        if (lu[static_cast<size_t>(p * n + c)] == 0) {
          det = 0;
          break;
        }
        if (p != c) {
          for (int64_t j = 0; j < n; ++j) std::swap(lu[static_cast<size_t>(p * n + j)], lu[static_cast<size_t>(c * n + j)]);
          det = -det;
        }
        double pivot = lu[static_cast<size_t>(c * n + c)];
        det *= pivot;
        for (int64_t r = c + 1; r < n; ++r) {
          double f = lu[static_cast<size_t>(r * n + c)] / pivot;
          for (int64_t j = c; j < n; ++j) lu[static_cast<size_t>(r * n + j)] -= f * lu[static_cast<size_t>(c * n + j)];
        }
      }
      y->mutable_data<T>()[b] = static_cast<T>(det);
    }
    return absl::OkStatus();
  });
}

}  // namespace onnxkit::runner::reference
