// Reference kernels for the random generators: RandomNormal, RandomUniform,
// RandomNormalLike, RandomUniformLike, Bernoulli and Multinomial, drawing from
// numpy's legacy stream (LegacyRandom) seeded by the seed attribute. Their
// outputs are random by nature: only a seeded node is reproducible.
#include <cmath>
#include <random>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace shape_ops {

LegacyRandom::LegacyRandom(uint32_t seed) {
  state_[0] = seed;
  for (uint32_t i = 1; i < 624; ++i) state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
}

uint32_t LegacyRandom::Next32() {
  if (pos_ >= 624) {
    for (int i = 0; i < 624; ++i) {
      uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % 624] & 0x7fffffffu);
      state_[i] = state_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    pos_ = 0;
  }
  uint32_t y = state_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double LegacyRandom::Uniform() {
  uint32_t a = Next32() >> 5, b = Next32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double LegacyRandom::Normal() {
  if (has_gauss_) {
    has_gauss_ = false;
    return gauss_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * Uniform() - 1.0;
    x2 = 2.0 * Uniform() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

uint32_t SeedOf(const ir::Node& node) {
  if (auto f = node.GetFloat("seed"))
    return static_cast<uint32_t>(std::fabs(*f) < 9.0e18f ? static_cast<int64_t>(*f) : 0);
  if (auto i = node.GetInt("seed")) return static_cast<uint32_t>(*i);
  return std::random_device{}();
}

}  // namespace shape_ops

namespace {

using shape_ops::LegacyRandom;

enum class Dist { kNormal, kUniform, kBernoulli };

// RandomNormal / RandomUniform (shape attribute) and their Like forms (the
// input's shape, and its type unless dtype is given), and Bernoulli.
class RandomKernel : public Kernel {
 public:
  RandomKernel(Dist dist, bool like, std::optional<int64_t> dtype, std::vector<int64_t> shape, double a,
               double b)
      : dist_(dist), like_(like), dtype_(dtype), shape_(std::move(shape)), a_(a), b_(b) {}

  absl::Status Run(KernelContext& ctx) override {
    std::vector<int64_t> shape = shape_;
    int32_t dtype = static_cast<int32_t>(dtype_.value_or(1));
    const Tensor* x = nullptr;
    if (like_) {
      ONNXKIT_ASSIGN_OR_RETURN(x, ctx.Input(0));
      shape = x->shape();
      if (!dtype_) dtype = x->dtype();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, shape));
    LegacyRandom rng(shape_ops::SeedOf(ctx.node()));  // per run: a seeded node repeats its draws
    for (int64_t i = 0; i < y->size(); ++i) {
      double v = 0;
      switch (dist_) {
        case Dist::kNormal:
          v = a_ + b_ * rng.Normal();
          break;
        case Dist::kUniform:
          v = a_ + (b_ - a_) * rng.Uniform();
          break;
        case Dist::kBernoulli:
          v = rng.Uniform() < shape_ops::LoadDouble(*x, i) ? 1.0 : 0.0;
          break;
      }
      ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*y, i, v));
    }
    return absl::OkStatus();
  }

 private:
  Dist dist_;
  bool like_;
  std::optional<int64_t> dtype_;
  std::vector<int64_t> shape_;
  double a_, b_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeRandom(const ir::Node& node, Dist dist, bool like) {
  std::optional<int64_t> dtype = node.GetInt("dtype");
  if (dtype && dtype != 1 && dtype != 10 && dtype != 11 && dtype != 16 && dist != Dist::kBernoulli) {
    return absl::InvalidArgumentError(absl::StrCat("dtype ", *dtype, " is not a float type"));
  }
  std::vector<int64_t> shape;
  if (!like) {
    auto s = node.GetInts("shape");
    if (!s) return absl::InvalidArgumentError("the shape attribute is required");
    shape = *s;
  }
  double a = 0, b = 1;
  if (dist == Dist::kNormal) {
    a = AttrFloat(node, "mean", 0.0f);
    b = AttrFloat(node, "scale", 1.0f);
  } else if (dist == Dist::kUniform) {
    a = AttrFloat(node, "low", 0.0f);
    b = AttrFloat(node, "high", 1.0f);
  }
  return std::unique_ptr<Kernel>(new RandomKernel(dist, like, dtype, std::move(shape), a, b));
}

// Multinomial: per batch row of unnormalized log-probabilities, sample_size
// class indices drawn by inverting the cumulative distribution.
class MultinomialKernel : public Kernel {
 public:
  MultinomialKernel(int32_t dtype, int64_t samples) : dtype_(dtype), samples_(samples) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->rank() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("input must be [batch, classes], got ", DescribeTensor(*x)));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> logits, shape_ops::ReadDoubles(*x, "input"));
    int64_t batch = x->dim(0), classes = x->dim(1);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype_, {batch, samples_}));
    std::vector<double> cdf(static_cast<size_t>(classes));
    LegacyRandom rng(shape_ops::SeedOf(ctx.node()));
    for (int64_t b = 0; b < batch; ++b) {
      double max = -INFINITY, total = 0;
      for (int64_t c = 0; c < classes; ++c) max = std::max(max, logits[static_cast<size_t>(b * classes + c)]);
      for (int64_t c = 0; c < classes; ++c) {
        total += std::isfinite(max) ? std::exp(logits[static_cast<size_t>(b * classes + c)] - max) : 0.0;
        cdf[static_cast<size_t>(c)] = total;
      }
      for (int64_t s = 0; s < samples_; ++s) {
        double u = rng.Uniform() * total;
        int64_t pick = static_cast<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        pick = std::min(pick, classes - 1);
        ONNXKIT_RETURN_IF_ERROR(shape_ops::StoreDouble(*y, b * samples_ + s, static_cast<double>(pick)));
      }
    }
    return absl::OkStatus();
  }

 private:
  int32_t dtype_;
  int64_t samples_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomNormal(const ir::Node& node, const KernelInfo&) {
  return MakeRandom(node, Dist::kNormal, false);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomUniform(const ir::Node& node, const KernelInfo&) {
  return MakeRandom(node, Dist::kUniform, false);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomNormalLike(const ir::Node& node, const KernelInfo&) {
  return MakeRandom(node, Dist::kNormal, true);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomUniformLike(const ir::Node& node, const KernelInfo&) {
  return MakeRandom(node, Dist::kUniform, true);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeBernoulli(const ir::Node& node, const KernelInfo&) {
  return MakeRandom(node, Dist::kBernoulli, true);
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMultinomial(const ir::Node& node, const KernelInfo&) {
  int64_t dtype = AttrInt(node, "dtype", 6);
  if (dtype != 6 && dtype != 7)
    return absl::InvalidArgumentError(absl::StrCat("dtype must be int32 or int64, got ", dtype));
  int64_t samples = AttrInt(node, "sample_size", 1);
  if (samples < 1)
    return absl::InvalidArgumentError(absl::StrCat("sample_size must be positive, got ", samples));
  return std::unique_ptr<Kernel>(new MultinomialKernel(static_cast<int32_t>(dtype), samples));
}

}  // namespace onnxkit::runner::reference
