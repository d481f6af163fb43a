// divergence (--mismatch with two backends): run the current model on
// backend B, compare every main-graph tensor as it is computed with the
// golden (reference) value, and cut at the first one beyond tolerance: try
// its producer alone (inputs fed golden values), then its cone. The same
// idea as `compare --per-layer`, run in a child so a crash is harmless.
// A session with an observer does not fuse, so a difference that only a
// fused cpu kernel makes (a NaN into Conv+Relu) agrees tensor by tensor;
// then the first diverging node is found as the end of the shortest
// interesting prefix (binary search, fused runs), and the cut tries that
// node with its producers before its cone.
#include <map>

#include "bisect/strategies.h"
#include "lib/base/status_macros.h"
#include "runner/compare/compare.h"
#include "runner/session.h"

namespace onnxkit::bisect {
namespace {

std::string FirstDiverging(Reducer& r) {
  const OracleOptions& o = r.oracle_options();
  const GoldenStore& golden = *r.golden();
  auto feeds = GoldenFeeds(r.current(), golden);
  if (!feeds.ok()) return "";
  ChildResult child = RunInChild(
      [&]() -> std::string {
        io::LoadedModel loaded;
        loaded.proto = r.current();
        loaded.base_dir = o.base_dir;
        std::string found;
        runner::SessionOptions so;
        so.backend = o.b_backend == runner::Backend::kReference ? o.a_backend : o.b_backend;
        so.observer = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
          if (!found.empty() || !golden.Has(value.name())) return absl::OkStatus();
          auto expected = golden.Load(value.name());
          if (!expected.ok()) return absl::OkStatus();
          std::optional<runner::Tolerance> tol;
          if ((o.atol || o.rtol) && v.is_tensor()) {
            runner::Tolerance t = runner::DefaultTolerance(v.tensor().dtype());
            if (o.atol) t.atol = *o.atol;
            if (o.rtol) t.rtol = *o.rtol;
            tol = t;
          }
          if (!runner::CompareValues(v, *expected, tol).within_tolerance) found = value.name();
          return absl::OkStatus();
        };
        auto session = runner::Session::Create(std::move(loaded), so);
        if (session.ok()) (void)(*session)->Run(*feeds);
        return found;
      },
      o.timeout_seconds);
  return child.finished ? child.output : "";
}

}  // namespace

// The index of the node ending the shortest interesting prefix of the
// current model (made current), or -1.
absl::StatusOr<int> FirstDivergingNode(Reducer& r) {
  int lo = 1, hi = r.nodes();  // [0, hi) is interesting
  while (lo < hi && !r.OutOfBudget()) {
    int mid = lo + (hi - lo) / 2;
    auto got = r.TryFirst(1, [&](int) {
      std::vector<int> prefix;
      for (int i = 0; i < mid; ++i) prefix.push_back(i);
      return r.WithNodes(prefix);
    });
    if (!got.ok()) return got.status();
    if (*got == 0) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi >= 1 && hi <= r.nodes() ? hi - 1 : -1;
}

absl::Status CutAtDivergence(Reducer& r) {
  const OracleOptions& o = r.oracle_options();
  if (o.kind != OracleKind::kMismatch || !o.reference_dir.empty() || r.golden() == nullptr || r.nodes() < 2) {
    return absl::OkStatus();
  }
  std::string name = FirstDiverging(r);
  std::vector<std::vector<int>> tries;
  if (name.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(int last, FirstDivergingNode(r));
    if (last < 0 || r.nodes() < 2) return absl::OkStatus();
    const pb::GraphProto& g = *r.current().graph;
    std::vector<int> with_producers = {last};
    for (const std::string& in : NodeReads(g.node[static_cast<size_t>(last)])) {
      for (int i = 0; i < last; ++i) {
        for (const auto& out : g.node[static_cast<size_t>(i)].output) {
          if (out == in) with_producers.push_back(i);
        }
      }
    }
    tries.push_back({last});
    if (with_producers.size() > 1) tries.push_back(with_producers);
    for (const auto& out : g.node[static_cast<size_t>(last)].output) {
      if (!out.empty()) name = out;
    }
    if (name.empty()) return r.TryFirst(static_cast<int>(tries.size()), [&](int i) {
      return r.WithNodes(tries[static_cast<size_t>(i)]);
    }).status();
  }
  const pb::GraphProto& g = *r.current().graph;
  if (tries.empty()) {
    for (size_t i = 0; i < g.node.size(); ++i) {
      for (const auto& out : g.node[i].output) {
        if (out == name) tries.push_back({static_cast<int>(i)});
      }
    }
  }
  std::vector<int> cone = ConeOf(g, {name});
  if (static_cast<int>(cone.size()) < r.nodes()) tries.push_back(cone);
  return r.TryFirst(static_cast<int>(tries.size()), [&](int i) { return r.WithNodes(tries[static_cast<size_t>(i)]); })
      .status();
}

}  // namespace onnxkit::bisect
