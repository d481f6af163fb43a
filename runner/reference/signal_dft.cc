// Reference kernels: DFT and STFT, as direct O(n^2) sums in double with
// exactly reduced twiddle angles (the cpu backend runs the same code with
// fast transforms, runner/cpu/signal.cc).
//
// DFT input: [..., n, ..., 1 or 2] (last dim: real, or real and imaginary
// parts); the transform runs along `axis` (opset 17: attribute, default 1;
// opset 20: optional input, default -2), which must not be the last dim.
// dft_length pads with zeros or truncates. Forward: complex output, only the
// first L/2 + 1 bins when onesided. Inverse: scaled by 1/L, complex output;
// with onesided the input is the half spectrum of a real signal (Hermitian
// symmetry restores the rest; L defaults to 2 * (n - 1)) and the output is
// real ([..., L, ..., 1]).
// STFT: signal [batch, length, 1 or 2], frames of frame_length taken every
// frame_step samples, multiplied by the window, each transformed:
// [batch, frames, bins, 2].
#include <cmath>
#include <numbers>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/signal.h"

namespace onnxkit::runner::reference {
namespace {

// exp(sign * 2 pi i * m / len) for m in [0, len): the twiddle factors.
std::vector<Cplx> Twiddles(int64_t len, int sign) {
  std::vector<Cplx> w(static_cast<size_t>(len));
  for (int64_t m = 0; m < len; ++m) {
    double angle = 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(len);
    w[static_cast<size_t>(m)] = {std::cos(angle), sign * std::sin(angle)};
  }
  return w;
}

// out[j] = sum_k z[k] * w[(j * k) mod len] for j in [0, bins).
void Transform(const std::vector<Cplx>& z, const std::vector<Cplx>& w, int64_t bins, std::vector<Cplx>* out) {
  const int64_t len = static_cast<int64_t>(z.size());
  out->assign(static_cast<size_t>(bins), Cplx{});
  for (int64_t j = 0; j < bins; ++j) {
    Cplx acc;
    int64_t m = 0;  // (j * k) mod len, stepped by j
    for (int64_t k = 0; k < len; ++k) {
      const Cplx& a = z[static_cast<size_t>(k)];
      const Cplx& t = w[static_cast<size_t>(m)];
      acc.re += a.re * t.re - a.im * t.im;
      acc.im += a.re * t.im + a.im * t.re;
      m += j;  // j < len
      if (m >= len) m -= len;
    }
    (*out)[static_cast<size_t>(j)] = acc;
  }
}

absl::Status TooLong(int64_t len) {
  return absl::ResourceExhaustedError(
      absl::StrCat("a transform of length ", len, " is longer than the ", Fourier::kMaxLength, " supported"));
}

// The reference's transform: the direct sums above.
class DirectFourier : public Fourier {
 public:
  absl::Status Prepare(int64_t len, int sign) override {
    if (len > kMaxLength) return TooLong(len);
    w_ = Twiddles(len, sign);
    return absl::OkStatus();
  }
  void Apply(const std::vector<Cplx>& z, int64_t bins, std::vector<Cplx>* out) override {
    Transform(z, w_, bins, out);
  }

 private:
  std::vector<Cplx> w_;
};

// A scalar int input (int32/int64) as int64.
absl::StatusOr<int64_t> ScalarInt(const Tensor& t, std::string_view what) {
  if ((t.dtype() != 6 && t.dtype() != 7) || t.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), " must be an int32/int64 scalar, got ", DescribeTensor(t)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(t));
  return v[0];
}

absl::Status CheckSignal(const Tensor& x, std::string_view what) {
  bool float_type = x.dtype() == 1 || x.dtype() == 10 || x.dtype() == 11 || x.dtype() == 16;
  if (!float_type || x.rank() < 2 || (x.shape().back() != 1 && x.shape().back() != 2)) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), " must be a float tensor [..., 1 or 2], got ",
                                                   DescribeTensor(x)));
  }
  return absl::OkStatus();
}

absl::Status RunDft(KernelContext& ctx, int64_t axis, const Tensor& x, Fourier& fourier) {
  ONNXKIT_RETURN_IF_ERROR(CheckSignal(x, "input"));
  const int64_t r = x.rank();
  if (axis < -r || axis > r - 2 || (axis < 0 && axis > -2)) {
    return absl::OutOfRangeError(absl::StrCat("axis ", axis, " is outside [", -r, ", -2] and [0, ", r - 2, "] for ",
                                              DescribeTensor(x)));
  }
  if (axis < 0) axis += r;
  const bool inverse = AttrInt(ctx.node(), "inverse", 0) != 0;
  const bool onesided = AttrInt(ctx.node(), "onesided", 0) != 0;
  const bool irfft = inverse && onesided;
  const int64_t n = x.dim(static_cast<int>(axis));
  int64_t len = irfft ? 2 * (n - 1) : n;
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* len_t, ctx.OptionalInput(1));
  if (len_t != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(len, ScalarInt(*len_t, "dft_length"));
  }
  if (len < 1) return absl::InvalidArgumentError(absl::StrCat("dft_length must be positive, got ", len));
  const int64_t bins = onesided && !inverse ? len / 2 + 1 : len;
  const int64_t in_c = x.shape().back(), out_c = irfft ? 1 : 2;
  std::vector<int64_t> out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = bins;
  out_shape.back() = out_c;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out_shape));
  if (y->size() == 0) return absl::OkStatus();  // nothing to transform (and no twiddle table for a huge L)
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dim(static_cast<int>(d));
  ONNXKIT_RETURN_IF_ERROR(fourier.Prepare(len, inverse ? 1 : -1));
  const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  return VisitFloat(x.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y->mutable_data<T>();
    std::vector<Cplx> z(static_cast<size_t>(len)), out;
    auto at = [&](int64_t o, int64_t k, int64_t i) -> Cplx {  // input element k of a line, 0 past the end
      if (k >= n) return {};
      int64_t base = ((o * n + k) * inner + i) * in_c;
      return {static_cast<double>(static_cast<ComputeT<T>>(px[base])),
              in_c == 2 ? static_cast<double>(static_cast<ComputeT<T>>(px[base + 1])) : 0.0};
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t k = 0; k < len; ++k) {
          if (!irfft || k <= len / 2) {
            z[static_cast<size_t>(k)] = at(o, k, i);
          } else {  // Hermitian symmetry: X[k] = conj(X[len - k])
            Cplx c = at(o, len - k, i);
            z[static_cast<size_t>(k)] = {c.re, -c.im};
          }
        }
        fourier.Apply(z, bins, &out);
        for (int64_t j = 0; j < bins; ++j) {
          int64_t base = ((o * bins + j) * inner + i) * out_c;
          py[base] = RoundFromDouble<T>(out[static_cast<size_t>(j)].re * scale);
          if (out_c == 2) py[base + 1] = RoundFromDouble<T>(out[static_cast<size_t>(j)].im * scale);
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status Dft17With(KernelContext& ctx, Fourier& fourier) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return RunDft(ctx, AttrInt(ctx.node(), "axis", 1), *x, fourier);
}

absl::Status Dft20With(KernelContext& ctx, Fourier& fourier) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* axis_t, ctx.OptionalInput(2));
  int64_t axis = -2;
  if (axis_t != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(axis, ScalarInt(*axis_t, "axis"));
  }
  return RunDft(ctx, axis, *x, fourier);
}

absl::Status StftWith(KernelContext& ctx, Fourier& fourier) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* signal, ctx.Input(0));
  ONNXKIT_RETURN_IF_ERROR(CheckSignal(*signal, "signal"));
  if (signal->rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("signal must be [batch, length, 1 or 2], got ", DescribeTensor(*signal)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* step_t, ctx.Input(1));
  ONNXKIT_ASSIGN_OR_RETURN(int64_t step, ScalarInt(*step_t, "frame_step"));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* window, ctx.OptionalInput(2));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* frame_t, ctx.OptionalInput(3));
  int64_t frame = -1;
  if (frame_t != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(frame, ScalarInt(*frame_t, "frame_length"));
  }
  if (window != nullptr) {
    if (window->rank() != 1 || window->dtype() != signal->dtype() || (frame >= 0 && window->size() != frame)) {
      return absl::InvalidArgumentError(absl::StrCat("window must be 1-D of the signal's type",
                                                     frame >= 0 ? absl::StrCat(" with frame_length ", frame, " values") : "",
                                                     ", got ", DescribeTensor(*window)));
    }
    frame = window->size();
  }
  const int64_t batch = signal->dim(0), length = signal->dim(1), in_c = signal->dim(2);
  if (frame < 1 || frame > length || step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("need 1 <= frame_length (", frame, ") <= signal length (", length,
                                                   ") and frame_step (", step, ") >= 1"));
  }
  const bool onesided = AttrInt(ctx.node(), "onesided", 1) != 0;
  const int64_t frames = (length - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, signal->dtype(), {batch, frames, bins, 2}));
  ONNXKIT_RETURN_IF_ERROR(fourier.Prepare(frame, -1));
  return VisitFloat(signal->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    const T* ps = signal->data<T>();
    T* py = y->mutable_data<T>();
    std::vector<Cplx> z(static_cast<size_t>(frame)), out;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t k = 0; k < frame; ++k) {
          int64_t base = (b * length + f * step + k) * in_c;
          double win = window != nullptr ? static_cast<double>(static_cast<C>(window->data<T>()[k])) : 1.0;
          z[static_cast<size_t>(k)] = {static_cast<double>(static_cast<C>(ps[base])) * win,
                                       in_c == 2 ? static_cast<double>(static_cast<C>(ps[base + 1])) * win : 0.0};
        }
        fourier.Apply(z, bins, &out);
        for (int64_t j = 0; j < bins; ++j) {
          int64_t base = ((b * frames + f) * bins + j) * 2;
          py[base] = RoundFromDouble<T>(out[static_cast<size_t>(j)].re);
          py[base + 1] = RoundFromDouble<T>(out[static_cast<size_t>(j)].im);
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Dft17(KernelContext& ctx) {
  DirectFourier direct;
  return Dft17With(ctx, direct);
}

absl::Status Dft20(KernelContext& ctx) {
  DirectFourier direct;
  return Dft20With(ctx, direct);
}

absl::Status Stft(KernelContext& ctx) {
  DirectFourier direct;
  return StftWith(ctx, direct);
}

}  // namespace onnxkit::runner::reference
