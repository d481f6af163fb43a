// Tests of the geometry that hands row-major products to a column-major
// BLAS (runner/gemm_geometry.h): each planned call is executed by an
// emulation of cublasGemmStridedBatchedEx's column-major semantics (every
// element read checked against its buffer) and compared with MatMul of
// the transposed tensors computed directly, on random shapes and
// permutations, so the call the cuda backend makes is checked without a
// GPU.
#include "runner/gemm_geometry.h"

#include <algorithm>
#include <array>
#include <functional>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace onnxkit::runner {
namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

// C[b] (rows x cols, column-major) = op(X[b]) op(W[b]) as the BLAS
// computes it; false (and a test failure) when an index leaves a buffer.
bool Emulate(const ColumnMajorCall& c, const std::vector<double>& x, const std::vector<double>& w,
             std::vector<double>* out) {
  auto in_bounds = [](int64_t i, size_t size) { return i >= 0 && static_cast<size_t>(i) < size; };
  // The stored matrices as cuBLASLt's layouts describe them.
  EXPECT_EQ(c.x_rows, c.trans_x ? c.depth : c.rows);
  EXPECT_EQ(c.x_cols, c.trans_x ? c.rows : c.depth);
  EXPECT_EQ(c.w_rows, c.trans_w ? c.cols : c.depth);
  EXPECT_EQ(c.w_cols, c.trans_w ? c.depth : c.cols);
  EXPECT_GE(c.ldx, std::max<int64_t>(1, c.x_rows));
  EXPECT_GE(c.ldw, std::max<int64_t>(1, c.w_rows));
  EXPECT_GE(c.ldc, std::max<int64_t>(1, c.rows));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < c.rows; ++i) {
      for (int64_t j = 0; j < c.cols; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < c.depth; ++l) {
          const int64_t xi = b * c.stride_x + (c.trans_x ? l + i * c.ldx : i + l * c.ldx);
          const int64_t wi = b * c.stride_w + (c.trans_w ? j + l * c.ldw : l + j * c.ldw);
          if (!in_bounds(xi, x.size()) || !in_bounds(wi, w.size())) {
            ADD_FAILURE() << "operand index out of bounds";
            return false;
          }
          sum += x[static_cast<size_t>(xi)] * w[static_cast<size_t>(wi)];
        }
        const int64_t ci = b * c.stride_c + i + j * c.ldc;
        if (!in_bounds(ci, out->size())) {
          ADD_FAILURE() << "result index out of bounds";
          return false;
        }
        (*out)[static_cast<size_t>(ci)] = sum;
      }
    }
  }
  return true;
}

// A packed tensor and its transpose through `perm` (empty: itself).
std::vector<double> Transposed(const std::vector<double>& data, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& perm, std::vector<int64_t>* out_dims) {
  if (perm.empty()) {
    *out_dims = dims;
    return data;
  }
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  out_dims->clear();
  for (int64_t p : perm) out_dims->push_back(dims[static_cast<size_t>(p)]);
  std::vector<double> out(data.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t offset = 0;
    for (size_t q = 0; q < rank; ++q) offset += index[q] * strides[static_cast<size_t>(perm[q])];
    out[o] = data[static_cast<size_t>(offset)];
    for (size_t q = rank; q-- > 0;) {
      if (++index[q] < (*out_dims)[q]) break;
      index[q] = 0;
    }
  }
  return out;
}

// ONNX MatMul (rank >= 2 both, batch broadcasting) computed directly.
std::vector<double> MatMul(const std::vector<double>& a, const std::vector<int64_t>& ad,
                           const std::vector<double>& b, const std::vector<int64_t>& bd,
                           std::vector<int64_t>* out_dims) {
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  std::vector<int64_t> batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a_batch.size() >= rank ? a_batch[i + a_batch.size() - rank] : 1;
    const int64_t db = i + b_batch.size() >= rank ? b_batch[i + b_batch.size() - rank] : 1;
    batch[i] = std::max(da, db);
  }
  *out_dims = batch;
  out_dims->push_back(m);
  out_dims->push_back(n);
  std::vector<double> y(static_cast<size_t>(Product(*out_dims)));
  const int64_t count = Product(batch);
  for (int64_t bi = 0; bi < count; ++bi) {
    // The batch index in each operand (broadcast dims read index 0).
    auto offset = [&](const std::vector<int64_t>& dims) {
      int64_t rest = bi, off = 0, stride = 1;
      for (size_t i = rank; i-- > 0;) {
        const int64_t coord = rest % batch[i];
        rest /= batch[i];
        const size_t lead = rank - dims.size();
        if (i >= lead) {
          const int64_t d = dims[i - lead];
          off += (d == 1 ? 0 : coord) * stride;
          stride *= d;
        }
      }
      return off;
    };
    const int64_t ao = offset(a_batch) * m * k, bo = offset(b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += a[static_cast<size_t>(ao + i * k + l)] * b[static_cast<size_t>(bo + l * n + j)];
        }
        y[static_cast<size_t>(bi * m * n + i * n + j)] = sum;
      }
    }
  }
  return y;
}

std::vector<double> Random(int64_t n, std::mt19937* rng) {
  std::uniform_int_distribution<int> d(-4, 4);  // small integers: exact sums
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(*rng);
  return v;
}

// Plans MatMul(transpose(a, perm_a), transpose(b, perm_b)) written through
// perm_y; when planned, the emulated call must equal the direct result.
// Returns whether it was planned.
bool CheckPermuted(const std::vector<int64_t>& a_shape, const std::vector<int64_t>& perm_a,
                   const std::vector<int64_t>& b_shape, const std::vector<int64_t>& perm_b,
                   const std::optional<std::vector<int64_t>>& perm_y, std::mt19937* rng) {
  std::optional<RowMajorProduct> p = PlanPermutedMatMul(a_shape, perm_a, b_shape, perm_b, perm_y, 8);
  if (!p) return false;
  const std::vector<double> a = Random(Product(a_shape), rng), b = Random(Product(b_shape), rng);
  std::vector<int64_t> ad, bd, yd, want_dims;
  const std::vector<double> at = Transposed(a, a_shape, perm_a, &ad);
  const std::vector<double> bt = Transposed(b, b_shape, perm_b, &bd);
  const std::vector<double> y = MatMul(at, ad, bt, bd, &yd);
  const std::vector<double> want = Transposed(y, yd, perm_y.value_or(std::vector<int64_t>{}), &want_dims);
  EXPECT_EQ(p->out_shape, want_dims);
  std::vector<double> got(want.size(), -1e300);
  if (!Emulate(ToColumnMajor(*p), b, a, &got)) return true;
  EXPECT_EQ(got, want);
  return true;
}

std::string Dims(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t d : v) s += std::to_string(d) + ",";
  return s;
}

TEST(GemmGeometryTest, PackedProductsMatchMatMul) {
  std::mt19937 rng(7);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [m, n, k, batch] : std::vector<std::array<int64_t, 4>>{
               {1, 1, 1, 1}, {3, 5, 4, 1}, {1, 7, 3, 2}, {6, 1, 5, 3}, {4, 4, 1, 2}}) {
        SCOPED_TRACE(std::to_string(ta) + std::to_string(tb) + " " + Dims({m, n, k, batch}));
        // Batches of A against one B (stride 0), and of both.
        for (bool shared_b : {true, false}) {
          const std::vector<double> a = Random(batch * m * k, &rng);
          const std::vector<double> b = Random((shared_b ? 1 : batch) * k * n, &rng);
          RowMajorProduct p = PackedProduct(ta, tb, m, n, k, batch, m * k, shared_b ? 0 : k * n);
          std::vector<double> got(static_cast<size_t>(batch * m * n));
          ASSERT_TRUE(Emulate(ToColumnMajor(p), b, a, &got));
          for (int64_t bi = 0; bi < batch; ++bi) {
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double sum = 0;
                for (int64_t l = 0; l < k; ++l) {
                  const double av = a[static_cast<size_t>(bi * m * k + (ta ? l * m + i : i * k + l))];
                  const int64_t bb = shared_b ? 0 : bi * k * n;
                  const double bv = b[static_cast<size_t>(bb + (tb ? j * k + l : l * n + j))];
                  sum += av * bv;
                }
                EXPECT_EQ(got[static_cast<size_t>(bi * m * n + i * n + j)], sum);
              }
            }
          }
        }
      }
    }
  }
}

TEST(GemmGeometryTest, AttentionTransposesArePlannedAndExact) {
  std::mt19937 rng(11);
  // Heads split from [1, tokens, heads, dim]: Q (0,2,1,3), K^T (0,2,3,1);
  // the context merged back by (0,2,1,3).
  EXPECT_TRUE(CheckPermuted({1, 6, 3, 4}, {0, 2, 1, 3}, {1, 6, 3, 4}, {0, 2, 3, 1}, std::nullopt, &rng));
  EXPECT_TRUE(
      CheckPermuted({1, 3, 6, 6}, {}, {1, 6, 3, 4}, {0, 2, 1, 3}, std::vector<int64_t>{0, 2, 1, 3}, &rng));
  EXPECT_TRUE(CheckPermuted({1, 6, 3, 4}, {0, 2, 1, 3}, {1, 3, 4, 5}, {}, std::nullopt, &rng));
  // A batch of 2 sequences with 3 heads: its 6 matrices do not advance by
  // one stride (a sequence's tokens lie between them), refused; with one
  // head they do.
  EXPECT_FALSE(CheckPermuted({2, 6, 3, 4}, {0, 2, 1, 3}, {2, 6, 3, 4}, {0, 2, 3, 1}, std::nullopt, &rng));
  EXPECT_TRUE(CheckPermuted({2, 6, 1, 4}, {0, 2, 1, 3}, {2, 1, 4, 5}, {}, std::nullopt, &rng));
}

TEST(GemmGeometryTest, RandomPermutationsAreExactWhenPlanned) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> dim(1, 4), rank_of(2, 4), coin(0, 1);
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int rank = rank_of(rng);
    // A view [batch..., m, k] and B [batch..., k, n] (B's batch dims may
    // broadcast), each stored as a permutation of that view.
    std::vector<int64_t> batch(static_cast<size_t>(rank - 2));
    for (int64_t& d : batch) d = dim(rng);
    const int64_t m = dim(rng), k = dim(rng), n = dim(rng);
    std::vector<int64_t> a_view = batch, b_view = batch;
    a_view.insert(a_view.end(), {m, k});
    if (coin(rng) != 0) {
      for (int64_t& d : b_view) d = 1;
    }
    b_view.insert(b_view.end(), {k, n});
    auto random_perm = [&](size_t r) {
      std::vector<int64_t> p(r);
      std::iota(p.begin(), p.end(), 0);
      if (coin(rng) != 0) std::shuffle(p.begin(), p.end(), rng);
      return p;
    };
    // Stored shape s with perm q such that transpose(s, q) == view: s[q[i]] = view[i].
    auto stored = [](const std::vector<int64_t>& view, const std::vector<int64_t>& q) {
      std::vector<int64_t> s(view.size());
      for (size_t i = 0; i < q.size(); ++i) s[static_cast<size_t>(q[i])] = view[i];
      return s;
    };
    const std::vector<int64_t> pa = random_perm(a_view.size()), pb = random_perm(b_view.size());
    std::optional<std::vector<int64_t>> py;
    if (coin(rng) != 0) py = random_perm(static_cast<size_t>(rank));
    SCOPED_TRACE("trial " + std::to_string(trial) + " A " + Dims(stored(a_view, pa)) + " perm " + Dims(pa) +
                 " B " + Dims(stored(b_view, pb)) + " perm " + Dims(pb) + " Y perm " +
                 (py ? Dims(*py) : std::string("none")));
    if (CheckPermuted(stored(a_view, pa), pa, stored(b_view, pb), pb, py, &rng)) {
      ++planned;
    } else {
      ++refused;
    }
  }
  // Both kinds occur (the refusals are checked to be safe by construction:
  // nothing runs for them).
  EXPECT_GT(planned, 100);
  EXPECT_GT(refused, 10);
}

TEST(GemmGeometryTest, RefusesWhatOneCallCannotDo) {
  // A K of 0, shapes that do not multiply, a bad permutation, ranks past the limit.
  EXPECT_FALSE(PlanPermutedMatMul({2, 0}, {}, {0, 3}, {}, std::nullopt, 8).has_value());
  EXPECT_FALSE(PlanPermutedMatMul({2, 3}, {}, {4, 3}, {}, std::nullopt, 8).has_value());
  EXPECT_FALSE(PlanPermutedMatMul({2, 3}, {0, 0}, {3, 3}, {}, std::nullopt, 8).has_value());
  EXPECT_FALSE(PlanPermutedMatMul({2, 3}, {}, {3, 3}, {}, std::vector<int64_t>{0}, 8).has_value());
  EXPECT_FALSE(PlanPermutedMatMul({1, 1, 1, 2, 3}, {}, {3, 3}, {}, std::nullopt, 4).has_value());
  // Neither rows nor columns contiguous: [a, b, c, d] read as [d, c, a, b].
  EXPECT_FALSE(PlanPermutedMatMul({2, 3, 4, 5}, {3, 2, 0, 1}, {3, 6}, {}, std::nullopt, 8).has_value());
  // Dims past INT_MAX.
  EXPECT_FALSE(PlanPermutedMatMul({int64_t{1} << 32, 2}, {}, {2, 2}, {}, std::nullopt, 8).has_value());
}

}  // namespace
}  // namespace onnxkit::runner
