// cpu kernels of DFT and STFT: the reference kernels' lines, windows and
// scaling (runner/reference/signal_dft.cc), each transform a fast one in
// double: iterative radix 2 for powers of two, Bluestein's chirp
// convolution (two power-of-two transforms and one inverse) for other
// lengths. O(L log L) where the reference sums O(L * bins) terms; results
// agree with it to rounding.
//
// STFT of a real float32 signal with frames of 16 to 1024 samples, not a
// power of two (Bluestein's three transforms per frame cost more), runs as
// one matrix product per batch row where the CPU has the packed product
// (AVX-512), in float32: the frames are the rows of A read straight from the signal
// (frame_step floats apart), B [frame, 2 bins] holds window[k] times
// cos and -sin of each bin's angle, interleaved, so C is the output's
// [frames, bins, 2] layout. Signals or windows holding NaN or infinities
// take the transforms above.
#include "runner/reference/signal.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "runner/cpu/math.h"
#include "runner/cpu/matmul_packed.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::cpu {
namespace {

using reference::Cplx;

Cplx Mul(const Cplx& a, const Cplx& b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

class FastFourier : public reference::Fourier {
 public:
  absl::Status Prepare(int64_t len, int sign) override {
    if (len > kMaxLength) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a transform of length ", len, " is longer than the ", kMaxLength, " supported"));
    }
    if (len == len_ && sign == sign_) return absl::OkStatus();
    len_ = len;
    sign_ = sign;
    const bool pow2 = (len & (len - 1)) == 0;
    int64_t m = 1;
    while (m < (pow2 ? len : 2 * len - 1)) m <<= 1;
    PrepareRadix2(m);
    chirp_.clear();
    kernel_.clear();
    if (pow2) return absl::OkStatus();
    // chirp[k] = exp(sign * pi i k^2 / len), k^2 reduced mod 2 len exactly.
    chirp_.resize(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) {
      const int64_t r =
          static_cast<int64_t>((static_cast<unsigned __int128>(k) * static_cast<unsigned __int128>(k)) %
                               static_cast<unsigned __int128>(2 * len));
      const double angle = std::numbers::pi * static_cast<double>(r) / static_cast<double>(len);
      chirp_[static_cast<size_t>(k)] = {std::cos(angle), sign * std::sin(angle)};
    }
    // The convolution kernel conj(chirp[|m|]) laid out circularly, transformed.
    kernel_.assign(static_cast<size_t>(m), Cplx{});
    for (int64_t k = 0; k < len; ++k) {
      const Cplx c = {chirp_[static_cast<size_t>(k)].re, -chirp_[static_cast<size_t>(k)].im};
      kernel_[static_cast<size_t>(k)] = c;
      if (k > 0) kernel_[static_cast<size_t>(m - k)] = c;
    }
    Radix2(kernel_, -1);
    return absl::OkStatus();
  }

  void Apply(const std::vector<Cplx>& z, int64_t bins, std::vector<Cplx>* out) override {
    const size_t m = rev_.size();
    if (chirp_.empty()) {  // a power of two
      work_ = z;
      Radix2(work_, sign_);
      out->assign(work_.begin(), work_.begin() + bins);
      return;
    }
    work_.assign(m, Cplx{});
    for (int64_t k = 0; k < len_; ++k) {
      work_[static_cast<size_t>(k)] = Mul(z[static_cast<size_t>(k)], chirp_[static_cast<size_t>(k)]);
    }
    Radix2(work_, -1);
    for (size_t i = 0; i < m; ++i) work_[i] = Mul(work_[i], kernel_[i]);
    Radix2(work_, 1);
    const double scale = 1.0 / static_cast<double>(m);
    out->resize(static_cast<size_t>(bins));
    for (int64_t j = 0; j < bins; ++j) {
      const Cplx c = Mul(work_[static_cast<size_t>(j)], chirp_[static_cast<size_t>(j)]);
      (*out)[static_cast<size_t>(j)] = {c.re * scale, c.im * scale};
    }
  }

 private:
  // Bit reversal and roots exp(-2 pi i k / m) for transforms of length m.
  void PrepareRadix2(int64_t m) {
    if (static_cast<int64_t>(rev_.size()) == m) return;
    rev_.assign(static_cast<size_t>(m), 0);
    int bits = 0;
    while ((int64_t{1} << bits) < m) ++bits;
    for (int64_t i = 0; i < m; ++i) {
      int64_t r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      rev_[static_cast<size_t>(i)] = r;
    }
    roots_.resize(static_cast<size_t>(m / 2 > 0 ? m / 2 : 1));
    for (int64_t k = 0; k < m / 2; ++k) {
      const double angle = 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(m);
      roots_[static_cast<size_t>(k)] = {std::cos(angle), -std::sin(angle)};
    }
  }

  // In place: a[j] = sum_k a[k] exp(sign * 2 pi i jk / m), m = a.size().
  void Radix2(std::vector<Cplx>& a, int sign) const {
    const int64_t m = static_cast<int64_t>(a.size());
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = rev_[static_cast<size_t>(i)];
      if (i < r) std::swap(a[static_cast<size_t>(i)], a[static_cast<size_t>(r)]);
    }
    for (int64_t len = 2; len <= m; len <<= 1) {
      const int64_t half = len / 2, step = m / len;
      for (int64_t i = 0; i < m; i += len) {
        for (int64_t j = 0; j < half; ++j) {
          Cplx w = roots_[static_cast<size_t>(j * step)];
          if (sign > 0) w.im = -w.im;
          Cplx& u = a[static_cast<size_t>(i + j)];
          Cplx& x = a[static_cast<size_t>(i + j + half)];
          const Cplx v = Mul(x, w);
          x = {u.re - v.re, u.im - v.im};
          u = {u.re + v.re, u.im + v.im};
        }
      }
    }
  }

  int64_t len_ = 0;
  int sign_ = 0;
  std::vector<int64_t> rev_;
  std::vector<Cplx> roots_, chirp_, kernel_, work_;
};

// The longest frame the STFT runs as a matrix product: beyond it the
// product's frame * 2 bins multiply-adds per frame cost more than the
// transforms.
constexpr int64_t kMaxProductFrame = 1024;

bool AllFinite(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) return false;
  }
  return true;
}

// The single int32/int64 value of `t`, when it holds one.
std::optional<int64_t> OneInt(const Tensor* t) {
  if (t == nullptr || t->size() != 1 || (t->dtype() != pb::kInt32 && t->dtype() != pb::kInt64))
    return std::nullopt;
  absl::StatusOr<std::vector<int64_t>> v = reference::ReadInt64s(*t);
  if (!v.ok()) return std::nullopt;
  return (*v)[0];
}

// STFT as a product with the windowed basis (see the top of the file); the
// packed basis is kept while the frame, the sidedness and the window stay.
class StftProduct {
 public:
  // Runs the STFT when it takes this path; false to leave it to the
  // transforms (which also report every invalid input).
  absl::StatusOr<bool> TryRun(KernelContext& ctx) {
    if (!PackedGemmAvailable()) return false;
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* signal, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* step_t, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* window, ctx.OptionalInput(2));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* frame_t, ctx.OptionalInput(3));
    if (signal->dtype() != pb::kFloat || signal->rank() != 3 || signal->dim(2) != 1) return false;
    std::optional<int64_t> step = OneInt(step_t);
    int64_t frame = -1;  // unknown
    if (frame_t != nullptr) {
      std::optional<int64_t> given = OneInt(frame_t);
      if (!given) return false;
      frame = *given;
    }
    if (window != nullptr) {
      if (window->dtype() != pb::kFloat || window->rank() != 1 || (frame >= 0 && frame != window->size())) {
        return false;
      }
      frame = window->size();
    }
    const int64_t batch = signal->dim(0), length = signal->dim(1);
    if (!step || *step < 1 || frame < 16 || frame > kMaxProductFrame || frame > length) return false;
    // Power-of-two frames are as fast through the radix-2 transform, in double.
    if ((frame & (frame - 1)) == 0) return false;
    const bool onesided = reference::AttrInt(ctx.node(), "onesided", 1) != 0;
    const int64_t f = frame, bins = onesided ? f / 2 + 1 : f, n = 2 * bins;
    const float* x = signal->data<float>();
    const float* w = window != nullptr ? window->data<float>() : nullptr;
    if (!AllFinite(x, signal->size()) || (w != nullptr && !AllFinite(w, f))) return false;
    ONNXKIT_RETURN_IF_ERROR(Prepare(f, bins, w));
    const int64_t frames = (length - f) / *step + 1;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutputUninitialized(0, pb::kFloat, {batch, frames, bins, 2}));
    float* out = y->mutable_data<float>();
    for (int64_t b = 0; b < batch; ++b) {
      PackedGemm(x + b * length, frames, *step, packed_, nullptr, out + b * frames * n, n);
    }
    return true;
  }

 private:
  absl::Status Prepare(int64_t f, int64_t bins, const float* w) {
    std::vector<float> window = w != nullptr ? std::vector<float>(w, w + f) : std::vector<float>();
    if (f == frame_ && bins == bins_ && window == window_) return absl::OkStatus();
    const int64_t n = 2 * bins;
    std::vector<float> basis(static_cast<size_t>(f * n));
    for (int64_t k = 0; k < f; ++k) {
      const double wk = w != nullptr ? static_cast<double>(w[k]) : 1.0;
      for (int64_t j = 0; j < bins; ++j) {
        // The angle reduced exactly, as the reference reduces it.
        const double angle = 2 * std::numbers::pi * static_cast<double>((j * k) % f) / static_cast<double>(f);
        basis[static_cast<size_t>(k * n + 2 * j)] = static_cast<float>(wk * std::cos(angle));
        basis[static_cast<size_t>(k * n + 2 * j + 1)] = static_cast<float>(-wk * std::sin(angle));
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(packed_, PackedMatrix::Pack(basis.data(), f, n));
    frame_ = f;
    bins_ = bins;
    window_ = std::move(window);
    return absl::OkStatus();
  }

  int64_t frame_ = 0, bins_ = 0;
  std::vector<float> window_;
  PackedMatrix packed_;
};

using Entry = absl::Status (*)(KernelContext&, reference::Fourier&);

class FourierKernel : public Kernel {
 public:
  FourierKernel(Entry entry, bool stft) : entry_(entry), stft_(stft) {}
  absl::Status Run(KernelContext& ctx) override {
    if (stft_) {
      ONNXKIT_ASSIGN_OR_RETURN(bool done, product_.TryRun(ctx));
      if (done) return absl::OkStatus();
    }
    return entry_(ctx, fourier_);
  }

 private:
  Entry entry_;
  bool stft_;
  FastFourier fourier_;
  StftProduct product_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeFourier(const ir::Node& node, const KernelInfo& info) {
  Entry entry = &reference::StftWith;
  if (node.op_type() == "DFT") entry = info.opset >= 20 ? &reference::Dft20With : &reference::Dft17With;
  return std::unique_ptr<Kernel>(new FourierKernel(entry, node.op_type() == "STFT"));
}

}  // namespace onnxkit::runner::cpu
