// Comparison metrics.
#include "runner/compare/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/base/data_type.h"
#include "lib/base/strings.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner {
namespace {

// Element i of a numeric tensor as a double (integers exactly up to 2^53).
double ElementAt(const Tensor& t, int64_t i) { return reference::ElementAsDouble(t, i).value_or(0); }

bool Supported(int32_t dtype) { return reference::IsStandardNumeric(dtype); }

class Accumulator {
 public:
  explicit Accumulator(Tolerance tol) { m_.tolerance = tol; }

  void Add(double a, double e, int64_t index) {
    ++m_.elements;
    bool a_special = std::isnan(a) || std::isinf(a);
    bool e_special = std::isnan(e) || std::isinf(e);
    if (a_special || e_special) {
      bool same = (std::isnan(a) && std::isnan(e)) || a == e;
      if (!same) {
        ++m_.nan_inf_mismatches;
        ++m_.out_of_tolerance;
        if (!nan_worst_) {
          nan_worst_ = true;
          SetWorst(a, e, index);
        }
      }
      return;
    }
    double diff = std::fabs(a - e);
    double allowed = m_.tolerance.atol + m_.tolerance.rtol * std::fabs(e);
    bool out = !(diff <= allowed);
    // The worst element is a NaN/Inf mismatch, else the one farthest beyond
    // its tolerance, else (all within) the largest absolute difference: with
    // an absolute tolerance the largest difference may sit on a large value
    // well within its relative tolerance while a small one fails.
    if (!nan_worst_) {
      if (out && (!tolerance_worst_ || diff - allowed > worst_excess_)) {
        tolerance_worst_ = true;
        worst_excess_ = diff - allowed;
        SetWorst(a, e, index);
      } else if (!tolerance_worst_ && (diff > m_.max_abs || m_.worst_index < 0)) {
        SetWorst(a, e, index);
      }
    }
    m_.max_abs = std::max(m_.max_abs, diff);
    // Relative to a non-zero expected value only: against 0 any difference
    // would be ~1e300 times itself, a number that says nothing.
    if (diff > 0 && e != 0) m_.max_rel = std::max(m_.max_rel, diff / std::fabs(e));
    sum_abs_ += diff;
    dot_ += a * e;
    norm_a_ += a * a;
    norm_e_ += e * e;
    noise_ += diff * diff;
    if (out) ++m_.out_of_tolerance;
  }

  // n elements compared as bytes (types without arithmetic), `differ` of
  // them counted out of tolerance.
  void AddOpaque(int64_t n, int64_t differ) {
    m_.elements += n;
    m_.out_of_tolerance += differ;
  }

  Metrics Finish() {
    Metrics m = m_;
    m.mean_abs = m.elements == 0 ? 0 : sum_abs_ / static_cast<double>(m.elements);
    double denom = std::sqrt(norm_a_) * std::sqrt(norm_e_);
    m.cosine = denom == 0 ? (norm_a_ == norm_e_ ? 1.0 : 0.0) : dot_ / denom;
    m.sqnr_db = noise_ == 0    ? std::numeric_limits<double>::infinity()
                : norm_e_ == 0 ? -std::numeric_limits<double>::infinity()
                               : 10 * std::log10(norm_e_ / noise_);
    m.within_tolerance = m.comparable && m.out_of_tolerance == 0;
    return m;
  }

 private:
  void SetWorst(double a, double e, int64_t index) {
    m_.worst_index = index;
    m_.worst_actual = a;
    m_.worst_expected = e;
  }

  Metrics m_;
  bool nan_worst_ = false;
  bool tolerance_worst_ = false;
  double worst_excess_ = 0;
  double sum_abs_ = 0, dot_ = 0, norm_a_ = 0, norm_e_ = 0, noise_ = 0;
};

Metrics NotComparable(std::string why) {
  Metrics m;
  m.comparable = false;
  m.within_tolerance = false;
  m.mismatch = std::move(why);
  return m;
}

// Adds the elements of tensor `a` against `e` to `acc`, numbered from
// `*offset` on; false with `why` when the two cannot be compared.
bool AddTensor(const Tensor& a, const Tensor& e, Accumulator& acc, int64_t* offset, std::string* why) {
  if (a.dtype() != e.dtype()) {
    *why = absl::StrCat("element types differ: ", DescribeTensor(a), " vs ", DescribeTensor(e));
    return false;
  }
  if (a.shape() != e.shape()) {
    *why = absl::StrCat("shapes differ: ", DescribeTensor(a), " vs ", DescribeTensor(e));
    return false;
  }
  const int64_t base = *offset;
  *offset += e.size();
  if (e.is_string()) {
    for (int64_t i = 0; i < e.size(); ++i) {
      bool same = a.strings()[static_cast<size_t>(i)] == e.strings()[static_cast<size_t>(i)];
      acc.Add(same ? 0 : 1, 0, base + i);
    }
    return true;
  }
  if (!Supported(e.dtype())) {
    // Exact byte comparison for types without arithmetic (float8, int4...).
    bool same = a.nbytes() == e.nbytes() && (a.nbytes() == 0 || std::memcmp(a.raw(), e.raw(), a.nbytes()) == 0);
    acc.AddOpaque(e.size(), same ? 0 : 1);
    return true;
  }
  for (int64_t i = 0; i < e.size(); ++i) acc.Add(ElementAt(a, i), ElementAt(e, i), base + i);
  return true;
}

// A sequence, optional or map adds its tensors in order into the one
// accumulator, so cosine and SQNR are those of all its elements together
// and worst_index counts across them.
bool AddValue(const RtValue& a, const RtValue& e, Accumulator& acc, int64_t* offset, std::string* why) {
  if (a.kind() != e.kind()) {
    *why = "value kinds differ (tensor, sequence, optional or map)";
    return false;
  }
  switch (e.kind()) {
    case RtValue::Kind::kTensor:
      return AddTensor(a.tensor(), e.tensor(), acc, offset, why);
    case RtValue::Kind::kSequence:
      if (a.elements().size() != e.elements().size()) {
        *why = absl::StrCat("sequence lengths differ: ", a.elements().size(), " vs ", e.elements().size());
        return false;
      }
      for (size_t i = 0; i < e.elements().size(); ++i) {
        if (!AddValue(a.elements()[i], e.elements()[i], acc, offset, why)) return false;
      }
      return true;
    case RtValue::Kind::kOptional:
      if (a.has_value() != e.has_value()) {
        *why = "one optional is empty, the other is not";
        return false;
      }
      return !e.has_value() || AddValue(a.value(), e.value(), acc, offset, why);
    case RtValue::Kind::kMap: {
      Accumulator keys(Tolerance{0, 0});
      int64_t key_offset = 0;
      if (!AddTensor(a.map_keys(), e.map_keys(), keys, &key_offset, why) || !keys.Finish().within_tolerance) {
        *why = "map keys differ";
        return false;
      }
      return AddValue(a.map_values(), e.map_values(), acc, offset, why);
    }
    case RtValue::Kind::kEmpty:
      return true;
  }
  return true;
}

// The element type of the first tensor in `v`, if it holds one.
std::optional<int32_t> FirstDtype(const RtValue& v) {
  switch (v.kind()) {
    case RtValue::Kind::kTensor:
      return v.tensor().dtype();
    case RtValue::Kind::kSequence:
      if (v.elements().empty())
        return v.elem_dtype() != 0 ? std::optional<int32_t>(v.elem_dtype()) : std::nullopt;
      return FirstDtype(v.elements()[0]);
    case RtValue::Kind::kOptional:
      return v.has_value() ? FirstDtype(v.value()) : std::nullopt;
    case RtValue::Kind::kMap:
      return FirstDtype(v.map_values());
    case RtValue::Kind::kEmpty:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

Tolerance DefaultTolerance(int32_t dtype) {
  switch (dtype) {
    case 1: return {1e-5, 1e-4};
    case 11: return {1e-9, 1e-7};
    case 10: return {1e-3, 1e-3};
    case 16: return {1e-2, 1e-2};
    case 17: case 18: case 19: case 20: case 23: case 24: return {1e-1, 1e-1};
    default: return {0, 0};
  }
}

Metrics CompareValues(const RtValue& a, const RtValue& e, std::optional<Tolerance> tolerance) {
  Tolerance tol = tolerance ? *tolerance : DefaultTolerance(FirstDtype(e).value_or(1));
  Accumulator acc(tol);
  int64_t offset = 0;
  std::string why;
  if (!AddValue(a, e, acc, &offset, &why)) return NotComparable(std::move(why));
  return acc.Finish();
}

std::string FormatMetrics(const Metrics& m) {
  if (!m.comparable) return absl::StrCat("not comparable: ", m.mismatch);
  return absl::StrFormat(
      "max_abs %.3g  max_rel %.3g  mean_abs %.3g  cosine %.6f  sqnr %.1f dB  out_of_tol %lld/%lld (%.2f%%)%s",
      m.max_abs, m.max_rel, m.mean_abs, m.cosine, m.sqnr_db, static_cast<long long>(m.out_of_tolerance),
      static_cast<long long>(m.elements), 100 * m.share_out_of_tolerance(),
      m.nan_inf_mismatches ? absl::StrCat("  nan/inf mismatches ", m.nan_inf_mismatches) : std::string());
}

}  // namespace onnxkit::runner
