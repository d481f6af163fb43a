// Reference kernels: HannWindow, HammingWindow, BlackmanWindow (periodic or
// symmetric generalized cosine windows) and MelWeightMatrix (triangular mel
// filter bank over the dft_length / 2 + 1 spectrogram bins, computed as the
// onnx reference does: mel edges in the inputs' float type, bin positions in
// double, floored to integer bins).
#include <cmath>
#include <numbers>
#include <type_traits>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/signal.h"

namespace onnxkit::runner::reference {
namespace {

absl::StatusOr<int64_t> ScalarInt(KernelContext& ctx, int i, std::string_view what) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if ((t->dtype() != 6 && t->dtype() != 7) || t->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), " must be an int32/int64 scalar, got ", DescribeTensor(*t)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*t));
  return v[0];
}

// Output 0 of type `output_datatype` (default float), element i set to
// value(i) (a double), allocated before any value is computed.
template <typename F>
absl::Status StoreAll(KernelContext& ctx, std::vector<int64_t> shape, F&& value) {
  int64_t dtype = AttrInt(ctx.node(), "output_datatype", 1);
  if (dtype == 8 || dtype == 9 || !IsKnownDataType(static_cast<int32_t>(dtype)) || DataTypeBits(static_cast<int32_t>(dtype)) < 8) {
    return absl::InvalidArgumentError(absl::StrCat("output_datatype ", dtype, " is not a numeric type"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, static_cast<int32_t>(dtype), std::move(shape)));
  return VisitNumeric(static_cast<int32_t>(dtype), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    T* p = y->mutable_data<T>();
    for (int64_t i = 0; i < y->size(); ++i) {
      double v = value(i);
      if constexpr (std::is_integral_v<T>) {  // truncate, saturating
        double lo = static_cast<double>(std::numeric_limits<T>::lowest());
        double hi = static_cast<double>(std::numeric_limits<T>::max());
        p[i] = std::isnan(v) ? T{} : v <= lo ? std::numeric_limits<T>::lowest() : v >= hi ? std::numeric_limits<T>::max()
                                                                                         : static_cast<T>(v);
      } else {
        p[i] = RoundFromDouble<T>(v);
      }
    }
    return absl::OkStatus();
  });
}

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic)
// or size - 1 (symmetric).
absl::Status CosineWindow(KernelContext& ctx, double a0, double a1, double a2) {
  ONNXKIT_ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx, 0, "size"));
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat("size must be >= 0, got ", size));
  bool periodic = AttrInt(ctx.node(), "periodic", 1) != 0;
  double n_div = static_cast<double>(periodic ? size : size - 1);
  return StoreAll(ctx, {size}, [&](int64_t n) {
    double x = 2 * std::numbers::pi * static_cast<double>(n) / n_div;
    return a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  });
}

}  // namespace

absl::Status HannWindow(KernelContext& ctx) { return CosineWindow(ctx, 0.5, 0.5, 0); }
absl::Status HammingWindow(KernelContext& ctx) { return CosineWindow(ctx, 25.0 / 46.0, 21.0 / 46.0, 0); }
absl::Status BlackmanWindow(KernelContext& ctx) { return CosineWindow(ctx, 0.42, 0.5, 0.08); }

absl::Status MelWeightMatrix(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(int64_t mel_bins, ScalarInt(ctx, 0, "num_mel_bins"));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, 1, "dft_length"));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx, 2, "sample_rate"));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* lo_t, ctx.Input(3));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* hi_t, ctx.Input(4));
  if (mel_bins < 1 || mel_bins > (1 << 20) || dft_length < 1 || dft_length > (int64_t{1} << 30) || sample_rate < 1) {
    return absl::InvalidArgumentError(absl::StrCat("need num_mel_bins in [1, 2^20] (", mel_bins,
                                                   "), dft_length in [1, 2^30] (", dft_length, ") and sample_rate >= 1 (",
                                                   sample_rate, ")"));
  }
  if (lo_t->dtype() != hi_t->dtype() || lo_t->size() != 1 || hi_t->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("lower_edge_hertz and upper_edge_hertz must be float scalars, got ",
                                                   DescribeTensor(*lo_t), " and ", DescribeTensor(*hi_t)));
  }
  double lo = 0, hi = 0;
  bool single = lo_t->dtype() != 11;  // edges and mel step in float, as numpy does for float32 inputs
  ONNXKIT_RETURN_IF_ERROR(VisitFloat(lo_t->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    lo = static_cast<double>(static_cast<ComputeT<T>>(lo_t->data<T>()[0]));
    hi = static_cast<double>(static_cast<ComputeT<T>>(hi_t->data<T>()[0]));
    return absl::OkStatus();
  }));
  auto to_mel = [&](double hz) {
    return single ? static_cast<double>(2595.0f * std::log10(1.0f + static_cast<float>(hz) / 700.0f))
                  : 2595.0 * std::log10(1.0 + hz / 700.0);
  };
  double low_mel = to_mel(lo), high_mel = to_mel(hi);
  double step = single ? static_cast<double>(static_cast<float>(high_mel - low_mel) / static_cast<float>(mel_bins + 2))
                       : (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
  const int64_t spec_bins = dft_length / 2 + 1;
  std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595) - 1);
    double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!(bin >= 0 && bin < static_cast<double>(spec_bins))) {
      return absl::InvalidArgumentError(absl::StrCat("mel edge ", i, " falls on bin ", bin, ", outside [0, ", spec_bins,
                                                     "): check the edge frequencies against sample_rate"));
    }
    edges[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  // Filter i rises from its left edge to 1 at its center, then falls to its
  // right edge (the falling side wins at the center, both give 1 there).
  return StoreAll(ctx, {spec_bins, mel_bins}, [&](int64_t e) {
    int64_t j = e / mel_bins, i = e % mel_bins;
    int64_t left = edges[static_cast<size_t>(i)], center = edges[static_cast<size_t>(i + 1)],
            right = edges[static_cast<size_t>(i + 2)];
    double v = 0;
    if (center == left) {
      v = j == center ? 1 : 0;
    } else if (left <= j && j <= center) {
      v = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    if (center <= j && j < right) v = static_cast<double>(right - j) / static_cast<double>(right - center);
    return v;
  });
}

}  // namespace onnxkit::runner::reference
