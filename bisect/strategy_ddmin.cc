// ddmin over node sets (Zeller & Hildebrandt): split the nodes into k
// chunks; try each chunk alone, then each complement; on success restart
// at the smaller set, else double k until chunks are single nodes. A
// candidate is any node subset (not only a range): tensors it cuts become
// graph inputs fed with golden values. Ending at k = n without success
// proves the result 1-minimal (no single node can go).
#include <algorithm>

#include "bisect/strategies.h"

namespace onnxkit::bisect {
namespace {

std::vector<std::vector<int>> Split(const std::vector<int>& items, size_t k) {
  std::vector<std::vector<int>> chunks;
  size_t start = 0;
  for (size_t i = 0; i < k; ++i) {
    size_t end = start + (items.size() - start) / (k - i);
    chunks.emplace_back(items.begin() + static_cast<std::ptrdiff_t>(start), items.begin() + static_cast<std::ptrdiff_t>(end));
    start = end;
  }
  return chunks;
}

std::vector<int> AllIndices(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

absl::Status Ddmin(Reducer& r) {
  size_t k = 2;
  while (!r.OutOfBudget()) {
    std::vector<int> items = AllIndices(r.nodes());
    if (items.size() < 2) {
      r.set_one_minimal(true);  // a single node cannot lose a node and stay a model
      return absl::OkStatus();
    }
    k = std::min(k, items.size());
    std::vector<std::vector<int>> chunks = Split(items, k);
    // Subsets first: they shrink fastest.
    auto subset = r.TryFirst(static_cast<int>(k), [&](int i) { return r.WithNodes(chunks[static_cast<size_t>(i)]); });
    if (!subset.ok()) return subset.status();
    if (*subset >= 0) {
      k = 2;
      continue;
    }
    if (k > 2) {
      auto complement = r.TryFirst(static_cast<int>(k), [&](int i) {
        std::vector<int> keep;
        for (size_t c = 0; c < k; ++c) {
          if (c != static_cast<size_t>(i)) keep.insert(keep.end(), chunks[c].begin(), chunks[c].end());
        }
        return r.WithNodes(keep);
      });
      if (!complement.ok()) return complement.status();
      if (*complement >= 0) {
        k = std::max<size_t>(k - 1, 2);
        continue;
      }
    }
    if (k >= items.size()) {
      r.set_one_minimal(!r.OutOfBudget());
      return absl::OkStatus();
    }
    k = std::min(items.size(), 2 * k);
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
