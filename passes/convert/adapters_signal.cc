// STFT (17) going down, as a strided 1-D convolution whose filters are the
// transform's basis times the window (the form runtimes without STFT run):
//
//   signal [B, L, c] -> Transpose -> [B, c, L]
//   W [2 bins, c, F]: row j   = ( cos, sin)(2 pi j k / F)   (real part)
//                     row b+j = (-sin, cos)(2 pi j k / F)   (imaginary part)
//                     times window[k] (at run time when the window is fed)
//   Conv(strides = frame_step) -> [B, 2 bins, frames] -> Reshape
//   [B, 2, bins, frames] -> Transpose -> [B, frames, bins, 2]
//
// with bins = F / 2 + 1 when onesided, else F. frame_step and the frame
// length (frame_length, or the window's length) must be known when
// converting, and the signal's last dim (1 or 2). Written for opset 16.
//
// DFT (17) going down, as one MatMul along its axis: the axis moved last,
// each row [real parts (n), imaginary parts (n)] times
//   forward [[C, -S], [S, C]], inverse [[C, S], [-S, C]] / L
// with C, S [n, K] the cosines and sines of 2 pi m k / L (rows m >= L zero:
// dft_length truncates; a longer L pads), K = L / 2 + 1 when onesided, else
// L; then [..., 2, K] moved back to [..., K at the axis, ..., 2]. The
// inverse of a one-sided spectrum (a real output of L = 2 (n - 1) values by
// default) weighs each given bin once, or twice where its conjugate stands
// for a bin past L / 2, and keeps the real part. The axis dim, the last dim
// and dft_length must be known. Written for opset 16.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/tensor.h"

namespace onnxkit::passes::convert {
namespace {

// The largest basis written as a constant (elements).
constexpr int64_t kMaxBasis = int64_t{1} << 24;

// The single value of constant input `i`, when it is one.
std::optional<int64_t> ConstScalar(Step& step, int i) {
  std::optional<std::vector<int64_t>> v = ConstInts(step, i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

}  // namespace

absl::Status ExpandStft(Step& step) {
  ir::Value* signal = PresentInput(step, 0);
  if (signal == nullptr || PresentInput(step, 1) == nullptr)
    return Block("signal and frame_step are required");
  ir::Value* window = PresentInput(step, 2);
  std::optional<int32_t> t = ElemType(*signal, *step.ctx);
  if (!t || (*t != pb::kFloat && *t != pb::kDouble && *t != pb::kFloat16))
    return Block("the expansion needs a float, double or float16 signal of known type");
  std::optional<int64_t> rank = RankOf(step, signal);
  std::optional<int64_t> channels = KnownDim(step, signal, 2);
  if (!rank || *rank != 3 || !channels || (*channels != 1 && *channels != 2))
    return Block("the expansion needs a signal [batch, length, 1 or 2] whose last dim is known");
  std::optional<int64_t> hop = ConstScalar(step, 1);
  if (!hop || *hop < 1) return Block("frame_step is known only at run time (it is the convolution's stride)");
  std::optional<int64_t> frame;
  if (PresentInput(step, 3) != nullptr) {
    frame = ConstScalar(step, 3);
    if (!frame) return Block("frame_length is known only at run time");
  }
  if (window != nullptr) {
    std::optional<int64_t> w = KnownDim(step, window, 0);
    if (!frame) frame = w;
    if (w && *w != *frame) return Block("the window's length differs from frame_length");
  }
  if (!frame) return Block("the frame length (frame_length or the window's length) is not known");
  if (*frame < 1 || *frame > kMaxBasis) return Block("frame_length must be in [1, 2^24]");
  const int64_t f = *frame, c = *channels;
  const bool onesided = step.node->GetInt("onesided").value_or(1) != 0;
  const int64_t bins = onesided ? f / 2 + 1 : f;
  if (f > kMaxBasis / (2 * bins * c)) return Block("the frame is too long to write its basis as a constant");
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor basis, runner::Tensor::Allocate(pb::kDouble, {2 * bins, c, f}));
  double* w = basis.mutable_data<double>();
  for (int64_t j = 0; j < bins; ++j) {
    for (int64_t k = 0; k < f; ++k) {
      // The angle reduced exactly, as the reference reduces it.
      const double angle = 2 * std::numbers::pi * static_cast<double>((j * k) % f) / static_cast<double>(f);
      const double cs = std::cos(angle), sn = std::sin(angle);
      double* re = w + (j * c) * f + k;
      double* im = w + ((bins + j) * c) * f + k;
      re[0] = cs;
      im[0] = -sn;
      if (c == 2) {
        re[f] = sn;
        im[f] = cs;
      }
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * filters, AddConstant(*step.graph, "stft_basis", basis));
  if (*t != pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(filters, Op(step, "Cast", {filters}, {IntAttr("to", *t)}));
  }
  if (window != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * row_shape, AddInts(step, "window_shape", {1, 1, -1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * row, Op(step, "Reshape", {window, row_shape}));
    ONNXKIT_ASSIGN_OR_RETURN(filters, Op(step, "Mul", {filters, row}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * x, Op(step, "Transpose", {signal}, {IntsAttr("perm", {0, 2, 1})}));
  ONNXKIT_ASSIGN_OR_RETURN(
      ir::Value * conv,
      Op(step, "Conv", {x, filters}, {IntsAttr("strides", {*hop}), IntsAttr("kernel_shape", {f})}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * parts_shape, AddInts(step, "parts_shape", {0, 2, bins, -1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * parts, Op(step, "Reshape", {conv, parts_shape}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Transpose", {parts}, {IntsAttr("perm", {0, 3, 2, 1})}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

absl::Status ExpandDft(Step& step) {
  ir::Value* x = PresentInput(step, 0);
  if (x == nullptr) return Block("input is required");
  std::optional<int32_t> t = ElemType(*x, *step.ctx);
  if (!t || (*t != pb::kFloat && *t != pb::kDouble && *t != pb::kFloat16))
    return Block("the expansion needs a float, double or float16 input of known type");
  std::optional<int64_t> rank = RankOf(step, x);
  if (!rank || *rank < 2) return Block("the expansion needs an input of known rank 2 or more");
  int64_t axis = step.node->GetInt("axis").value_or(1);
  if (axis < 0) axis += *rank;
  if (axis < 0 || axis >= *rank - 1) return Block("axis must name a dim before the last");
  std::optional<int64_t> n = KnownDim(step, x, static_cast<size_t>(axis));
  std::optional<int64_t> c = KnownDim(step, x, static_cast<size_t>(*rank - 1));
  if (!n || !c || (*c != 1 && *c != 2)) return Block("the axis dim and a last dim of 1 or 2 must be known");
  const bool inverse = step.node->GetInt("inverse").value_or(0) != 0;
  const bool onesided = step.node->GetInt("onesided").value_or(0) != 0;
  // The inverse of a one-sided spectrum: a real signal of 2 (n - 1) values
  // by default, the rest of its spectrum the conjugates of the bins given.
  const bool irfft = inverse && onesided;
  int64_t len = irfft ? 2 * (*n - 1) : *n;
  if (PresentInput(step, 1) != nullptr) {
    std::optional<int64_t> l = ConstScalar(step, 1);
    if (!l) return Block("dft_length is known only at run time");
    len = *l;
  }
  if (len < 1 || len > kMaxBasis || *n < 1 || *n > kMaxBasis)
    return Block("the transform length is out of range");
  const int64_t k = onesided && !inverse ? len / 2 + 1 : len;
  const int64_t num_parts = irfft ? 1 : 2;
  if (4 * k > kMaxBasis / *n) return Block("the transform is too long to write its basis as a constant");
  // W [c n, parts K]: rows of the real parts, then of the imaginary parts.
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor basis,
                           runner::Tensor::Allocate(pb::kDouble, {*c * *n, num_parts * k}));
  double* w = basis.mutable_data<double>();
  const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  auto angle = [len](int64_t a, int64_t b) {
    return 2 * std::numbers::pi * static_cast<double>((a * b) % len) / static_cast<double>(len);
  };
  if (irfft) {
    // Bin j counts once as itself (j <= L / 2) and once more as the
    // conjugate of bin L - j (1 <= j < L - L / 2); each adds
    // Re(X[j] e^(i theta)) = Xr cos - Xi sin.
    for (int64_t j = 0; j < *n; ++j) {
      const double times = (j <= len / 2 ? 1.0 : 0.0) + (j >= 1 && j < len - len / 2 ? 1.0 : 0.0);
      for (int64_t m = 0; m < k; ++m) {
        w[j * k + m] = times * std::cos(angle(j, m)) * scale;
        if (*c == 2) w[(*n + j) * k + m] = -times * std::sin(angle(j, m)) * scale;
      }
    }
  } else {
    const double sign = inverse ? -1.0 : 1.0;  // of S in the real parts' rows
    for (int64_t m = 0; m < std::min(*n, len); ++m) {
      for (int64_t j = 0; j < k; ++j) {
        const double cs = std::cos(angle(m, j)) * scale, sn = std::sin(angle(m, j)) * scale;
        w[m * 2 * k + j] = cs;
        w[m * 2 * k + k + j] = -sign * sn;
        if (*c == 2) {
          w[(*n + m) * 2 * k + j] = sign * sn;
          w[(*n + m) * 2 * k + k + j] = cs;
        }
      }
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * weights, AddConstant(*step.graph, "dft_basis", basis));
  if (*t != pb::kDouble) {
    ONNXKIT_ASSIGN_OR_RETURN(weights, Op(step, "Cast", {weights}, {IntAttr("to", *t)}));
  }
  // [rest..., c, n] -> [rest..., c n].
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < *rank - 1; ++d) {
    if (d != axis) perm.push_back(d);
  }
  const size_t rest = perm.size();
  perm.push_back(*rank - 1);
  perm.push_back(axis);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * moved, Op(step, "Transpose", {x}, {IntsAttr("perm", perm)}));
  std::vector<int64_t> rows_shape(rest, 0);
  rows_shape.push_back(-1);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows_shape_v, AddInts(step, "dft_rows", rows_shape));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, Op(step, "Reshape", {moved, rows_shape_v}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * product, Op(step, "MatMul", {rows, weights}));
  // [rest..., 2 K] -> [rest..., 2, K] -> the input's layout with K at the
  // axis and the parts last.
  std::vector<int64_t> parts_shape(rest, 0);
  parts_shape.insert(parts_shape.end(), {num_parts, k});
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * parts_shape_v, AddInts(step, "dft_parts", parts_shape));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * parts, Op(step, "Reshape", {product, parts_shape_v}));
  std::vector<int64_t> back;
  for (int64_t d = 0, r = 0; d < *rank; ++d) {
    if (d == axis) {
      back.push_back(static_cast<int64_t>(rest) + 1);
    } else if (d == *rank - 1) {
      back.push_back(static_cast<int64_t>(rest));
    } else {
      back.push_back(r++);
    }
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Transpose", {parts}, {IntsAttr("perm", back)}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
