// initializers: replace float weights (more than one element) by zeros of
// the same shape, all at once, else one at a time, largest first (the
// analogue of llvm-reduce's operands-zero). The reproducer then carries no
// real weights.
#include <algorithm>
#include <string>

#include "bisect/strategies.h"

namespace onnxkit::bisect {
namespace {

bool Zeroable(const pb::TensorProto& t) {
  if (t.data_type != pb::kFloat || t.dims.empty()) return false;
  int64_t n = 1;
  for (int64_t d : t.dims) {
    if (d < 0 || d > (int64_t{1} << 28)) return false;
    n *= d;
    if (n > (int64_t{1} << 28)) return false;
  }
  if (n <= 1) return false;
  // Already zero inline raw data: nothing to gain.
  if (t.data_location == 0 && t.float_data.empty() && t.raw_data.size() == static_cast<size_t>(n) * 4) {
    std::string_view raw = t.raw_data.view();
    if (std::all_of(raw.begin(), raw.end(), [](char c) { return c == 0; })) return false;
  }
  return true;
}

void Zero(pb::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  t.float_data.clear();
  t.external_data.clear();
  t.data_location = 0;
  t.raw_data = Bytes::Own(std::string(static_cast<size_t>(n) * 4, '\0'));
}

}  // namespace

absl::Status ZeroInitializers(Reducer& r) {
  const pb::GraphProto& g = *r.current().graph;
  std::vector<size_t> targets;
  for (size_t i = 0; i < g.initializer.size(); ++i) {
    if (Zeroable(g.initializer[i])) targets.push_back(i);
  }
  if (targets.empty()) return absl::OkStatus();
  std::stable_sort(targets.begin(), targets.end(), [&](size_t a, size_t b) {
    return g.initializer[a].raw_data.size() > g.initializer[b].raw_data.size();
  });
  pb::ModelProto base = r.current();
  auto zeroed = [&](const std::vector<size_t>& which) -> absl::StatusOr<pb::ModelProto> {
    pb::ModelProto m = base;
    for (size_t i : which) Zero(m.graph.mutable_value().initializer[i]);
    return m;
  };
  auto all = r.TryFirst(1, [&](int) { return zeroed(targets); });
  if (!all.ok() || *all >= 0 || targets.size() == 1) return all.status();
  for (size_t i = 0; i < targets.size() && i < 32 && !r.OutOfBudget(); ++i) {
    auto one = r.TryFirst(1, [&](int) { return zeroed({targets[i]}); });
    if (!one.ok()) return one.status();
    if (*one >= 0) base = r.current();
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::bisect
