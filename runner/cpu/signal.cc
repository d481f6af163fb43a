// cpu kernels of DFT and STFT: the reference kernels' lines, windows and
// scaling (runner/reference/signal_dft.cc), each transform a fast one in
// double: iterative radix 2 for powers of two, Bluestein's chirp
// convolution (two power-of-two transforms and one inverse) for other
// lengths. O(L log L) where the reference sums O(L * bins) terms; results
// agree with it to rounding.
#include "runner/reference/signal.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runner/cpu/math.h"

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

using Entry = absl::Status (*)(KernelContext&, reference::Fourier&);

class FourierKernel : public Kernel {
 public:
  explicit FourierKernel(Entry entry) : entry_(entry) {}
  absl::Status Run(KernelContext& ctx) override { return entry_(ctx, fourier_); }

 private:
  Entry entry_;
  FastFourier fourier_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeFourier(const ir::Node& node, const KernelInfo& info) {
  Entry entry = &reference::StftWith;
  if (node.op_type() == "DFT") entry = info.opset >= 20 ? &reference::Dft20With : &reference::Dft17With;
  return std::unique_ptr<Kernel>(new FourierKernel(entry));
}

}  // namespace onnxkit::runner::cpu
