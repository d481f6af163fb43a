// Helpers shared by the shape and data-movement reference kernels.
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference::shape_ops {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, std::string_view what) {
  if (t.dtype() != 6 && t.dtype() != 7) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), " must be an int64 or int32 tensor, got ", DescribeTensor(t)));
  }
  return ReadInt64s(t);
}

absl::StatusOr<std::vector<double>> ReadDoubles(const Tensor& t, std::string_view what) {
  std::vector<double> out(static_cast<size_t>(t.size()));
  absl::Status st = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i)
      out[static_cast<size_t>(i)] = static_cast<double>(static_cast<ComputeT<T>>(p[i]));
    return absl::OkStatus();
  });
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), " must be a numeric tensor, got ", DescribeTensor(t)));
  }
  return out;
}

absl::StatusOr<double> ReadScalar(const Tensor& t, std::string_view what) {
  if (t.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), " must hold exactly one value, got ", DescribeTensor(t)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> v, ReadDoubles(t, what));
  return v[0];
}

absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank,
                                                   std::string_view what) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    ONNXKIT_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(a, rank, what));
    if (seen[static_cast<size_t>(n)]) {
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(what), " [", absl::StrJoin(axes, ", "), "] name axis ", n, " more than once"));
    }
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

absl::StatusOr<int64_t> CheckedCount(const std::vector<int64_t>& shape, std::string_view what) {
  auto n = CheckedElementCount(shape);
  if (!n) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), " ", ShapeString(shape), " has a negative dim or too many elements"));
  }
  return *n;
}

absl::Status StoreDouble(Tensor& t, int64_t i, double value) {
  return VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    if constexpr (std::is_same_v<T, bool>) {
      t.mutable_data<T>()[i] = value != 0;
    } else if constexpr (std::is_integral_v<T>) {  // truncate, saturating (no UB out of range)
      double lo = static_cast<double>(std::numeric_limits<T>::min());
      double hi = static_cast<double>(std::numeric_limits<T>::max());
      if (std::isnan(value)) value = 0;
      t.mutable_data<T>()[i] = value <= lo   ? std::numeric_limits<T>::min()
                               : value >= hi ? std::numeric_limits<T>::max()
                                             : static_cast<T>(value);
    } else {
      t.mutable_data<T>()[i] = static_cast<T>(static_cast<C>(value));
    }
    return absl::OkStatus();
  });
}

double LoadDouble(const Tensor& t, int64_t i) {
  double out = 0;
  (void)VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    out = static_cast<double>(static_cast<ComputeT<T>>(t.data<T>()[i]));
    return absl::OkStatus();
  });
  return out;
}

int64_t DimProduct(const std::vector<int64_t>& shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace onnxkit::runner::reference::shape_ops
