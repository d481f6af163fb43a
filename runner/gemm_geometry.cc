// Row-major products as column-major strided batched calls (see the header).
#include "runner/gemm_geometry.h"

#include <algorithm>
#include <climits>

namespace onnxkit::runner {
namespace {

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The dims and element strides of a packed tensor of `shape` read through
// `perm` (empty: as it is), as a Transpose's output would be.
struct View {
  std::vector<int64_t> dims, strides;
};

std::vector<int64_t> PackedStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

std::optional<View> Permuted(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> packed = PackedStrides(shape);
  if (perm.empty()) return View{shape, packed};
  if (perm.size() != shape.size()) return std::nullopt;
  View v;
  std::vector<bool> seen(shape.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(shape.size()) || seen[static_cast<size_t>(p)]) return std::nullopt;
    seen[static_cast<size_t>(p)] = true;
    v.dims.push_back(shape[static_cast<size_t>(p)]);
    v.strides.push_back(packed[static_cast<size_t>(p)]);
  }
  return v;
}

// ONNX broadcasting of two batch shapes (right-aligned; equal dims or 1).
std::optional<std::vector<int64_t>> BroadcastBatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The stride between consecutive matrices of an operand whose batch dims
// (dims, with strides) broadcast to `batch`: 0 when they are all 1; else
// they must equal batch's and step through the row-major batch index by one
// stride. nullopt otherwise.
std::optional<int64_t> UniformBatchStride(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                          const std::vector<int64_t>& batch) {
  if (std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; })) return 0;
  if (dims.size() > batch.size()) return std::nullopt;
  const size_t lead = batch.size() - dims.size();
  std::optional<int64_t> stride;
  int64_t expected = 0;
  for (size_t i = batch.size(); i-- > 0;) {
    const int64_t d = i < lead ? 1 : dims[i - lead];
    if (d != batch[i]) return std::nullopt;
    if (d == 1) continue;
    const int64_t s = strides[i - lead];
    if (stride.has_value() && s != expected) return std::nullopt;
    if (!stride.has_value()) stride = s;
    expected = s * d;
  }
  return stride;
}

// One matrix of a view (rows x cols, element strides row_stride and
// col_stride) as a BLAS reads it: stored rows `ld` apart (trans false), or
// stored as its transpose (trans true: columns `ld` apart).
struct MatrixOperand {
  bool trans = false;
  int64_t ld = 0;
};
std::optional<MatrixOperand> AsMatrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= cols)) {
    return MatrixOperand{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  }
  if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= rows)) {
    return MatrixOperand{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  }
  return std::nullopt;
}

}  // namespace

ColumnMajorCall ToColumnMajor(const RowMajorProduct& p) {
  ColumnMajorCall c;
  // Y^T (N x M) = op(B)^T op(A)^T; a row-major matrix is its transpose in
  // column-major order, so B's memory is op(B)^T as stored unless trans_b.
  c.trans_x = p.trans_b;
  c.trans_w = p.trans_a;
  c.rows = p.n;
  c.cols = p.m;
  c.depth = p.k;
  c.batch = p.batch;
  c.ldx = p.ldb;
  c.stride_x = p.stride_b;
  c.ldw = p.lda;
  c.stride_w = p.stride_a;
  c.ldc = p.ldy;
  c.stride_c = p.stride_y;
  c.x_rows = c.trans_x ? c.depth : c.rows;
  c.x_cols = c.trans_x ? c.rows : c.depth;
  c.w_rows = c.trans_w ? c.cols : c.depth;
  c.w_cols = c.trans_w ? c.depth : c.cols;
  return c;
}

RowMajorProduct PackedProduct(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t batch,
                              int64_t stride_a, int64_t stride_b) {
  RowMajorProduct p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.lda = std::max<int64_t>(trans_a ? m : k, 1);
  p.ldb = std::max<int64_t>(trans_b ? k : n, 1);
  p.ldy = std::max<int64_t>(n, 1);
  p.stride_a = stride_a;
  p.stride_b = stride_b;
  p.stride_y = m * n;
  p.out_shape = {m, n};
  return p;
}

std::optional<RowMajorProduct> PlanPermutedMatMul(const std::vector<int64_t>& a_shape,
                                                  const std::vector<int64_t>& perm_a,
                                                  const std::vector<int64_t>& b_shape,
                                                  const std::vector<int64_t>& perm_b,
                                                  const std::optional<std::vector<int64_t>>& perm_y,
                                                  int max_rank) {
  const auto limit = static_cast<size_t>(max_rank);
  if (a_shape.size() < 2 || b_shape.size() < 2 || a_shape.size() > limit || b_shape.size() > limit) {
    return std::nullopt;
  }
  for (const auto* shape : {&a_shape, &b_shape}) {
    for (int64_t d : *shape) {
      if (d < 0) return std::nullopt;
    }
  }
  std::optional<View> va = Permuted(a_shape, perm_a), vb = Permuted(b_shape, perm_b);
  if (!va || !vb) return std::nullopt;
  const size_t ra = va->dims.size(), rb = vb->dims.size();
  RowMajorProduct p;
  p.m = va->dims[ra - 2];
  p.k = va->dims[ra - 1];
  p.n = vb->dims[rb - 1];
  if (vb->dims[rb - 2] != p.k || p.k == 0) return std::nullopt;
  const std::vector<int64_t> a_batch(va->dims.begin(), va->dims.end() - 2);
  const std::vector<int64_t> b_batch(vb->dims.begin(), vb->dims.end() - 2);
  std::optional<std::vector<int64_t>> batch = BroadcastBatch(a_batch, b_batch);
  if (!batch || batch->size() + 2 > limit) return std::nullopt;
  for (int64_t d : *batch) {
    if (d != 0 && p.batch > INT_MAX / d) return std::nullopt;
    p.batch *= d;
  }
  std::optional<int64_t> sa =
      UniformBatchStride(a_batch, std::vector<int64_t>(va->strides.begin(), va->strides.end() - 2), *batch);
  std::optional<int64_t> sb =
      UniformBatchStride(b_batch, std::vector<int64_t>(vb->strides.begin(), vb->strides.end() - 2), *batch);
  std::optional<MatrixOperand> ma = AsMatrix(p.m, p.k, va->strides[ra - 2], va->strides[ra - 1]);
  std::optional<MatrixOperand> mb = AsMatrix(p.k, p.n, vb->strides[rb - 2], vb->strides[rb - 1]);
  if (!sa || !sb || !ma || !mb) return std::nullopt;
  // Y (batch..., M, N) lands in the output through perm_y: output dim q is
  // Y's dim perm_y[q], so Y's dim perm_y[q] has the output's stride q.
  std::vector<int64_t> y_dims = *batch;
  y_dims.push_back(p.m);
  y_dims.push_back(p.n);
  const size_t ry = y_dims.size();
  std::vector<int64_t> y_strides = PackedStrides(y_dims);
  p.out_shape = y_dims;
  if (perm_y.has_value()) {
    std::optional<View> out = Permuted(y_dims, *perm_y);
    if (!out || perm_y->size() != ry) return std::nullopt;
    p.out_shape = out->dims;
    const std::vector<int64_t> packed = PackedStrides(p.out_shape);
    for (size_t q = 0; q < ry; ++q) y_strides[static_cast<size_t>((*perm_y)[q])] = packed[q];
  }
  std::optional<int64_t> sy =
      UniformBatchStride(*batch, std::vector<int64_t>(y_strides.begin(), y_strides.end() - 2), *batch);
  std::optional<MatrixOperand> my = AsMatrix(p.m, p.n, y_strides[ry - 2], y_strides[ry - 1]);
  if (!sy || !my || my->trans) return std::nullopt;
  for (int64_t v : {p.m, p.n, p.k, p.batch, ma->ld, mb->ld, my->ld}) {
    if (!FitsInt(v)) return std::nullopt;
  }
  p.trans_a = ma->trans;
  p.lda = ma->ld;
  p.stride_a = *sa;
  p.trans_b = mb->trans;
  p.ldb = mb->ld;
  p.stride_b = *sb;
  p.ldy = my->ld;
  p.stride_y = *sy;
  return p;
}

}  // namespace onnxkit::runner
