// Reference kernels: SVMClassifier and SVMRegressor (ai.onnx.ml 1).
//
// Kernels (kernel_params = [gamma, coef0, degree], all 0 when absent):
// LINEAR x.y, POLY (gamma x.y + coef0)^degree, RBF exp(-gamma |x - y|^2),
// SIGMOID tanh(gamma x.y + coef0), computed in float as ONNX Runtime does.
//
// SVMClassifier with support vectors (vectors_per_class sums to V > 0;
// coefficients [C - 1, V]; rho one per class pair): the pair (i, j), i < j,
// scores sum(coef[j - 1][sv of i] K) + sum(coef[i][sv of j] K) + rho[pair]
// and votes for i when the score is > 0, else for j; the label is the class
// with the most votes (first on ties). Z holds the pair scores ([-s, s] for
// two classes, or [1 - p, p] under a post_transform, p = logistic(s) for
// LOGISTIC, else s, as ONNX Runtime does), or, with prob_a and
// prob_b, the class probabilities from the pairwise sigmoids
// 1 / (1 + exp(s a + b)) by the pairwise coupling of Wu, Lin and Weng.
// Without support vectors it is linear: coefficients [C, F], the score of
// class c is x.coef[c] + rho[0], the label the best score's (with two
// classes: class 1 when the best score is >= 0.5 with weights all >= 0, or
// > 0 with mixed weights).
// SVMRegressor: sum(coef[v] K(x, sv[v])) + rho[0] (or x.coefficients +
// rho[0] without support vectors), then the sign (1 or -1) when one_class.
// post_transform applies to the scores; a single score only takes PROBIT.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

enum class KernelType { kLinear, kPoly, kRbf, kSigmoid };

struct SvmKernel {
  KernelType type = KernelType::kLinear;
  float gamma = 0, coef0 = 0, degree = 0;

  float operator()(const float* a, const float* b, int64_t n) const {
    if (type == KernelType::kRbf) {
      float sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
      return std::exp(-gamma * sum);
    }
    float dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += a[i] * b[i];
    switch (type) {
      case KernelType::kPoly:
        return std::pow(gamma * dot + coef0, degree);
      case KernelType::kSigmoid:
        return std::tanh(gamma * dot + coef0);
      default:
        return dot;
    }
  }
};

absl::StatusOr<SvmKernel> ParseKernel(const ir::Node& node) {
  SvmKernel k;
  const std::string type = AttrString(node, "kernel_type", "LINEAR");
  static constexpr std::string_view kNames[] = {"LINEAR", "POLY", "RBF", "SIGMOID"};
  bool found = false;
  for (int i = 0; i < 4; ++i) {
    if (type == kNames[i]) {
      k.type = static_cast<KernelType>(i);
      found = true;
    }
  }
  if (!found)
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_type '", type, "' is not LINEAR, POLY, RBF or SIGMOID"));
  std::vector<float> params = AttrFloats(node, "kernel_params");
  if (!params.empty() && params.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_params must hold [gamma, coef0, degree], got ", params.size(), " values"));
  }
  if (params.size() == 3) {
    k.gamma = params[0];
    k.coef0 = params[1];
    k.degree = params[2];
  }
  return k;
}

// X as rows of `features` floats; [F] is one row.
absl::StatusOr<std::vector<float>> Rows(const Tensor& x, int64_t features, int64_t* rows) {
  if (x.is_string() || x.rank() == 0 || x.rank() > 2 ||
      (x.dtype() != pb::kFloat && x.dtype() != pb::kDouble && x.dtype() != pb::kInt64 &&
       x.dtype() != pb::kInt32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("X must be a float/double/int64/int32 [N, F] or [F] tensor, got ", DescribeTensor(x)));
  }
  if (x.shape().back() != features) {
    return absl::InvalidArgumentError(
        absl::StrCat("X has ", x.shape().back(), " features, the model ", features));
  }
  *rows = x.rank() == 2 ? x.dim(0) : 1;
  std::vector<float> out(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < x.size(); ++i)
    out[static_cast<size_t>(i)] = static_cast<float>(shape_ops::LoadDouble(x, i));
  return out;
}

// Class probabilities from the pairwise probabilities r (k x k, r[i][j] =
// P(i | i or j)): the fixed point of Wu, Lin and Weng's second method,
// iterated as libsvm does (at most max(100, k) sweeps, stopping below
// 0.005 / k), in float.
std::vector<float> CoupleProbabilities(int64_t k, const std::vector<float>& r) {
  const size_t n = static_cast<size_t>(k);
  std::vector<float> q(n * n, 0), p(n, 1.0f / static_cast<float>(k)), qp(n, 0);
  for (size_t t = 0; t < n; ++t) {
    for (size_t j = 0; j < n; ++j) {
      if (j == t) continue;
      q[t * n + t] += r[j * n + t] * r[j * n + t];
      q[t * n + j] = -r[j * n + t] * r[t * n + j];
    }
  }
  const int iterations = std::max(100, static_cast<int>(k));
  const float eps = 0.005f / static_cast<float>(k);
  for (int it = 0; it < iterations; ++it) {
    float pqp = 0;
    for (size_t t = 0; t < n; ++t) {
      qp[t] = 0;
      for (size_t j = 0; j < n; ++j) qp[t] += q[t * n + j] * p[j];
      pqp += p[t] * qp[t];
    }
    float worst = 0;
    for (size_t t = 0; t < n; ++t) worst = std::max(worst, std::fabs(qp[t] - pqp));
    if (worst < eps) break;
    for (size_t t = 0; t < n; ++t) {
      const float diff = (-qp[t] + pqp) / q[t * n + t];
      p[t] += diff;
      pqp = (pqp + diff * (diff * q[t * n + t] + 2 * qp[t])) / (1 + diff) / (1 + diff);
      for (size_t j = 0; j < n; ++j) {
        qp[j] = (qp[j] + diff * q[t * n + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
  return p;
}

float LogisticF(float v) {
  float e = 1 / (1 + std::exp(-std::fabs(v)));
  return v < 0 ? 1 - e : e;
}

class SvmClassifierKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    ONNXKIT_ASSIGN_OR_RETURN(kernel_, ParseKernel(node));
    ONNXKIT_ASSIGN_OR_RETURN(post_, ml_util::PostTransformCode(AttrString(node, "post_transform", "NONE")));
    labels_int_ = AttrInts(node, "classlabels_ints");
    if (const ir::Attribute* a = node.FindAttribute("classlabels_strings")) labels_str_ = a->proto.strings;
    if (labels_int_.empty() == labels_str_.empty()) {
      return absl::InvalidArgumentError(
          "exactly one of classlabels_ints and classlabels_strings must be given");
    }
    classes_ = static_cast<int64_t>(std::max(labels_int_.size(), labels_str_.size()));
    if (classes_ > 65535)
      return absl::InvalidArgumentError(absl::StrCat(classes_, " classes are more than 65535"));
    coef_ = AttrFloats(node, "coefficients");
    rho_ = AttrFloats(node, "rho");
    prob_a_ = AttrFloats(node, "prob_a");
    prob_b_ = AttrFloats(node, "prob_b");
    sv_ = AttrFloats(node, "support_vectors");
    std::vector<int64_t> per_class = AttrInts(node, "vectors_per_class");
    if (coef_.empty()) return absl::InvalidArgumentError("coefficients are required");
    if (prob_a_.size() != prob_b_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prob_a has ", prob_a_.size(), " values, prob_b ", prob_b_.size()));
    }
    int64_t vectors = 0;
    for (int64_t v : per_class) {
      if (v < 0 || v > static_cast<int64_t>(sv_.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("vectors_per_class holds ", v, " for ", sv_.size(), " support vector values"));
      }
      start_.push_back(vectors);
      vectors += v;
    }
    if (vectors > static_cast<int64_t>(sv_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vectors_per_class sums to ", vectors, ", more than the ", sv_.size(), " support vector values"));
    }
    per_class_ = per_class;
    pairs_ = classes_ * (classes_ - 1) / 2;
    if (vectors > 0) {
      vectors_ = vectors;
      if (static_cast<int64_t>(per_class.size()) != classes_) {
        return absl::InvalidArgumentError(
            absl::StrCat("vectors_per_class has ", per_class.size(), " entries for ", classes_, " classes"));
      }
      if (classes_ < 2)
        return absl::InvalidArgumentError("a support vector classifier needs at least 2 classes");
      if (static_cast<int64_t>(sv_.size()) % vectors != 0 || sv_.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(sv_.size(), " support vector values do not split into ", vectors, " vectors"));
      }
      features_ = static_cast<int64_t>(sv_.size()) / vectors;
      if (static_cast<int64_t>(coef_.size()) != (classes_ - 1) * vectors) {
        return absl::InvalidArgumentError(
            absl::StrCat("coefficients must hold (classes - 1) x vectors = ", (classes_ - 1) * vectors,
                         " values, got ", coef_.size()));
      }
      if (static_cast<int64_t>(rho_.size()) < pairs_) {
        return absl::InvalidArgumentError(
            absl::StrCat("rho must hold one value per class pair (", pairs_, "), got ", rho_.size()));
      }
      if (!prob_a_.empty() && static_cast<int64_t>(prob_a_.size()) < pairs_) {
        return absl::InvalidArgumentError(absl::StrCat("prob_a/prob_b must hold one value per class pair (",
                                                       pairs_, "), got ", prob_a_.size()));
      }
    } else {
      kernel_.type = KernelType::kLinear;
      if (static_cast<int64_t>(coef_.size()) % classes_ != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(coef_.size(), " coefficients do not split into ", classes_, " classes"));
      }
      features_ = static_cast<int64_t>(coef_.size()) / classes_;
      if (rho_.empty()) return absl::InvalidArgumentError("rho must hold at least one value");
    }
    all_positive_ = std::all_of(coef_.begin(), coef_.end(), [](float c) { return c >= 0; });
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    int64_t rows = 0;
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<float> xs, Rows(*x, features_, &rows));
    const bool proba = !prob_a_.empty();
    const bool svc = vectors_ > 0;
    const int64_t width = svc && !proba ? (classes_ > 2 ? pairs_ : 2) : classes_;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y,
                             ctx.AllocateOutput(0, labels_str_.empty() ? pb::kInt64 : pb::kString, {rows}));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(1, pb::kFloat, {rows, width}));
    std::vector<float> kernels(static_cast<size_t>(vectors_));
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xs.data() + r * features_;
      std::vector<double> scores;
      int64_t best = 0;
      if (svc) {
        for (int64_t v = 0; v < vectors_; ++v)
          kernels[static_cast<size_t>(v)] = kernel_(row, sv_.data() + v * features_, features_);
        std::vector<int64_t> votes(static_cast<size_t>(classes_), 0);
        std::vector<float> pair_scores;
        int64_t pair = 0;
        for (int64_t i = 0; i < classes_; ++i) {
          for (int64_t j = i + 1; j < classes_; ++j) {
            double sum = 0;
            for (int64_t m = 0; m < per_class_[static_cast<size_t>(i)]; ++m) {
              int64_t v = start_[static_cast<size_t>(i)] + m;
              sum += static_cast<double>(coef_[static_cast<size_t>((j - 1) * vectors_ + v)]) *
                     kernels[static_cast<size_t>(v)];
            }
            for (int64_t m = 0; m < per_class_[static_cast<size_t>(j)]; ++m) {
              int64_t v = start_[static_cast<size_t>(j)] + m;
              sum += static_cast<double>(coef_[static_cast<size_t>(i * vectors_ + v)]) *
                     kernels[static_cast<size_t>(v)];
            }
            sum += rho_[static_cast<size_t>(pair++)];
            pair_scores.push_back(static_cast<float>(sum));
            ++votes[static_cast<size_t>(sum > 0 ? i : j)];
          }
        }
        best = std::max_element(votes.begin(), votes.end()) - votes.begin();
        if (proba) {
          std::vector<float> pairwise(static_cast<size_t>(classes_ * classes_), 0);
          int64_t k = 0;
          for (int64_t i = 0; i < classes_; ++i) {
            for (int64_t j = i + 1; j < classes_; ++j, ++k) {
              float p = 1 - LogisticF(pair_scores[static_cast<size_t>(k)] * prob_a_[static_cast<size_t>(k)] +
                                      prob_b_[static_cast<size_t>(k)]);
              p = std::min(std::max(p, 1.0e-7f), 1 - 1.0e-7f);
              pairwise[static_cast<size_t>(i * classes_ + j)] = p;
              pairwise[static_cast<size_t>(j * classes_ + i)] = 1 - p;
            }
          }
          for (float p : CoupleProbabilities(classes_, pairwise)) scores.push_back(p);
          ml_util::ApplyPostTransform(post_, scores);
        } else if (classes_ == 2) {
          const double s = pair_scores[0];
          const double p = post_ == 2 ? static_cast<double>(LogisticF(static_cast<float>(s))) : s;
          scores = post_ == 0 ? std::vector<double>{-s, s} : std::vector<double>{1 - p, p};
        } else {
          scores.assign(pair_scores.begin(), pair_scores.end());
          ml_util::ApplyPostTransform(post_, scores);
        }
      } else {
        for (int64_t c = 0; c < classes_; ++c) {
          scores.push_back(
              static_cast<double>(kernel_(row, coef_.data() + c * features_, features_) + rho_[0]));
        }
        best = std::max_element(scores.begin(), scores.end()) - scores.begin();
        const double top = scores[static_cast<size_t>(best)];
        if (classes_ == 2 && !proba && ((all_positive_ && top >= 0.5) || (!all_positive_ && top > 0)))
          best = 1;
        if (classes_ > 1 || post_ == 4) ml_util::ApplyPostTransform(post_, scores);
      }
      if (labels_str_.empty()) {
        y->mutable_data<int64_t>()[r] = labels_int_[static_cast<size_t>(best)];
      } else {
        y->mutable_strings()[static_cast<size_t>(r)] = labels_str_[static_cast<size_t>(best)];
      }
      for (int64_t c = 0; c < width; ++c)
        z->mutable_data<float>()[r * width + c] = DoubleToFloat(scores[static_cast<size_t>(c)]);
    }
    return absl::OkStatus();
  }

 private:
  SvmKernel kernel_;
  int64_t post_ = 0, classes_ = 0, pairs_ = 0, vectors_ = 0, features_ = 0;
  std::vector<int64_t> labels_int_, per_class_, start_;
  std::vector<std::string> labels_str_;
  std::vector<float> coef_, rho_, prob_a_, prob_b_, sv_;
  bool all_positive_ = true;
};

class SvmRegressorKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    ONNXKIT_ASSIGN_OR_RETURN(kernel_, ParseKernel(node));
    ONNXKIT_ASSIGN_OR_RETURN(post_, ml_util::PostTransformCode(AttrString(node, "post_transform", "NONE")));
    coef_ = AttrFloats(node, "coefficients");
    rho_ = AttrFloats(node, "rho");
    sv_ = AttrFloats(node, "support_vectors");
    vectors_ = AttrInt(node, "n_supports", 0);
    one_class_ = AttrInt(node, "one_class", 0) != 0;
    if (coef_.empty() || rho_.empty()) return absl::InvalidArgumentError("coefficients and rho are required");
    if (vectors_ < 0)
      return absl::InvalidArgumentError(absl::StrCat("n_supports ", vectors_, " is negative"));
    if (vectors_ > 0) {
      if (static_cast<int64_t>(coef_.size()) != vectors_ || sv_.empty() ||
          static_cast<int64_t>(sv_.size()) % vectors_ != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("need one coefficient per support vector and support_vectors split into ", vectors_,
                         " vectors, got ", coef_.size(), " and ", sv_.size(), " values"));
      }
      features_ = static_cast<int64_t>(sv_.size()) / vectors_;
    } else {
      kernel_.type = KernelType::kLinear;
      features_ = static_cast<int64_t>(coef_.size());
    }
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    int64_t rows = 0;
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<float> xs, Rows(*x, features_, &rows));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, {rows, 1}));
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xs.data() + r * features_;
      double s = 0;
      if (vectors_ > 0) {
        for (int64_t v = 0; v < vectors_; ++v) {
          s += static_cast<double>(coef_[static_cast<size_t>(v)]) *
               kernel_(row, sv_.data() + v * features_, features_);
        }
      } else {
        s = kernel_(row, coef_.data(), features_);
      }
      s = static_cast<double>(static_cast<float>(s) + rho_[0]);
      if (one_class_) s = s > 0 ? 1 : -1;
      std::vector<double> one = {s};
      if (post_ == 4) ml_util::ApplyPostTransform(post_, one);
      y->mutable_data<float>()[r] = DoubleToFloat(one[0]);
    }
    return absl::OkStatus();
  }

 private:
  SvmKernel kernel_;
  int64_t post_ = 0, vectors_ = 0, features_ = 0;
  bool one_class_ = false;
  std::vector<float> coef_, rho_, sv_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeSVMClassifier(const ir::Node& node, const KernelInfo&) {
  auto k = std::make_unique<SvmClassifierKernel>();
  ONNXKIT_RETURN_IF_ERROR(k->Init(node));
  return std::unique_ptr<Kernel>(std::move(k));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeSVMRegressor(const ir::Node& node, const KernelInfo&) {
  auto k = std::make_unique<SvmRegressorKernel>();
  ONNXKIT_RETURN_IF_ERROR(k->Init(node));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace onnxkit::runner::reference
