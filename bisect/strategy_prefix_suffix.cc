// prefix-suffix: the baseline of contiguous reducers (polygraphy debug
// reduce --mode bisect): binary-search the shortest interesting prefix of
// the nodes (in file order), then the shortest interesting suffix of that
// prefix. Assumes monotonicity, which node-set failures need not have.
#include <algorithm>

#include "bisect/strategies.h"

namespace onnxkit::bisect {
namespace {

std::vector<int> Range(int begin, int end) {
  std::vector<int> v;
  for (int i = begin; i < end; ++i) v.push_back(i);
  return v;
}

}  // namespace

absl::Status PrefixSuffix(Reducer& r) {
  int n = r.nodes();
  if (n < 2) return absl::OkStatus();
  // Smallest end e such that nodes [0, e) are interesting ([0, n) is).
  int lo = 1, hi = n;
  while (lo < hi && !r.OutOfBudget()) {
    int mid = lo + (hi - lo) / 2;
    auto got = r.TryFirst(1, [&](int) { return r.WithNodes(Range(0, mid)); });
    if (!got.ok()) return got.status();
    if (*got == 0) {
      // TryFirst made the prefix current; indices below `mid` are unchanged.
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  int end = std::min(hi, r.nodes());
  // Largest start s such that nodes [s, end) are interesting.
  int s_lo = 0, s_hi = end - 1;
  int base = 0;  // nodes already dropped from the front
  while (s_lo < s_hi && !r.OutOfBudget()) {
    int mid = s_lo + (s_hi - s_lo + 1) / 2;
    auto got = r.TryFirst(1, [&](int) { return r.WithNodes(Range(mid - base, end - base)); });
    if (!got.ok()) return got.status();
    if (*got == 0) {
      s_lo = mid;
      base = mid;
    } else {
      s_hi = mid - 1;
    }
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
