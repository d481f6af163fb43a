// The (domain, op) -> shape function table, built from shape_fns.def.
#include "checker/infer/shape_fns.h"

#include <algorithm>
#include <utility>

#include "lib/ops/registry.h"

namespace onnxkit::checker::infer {
namespace {

struct Entry {
  std::string_view domain;
  std::string_view op;
  ShapeFn fn;
};

constexpr Entry kEntries[] = {
#define ONNXKIT_SHAPE_FN(domain, op, function) {domain, op, &function},
#include "checker/infer/shape_fns.def"
#undef ONNXKIT_SHAPE_FN
};

constexpr bool Sorted() {
  for (size_t i = 1; i < std::size(kEntries); ++i) {
    const Entry& a = kEntries[i - 1];
    const Entry& b = kEntries[i];
    if (std::pair(a.domain, a.op) >= std::pair(b.domain, b.op)) return false;
  }
  return true;
}
static_assert(Sorted(), "shape_fns.def must be sorted by (domain, op) without duplicates");

}  // namespace

ShapeFn FindShapeFn(std::string_view domain, std::string_view op) {
  const std::pair<std::string_view, std::string_view> key(ops::CanonicalDomain(domain), op);
  const Entry* it = std::lower_bound(std::begin(kEntries), std::end(kEntries), key, [](const Entry& e, const auto& k) {
    return std::pair(e.domain, e.op) < k;
  });
  if (it == std::end(kEntries) || it->domain != key.first || it->op != key.second) return nullptr;
  return it->fn;
}

}  // namespace onnxkit::checker::infer
