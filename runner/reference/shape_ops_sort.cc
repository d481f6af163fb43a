// Reference kernels that order elements: TopK (k attribute before opset 10,
// K input from 10; largest/sorted from 11; ties keep the lower index first)
// and Unique (flattened or along an axis, sorted or in order of first
// occurrence, with indices, inverse_indices and counts).
//
// Comparisons put NaN above every number and equal to itself, so sorting is
// a strict weak order whatever the data.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {

using shape_ops::DimProduct;

namespace {

// Compares elements a and b of a tensor: -1, 0 or 1. Strings compare
// bytewise. Type-erased, so the sorting code below exists once.
using ElementCompare = std::function<int(int64_t, int64_t)>;

absl::StatusOr<ElementCompare> MakeCompare(const Tensor& t) {
  if (t.is_string()) {
    const std::vector<std::string>* s = &t.strings();
    return ElementCompare([s](int64_t a, int64_t b) {
      int c = (*s)[static_cast<size_t>(a)].compare((*s)[static_cast<size_t>(b)]);
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    });
  }
  ElementCompare cmp;
  ONNXKIT_RETURN_IF_ERROR(VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    const T* p = t.data<T>();
    cmp = [p](int64_t a, int64_t b) {
      C x = static_cast<C>(p[a]), y = static_cast<C>(p[b]);
      if constexpr (std::is_floating_point_v<C>) {
        bool nx = std::isnan(x), ny = std::isnan(y);
        if (nx || ny) return nx == ny ? 0 : nx ? 1 : -1;
      }
      return x < y ? -1 : y < x ? 1 : 0;
    };
    return absl::OkStatus();
  }));
  return cmp;
}

// True when a comes before b in TopK's order: the larger (largest) or
// smaller value first, NaN above every number, ties by the lower index.
template <typename T>
struct TopKBefore {
  bool largest;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    if constexpr (std::is_floating_point_v<T>) {
      const bool na = std::isnan(a.first), nb = std::isnan(b.first);
      if (na || nb) {
        if (na && nb) return a.second < b.second;
        return largest ? na : nb;
      }
    }
    if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  }
};

// Up to this k, TopK keeps its best values in a sorted list (insertion);
// above, it gathers the values that beat the worst held one in a buffer of
// 2k and cuts it back to the best k (a selection) whenever it fills.
constexpr int64_t kInsertionTopK = 16;
// The most elements of a strided slab TopK transposes at once.
constexpr int64_t kMaxTopKSlab = int64_t{1} << 22;

// Whether v may go before a held value `worst` in TopK's order: a cheap
// test that lets through every value that does (NaN included) and most
// that do not fail it; `before` decides the rest.
template <typename T>
bool MayBeat(T v, T worst, bool largest) {
  return largest ? !(v <= worst) : !(v >= worst);
}

// The first position from `i` on of a contiguous row whose value may beat
// `worst` (dim when none), tested 16 values at a time.
template <typename T>
int64_t NextCandidate(const T* src, int64_t i, int64_t dim, T worst, bool largest) {
  constexpr int64_t kBlock = 16;
  // Counting in two branch-free loops lets the compiler use vector compares.
  if (largest) {
    for (; i + kBlock <= dim; i += kBlock) {
      int n = 0;
      for (int64_t j = 0; j < kBlock; ++j) n += !(src[i + j] <= worst);
      if (n != 0) break;
    }
  } else {
    for (; i + kBlock <= dim; i += kBlock) {
      int n = 0;
      for (int64_t j = 0; j < kBlock; ++j) n += !(src[i + j] >= worst);
      if (n != 0) break;
    }
  }
  for (; i < dim; ++i) {
    if (MayBeat(src[i], worst, largest)) return i;
  }
  return dim;
}

// TopK over [outer, dim, inner] for one plain numeric type: per row, the
// best k (value, index) pairs in order. Once k values are held, only those
// beating the worst of them are looked at.
template <typename T>
void TopKTyped(const T* x, int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest, T* values,
               int64_t* indices) {
  if (k <= 0) return;
  using Entry = std::pair<T, int64_t>;
  const TopKBefore<T> before{largest};
  const bool insertion = k <= kInsertionTopK;
  const size_t cap = static_cast<size_t>(insertion ? k : std::min(2 * k, dim));
  std::vector<Entry> held;
  held.reserve(cap);
  // Strided rows are gathered first, so that the scans below read them
  // whole: a slab [dim, inner] at a time when it is small enough (reading
  // it in order), else row by row.
  const bool whole_slab = inner > 1 && dim * inner <= kMaxTopKSlab;
  std::vector<T> line(inner > 1 ? static_cast<size_t>(whole_slab ? dim * inner : dim) : 0);
  for (int64_t o = 0; o < outer; ++o) {
    const T* slab = x + o * dim * inner;
    if (whole_slab) {
      for (int64_t i = 0; i < dim; ++i) {
        for (int64_t in = 0; in < inner; ++in) line[static_cast<size_t>(in * dim + i)] = slab[i * inner + in];
      }
    }
    for (int64_t in = 0; in < inner; ++in) {
      const T* src = slab + in;
      if (whole_slab) {
        src = line.data() + in * dim;
      } else if (inner > 1) {
        for (int64_t i = 0; i < dim; ++i) line[static_cast<size_t>(i)] = src[i * inner];
        src = line.data();
      }
      held.clear();
      for (int64_t i = 0; i < k; ++i) held.emplace_back(src[i], i);
      // `worst`: the k-th best of the values held when it was set; later
      // values that do not beat it are not among the best k.
      Entry worst;
      if (insertion) {
        std::sort(held.begin(), held.end(), before);
        worst = held.back();
      } else {
        worst = *std::max_element(held.begin(), held.end(), before);
      }
      for (int64_t i = k; i < dim; ++i) {
        i = NextCandidate(src, i, dim, worst.first, largest);
        if (i == dim) break;
        const Entry v{src[i], i};
        if (!before(v, worst)) continue;
        if (insertion) {
          // A later index never goes before an equal value.
          int64_t at = k - 1;
          while (at > 0 && before(v, held[static_cast<size_t>(at - 1)])) {
            held[static_cast<size_t>(at)] = held[static_cast<size_t>(at - 1)];
            --at;
          }
          held[static_cast<size_t>(at)] = v;
          worst = held.back();
          continue;
        }
        held.push_back(v);
        if (held.size() == cap) {
          std::nth_element(held.begin(), held.begin() + (k - 1), held.end(), before);
          held.resize(static_cast<size_t>(k));
          worst = held.back();
        }
      }
      if (!insertion) {
        if (held.size() > static_cast<size_t>(k)) {
          std::nth_element(held.begin(), held.begin() + (k - 1), held.end(), before);
          held.resize(static_cast<size_t>(k));
        }
        std::sort(held.begin(), held.end(), before);
      }
      for (int64_t r = 0; r < k; ++r) {
        const int64_t dst = (o * k + r) * inner + in;
        values[dst] = held[static_cast<size_t>(r)].first;
        indices[dst] = held[static_cast<size_t>(r)].second;
      }
    }
  }
}

}  // namespace

absl::Status TopK(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t k = 0;
  if (ctx.opset() < 10) {
    auto attr = ctx.node().GetInt("k");
    if (!attr) return absl::InvalidArgumentError("TopK before opset 10 needs the k attribute");
    k = *attr;
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* kt, ctx.Input(1));
    if (kt->size() != 1)
      return absl::InvalidArgumentError(absl::StrCat("K must hold one value, got ", DescribeTensor(*kt)));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, shape_ops::ReadInts(*kt, "K"));
    k = kv[0];
  }
  if (x->rank() == 0) return absl::InvalidArgumentError("TopK input must have rank >= 1");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", -1), x->rank()));
  size_t a = static_cast<size_t>(axis);
  int64_t dim = x->shape()[a];
  if (k < 0 || k > dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("k ", k, " is outside [0, ", dim, "] for input ", DescribeTensor(*x)));
  }
  bool largest = ctx.opset() < 11 || AttrInt(ctx.node(), "largest", 1) != 0;
  std::vector<int64_t> out_shape = x->shape();
  out_shape[a] = k;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * values, ctx.AllocateOutput(0, x->dtype(), out_shape));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * indices, ctx.AllocateOutput(1, 7, out_shape));
  int64_t outer = DimProduct(x->shape(), 0, a), inner = DimProduct(x->shape(), a + 1, x->shape().size());
  if (values->size() == 0) return absl::OkStatus();
  int64_t* index_out = indices->mutable_data<int64_t>();
  switch (x->dtype()) {
    case pb::kFloat:
      TopKTyped(x->data<float>(), outer, dim, inner, k, largest, values->mutable_data<float>(), index_out);
      return absl::OkStatus();
    case pb::kDouble:
      TopKTyped(x->data<double>(), outer, dim, inner, k, largest, values->mutable_data<double>(), index_out);
      return absl::OkStatus();
    case pb::kInt32:
      TopKTyped(x->data<int32_t>(), outer, dim, inner, k, largest, values->mutable_data<int32_t>(),
                index_out);
      return absl::OkStatus();
    case pb::kInt64:
      TopKTyped(x->data<int64_t>(), outer, dim, inner, k, largest, values->mutable_data<int64_t>(),
                index_out);
      return absl::OkStatus();
    default:
      break;
  }
  ElementCopier copy(*x, *values);
  ONNXKIT_ASSIGN_OR_RETURN(ElementCompare cmp, MakeCompare(*x));
  std::vector<int64_t> order(static_cast<size_t>(dim));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * dim * inner + in;
      std::iota(order.begin(), order.end(), 0);
      // The first k of a stable sort: ties keep the lower index first.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t i, int64_t j) {
        int c = cmp(base + i * inner, base + j * inner);
        if (c != 0) return largest ? c > 0 : c < 0;
        return i < j;
      });
      for (int64_t r = 0; r < k; ++r) {
        int64_t dst = (o * k + r) * inner + in;
        copy.Copy(base + order[static_cast<size_t>(r)] * inner, dst);
        indices->mutable_data<int64_t>()[dst] = order[static_cast<size_t>(r)];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Unique(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  auto axis_attr = ctx.node().GetInt("axis");
  bool sorted = AttrInt(ctx.node(), "sorted", 1) != 0;
  // Items are elements (no axis: the input read flattened) or slices along
  // the axis; item k holds the elements (o * n + k) * inner + in.
  std::vector<int64_t> shape = axis_attr ? x->shape() : std::vector<int64_t>{x->size()};
  int64_t axis = 0;
  if (axis_attr) {
    ONNXKIT_ASSIGN_OR_RETURN(axis, NormalizeAxis(*axis_attr, x->rank()));
  }
  size_t a = static_cast<size_t>(axis);
  int64_t n = shape[a];
  int64_t outer = DimProduct(shape, 0, a), inner = DimProduct(shape, a + 1, shape.size());
  std::vector<int64_t> first;  // per unique item, its first occurrence
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  ONNXKIT_ASSIGN_OR_RETURN(ElementCompare cmp, MakeCompare(*x));
  {
    auto compare_items = [&](int64_t i, int64_t j) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t in = 0; in < inner; ++in) {
          int c = cmp((o * n + i) * inner + in, (o * n + j) * inner + in);
          if (c != 0) return c;
        }
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return compare_items(i, j) < 0; });
    // Groups of equal items, in sorted order; each starts at its first occurrence.
    std::vector<std::vector<int64_t>> groups;
    for (size_t p = 0; p < order.size(); ++p) {
      if (p == 0 || compare_items(order[p - 1], order[p]) != 0) groups.emplace_back();
      groups.back().push_back(order[p]);
    }
    if (!sorted) {
      std::sort(groups.begin(), groups.end(), [](const auto& g, const auto& h) { return g[0] < h[0]; });
    }
    for (size_t u = 0; u < groups.size(); ++u) {
      first.push_back(groups[u][0]);
      counts.push_back(static_cast<int64_t>(groups[u].size()));
      for (int64_t item : groups[u]) inverse[static_cast<size_t>(item)] = static_cast<int64_t>(u);
    }
  }
  int64_t m = static_cast<int64_t>(first.size());
  std::vector<int64_t> y_shape = shape;
  y_shape[a] = m;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), y_shape));
  ElementCopier copy(*x, *y);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t u = 0; u < m; ++u)
      copy.CopyRun((o * n + first[static_cast<size_t>(u)]) * inner, (o * m + u) * inner, inner);
  }
  const std::vector<int64_t>* lists[] = {&first, &inverse, &counts};
  for (int i = 0; i < 3; ++i) {
    if (!ctx.OutputRequested(i + 1)) continue;
    const std::vector<int64_t>& v = *lists[i];
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i + 1, 7, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t->mutable_data<int64_t>());
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::runner::reference
